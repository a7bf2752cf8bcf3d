/*
 * vrmhelperfixture.c: FAKE test scaffolding for virt-rdmad: a real daemon
 * around which tests and the load generator play the rest of a host
 * (vrmhelperfixture.h)
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>
#include <linux/capability.h>

#include <glib/gstdio.h>

#include "vrmhelperfixture.h"
#include "vrmerror.h"

const char *
testEnv(const char *name)
{
    const char *v = g_getenv(name);

    g_assert_nonnull(v);
    return v;
}

unsigned int
freePort(void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    unsigned int port;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g_assert_cmpint(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    g_assert_cmpint(getsockname(fd, (struct sockaddr *)&sa, &len), ==, 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

char *
testKey(const char *dir, const char *name)
{
    char *path = g_build_filename(dir, name, NULL);

    if (!g_file_test(path, G_FILE_TEST_EXISTS))
        g_assert_cmpint(vrmPeerKeyGenerate(path), ==, 0);
    return path;
}

void
helperWriteConfig(Helper *h, const char *key, const char *extra)
{
    g_autofree char *text =
        g_strdup_printf("[rdma]\ndevice = rxe0\naddress = 127.0.0.1\n"
                        "[paths]\nrun-dir = %s\nstate-dir = %s\n"
                        /* the test's member (user daemon) may use the
                         * socket and, as if it could use libvirt, prepare */
                        "[access]\ngroup = %s\nlibvirt-group = %s\n"
                        "[peers]\nauth = psk\nkey-file = %s\nhost = localhost\n"
                        "address = 127.0.0.1\nport = %u\ntimeout = 3\n"
                        "[engine]\nuser = nobody\n"
                        "[libvirt]\nuri = test:///default\n"
                        "[hook]\ntimeout = 20\n"
                        "[metrics]\ntextfile-dir = %s\n%s"
                        /* never the host's nftables: the transparent
                         * mode's rules are tested in the sandbox */
                        "[migration]\nrdma = off\n%s%s%s",
                        h->run, h->state, getgrgid(getpwnam("daemon")->pw_gid)->gr_name,
                        getgrgid(getpwnam("daemon")->pw_gid)->gr_name,
                        key, h->peerPort, h->metricsDir ? h->metricsDir : "",
                        extra ? extra : "",
                        h->fallback ? "fallback = " : "",
                        h->fallback ? h->fallback : "", h->fallback ? "\n" : "");

    g_assert_true(g_file_set_contents(h->conf, text, -1, NULL));
}

/*
 * A helper of its own directory, configuration and key (@key NULL) or the
 * given one. @fallback: its [migration] fallback, NULL for the default.
 * Most tests look at refusals, under "refuse"; the fallback-* tests at the
 * default.
 */
Helper *
helperNewFallback(const char *key, const char *extraConf, const char *fallback)
{
    Helper *h = g_new0(Helper, 1);
    g_autofree char *port = NULL;
    g_autofree char *state = NULL;
    g_autofree char *ownKey = NULL;

    h->dir = g_dir_make_tmp("vrmhelperd-XXXXXX", NULL);
    g_chmod(h->dir, 0755);
    h->run = g_strdup_printf("%s/run", h->dir);
    h->sock = g_strdup_printf("%s/virt-rdmad.sock", h->run);
    h->conf = g_strdup_printf("%s/virt-rdmad.conf", h->dir);
    h->state = g_strdup_printf("%s/state", h->dir);
    h->log = g_strdup_printf("%s/engine.log", h->dir);
    /* the engines run as the engine user (nobody) when the tests run as root */
    g_assert_true(g_file_set_contents(h->log, "", 0, NULL));
    g_chmod(h->log, 0666);
    h->tokens = g_strdup_printf("%s/tokens", h->dir);
    h->mode = g_strdup("connect");
    h->peerPort = freePort();
    h->fallback = fallback;
    g_assert_cmpint(g_mkdir_with_parents(h->tokens, 0700), ==, 0);
    port = g_strdup_printf("%s/sys/class/infiniband/rxe0/ports/1", h->dir);
    g_assert_cmpint(g_mkdir_with_parents(port, 0755), ==, 0);
    state = g_build_filename(port, "state", NULL);
    g_assert_true(g_file_set_contents(state, "4: ACTIVE\n", -1, NULL));
    if (!key)
        key = ownKey = testKey(h->dir, "cluster.key");
    helperWriteConfig(h, key, extraConf);
    return h;
}

