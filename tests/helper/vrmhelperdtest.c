/*
 * vrmhelperdtest: virt-rdmad and the qemu hook end to end, on one host,
 * with a FAKE engine (tests/helper/vrmfakeengine.c) and a fake sysfs.
 *
 * Every test starts its own daemon in its own directory with its own
 * configuration and engine behaviour, talks to it through the client
 * library, the hook program and vrmhelperctl, and stops it.
 */
#include <config.h>

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "vrmhelperclient.h"
#include "vrmdomainxml.h"
#include "vrmhelperjob.h"
#include "vrmerror.h"

typedef struct {
    char *dir;
    char *sock;
    char *conf;
    char *state;
    char *log;                      /* fake engine argv log */
    GPid pid;
    char *mode;                     /* VRM_FAKE_ENGINE */
} Helper;

static const char *
env(const char *name)
{
    const char *v = g_getenv(name);

    g_assert_nonnull(v);
    return v;
}

static void
helperWriteConfig(Helper *h, const char *extra)
{
    g_autofree char *text =
        g_strdup_printf("[rdma]\ndevice = rxe0\naddress = 198.18.0.1\n"
                        "cm-port-min = 18515\ncm-port-max = 18530\n"
                        "[paths]\nrun-dir = %s/run\nstate-dir = %s/state\n%s",
                        h->dir, h->dir, extra ? extra : "");

    g_assert_true(g_file_set_contents(h->conf, text, -1, NULL));
}

static Helper *
helperNew(const char *extraConf)
{
    Helper *h = g_new0(Helper, 1);
    g_autofree char *port = NULL;
    g_autofree char *state = NULL;

    h->dir = g_dir_make_tmp("vrmhelperd-XXXXXX", NULL);
    h->sock = g_strdup_printf("%s/run/virt-rdmad.sock", h->dir);
    h->conf = g_strdup_printf("%s/virt-rdmad.conf", h->dir);
    h->state = g_strdup_printf("%s/state", h->dir);
    h->log = g_strdup_printf("%s/engine.log", h->dir);
    h->mode = g_strdup("connect");
    port = g_strdup_printf("%s/sys/class/infiniband/rxe0/ports/1", h->dir);
    g_assert_cmpint(g_mkdir_with_parents(port, 0755), ==, 0);
    state = g_build_filename(port, "state", NULL);
    g_assert_true(g_file_set_contents(state, "4: ACTIVE\n", -1, NULL));
    helperWriteConfig(h, extraConf);
    return h;
}

static char **
helperEnv(Helper *h)
{
    char **e = g_get_environ();
    g_autofree char *sysfs = g_strdup_printf("%s/sys", h->dir);

    e = g_environ_setenv(e, "VRM_SYSFS_ROOT", sysfs, TRUE);
    e = g_environ_setenv(e, "VRM_FAKE_ENGINE", h->mode, TRUE);
    e = g_environ_setenv(e, "VRM_FAKE_ENGINE_LOG", h->log, TRUE);
    e = g_environ_setenv(e, VRM_HELPER_SOCKET_ENV, h->sock, TRUE);
    return e;
}

/* In the child: output to a log file, ended with the test program */
static void
helperChildSetup(gpointer opaque)
{
    const char *log = opaque;
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
}

static void
helperStart(Helper *h)
{
    g_autofree char *logPath = g_strdup_printf("%s/helper.log", h->dir);
    g_auto(GStrv) e = helperEnv(h);
    const char *argv[] = { env("VRM_HELPERD_PATH"), "--config", h->conf,
                           "--engine", env("VRM_FAKE_ENGINE_PATH"),
                           "--connect-timeout", "3", "--verbose", NULL };
    g_autoptr(GError) err = NULL;
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

    g_assert_true(g_spawn_async(NULL, (char **)argv, e, G_SPAWN_DO_NOT_REAP_CHILD,
                                helperChildSetup, logPath, &h->pid, &err));
    g_assert_no_error(err);
    /* ready when it answers */
    while (g_get_monotonic_time() < deadline) {
        g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_LIST);
        g_autoptr(vrmControlMessage) reply = NULL;

        if (g_file_test(h->sock, G_FILE_TEST_EXISTS) &&
            (reply = vrmHelperClientCall(h->sock, req, 1000)))
            return;
        g_usleep(20000);
    }
    g_error("virt-rdmad did not come up");
}

