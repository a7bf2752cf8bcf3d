/*
 * vrmhelperdtest: virt-rdmad, its peers and the qemu hook, on one host
 *
 * Every test starts its own daemons (virt-rdmad processes) in their own
 * directories with their own configuration, a FAKE engine
 * (tests/helper/vrmfakeengine.c) and a fake sysfs; libvirt is its test
 * driver (test:///default: a domain "test" that runs and does not
 * migrate). Where a source helper must offer, this program plays it: a
 * FAKE source peer on the helpers' real TLS channel (vrmFakeSource*),
 * driven by the test's main loop while the hook runs. The daemon, the
 * fake source and the hook's runner are the scaffolding shared with the
 * load generator: vrmhelperfixture.{c,h}.
 *
 * Adversarial cases (issue 13) run as root with a second local user
 * (daemon, a member of the access group) and a third (nobody, not one).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>
#include <linux/capability.h>

#include <glib/gstdio.h>

#include "vrmhelperfixture.h"
#include "vrmdomainxml.h"
#include "vrmerror.h"
#include "vrmlimits.h"
#include "vrmtestmain.h"
#include "vrmtestutils.h"

#define TEST_DOMAIN_UUID "6695eb01-f6a4-8304-79aa-97f2502e193f"  /* test:///default's "test" */
#define OTHER_UUID "7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b"

/* Every token a helper made, and whether @text holds one */
static bool
containsToken(Helper *h, const char *text)
{
    g_autoptr(GDir) d = g_dir_open(h->tokens, 0, NULL);
    const char *name;

    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(h->tokens, name, NULL);
        g_autofree char *tok = NULL;

        if (g_file_get_contents(path, &tok, NULL, NULL) &&
            strstr(text, g_strstrip(tok)))
            return true;
    }
    return false;
}

/* No file of the helper's state directory holds a token */
static void
assertNoTokenInState(Helper *h)
{
    g_autoptr(GDir) d = g_dir_open(h->state, 0, NULL);
    const char *name;

    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(h->state, name, NULL);
        g_autofree char *data = NULL;

        if (g_file_get_contents(path, &data, NULL, NULL) && containsToken(h, data))
            g_error("%s holds a token", path);
    }
}


/* What the helper has logged so far */
static char *
helperLog(Helper *h)
{
    g_autofree char *logPath = g_strdup_printf("%s/helper.log", h->dir);
    char *log = NULL;

    g_assert_true(g_file_get_contents(logPath, &log, NULL, NULL));
    return log;
}

/* A destination helper, not started yet (cases tune it first), and a FAKE
 * source peer acting @mode for OTHER_UUID, the domain's XML pointing at
 * it: the set-up most incoming cases share */
typedef struct {
    Helper *h;
    char *key;
    char *path;                 /* what the source offers */
    vrmFakeSource *fs;
    char *xml;
} Incoming;

static void
incomingInit(Incoming *in, Helper *h, vrmFakeSourceMode mode)
{
    in->h = h;
    in->key = g_build_filename(h->dir, "cluster.key", NULL);
    /* only an offer names a socket the destination must listen on */
    in->path = mode == FAKE_SOURCE_OFFER ? domainPath(h, OTHER_UUID) : g_strdup("/x");
    in->fs = vrmFakeSourceNew(in->key, mode, in->path);
    in->xml = domainXML(OTHER_UUID, in->fs->port, NULL);
}

/* A new source of the same offer (the last one is done), and its XML */
static void
incomingReoffer(Incoming *in)
{
    vrmFakeSourceFree(in->fs);
    in->fs = vrmFakeSourceNew(in->key, FAKE_SOURCE_OFFER, in->path);
    g_free(in->xml);
    in->xml = domainXML(OTHER_UUID, in->fs->port, NULL);
}