Helper *
helperNew(const char *key, const char *extraConf)
{
    return helperNewFallback(key, extraConf, "refuse");
}

char **
helperEnv(Helper *h)
{
    char **e = g_get_environ();
    g_autofree char *sysfs = g_strdup_printf("%s/sys", h->dir);

    e = g_environ_setenv(e, "VRM_SYSFS_ROOT", sysfs, TRUE);
    e = g_environ_setenv(e, "VRM_FAKE_ENGINE", h->mode, TRUE);
    e = g_environ_setenv(e, "VRM_FAKE_ENGINE_LOG", h->log, TRUE);
    e = g_environ_setenv(e, "VRM_HELPER_TEST_TOKEN_DIR", h->tokens, TRUE);
    e = g_environ_setenv(e, VRM_HELPER_CONFIG_ENV, h->conf, TRUE);
    e = g_environ_unsetenv(e, VRM_HELPER_SOCKET_ENV);
    return e;
}

typedef struct {
    const char *log;
    rlim_t memlock;                 /* 0: as inherited */
} HelperChild;

/* In the child: output to a log file, ended with the test program */
static void
helperChildSetup(gpointer opaque)
{
    const HelperChild *c = opaque;
    int fd = open(c->log, O_WRONLY | O_CREAT | O_APPEND, 0600);

    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (c->memlock) {
        struct rlimit rl = { c->memlock, c->memlock };

        /* out of the bounding set, root's daemon loses it at exec: its
         * engines' limit cannot go above this one */
        prctl(PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0);
        setrlimit(RLIMIT_MEMLOCK, &rl);
    }
}

void
helperStart(Helper *h)
{
    g_autofree char *logPath = g_strdup_printf("%s/helper.log", h->dir);
    HelperChild child = { logPath, h->memlockMax };
    g_auto(GStrv) e = helperEnv(h);
    const char *argv[] = { testEnv("VRM_HELPERD_PATH"), "--config", h->conf,
                           "--engine", testEnv("VRM_FAKE_ENGINE_PATH"),
                           "--connect-timeout", "3", h->quiet ? NULL : "--debug", NULL };
    g_autoptr(GError) err = NULL;
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

    g_assert_true(g_spawn_async(NULL, (char **)argv, e, G_SPAWN_DO_NOT_REAP_CHILD,
                                helperChildSetup, &child, &h->pid, &err));
    g_assert_no_error(err);
    while (g_get_monotonic_time() < deadline) {
        g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_LIST);
        g_autoptr(vrmControlMessage) reply = NULL;

        if (g_file_test(h->sock, G_FILE_TEST_EXISTS) &&
            (reply = vrmHelperClientCall(h->sock, req, 1000)))
            return;
        g_usleep(20000);
    }
    g_error("virt-rdmad did not come up (log %s)", logPath);
}

