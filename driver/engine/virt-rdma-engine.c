/*
 * virt-rdma-engine: carry QEMU's UNIX-socket migration streams over RDMA
 *
 * One process per migration and host. See virt-rdma-engine(8) and
 * docs/protocol.rst. Its options are the contract's table
 * (driver/contract/vrmenginesettings.h); its final word is one stats record
 * (vrmenginestats.h) on --stats-fd, also after a failure, plus one line
 * "virt-rdma-engine: error: REASON" on standard error.
 */
#include <config.h>

#include <signal.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vrmtransport.h"
#include "vrmconfine.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

#define VRM_ENGINE_EXIT_FAILED 1
#define VRM_ENGINE_EXIT_USAGE 2

/* Write the final record to @fd (standard output if -1), then close it */
static void
vrmEngineWriteRecord(int fd, const vrmEngineStats *st)
{
    g_autofree char *json = vrmEngineStatsFormat(st);
    g_autofree char *line = g_strconcat(json, "\n", NULL);
    size_t off = 0, len = strlen(line);
    int out = fd >= 0 ? fd : STDOUT_FILENO;

    while (off < len) {
        ssize_t w = write(out, line + off, len - off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            VRM_WARN("cannot write the stats record: %s", g_strerror(errno));
            break;
        }
        off += w;
    }
    if (fd >= 0)
        close(fd);
}

/* The record of a job that never ran (bad options, no token) */
static int
vrmEngineFailEarly(const vrmEngineSettings *s)
{
    g_auto(vrmEngineStats) st = { 0 };

    vrmEngineStatsInit(&st);
    st.role = s->role < VRM_ENGINE_ROLE_LAST ? s->role : VRM_ENGINE_ROLE_SOURCE;
    st.state = VRM_ENGINE_STATE_FAILED;
    st.error = g_strdup(vrmGetLastErrorMessage());
    st.errorCode = vrmGetLastErrorCode() ? vrmGetLastErrorCode() : VRM_ERR_INTERNAL;
    g_autofree char *line = vrmLogSanitize(st.error);

    if (s->statsFd >= 0)
        vrmEngineWriteRecord(s->statsFd, &st);
    fprintf(stderr, "virt-rdma-engine: error: %s\n", line);
    return VRM_ENGINE_EXIT_USAGE;
}

static void
vrmEngineUsage(void)
{
    g_autofree char *options = vrmEngineSettingsHelp();

    /* message-style: exempt-begin: help text (GLib's --help conventions) */
    printf("%s\n\n%s\n\n%s", _("Usage: virt-rdma-engine --role source|destination [OPTION...]"),
           _("Carry QEMU's UNIX-socket migration streams (main and multifd, both\n"
             "directions) over RDMA RC queue pairs, one process per migration and host.\n"
             "Exit status 0 when every channel has ended in both directions, 1 when the\n"
             "job failed, 2 for invalid options; the stats record goes to --stats-fd."),
           options);
    /* message-style: exempt-end */
    printf("  %-28s %s\n  %-28s %s\n", "--help", _("show this help"),
           "--version", _("print the program and protocol versions"));
}

int
main(int argc, char **argv)
{
    g_auto(vrmEngineSettings) s = { 0 };
    g_auto(vrmEngineStats) st = { 0 };
    g_autoptr(vrmEngine) engine = NULL;
    vrmToken token;
    int ret;

    vrmI18nInit();
    vrmLogSetProgram("virt-rdma-engine");
    /* every socket and file the engine creates is its own user's only */
    umask(0077);
    /* a QEMU that closed its socket is an error to report, not a signal
     * to die of: splice() has no MSG_NOSIGNAL (send() passes it) */
    signal(SIGPIPE, SIG_IGN);
    /* before anything a peer sends is read: not dumpable, no new
     * privileges, the seccomp deny list (vrmconfine.c) */
    if (vrmConfine() < 0) {
        fprintf(stderr, "virt-rdma-engine: error: %s\n", vrmGetLastErrorMessage());
        return VRM_ENGINE_EXIT_FAILED;
    }

    if (argc == 2 && (g_str_equal(argv[1], "--help") || g_str_equal(argv[1], "-h"))) {
        vrmEngineUsage();
        return 0;
    }
    if (argc == 2 && g_str_equal(argv[1], "--version")) {
        printf("virt-rdma-engine %s (protocol version %d)\n", PACKAGE_VERSION,
               VRM_PROTOCOL_VERSION);
        return 0;
    }
    if (vrmEngineSettingsDecode(argc, argv, &s) < 0)
        return vrmEngineFailEarly(&s);
    if (s.debug)
        vrmLogSetLevel(VRM_LOG_DEBUG);
    else if (s.verbose)
        vrmLogSetLevel(VRM_LOG_INFO);

    /* the descriptor is closed now; its number stays in the settings */
    if (vrmEngineTokenRead(s.tokenFd, &token) < 0)
        return vrmEngineFailEarly(&s);
    engine = vrmEngineNew(&s, &token);
    vrmTokenClear(&token);

    ret = vrmEngineRun(engine);
    vrmEngineGetStats(engine, &st);
    vrmEngineWriteRecord(s.statsFd, &st);
    if (ret < 0) {
        g_autofree char *line = vrmLogSanitize(st.error ? st.error :
                                               vrmGetLastErrorMessage());

        fprintf(stderr, "virt-rdma-engine: error: %s\n", line);
        return VRM_ENGINE_EXIT_FAILED;
    }
    return 0;
}