static void
incomingClear(Incoming *in)
{
    g_clear_pointer(&in->fs, vrmFakeSourceFree);
    g_clear_pointer(&in->h, helperFree);
    g_clear_pointer(&in->key, g_free);
    g_clear_pointer(&in->path, g_free);
    g_clear_pointer(&in->xml, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Incoming, incomingClear);

/* ---- tests ---------------------------------------------------------------- */

static void
testListEmpty(void)
{
    Helper *h = helperNew(NULL, NULL);
    g_autoptr(vrmControlMessage) reply = NULL;

    helperStart(h);
    reply = helperCall(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpint(reply->status, ==, VRM_REPLY_OK);
    g_assert_cmpuint(reply->jobs->len, ==, 0);
    helperFree(h);
}

/* The whole destination side: the hook's request, the TLS channel to the
 * source, its offer, the policy, the engine, the answer, the locator */
static void
testIncomingAccepted(void)
{
    g_auto(Incoming) in = { 0 };
    Helper *h;
    vrmFakeSource *fs;
    const char *path;
    g_auto(HookResult) r = { 0 };
    g_autoptr(vrmControlMessage) list = NULL;
    g_autoptr(vrmMigrationDef) def = NULL;
    g_autofree char *log = NULL;
    g_autofree char *dir = NULL;
    const vrmJobRecord *job;
    struct stat st;

    incomingInit(&in, helperNew(NULL, NULL), FAKE_SOURCE_OFFER);
    h = in.h;
    fs = in.fs;
    path = in.path;
    dir = g_path_get_dirname(path);
    /* an old offer in the XML: it must leave */
    g_free(in.xml);
    in.xml = domainXML(OTHER_UUID, fs->port, "<offer version='1' capabilities='0x1' token='00000000000000000000000000000000'><endpoint address='192.0.2.1' port='1'/><channels count='1'/><chunk size='65536'/><ring depth='2'/><bandwidth max='0'/></offer>");
    helperStart(h);
    runHook(h, in.xml, &r);
    g_test_message("hook stderr: %s", r.err);
    g_assert_true(WIFEXITED(r.status));
    g_assert_cmpint(WEXITSTATUS(r.status), ==, 0);
    /* the domain's XML leaves with this host's locator, the old offer gone */
    g_assert_cmpint(vrmDomainXMLGetMigration(r.out, &def), ==, 1);
    g_assert_nonnull(def->locator);
    g_assert_cmpstr(def->locator->host, ==, "localhost");
    g_assert_cmpuint(def->locator->port, ==, h->peerPort);
    g_assert_null(def->offer);
    g_assert_null(def->answer);
    g_assert_true(def->params.capsOn & VRM_CAP_PIN_ALL);
    g_assert_false(containsToken(h, r.out));
    /* what the source heard */
    g_assert_nonnull(fs->request);
    g_assert_cmpstr(fs->request->domainUUID, ==, OTHER_UUID);
    g_assert_cmpuint(fs->request->maxChannels, ==, 9);
    g_assert_cmpuint(fs->request->requester->port, ==, h->peerPort);
    g_assert_nonnull(fs->answer);
    g_assert_cmpint(fs->answer->status, ==, VRM_ANSWER_ACCEPTED);
    g_assert_cmpuint(fs->answer->channels, ==, 9);
    /* the engine, the directory QEMU will listen in, the record */
    g_assert_true(g_file_get_contents(h->log, &log, NULL, NULL));
    g_assert_nonnull(strstr(log, "--role destination"));
    g_assert_nonnull(strstr(log, "--connect 127.0.0.1:18599"));
    g_assert_nonnull(strstr(log, path));
    if (geteuid() == 0) {
        /* root's helper: the engine as the engine user, its limit exact */
        g_autofree char *uid = g_strdup_printf("uid=%u ", getpwnam("nobody")->pw_uid);

        g_test_message("engine: %s", log);
        g_assert_nonnull(strstr(log, uid));
        const char *ml = strstr(log, "memlock=");
        g_autofree char *pinned = NULL;
        g_autofree char *limit = NULL;

        /* 9 channels of depth 2, chunks of 64 KiB: the allowance, and the
         * limit the kernel needs for it (a page more per region) */
        g_assert_nonnull(ml);
        pinned = g_strdup_printf("--max-pinned %llu ", vrmPinnedBytes(9, 2, 65536));
        g_assert_nonnull(strstr(log, pinned));
        limit = g_strdup_printf("memlock=%llu\n", vrmMemlockBytes(9, 2, 65536, sysconf(_SC_PAGESIZE)));
        g_assert_nonnull(strstr(ml, limit));
    }
    g_assert_cmpint(stat(dir, &st), ==, 0);
    g_assert_true(S_ISDIR(st.st_mode));
    list = helperCall(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpuint(list->jobs->len, ==, 1);
    job = g_ptr_array_index(list->jobs, 0);
    g_assert_cmpint(job->role, ==, VRM_JOB_ROLE_DESTINATION);
    g_assert_cmpint(job->state, ==, VRM_JOB_STATE_CONNECTED);
    g_assert_cmpstr(job->socketPath, ==, path);
    g_assert_nonnull(job->migration->offer);
    g_assert_false(job->migration->offer->hasToken);
    assertNoTokenInState(h);
}

/* The fake engines' log stayed empty: none was started */
static void
assertNoEngineStarted(Helper *h)
{
    g_autofree char *log = NULL;

    g_assert_true(g_file_get_contents(h->log, &log, NULL, NULL));
    g_assert_cmpstr(log, ==, "");
}

/* The hook exited @code with no XML and left nothing behind: no engine,
 * no directory (refused, or gone over TCP alike) */
static void
assertHookLeftNothing(Helper *h, const HookResult *r, int code)
{
    g_autofree char *qemu = g_strdup_printf("%s/qemu", h->run);
    g_autoptr(GDir) d = NULL;

    g_test_message("hook: %s", r->err);
    g_assert_true(WIFEXITED(r->status));
    g_assert_cmpint(WEXITSTATUS(r->status), ==, code);
    g_assert_cmpstr(r->out, ==, "");
    assertNoEngineStarted(h);
    if ((d = g_dir_open(qemu, 0, NULL)))
        g_assert_null(g_dir_read_name(d));
}

/* One line from the hook, nothing left behind: no engine, no directory */
static void
assertHookRefused(Helper *h, const HookResult *r, const char *want)
{
    assertHookLeftNothing(h, r, 1);
    g_assert_true(g_str_has_prefix(r->err, "virt-rdma: "));
    g_assert_nonnull(strchr(r->err, '\n'));
    g_assert_cmpstr(strchr(r->err, '\n'), ==, "\n");
    if (!strstr(r->err, want))
        g_error("'%s' does not contain '%s'", r->err, want);
}

/* The hook of a destination helper asks a real source helper, of the
 * same cluster key (@sameKey) or of another, for the domain "test" (there
 * libvirt's test driver runs it, and it does not migrate): refused with
 * @want, and the source logs @srcWant. The source, still running, for
 * the caller's further checks */
static Helper *
hookRefusedBySource(bool sameKey, const char *want, const char *srcWant)
{
    Helper *src = helperNew(NULL, NULL);
    g_autofree char *key = g_build_filename(src->dir, "cluster.key", NULL);
    Helper *dst = helperNew(sameKey ? key : NULL, NULL);
    g_autofree char *xml = domainXML(TEST_DOMAIN_UUID, src->peerPort, NULL);
    g_auto(HookResult) r = { 0 };
    g_autofree char *srcLog = NULL;

    helperStart(src);
    helperStart(dst);
    runHook(dst, xml, &r);
    assertHookRefused(dst, &r, want);
    srcLog = helperLog(src);
    g_assert_nonnull(strstr(srcLog, srcWant));
    helperFree(dst);
    return src;
}

/* A real source helper asked for a domain that runs there (libvirt's test
 * driver) but does not migrate: refused, logged, no engine anywhere */
static void
testSourceNotMigrating(void)
{
    Helper *src = hookRefusedBySource(true, "refused: the domain 'test' runs on localhost but is not migrating out of it",
                                      "refused the request of the peer helper at 127.0.0.1:");
    g_autoptr(vrmControlMessage) list = NULL;

    assertNoEngineStarted(src);
    list = helperCall(src, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpuint(list->jobs->len, ==, 0);
    helperFree(src);
}

typedef struct {
    vrmPeerMessage *reply;
    bool failed;
} PeerReply;

static void
peerReplyReady(vrmPeerConn *pc, gpointer opaque)
{
    g_autoptr(vrmPeerMessage) req = vrmPeerMessageNew(VRM_PEER_MIGRATION_REQUEST);

    req->domainName = g_strdup("test");
    req->domainUUID = g_strdup(TEST_DOMAIN_UUID);
    req->requester = vrmLocatorNew("dst.example.org", "127.0.0.1", 16530);
    req->maxChannels = 4;
    req->recoveryOf = 7;
    g_assert_cmpint(vrmPeerConnSend(pc, req), ==, 0);
    vrmPeerConnExpect(pc, 10);
}

static void
peerReplyMessage(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque)
{
    PeerReply *pr = opaque;

    vrmPeerMessageFree(pr->reply);
    pr->reply = msg;
}

static void
peerReplyFailed(vrmPeerConn *pc, gpointer opaque)
{
    ((PeerReply *)opaque)->failed = true;
}

static const vrmPeerConnCallbacks peerReplyCallbacks = {
    .ready = peerReplyReady,
    .message = peerReplyMessage,
    .failed = peerReplyFailed,
};

/* The credentials of a peer holding @src's cluster key */
static vrmPeerCreds *
peerCredsOf(Helper *src)
{
    g_autofree char *key = g_build_filename(src->dir, "cluster.key", NULL);
    g_autoptr(vrmHelperConfig) conf = vrmHelperConfigNew();
    vrmPeerCreds *creds = NULL;

    g_free(conf->peerKeyFile);
    conf->peerKeyFile = g_strdup(key);
    conf->peerAuth = VRM_PEER_AUTH_PSK;
    g_assert_cmpint(vrmPeerCredsLoad(conf, &creds), ==, 0);
    return creds;
}

/* The request of peerReplyReady, with @creds, to the helper at @to: its
 * reply; NULL if the connection failed or none came in 20 s */
static vrmPeerMessage *
peerRequest(vrmPeerCreds *creds, vrmLocator *to)
{
    PeerReply pr = { 0 };
    gint64 deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
    vrmPeerConn *pc = vrmPeerConnConnect(creds, to, 5, &peerReplyCallbacks, &pr);

    g_assert_nonnull(pc);
    while (!pr.reply && !pr.failed && g_get_monotonic_time() < deadline)
        g_main_context_iteration(NULL, TRUE);
    vrmPeerConnFree(pc);
    return pr.reply;
}

/* A peer asks a real source helper to recover the post-copy migration of
 * a domain that runs there and has no migration at all: refused at once
 * (no waiting for a break that is not there), no engine, no job */
static void
testRecoveryRefused(void)
{
    Helper *src = helperNew(NULL, NULL);
    g_autoptr(vrmPeerCreds) creds = NULL;
    g_autoptr(vrmLocator) to = NULL;
    g_autoptr(vrmControlMessage) list = NULL;
    vrmPeerMessage *reply;
    gint64 start;

    helperStart(src);
    creds = peerCredsOf(src);
    to = vrmLocatorNew("localhost", "127.0.0.1", src->peerPort);
    start = g_get_monotonic_time();
    reply = peerRequest(creds, to);
    g_assert_nonnull(reply);
    g_assert_cmpint(reply->type, ==, VRM_PEER_MIGRATION_RESULT);
    g_assert_cmpint(reply->errorCode, ==, VRM_ERR_POLICY);
    g_assert_cmpstr(reply->errorMessage, ==,
                    "the domain 'test' on localhost is not paused in a post-copy migration that failed: nothing to recover");
    g_assert_cmpint(g_get_monotonic_time() - start, <, 5 * G_USEC_PER_SEC);
    assertNoEngineStarted(src);
    list = helperCall(src, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpuint(list->jobs->len, ==, 0);
    vrmPeerMessageFree(reply);
    helperFree(src);
}

/* A holder of the cluster key that names another host's helper (127.0.0.1)
 * while it connects from its own address (127.0.0.2) is refused before
 * libvirt is even asked (issue 33 item 1); the same request from the
 * address it names gets the usual answer */
static void
testImpersonation(void)
{
    Helper *src = helperNew(NULL, NULL);
    g_autoptr(vrmPeerCreds) creds = NULL;
    g_autoptr(vrmLocator) to = NULL;
    g_autofree char *log = NULL;
    const char *const sources[] = { "127.0.0.2", "127.0.0.1" };
    size_t i;

    helperStart(src);
    creds = peerCredsOf(src);
    to = vrmLocatorNew("localhost", "127.0.0.1", src->peerPort);
    for (i = 0; i < G_N_ELEMENTS(sources); i++) {
        g_autoptr(vrmPeerMessage) reply = NULL;

        vrmPeerCredsSetSource(creds, sources[i]);
        reply = peerRequest(creds, to);
        g_assert_nonnull(reply);
        g_test_message("from %s: %s", sources[i], reply->errorMessage);
        g_assert_cmpint(reply->type, ==, VRM_PEER_MIGRATION_RESULT);
        if (i == 0) {
            g_assert_cmpint(reply->errorCode, ==, VRM_ERR_AUTH);
            g_assert_cmpstr(reply->errorMessage, ==,
                            "the request names the helper at 127.0.0.1 but comes from 127.0.0.2: a helper may ask only as itself");
        } else {
            /* past that check: libvirt's facts decide (no recovery to do) */
            g_assert_cmpint(reply->errorCode, ==, VRM_ERR_POLICY);
        }
    }
    assertNoEngineStarted(src);
    log = helperLog(src);
    g_assert_nonnull(strstr(log, "a helper may ask only as itself"));
    helperFree(src);
}

static void
testWrongKey(void)
{
    /* the destination has a key of its own */
    helperFree(hookRefusedBySource(false, "the TLS handshake with the virt-rdma helper at 127.0.0.1:",
                                   "uses another cluster key"));
}

/* Refused with no source helper to talk to: the hook's one line */
typedef struct {
    const char *name;
    bool started;               /* the destination's helper runs */
    bool locator;               /* the domain names a source (nobody listens
                                 * there); false: it carries no locator */
    const char *want;
    const char *also;           /* in the line too; NULL: nothing more */
} RefusedCase;

static const RefusedCase refusedCases[] = {
    { "source-down", true, true, "cannot reach the virt-rdma helper at 127.0.0.1:",
      "Connection refused (is virt-rdmad running there" },
    { "dest-down", false, true,
      "virt-rdma: the virt-rdma helper (virt-rdmad) is not running on this host: cannot connect to ",
      NULL },
    { "no-locator", true, false, "carries no virt-rdma locator", NULL },
};

static void
testRefused(gconstpointer data)
{
    const RefusedCase *rc = data;
    Helper *dst = helperNew(NULL, NULL);
    g_autofree char *xml = rc->locator ? domainXML(TEST_DOMAIN_UUID, freePort(), NULL) :
                                         domainXML(OTHER_UUID, 0, NULL);
    g_auto(HookResult) r = { 0 };

    if (rc->started)
        helperStart(dst);
    runHook(dst, xml, &r);
    assertHookRefused(dst, &r, rc->want);
    if (rc->also)
        g_assert_nonnull(strstr(r.err, rc->also));
    helperFree(dst);
}

static void
testSourceRefuses(void)
{
    g_auto(Incoming) in = { 0 };
    g_auto(HookResult) r = { 0 };
    g_autoptr(vrmControlMessage) list = NULL;

    incomingInit(&in, helperNew(NULL, NULL), FAKE_SOURCE_REFUSE);
    helperStart(in.h);
    runHook(in.h, in.xml, &r);
    assertHookRefused(in.h, &r, "virt-rdmad on the source host (127.0.0.1:");
    g_assert_nonnull(strstr(r.err, "refused: fake refusal"));
    list = helperCall(in.h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpuint(list->jobs->len, ==, 1);
    g_assert_cmpint(((vrmJobRecord *)g_ptr_array_index(list->jobs, 0))->state, ==,
                    VRM_JOB_STATE_FAILED);
}

/* A peer that skips a turn (a result ok where the offer belongs: the
 * negotiation's table says what each phase waits for) fails the job with
 * "out of turn", and nothing starts */
static void
testSourceOutOfTurn(void)
{
    g_auto(Incoming) in = { 0 };
    g_auto(HookResult) r = { 0 };

    incomingInit(&in, helperNew(NULL, NULL), FAKE_SOURCE_OUT_OF_TURN);
    helperStart(in.h);
    runHook(in.h, in.xml, &r);
    assertHookRefused(in.h, &r, "the source host's virt-rdmad sent a message out of turn");
    assertNoEngineStarted(in.h);
}

/* The host's pinned-memory budget across jobs: the second job does not fit
 * beside the first and is refused with a line naming the setting, and no
 * second engine starts (issue 13 item 4); a job larger than the whole
 * budget is refused by the policy */
#define THIRD_UUID "0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b"
static void
testBudgetRefused(void)
{
    g_auto(Incoming) in = { 0 };
    g_auto(Incoming) small = { 0 };
    g_autofree char *path2 = NULL;
    vrmFakeSource *fs2 = NULL;
    g_autofree char *xml2 = NULL;
    g_autofree char *log = NULL;
    g_auto(HookResult) r1 = { 0 };
    g_auto(HookResult) r2 = { 0 };
    g_auto(HookResult) r3 = { 0 };
    g_auto(GStrv) lines = NULL;

    incomingInit(&in, helperNew(NULL, "[limits]\nmax-pinned-bytes = 8M\n"), FAKE_SOURCE_OFFER);
    path2 = domainPath(in.h, THIRD_UUID);
    helperStart(in.h);
    runHook(in.h, in.xml, &r1);
    g_assert_cmpint(WEXITSTATUS(r1.status), ==, 0);
    g_clear_pointer(&in.fs, vrmFakeSourceFree);
    fs2 = vrmFakeSourceNew(in.key, FAKE_SOURCE_OFFER, path2);
    xml2 = domainXML(THIRD_UUID, fs2->port, NULL);
    runHook(in.h, xml2, &r2);
    g_test_message("second job: %s", r2.err);
    g_assert_cmpint(WEXITSTATUS(r2.status), ==, 1);
    g_assert_nonnull(strstr(r2.err, "but this host's budget ([limits] max-pinned-bytes = 8388608) has"));
    /* one engine: the first job's */
    g_assert_true(g_file_get_contents(in.h->log, &log, NULL, NULL));
    lines = g_strsplit(log, "\n", -1);
    g_assert_cmpuint(g_strv_length(lines), ==, 2);
    vrmFakeSourceFree(fs2);
    incomingClear(&in);

    incomingInit(&small, helperNew(NULL, "[limits]\nmax-pinned-bytes = 1M\n"), FAKE_SOURCE_OFFER);
    helperStart(small.h);
    runHook(small.h, small.xml, &r3);
    assertHookRefused(small.h, &r3, "limit 'pinned-bytes' exceeded: asked for");
}

static void
testSourceSilent(void)
{
    g_auto(Incoming) in = { 0 };
    g_auto(HookResult) r = { 0 };
    gint64 start;

    incomingInit(&in, helperNew(NULL, NULL), FAKE_SOURCE_SILENT);
    start = g_get_monotonic_time();
    helperStart(in.h);
    runHook(in.h, in.xml, &r);
    assertHookRefused(in.h, &r, "did not answer in time");
    /* the peer timeout (3 s) + the source's own time (15 s) at most */
    g_assert_cmpint(g_get_monotonic_time() - start, <, 25 * G_USEC_PER_SEC);
}

static void
testNotRdma(void)
{
    Helper *h = helperNew(NULL, NULL);
    g_auto(HookResult) r = { 0 };
    g_auto(HookResult) other = { 0 };

    /* no helper needed: the hook does not ask it */
    runHook(h, "<domain><name>x</name><uuid>" OTHER_UUID "</uuid></domain>", &r);
    g_assert_cmpint(WEXITSTATUS(r.status), ==, 0);
    g_assert_cmpstr(r.out, ==, "");
    g_assert_cmpstr(r.err, ==, "");
    runHookWith(h->conf, "not even XML", "start", &other);
    g_assert_cmpint(WEXITSTATUS(other.status), ==, 0);
    g_assert_cmpstr(other.out, ==, "");
    helperFree(h);
}

/* ---- [migration] fallback = tcp, the default (issue 32) ---- */

/* The hook let libvirt go on untouched: exit 0, no XML, one warning line
 * naming the cause; no engine, no directory */
static void
assertHookOverTcp(Helper *h, const HookResult *r, const char *want)
{
    assertHookLeftNothing(h, r, 0);
    if (!want)
        return;
    if (!strstr(r->err, "migrates in over TCP, not RDMA ([migration] fallback = tcp): ") ||
        !strstr(r->err, want))
        g_error("'%s' does not say over TCP, or '%s'", r->err, want);
}

/* virt-rdma ARGS... (NULL-terminated) against @h; its standard output */
static char *
runCli(Helper *h, int *status, ...)
{
    g_autofree char *cli = g_build_filename(testEnv("VRM_BUILD_DIR"), "tools", "cli",
                                            "virt-rdma", NULL);
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_auto(GStrv) e = g_environ_setenv(g_get_environ(), VRM_HELPER_SOCKET_ENV, h->sock, TRUE);
    const char *arg;
    char *out = NULL;
    va_list ap;

    g_ptr_array_add(argv, cli);
    va_start(ap, status);
    while ((arg = va_arg(ap, const char *)))
        g_ptr_array_add(argv, (char *)arg);
    va_end(ap);
    g_ptr_array_add(argv, NULL);
    e = g_environ_setenv(e, "LC_ALL", "C", TRUE);
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, e, G_SPAWN_STDERR_TO_DEV_NULL,
                               NULL, NULL, &out, NULL, status, NULL));
    return out;
}

/* `virt-rdma jobs` shows the finished job @id with --all only, in both
 * forms */
static void
assertJobsCli(Helper *h, unsigned long long id, const char *want)
{
    g_autofree char *running = NULL;
    g_autofree char *all = NULL;
    g_autofree char *none = NULL;
    g_autofree char *json = NULL;
    g_autofree char *row = g_strdup_printf(" %llu    web1     in          -      over-tcp   -       -        over TCP: ", id);
    g_autofree char *obj = g_strdup_printf("{\"format-version\":1,\"jobs\":[{\"id\":%llu,\"domain\":\"web1\",", id);
    int status;

    running = runCli(h, &status, "jobs", NULL);
    g_test_message("virt-rdma jobs:\n%s", running);
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    /* the heading and the rule only: nothing runs */
    g_assert_cmpstr(strchr(strchr(running, '\n') + 1, '\n'), ==, "\n");
    all = runCli(h, &status, "jobs", "--all", NULL);
    g_test_message("virt-rdma jobs --all:\n%s", all);
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_true(g_str_has_prefix(all, " Id   Domain   Direction   Peer   State      Bytes   Mbit/s   Cause\n---"));
    g_assert_nonnull(strstr(all, row));
    g_assert_nonnull(strstr(all, want));
    none = runCli(h, &status, "jobs", "--json", NULL);
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_cmpstr(none, ==, "{\"format-version\":1,\"jobs\":[]}\n");
    vrmTestAssertJSONValid("jobs", none);
    json = runCli(h, &status, "jobs", "--all", "--json", NULL);
    g_test_message("virt-rdma jobs --all --json: %s", json);
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_true(g_str_has_prefix(json, obj));
    g_assert_nonnull(strstr(json, "\"direction\":\"in\",\"peer\":null,\"state\":\"over-tcp\",\"final\":true,"));
    g_assert_nonnull(strstr(json, "\"reason\":{\"code\":\""));
    g_assert_nonnull(strstr(json, "\"message\":\"over TCP: "));
    vrmTestAssertJSONValid("jobs", json);
}

/* The helper's one job: over TCP, with the cause; and its log's warning */
static void
assertRecordOverTcp(Helper *h, const char *want)
{
    g_autoptr(vrmControlMessage) list = helperCall(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_autofree char *log = NULL;
    const vrmJobRecord *job;

    g_assert_cmpuint(list->jobs->len, ==, 1);
    job = g_ptr_array_index(list->jobs, 0);
    g_test_message("job %llu: %s: %s", job->id, vrmJobStateTypeToString(job->state), job->error);
    g_assert_cmpint(job->state, ==, VRM_JOB_STATE_OVER_TCP);
    g_assert_cmpint(job->role, ==, VRM_JOB_ROLE_DESTINATION);
    g_assert_true(g_str_has_prefix(job->error, "over TCP: "));
    g_assert_nonnull(strstr(job->error, want));
    log = helperLog(h);
    g_assert_nonnull(strstr(log, "migrates in over TCP, not RDMA ([migration] fallback = tcp): "));
    assertJobsCli(h, job->id, want);
}

/* The helper here is down: libvirt goes on, and the hook says why */
static void
testFallbackHelperDown(void)
{
    Helper *dst = helperNewFallback(NULL, NULL, NULL);
    g_autofree char *xml = domainXML(TEST_DOMAIN_UUID, freePort(), NULL);
    g_auto(HookResult) r = { 0 };

    runHook(dst, xml, &r);
    assertHookOverTcp(dst, &r, "the virt-rdma helper (virt-rdmad) is not running on this host");
    g_assert_cmpstr(strchr(r.err, '\n'), ==, "\n");
    helperFree(dst);
}

/* What Prometheus' parser reads in the metrics file (vrmmetricsparse.py's
 * lines) */
static char *
metricsParse(const char *path)
{
    g_autofree char *script = g_build_filename(testEnv("VRM_SOURCE_DIR"), "tests", "helper",
                                               "vrmmetricsparse.py", NULL);
    const char *argv[] = { "/usr/bin/python3", script, path, NULL };
    g_autofree char *err = NULL;
    char *out = NULL;
    int status = 0;

    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               &out, &err, &status, NULL));
    if (!g_spawn_check_wait_status(status, NULL))
        g_error("the Prometheus parser refused %s: %s", path, err);
    return out;
}

static char *
metricsSample(const char *name, const char *label, const char *value,
              const char *label2, const char *value2, unsigned long long n)
{
    GString *buf = g_string_new(NULL);
    const char *s;

    g_string_append_printf(buf, "sample %s", name);
    if (label) {
        g_string_append_printf(buf, " %s=", label);
        for (s = value; *s; s++)
            g_string_append_printf(buf, "%02x", (unsigned char)*s);
    }
    if (label2) {
        g_string_append_printf(buf, " %s=", label2);
        for (s = value2; *s; s++)
            g_string_append_printf(buf, "%02x", (unsigned char)*s);
    }
    g_string_append_printf(buf, " %llu\n", n);
    return g_string_free(buf, FALSE);
}

static void
assertMetric(const char *parsed, char *sample)
{
    g_autofree char *want = sample;

    if (!strstr(parsed, want))
        g_error("the metrics lack '%s':\n%s", want, parsed);
}

/* The directory goes away: two more jobs end, one warning, and the helper
 * serves on */
static void
metricsAfterLoss(Helper *dst)
{
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dst->metricsDir);
    g_autofree char *logPath = g_strdup_printf("%s/helper.log", dst->dir);
    g_autofree char *log = NULL;
    g_autoptr(vrmControlMessage) list = NULL;
    const char *warning = "the metrics for node-exporter are not up to date: cannot open the metrics directory";
    const char *first;
    int i;

    g_assert_cmpint(system(cmd), ==, 0);
    for (i = 0; i < 2; i++) {
        g_autofree char *xml = domainXML(TEST_DOMAIN_UUID, freePort(), NULL);
        g_auto(HookResult) r = { 0 };

        runHook(dst, xml, &r);
        assertHookOverTcp(dst, &r, NULL);
    }
    list = helperCall(dst, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpuint(list->jobs->len, ==, 3);
    g_assert_true(g_file_get_contents(logPath, &log, NULL, NULL));
    if (!(first = strstr(log, warning)))
        g_error("no warning in %s", logPath);
    g_assert_null(strstr(first + 1, warning));
}

/* The helper writes the metrics file when it starts (counters at 0) and
 * when a job ends: an incoming migration gone over TCP counts as a job
 * ended over-tcp and as a fallback by the code of its cause */
static void
testMetrics(void)
{
    Helper *dst = helperNewFallback(NULL, NULL, NULL);
    g_autofree char *xml = domainXML(TEST_DOMAIN_UUID, freePort(), NULL);
    g_autofree char *file = NULL;
    g_autofree char *parsed = NULL;
    g_autofree char *text = NULL;
    g_autofree char *key = NULL;
    g_auto(HookResult) r = { 0 };
    struct stat st;

    dst->metricsDir = g_strdup_printf("%s/node-exporter", dst->dir);
    file = g_strdup_printf("%s/virt_rdma.prom", dst->metricsDir);
    key = g_build_filename(dst->dir, "cluster.key", NULL);
    g_assert_cmpint(g_mkdir(dst->metricsDir, 0755), ==, 0);
    helperWriteConfig(dst, key, "[limits]\nmax-pinned-bytes = 512M\n");
    /* written as the helper comes up */
    helperStart(dst);
    g_assert_cmpint(stat(file, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, 0644);
    parsed = metricsParse(file);
    g_test_message("at start:\n%s", parsed);
    assertMetric(parsed, metricsSample("virt_rdma_jobs_finished_total", "direction", "in",
                                       "outcome", "over-tcp", 0));
    assertMetric(parsed, metricsSample("virt_rdma_fallbacks_total", "cause", "peer",
                                       NULL, NULL, 0));
    assertMetric(parsed, metricsSample("virt_rdma_pinned_budget_bytes", NULL, NULL,
                                       NULL, NULL, 512ULL << 20));
    assertMetric(parsed, metricsSample("virt_rdma_jobs_running", "direction", "in",
                                       NULL, NULL, 0));
    g_clear_pointer(&parsed, g_free);

    runHook(dst, xml, &r);
    assertHookOverTcp(dst, &r, NULL);
    assertRecordOverTcp(dst, "cannot reach the virt-rdma helper at 127.0.0.1:");
    parsed = metricsParse(file);
    g_test_message("after the fallback:\n%s", parsed);
    assertMetric(parsed, metricsSample("virt_rdma_jobs_finished_total", "direction", "in",
                                       "outcome", "over-tcp", 1));
    assertMetric(parsed, metricsSample("virt_rdma_jobs_finished_total", "direction", "in",
                                       "outcome", "failed", 0));
    assertMetric(parsed, metricsSample("virt_rdma_fallbacks_total", "cause", "peer",
                                       NULL, NULL, 1));
    assertMetric(parsed, metricsSample("virt_rdma_jobs_running", "direction", "in",
                                       NULL, NULL, 0));
    assertMetric(parsed, metricsSample("virt_rdma_pinned_bytes", NULL, NULL,
                                       NULL, NULL, 0));
    /* per-host totals only: nothing of the domain */
    g_assert_true(g_file_get_contents(file, &text, NULL, NULL));
    g_assert_null(strstr(text, TEST_DOMAIN_UUID));
    g_assert_null(strstr(text, "test\""));
    metricsAfterLoss(dst);
    helperFree(dst);
}

/* No directory, no file, no complaint: metrics are off */
static void
testMetricsNoDir(void)
{
    Helper *h = helperNew(NULL, NULL);
    g_autofree char *log = NULL;
    g_autofree char *key = g_build_filename(h->dir, "cluster.key", NULL);

    h->metricsDir = g_strdup_printf("%s/node-exporter", h->dir);
    helperWriteConfig(h, key, NULL);
    helperStart(h);
    g_assert_false(g_file_test(h->metricsDir, G_FILE_TEST_EXISTS));
    log = helperLog(h);
    g_assert_nonnull(strstr(log, "metrics for node-exporter are off: there is no directory"));
    g_assert_null(strstr(log, "metrics for node-exporter are not up to date"));
    helperFree(h);
}

/* Causes RDMA owns, under fallback = tcp: the destination's helper
 * records the job over TCP, with the cause, and the hook lets libvirt on */
typedef enum {
    FALLBACK_SOURCE_DOWN,       /* nobody listens at the locator */
    FALLBACK_SOURCE_REFUSES,    /* the source's helper says no */
    FALLBACK_NO_LOCATOR,        /* the domain carries none */
} FallbackCause;

typedef struct {
    const char *name;
    FallbackCause cause;
    const char *want;           /* in the record's error */
} FallbackCase;

static const FallbackCase fallbackCases[] = {
    { "fallback-source-down", FALLBACK_SOURCE_DOWN,
      "cannot reach the virt-rdma helper at 127.0.0.1:" },
    { "fallback-source-refuses", FALLBACK_SOURCE_REFUSES, "refused: fake refusal" },
    { "fallback-no-locator", FALLBACK_NO_LOCATOR, "carries no virt-rdma locator" },
};

static void
testFallback(gconstpointer data)
{
    const FallbackCase *fc = data;
    Helper *h = helperNewFallback(NULL, NULL, NULL);
    g_autofree char *key = g_build_filename(h->dir, "cluster.key", NULL);
    vrmFakeSource *fs = NULL;
    g_autofree char *xml = NULL;
    g_auto(HookResult) r = { 0 };

    switch (fc->cause) {
    case FALLBACK_SOURCE_DOWN:
        xml = domainXML(TEST_DOMAIN_UUID, freePort(), NULL);
        break;
    case FALLBACK_SOURCE_REFUSES:
        fs = vrmFakeSourceNew(key, FAKE_SOURCE_REFUSE, "/x");
        xml = domainXML(OTHER_UUID, fs->port, NULL);
        break;
    case FALLBACK_NO_LOCATOR:
        xml = domainXML(OTHER_UUID, 0, NULL);
        break;
    }
    helperStart(h);
    runHook(h, xml, &r);
    assertHookOverTcp(h, &r, NULL);
    assertRecordOverTcp(h, fc->want);
    if (fs)
        vrmFakeSourceFree(fs);
    helperFree(h);
}

/* What is not RDMA's to give up stays refused under fallback = tcp: a
 * second migration of a domain whose job runs, and a configuration that
 * says refuse (the same source down as above) */
static void
testFallbackNotForEverything(void)
{
    g_auto(Incoming) in = { 0 };
    g_autofree char *down = NULL;
    g_auto(HookResult) r1 = { 0 };
    g_auto(HookResult) r2 = { 0 };
    g_auto(HookResult) r3 = { 0 };
    Helper *strict;

    incomingInit(&in, helperNewFallback(NULL, NULL, NULL), FAKE_SOURCE_OFFER);
    down = domainXML(TEST_DOMAIN_UUID, freePort(), NULL);
    helperStart(in.h);
    runHook(in.h, in.xml, &r1);
    g_assert_cmpint(WEXITSTATUS(r1.status), ==, 0);
    g_assert_nonnull(strstr(r1.out, "<locator"));
    runHook(in.h, in.xml, &r2);
    g_test_message("second: %s", r2.err);
    g_assert_cmpint(WEXITSTATUS(r2.status), ==, 1);
    g_assert_cmpstr(r2.out, ==, "");
    g_assert_nonnull(strstr(r2.err, "a migration job of the domain 'web1' already runs on this host (job 1)"));
    incomingClear(&in);

    strict = helperNewFallback(NULL, NULL, "refuse");
    helperStart(strict);
    runHook(strict, down, &r3);
    assertHookRefused(strict, &r3, "cannot reach the virt-rdma helper at 127.0.0.1:");
    helperFree(strict);
}

static char *callAs(Helper *h, const char *user, vrmControlMessage *req);

/* Lines of a log file above debug level (the tests run --debug) */
static guint
logLines(const char *path)
{
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    guint n = 0;
    guint i;

    if (!g_file_get_contents(path, &text, NULL, NULL))
        return 0;
    lines = g_strsplit(text, "\n", -1);
    for (i = 0; lines[i]; i++)
        n += *lines[i] && !strstr(lines[i], "] debug: ");
    return n;
}

/*
 * Floods cost a few log lines, and nobody's text reaches the log raw
 * (issue 13 finding 9): 200 peers that speak garbage with terminal escapes
 * and newlines, 20 wrong-key handshakes, and (as root) 300 refused
 * requests of a group member (user daemon) for a job that is not its own.
 */
static void
testLogFlood(void)
{
    Helper *h = helperNew(NULL, NULL);
    g_autofree char *logPath = g_strdup_printf("%s/helper.log", h->dir);
    g_autofree char *other = testKey(h->dir, "other.key");
    g_autofree char *log = NULL;
    static const char garbage[] = "\x1b[31mvirt-rdmad: error: forged\n\x16\x03\x01 junk\r\n";
    struct sockaddr_in sa = { .sin_family = AF_INET };
    guint before;
    guint i;

    helperStart(h);
    before = logLines(logPath);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(h->peerPort);
    for (i = 0; i < 200; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        char buf[256];

        g_assert_cmpint(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
        g_assert_cmpint(write(fd, garbage, sizeof(garbage) - 1), ==, sizeof(garbage) - 1);
        shutdown(fd, SHUT_WR);
        while (read(fd, buf, sizeof(buf)) > 0)
            ;
        close(fd);
    }
    for (i = 0; i < 20; i++) {
        g_autofree char *port = g_strdup_printf("%u", h->peerPort);
        const char *argv[] = { testEnv("VRM_HELPERCTL_PATH"), "peer-request", other,
                               "127.0.0.1", port, "web1", TEST_DOMAIN_UUID, NULL };
        int status;

        g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL,
                                   G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                                   NULL, NULL, NULL, NULL, &status, NULL));
        g_assert_false(g_spawn_check_wait_status(status, NULL));
    }
    if (geteuid() == 0) {
        for (i = 0; i < 300; i++) {
            vrmControlMessage *req = vrmControlMessageNew(VRM_CONTROL_JOB_CANCEL);

            req->hasId = true;
            req->id = 99;
            g_free(callAs(h, "daemon", req));
        }
    }
    g_assert_true(g_file_get_contents(logPath, &log, NULL, NULL));
    g_test_message("%u log lines above debug for 220 bad peers and 300 refused requests",
                   logLines(logPath) - before);
    g_assert_cmpuint(logLines(logPath) - before, <=, 16);
    g_assert_null(strchr(log, '\x1b'));
    g_assert_null(strstr(log, "\nvirt-rdmad: error: forged"));
    helperFree(h);
}

/*
 * A stalled stats listener (the fake engine listens and never accepts)
 * holds only its own probe: a client is served at once meanwhile, and the
 * hook ends at the connect deadline with one line (issue 13 finding 3).
 * "At once" is judged on nine calls in ten, not the slowest: a helper
 * that blocked on the probe would keep most calls waiting, while a busy
 * machine (a sandbox beside the unit suite) delays only a few.
 */
static gint
compareTimes(gconstpointer a, gconstpointer b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;

    return x < y ? -1 : x > y;
}

static void
testStalledEngine(void)
{
    g_auto(Incoming) in = { 0 };
    Helper *h;
    g_autoptr(GArray) times = g_array_new(FALSE, FALSE, sizeof(gint64));
    gint64 p90, worst;
    int out, er, status;
    g_autofree char *hookErr = NULL;
    GPid pid;

    incomingInit(&in, helperNew(NULL, NULL), FAKE_SOURCE_OFFER);
    h = in.h;
    g_free(h->mode);
    h->mode = g_strdup("stall");
    helperStart(h);
    pid = hookSpawn(h->conf, in.xml, NULL, &out, &er);
    while (waitpid(pid, &status, WNOHANG) == 0) {
        gint64 t0 = g_get_monotonic_time();
        g_autoptr(vrmControlMessage) list = NULL;
        gint64 took;

        g_main_context_iteration(NULL, FALSE);
        list = helperCall(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
        took = g_get_monotonic_time() - t0;
        g_array_append_val(times, took);
        g_usleep(50000);
    }
    hookErr = readAll(er);
    close(out);
    g_assert_cmpuint(times->len, >, 10);
    g_array_sort(times, compareTimes);
    p90 = g_array_index(times, gint64, times->len * 9 / 10);
    worst = g_array_index(times, gint64, times->len - 1);
    g_test_message("%u clients served while the engine stalled, nine in ten within %lld ms, the slowest in %lld ms; hook: %s",
                   times->len, (long long)(p90 / 1000), (long long)(worst / 1000), hookErr);
    g_assert_cmpint(p90, <, 500 * 1000);
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_nonnull(strstr(hookErr, "could not connect to the source engine"));
}

/* The engine fails during the negotiation: the hook names its reason, from
 * its stats record (not its log) */
static void
testEngineFails(void)
{
    g_auto(Incoming) in = { 0 };
    g_auto(HookResult) r = { 0 };

    incomingInit(&in, helperNew(NULL, NULL), FAKE_SOURCE_OFFER);
    g_free(in.h->mode);
    in.h->mode = g_strdup("fail");
    helperStart(in.h);
    runHook(in.h, in.xml, &r);
    g_test_message("hook: %s", r.err);
    g_assert_cmpint(WEXITSTATUS(r.status), ==, 1);
    g_assert_nonnull(strstr(r.err, "fake failure"));
}

/* A field of /proc/self/status ("CapInh:" ...), as a number */
static guint64
capField(const char *status, const char *name)
{
    const char *line = strstr(status, name);

    g_assert_nonnull(line);
    return g_ascii_strtoull(line + strlen(name), NULL, 16);
}

/* Can the daemon this test starts be kept from raising its locked-memory
 * limit (Helper.memlockMax)? Not if CAP_SYS_RESOURCE survives its exec:
 * ambient, or as root inheritable, or in a bounding set this process may
 * not drop it from (no CAP_SETPCAP) */
static bool
memlockCanBeCapped(void)
{
    g_autofree char *status = NULL;
    guint64 res = 1ULL << CAP_SYS_RESOURCE;

    g_assert_true(g_file_get_contents("/proc/self/status", &status, NULL, NULL));
    if (capField(status, "CapAmb:") & res)
        return false;
    if (geteuid() != 0)
        return true;
    return !(capField(status, "CapInh:") & res) &&
        (!(capField(status, "CapBnd:") & res) ||
         (capField(status, "CapEff:") & (1ULL << CAP_SETPCAP)));
}

/*
 * The engine's set-up fails between fork and exec (issue 34 item 4): the
 * daemon may not raise the locked-memory limit to the job's allowance
 * (its own is 64 KiB, without CAP_SYS_RESOURCE). The job fails with the
 * set-up's reason, and the hook, the source's helper, the job's record
 * and `virt-rdma jobs` all name it; no engine ran, nothing is left.
 */
static void
testEngineSetupFails(void)
{
    g_auto(Incoming) in = { 0 };
    Helper *h;
    vrmFakeSource *fs;
    /* 9 channels of depth 2, chunks of 64 KiB: as the kernel counts it */
    g_autofree char *want =
        g_strdup_printf("cannot start the transport engine: setting its locked-memory limit to %llu bytes (the job's allowance) failed: Operation not permitted; raise virt-rdmad's own limit (LimitMEMLOCK= in its unit)",
                        vrmMemlockBytes(9, 2, 65536, sysconf(_SC_PAGESIZE)));
    g_auto(HookResult) r = { 0 };
    g_autoptr(vrmControlMessage) list = NULL;
    g_autofree char *json = NULL;
    const vrmJobRecord *job;
    gint64 deadline;
    int status;

    incomingInit(&in, helperNew(NULL, NULL), FAKE_SOURCE_OFFER);
    h = in.h;
    fs = in.fs;
    if (!memlockCanBeCapped()) {
        g_test_skip("CAP_SYS_RESOURCE cannot be taken from the daemon here");
        return;
    }
    h->memlockMax = 64 * 1024;
    helperStart(h);
    runHook(h, in.xml, &r);
    assertHookRefused(h, &r, want);
    /* the source's helper heard the same reason */
    deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    while (!fs->resultError && g_get_monotonic_time() < deadline) {
        g_main_context_iteration(NULL, FALSE);
        g_usleep(5000);
    }
    g_assert_nonnull(fs->resultError);
    g_test_message("source heard %d: %s", fs->resultCode, fs->resultError);
    g_assert_nonnull(strstr(fs->resultError, want));
    g_assert_cmpint(fs->resultCode, ==, VRM_ERR_RESOURCE);
    list = helperCall(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpuint(list->jobs->len, ==, 1);
    job = g_ptr_array_index(list->jobs, 0);
    g_test_message("job %llu: %s: %s", job->id, vrmJobStateTypeToString(job->state), job->error);
    g_assert_cmpint(job->state, ==, VRM_JOB_STATE_FAILED);
    g_assert_cmpstr(job->error, ==, want);
    /* the record names the cause the source heard */
    g_assert_cmpint(job->errorCode, ==, VRM_ERR_RESOURCE);
    json = runCli(h, &status, "jobs", "--all", "--json", NULL);
    g_test_message("virt-rdma jobs --all --json: %s", json);
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_nonnull(strstr(json, "\"state\":\"failed\",\"final\":true,"));
    g_assert_nonnull(strstr(json, "\"reason\":{\"code\":\"resource\",\"message\":\"cannot start the transport engine: setting its locked-memory limit to "));
    vrmTestAssertJSONValid("jobs", json);
}

/* The state directory cannot take the job's record (issue 14, row 9: a
 * full disk; here a directory where the record's file must go): the job
 * is refused before any engine starts, with the record named; the next
 * job, whose record can be written, is accepted */
static void
testRecordUnwritable(void)
{
    g_auto(Incoming) in = { 0 };
    g_autofree char *blocker = NULL;
    g_auto(HookResult) r1 = { 0 };
    g_auto(HookResult) r2 = { 0 };

    incomingInit(&in, helperNew(NULL, NULL), FAKE_SOURCE_OFFER);
    blocker = g_build_filename(in.h->state, "job-1.xml", NULL);
    g_assert_cmpint(g_mkdir_with_parents(blocker, 0700), ==, 0);
    helperStart(in.h);
    runHook(in.h, in.xml, &r1);
    assertHookRefused(in.h, &r1, "cannot write the job record");
    g_assert_nonnull(strstr(r1.err, "job-1.xml"));

    g_assert_cmpint(rmdir(blocker), ==, 0);
    incomingReoffer(&in);
    runHook(in.h, in.xml, &r2);
    g_test_message("second job: %s", r2.err);
    g_assert_cmpint(WEXITSTATUS(r2.status), ==, 0);
}

/* A job in flight, then the helper restarts: it follows its own engine
 * again; a pid that is not its engine (another program) is left alone
 * (issue 13 finding 10) */
static void
testRestart(void)
{
    g_auto(Incoming) in = { 0 };
    Helper *h;
    g_autofree char *runPath = NULL;
    g_auto(HookResult) r = { 0 };
    g_autoptr(vrmControlMessage) q = NULL;
    g_autoptr(vrmControlMessage) q2 = NULL;
    g_autoptr(GKeyFile) kf = g_key_file_new();
    const char *sleeper[] = { "/bin/sleep", "30", NULL };
    GPid impostor;
    gint64 enginePid;

    incomingInit(&in, helperNew(NULL, NULL), FAKE_SOURCE_OFFER);
    h = in.h;
    runPath = g_strdup_printf("%s/job-1.run", h->state);
    helperStart(h);
    runHook(h, in.xml, &r);
    g_assert_cmpint(WEXITSTATUS(r.status), ==, 0);
    helperStop(h);
    g_assert_true(g_key_file_load_from_file(kf, runPath, 0, NULL));
    enginePid = g_key_file_get_int64(kf, "engine", "pid", NULL);
    g_assert_cmpint(kill(enginePid, 0), ==, 0);
    helperStart(h);
    q = helperCall(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpuint(q->jobs->len, ==, 1);
    g_assert_cmpint(((vrmJobRecord *)g_ptr_array_index(q->jobs, 0))->state, ==,
                    VRM_JOB_STATE_CONNECTED);
    g_assert_cmpint(kill(enginePid, 0), ==, 0);

    /* a pid of another program in the record: not followed, not killed */
    helperStop(h);
    g_assert_true(g_spawn_async(NULL, (char **)sleeper, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                NULL, NULL, &impostor, NULL));
    g_key_file_set_int64(kf, "engine", "pid", impostor);
    g_assert_true(g_key_file_save_to_file(kf, runPath, NULL));
    kill(enginePid, SIGKILL);
    helperStart(h);
    q2 = helperCall(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpint(((vrmJobRecord *)g_ptr_array_index(q2->jobs, 0))->state, ==,
                    VRM_JOB_STATE_FAILED);
    g_assert_cmpint(kill(impostor, 0), ==, 0);
    kill(impostor, SIGKILL);
    waitpid(impostor, NULL, 0);
}

/* In a child as @user: send @req to @h, return the reply's XML text */
static char *
callAs(Helper *h, const char *user, vrmControlMessage *req)
{
    struct passwd *pw = getpwnam(user);
    int pipefd[2];
    pid_t pid;
    g_autofree char *text = NULL;
    int status;

    g_assert_nonnull(pw);
    g_assert_cmpint(pipe(pipefd), ==, 0);
    if ((pid = fork()) == 0) {
        g_autoptr(vrmControlMessage) reply = NULL;
        g_autofree char *xml = NULL;
        ssize_t w;

        close(pipefd[0]);
        if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
            setuid(pw->pw_uid) < 0)
            _exit(3);
        reply = vrmHelperClientCall(h->sock, req, 10000);
        xml = reply ? vrmControlMessageFormat(reply) :
            g_strdup_printf("NO REPLY: %s", vrmGetLastErrorMessage());
        w = write(pipefd[1], xml, strlen(xml));
        _exit(w > 0 ? 0 : 4);
    }
    close(pipefd[1]);
    text = readAll(pipefd[0]);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    vrmControlMessageFree(req);
    return g_steal_pointer(&text);
}

/*
 * Issue 13 finding 2: a member of the access group saw every job (with
 * its token) and could cancel any. Now a member sees and controls only
 * what it opened; root sees all; a non-member is refused; no reply holds
 * a token. Root only (a second and third local user).
 */
static void
testVisibility(void)
{
    g_auto(Incoming) in = { 0 };
    Helper *h;
    g_auto(HookResult) r = { 0 };
    g_autofree char *memberList = NULL;
    g_autofree char *memberQuery = NULL;
    g_autofree char *memberCancel = NULL;
    g_autofree char *memberPrepare = NULL;
    g_autofree char *memberOwn = NULL;
    g_autofree char *outsider = NULL;
    g_autoptr(vrmControlMessage) rootList = NULL;
    g_autoptr(vrmControlMessage) rootPrepare = NULL;
    vrmControlMessage *req;

    if (geteuid() != 0) {
        g_test_skip("needs root (CI runs the unit tests as root)");
        return;
    }
    incomingInit(&in, helperNew(NULL, NULL), FAKE_SOURCE_OFFER);
    h = in.h;
    helperStart(h);
    /* root's job (a plain virsh migration arriving) */
    runHook(h, in.xml, &r);
    g_assert_cmpint(WEXITSTATUS(r.status), ==, 0);

    memberList = callAs(h, "daemon", vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpstr(memberList, ==, "<reply status=\"ok\"/>\n");
    req = vrmControlMessageNew(VRM_CONTROL_JOB_QUERY);
    req->hasId = true;
    req->id = 1;
    memberQuery = callAs(h, "daemon", req);
    g_assert_nonnull(strstr(memberQuery, "there is no migration job 1 of yours on this host"));
    req = vrmControlMessageNew(VRM_CONTROL_JOB_CANCEL);
    req->hasId = true;
    req->id = 1;
    memberCancel = callAs(h, "daemon", req);
    g_assert_nonnull(strstr(memberCancel, "there is no migration job 1 of yours"));
    /* its own intent, it may see */
    req = vrmControlMessageNew(VRM_CONTROL_JOB_PREPARE);
    req->domainName = g_strdup("web2");
    req->domainUUID = g_strdup(TEST_DOMAIN_UUID);
    memberPrepare = callAs(h, "daemon", req);
    g_assert_nonnull(strstr(memberPrepare, "<intent id=\"1\" state=\"pending\""));
    req = vrmControlMessageNew(VRM_CONTROL_JOB_CANCEL);
    req->hasIntent = true;
    req->intent = 1;
    memberOwn = callAs(h, "daemon", req);
    g_assert_nonnull(strstr(memberOwn, "state=\"cancelled\""));
    /* cancelled intents free their slots at once: a thousand and more
     * registered and withdrawn leave room for anybody's next (issue 33
     * item 4; the cap is 1024) */
    {
        unsigned int i;

        for (i = 0; i < 1100; i++) {
            g_autoptr(vrmControlMessage) prep = vrmControlMessageNew(VRM_CONTROL_JOB_PREPARE);
            g_autoptr(vrmControlMessage) got = NULL;
            g_autoptr(vrmControlMessage) cancel = vrmControlMessageNew(VRM_CONTROL_JOB_CANCEL);
            g_autoptr(vrmControlMessage) gone = NULL;

            prep->domainName = g_strdup("web2");
            prep->domainUUID = g_strdup(TEST_DOMAIN_UUID);
            got = vrmHelperClientCall(h->sock, prep, 10000);
            if (!got || vrmHelperReplyCheck(got) < 0)
                g_error("intent %u refused: %s", i, vrmGetLastErrorMessage());
            cancel->hasIntent = true;
            cancel->intent = got->intentRecord->id;
            gone = vrmHelperClientCall(h->sock, cancel, 10000);
            g_assert_nonnull(gone);
            g_assert_cmpint(vrmHelperReplyCheck(gone), ==, 0);
        }
    }
    /* nobody is not in the group: the socket's mode stops it first */
    outsider = callAs(h, "nobody", vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_test_message("nobody: %s", outsider);
    g_assert_nonnull(strstr(outsider, "NO REPLY: you may not use the virt-rdma helper"));

    rootList = helperCall(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpuint(rootList->jobs->len, ==, 1);
    {
        g_autofree char *text = vrmControlMessageFormat(rootList);

        g_assert_false(containsToken(h, text));
    }
    /* a member who may not migrate through libvirt prepares nothing
     * (issue 33 item 4): the same helper, its libvirt group now root's,
     * which user daemon is not in */
    {
        g_autofree char *conf = NULL;
        g_autofree char *from = g_strdup_printf("libvirt-group = %s\n",
                                                getgrgid(getpwnam("daemon")->pw_gid)->gr_name);
        g_autofree char *refused = NULL;

        helperStop(h);
        g_assert_true(g_file_get_contents(h->conf, &conf, NULL, NULL));
        g_assert_nonnull(strstr(conf, from));
        {
            g_auto(GStrv) parts = g_strsplit(conf, from, 2);
            g_autofree char *joined = g_strjoinv("libvirt-group = root\n", parts);

            g_assert_true(g_file_set_contents(h->conf, joined, -1, NULL));
        }
        helperStart(h);
        req = vrmControlMessageNew(VRM_CONTROL_JOB_PREPARE);
        req->domainName = g_strdup("web2");
        req->domainUUID = g_strdup(TEST_DOMAIN_UUID);
        refused = callAs(h, "daemon", req);
        g_test_message("a member outside libvirt's group: %s", refused);
        g_assert_nonnull(strstr(refused, "<error code=\"auth\">user "));
        g_assert_nonnull(strstr(refused, " may not prepare migrations on this host: only root and members of the group 'root' ([access] libvirt-group)"));
        /* root still may */
        req = vrmControlMessageNew(VRM_CONTROL_JOB_PREPARE);
        req->domainName = g_strdup("web2");
        req->domainUUID = g_strdup(TEST_DOMAIN_UUID);
        rootPrepare = helperCall(h, req);
        g_assert_cmpint(rootPrepare->status, ==, VRM_REPLY_OK);
    }
}

/*
 * Issue 13 finding 1, the client's side: whoever serves the control
 * socket must be root (or the client itself). An impostor (user daemon)
 * listening where the hook looks gets nothing, and the hook says why.
 */
static void
testImpostorSocket(void)
{
    Helper *h;
    struct passwd *pw = getpwnam("daemon");
    g_autofree char *xml = NULL;
    g_autofree char *got = NULL;
    g_auto(HookResult) r = { 0 };
    int pipefd[2];
    pid_t pid;

    if (geteuid() != 0) {
        g_test_skip("needs root (CI runs the unit tests as root)");
        return;
    }
    /* the default fallback (tcp): an impostor is never a reason to go on */
    h = helperNewFallback(NULL, NULL, NULL);
    xml = domainXML(OTHER_UUID, 1, NULL);
    g_assert_cmpint(g_mkdir_with_parents(h->run, 0777), ==, 0);
    g_chmod(h->run, 0777);
    g_assert_cmpint(pipe(pipefd), ==, 0);
    if ((pid = fork()) == 0) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char buf[65536];
        ssize_t n = 0, total = 0;
        int fd, c;

        close(pipefd[0]);
        if (setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0)
            _exit(3);
        g_strlcpy(sa.sun_path, h->sock, sizeof(sa.sun_path));
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0)
            _exit(4);
        if (write(pipefd[1], "L", 1) != 1)
            _exit(5);
        c = accept(fd, NULL, NULL);
        while ((n = read(c, buf, sizeof(buf))) > 0)
            total += n;
        /* tell the test how much the client sent */
        g_snprintf(buf, sizeof(buf), "%zd", total);
        if (write(pipefd[1], buf, strlen(buf)) < 0)
            _exit(6);
        _exit(0);
    }
    close(pipefd[1]);
    {
        char c;

        g_assert_cmpint(read(pipefd[0], &c, 1), ==, 1);
    }
    runHook(h, xml, &r);
    got = readAll(pipefd[0]);
    waitpid(pid, NULL, 0);
    g_test_message("hook: %s; the impostor got %s bytes", r.err, got);
    g_assert_cmpint(WEXITSTATUS(r.status), ==, 1);
    g_assert_nonnull(strstr(r.err, "is served by user"));
    g_assert_nonnull(strstr(r.err, "refusing to talk to it"));
    g_assert_cmpstr(got, ==, "0");
    helperFree(h);
}

static void
testHostInfo(void)
{
    Helper *h = helperNew(NULL, "[limits]\nmax-pinned-bytes = 512M\n");
    g_autoptr(vrmControlMessage) reply = NULL;
    const vrmHostInfo *i;

    helperStart(h);
    reply = helperCall(h, vrmControlMessageNew(VRM_CONTROL_HOST_INFO));
    g_assert_cmpint(reply->status, ==, VRM_REPLY_OK);
    g_assert_nonnull((i = reply->hostInfo));
    g_assert_cmpuint(i->budget, ==, 512u * 1024 * 1024);
    g_assert_cmpuint(i->maxChannels, ==, 9);
    g_assert_cmpuint(i->pinnedOneChannel, ==, vrmPinnedBytes(1, VRM_RING_DEPTH_DEFAULT,
                                                             VRM_CHUNK_SIZE_DEFAULT));
    g_assert_cmpstr(i->peerAuth, ==, "psk");
    g_assert_cmpint(i->peerStatus, ==, VRM_HOST_INFO_STATUS_OK);
    g_assert_nonnull(i->locator);
    g_assert_cmpuint(i->locator->port, ==, h->peerPort);
    g_assert_cmpuint(i->devices->len, ==, 1);
    g_assert_cmpstr(((vrmHostInfoDevice *)g_ptr_array_index(i->devices, 0))->state, ==, "ACTIVE");
    g_assert_cmpstr(i->libvirtURI, ==, "test:///default");
    helperFree(h);
}

/* `virt-rdma capabilities [--json]`: the helper's own view (its budget,
 * its memlock limit), and "not running" told apart from "not allowed" */
static char *
runCaps(Helper *h, const char *user, bool json, int *status)
{
    g_autofree char *cli = g_build_filename(testEnv("VRM_BUILD_DIR"), "tools", "cli",
                                            "virt-rdma", NULL);
    g_autofree char *reuid = g_strdup_printf("--reuid=%s", user ? user : "root");
    const char *argv[] = { "setpriv", reuid, "--regid=nogroup", "--clear-groups",
                           cli, "capabilities", json ? "--json" : NULL, NULL };
    g_auto(GStrv) e = g_environ_setenv(g_get_environ(), VRM_HELPER_SOCKET_ENV, h->sock, TRUE);
    char *out = NULL;

    e = g_environ_setenv(e, "LC_ALL", "C", TRUE);
    g_assert_true(g_spawn_sync(NULL, (char **)(user ? argv : argv + 4), e,
                               G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                               NULL, NULL, &out, NULL, status, NULL));
    return out;
}

static vrmControlMessage *
peerCheck(Helper *h, const char *host, const char *address)
{
    vrmControlMessage *req = vrmControlMessageNew(VRM_CONTROL_PEER_CHECK);

    req->peerHost = g_strdup(host);
    req->peerAddress = g_strdup(address);
    return helperCall(h, req);
}

/*
 * virt-rdma capabilities --peer (issue 35 item 5): the helper makes the
 * TLS handshake a negotiation would, on the configured port, and the peer
 * makes it back (a reach check): with a helper of the same key it works;
 * one of another key, or nobody there, is a reason with the cause; a
 * helper that the peer cannot reach back (its locator's port closed, as a
 * firewall would) is told so; a member of the access group may not ask
 * (the host would open connections for it).
 */
static void
testPeerCheck(void)
{
    Helper *h = helperNew(NULL, NULL);
    Helper *other = helperNew(NULL, NULL);
    g_autofree char *hKey = g_build_filename(h->dir, "cluster.key", NULL);
    /* h's key and port; it listens on 127.0.0.5 and names 127.0.0.6 as
     * its locator, where nothing listens: it reaches h, h cannot reach it */
    Helper *walled = helperNew(hKey, NULL);
    g_autofree char *text = NULL;
    g_autofree char *from = NULL;
    g_autofree char *to = NULL;
    g_autofree char *cli = g_build_filename(testEnv("VRM_BUILD_DIR"), "tools", "cli",
                                            "virt-rdma", NULL);
    g_auto(GStrv) e = g_environ_setenv(g_get_environ(), VRM_HELPER_SOCKET_ENV, h->sock, TRUE);
    const char *argv[] = { cli, "capabilities", "--peer", "127.0.0.1", NULL };
    g_autofree char *out = NULL;
    int status = 0;
    vrmControlMessage *reply;
    size_t i;

    /* the other helper: its own cluster key, on 127.0.0.2 and h's port */
    g_assert_true(g_file_get_contents(other->conf, &text, NULL, NULL));
    from = g_strdup_printf("address = 127.0.0.1\nport = %u\n", other->peerPort);
    to = g_strdup_printf("address = 127.0.0.2\nport = %u\n", h->peerPort);
    g_assert_nonnull(strstr(text, from));
    {
        g_auto(GStrv) parts = g_strsplit(text, from, 2);
        g_autofree char *joined = g_strjoinv(to, parts);

        g_assert_true(g_file_set_contents(other->conf, joined, -1, NULL));
    }
    helperStart(h);
    helperStart(other);
    {
        g_autofree char *conf = NULL;
        g_autofree char *at = g_strdup_printf("address = 127.0.0.1\nport = %u\n",
                                              walled->peerPort);
        g_autofree char *moved = g_strdup_printf("address = 127.0.0.6\nlisten = 127.0.0.5\nport = %u\n",
                                                 h->peerPort);

        g_assert_true(g_file_get_contents(walled->conf, &conf, NULL, NULL));
        g_assert_nonnull(strstr(conf, at));
        {
            g_auto(GStrv) parts = g_strsplit(conf, at, 2);
            g_autofree char *joined = g_strjoinv(moved, parts);

            g_assert_true(g_file_set_contents(walled->conf, joined, -1, NULL));
        }
    }
    helperStart(walled);

    /* itself: the same key; asked again and again, the checked side (h
     * itself here) logs at most its limiter's burst of reach checks */
    for (i = 0; i < 8; i++) {
        reply = peerCheck(h, "localhost", "127.0.0.1");
        g_assert_cmpint(reply->status, ==, VRM_REPLY_OK);
        vrmControlMessageFree(reply);
    }
    {
        g_autofree char *log = helperLog(h);
        g_auto(GStrv) lines = g_strsplit(log, "\n", -1);
        unsigned int reached = 0;

        for (i = 0; lines[i]; i++)
            reached += strstr(lines[i], "reach check: this helper reached 127.0.0.1:") != NULL;
        g_test_message("8 reach checks, %u lines of them in the log", reached);
        g_assert_cmpuint(reached, ==, 5);
    }
    /* another key */
    reply = peerCheck(h, "other", "127.0.0.2");
    g_test_message("another key: %s", reply->errorMessage);
    g_assert_cmpint(reply->status, ==, VRM_REPLY_ERROR);
    g_assert_nonnull(strstr(reply->errorMessage, "the TLS handshake with the virt-rdma helper at 127.0.0.2:"));
    vrmControlMessageFree(reply);
    /* nobody */
    reply = peerCheck(h, "nobody", "127.0.0.3");
    g_test_message("nobody: %s", reply->errorMessage);
    g_assert_cmpint(reply->status, ==, VRM_REPLY_ERROR);
    g_assert_nonnull(strstr(reply->errorMessage, "127.0.0.3"));
    vrmControlMessageFree(reply);
    /* walled reaches h (the same key), h cannot reach walled back */
    {
        vrmControlMessage *req = vrmControlMessageNew(VRM_CONTROL_PEER_CHECK);
        g_autofree char *want = g_strdup_printf("answers, but cannot reach this host's helper back: cannot reach the virt-rdma helper at 127.0.0.6:%u: ",
                                                h->peerPort);
        g_autofree char *advice = g_strdup_printf("; open TCP port %u to this host in its firewall",
                                                  h->peerPort);

        req->peerHost = g_strdup("localhost");
        req->peerAddress = g_strdup("127.0.0.1");
        reply = helperCall(walled, req);
        g_test_message("walled: %s", reply->errorMessage);
        g_assert_cmpint(reply->status, ==, VRM_REPLY_ERROR);
        g_assert_nonnull(strstr(reply->errorMessage, want));
        g_assert_true(g_str_has_suffix(reply->errorMessage, advice));
        vrmControlMessageFree(reply);
    }
    /* the way back black-holed: something at walled's locator takes the
     * connection and never answers (no accept, no TLS); h gives up at its
     * handshake deadline and walled's answer comes within its own wait
     * ([peers] timeout 3 + 5 s), naming the silence */
    {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(h->peerPort) };
        vrmControlMessage *req = vrmControlMessageNew(VRM_CONTROL_PEER_CHECK);
        int silent = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        gint64 t0;

        g_assert_cmpint(inet_pton(AF_INET, "127.0.0.6", &sa.sin_addr), ==, 1);
        g_assert_cmpint(silent, >=, 0);
        g_assert_cmpint(bind(silent, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
        g_assert_cmpint(listen(silent, 8), ==, 0);
        req->peerHost = g_strdup("localhost");
        req->peerAddress = g_strdup("127.0.0.1");
        t0 = g_get_monotonic_time();
        reply = helperCall(walled, req);
        g_test_message("walled, its locator silent: %s (after %lld ms)", reply->errorMessage,
                       (long long)((g_get_monotonic_time() - t0) / 1000));
        g_assert_cmpint(reply->status, ==, VRM_REPLY_ERROR);
        g_assert_nonnull(strstr(reply->errorMessage, "answers, but cannot reach this host's helper back: "));
        g_assert_nonnull(strstr(reply->errorMessage, "did not finish in time"));
        vrmControlMessageFree(reply);
        close(silent);
    }
    /* and h reaches walled both ways? No: walled's locator is closed, so
     * h's own check of walled fails at its first handshake */
    reply = peerCheck(h, "walled", "127.0.0.6");
    g_assert_cmpint(reply->status, ==, VRM_REPLY_ERROR);
    vrmControlMessageFree(reply);

    /* the command, for the operator */
    e = g_environ_setenv(e, "LC_ALL", "C", TRUE);
    g_assert_true(g_spawn_sync(NULL, (char **)argv, e, G_SPAWN_STDERR_TO_DEV_NULL,
                               NULL, NULL, &out, NULL, &status, NULL));
    g_test_message("virt-rdma capabilities --peer 127.0.0.1:\n%s", out);
    g_assert_nonnull(strstr(out, "Peer 127.0.0.1:  127.0.0.1 port reached both ways, TLS handshakes done (the same cluster key or CA)\n"));

    if (geteuid() == 0) {
        g_autofree char *member = NULL;
        vrmControlMessage *req = vrmControlMessageNew(VRM_CONTROL_PEER_CHECK);

        req->peerHost = g_strdup("localhost");
        req->peerAddress = g_strdup("127.0.0.1");
        member = callAs(h, "daemon", req);
        g_test_message("member: %s", member);
        g_assert_nonnull(strstr(member, "only root may have virt-rdmad check a peer"));
    }
    helperFree(other);
    helperFree(walled);
    helperFree(h);
}

/* The post-copy line and key follow this host's userfaultfd sysctl (the
 * test reads it the way the command should, and does not change it) */
static void
checkCapsPostcopy(const char *json, const char *text)
{
    g_autofree char *value = NULL;
    const char *line = "Post-copy:         unknown (/proc/sys/vm/unprivileged_userfaultfd cannot be read)";
    const char *key = "\"unprivileged-userfaultfd\":null,";

    if (g_file_get_contents("/proc/sys/vm/unprivileged_userfaultfd", &value, NULL, NULL)) {
        g_strstrip(value);
        if (g_str_equal(value, "0")) {
            line = "Post-copy:         only by a QEMU that runs as root (vm.unprivileged_userfaultfd = 0;";
            key = "\"unprivileged-userfaultfd\":0,";
        } else if (g_str_equal(value, "1")) {
            line = "Post-copy:         may be received (vm.unprivileged_userfaultfd = 1:";
            key = "\"unprivileged-userfaultfd\":1,";
        }
    }
    g_test_message("vm.unprivileged_userfaultfd: %s", value ? value : "(none)");
    g_assert_nonnull(strstr(text, line));
    g_assert_nonnull(strstr(json, key));
}

static void
testCapabilitiesCli(void)
{
    Helper *h = helperNew(NULL, "[limits]\nmax-pinned-bytes = 512M\n");
    g_autofree char *json = NULL;
    g_autofree char *text = NULL;
    g_autofree char *down = NULL;
    g_autofree char *outsider = NULL;
    int status;

    helperStart(h);
    json = runCaps(h, NULL, true, &status);
    g_test_message("virt-rdma capabilities --json: %s", json);
    g_assert_true(g_str_has_prefix(json, "{\"format-version\":1,"));
    g_assert_nonnull(strstr(json, "\"pinned-budget\":536870912,"));
    vrmTestAssertJSONValid("capabilities", json);
    text = runCaps(h, NULL, false, &status);
    g_test_message("virt-rdma capabilities:\n%s", text);
    g_assert_nonnull(strstr(text, "budget 512.000 MiB"));
    g_assert_nonnull(strstr(text, "Helpers' channel:  psk (cluster key "));
    checkCapsPostcopy(json, text);
    if (geteuid() == 0) {
        outsider = runCaps(h, "nobody", false, &status);
        g_test_message("as nobody:\n%s", outsider);
        g_assert_nonnull(strstr(outsider, "you may not use virt-rdmad: add yourself to its access group (adduser nobody daemon)"));
        g_assert_null(strstr(outsider, "not running"));
        g_free(outsider);
        /* the same reasons with their codes, for scripts */
        outsider = runCaps(h, "nobody", true, &status);
        g_test_message("as nobody, --json: %s", outsider);
        g_assert_nonnull(strstr(outsider, "\"helper-denied\":true,"));
        g_assert_nonnull(strstr(outsider, "\"helper\":null,\"reasons\":["));
        g_assert_nonnull(strstr(outsider, "{\"code\":\"access-denied\",\"message\":\"you may not use virt-rdmad: "));
        vrmTestAssertJSONValid("capabilities", outsider);
    }
    helperStop(h);
    down = runCaps(h, NULL, false, &status);
    g_test_message("helper down:\n%s", down);
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_nonnull(strstr(down, "not running"));
    g_free(down);
    down = runCaps(h, NULL, true, &status);
    g_test_message("helper down, --json: %s", down);
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_nonnull(strstr(down, "{\"code\":\"helper-down\",\"message\":\"virt-rdmad is not running on this host: "));
    g_assert_nonnull(strstr(down, "\"can-migrate\":false,"));
    vrmTestAssertJSONValid("capabilities", down);
    helperFree(h);
}

/* virt-rdmad --check-config of a configuration whose [peers] auth and
 * key-file are @auth and @keyFile: refused with a line holding @want, or
 * accepted (@want NULL) */
static void
checkConfigPeers(const char *auth, const char *keyFile, const char *want)
{
    Helper *h = helperNew(NULL, NULL);
    g_autofree char *text = NULL;
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_auto(GStrv) lines = NULL;
    GString *conf = g_string_new(NULL);
    int status = 0;
    const char *argv[] = { testEnv("VRM_HELPERD_PATH"), "--config", h->conf,
                           "--check-config", NULL };
    guint i;

    g_assert_true(g_file_get_contents(h->conf, &text, NULL, NULL));
    lines = g_strsplit(text, "\n", -1);
    for (i = 0; lines[i]; i++) {
        if (g_str_has_prefix(lines[i], "auth = "))
            g_string_append_printf(conf, "auth = %s\n", auth);
        else if (g_str_has_prefix(lines[i], "key-file = "))
            g_string_append_printf(conf, "key-file = %s\n", keyFile);
        else
            g_string_append_printf(conf, "%s\n", lines[i]);
    }
    g_assert_true(g_file_set_contents(h->conf, conf->str, -1, NULL));
    g_string_free(conf, TRUE);
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, 0, NULL, NULL, &out, &err,
                               &status, NULL));
    g_test_message("auth = %s, key-file = %s: exit %d: %s", auth, keyFile, WEXITSTATUS(status), err);
    if (want) {
        g_assert_cmpint(WEXITSTATUS(status), ==, 1);
        g_assert_nonnull(strstr(err, want));
    } else {
        g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    }
    helperFree(h);
}

/* --check-config refuses an access group that does not exist */
static void
testCheckConfig(void)
{
    Helper *h = helperNew(NULL, NULL);
    g_autofree char *text = NULL;
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    int status = 0;
    const char *argv[] = { testEnv("VRM_HELPERD_PATH"), "--config", h->conf,
                           "--check-config", NULL };

    g_assert_true(g_file_get_contents(h->conf, &text, NULL, NULL));
    {
        g_auto(GStrv) parts = g_strsplit(text, "[access]\ngroup = ", 2);
        g_autofree char *fixed = g_strdup_printf("%s[access]\ngroup = vrm-no-such-group\n#%s",
                                                 parts[0], parts[1]);

        g_assert_true(g_file_set_contents(h->conf, fixed, -1, NULL));
    }
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, 0, NULL, NULL, &out, &err,
                               &status, NULL));
    g_test_message("%s", err);
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_nonnull(strstr(err, "the access group 'vrm-no-such-group' ([access] group) does not exist"));
    helperFree(h);

    /* a channel the daemon would run without: a key file that is not there
     * (psk, or auto with nothing else), and auto with nothing at all */
    checkConfigPeers("psk", "/nonexistent/key", "/nonexistent/key");
    checkConfigPeers("auto", "/nonexistent/key", "the helpers' channel is off on this host: there is no cluster key at /nonexistent/key ([peers] key-file; make it on one host with 'virt-rdmad --generate-key /nonexistent/key'");
    /* ... unless it is meant: auth = none */
    checkConfigPeers("none", "/nonexistent/key", NULL);
}

/* The first version's messages are gone: the daemon says which exist */
static void
testOldMessages(void)
{
    Helper *h = helperNew(NULL, NULL);
    const char *xml = "<job-open><domain name=\"web1\"/></job-open>";
    g_autofree char *answer = NULL;
    gint64 deadline;
    int fd;

    helperStart(h);
    deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    fd = vrmHelperConnect(h->sock, deadline);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(vrmHelperFrameWrite(fd, xml, strlen(xml), deadline), ==, 0);
    answer = vrmHelperFrameRead(fd, deadline, NULL);
    close(fd);
    g_assert_nonnull(answer);
    g_test_message("%s", answer);
    g_assert_nonnull(strstr(answer, "unknown control message 'job-open'; allowed messages: 'job-incoming', 'job-prepare'"));
    helperFree(h);
}

/* Until the helper's log shows @n event subscribers (or fail) */
static void
waitSubscribers(Helper *h, unsigned int n)
{
    g_autofree char *logPath = g_strdup_printf("%s/helper.log", h->dir);
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

    while (g_get_monotonic_time() < deadline) {
        g_autofree char *log = NULL;
        unsigned int seen = 0;
        const char *p;

        if (g_file_get_contents(logPath, &log, NULL, NULL))
            for (p = log; (p = strstr(p, "subscribed to job events")); p++)
                seen++;
        if (seen >= n)
            return;
        g_usleep(20000);
    }
    g_error("fewer than %u event subscribers in time", n);
}

/* In a child as the access group's member "daemon": subscribe and count
 * the events heard within @seconds; the count on @out */
static pid_t
subscribeAsMember(Helper *h, int *out, unsigned int seconds)
{
    struct passwd *pw = getpwnam("daemon");
    int pipefd[2];
    pid_t pid;

    g_assert_nonnull(pw);
    g_assert_cmpint(pipe(pipefd), ==, 0);
    if ((pid = fork()) == 0) {
        g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_EVENTS);
        gint64 deadline = g_get_monotonic_time() + (gint64)seconds * G_USEC_PER_SEC;
        unsigned int n = 0;
        g_autofree char *text = NULL;
        int fd;

        close(pipefd[0]);
        if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
            setuid(pw->pw_uid) < 0)
            _exit(3);
        if ((fd = vrmHelperClientSubscribe(h->sock, req, 10000)) < 0) {
            text = g_strdup_printf("NO SUBSCRIPTION: %s", vrmGetLastErrorMessage());
        } else {
            vrmControlMessage *ev;

            while ((ev = vrmHelperClientNext(fd, deadline))) {
                n += ev->jobs->len;
                vrmControlMessageFree(ev);
            }
            text = g_strdup_printf("%u %s", n, vrmGetLastErrorMessage());
        }
        _exit(write(pipefd[1], text, strlen(text)) > 0 ? 0 : 4);
    }
    close(pipefd[1]);
    *out = pipefd[0];
    return pid;
}

/*
 * virt-rdma events (issue 35): a subscriber hears each change of state of
 * the jobs it may see as it happens, in order, ending with how the job
 * ended; the CLI prints them as JSON lines; a member of the access group
 * hears nothing of root's job; a subscriber that hangs up is forgotten,
 * and the subscribers are capped (half the client slots) with a clear
 * error.
 */
static void
testEvents(void)
{
    Helper *dst = helperNewFallback(NULL, "[limits]\nmax-clients = 8\n", NULL);
    g_autofree char *xml = domainXML(TEST_DOMAIN_UUID, freePort(), NULL);
    g_autofree char *cli = g_build_filename(testEnv("VRM_BUILD_DIR"), "tools", "cli",
                                            "virt-rdma", NULL);
    const char *argv[] = { cli, "events", "--loop", "--json", "--timeout", "4", NULL };
    g_auto(GStrv) e = g_environ_setenv(g_get_environ(), VRM_HELPER_SOCKET_ENV, dst->sock, TRUE);
    g_auto(HookResult) r = { 0 };
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_EVENTS);
    g_autoptr(GString) heard = g_string_new(NULL);
    g_autofree char *cliOut = NULL;
    g_autofree char *memberText = NULL;
    g_auto(GStrv) lines = NULL;
    int fds[4];
    int cliStdout = -1;
    int memberFd = -1;
    pid_t member = 0;
    GPid cliPid;
    int status;
    unsigned int subscribers = 2;
    unsigned int i;

    helperStart(dst);
    fds[0] = vrmHelperClientSubscribe(dst->sock, req, 10000);
    g_assert_cmpint(fds[0], >=, 0);
    e = g_environ_setenv(e, "LC_ALL", "C", TRUE);
    g_assert_true(g_spawn_async_with_pipes(NULL, (char **)argv, e, G_SPAWN_DO_NOT_REAP_CHILD,
                                           NULL, NULL, &cliPid, NULL, &cliStdout, NULL, NULL));
    if (geteuid() == 0) {
        member = subscribeAsMember(dst, &memberFd, 4);
        subscribers++;
    }
    waitSubscribers(dst, subscribers);

    runHook(dst, xml, &r);
    assertHookOverTcp(dst, &r, NULL);

    /* the library's subscriber: every state in order, the last final */
    for (;;) {
        g_autoptr(vrmControlMessage) ev =
            vrmHelperClientNext(fds[0], g_get_monotonic_time() + 5 * G_USEC_PER_SEC);
        const vrmJobRecord *rec;

        g_assert_nonnull(ev);
        g_assert_cmpint(ev->status, ==, VRM_REPLY_OK);
        g_assert_cmpuint(ev->jobs->len, ==, 1);
        rec = ev->jobs->pdata[0];
        g_assert_cmpstr(rec->domainName, ==, "web1");
        g_string_append_printf(heard, "%s ", vrmJobStateTypeToString(rec->state));
        if (vrmJobStateIsFinal(rec->state))
            break;
    }
    g_test_message("heard: %s", heard->str);
    g_assert_cmpstr(heard->str, ==, "negotiating over-tcp ");
    close(fds[0]);

    /* the CLI: the same, as JSON lines, until its timeout */
    cliOut = readAll(cliStdout);
    g_assert_cmpint(waitpid(cliPid, &status, 0), ==, cliPid);
    g_test_message("virt-rdma events --loop --json:\n%s", cliOut);
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_true(g_str_has_prefix(cliOut, "{\"format-version\":1,\"event\":\"job-state\",\"time\":\""));
    vrmTestAssertJSONValid("event", cliOut);
    g_assert_nonnull(strstr(cliOut, "\"job\":{\"id\":1,\"domain\":\"web1\","));
    g_assert_nonnull(strstr(cliOut, "\"state\":\"negotiating\""));
    g_assert_nonnull(strstr(cliOut, "\"state\":\"over-tcp\",\"final\":true,"));
    lines = g_strsplit(cliOut, "\n", -1);
    g_assert_cmpuint(g_strv_length(lines), ==, 3);

    if (member) {
        memberText = readAll(memberFd);
        g_assert_cmpint(waitpid(member, &status, 0), ==, member);
        g_test_message("member: %s", memberText);
        g_assert_true(g_str_has_prefix(memberText, "0 timed out"));
    }

    /* the cap: half of max-clients (8); hung-up ones no longer count */
    for (i = 0; i < G_N_ELEMENTS(fds); i++) {
        fds[i] = vrmHelperClientSubscribe(dst->sock, req, 10000);
        g_assert_cmpint(fds[i], >=, 0);
    }
    g_assert_cmpint(vrmHelperClientSubscribe(dst->sock, req, 10000), ==, -1);
    g_test_message("fifth: %s", vrmGetLastErrorMessage());
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_RESOURCE);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "too many event subscribers"));
    close(fds[3]);
    for (i = 0; i < 50; i++) {
        int fd = vrmHelperClientSubscribe(dst->sock, req, 10000);

        if (fd >= 0) {
            close(fd);
            break;
        }
        g_usleep(20000);
    }
    g_assert_cmpuint(i, <, 50);
    for (i = 0; i < 3; i++)
        close(fds[i]);
    helperFree(dst);
}