int
waitPid(GPid pid, int seconds)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)seconds * G_USEC_PER_SEC;
    int status;

    while (g_get_monotonic_time() < deadline) {
        pid_t r = waitpid(pid, &status, WNOHANG);

        if (r == pid)
            return status;
        g_main_context_iteration(NULL, FALSE);
        g_usleep(5000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    g_error("process %d did not end in time", (int)pid);
    return -1;
}

void
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
void
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

void
helperFree(Helper *h)
{
    g_autofree char *cmd = NULL;

    helperStop(h);
    helperKillEngines(h);
    cmd = g_strdup_printf("rm -rf '%s'", h->dir);
    g_assert_cmpint(system(cmd), ==, 0);
    g_free(h->dir);
    g_free(h->run);
    g_free(h->sock);
    g_free(h->conf);
    g_free(h->state);
    g_free(h->log);
    g_free(h->tokens);
    g_free(h->mode);
    g_free(h->metricsDir);
    g_free(h);
}

vrmControlMessage *
helperCall(Helper *h, vrmControlMessage *req)
{
    vrmControlMessage *reply = vrmHelperClientCall(h->sock, req, 30000);

    if (!reply)
        g_error("no reply: %s", vrmGetLastErrorMessage());
    vrmControlMessageFree(req);
    return reply;
}



/* ---- the FAKE source peer: this program, on the real TLS channel ---- */

/* The per-domain path of @uuid under the run directory @run */
static char *
runDirDomainPath(const char *run, const char *uuid)
{
    return g_strdup_printf("%s/qemu/%s/migrate.sock", run, uuid);
}

static void
vrmFakeSourceMessage(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque)
{
    vrmFakeSource *fs = opaque;
    vrmPeerType type = msg->type;

    if (msg->type == VRM_PEER_MIGRATION_REQUEST) {
        g_autoptr(vrmPeerMessage) reply = NULL;

        vrmPeerMessageFree(fs->request);
        fs->request = msg;
        fs->requests++;
        if (fs->mode == FAKE_SOURCE_SILENT)
            return;
        if (fs->mode == FAKE_SOURCE_REFUSE) {
            reply = vrmPeerResultNewError(VRM_ERR_POLICY, "fake refusal");
        } else if (fs->mode == FAKE_SOURCE_OUT_OF_TURN) {
            reply = vrmPeerMessageNew(VRM_PEER_MIGRATION_RESULT);
        } else {
            reply = vrmPeerMessageNew(VRM_PEER_MIGRATION_OFFER);
            reply->socketPath = fs->socketPath ? g_strdup(fs->socketPath) :
                runDirDomainPath(fs->runDir, msg->domainUUID);
            reply->offer = vrmOfferNew();
            reply->offer->version = VRM_PROTOCOL_VERSION;
            reply->offer->capabilities = 0x2;
            reply->offer->hasToken = true;
            reply->offer->token = fs->token;
            reply->offer->address = g_strdup("127.0.0.1");
            reply->offer->port = 18599;
            reply->offer->channels = msg->maxChannels;
            /* small: the allowance must stay under the usual 8 MiB
             * memlock limit of a container without CAP_SYS_RESOURCE */
            reply->offer->chunkSize = 65536;
            reply->offer->ringDepth = 2;
        }
        g_assert_cmpint(vrmPeerConnSend(pc, reply), ==, 0);
        return;
    }
    if (msg->type == VRM_PEER_MIGRATION_ANSWER) {
        g_autoptr(vrmPeerMessage) ok = vrmPeerMessageNew(VRM_PEER_MIGRATION_RESULT);

        vrmAnswerFree(fs->answer);
        fs->answer = vrmAnswerCopy(msg->answer);
        if (msg->answer->status == VRM_ANSWER_ACCEPTED) {
            fs->accepted++;
            vrmPeerConnSend(pc, ok);
        } else {
            fs->refused++;
        }
    }
    if (msg->type == VRM_PEER_MIGRATION_RESULT && msg->errorCode != VRM_ERR_OK) {
        fs->resultCode = msg->errorCode;
        g_free(fs->resultError);
        fs->resultError = g_strdup(msg->errorMessage);
    }
    vrmPeerMessageFree(msg);
    /* the destination gave up (its result is an error): as a source
     * helper, close at once rather than hold one of max-peers' places */
    if (type == VRM_PEER_MIGRATION_RESULT)
        g_ptr_array_remove(fs->conns, pc);
}

static void
vrmFakeSourceFailed(vrmPeerConn *pc, gpointer opaque)
{
    vrmFakeSource *fs = opaque;

    g_ptr_array_remove(fs->conns, pc);
}

static const vrmPeerConnCallbacks vrmFakeSourceCallbacks = {
    .message = vrmFakeSourceMessage,
    .failed = vrmFakeSourceFailed,
};

static void
vrmFakeSourceAccept(vrmPeerConn *pc, gpointer opaque)
{
    vrmFakeSource *fs = opaque;

    vrmPeerConnSetCallbacks(pc, &vrmFakeSourceCallbacks, fs);
    vrmPeerConnExpect(pc, 10);
    g_ptr_array_add(fs->conns, pc);
}

vrmFakeSource *
vrmFakeSourceNew(const char *key, vrmFakeSourceMode mode, const char *socketPath)
{
    vrmFakeSource *fs = g_new0(vrmFakeSource, 1);
    g_autoptr(vrmHelperConfig) conf = vrmHelperConfigNew();

    g_free(conf->peerKeyFile);
    conf->peerKeyFile = g_strdup(key);
    conf->peerAuth = VRM_PEER_AUTH_PSK;
    g_assert_cmpint(vrmPeerCredsLoad(conf, &fs->creds), ==, 0);
    fs->mode = mode;
    fs->socketPath = g_strdup(socketPath);
    fs->conns = g_ptr_array_new_with_free_func((GDestroyNotify)vrmPeerConnFree);
    g_assert_cmpint(vrmTokenGenerate(&fs->token), ==, 0);
    fs->srv = vrmPeerServerNew(fs->creds, "127.0.0.1", 0, 4, 5, vrmFakeSourceAccept, fs);
    g_assert_nonnull(fs->srv);
    fs->port = vrmPeerServerPort(fs->srv);
    return fs;
}

vrmFakeSource *
vrmFakeSourceNewFor(Helper *h, const char *key, vrmFakeSourceMode mode)
{
    vrmFakeSource *fs = vrmFakeSourceNew(key, mode, NULL);

    fs->runDir = g_strdup(h->run);
    return fs;
}

void
vrmFakeSourceFree(vrmFakeSource *fs)
{
    g_ptr_array_unref(fs->conns);
    vrmPeerServerFree(fs->srv);
    vrmPeerCredsFree(fs->creds);
    vrmPeerMessageFree(fs->request);
    vrmAnswerFree(fs->answer);
    g_free(fs->resultError);
    g_free(fs->socketPath);
    g_free(fs->runDir);
    g_free(fs);
}


/* ---- the hook, as libvirt runs it ---- */

void
hookResultClear(HookResult *r)
{
    g_free(r->out);
    g_free(r->err);
}

char *
readAll(int fd)
{
    GString *s = g_string_new(NULL);
    char buf[4096];
    ssize_t r;

    while ((r = read(fd, buf, sizeof(buf))) > 0)
        g_string_append_len(s, buf, r);
    close(fd);
    return g_string_free(s, FALSE);
}

GPid
hookSpawn(const char *conf, const char *xml, const char *op, int *out, int *err)
{
    const char *argv[] = { testEnv("VRM_HOOK_PATH"), "web1", op ? op : "migrate",
                           "begin", "-", NULL };
    g_auto(GStrv) e = g_environ_setenv(g_get_environ(), VRM_HELPER_CONFIG_ENV, conf, TRUE);
    g_autoptr(GError) gerr = NULL;
    int in;
    GPid pid;
    ssize_t w;

    e = g_environ_unsetenv(e, VRM_HELPER_SOCKET_ENV);
    g_assert_true(g_spawn_async_with_pipes(NULL, (char **)argv, e,
                                           G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL,
                                           &pid, &in, out, err, &gerr));
    /* a domain XML fits in the pipe: this write does not wait for the hook */
    w = write(in, xml, strlen(xml));
    /* for the operations it ignores the hook may end before reading (libvirt
     * ignores that EPIPE too) */
    if (w != (ssize_t)strlen(xml))
        g_assert_true(w < 0 && errno == EPIPE && op);
    close(in);
    return pid;
}

void
runHookWith(const char *conf, const char *xml, const char *op, HookResult *res)
{
    int out, er;
    GPid pid = hookSpawn(conf, xml, op, &out, &er);

    /* the fake source in this process answers meanwhile */
    res->status = waitPid(pid, 60);
    res->out = readAll(out);
    res->err = readAll(er);
}

void
runHook(Helper *h, const char *xml, HookResult *res)
{
    runHookWith(h->conf, xml, NULL, res);
}

char *
domainXML(const char *uuid, unsigned int port, const char *extra)
{
    g_autofree char *locator = port ?
        g_strdup_printf("<locator host='localhost' address='127.0.0.1' port='%u'/>", port) :
        g_strdup("");

    return g_strdup_printf("<domain type='qemu'>\n  <name>web1</name>\n  <uuid>%s</uuid>\n"
                           "  <memory>65536</memory>\n  <metadata>\n"
                           "    <rdma:migration xmlns:rdma='http://virt-rdma.org/xmlns/migration/1.0'>"
                           "<pin-all/>%s%s</rdma:migration>\n  </metadata>\n</domain>\n",
                           uuid, locator, extra ? extra : "");
}

char *
domainPath(Helper *h, const char *uuid)
{
    return runDirDomainPath(h->run, uuid);
}