static int
waitPid(GPid pid, int seconds)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)seconds * G_USEC_PER_SEC;
    int status;

    while (g_get_monotonic_time() < deadline) {
        pid_t r = waitpid(pid, &status, WNOHANG);

        if (r == pid)
            return status;
        g_usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    g_error("process %d did not end in time", (int)pid);
    return -1;
}

static void
helperStop(Helper *h)
{
    int status;

    if (h->pid <= 0)
        return;
    kill(h->pid, SIGTERM);
    status = waitPid(h->pid, 10);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    h->pid = 0;
}

/* End the engines a stopped helper left running (as designed) */
static void
helperKillEngines(Helper *h)
{
    g_autoptr(GDir) d = g_dir_open(h->state, 0, NULL);
    const char *name;

    while (d && (name = g_dir_read_name(d))) {
        g_autoptr(GKeyFile) kf = g_key_file_new();
        g_autofree char *path = g_build_filename(h->state, name, NULL);
        gint64 pid;

        if (!g_str_has_suffix(name, ".run") ||
            !g_key_file_load_from_file(kf, path, 0, NULL))
            continue;
        if ((pid = g_key_file_get_int64(kf, "engine", "pid", NULL)) > 0)
            kill(pid, SIGKILL);
    }
}

static void
helperFree(Helper *h)
{
    g_autofree char *cmd = NULL;

    helperStop(h);
    helperKillEngines(h);
    cmd = g_strdup_printf("rm -rf '%s'", h->dir);
    g_assert_cmpint(system(cmd), ==, 0);
    g_free(h->dir);
    g_free(h->sock);
    g_free(h->conf);
    g_free(h->state);
    g_free(h->log);
    g_free(h->mode);
    g_free(h);
}

static vrmControlMessage *
call(Helper *h, vrmControlMessage *req)
{
    vrmControlMessage *reply = vrmHelperClientCall(h->sock, req, 30000);

    if (!reply)
        g_error("no reply: %s", vrmGetLastErrorMessage());
    vrmControlMessageFree(req);
    return reply;
}

static vrmControlMessage *
openJob(Helper *h, const char *domain, unsigned int channels)
{
    vrmControlMessage *req = vrmControlMessageNew(VRM_CONTROL_JOB_OPEN);

    req->domainName = g_strdup(domain);
    req->domainUUID = g_strdup("c7a5fdbd-cdaf-9455-926a-d65c16db1809");
    req->overrides = g_new0(vrmMigrationParams, 1);
    req->overrides->channels = channels;
    return call(h, req);
}

static vrmControlMessage *
acceptOffer(Helper *h, const vrmOffer *offer)
{
    vrmControlMessage *req = vrmControlMessageNew(VRM_CONTROL_JOB_ACCEPT);

    req->domainName = g_strdup("web1");
    req->migration = vrmMigrationDefNew();
    req->migration->offer = vrmOfferCopy(offer);
    return call(h, req);
}

static vrmControlMessage *
queryJob(Helper *h, unsigned long long id)
{
    vrmControlMessage *req = vrmControlMessageNew(VRM_CONTROL_JOB_QUERY);

    req->hasId = true;
    req->id = id;
    return call(h, req);
}

static const vrmJobRecord *
onlyJob(const vrmControlMessage *reply)
{
    if (reply->status != VRM_REPLY_OK)
        g_error("error reply: %s", reply->errorMessage);
    g_assert_cmpuint(reply->jobs->len, ==, 1);
    return g_ptr_array_index(reply->jobs, 0);
}

static void
assertError(const vrmControlMessage *reply, int code, const char *text)
{
    g_assert_cmpint(reply->status, ==, VRM_REPLY_ERROR);
    if (!strstr(reply->errorMessage, text))
        g_error("'%s' does not contain '%s'", reply->errorMessage, text);
    g_assert_cmpint(reply->errorCode, ==, code);
}

