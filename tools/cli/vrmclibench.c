/*
 * vrmclibench.c: virt-rdma bench, the engine benchmark between two hosts
 *
 * Like ib_write_bw, one host runs the server and the other the client:
 *
 *   host A$ virt-rdma bench --server --address 192.0.2.1
 *   host B$ virt-rdma bench --client 192.0.2.1
 *
 * The server starts a source engine and plays the source QEMU: it connects
 * to the engine's UNIX socket once per channel and writes a pseudo-random
 * stream. The client starts a destination engine and plays the destination
 * QEMU: it accepts the engine's connections, checks every byte against the
 * same stream, and reports the throughput from first to last byte. Both
 * print the engine's stats. Nothing is asserted: it measures.
 */
#include <config.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "vrmcli.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "protocol/vrmproto.h"

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
            ssize_t w = write(s->fd, buf + off, n - off);
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

static int
vrmBenchUnixSocket(const char *path, bool listening)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        vrmCliError(_("the socket path %1$s is too long"), path);
        return -1;
    }
    g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return -1;
    if (listening) {
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
            vrmCliError(_("cannot listen on %1$s: %2$s"), path, g_strerror(errno));
            close(fd);
            return -1;
        }
        return fd;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
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

int
vrmCmdBench(int argc, char **argv)
{
    gboolean server = FALSE;
    char *client = NULL;
    char *address = NULL;
    char *chunk = NULL;
    char *token = NULL;
    int port = VRM_BENCH_DEFAULT_PORT;
    int channels = 1;
    int sizeMiB = 256;
    gboolean pinAll = FALSE, noImm = FALSE;
    GOptionEntry entries[] = {
        { "server", 0, 0, G_OPTION_ARG_NONE, &server, N_("send: start a source engine and write the streams"), NULL },
        { "client", 0, 0, G_OPTION_ARG_STRING, &client, N_("receive from the server at ADDR: start a destination engine and check the streams"), N_("ADDR") },
        { "address", 0, 0, G_OPTION_ARG_STRING, &address, N_("server: the local RDMA address to listen on"), N_("ADDR") },
        { "port", 0, 0, G_OPTION_ARG_INT, &port, N_("rdma_cm port (default 18600)"), N_("PORT") },
        { "channels", 0, 0, G_OPTION_ARG_INT, &channels, N_("channels, each its own queue pair (default 1)"), N_("N") },
        { "size", 0, 0, G_OPTION_ARG_INT, &sizeMiB, N_("MiB per channel (default 256); the same on both hosts"), N_("MIB") },
        { "chunk-size", 0, 0, G_OPTION_ARG_STRING, &chunk, N_("engine chunk size, e.g. 1M"), N_("SIZE") },
        { "rdma-pin-all", 0, 0, G_OPTION_ARG_NONE, &pinAll, N_("register the rings up front"), NULL },
        { "no-write-imm", 0, 0, G_OPTION_ARG_NONE, &noImm, N_("announce data with descriptor SENDs"), NULL },
        { "token", 0, 0, G_OPTION_ARG_STRING, &token, N_("32 hex characters, the same on both hosts (default: a fixed benchmark token)"), N_("HEX32") },
        { NULL, 0, 0, 0, NULL, NULL, NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(_("- measure the RDMA transport engine between two hosts"));
    g_autoptr(GError) err = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *sock = NULL;
    g_autofree char *statsFile = NULL;
    g_autofree char *endpoint = NULL;
    g_autofree char *stats = NULL;
    g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
    g_auto(GStrv) envp = NULL;
    vrmBenchStream *streams = NULL;
    GThread **threads = NULL;
    GPid pid = 0;
    int status = 0, lfd = -1, ret = 1, i;
    gint64 first = G_MAXINT64, last = 0, deadline;
    guint64 total = 0;

    g_option_context_add_main_entries(ctx, entries, GETTEXT_PACKAGE);
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        vrmCliError("%s", err->message);
        return 2;
    }
    if (argc != 1 || server == !!client || (server && !address)) {
        vrmCliError(_("bench runs as '--server --address ADDR' on one host and '--client ADDR' on the other"));
        return 2;
    }
    if (channels < 1 || channels > 64 || sizeMiB < 1 || port < 1 || port > 65535) {
        vrmCliError(_("--channels takes 1 to 64, --size at least 1, --port 1 to 65535"));
        return 2;
    }

    if (!(dir = g_dir_make_tmp("virt-rdma-bench.XXXXXX", &err))) {
        vrmCliError("%s", err->message);
        return 1;
    }
    sock = g_build_filename(dir, "stream.sock", NULL);
    statsFile = g_build_filename(dir, "stats.json", NULL);
    endpoint = g_strdup_printf(strchr(server ? address : client, ':') ? "[%s]:%d" : "%s:%d",
                               server ? address : client, port);

    g_ptr_array_add(args, g_strdup(vrmBenchEnginePath()));
    g_ptr_array_add(args, g_strdup(server ? "--role=source" : "--role=destination"));
    g_ptr_array_add(args, g_strdup_printf("--unix=%s", sock));
    g_ptr_array_add(args, g_strdup_printf(server ? "--listen=%s" : "--connect=%s", endpoint));
    g_ptr_array_add(args, g_strdup_printf("--channels=%d", channels));
    g_ptr_array_add(args, g_strdup_printf("--stats-file=%s", statsFile));
    g_ptr_array_add(args, g_strdup_printf("--deadline-connect=%d", VRM_BENCH_DEADLINE_S));
    if (chunk)
        g_ptr_array_add(args, g_strdup_printf("--chunk-size=%s", chunk));
    if (pinAll)
        g_ptr_array_add(args, g_strdup("--pin-all"));
    if (noImm)
        g_ptr_array_add(args, g_strdup("--no-write-imm"));
    g_ptr_array_add(args, NULL);
    envp = g_environ_setenv(g_get_environ(), VRM_ENGINE_TOKEN_ENV,
                            token ? token : VRM_BENCH_TOKEN, TRUE);

    /* The client plays the destination QEMU: it listens before its engine
     * connects to it. */
    if (!server && (lfd = vrmBenchUnixSocket(sock, true)) < 0)
        goto cleanup;
    if (!g_spawn_async(NULL, (char **)args->pdata, envp,
                       G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH,
                       NULL, NULL, &pid, &err)) {
        vrmCliError(_("cannot start the engine: %1$s"), err->message);
        goto cleanup;
    }

    streams = g_new0(vrmBenchStream, channels);
    threads = g_new0(GThread *, channels);
    deadline = g_get_monotonic_time() + (gint64)VRM_BENCH_DEADLINE_S * G_USEC_PER_SEC;
    for (i = 0; i < channels; i++) {
        streams[i].channel = i;
        streams[i].bytes = (guint64)sizeMiB << 20;
        if (server) {
            /* The source engine listens once it has its peer. */
            while ((streams[i].fd = vrmBenchUnixSocket(sock, false)) < 0) {
                if (g_get_monotonic_time() > deadline || waitpid(pid, &status, WNOHANG) == pid) {
                    vrmCliError(_("the source engine did not accept channel %1$d; is the client running?"), i);
                    pid = waitpid(pid, &status, WNOHANG) == 0 ? pid : 0;
                    goto join;
                }
                g_usleep(100 * 1000);
            }
            threads[i] = g_thread_new("bench-writer", vrmBenchWriter, &streams[i]);
        } else {
            if ((streams[i].fd = accept(lfd, NULL, NULL)) < 0) {
                vrmCliError(_("accepting the engine's channel %1$d failed: %2$s"), i, g_strerror(errno));
                goto join;
            }
            threads[i] = g_thread_new("bench-reader", vrmBenchReader, &streams[i]);
        }
    }
 join:
    for (i = 0; i < channels; i++) {
        if (threads[i])
            g_thread_join(threads[i]);
    }
    if (pid > 0) {
        waitpid(pid, &status, 0);
        pid = 0;
    }
    ret = 0;
    for (i = 0; i < channels; i++) {
        if (streams[i].fd > 0)
            close(streams[i].fd);
        if (!threads[i] || streams[i].error) {
            if (streams[i].error)
                vrmCliError("%s", streams[i].error);
            ret = 1;
            continue;
        }
        total += streams[i].moved;
        first = MIN(first, streams[i].firstUs);
        last = MAX(last, streams[i].lastUs);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        vrmCliError(_("the engine failed (status %1$d); run it with VRM_LOG_LEVEL=debug for details"), status);
        ret = 1;
    }
    if (ret == 0 && last > first) {
        double secs = (last - first) / 1e6;
        g_autofree char *sz = vrmCliPrettySize(total);

        printf(_("%1$s over %2$d channel(s) in %3$.3f s: %4$.1f Mbit/s (%5$s, every byte checked)\n"),
               sz, channels, secs, total * 8 / 1e6 / secs,
               server ? _("sent") : _("received"));
    }
    if (g_file_get_contents(statsFile, &stats, NULL, NULL))
        printf(_("engine stats: %1$s\n"), g_strstrip(stats));

 cleanup:
    if (pid > 0) {
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
    }
    if (lfd >= 0)
        close(lfd);
    if (sock)
        g_unlink(sock);
    if (statsFile)
        g_unlink(statsFile);
    if (dir)
        g_rmdir(dir);
    g_free(streams);
    g_free(threads);
    g_free(client);
    g_free(address);
    g_free(chunk);
    g_free(token);
    return ret;
}
