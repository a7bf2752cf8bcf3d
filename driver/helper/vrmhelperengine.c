/*
 * vrmhelperengine.c: virt-rdmad's engines: started with least privilege,
 * followed without blocking, found again only if they are ours
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* SO_PEERCRED, struct ucred */
#endif

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/capability.h>

#include <glib-unix.h>

#include "vrmhelperengine.h"
#include "vrmparse.h"
#include "vrmsocket.h"
#include "vrmenginecommand.h"
#include "vrmenginesettings.h"
#include "vrmhelperconf.h"
#include "vrmerror.h"
#include "vrmlimits.h"
#include "vrmi18n.h"
#include "vrmlog.h"

/* Where the child tells why it could not become the engine (above the
 * contract's descriptors) */
#define VRM_ENGINE_FD_SETUP_STATUS 9
/* The whole record of a live engine */
#define VRM_ENGINE_PROBE_MAX (64 * 1024)

/* The steps of the child's set-up, named in the failure message */
typedef enum {
    VRM_SETUP_OK,
    VRM_SETUP_MEMLOCK,
    VRM_SETUP_NO_NEW_PRIVS,
    VRM_SETUP_GROUPS,
    VRM_SETUP_GID,
    VRM_SETUP_UID,
    VRM_SETUP_CAPS,
} vrmSetupStep;

typedef struct {
    rlim_t memlock;
    bool drop;
    uid_t uid;
    gid_t gid;
} vrmEngineSetup;

/* Async-signal-safe: report @step and @err on the status pipe, end */
static void G_GNUC_NORETURN
vrmEngineSetupFail(vrmSetupStep step, int err)
{
    int msg[2] = { step, err };

    if (write(VRM_ENGINE_FD_SETUP_STATUS, msg, sizeof(msg)) < 0)
        _exit(126);
    _exit(126);
}

/* In the child, between fork and exec: async-signal-safe calls only */
static void
vrmEngineChildSetup(gpointer opaque)
{
    vrmEngineSetup *s = opaque;
    struct rlimit rl = { s->memlock, s->memlock };
    int cap;

    /* the status pipe must not reach the engine */
    fcntl(VRM_ENGINE_FD_SETUP_STATUS, F_SETFD, FD_CLOEXEC);
    /* its own process group: a signal to the helper's group (Ctrl-C in
     * a terminal) does not end the migrations, a restart finds them */
    setpgid(0, 0);
    /* the limit first, while we may still raise it */
    if (setrlimit(RLIMIT_MEMLOCK, &rl) < 0)
        vrmEngineSetupFail(VRM_SETUP_MEMLOCK, errno);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        vrmEngineSetupFail(VRM_SETUP_NO_NEW_PRIVS, errno);
    if (s->drop) {
        if (setgroups(0, NULL) < 0)
            vrmEngineSetupFail(VRM_SETUP_GROUPS, errno);
        if (setresgid(s->gid, s->gid, s->gid) < 0)
            vrmEngineSetupFail(VRM_SETUP_GID, errno);
        /* no PR_SET_KEEPCAPS: every capability goes with uid 0 */
        if (setresuid(s->uid, s->uid, s->uid) < 0)
            vrmEngineSetupFail(VRM_SETUP_UID, errno);
    } else if (geteuid() == 0) {
        /* root without an engine user (tests): at least no CAP_IPC_LOCK,
         * so that the memlock limit above holds */
        for (cap = 0; cap <= CAP_LAST_CAP; cap++) {
            if (cap != CAP_DAC_OVERRIDE && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
                errno != EINVAL)
                vrmEngineSetupFail(VRM_SETUP_CAPS, errno);
        }
    }
}

static const char *
vrmSetupStepName(int step)
{
    switch ((vrmSetupStep)step) {
    case VRM_SETUP_MEMLOCK:
        return _("setting its locked-memory limit");
    case VRM_SETUP_NO_NEW_PRIVS:
        return _("forbidding new privileges");
    case VRM_SETUP_GROUPS:
        return _("dropping its supplementary groups");
    case VRM_SETUP_GID:
        return _("switching to the engine group");
    case VRM_SETUP_UID:
        return _("switching to the engine user");
    case VRM_SETUP_CAPS:
        return _("dropping its capabilities");
    case VRM_SETUP_OK:
        break;
    }
    return "?";
}