/* Poll the job until it reaches @state */
static vrmControlMessage *
waitState(Helper *h, unsigned long long id, vrmJobState state)
{
    gint64 deadline = g_get_monotonic_time() + 15 * G_USEC_PER_SEC;

    while (g_get_monotonic_time() < deadline) {
        vrmControlMessage *reply = queryJob(h, id);

        if (onlyJob(reply)->state == state)
            return reply;
        vrmControlMessageFree(reply);
        g_usleep(50000);
    }
    g_error("job %llu never reached %s", id, vrmJobStateTypeToString(state));
    return NULL;
}

/* ---- tests ------------------------------------------------------------ */

static void
testListEmpty(void)
{
    Helper *h = helperNew(NULL);
    g_autoptr(vrmControlMessage) reply = NULL;

    helperStart(h);
    reply = call(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpint(reply->status, ==, VRM_REPLY_OK);
    g_assert_cmpuint(reply->jobs->len, ==, 0);
    helperFree(h);
}

static void
testOpenAccept(void)
{
    Helper *h = helperNew(NULL);
    g_autoptr(vrmControlMessage) src = NULL;
    g_autoptr(vrmControlMessage) dst = NULL;
    g_autoptr(vrmControlMessage) list = NULL;
    g_autofree char *log = NULL;
    g_autofree char *prefix = NULL;
    const vrmJobRecord *s, *d;
    const vrmOffer *offer;

    helperStart(h);
    src = openJob(h, "web1", 2);
    s = onlyJob(src);
    g_assert_cmpuint(s->id, ==, 1);
    g_assert_cmpint(s->role, ==, VRM_JOB_ROLE_SOURCE);
    g_assert_cmpstr(s->domainName, ==, "web1");
    prefix = g_strdup_printf("%s/run/job-", h->dir);
    g_assert_true(g_str_has_prefix(s->socketPath, prefix));
    g_assert_true(g_str_has_suffix(s->socketPath, ".sock"));
    offer = s->migration->offer;
    g_assert_nonnull(offer);
    g_assert_cmpstr(offer->address, ==, "198.18.0.1");
    g_assert_cmpuint(offer->port, ==, 18515);
    g_assert_cmpuint(offer->channels, ==, 2);
    g_assert_cmpstr(offer->device, ==, "rxe0");

    dst = acceptOffer(h, offer);
    d = onlyJob(dst);
    g_assert_cmpuint(d->id, ==, 2);
    g_assert_cmpint(d->role, ==, VRM_JOB_ROLE_DESTINATION);
    g_assert_cmpint(d->state, ==, VRM_JOB_STATE_CONNECTED);
    /* both sides use the same path: libvirt gives QEMU the same one */
    g_assert_cmpstr(d->socketPath, ==, s->socketPath);
    g_assert_nonnull(d->migration->answer);
    g_assert_cmpint(d->migration->answer->status, ==, VRM_ANSWER_ACCEPTED);
    g_assert_cmpuint(d->migration->answer->channels, ==, 2);

    /* the engines were spawned as the design says */
    g_assert_true(g_file_get_contents(h->log, &log, NULL, NULL));
    g_assert_nonnull(strstr(log, "--role source"));
    g_assert_nonnull(strstr(log, "--listen 198.18.0.1:18515"));
    g_assert_nonnull(strstr(log, "--role destination"));
    g_assert_nonnull(strstr(log, "--connect 198.18.0.1:18515"));
    g_assert_nonnull(strstr(log, "--channels 2"));

    /* a second job gets the next port */
    list = openJob(h, "web2", 1);
    g_assert_cmpuint(onlyJob(list)->migration->offer->port, ==, 18516);
    helperFree(h);
}

static void
testRefusals(void)
{
    Helper *h = helperNew("[limits]\nmax-jobs = 2\nmax-channels = 4\n");
    g_autoptr(vrmControlMessage) a = NULL;
    g_autoptr(vrmControlMessage) b = NULL;
    g_autoptr(vrmControlMessage) c = NULL;
    g_autoptr(vrmControlMessage) v = NULL;
    g_autoptr(vrmControlMessage) p = NULL;
    g_autoptr(vrmOffer) offer = NULL;
    g_autofree char *tooNew = NULL;

    helperStart(h);
    p = openJob(h, "big", 8);
    assertError(p, VRM_ERR_POLICY, "channels");

    a = openJob(h, "web1", 1);
    offer = vrmOfferCopy(onlyJob(a)->migration->offer);
    offer->version = VRM_PROTOCOL_VERSION + 1;
    v = acceptOffer(h, offer);
    tooNew = g_strdup_printf("protocol version %d of the source is too new",
                             VRM_PROTOCOL_VERSION + 1);
    assertError(v, VRM_ERR_VERSION, tooNew);

    b = openJob(h, "web2", 1);
    onlyJob(b);
    c = openJob(h, "web3", 1);
    assertError(c, VRM_ERR_RESOURCE, "max-jobs = 2");
    helperFree(h);
}

static void
testNoDevice(void)
{
    Helper *h = helperNew(NULL);
    g_autoptr(vrmControlMessage) a = NULL;
    g_autoptr(vrmOffer) offer = vrmOfferNew();

    helperWriteConfig(h, NULL);
    {
        g_autofree char *text = NULL;
        g_autofree char *fixed = NULL;
        g_auto(GStrv) parts = NULL;

        g_assert_true(g_file_get_contents(h->conf, &text, NULL, NULL));
        parts = g_strsplit(text, "device = rxe0", -1);
        fixed = g_strjoinv("device = mlx5_9", parts);
        g_assert_true(g_file_set_contents(h->conf, fixed, -1, NULL));
    }
    helperStart(h);
    a = openJob(h, "web1", 1);
    assertError(a, VRM_ERR_NO_DEVICE, "The RDMA device 'mlx5_9' does not exist on this host.");
    offer->version = 1;
    offer->address = g_strdup("198.18.0.1");
    offer->port = 18515;
    offer->channels = 1;
    offer->chunkSize = 1048576;
    offer->ringDepth = 16;
    vrmControlMessageFree(g_steal_pointer(&a));
    a = acceptOffer(h, offer);
    assertError(a, VRM_ERR_NO_DEVICE, "mlx5_9");
    helperFree(h);
}

static void
testEngineFails(void)
{
    Helper *h = helperNew(NULL);
    g_autoptr(vrmControlMessage) a = NULL;
    g_autoptr(vrmControlMessage) q = NULL;
    const vrmJobRecord *j;

    g_free(h->mode);
    h->mode = g_strdup("fail:1500");
    helperStart(h);
    a = openJob(h, "web1", 1);
    onlyJob(a);
    q = waitState(h, 1, VRM_JOB_STATE_FAILED);
    j = onlyJob(q);
    g_assert_cmpstr(j->error, ==, "fake failure");
    g_assert_true(j->hasStats);
    g_assert_cmpuint(j->stats.chunks, ==, 3);
    helperFree(h);
}

static void
testEngineFailsAtOnce(void)
{
    Helper *h = helperNew(NULL);
    g_autoptr(vrmControlMessage) a = NULL;
    g_autoptr(vrmControlMessage) l = NULL;

    g_free(h->mode);
    h->mode = g_strdup("fail");
    helperStart(h);
    a = openJob(h, "web1", 1);
    /* the client waiting for the engine hears the engine's reason */
    assertError(a, VRM_ERR_PEER, "fake failure");
    l = queryJob(h, 1);
    g_assert_cmpint(onlyJob(l)->state, ==, VRM_JOB_STATE_FAILED);
    helperFree(h);
}

static void
testConnectTimeout(void)
{
    Helper *h = helperNew(NULL);
    g_autoptr(vrmControlMessage) a = NULL;
    g_autoptr(vrmControlMessage) d = NULL;
    g_autoptr(vrmControlMessage) q = NULL;
    gint64 t0;

    g_free(h->mode);
    h->mode = g_strdup("hang");
    helperStart(h);
    a = openJob(h, "web1", 1);
    t0 = g_get_monotonic_time();
    d = acceptOffer(h, onlyJob(a)->migration->offer);
    assertError(d, VRM_ERR_TIMEOUT,
                "the destination engine could not connect to the source engine at 198.18.0.1 port 18515 within 3 seconds");
    g_assert_cmpint(g_get_monotonic_time() - t0, <, 10 * G_USEC_PER_SEC);
    q = waitState(h, 2, VRM_JOB_STATE_FAILED);
    helperFree(h);
}

static void
testCancel(void)
{
    Helper *h = helperNew(NULL);
    g_autoptr(vrmControlMessage) a = NULL;
    g_autoptr(vrmControlMessage) c = NULL;
    g_autoptr(vrmControlMessage) c2 = NULL;
    g_autoptr(vrmControlMessage) q = NULL;
    g_autoptr(vrmControlMessage) none = NULL;
    vrmControlMessage *req;

    helperStart(h);
    a = openJob(h, "web1", 1);
    req = vrmControlMessageNew(VRM_CONTROL_JOB_CANCEL);
    req->hasId = true;
    req->id = 1;
    c = call(h, req);
    g_assert_cmpint(onlyJob(c)->state, ==, VRM_JOB_STATE_CANCELLED);
    /* the engine is reaped and the outcome stays "cancelled" */
    g_usleep(500000);
    q = queryJob(h, 1);
    g_assert_cmpint(onlyJob(q)->state, ==, VRM_JOB_STATE_CANCELLED);
    req = vrmControlMessageNew(VRM_CONTROL_JOB_CANCEL);
    req->hasId = true;
    req->id = 1;
    c2 = call(h, req);
    assertError(c2, VRM_ERR_INVALID_ARG, "has already ended (cancelled)");
    none = queryJob(h, 77);
    assertError(none, VRM_ERR_INVALID_ARG, "There is no migration job 77 on this host.");
    helperFree(h);
}

static void
testCompletedRecord(void)
{
    Helper *h = helperNew("[history]\nsize = 2\n");
    g_autoptr(vrmControlMessage) list = NULL;
    g_autofree char *rec = NULL;
    g_autofree char *path = NULL;
    const vrmJobRecord *j;
    int i;

    g_free(h->mode);
    h->mode = g_strdup("complete:200");
    helperStart(h);
    for (i = 1; i <= 4; i++) {
        g_autoptr(vrmControlMessage) a = openJob(h, "web1", 1);
        g_autoptr(vrmControlMessage) q = waitState(h, onlyJob(a)->id, VRM_JOB_STATE_COMPLETED);

        j = onlyJob(q);
        g_assert_true(j->hasStats);
        g_assert_cmpuint(j->stats.bytesReceived, ==, 17);
        g_assert_cmpuint(j->stats.mbps, ==, 8);
        g_assert_cmpuint(j->stats.pinnedBytes, ==, 524288);
        g_assert_cmpuint(j->stats.registrationNs, ==, 250000);
        g_assert_true(j->stats.hasCpu);
        g_assert_cmpuint(j->stats.cpuNs, ==, 30000000);
    }
    /* bounded history: the two newest */
    list = call(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpuint(list->jobs->len, ==, 2);
    g_assert_cmpuint(((vrmJobRecord *)list->jobs->pdata[0])->id, ==, 3);
    path = g_strdup_printf("%s/job-1.xml", h->state);
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
    g_free(path);
    path = g_strdup_printf("%s/job-4.xml", h->state);
    g_assert_true(g_file_get_contents(path, &rec, NULL, NULL));
    g_assert_nonnull(strstr(rec, "state=\"completed\""));
    g_assert_nonnull(strstr(rec, "<stats "));

    /* the records survive a restart */
    helperStop(h);
    helperStart(h);
    vrmControlMessageFree(g_steal_pointer(&list));
    list = call(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
    g_assert_cmpuint(list->jobs->len, ==, 2);
    g_assert_cmpint(((vrmJobRecord *)list->jobs->pdata[1])->state, ==, VRM_JOB_STATE_COMPLETED);
    {
        g_autoptr(vrmControlMessage) a = openJob(h, "web1", 1);

        g_assert_cmpuint(onlyJob(a)->id, ==, 5);  /* ids go on */
    }
    helperFree(h);
}

static void
testRestartFindsEngines(void)
{
    Helper *h = helperNew(NULL);
    g_autoptr(vrmControlMessage) a = NULL;
    g_autoptr(vrmControlMessage) b = NULL;
    g_autoptr(vrmControlMessage) qa = NULL;
    g_autoptr(vrmControlMessage) qb = NULL;
    g_autoptr(vrmControlMessage) c = NULL;
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autofree char *run2 = NULL;
    vrmControlMessage *req;
    gint64 pid2;

    helperStart(h);
    a = openJob(h, "web1", 1);
    b = openJob(h, "web2", 1);
    run2 = g_strdup_printf("%s/job-2.run", h->state);
    g_assert_true(g_key_file_load_from_file(kf, run2, 0, NULL));
    pid2 = g_key_file_get_int64(kf, "engine", "pid", NULL);
    g_assert_cmpint(pid2, >, 0);

    helperStop(h);
    /* job 2's engine dies while the helper is away */
    g_assert_cmpint(kill(pid2, SIGKILL), ==, 0);
    g_usleep(100000);
    helperStart(h);

    qa = queryJob(h, 1);
    g_assert_false(vrmJobStateIsFinal(onlyJob(qa)->state));
    qb = queryJob(h, 2);
    g_assert_cmpint(onlyJob(qb)->state, ==, VRM_JOB_STATE_FAILED);
    g_assert_cmpstr(onlyJob(qb)->error, ==,
                    "the transport engine ended while the helper was not running");

    /* the engine found again can be cancelled, and is ended */
    req = vrmControlMessageNew(VRM_CONTROL_JOB_CANCEL);
    req->hasId = true;
    req->id = 1;
    c = call(h, req);
    g_assert_cmpint(onlyJob(c)->state, ==, VRM_JOB_STATE_CANCELLED);
    helperFree(h);
}

/* ---- the hook --------------------------------------------------------- */

static const char *domainXML =
    "<domain type='kvm'>\n"
    "  <name>web1</name>\n"
    "  <uuid>c7a5fdbd-cdaf-9455-926a-d65c16db1809</uuid>\n"
    "  <memory unit='KiB'>1048576</memory>\n"
    "</domain>\n";

static int
runHook(Helper *h, const char *sock, const char *op, const char *sub,
        const char *input, char **out, char **err)
{
    g_auto(GStrv) e = helperEnv(h);
    g_autofree char *inPath = g_strdup_printf("%s/hook-in.xml", h->dir);
    g_autofree char *cmd = NULL;
    g_autoptr(GError) gerr = NULL;
    int status;

    e = g_environ_setenv(e, VRM_HELPER_SOCKET_ENV, sock, TRUE);
    g_assert_true(g_file_set_contents(inPath, input, -1, NULL));
    cmd = g_strdup_printf("'%s' web1 %s %s - < '%s'", env("VRM_HOOK_PATH"), op, sub, inPath);
    {
        const char *argv[] = { "/bin/sh", "-c", cmd, NULL };

        g_assert_true(g_spawn_sync(NULL, (char **)argv, e, 0, NULL, NULL,
                                   out, err, &status, &gerr));
    }
    g_assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void
testHook(void)
{
    Helper *h = helperNew(NULL);
    g_autoptr(vrmControlMessage) a = NULL;
    g_autofree char *withOffer = NULL;
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autoptr(vrmMigrationDef) def = NULL;
    g_autoptr(vrmOffer) newer = NULL;
    g_autofree char *newerXML = NULL;
    g_autofree char *missing = g_strdup_printf("%s/nothing.sock", h->dir);
    g_autofree char *expected = NULL;

    helperStart(h);
    a = openJob(h, "web1", 2);
    withOffer = vrmDomainXMLSetOffer(domainXML, onlyJob(a)->migration->offer);
    g_assert_nonnull(withOffer);

    /* an offer: the answer is added, nothing else changes */
    g_assert_cmpint(runHook(h, h->sock, "migrate", "begin", withOffer, &out, &err), ==, 0);
    g_assert_cmpstr(err, ==, "");
    g_assert_cmpint(vrmDomainXMLGetMigration(out, &def), ==, 1);
    g_assert_nonnull(def->offer);
    g_assert_nonnull(def->answer);
    g_assert_cmpint(def->answer->status, ==, VRM_ANSWER_ACCEPTED);
    g_assert_true(g_str_has_prefix(out, "<domain type='kvm'>\n  <name>web1</name>"));
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);

    /* no offer: untouched, nothing printed */
    g_assert_cmpint(runHook(h, h->sock, "migrate", "begin", domainXML, &out, &err), ==, 0);
    g_assert_cmpstr(out, ==, "");
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);

    /* other operations: untouched, even with an offer, even without a helper */
    g_assert_cmpint(runHook(h, missing, "prepare", "begin", withOffer, &out, &err), ==, 0);
    g_assert_cmpstr(out, ==, "");
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    g_assert_cmpint(runHook(h, missing, "migrate", "end", withOffer, &out, &err), ==, 0);
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);

    /* refusals: one line on stderr, non-zero */
    newer = vrmOfferCopy(onlyJob(a)->migration->offer);
    newer->version = 9;
    newerXML = vrmDomainXMLSetOffer(domainXML, newer);
    g_assert_cmpint(runHook(h, h->sock, "migrate", "begin", newerXML, &out, &err), ==, 1);
    g_assert_cmpstr(out, ==, "");
    expected = g_strdup_printf("virt-rdma: virt-rdmad on the destination refused the migration: "
                               "protocol version 9 of the source is too new; "
                               "this host speaks versions %d to %d\n",
                               VRM_PROTOCOL_VERSION_MIN, VRM_PROTOCOL_VERSION_MAX);
    g_assert_cmpstr(err, ==, expected);
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);

    g_assert_cmpint(runHook(h, missing, "migrate", "begin", withOffer, &out, &err), ==, 1);
    g_assert_true(g_str_has_prefix(err, "virt-rdma: The virt-rdma helper (virt-rdmad) is not running on this host"));
    g_assert_cmpuint(strlen(err), ==, strchr(err, '\n') - err + 1);
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);

    g_assert_cmpint(runHook(h, h->sock, "migrate", "begin", "<domain", &out, &err), ==, 1);
    g_assert_true(g_str_has_prefix(err, "virt-rdma: "));
    g_assert_cmpuint(strlen(err), ==, strchr(err, '\n') - err + 1);
    helperFree(h);
}