static const vrmTestFunc testFuncs[] = {
    { "/helperd/list-empty", testListEmpty },
    { "/helperd/incoming-accepted", testIncomingAccepted },
    { "/helperd/source-not-migrating", testSourceNotMigrating },
    { "/helperd/recovery-refused", testRecoveryRefused },
    { "/helperd/wrong-key", testWrongKey },
    { "/helperd/impersonation", testImpersonation },
    { "/helperd/source-refuses", testSourceRefuses },
    { "/helperd/source-out-of-turn", testSourceOutOfTurn },
    { "/helperd/source-silent", testSourceSilent },
    { "/helperd/budget-refused", testBudgetRefused },
    { "/helperd/not-rdma", testNotRdma },
    { "/helperd/fallback-helper-down", testFallbackHelperDown },
    { "/helperd/metrics", testMetrics },
    { "/helperd/metrics-no-dir", testMetricsNoDir },
    { "/helperd/fallback-not-for-everything", testFallbackNotForEverything },
    { "/helperd/events", testEvents },
    { "/helperd/log-flood", testLogFlood },
    { "/helperd/stalled-engine", testStalledEngine },
    { "/helperd/engine-fails", testEngineFails },
    { "/helperd/engine-setup-fails", testEngineSetupFails },
    { "/helperd/record-unwritable", testRecordUnwritable },
    { "/helperd/restart", testRestart },
    { "/helperd/visibility", testVisibility },
    { "/helperd/impostor-socket", testImpostorSocket },
    { "/helperd/host-info", testHostInfo },
    { "/helperd/capabilities-cli", testCapabilitiesCli },
    { "/helperd/peer-check", testPeerCheck },
    { "/helperd/check-config", testCheckConfig },
    { "/helperd/old-messages", testOldMessages },
};

/* GLib's test framework, the schemas of this tree, no SIGPIPE (a daemon
 * may hang up), and the cases of the tables */
static void
testInit(int *argc, char ***argv)
{
    g_test_init(argc, argv, NULL);
    g_setenv("VRM_SCHEMA_DIR", VRM_SOURCE_SCHEMA_DIR, FALSE);
    signal(SIGPIPE, SIG_IGN);
    VRM_TEST_ADD_CASES("/helperd/", refusedCases, testRefused);
    VRM_TEST_ADD_CASES("/helperd/", fallbackCases, testFallback);
}

VRM_TEST_MAIN(testInit, testFuncs)