int
vrmHelperEngineSetupRead(int fd, unsigned long long memlock)
{
    int msg[2] = { 0, 0 };
    ssize_t n;

    do {
        n = read(fd, msg, sizeof(msg));
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    /* exec closed the pipe; the child writes its 8 bytes at once (below
     * PIPE_BUF) or nothing, so anything else is no word of a failure */
    if (n != sizeof(msg))
        return 1;
    if (msg[0] == VRM_SETUP_MEMLOCK)
        vrmReportError(VRM_ERR_RESOURCE,
                       _("cannot start the transport engine: setting its locked-memory limit to %1$llu bytes (the job's allowance) failed: %2$s; raise virt-rdmad's own limit (LimitMEMLOCK= in its unit)"),
                       memlock, g_strerror(msg[1]));
    else
        vrmReportError(VRM_ERR_SYSTEM,
                       _("cannot start the transport engine: %1$s failed: %2$s"),
                       vrmSetupStepName(msg[0]), g_strerror(msg[1]));
    return -1;
}

unsigned long long
vrmHelperEngineMemlock(const vrmEngineLaunch *l)
{
    long page = sysconf(_SC_PAGESIZE);

    /* the allowance as the kernel counts it: whole pages per region */
    return l->allowance +
        vrmMemlockBytes(l->channels + l->diskChannels, l->ringDepth, l->chunkSize,
                        page > 0 ? page : 4096) -
        vrmPinnedBytes(l->channels + l->diskChannels, l->ringDepth, l->chunkSize);
}

G_STATIC_ASSERT(VRM_HELPER_MAX_RECOVERY_WINDOW <= VRM_ENGINE_DEADLINE_MAX);

/* The contract's settings (driver/contract/vrmenginesettings.h) */
static void
vrmEngineLaunchSettings(const vrmEngineLaunch *l, vrmEngineSettings *es)
{
    vrmEngineSettingsInit(es);
    es->role = l->source ? VRM_ENGINE_ROLE_SOURCE : VRM_ENGINE_ROLE_DESTINATION;
    es->domainUUID = g_strdup(l->domainUUID);
    if (l->source)
        es->qemuListenFd = VRM_ENGINE_FD_QEMU_LISTEN;
    else
        es->qemuPath = g_strdup(l->qemuPath);
    es->qemuUid = l->qemuUid;
    es->qemuPid = l->source ? l->qemuPid : -1;
    es->address = g_strdup(l->address);
    es->port = l->port;
    es->channels = l->channels;
    es->diskChannels = l->diskChannels;
    if (l->diskChannels && l->source)
        es->diskListenFd = VRM_ENGINE_FD_DISK_LISTEN;
    else if (l->diskChannels)
        es->diskPath = g_strdup(l->diskPath);
    if (l->source && l->tcpListenFd >= 0)
        es->tcpListenFd = VRM_ENGINE_FD_TCP_LISTEN;
    if (!l->source) {
        es->tcpPortMin = l->tcpPortMin;
        es->tcpPortMax = l->tcpPortMax;
    }
    es->chunkSize = l->chunkSize;
    es->ringDepth = l->ringDepth;
    es->caps = l->caps;
    es->maxPinned = l->allowance;
    es->device = g_strdup(l->device);
    es->tokenFd = VRM_ENGINE_FD_TOKEN;
    es->statsSocket = g_strdup(l->statsSocket);
    es->statsFd = VRM_ENGINE_FD_STATS;
    es->deadlineConnect = l->connectTimeout;
    es->idleTimeout = l->idleTimeout;
    es->waitStream = l->waitStream;
    es->debug = l->debug;
    es->verbose = !l->debug;
}

int
vrmHelperEngineSpawn(const vrmEngineLaunch *l, GPid *pid, guint64 *startTime,
                     int *setupFd)
{
    g_auto(vrmEngineSettings) es = { 0 };
    g_autoptr(vrmEngineCommand) cmd = NULL;
    vrmEngineSetup setup = {
        .memlock = vrmHelperEngineMemlock(l), .drop = l->dropPrivileges,
        .uid = l->uid, .gid = l->gid,
    };
    int status[2] = { -1, -1 };
    int logfd = -1;
    int statsFd = -1;
    int ret = -1;

    vrmEngineLaunchSettings(l, &es);
    cmd = vrmEngineCommandNew(&es, l->program);
    /* its standard error to a file, not a pipe: a pipe would break
     * (SIGPIPE) when the helper restarts while the engine runs */
    if ((logfd = open(l->logFile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
                      O_NOFOLLOW, 0600)) < 0) {
        vrmReportSystemError(errno, _("cannot create the engine log %1$s"), l->logFile);
        goto cleanup;
    }
    /* the final record: a descriptor of the helper's state directory,
     * which the engine (another user) could not open itself */
    if ((statsFd = open(l->statsFile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
                        O_NOFOLLOW, 0600)) < 0) {
        vrmReportSystemError(errno, _("cannot create the engine's stats file %1$s"),
                             l->statsFile);
        goto cleanup;
    }
    if (vrmEngineCommandPassToken(cmd, l->token) < 0)
        goto cleanup;
    /* its read end is watched from the main loop: never a blocking read */
    if (!g_unix_open_pipe(status, FD_CLOEXEC, NULL) ||
        !g_unix_set_fd_nonblocking(status[0], TRUE, NULL)) {
        vrmReportSystemError(errno, _("cannot create a pipe"));
        goto cleanup;
    }
    vrmEngineCommandPassFd(cmd, statsFd, VRM_ENGINE_FD_STATS);
    if (l->source)
        vrmEngineCommandPassFd(cmd, l->qemuListenFd, VRM_ENGINE_FD_QEMU_LISTEN);
    if (l->source && l->diskChannels)
        vrmEngineCommandPassFd(cmd, l->diskListenFd, VRM_ENGINE_FD_DISK_LISTEN);
    if (l->source && l->tcpListenFd >= 0)
        vrmEngineCommandPassFd(cmd, l->tcpListenFd, VRM_ENGINE_FD_TCP_LISTEN);
    vrmEngineCommandPassFd(cmd, status[1], VRM_ENGINE_FD_SETUP_STATUS);
    vrmEngineCommandSetStderr(cmd, logfd);
    vrmEngineCommandSetChildSetup(cmd, vrmEngineChildSetup, &setup);
    if (vrmEngineCommandRun(cmd, G_SPAWN_STDOUT_TO_DEV_NULL, pid) < 0)
        goto cleanup;
    close(status[1]);
    status[1] = -1;
    /* a failed set-up ends the child (126) and is read by the caller
     * (vrmHelperEngineSetupRead); its start time is the engine's */
    *startTime = vrmProcStartTime(*pid);
    *setupFd = status[0];
    status[0] = -1;
    ret = 0;

 cleanup:
    if (status[0] >= 0)
        close(status[0]);
    if (status[1] >= 0)
        close(status[1]);
    if (statsFd >= 0)
        close(statsFd);
    if (logfd >= 0)
        close(logfd);
    return ret;
}


/* ---- the stats probe --------------------------------------------------- */

struct _vrmStatsProbe {
    int fd;
    guint watch;
    guint timer;
    GByteArray *buf;
    vrmStatsProbeFunc done;
    gpointer opaque;
    GDestroyNotify destroy;
};

static void
vrmStatsProbeFree(vrmStatsProbe *p)
{
    g_clear_handle_id(&p->watch, g_source_remove);
    g_clear_handle_id(&p->timer, g_source_remove);
    if (p->fd >= 0)
        close(p->fd);
    g_byte_array_unref(p->buf);
    g_free(p);
}

void
vrmStatsProbeCancel(vrmStatsProbe *probe)
{
    if (!probe)
        return;
    if (probe->destroy)
        probe->destroy(probe->opaque);
    vrmStatsProbeFree(probe);
}

/* The end of a probe: report and free (the callback may start another) */
static void
vrmStatsProbeEnd(vrmStatsProbe *p, bool answered)
{
    vrmStatsProbeFunc done = p->done;
    gpointer opaque = p->opaque;
    g_autofree char *text = NULL;

    if (answered)
        text = g_strndup((const char *)p->buf->data, p->buf->len);
    vrmStatsProbeFree(p);
    done(text, opaque);
}

static gboolean
vrmStatsProbeTimeout(gpointer opaque)
{
    vrmStatsProbe *p = opaque;

    p->timer = 0;
    vrmStatsProbeEnd(p, false);
    return G_SOURCE_REMOVE;
}

static gboolean
vrmStatsProbeReadable(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmStatsProbe *p = opaque;
    guint8 chunk[4096];

    for (;;) {
        ssize_t r = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);

        if (r > 0) {
            if (p->buf->len + r > VRM_ENGINE_PROBE_MAX)
                break;
            g_byte_array_append(p->buf, chunk, r);
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return G_SOURCE_CONTINUE;
        p->watch = 0;
        vrmStatsProbeEnd(p, r == 0 && p->buf->len > 0);
        return G_SOURCE_REMOVE;
    }
    p->watch = 0;
    vrmStatsProbeEnd(p, false);
    return G_SOURCE_REMOVE;
}

vrmStatsProbe *
vrmStatsProbeStart(const char *path, pid_t pid, unsigned int timeoutMs,
                   vrmStatsProbeFunc done, gpointer opaque,
                   GDestroyNotify destroy)
{
    struct sockaddr_un sa;
    struct ucred cred;
    socklen_t clen = sizeof(cred);
    vrmStatsProbe *p;
    int fd;

    if (!vrmUnixAddressFill(path, &sa))
        return NULL;
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
        return NULL;
    /* a UNIX stream connect never waits: queued, refused or EAGAIN (a
     * full backlog, i.e. an engine that does not accept) */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return NULL;
    }
    /* the listener must be the engine itself, not whoever took its path */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
        (pid > 0 && cred.pid != pid)) {
        VRM_DEBUG("stats socket %s is served by pid %d, not by the engine %d",
                  path, (int)cred.pid, (int)pid);
        close(fd);
        return NULL;
    }
    p = g_new0(vrmStatsProbe, 1);
    p->fd = fd;
    p->buf = g_byte_array_new();
    p->done = done;
    p->opaque = opaque;
    p->destroy = destroy;
    p->watch = g_unix_fd_add(fd, G_IO_IN | G_IO_HUP | G_IO_ERR,
                             vrmStatsProbeReadable, p);
    p->timer = g_timeout_add(timeoutMs, vrmStatsProbeTimeout, p);
    return p;
}


