/*
 * vrmclibench.c: virt-rdma bench, the engine benchmark between two hosts
 *
 * Like ib_write_bw, one host runs the server and the other the client:
 *
 *   host A$ virt-rdma bench --server --address 192.0.2.1
 *   host B$ virt-rdma bench --client 192.0.2.1
 *
 * The server starts a source engine and plays the source QEMU: it hands the
 * engine a listening UNIX socket, connects to it once per channel and writes
 * a pseudo-random stream. The client starts a destination engine and plays
 * the destination QEMU: it accepts the engine's connections, checks every
 * byte against the same stream, and reports the throughput from first to
 * last byte. Both print the engine's stats record. Engines are started
 * through the contract (driver/contract): options table, token pipe, stats
 * descriptor. Every wait has a deadline. Nothing is asserted: it measures.
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* accept4 */
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "vrmcli.h"
#include "vrmsocket.h"
#include "vrmenginecommand.h"
#include "vrmenginesettings.h"
#include "vrmenginestats.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmparse.h"
#include "vrmtoken.h"

#define VRM_BENCH_DEFAULT_PORT 18600
#define VRM_BENCH_BUF (256 * 1024)
/* Both ends must agree without a helper: the benchmark exposes no guest
 * memory, so a fixed token is enough unless the user gives one. */
#define VRM_BENCH_TOKEN "76726d2d62656e63682d746f6b656e21"
#define VRM_BENCH_DEADLINE_S 60

typedef struct {
    int fd;
    unsigned int channel;
    guint64 bytes;          /* to write or expected */
    guint64 moved;
    gint64 firstUs;         /* monotonic time of the first byte */
    gint64 lastUs;          /* and of the last */
    char *error;
    bool write;             /* the server's side: write, else read */
    gint done;              /* atomic: its thread has ended */
} vrmBenchStream;

/* The stream of a channel: xorshift64, seeded by the channel index. */
static void
vrmBenchFill(guint64 *state, guint8 *buf, size_t len)
{
    size_t i;

    for (i = 0; i + 8 <= len; i += 8) {
        guint64 x = *state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *state = x;
        memcpy(buf + i, &x, 8);
    }
}

static gpointer
vrmBenchWriter(gpointer opaque)
{
    vrmBenchStream *s = opaque;
    g_autofree guint8 *buf = g_malloc(VRM_BENCH_BUF);
    guint64 state = 0x9e3779b97f4a7c15ULL + s->channel;

    s->firstUs = g_get_monotonic_time();
    while (s->moved < s->bytes) {
        size_t n = MIN((guint64)VRM_BENCH_BUF, s->bytes - s->moved);
        size_t off = 0;

        vrmBenchFill(&state, buf, VRM_BENCH_BUF);
        while (off < n) {
            ssize_t w = send(s->fd, buf + off, n - off, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                s->error = g_strdup_printf(_("channel %1$u: write failed after %2$llu bytes: %3$s"),
                                           s->channel, (unsigned long long)(s->moved + off),
                                           g_strerror(errno));
                return NULL;
            }
            off += w;
        }
        s->moved += n;
    }
    shutdown(s->fd, SHUT_WR);
    /* Wait for the far end to close: the stream has arrived. */
    while (read(s->fd, buf, VRM_BENCH_BUF) > 0)
        ;
    s->lastUs = g_get_monotonic_time();
    return NULL;
}

static gpointer
vrmBenchReader(gpointer opaque)
{
    vrmBenchStream *s = opaque;
    g_autofree guint8 *want = g_malloc(VRM_BENCH_BUF);
    g_autofree guint8 *got = g_malloc(VRM_BENCH_BUF);
    guint64 state = 0x9e3779b97f4a7c15ULL + s->channel;
    size_t have = 0;        /* bytes of got[] filled in this block */

    for (;;) {
        ssize_t r = read(s->fd, got + have, VRM_BENCH_BUF - have);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            s->error = g_strdup_printf(_("channel %1$u: read failed: %2$s"),
                                       s->channel, g_strerror(errno));
            return NULL;
        }
        if (r > 0 && !s->firstUs)
            s->firstUs = g_get_monotonic_time();
        have += r;
        if (have == VRM_BENCH_BUF || (r == 0 && have > 0)) {
            vrmBenchFill(&state, want, VRM_BENCH_BUF);
            if (memcmp(want, got, have) != 0) {
                s->error = g_strdup_printf(_("channel %1$u: the bytes after offset %2$llu differ from what the server sent"),
                                           s->channel, (unsigned long long)s->moved);
                return NULL;
            }
            s->moved += have;
            have = 0;
        }
        if (r == 0)
            break;
    }
    s->lastUs = g_get_monotonic_time();
    /* No reverse stream: end that direction, or the engines wait for it. */
    shutdown(s->fd, SHUT_WR);
    if (s->moved != s->bytes)
        s->error = g_strdup_printf(_("channel %1$u: %2$llu bytes arrived, %3$llu were sent"),
                                   s->channel, (unsigned long long)s->moved,
                                   (unsigned long long)s->bytes);
    return NULL;
}

