/*
 * vrmfakeengine: a stand-in for virt-rdma-engine in the unit tests (FAKE)
 *
 * Takes the engine's options, serves stats JSON of the engine's form on
 * --stats-socket and writes the final stats to --stats-file. What it does
 * comes from VRM_FAKE_ENGINE (default "connect"):
 *   connect        every channel connected at once, then runs until SIGTERM
 *   transfer       connected, one QEMU connection, bytes moving; SIGTERM ends
 *   complete:MS    connected, then exits 0 after MS milliseconds
 *   fail:MS        exits 1 after MS ms with "virt-rdma-engine: error: fake failure"
 *   hang           never connects
 *   stall          listens on its stats socket but never accepts there
 * It also appends its argument vector to $VRM_FAKE_ENGINE_LOG if set.
 */
#include <config.h>

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib.h>
#include <glib-unix.h>

static char *statsSocket, *statsFile, *role;
static int channels = 1;
static const char *mode = "connect";
static gint64 start;
static guint64 bytes;
static bool failed;

static char *
fakeJSON(const char *state)
{
    bool connected = !g_str_equal(mode, "hang");
    bool transfer = g_str_has_prefix(mode, "transfer") || g_str_has_prefix(mode, "complete");

    return g_strdup_printf("{\"role\": \"%s\", \"state\": \"%s\", \"error\": %s, "
                           "\"protocol_version\": 1, \"pin_all\": false, \"write_imm\": true, "
                           "\"channels\": %d, \"channels_established\": %d, "
                           "\"qemu_connections\": %d, \"chunk_size\": 65536, \"ring_depth\": 8, "
                           "\"pinned_bound\": 1048576, \"elapsed_s\": 1.000, "
                           "\"cpu_user_s\": 0.010, \"cpu_system_s\": 0.020, "
                           "\"per_channel\": [{\"index\": 0, \"bytes_sent\": 1}], "
                           "\"total\": {\"bytes_sent\": %" G_GUINT64_FORMAT
                           ", \"bytes_received\": 17, \"chunks_written\": 3, "
                           "\"chunks_received\": 2, \"registrations\": 4, \"registration_us\": 250, "
                           "\"pinned_bytes\": 524288, \"credit_stalls\": 0, \"completions\": 9, "
                           "\"cq_polls\": 9, \"cq_idle_polls\": 0, \"control_sent\": 5, "
                           "\"control_received\": 5, \"mbps_current\": 12.50, \"mbps_average\": 8.00}}",
                           role ? role : "source", state,
                           failed ? "\"fake failure\"" : "null",
                           channels, connected ? channels : 0, transfer ? 1 : 0, bytes);
}

static gboolean
fakeServe(gint fd, GIOCondition cond, gpointer opaque)
{
    int c = accept(fd, NULL, NULL);

    if (c >= 0) {
        g_autofree char *json = fakeJSON("running");
        g_autofree char *line = g_strconcat(json, "\n", NULL);
        ssize_t w = write(c, line, strlen(line));

        (void)w;
        close(c);
        /* log like the real engine does: a helper that restarted must
         * not have left the engine a stderr that breaks */
        fprintf(stderr, "virt-rdma-engine: info: stats served\n");
        fflush(stderr);
    }
    bytes += 1000;
    return G_SOURCE_CONTINUE;
}

static void
fakeFinish(const char *state)
{
    g_autofree char *json = fakeJSON(state);

    if (statsFile)
        g_file_set_contents(statsFile, json, -1, NULL);
    if (statsSocket)
        unlink(statsSocket);
}

static gboolean
fakeQuit(gpointer opaque)
{
    g_main_loop_quit(opaque);
    return G_SOURCE_REMOVE;
}

int
main(int argc, char **argv)
{
    g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
    const char *env = g_getenv("VRM_FAKE_ENGINE");
    const char *logPath = g_getenv("VRM_FAKE_ENGINE_LOG");
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int i, fd, ms = 0;

    start = g_get_monotonic_time();
    if (env && *env)
        mode = env;
    if (logPath) {
        g_autofree char *line = g_strjoinv(" ", argv);
        FILE *f = fopen(logPath, "a");

        if (f) {
            fprintf(f, "%s\n", line);
            fclose(f);
        }
    }
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;

        if (g_str_equal(a, "--stats-socket") && next)
            statsSocket = g_strdup(argv[++i]);
        else if (g_str_equal(a, "--stats-file") && next)
            statsFile = g_strdup(argv[++i]);
        else if (g_str_equal(a, "--role") && next)
            role = g_strdup(argv[++i]);
        else if (g_str_has_prefix(a, "--channels="))
            channels = atoi(a + strlen("--channels="));
    }
    if (strchr(mode, ':'))
        ms = atoi(strchr(mode, ':') + 1);

    if (g_str_has_prefix(mode, "fail") && ms == 0) {
        failed = true;
        fakeFinish("failed");
        fprintf(stderr, "virt-rdma-engine: error: fake failure\n");
        return 1;
    }
    if (!statsSocket || strlen(statsSocket) >= sizeof(sa.sun_path))
        return 2;
    strcpy(sa.sun_path, statsSocket);
    unlink(statsSocket);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 8) < 0)
        return 2;
    if (!g_str_equal(mode, "stall"))
        g_unix_fd_add(fd, G_IO_IN, fakeServe, NULL);
    g_unix_signal_add(SIGTERM, fakeQuit, loop);
    if (ms > 0)
        g_timeout_add(ms, fakeQuit, loop);
    /* a test that failed half-way must not leave fakes behind for long */
    g_timeout_add_seconds(60, fakeQuit, loop);
    g_main_loop_run(loop);
    close(fd);

    if (g_str_has_prefix(mode, "fail")) {
        failed = true;
        fakeFinish("failed");
        fprintf(stderr, "virt-rdma-engine: some progress\nvirt-rdma-engine: error: fake failure\n");
        return 1;
    }
    if (g_str_has_prefix(mode, "complete")) {
        fakeFinish("completed");
        return 0;
    }
    /* SIGTERM: the engine's default action would kill it; report that */
    fakeFinish("failed");
    signal(SIGTERM, SIG_DFL);
    raise(SIGTERM);
    return 3;
}
