/*
 * vrmfakeengine: a stand-in for virt-rdma-engine in the unit tests (FAKE)
 *
 * Takes the engine's options (the contract's decoder), reads its token pipe,
 * serves stats records (the contract's writer) on --stats-socket and writes
 * the final record to --stats-fd. What it does
 * comes from VRM_FAKE_ENGINE (default "connect"):
 *   connect        every channel connected at once, then runs until SIGTERM
 *   transfer       connected, one QEMU connection, bytes moving; SIGTERM ends
 *   complete:MS    connected, then exits 0 after MS milliseconds
 *   fail:MS        exits 1 after MS ms, its record saying "fake failure"
 *   hang           never connects
 *   stall          listens on its stats socket but never accepts there
 * It also appends its argument vector, its uid and its memlock limit to
 * $VRM_FAKE_ENGINE_LOG if set.
 */
#include <config.h>

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib.h>
#include <glib-unix.h>

#include "vrmenginesettings.h"
#include "vrmenginestats.h"
#include "vrmerror.h"

static vrmEngineSettings settings;
static char *statsSocket;
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
    g_auto(vrmEngineStats) st = { 0 };

    vrmEngineStatsInit(&st);
    st.role = settings.role < VRM_ENGINE_ROLE_LAST ? settings.role : VRM_ENGINE_ROLE_SOURCE;
    st.state = vrmEngineStateTypeFromString(state);
    if (failed) {
        st.error = g_strdup("fake failure");
        st.errorCode = VRM_ERR_PEER;
    }
    st.protocolVersion = 2;
    st.writeImm = true;
    st.channels = channels;
    st.established = connected ? channels : 0;
    st.qemuConnections = transfer ? 1 : 0;
    /* port 0: the kernel's choice, as the real engine reports it */
    st.rdmaPort = settings.port ? settings.port : 40000u + (unsigned) (getpid() % 1000);
    st.chunkSize = 65536;
    st.ringDepth = 8;
    st.pinnedBound = 1048576;
    st.elapsedS = 1;
    st.cpuUserS = 0.01;
    st.cpuSystemS = 0.02;
    st.bytesSent = bytes;
    st.bytesReceived = 17;
    st.chunks = 3;
    st.chunksReceived = 2;
    st.registrations = 4;
    st.registrationNs = 250000;
    st.pinnedBytes = 524288;
    st.mbps = 12.5;
    st.mbpsAverage = 8;
    return vrmEngineStatsFormat(&st);
}

/* The engine's own limit: the job's allowance */
static rlim_t
memlockLimit(void)
{
    struct rlimit rl = { 0, 0 };

    getrlimit(RLIMIT_MEMLOCK, &rl);
    return rl.rlim_cur;
}

static gboolean
fakeServe(gint fd, GIOCondition cond, gpointer opaque)
{
    int c = accept(fd, NULL, NULL);

    if (c >= 0) {
        g_autofree char *json = fakeJSON("running");
        g_autofree char *line = g_strconcat(json, "\n", NULL);
        /* as the real engine sends it: a probe that gave up (its 1 s
         * deadline under load) must cost this answer, not the engine */
        ssize_t w = send(c, line, strlen(line), MSG_NOSIGNAL);

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

    if (settings.statsFd >= 0) {
        ssize_t w = write(settings.statsFd, json, strlen(json));

        (void)w;
        close(settings.statsFd);
        settings.statsFd = -1;
    }
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
    int fd, ms = 0;

    start = g_get_monotonic_time();
    if (env && *env)
        mode = env;
    if (logPath) {
        g_autofree char *line = g_strjoinv(" ", argv);
        FILE *f = fopen(logPath, "a");

        if (f) {
            fprintf(f, "%s # uid=%u memlock=%llu\n", line, (unsigned)getuid(),
                    (unsigned long long)memlockLimit());
            fclose(f);
        }
    }
    if (vrmEngineSettingsDecode(argc, argv, &settings) < 0) {
        fprintf(stderr, "vrmfakeengine: %s\n", vrmGetLastErrorMessage());
        return 2;
    }
    {
        vrmToken token;

        if (vrmEngineTokenRead(settings.tokenFd, &token) < 0) {
            fprintf(stderr, "vrmfakeengine: %s\n", vrmGetLastErrorMessage());
            return 2;
        }
    }
    statsSocket = settings.statsSocket;
    channels = settings.channels;
    if (strchr(mode, ':'))
        ms = atoi(strchr(mode, ':') + 1);

    if (g_str_has_prefix(mode, "fail") && ms == 0) {
        failed = true;
        fakeFinish("failed");
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
        fprintf(stderr, "virt-rdma-engine: some progress\n");
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