/* Bounded waits: a stream that makes no progress for this long fails */
static void
vrmBenchSetTimeouts(int fd)
{
    struct timeval tv = { .tv_sec = VRM_BENCH_DEADLINE_S };

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* A listening UNIX socket at @path (QEMU's side of the stream) */
static int
vrmBenchListen(const char *path)
{
    struct sockaddr_un sa;
    int fd;

    if (vrmUnixAddress(path, &sa) < 0) {
        vrmCliError("%s", vrmGetLastErrorMessage());
        return -1;
    }
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
        vrmCliError(_("cannot listen on %1$s: %2$s"), path, g_strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static int
vrmBenchConnect(const char *path)
{
    struct sockaddr_un sa;
    int fd;

    if (vrmUnixAddress(path, &sa) < 0) {
        vrmCliError("%s", vrmGetLastErrorMessage());
        return -1;
    }
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return -1;
    /* the listener is our own, its backlog holds every channel: no wait */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        vrmCliError(_("cannot connect to %1$s: %2$s"), path, g_strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* accept() with a deadline, giving up at once if the engine has ended
 * (then *reaped is set and *status is its wait status) */
static int
vrmBenchAccept(int lfd, GPid pid, gint64 deadline, bool *reaped, int *status)
{
    while (g_get_monotonic_time() < deadline) {
        struct pollfd pfd = { .fd = lfd, .events = POLLIN };

        if (poll(&pfd, 1, 200) > 0)
            return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (waitpid(pid, status, WNOHANG) == pid) {
            *reaped = true;
            errno = ECHILD;
            return -1;
        }
    }
    errno = ETIMEDOUT;
    return -1;
}

/* waitpid() with a deadline: then SIGTERM, and SIGKILL after 10 s more */
static int
vrmBenchReap(GPid pid, gint64 deadline)
{
    int status = 0;
    int sig = SIGTERM;

    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);

        if (r == pid || (r < 0 && errno != EINTR))
            return status;
        if (g_get_monotonic_time() > deadline) {
            vrmCliError(_("the engine (pid %1$d) did not end in time; sending it signal %2$d"),
                        (int)pid, sig);
            kill(pid, sig);
            deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
            sig = SIGKILL;
        }
        g_usleep(50 * 1000);
    }
}

static const char *
vrmBenchEnginePath(void)
{
    const char *env = g_getenv("VRM_ENGINE");

    if (env)
        return env;
    if (g_file_test(VRM_ENGINE_PATH, G_FILE_TEST_IS_EXECUTABLE))
        return VRM_ENGINE_PATH;
    return "virt-rdma-engine";
}

/* Start the engine through the contract: options table, token pipe, stats
 * descriptor, and on the server QEMU's listening socket */
static GPid
vrmBenchSpawn(const vrmEngineSettings *es, const vrmToken *token, int statsFd,
              int qemuFd)
{
    g_autoptr(vrmEngineCommand) cmd = vrmEngineCommandNew(es, vrmBenchEnginePath());
    GPid pid = 0;

    if (vrmEngineCommandPassToken(cmd, token) < 0) {
        vrmCliError("%s", vrmGetLastErrorMessage());
        return 0;
    }
    vrmEngineCommandPassFd(cmd, statsFd, VRM_ENGINE_FD_STATS);
    if (qemuFd >= 0)
        vrmEngineCommandPassFd(cmd, qemuFd, VRM_ENGINE_FD_QEMU_LISTEN);
    if (vrmEngineCommandRun(cmd, G_SPAWN_SEARCH_PATH, &pid) < 0) {
        vrmCliError("%s", vrmGetLastErrorMessage());
        return 0;
    }
    return pid;
}

/* Print the engine's final record; 0 if it says completed */
static int
vrmBenchReport(const char *statsFile)
{
    g_auto(vrmEngineStats) st = { 0 };
    g_autofree char *text = NULL;
    gsize len = 0;

    if (!g_file_get_contents(statsFile, &text, &len, NULL) ||
        vrmEngineStatsParse(text, len, &st) < 0) {
        vrmCliError(_("the engine left no valid stats record: %1$s"),
                    vrmGetLastErrorMessage());
        return -1;
    }
    printf(_("engine stats: %1$s\n"), g_strstrip(text));
    if (st.state != VRM_ENGINE_STATE_COMPLETED) {
        vrmCliError(_("the engine failed: %1$s"), st.error ? st.error : _("no reason given"));
        return -1;
    }
    return 0;
}

/* What the command line asks for */
typedef struct {
    gboolean server;
    char *client;           /* the server's address, on the client */
    char *address;          /* the local address, on the server */
    char *chunk;
    char *token;
    int port;
    int channels;
    int sizeMiB;
    gboolean pinAll;
    gboolean noImm;
    unsigned long long chunkSize;
    vrmToken tok;
} vrmBenchOptions;

static void
vrmBenchOptionsClear(vrmBenchOptions *o)
{
    g_free(o->client);
    g_free(o->address);
    g_free(o->chunk);
    g_free(o->token);
    vrmTokenClear(&o->tok);
}

/* 0 when the options make a benchmark, else the exit status (2: usage) */
static int
vrmBenchParseArgs(int argc, char **argv, vrmBenchOptions *o)
{
    GOptionEntry entries[] = {
        { "server", 0, 0, G_OPTION_ARG_NONE, &o->server, N_("send: start a source engine and write the streams"), NULL },
        { "client", 0, 0, G_OPTION_ARG_STRING, &o->client, N_("receive from the server at ADDR: start a destination engine and check the streams"), N_("ADDR") },
        { "address", 0, 0, G_OPTION_ARG_STRING, &o->address, N_("server: the local RDMA address to listen on"), N_("ADDR") },
        { "port", 0, 0, G_OPTION_ARG_INT, &o->port, N_("rdma_cm port (default 18600)"), N_("PORT") },
        { "channels", 0, 0, G_OPTION_ARG_INT, &o->channels, N_("channels, each its own queue pair (default 1)"), N_("N") },
        { "size", 0, 0, G_OPTION_ARG_INT, &o->sizeMiB, N_("MiB per channel (default 256); the same on both hosts"), N_("MIB") },
        { "chunk-size", 0, 0, G_OPTION_ARG_STRING, &o->chunk, N_("engine chunk size, e.g. 1M"), N_("SIZE") },
        { "rdma-pin-all", 0, 0, G_OPTION_ARG_NONE, &o->pinAll, N_("register the rings up front"), NULL },
        { "no-write-imm", 0, 0, G_OPTION_ARG_NONE, &o->noImm, N_("announce data with descriptor SENDs"), NULL },
        { "token", 0, 0, G_OPTION_ARG_STRING, &o->token, N_("32 hex characters, the same on both hosts (default: a fixed benchmark token)"), N_("HEX32") },
        { NULL, 0, 0, 0, NULL, NULL, NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(_("- measure the RDMA transport engine between two hosts"));

    o->port = VRM_BENCH_DEFAULT_PORT;
    o->channels = 1;
    o->sizeMiB = 256;
    if (!vrmCliParseOptions(ctx, entries, &argc, &argv))
        return 2;
    if (argc != 1 || o->server == !!o->client || (o->server && !o->address)) {
        vrmCliError(_("bench runs as '--server --address ADDR' on one host and '--client ADDR' on the other"));
        return 2;
    }
    if (o->channels < 1 || o->channels > VRM_CHANNELS_MAX || o->sizeMiB < 1 ||
        o->port < 1 || o->port > 65535) {
        vrmCliError(_("--channels takes 1 to 64, --size at least 1, --port 1 to 65535"));
        return 2;
    }
    if (o->chunk && !vrmParseSize(o->chunk, &o->chunkSize)) {
        vrmCliError(_("--chunk-size '%1$s' is not a size: %2$s"), o->chunk, vrmSizeSyntaxHelp());
        return 2;
    }
    if (!vrmTokenParse(o->token ? o->token : VRM_BENCH_TOKEN, &o->tok)) {
        vrmCliError(_("--token takes 32 lowercase hexadecimal characters"));
        return 2;
    }
    return 0;
}

/* The engine's settings: the server's engine accepts on our listening
 * socket, the client's connects to it at SOCK */
static int
vrmBenchSettings(const vrmBenchOptions *o, const char *sock, vrmEngineSettings *es)
{
    vrmEngineSettingsInit(es);
    es->role = o->server ? VRM_ENGINE_ROLE_SOURCE : VRM_ENGINE_ROLE_DESTINATION;
    es->address = g_strdup(o->server ? o->address : o->client);
    es->port = o->port;
    es->channels = o->channels;
    if (o->chunkSize)
        es->chunkSize = o->chunkSize;
    es->ringDepth = vrmRingDepthDefault(es->chunkSize);
    es->caps = (o->pinAll ? VRM_CAP_PIN_ALL : 0) | (o->noImm ? 0 : VRM_CAP_WRITE_IMM);
    es->deadlineConnect = VRM_BENCH_DEADLINE_S;
    es->tokenFd = VRM_ENGINE_FD_TOKEN;
    es->statsFd = VRM_ENGINE_FD_STATS;
    if (o->server)
        es->qemuListenFd = VRM_ENGINE_FD_QEMU_LISTEN;
    else
        es->qemuPath = g_strdup(sock);
    if (vrmEngineSettingsValidate(es) < 0) {
        vrmCliError("%s", vrmGetLastErrorMessage());
        return -1;
    }
    return 0;
}

static gpointer
vrmBenchStreamMain(gpointer opaque)
{
    vrmBenchStream *s = opaque;

    if (s->write)
        vrmBenchWriter(s);
    else
        vrmBenchReader(s);
    g_atomic_int_set(&s->done, 1);
    return NULL;
}

/* Wait for the streams' threads. An engine that exits 0 meanwhile has
 * closed its ends: the threads finish by themselves. One that fails first
 * is the cause: end the streams (their writes would wait minutes for a
 * reader that is gone) and return true. *reaped and *status tell whether
 * the engine was reaped, and how it ended. */
static bool
vrmBenchWatchStreams(vrmBenchStream *streams, int n, GPid pid, bool *reaped, int *status)
{
    int i, running;

    for (;;) {
        for (i = 0, running = 0; i < n; i++)
            running += streams[i].fd >= 0 && !g_atomic_int_get(&streams[i].done);
        if (!running)
            return false;
        if (!*reaped && waitpid(pid, status, WNOHANG) == pid) {
            *reaped = true;
            if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0)
                break;
        }
        g_usleep(50 * 1000);
    }
    for (i = 0; i < n; i++) {
        if (streams[i].fd >= 0)
            shutdown(streams[i].fd, SHUT_RDWR);
    }
    return true;
}

/* Plays QEMU on every channel, one thread each, until the streams end;
 * then reaps the engine. Returns 0 when every stream moved all its bytes
 * and the engine exited 0, with the total and its time span. */
static int
vrmBenchRunStreams(const vrmBenchOptions *o, const char *sock, int lfd, GPid pid,
                   guint64 *total, double *secs)
{
    g_autofree vrmBenchStream *streams = g_new0(vrmBenchStream, o->channels);
    g_autofree GThread **threads = g_new0(GThread *, o->channels);
    gint64 deadline = g_get_monotonic_time() + (gint64)VRM_BENCH_DEADLINE_S * G_USEC_PER_SEC;
    gint64 first = G_MAXINT64, last = 0;
    bool reaped = false;
    bool engineFirst = false;
    int status = 0, ret = 0, i;

    for (i = 0; i < o->channels; i++)
        streams[i].fd = -1;
    for (i = 0; i < o->channels; i++) {
        streams[i].channel = i;
        streams[i].write = o->server;
        streams[i].bytes = (guint64)o->sizeMiB << 20;
        streams[i].fd = o->server ? vrmBenchConnect(sock) :
                        vrmBenchAccept(lfd, pid, deadline, &reaped, &status);
        if (streams[i].fd < 0) {
            if (reaped)
                vrmCliError(_("the destination engine ended before it connected channel %1$d"), i);
            else if (!o->server)
                vrmCliError(_("the destination engine did not connect channel %1$d: %2$s"),
                            i, g_strerror(errno));
            break;
        }
        vrmBenchSetTimeouts(streams[i].fd);
        threads[i] = g_thread_new(o->server ? "bench-writer" : "bench-reader",
                                  vrmBenchStreamMain, &streams[i]);
    }
    /* an engine that ends early (no RDMA device, say) is the cause: not
     * the write that would time out minutes later */
    if (!reaped && vrmBenchWatchStreams(streams, o->channels, pid, &reaped, &status)) {
        vrmCliError(_("the engine ended before the streams were through"));
        engineFirst = true;
        ret = -1;
    }
    for (i = 0; i < o->channels; i++) {
        if (threads[i])
            g_thread_join(threads[i]);
    }
    /* the streams are done (or failed): the engine ends within its own
     * teardown bound */
    if (!reaped)
        status = vrmBenchReap(pid, g_get_monotonic_time() + VRM_BENCH_DEADLINE_S * G_USEC_PER_SEC);
    *total = 0;
    for (i = 0; i < o->channels; i++) {
        if (streams[i].fd >= 0)
            close(streams[i].fd);
        if (!threads[i] || streams[i].error || engineFirst) {
            /* the threads' errors follow from the engine's end: not shown */
            if (streams[i].error && !engineFirst)
                vrmCliError("%s", streams[i].error);
            g_free(streams[i].error);
            ret = -1;
            continue;
        }
        *total += streams[i].moved;
        first = MIN(first, streams[i].firstUs);
        last = MAX(last, streams[i].lastUs);
    }
    if (WIFSIGNALED(status)) {
        vrmCliError(_("the engine was killed by signal %1$d (%2$s)"),
                    WTERMSIG(status), g_strsignal(WTERMSIG(status)));
        ret = -1;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        vrmCliError(_("the engine exited with status %1$d"),
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        ret = -1;
    }
    *secs = last > first ? (last - first) / 1e6 : 0;
    return ret;
}

int
vrmCmdBench(int argc, char **argv)
{
    vrmBenchOptions o = { 0 };
    g_auto(vrmEngineSettings) es = { 0 };
    g_autoptr(GError) err = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *sock = NULL;
    g_autofree char *statsFile = NULL;
    guint64 total = 0;
    double secs = 0;
    GPid pid;
    int lfd = -1, statsFd, ret;

    if ((ret = vrmBenchParseArgs(argc, argv, &o)) != 0)
        goto cleanup;
    ret = 1;
    if (!(dir = g_dir_make_tmp("virt-rdma-bench.XXXXXX", &err))) {
        vrmCliError("%s", err->message);
        goto cleanup;
    }
    sock = g_build_filename(dir, "stream.sock", NULL);
    statsFile = g_build_filename(dir, "stats.json", NULL);
    if (vrmBenchSettings(&o, sock, &es) < 0)
        goto cleanup;
    if ((statsFd = open(statsFile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
        vrmCliError(_("cannot create %1$s: %2$s"), statsFile, g_strerror(errno));
        goto cleanup;
    }
    /* Both sides play QEMU: the listening socket is ours on both hosts;
     * on the server the engine accepts on it, on the client we accept the
     * engine's connections. */
    if ((lfd = vrmBenchListen(sock)) < 0) {
        close(statsFd);
        goto cleanup;
    }
    pid = vrmBenchSpawn(&es, &o.tok, statsFd, o.server ? lfd : -1);
    vrmTokenClear(&o.tok);
    close(statsFd);
    if (!pid)
        goto cleanup;
    ret = vrmBenchRunStreams(&o, sock, lfd, pid, &total, &secs) < 0 ? 1 : 0;
    if (vrmBenchReport(statsFile) < 0)
        ret = 1;
    if (ret == 0 && secs > 0) {
        g_autofree char *sz = vrmCliPrettySize(total);

        printf(_("%1$s over %2$d channel(s) in %3$.3f s: %4$.1f Mbit/s (%5$s, every byte checked)\n"),
               sz, o.channels, secs, total * 8 / 1e6 / secs,
               o.server ? _("sent") : _("received"));
    }

 cleanup:
    if (lfd >= 0)
        close(lfd);
    if (sock)
        g_unlink(sock);
    if (statsFile)
        g_unlink(statsFile);
    if (dir)
        g_rmdir(dir);
    vrmBenchOptionsClear(&o);
    return ret;
}