static void
testBadConfig(void)
{
    Helper *h = helperNew("[limits]\nmax-jobz = 3\n");
    const char *argv[] = { env("VRM_HELPERD_PATH"), "--config", h->conf, NULL };
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    int status;

    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, 0, NULL, NULL,
                               &out, &err, &status, NULL));
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_true(g_str_has_prefix(err, "virt-rdmad: "));
    g_assert_nonnull(strstr(err, "max-jobz"));
    g_assert_nonnull(strstr(err, h->conf));
    helperFree(h);
}

static void
testSecondInstance(void)
{
    Helper *h = helperNew(NULL);
    const char *argv[] = { env("VRM_HELPERD_PATH"), "--config", h->conf, NULL };
    g_autofree char *err = NULL;
    int status;

    helperStart(h);
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, 0, NULL, NULL,
                               NULL, &err, &status, NULL));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_nonnull(strstr(err, "Another virt-rdmad is already serving"));
    helperFree(h);
}

static void
testBadRequests(void)
{
    Helper *h = helperNew(NULL);
    g_autofree char *reply = NULL;
    g_autoptr(vrmControlMessage) msg = NULL;
    const char *bad = "<job-dance/>";
    int fd;

    helperStart(h);
    fd = vrmHelperConnect(h->sock, g_get_monotonic_time() + G_USEC_PER_SEC);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(vrmHelperFrameWrite(fd, bad, strlen(bad),
                                        g_get_monotonic_time() + G_USEC_PER_SEC), ==, 0);
    reply = vrmHelperFrameRead(fd, g_get_monotonic_time() + 5 * G_USEC_PER_SEC, NULL);
    close(fd);
    g_assert_nonnull(reply);
    msg = vrmControlMessageParseString(reply);
    g_assert_nonnull(msg);
    g_assert_cmpint(msg->status, ==, VRM_REPLY_ERROR);
    g_assert_cmpint(msg->errorCode, ==, VRM_ERR_XML);

    /* a client that says nothing does not block others */
    fd = vrmHelperConnect(h->sock, g_get_monotonic_time() + G_USEC_PER_SEC);
    g_assert_cmpint(fd, >=, 0);
    vrmControlMessageFree(call(h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST)));
    close(fd);
    helperFree(h);
}