/* ---- processes --------------------------------------------------------- */

/* Field 22 of /proc/PID/stat: the start time in clock ticks since boot */
guint64
vrmProcStartTime(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
    g_autofree char *data = NULL;

    if (!g_file_get_contents(path, &data, NULL, NULL))
        return 0;
    return vrmParseProcStartTime(data);
}

bool
vrmProcIsOurEngine(pid_t pid, uid_t uid, const char *exe, guint64 startTime)
{
    g_autofree char *link = g_strdup_printf("/proc/%d/exe", (int)pid);
    g_autofree char *status = g_strdup_printf("/proc/%d/status", (int)pid);
    g_autofree char *target = NULL;
    g_autofree char *real = NULL;
    g_autofree char *data = NULL;
    const char *line;

    if (pid <= 0 || startTime == 0 || vrmProcStartTime(pid) != startTime)
        return false;
    if (!(target = g_file_read_link(link, NULL)))
        return false;
    real = exe ? realpath(exe, NULL) : NULL;
    if (!real || g_strcmp0(target, real) != 0)
        return false;
    if (!g_file_get_contents(status, &data, NULL, NULL) ||
        !(line = strstr(data, "\nUid:")))
        return false;
    return (uid_t)g_ascii_strtoull(line + 5, NULL, 10) == uid;
}

bool
vrmProcGone(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
    g_autofree char *stat = NULL;
    const char *paren;

    if (kill(pid, 0) < 0 && errno == ESRCH)
        return true;
    if (!g_file_get_contents(path, &stat, NULL, NULL))
        return true;
    /* a zombie its new parent has not reaped yet is gone too */
    if ((paren = strrchr(stat, ')')) && paren[1] == ' ' &&
        (paren[2] == 'Z' || paren[2] == 'X'))
        return true;
    return false;
}