static void
dropTo(gpointer opaque)
{
    gid_t *ids = opaque;

    if (setgroups(0, NULL) < 0 || setgid(ids[1]) < 0 || setuid(ids[0]) < 0)
        _exit(3);
}

/* Call the helper as another user: exit 0 ok reply, 1 error reply (its
 * code in stderr), 2 no reply */
static int
callAs(Helper *h, uid_t uid, gid_t gid, char **err)
{
    g_autofree char *cmd = g_strdup_printf("'%s' --socket '%s' list",
                                           env("VRM_HELPERCTL_PATH"), h->sock);
    const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    gid_t ids[2] = { uid, gid };
    int status;

    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, dropTo, ids,
                               NULL, err, &status, NULL));
    return WEXITSTATUS(status);
}

static void
testPeerCredentials(void)
{
    Helper *h = NULL;
    g_autofree char *err = NULL;
    g_autofree char *dirs = NULL;

    if (geteuid() != 0) {
        g_test_skip("needs root to connect as another user");
        return;
    }
    h = helperNew("[access]\ngroup = nogroup\n");
    helperStart(h);
    /* the socket directory must let others reach the socket */
    dirs = g_strdup_printf("chmod 0755 '%s'", h->dir);
    g_assert_cmpint(system(dirs), ==, 0);

    /* the socket's mode (0660, group nogroup) keeps strangers out... */
    g_assert_cmpint(callAs(h, 54321, 54321, &err), ==, 2);
    g_assert_nonnull(strstr(err, "Permission denied"));
    g_clear_pointer(&err, g_free);

    /* ...and so does SO_PEERCRED when the mode lets them in (a socket
     * unit with a wider SocketMode): refused, with the reason */
    g_assert_cmpint(g_chmod(h->sock, 0666), ==, 0);
    if (callAs(h, 54321, 54321, &err) != 1)
        g_error("stranger: %s", err);
    g_assert_nonnull(strstr(err, "User 54321 is not allowed to use virt-rdmad: only root and members of the group 'nogroup' are."));
    g_clear_pointer(&err, g_free);
    /* the access group as the process's group: allowed */
    g_assert_cmpint(callAs(h, 54321, 65534, &err), ==, 0);
    g_clear_pointer(&err, g_free);
    /* a user whose configured groups (getgrouplist) include it: allowed,
     * whatever the process's own group (nobody: primary group nogroup) */
    g_assert_cmpint(callAs(h, 65534, 54321, &err), ==, 0);
    helperFree(h);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_test_add_func("/helper/daemon/list-empty", testListEmpty);
    g_test_add_func("/helper/daemon/open-accept", testOpenAccept);
    g_test_add_func("/helper/daemon/refusals", testRefusals);
    g_test_add_func("/helper/daemon/no-device", testNoDevice);
    g_test_add_func("/helper/daemon/engine-fails", testEngineFails);
    g_test_add_func("/helper/daemon/engine-fails-at-once", testEngineFailsAtOnce);
    g_test_add_func("/helper/daemon/connect-timeout", testConnectTimeout);
    g_test_add_func("/helper/daemon/cancel", testCancel);
    g_test_add_func("/helper/daemon/completed-record", testCompletedRecord);
    g_test_add_func("/helper/daemon/restart", testRestartFindsEngines);
    g_test_add_func("/helper/daemon/hook", testHook);
    g_test_add_func("/helper/daemon/bad-config", testBadConfig);
    g_test_add_func("/helper/daemon/second-instance", testSecondInstance);
    g_test_add_func("/helper/daemon/bad-requests", testBadRequests);
    g_test_add_func("/helper/daemon/peer-credentials", testPeerCredentials);
    return g_test_run();
}
