/*
 * vrmhelperd.c: virt-rdmad: control socket, job table, engines
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* SO_PEERCRED, struct ucred, accept4 */
#endif

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include <glib-unix.h>

#include "vrmhelperd.h"
#include "vrmhelperclient.h"
#include "vrmhelperpolicy.h"
#include "vrmnegotiation.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

#define VRM_HELPER_POLL_MS 200          /* stats of live engines */
#define VRM_HELPER_WAIT_POLL_MS 20      /* while a client waits on an engine */
#define VRM_HELPER_REQUEST_TIMEOUT_S 10 /* a client must send its request */
#define VRM_HELPER_REPLY_TIMEOUT_US (5 * G_USEC_PER_SEC)
#define VRM_HELPER_STATS_TIMEOUT_US (300 * 1000)
/* After a restart, how long an engine may take to answer before it is
 * ended: a loaded host (or a TCG sandbox) can stall it for seconds. */
#define VRM_HELPER_ADOPT_TIMEOUT_US (10 * G_USEC_PER_SEC)
#define VRM_HELPER_LISTEN_TIMEOUT_US (15 * G_USEC_PER_SEC)
#define VRM_HELPER_MEMLOCK_SLACK (64ull * 1024 * 1024)

/* What a client waiting on a job waits for */
typedef enum {
    VRM_WAIT_LISTENING,     /* source: engine serving its stats */
    VRM_WAIT_CONNECTED,     /* destination: every channel connected */
} vrmWaitFor;

typedef struct {
    vrmHelperDaemon *d;
    int fd;
    guint watch;
    guint timeout;
    GByteArray *buf;
    vrmWaitFor waitFor;
    int refusedCode;                /* peer not allowed: the reply, once */
    char *refused;                  /* its request has been read */
} vrmHelperConn;

struct _vrmHelperDaemon {
    vrmHelperConfig *conf;
    vrmHostPolicy policy;
    char *socketPath;
    char *enginePath;
    unsigned int connectTimeout;
    unsigned int idleTimeout;
    bool engineDebug;
    GMainLoop *loop;
    int listenFd;
    bool ownSocket;                 /* we created it: unlink at the end */
    guint listenWatch;
    guint pollTimer;
    guint waitTimer;            /* runs only while some job has a waiter */
    guint sigterm, sigint;
    GHashTable *jobs;               /* id -> vrmHelperJob */
    unsigned long long nextId;
    unsigned int lastPort;
};

static void vrmHelperConnFree(vrmHelperConn *c);
static void vrmHelperJobFinish(vrmHelperDaemon *d, vrmHelperJob *job,
                               vrmJobState state, const char *error);

/* ---- replies --------------------------------------------------------- */

static char *
vrmHelperFormatReply(int code, const char *message, vrmJobRecord **records,
                     size_t nrecords)
{
    g_autoptr(vrmControlMessage) msg = NULL;
    size_t i;

    if (code != VRM_ERR_OK)
        return vrmControlMessageFormat((msg = vrmControlReplyNewError(code, message)));
    msg = vrmControlMessageNew(VRM_CONTROL_REPLY);
    msg->status = VRM_REPLY_OK;
    /* the records stay in the job table: borrow them */
    g_ptr_array_set_free_func(msg->jobs, NULL);
    for (i = 0; i < nrecords; i++)
        g_ptr_array_add(msg->jobs, records[i]);
    return vrmControlMessageFormat(msg);
}

static void
vrmHelperConnSend(vrmHelperConn *c, const char *xml)
{
    if (!xml ||
        vrmHelperFrameWrite(c->fd, xml, strlen(xml),
                            g_get_monotonic_time() + VRM_HELPER_REPLY_TIMEOUT_US) < 0)
        VRM_WARN("cannot send a reply: %s", vrmGetLastErrorMessage());
}

static void
vrmHelperConnReplyError(vrmHelperConn *c, int code, const char *message)
{
    g_autofree char *xml = vrmHelperFormatReply(code ? code : VRM_ERR_INTERNAL,
                                                message, NULL, 0);

    vrmHelperConnSend(c, xml);
    vrmHelperConnFree(c);
}

static void
vrmHelperConnReplyLastError(vrmHelperConn *c)
{
    vrmHelperConnReplyError(c, vrmGetLastErrorCode(), vrmGetLastErrorMessage());
}

static void
vrmHelperConnReplyJobs(vrmHelperConn *c, vrmJobRecord **records, size_t n)
{
    g_autofree char *xml = vrmHelperFormatReply(VRM_ERR_OK, NULL, records, n);

    vrmHelperConnSend(c, xml);
    vrmHelperConnFree(c);
}

static void
vrmHelperConnFree(vrmHelperConn *c)
{
    if (!c)
        return;
    if (c->watch)
        g_source_remove(c->watch);
    if (c->timeout)
        g_source_remove(c->timeout);
    if (c->fd >= 0)
        close(c->fd);
    if (c->buf)
        g_byte_array_unref(c->buf);
    g_free(c->refused);
    g_free(c);
}

/* ---- job table ------------------------------------------------------- */

static unsigned int
vrmHelperLiveJobs(vrmHelperDaemon *d, GHashTable *ports)
{
    GHashTableIter it;
    gpointer v;
    unsigned int n = 0;

    g_hash_table_iter_init(&it, d->jobs);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        vrmHelperJob *job = v;

        if (vrmJobStateIsFinal(job->record->state))
            continue;
        n++;
        if (ports && job->cmPort)
            g_hash_table_add(ports, GUINT_TO_POINTER(job->cmPort));
    }
    return n;
}

static gint
vrmHelperJobCmp(gconstpointer a, gconstpointer b)
{
    const vrmHelperJob *ja = *(vrmHelperJob *const *)a;
    const vrmHelperJob *jb = *(vrmHelperJob *const *)b;

    return ja->record->id < jb->record->id ? -1 : ja->record->id > jb->record->id;
}

/* Every job, oldest first (array does not own them) */
static GPtrArray *
vrmHelperJobsSorted(vrmHelperDaemon *d)
{
    GPtrArray *all = g_ptr_array_new();
    GHashTableIter it;
    gpointer v;

    g_hash_table_iter_init(&it, d->jobs);
    while (g_hash_table_iter_next(&it, NULL, &v))
        g_ptr_array_add(all, v);
    g_ptr_array_sort(all, vrmHelperJobCmp);
    return all;
}

static void
vrmHelperSave(vrmHelperDaemon *d, vrmHelperJob *job)
{
    if (vrmHelperJobSave(job, d->conf->stateDir) < 0)
        VRM_WARN("%s", vrmGetLastErrorMessage());
}

/* Keep at most history-size finished jobs */
static void
vrmHelperPruneHistory(vrmHelperDaemon *d)
{
    g_autoptr(GPtrArray) all = vrmHelperJobsSorted(d);
    unsigned int finished = 0;
    guint i;

    for (i = 0; i < all->len; i++) {
        vrmHelperJob *job = all->pdata[i];

        if (vrmJobStateIsFinal(job->record->state) && !job->waiter)
            finished++;
    }
    for (i = 0; i < all->len && finished > d->conf->historySize; i++) {
        vrmHelperJob *job = all->pdata[i];
        unsigned long long id = job->record->id;

        if (!vrmJobStateIsFinal(job->record->state) || job->waiter)
            continue;
        vrmHelperJobRemoveFiles(d->conf->stateDir, id);
        g_hash_table_remove(d->jobs, &id);
        finished--;
    }
}

/* ---- engines --------------------------------------------------------- */

typedef struct {
    rlim_t memlock;
    bool dropCaps;
} vrmEngineSetup;

/* In the child, between fork and exec: async-signal-safe calls only */
static void
vrmHelperEngineChildSetup(gpointer opaque)
{
    vrmEngineSetup *s = opaque;
    struct rlimit rl = { s->memlock, s->memlock };
    int cap;

    /* its own process group: a signal to the helper's group (Ctrl-C in
     * a terminal) does not end the migrations, a restart finds them */
    setpgid(0, 0);
    setrlimit(RLIMIT_MEMLOCK, &rl);
    if (s->dropCaps) {
        /* keep only what joining QEMU's socket needs; CAP_IPC_LOCK goes
         * so that the memlock limit above applies */
        for (cap = 0; cap <= CAP_LAST_CAP; cap++) {
            if (cap == CAP_DAC_OVERRIDE)
                continue;
            prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
    }
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

/* Stats of a live engine: 1 read, 0 not (yet) answering */
static int
vrmHelperReadEngineStats(vrmHelperJob *job, vrmEngineSnapshot *es)
{
    gint64 deadline = g_get_monotonic_time() + VRM_HELPER_STATS_TIMEOUT_US;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    g_autoptr(GString) buf = g_string_new(NULL);
    int fd;

    if (!job->statsSocket || strlen(job->statsSocket) >= sizeof(sa.sun_path))
        return 0;
    strcpy(sa.sun_path, job->statsSocket);
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return 0;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (;;) {
        char chunk[4096];
        ssize_t r = read(fd, chunk, sizeof(chunk));

        if (r > 0) {
            g_string_append_len(buf, chunk, r);
            if (buf->len > VRM_HELPER_FRAME_MAX)
                break;
            continue;
        }
        if (r == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN && g_get_monotonic_time() < deadline) {
            g_usleep(2000);
            continue;
        }
        break;
    }
    close(fd);
    if (buf->len == 0 || vrmHelperEngineStatsParse(buf->str, es) < 0)
        return 0;
    return 1;
}

static void
vrmHelperReadFinalStats(vrmHelperJob *job, vrmEngineSnapshot *es, bool *have)
{
    g_autofree char *data = NULL;

    *have = false;
    if (job->statsFile && g_file_get_contents(job->statsFile, &data, NULL, NULL) &&
        vrmHelperEngineStatsParse(g_strstrip(data), es) == 0)
        *have = true;
}

/*
 * The per-job path names a socket that only this job uses: the source
 * engine's (it removes it itself) or, on the destination, the one QEMU
 * listens on, which stays behind when libvirt kills QEMU after a failed
 * or aborted migration. Remove what is left once the job has ended.
 */
static void
vrmHelperRemoveJobSocket(vrmHelperJob *job)
{
    const char *path = job->record->socketPath;
    struct stat st;

    if (!path || lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
        return;
    if (unlink(path) < 0 && errno != ENOENT)
        VRM_WARN(_("job %1$llu: cannot remove %2$s: %3$s"),
                 job->record->id, path, g_strerror(errno));
}

static void
vrmHelperJobFinish(vrmHelperDaemon *d, vrmHelperJob *job, vrmJobState state,
                   const char *error)
{
    vrmEngineSnapshot es = { 0 };
    bool have;
    vrmHelperConn *waiter = job->waiter;

    vrmHelperReadFinalStats(job, &es, &have);
    if (have)
        vrmHelperJobApplyStats(job, &es);
    vrmEngineSnapshotClear(&es);
    if (job->cancelRequested)
        state = VRM_JOB_STATE_CANCELLED;
    if (!vrmJobStateIsFinal(job->record->state))
        vrmHelperJobSetState(job, state, error);
    if (job->childWatch) {
        g_source_remove(job->childWatch);
        job->childWatch = 0;
    }
    if (job->pid > 0 && !job->adopted)
        g_spawn_close_pid(job->pid);
    job->pid = 0;
    job->cmPort = 0;
    vrmHelperRemoveJobSocket(job);
    vrmHelperSave(d, job);

    if (waiter) {
        job->waiter = NULL;
        if (job->record->state == VRM_JOB_STATE_CANCELLED)
            vrmHelperConnReplyError(waiter, VRM_ERR_CANCELLED,
                                    _("The migration job was cancelled."));
        else if (job->record->state == VRM_JOB_STATE_COMPLETED)
            vrmHelperConnReplyJobs(waiter, &job->record, 1);
        else
            vrmHelperConnReplyError(waiter, VRM_ERR_PEER, job->record->error);
    }
    vrmHelperPruneHistory(d);
}

typedef struct {
    vrmHelperDaemon *d;
    unsigned long long id;
} vrmHelperJobRef;

static void
vrmHelperEngineExited(GPid pid, gint status, gpointer opaque)
{
    vrmHelperJobRef *ref = opaque;
    vrmHelperDaemon *d = ref->d;
    vrmHelperJob *job = g_hash_table_lookup(d->jobs, &ref->id);
    g_autofree char *reason = NULL;
    vrmEngineSnapshot fin = { 0 };
    bool have;

    if (!job || job->pid != pid)
        return;
    job->childWatch = 0;    /* this source is being removed */

    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        vrmHelperJobFinish(d, job, VRM_JOB_STATE_COMPLETED, NULL);
        return;
    }
    /* the engine's reason is in its final stats record, never in its log */
    vrmHelperReadFinalStats(job, &fin, &have);
    if (have && fin.error)
        reason = g_strdup(fin.error);
    vrmEngineSnapshotClear(&fin);
    if (!reason) {
        if (WIFSIGNALED(status))
            reason = g_strdup_printf(_("the transport engine (pid %1$d) was killed by signal %2$d"),
                                     pid, WTERMSIG(status));
        else
            reason = g_strdup_printf(_("the transport engine (pid %1$d) ended with status %2$d"),
                                     pid, WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        g_autofree char *line = g_steal_pointer(&reason);

        reason = g_strdup_printf(_("the transport engine (pid %1$d) was killed by signal %2$d after: %3$s"),
                                 pid, WTERMSIG(status), line);
    }
    vrmHelperJobFinish(d, job, VRM_JOB_STATE_FAILED, reason);
}

static char *
vrmHelperJobFile(vrmHelperDaemon *d, vrmHelperJob *job, const char *dir,
                 const char *ext)
{
    return g_strdup_printf("%s/job-%llu.%s", dir, job->record->id, ext);
}

/* QEMU's listening socket of a source job, bound here so that the path
 * stays the helper's: mode 0660 with an access group, 0600 without */
static int
vrmHelperQemuListen(vrmHelperDaemon *d, const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    mode_t old;
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        vrmReportError(VRM_ERR_INVALID_ARG, _("The socket path %1$s is too long."), path);
        return -1;
    }
    g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        vrmReportSystemError(errno, _("Cannot create a UNIX socket"));
        return -1;
    }
    unlink(path);
    old = umask(d->conf->group ? 0117 : 0177);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
        vrmReportSystemError(errno, _("Cannot listen on %1$s"), path);
        umask(old);
        close(fd);
        return -1;
    }
    umask(old);
    return fd;
}

/* Spawn the engine of @job with the negotiated values, through the
 * contract (driver/contract/vrmenginesettings.h) */
static int
vrmHelperSpawnEngine(vrmHelperDaemon *d, vrmHelperJob *job,
                     const vrmOffer *offer, const vrmAnswer *answer,
                     const char *device)
{
    g_auto(vrmEngineSettings) es = { 0 };
    g_auto(GStrv) argv = NULL;
    g_autoptr(GError) err = NULL;
    bool source = job->record->role == VRM_JOB_ROLE_SOURCE;
    guint32 caps = source ? offer->capabilities : answer->capabilities;
    vrmEngineSetup setup;
    int srcFds[4], dstFds[4];
    guint nfds = 0;
    vrmHelperJobRef *ref;
    int logfd = -1, tokenFd = -1, statsFd = -1, qemuFd = -1;
    GPid pid;
    int ret = -1;

    job->statsSocket = vrmHelperJobFile(d, job, d->conf->runDir, "stats");
    job->statsFile = vrmHelperJobFile(d, job, d->conf->stateDir, "stats.json");
    job->logFile = vrmHelperJobFile(d, job, d->conf->stateDir, "log");
    unlink(job->statsSocket);
    unlink(job->statsFile);

    vrmEngineSettingsInit(&es);
    es.role = source ? VRM_ENGINE_ROLE_SOURCE : VRM_ENGINE_ROLE_DESTINATION;
    es.domainUUID = g_strdup(job->record->domainUUID);
    es.address = g_strdup(offer->address);
    es.port = offer->port;
    es.channels = source ? offer->channels : answer->channels;
    es.chunkSize = source ? offer->chunkSize : answer->chunkSize;
    es.ringDepth = source ? offer->ringDepth : answer->ringDepth;
    es.pinAll = caps & VRM_CAP_PIN_ALL;
    es.noWriteImm = !(caps & VRM_CAP_WRITE_IMM);
    es.maxPinned = d->conf->maxPinnedBytes;
    es.device = g_strdup(device);
    es.statsSocket = g_strdup(job->statsSocket);
    es.deadlineConnect = d->connectTimeout;
    es.idleTimeout = d->idleTimeout;
    es.debug = d->engineDebug;
    es.verbose = !d->engineDebug;
    es.tokenFd = VRM_ENGINE_FD_TOKEN;
    es.statsFd = VRM_ENGINE_FD_STATS;
    if (source)
        es.qemuListenFd = VRM_ENGINE_FD_QEMU_LISTEN;
    else
        es.qemuPath = g_strdup(job->record->socketPath);
    argv = vrmEngineSettingsEncode(&es, d->enginePath);

    setup.memlock = vrmEngineSettingsPinnedBytes(&es) * 2 + VRM_HELPER_MEMLOCK_SLACK;
    setup.dropCaps = geteuid() == 0;
    /* the engine's stderr goes to a file, not a pipe: a pipe would break
     * (SIGPIPE) when the helper restarts while the engine runs */
    if ((logfd = open(job->logFile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
        vrmReportSystemError(errno, _("Cannot create the engine log %1$s"), job->logFile);
        goto cleanup;
    }
    if ((statsFd = open(job->statsFile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
        vrmReportSystemError(errno, _("Cannot create the engine's stats file %1$s"),
                             job->statsFile);
        goto cleanup;
    }
    /* The token goes through a pipe: not the command line that every local
     * user sees, not the environment that stays readable */
    if ((tokenFd = vrmEngineTokenPipe(&offer->token)) < 0)
        goto cleanup;
    if (source && (qemuFd = vrmHelperQemuListen(d, job->record->socketPath)) < 0)
        goto cleanup;
    srcFds[nfds] = tokenFd;
    dstFds[nfds++] = VRM_ENGINE_FD_TOKEN;
    srcFds[nfds] = statsFd;
    dstFds[nfds++] = VRM_ENGINE_FD_STATS;
    if (qemuFd >= 0) {
        srcFds[nfds] = qemuFd;
        dstFds[nfds++] = VRM_ENGINE_FD_QEMU_LISTEN;
    }
    if (!g_spawn_async_with_pipes_and_fds(NULL, (const char *const *)argv, NULL,
                                          G_SPAWN_DO_NOT_REAP_CHILD |
                                          G_SPAWN_STDOUT_TO_DEV_NULL,
                                          vrmHelperEngineChildSetup, &setup,
                                          -1, -1, logfd, srcFds, dstFds, nfds,
                                          &pid, NULL, NULL, NULL, &err)) {
        vrmReportError(VRM_ERR_SYSTEM,
                       _("Cannot start the transport engine %1$s: %2$s"),
                       d->enginePath, err->message);
        goto cleanup;
    }
    VRM_INFO("job %llu: engine pid %d: %s %s", job->record->id, (int)pid,
             source ? "source" : "destination", job->record->socketPath);
    job->pid = pid;
    ref = g_new0(vrmHelperJobRef, 1);
    ref->d = d;
    ref->id = job->record->id;
    job->childWatch = g_child_watch_add_full(G_PRIORITY_DEFAULT, pid,
                                             vrmHelperEngineExited, ref, g_free);
    ret = 0;

 cleanup:
    if (logfd >= 0)
        close(logfd);
    if (statsFd >= 0)
        close(statsFd);
    if (tokenFd >= 0)
        close(tokenFd);
    if (qemuFd >= 0)
        close(qemuFd);
    return ret;
}

static void
vrmHelperKillEngine(vrmHelperJob *job, int sig)
{
    if (job->pid > 0)
        kill(job->pid, sig);
}

/* Is @pid still the engine we recorded (after a restart)? */
static bool
vrmHelperIsOurEngine(vrmHelperDaemon *d, vrmHelperJob *job)
{
    g_autofree char *base = g_path_get_basename(d->enginePath);
    g_autofree char *path = g_strdup_printf("/proc/%d/cmdline", (int)job->pid);
    g_autofree char *data = NULL;
    gsize len, off;
    bool engine = false, stats = false;

    if (job->pid <= 0 || !g_file_get_contents(path, &data, &len, NULL))
        return false;
    for (off = 0; off < len; off += strlen(data + off) + 1) {
        if (off == 0 && (g_str_equal(data, d->enginePath) ||
                         g_str_has_suffix(data, base)))
            engine = true;
        if (job->statsSocket && g_str_equal(data + off, job->statsSocket))
            stats = true;
    }
    return engine && stats;
}

/* ---- the poll timer: stats, waiters, deadlines, adopted engines ------ */

/* An engine that is not our child has ended: gone, or a zombie that its
 * new parent has not reaped yet */
static bool
vrmHelperPidGone(GPid pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
    g_autofree char *stat = NULL;
    const char *close_paren;

    if (kill(pid, 0) < 0 && errno == ESRCH)
        return true;
    if (!g_file_get_contents(path, &stat, NULL, NULL))
        return true;
    /* "PID (COMM) STATE ...": COMM may contain anything but ends at the last ')' */
    if ((close_paren = strrchr(stat, ')')) && close_paren[1] == ' ' &&
        (close_paren[2] == 'Z' || close_paren[2] == 'X'))
        return true;
    return false;
}

static void
vrmHelperPollJob(vrmHelperDaemon *d, vrmHelperJob *job)
{
    vrmEngineSnapshot es = { 0 };
    int have = vrmHelperReadEngineStats(job, &es);
    vrmHelperConn *waiter = job->waiter;

    if (have) {
        vrmJobState before = job->record->state;

        vrmHelperJobApplyStats(job, &es);
        if (job->record->state != before)
            vrmHelperSave(d, job);
    }
    vrmEngineSnapshotClear(&es);

    if (job->adopted && job->pid > 0 && vrmHelperPidGone(job->pid)) {
        vrmEngineSnapshot fin = { 0 };
        bool fhave;
        vrmJobState st = VRM_JOB_STATE_FAILED;
        g_autofree char *why = NULL;

        vrmHelperReadFinalStats(job, &fin, &fhave);
        if (fhave && fin.state == VRM_ENGINE_STATE_COMPLETED)
            st = VRM_JOB_STATE_COMPLETED;
        else if (fhave && fin.error)
            why = g_strdup(fin.error);
        else
            why = g_strdup(_("the transport engine ended while the helper was restarting"));
        vrmEngineSnapshotClear(&fin);
        vrmHelperJobFinish(d, job, st, why);
        return;
    }

    if (!waiter)
        return;
    if ((waiter->waitFor == VRM_WAIT_LISTENING && have) ||
        (waiter->waitFor == VRM_WAIT_CONNECTED &&
         job->record->state != VRM_JOB_STATE_NEGOTIATING)) {
        job->waiter = NULL;
        vrmHelperConnReplyJobs(waiter, &job->record, 1);
        return;
    }
    if (g_get_monotonic_time() > job->connectDeadline) {
        g_autofree char *why =
            waiter->waitFor == VRM_WAIT_CONNECTED ?
            g_strdup_printf(_("the destination engine could not connect to the source engine at %1$s port %2$u within %3$u seconds"),
                            job->record->migration->offer->address,
                            job->record->migration->offer->port, d->connectTimeout) :
            g_strdup(_("the source engine did not start listening in time"));

        job->waiter = NULL;
        vrmHelperKillEngine(job, SIGTERM);
        vrmHelperJobSetState(job, VRM_JOB_STATE_FAILED, why);
        vrmHelperSave(d, job);
        vrmHelperConnReplyError(waiter, VRM_ERR_TIMEOUT, why);
    }
}

/*
 * Poll the engines of live jobs (only those a client waits for, with
 * @waitersOnly) and tell whether some client still waits. Jobs are looked
 * up by id at each step: finishing one job can prune others from the
 * history.
 */
static bool
vrmHelperPollJobs(vrmHelperDaemon *d, bool waitersOnly)
{
    g_autoptr(GPtrArray) all = vrmHelperJobsSorted(d);
    g_autofree unsigned long long *ids = g_new(unsigned long long, all->len + 1);
    bool waiting = false;
    guint i;

    for (i = 0; i < all->len; i++)
        ids[i] = ((vrmHelperJob *)all->pdata[i])->record->id;
    for (i = 0; i < all->len; i++) {
        vrmHelperJob *job = g_hash_table_lookup(d->jobs, &ids[i]);

        if (!job || job->pid <= 0 || (waitersOnly && !job->waiter))
            continue;
        vrmHelperPollJob(d, job);
        if ((job = g_hash_table_lookup(d->jobs, &ids[i])) && job->waiter)
            waiting = true;
    }
    return waiting;
}

static gboolean
vrmHelperPollTimer(gpointer opaque)
{
    vrmHelperPollJobs(opaque, false);
    return G_SOURCE_CONTINUE;
}

/* A client waits for an engine to listen or to connect, and every such
 * wait lies on the migration's critical path (before libvirt starts, and
 * before the destination QEMU starts): look at those engines often. */
static gboolean
vrmHelperWaitTimer(gpointer opaque)
{
    vrmHelperDaemon *d = opaque;

    if (vrmHelperPollJobs(d, true))
        return G_SOURCE_CONTINUE;
    d->waitTimer = 0;
    return G_SOURCE_REMOVE;
}

/* ---- requests -------------------------------------------------------- */

static int
vrmHelperErrorForRefusal(vrmRefusalReason reason)
{
    switch (reason) {
    case VRM_REFUSAL_VERSION_TOO_OLD:
    case VRM_REFUSAL_VERSION_TOO_NEW:
        return VRM_ERR_VERSION;
    case VRM_REFUSAL_NO_DEVICE:
        return VRM_ERR_NO_DEVICE;
    case VRM_REFUSAL_BUSY:
        return VRM_ERR_RESOURCE;
    case VRM_REFUSAL_POLICY:
        return VRM_ERR_POLICY;
    case VRM_REFUSAL_INTERNAL:
    case VRM_REFUSAL_LAST:
        break;
    }
    return VRM_ERR_INTERNAL;
}

static vrmHelperJob *
vrmHelperJobCreate(vrmHelperDaemon *d, vrmJobRole role,
                   const vrmControlMessage *msg, const vrmToken *token)
{
    vrmHelperJob *job = vrmHelperJobNew(d->nextId++, role);
    g_autofree char *key = vrmHelperJobKey(token);
    unsigned long long *id = g_new(unsigned long long, 1);

    job->record->domainName = g_strdup(msg->domainName);
    job->record->domainUUID = g_strdup(msg->domainUUID);
    job->record->socketPath = g_strdup_printf("%s/job-%s.sock", d->conf->runDir, key);
    *id = job->record->id;
    g_hash_table_insert(d->jobs, id, job);
    return job;
}

static void
vrmHelperStartWaiting(vrmHelperDaemon *d, vrmHelperJob *job,
                      vrmHelperConn *c, vrmWaitFor what, gint64 timeout_us)
{
    c->waitFor = what;
    job->waiter = c;
    job->connectDeadline = g_get_monotonic_time() + timeout_us;
    vrmHelperSave(d, job);
    if (!d->waitTimer)
        d->waitTimer = g_timeout_add(VRM_HELPER_WAIT_POLL_MS, vrmHelperWaitTimer, d);
}

/* A job that failed before its engine ran: kept in the history */
static void
vrmHelperJobFailEarly(vrmHelperDaemon *d, vrmHelperJob *job, vrmHelperConn *c)
{
    int code = vrmGetLastErrorCode();
    g_autofree char *msg = g_strdup(vrmGetLastErrorMessage());

    vrmHelperJobSetState(job, VRM_JOB_STATE_FAILED, msg);
    job->cmPort = 0;
    vrmHelperSave(d, job);
    vrmHelperPruneHistory(d);
    vrmHelperConnReplyError(c, code, msg);
}

static void
vrmHelperHandleOpen(vrmHelperDaemon *d, vrmControlMessage *msg, vrmHelperConn *c)
{
    g_autoptr(vrmMigrationParams) params = g_new0(vrmMigrationParams, 1);
    g_autoptr(GHashTable) ports = g_hash_table_new(NULL, NULL);
    g_autofree char *device = NULL;
    g_autofree char *address = NULL;
    g_autoptr(vrmOffer) offer = NULL;
    unsigned int port, devPort;
    vrmHelperJob *job;

    if (msg->migration)
        vrmMigrationParamsCopy(params, &msg->migration->params);
    if (msg->overrides)
        vrmMigrationParamsMerge(params, msg->overrides);

    if (vrmHelperCheckJobLimit(vrmHelperLiveJobs(d, ports), d->conf->maxJobs) < 0)
        goto error;
    devPort = params->devicePort ? params->devicePort : d->conf->devicePort;
    if (vrmHelperDeviceCheck(params->device ? params->device : d->conf->device,
                             devPort, &device) < 0)
        goto error;
    if (params->address)
        address = g_strdup(params->address);
    else if (d->conf->address)
        address = g_strdup(d->conf->address);
    else if (!(address = vrmHelperDeviceAddress(device, devPort)))
        goto error;
    if (!(port = vrmHelperPortPick(d->conf->cmPortMin, d->conf->cmPortMax,
                                   ports, d->lastPort))) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("Every rdma_cm port from %1$u to %2$u is in use by a migration job."),
                       d->conf->cmPortMin, d->conf->cmPortMax);
        goto error;
    }
    if (!(offer = vrmOfferFromParams(params, &d->policy, address, port)))
        goto error;
    g_free(offer->device);
    offer->device = g_strdup(device);
    offer->devicePort = devPort;
    d->lastPort = port;

    job = vrmHelperJobCreate(d, VRM_JOB_ROLE_SOURCE, msg, &offer->token);
    job->cmPort = port;
    job->record->migration = vrmMigrationDefNew();
    vrmMigrationParamsCopy(&job->record->migration->params, params);
    job->record->migration->offer = vrmOfferCopy(offer);
    if (vrmHelperSpawnEngine(d, job, offer, NULL, device) < 0) {
        vrmHelperJobFailEarly(d, job, c);
        return;
    }
    vrmHelperStartWaiting(d, job, c, VRM_WAIT_LISTENING, VRM_HELPER_LISTEN_TIMEOUT_US);
    return;

 error:
    vrmHelperConnReplyLastError(c);
}

static void
vrmHelperHandleAccept(vrmHelperDaemon *d, vrmControlMessage *msg, vrmHelperConn *c)
{
    g_autoptr(vrmAnswer) answer = NULL;
    g_autofree char *device = NULL;
    const vrmOffer *offer;
    vrmHelperJob *job;

    if (!msg->migration || !msg->migration->offer) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("The request to accept a migration carries no offer."));
        goto error;
    }
    offer = msg->migration->offer;
    if (vrmHelperCheckJobLimit(vrmHelperLiveJobs(d, NULL), d->conf->maxJobs) < 0)
        goto error;
    if (vrmHelperDeviceCheck(d->conf->device, d->conf->devicePort, &device) < 0)
        goto error;
    answer = vrmNegotiate(offer, &d->policy);
    if (answer->status == VRM_ANSWER_REFUSED) {
        vrmReportError(vrmHelperErrorForRefusal(answer->reason),
                       _("virt-rdmad on the destination refused the migration: %1$s"),
                       answer->message ? answer->message :
                       vrmRefusalReasonTypeToString(answer->reason));
        goto error;
    }

    job = vrmHelperJobCreate(d, VRM_JOB_ROLE_DESTINATION, msg, &offer->token);
    job->record->migration = vrmMigrationDefNew();
    job->record->migration->offer = vrmOfferCopy(offer);
    job->record->migration->answer = vrmAnswerCopy(answer);
    if (vrmHelperSpawnEngine(d, job, offer, answer, device) < 0) {
        vrmHelperJobFailEarly(d, job, c);
        return;
    }
    vrmHelperStartWaiting(d, job, c, VRM_WAIT_CONNECTED,
                          (gint64)d->connectTimeout * G_USEC_PER_SEC + G_USEC_PER_SEC);
    return;

 error:
    vrmHelperConnReplyLastError(c);
}

static vrmHelperJob *
vrmHelperFindJob(vrmHelperDaemon *d, const vrmControlMessage *msg)
{
    if (msg->hasId) {
        vrmHelperJob *job = g_hash_table_lookup(d->jobs, &msg->id);

        if (!job)
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("There is no migration job %1$llu on this host."), msg->id);
        return job;
    }
    if (msg->domainName) {
        g_autoptr(GPtrArray) all = vrmHelperJobsSorted(d);
        gint i;

        /* the newest job of the domain */
        for (i = (gint)all->len - 1; i >= 0; i--) {
            vrmHelperJob *job = all->pdata[i];

            if (g_strcmp0(job->record->domainName, msg->domainName) == 0)
                return job;
        }
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("There is no migration job of the domain '%1$s' on this host."),
                       msg->domainName);
        return NULL;
    }
    vrmReportError(VRM_ERR_INVALID_ARG, _("The request names no job."));
    return NULL;
}

static void
vrmHelperHandleCancel(vrmHelperDaemon *d, vrmControlMessage *msg, vrmHelperConn *c)
{
    vrmHelperJob *job = vrmHelperFindJob(d, msg);

    if (!job) {
        vrmHelperConnReplyLastError(c);
        return;
    }
    if (vrmJobStateIsFinal(job->record->state)) {
        g_autofree char *m =
            g_strdup_printf(_("Migration job %1$llu has already ended (%2$s)."),
                            job->record->id,
                            vrmJobStateTypeToString(job->record->state));
        vrmHelperConnReplyError(c, VRM_ERR_INVALID_ARG, m);
        return;
    }
    job->cancelRequested = true;
    vrmHelperKillEngine(job, SIGTERM);
    vrmHelperJobSetState(job, VRM_JOB_STATE_CANCELLED,
                         _("the migration job was cancelled"));
    vrmHelperSave(d, job);
    if (job->waiter) {
        vrmHelperConn *w = job->waiter;

        job->waiter = NULL;
        vrmHelperConnReplyError(w, VRM_ERR_CANCELLED, _("The migration job was cancelled."));
    }
    vrmHelperConnReplyJobs(c, &job->record, 1);
}

static void
vrmHelperDispatch(vrmHelperDaemon *d, vrmHelperConn *c, const char *xml)
{
    g_autoptr(vrmControlMessage) msg = vrmControlMessageParseString(xml);
    vrmHelperJob *job;

    if (!msg) {
        vrmHelperConnReplyLastError(c);
        return;
    }
    VRM_DEBUG("request %s", vrmControlTypeTypeToString(msg->type));
    switch (msg->type) {
    case VRM_CONTROL_JOB_OPEN:
        vrmHelperHandleOpen(d, msg, c);
        return;
    case VRM_CONTROL_JOB_ACCEPT:
        vrmHelperHandleAccept(d, msg, c);
        return;
    case VRM_CONTROL_JOB_QUERY:
        if (!(job = vrmHelperFindJob(d, msg)))
            vrmHelperConnReplyLastError(c);
        else
            vrmHelperConnReplyJobs(c, &job->record, 1);
        return;
    case VRM_CONTROL_JOB_CANCEL:
        vrmHelperHandleCancel(d, msg, c);
        return;
    case VRM_CONTROL_JOB_LIST: {
        g_autoptr(GPtrArray) all = vrmHelperJobsSorted(d);
        g_autofree vrmJobRecord **recs = g_new0(vrmJobRecord *, all->len + 1);
        guint i;

        for (i = 0; i < all->len; i++)
            recs[i] = ((vrmHelperJob *)all->pdata[i])->record;
        vrmHelperConnReplyJobs(c, recs, all->len);
        return;
    }
    case VRM_CONTROL_REPLY:
    case VRM_CONTROL_LAST:
        break;
    }
    vrmHelperConnReplyError(c, VRM_ERR_PROTOCOL,
                            _("virt-rdmad takes requests, not replies."));
}

/* ---- the control socket ---------------------------------------------- */

static gboolean
vrmHelperConnTimeout(gpointer opaque)
{
    vrmHelperConn *c = opaque;

    c->timeout = 0;
    VRM_DEBUG("client sent no complete request in time");
    vrmHelperConnReplyError(c, VRM_ERR_TIMEOUT,
                            _("No complete request arrived in time on the control socket."));
    return G_SOURCE_REMOVE;
}

static gboolean
vrmHelperConnReadable(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmHelperConn *c = opaque;
    vrmHelperDaemon *d = c->d;
    guint8 chunk[16384];
    ssize_t r;
    guint32 len = 0;

    for (;;) {
        r = read(fd, chunk, sizeof(chunk));
        if (r > 0) {
            g_byte_array_append(c->buf, chunk, r);
            if (c->buf->len >= 4) {
                memcpy(&len, c->buf->data, 4);
                len = GUINT32_FROM_BE(len);
                if (len == 0 || len > VRM_HELPER_FRAME_MAX) {
                    g_autofree char *m =
                        g_strdup_printf(_("A control message announces %1$u bytes; the allowed size is 1 to %2$u bytes."),
                                        len, VRM_HELPER_FRAME_MAX);
                    c->watch = 0;
                    vrmHelperConnReplyError(c, VRM_ERR_PROTOCOL, m);
                    return G_SOURCE_REMOVE;
                }
                if (c->buf->len >= 4 + (gsize)len)
                    break;
            }
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return G_SOURCE_CONTINUE;
        /* EOF or error before a whole request: drop the client */
        c->watch = 0;
        vrmHelperConnFree(c);
        return G_SOURCE_REMOVE;
    }

    /* a whole request: no more reading, no request timeout */
    c->watch = 0;
    if (c->timeout) {
        g_source_remove(c->timeout);
        c->timeout = 0;
    }
    {
        g_autofree char *xml = g_strndup((const char *)c->buf->data + 4, len);

        if (strlen(xml) != len) {
            vrmHelperConnReplyError(c, VRM_ERR_PROTOCOL,
                                    _("A control message contains a NUL byte."));
            return G_SOURCE_REMOVE;
        }
        if (c->refused) {
            g_autofree char *why = g_steal_pointer(&c->refused);

            vrmHelperConnReplyError(c, c->refusedCode, why);
            return G_SOURCE_REMOVE;
        }
        vrmResetLastError();
        vrmHelperDispatch(d, c, xml);
    }
    return G_SOURCE_REMOVE;
}

static gboolean
vrmHelperAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmHelperDaemon *d = opaque;
    int cfd;

    while ((cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        vrmHelperConn *c = g_new0(vrmHelperConn, 1);

        c->d = d;
        c->fd = cfd;
        c->buf = g_byte_array_new();
        if (vrmHelperPeerCheck(cfd, d->conf->group) < 0) {
            /* answered once its request is read: closing a socket with
             * unread data would reset it and lose the reply */
            VRM_WARN("%s", vrmGetLastErrorMessage());
            c->refusedCode = vrmGetLastErrorCode();
            c->refused = g_strdup(vrmGetLastErrorMessage());
        }
        c->watch = g_unix_fd_add(cfd, G_IO_IN | G_IO_HUP | G_IO_ERR,
                                 vrmHelperConnReadable, c);
        c->timeout = g_timeout_add_seconds(VRM_HELPER_REQUEST_TIMEOUT_S,
                                           vrmHelperConnTimeout, c);
    }
    return G_SOURCE_CONTINUE;
}

/* systemd socket activation: fd 3 if LISTEN_PID is us */
static int
vrmHelperActivationFd(void)
{
    const char *pid = g_getenv("LISTEN_PID");
    const char *fds = g_getenv("LISTEN_FDS");

    if (!pid || !fds || g_ascii_strtoll(pid, NULL, 10) != getpid() ||
        g_ascii_strtoll(fds, NULL, 10) < 1)
        return -1;
    g_unsetenv("LISTEN_PID");
    g_unsetenv("LISTEN_FDS");
    g_unsetenv("LISTEN_FDNAMES");
    fcntl(3, F_SETFD, FD_CLOEXEC);
    return 3;
}

static int
vrmHelperListen(vrmHelperDaemon *d)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd;

    if ((fd = vrmHelperActivationFd()) >= 0) {
        VRM_INFO("using the control socket passed by systemd");
        d->listenFd = fd;
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        return 0;
    }
    if (strlen(d->socketPath) >= sizeof(sa.sun_path)) {
        vrmReportError(VRM_ERR_CONFIG, _("The socket path %1$s is too long."),
                       d->socketPath);
        return -1;
    }
    strcpy(sa.sun_path, d->socketPath);
    if (g_file_test(d->socketPath, G_FILE_TEST_EXISTS)) {
        int probe = vrmHelperConnect(d->socketPath,
                                     g_get_monotonic_time() + G_USEC_PER_SEC);
        if (probe >= 0) {
            close(probe);
            vrmReportError(VRM_ERR_CONFIG,
                           _("Another virt-rdmad is already serving %1$s."),
                           d->socketPath);
            return -1;
        }
        vrmResetLastError();
        unlink(d->socketPath);
    }
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
        vrmReportSystemError(errno, _("Cannot create the control socket"));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        vrmReportSystemError(errno, _("Cannot bind the control socket %1$s"),
                             d->socketPath);
        close(fd);
        return -1;
    }
    d->ownSocket = true;
    if (d->conf->group && geteuid() == 0) {
        struct group *gr = getgrnam(d->conf->group);

        if (gr && chown(d->socketPath, 0, gr->gr_gid) < 0)
            VRM_WARN("cannot give %s to the group %s: %s", d->socketPath,
                     d->conf->group, g_strerror(errno));
    }
    chmod(d->socketPath, d->conf->group ? 0660 : 0600);
    if (listen(fd, 64) < 0) {
        vrmReportSystemError(errno, _("Cannot listen on the control socket %1$s"),
                             d->socketPath);
        close(fd);
        return -1;
    }
    d->listenFd = fd;
    return 0;
}

/*
 * The run directory holds the control socket and every job's UNIX path.
 * The destination QEMU creates its listening socket there and the source
 * QEMU connects there: with an access group, the group may create files
 * (setgid, so sockets carry the group); without, root only.
 */
static int
vrmHelperMakeDirs(vrmHelperDaemon *d)
{
    mode_t runMode = d->conf->group ? 02775 : 0755;

    if (g_mkdir_with_parents(d->conf->runDir, runMode) < 0) {
        vrmReportSystemError(errno, _("Cannot create the run directory %1$s"),
                             d->conf->runDir);
        return -1;
    }
    if (geteuid() == 0 && d->conf->group) {
        struct group *gr = getgrnam(d->conf->group);

        if (gr && chown(d->conf->runDir, 0, gr->gr_gid) < 0)
            VRM_WARN("cannot give %s to the group %s: %s", d->conf->runDir,
                     d->conf->group, g_strerror(errno));
    }
    if (geteuid() == 0)
        chmod(d->conf->runDir, runMode);
    if (g_mkdir_with_parents(d->conf->stateDir, 0700) < 0) {
        vrmReportSystemError(errno, _("Cannot create the state directory %1$s"),
                             d->conf->stateDir);
        return -1;
    }
    return 0;
}

/* Load the records; find running engines again or end them */
static void
vrmHelperRecover(vrmHelperDaemon *d)
{
    g_autoptr(GPtrArray) jobs = vrmHelperJobLoadDir(d->conf->stateDir);
    guint i;

    if (!jobs) {
        VRM_WARN("%s", vrmGetLastErrorMessage());
        return;
    }
    for (i = 0; i < jobs->len; i++) {
        vrmHelperJob *job = g_steal_pointer(&jobs->pdata[i]);
        unsigned long long *id = g_new(unsigned long long, 1);

        *id = job->record->id;
        d->nextId = MAX(d->nextId, job->record->id + 1);
        g_hash_table_insert(d->jobs, id, job);
        if (vrmJobStateIsFinal(job->record->state)) {
            job->pid = 0;
            continue;
        }
        if (job->pid > 0 && vrmHelperIsOurEngine(d, job)) {
            vrmEngineSnapshot es = { 0 };
            gint64 adoptDeadline = g_get_monotonic_time() + VRM_HELPER_ADOPT_TIMEOUT_US;
            bool answered;

            while (!(answered = vrmHelperReadEngineStats(job, &es)) &&
                   g_get_monotonic_time() < adoptDeadline &&
                   kill(job->pid, 0) == 0)
                g_usleep(VRM_HELPER_POLL_MS * 1000);
            if (answered) {
                VRM_INFO("job %llu: found its engine again (pid %d)",
                         job->record->id, (int)job->pid);
                vrmHelperJobApplyStats(job, &es);
                vrmEngineSnapshotClear(&es);
                vrmHelperSave(d, job);
                continue;
            }
            VRM_WARN("job %llu: engine pid %d does not answer; ending it",
                     job->record->id, (int)job->pid);
            kill(job->pid, SIGTERM);
            vrmHelperJobFinish(d, job, VRM_JOB_STATE_FAILED,
                               _("the helper restarted and could not reach the transport engine, so it ended it"));
            continue;
        }
        /* the engine is gone: its final stats tell the outcome */
        job->adopted = true;
        job->pid = job->pid > 0 ? job->pid : -1;
        {
            vrmEngineSnapshot fin = { 0 };
            bool have;

            vrmHelperReadFinalStats(job, &fin, &have);
            job->pid = 0;
            if (have && fin.state == VRM_ENGINE_STATE_COMPLETED)
                vrmHelperJobFinish(d, job, VRM_JOB_STATE_COMPLETED, NULL);
            else
                vrmHelperJobFinish(d, job, VRM_JOB_STATE_FAILED,
                                   have && fin.error ? fin.error :
                                   _("the transport engine ended while the helper was not running"));
            vrmEngineSnapshotClear(&fin);
        }
    }
    vrmHelperPruneHistory(d);
}

/* ---- life cycle ------------------------------------------------------ */

vrmHelperDaemon *
vrmHelperDaemonNew(vrmHelperConfig *conf, const vrmHelperOptions *opts)
{
    vrmHelperDaemon *d = g_new0(vrmHelperDaemon, 1);
    const char *engine = g_getenv("VRM_ENGINE");

    d->conf = conf;
    vrmHelperConfigToPolicy(conf, &d->policy);
    d->socketPath = opts && opts->socketPath ? g_strdup(opts->socketPath) :
        g_build_filename(conf->runDir, VRM_HELPER_SOCKET_NAME, NULL);
    if (opts && opts->enginePath)
        d->enginePath = g_strdup(opts->enginePath);
    else if (engine && *engine)
        d->enginePath = g_strdup(engine);
    else
        d->enginePath = g_strdup(VRM_ENGINE_PATH);
    d->connectTimeout = opts && opts->connectTimeout ? opts->connectTimeout : 30;
    d->idleTimeout = opts && opts->idleTimeout ? opts->idleTimeout : 120;
    d->engineDebug = opts && opts->engineDebug;
    d->listenFd = -1;
    d->nextId = 1;
    d->jobs = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                    (GDestroyNotify)vrmHelperJobFree);
    d->loop = g_main_loop_new(NULL, FALSE);
    return d;
}

static gboolean
vrmHelperSignal(gpointer opaque)
{
    vrmHelperDaemon *d = opaque;

    VRM_INFO("stopping; running engines go on and will be found again");
    g_main_loop_quit(d->loop);
    return G_SOURCE_CONTINUE;
}

int
vrmHelperDaemonStart(vrmHelperDaemon *d)
{
    if (vrmHelperMakeDirs(d) < 0)
        return -1;
    vrmHelperRecover(d);
    if (vrmHelperListen(d) < 0)
        return -1;
    d->listenWatch = g_unix_fd_add(d->listenFd, G_IO_IN, vrmHelperAccept, d);
    d->pollTimer = g_timeout_add(VRM_HELPER_POLL_MS, vrmHelperPollTimer, d);
    d->sigterm = g_unix_signal_add(SIGTERM, vrmHelperSignal, d);
    d->sigint = g_unix_signal_add(SIGINT, vrmHelperSignal, d);
    signal(SIGPIPE, SIG_IGN);
    VRM_INFO("listening on %s; engine %s; run %s; state %s",
             d->socketPath, d->enginePath, d->conf->runDir, d->conf->stateDir);
    return 0;
}

int
vrmHelperDaemonRun(vrmHelperDaemon *d)
{
    g_main_loop_run(d->loop);
    return 0;
}

void
vrmHelperDaemonStop(vrmHelperDaemon *d)
{
    g_main_loop_quit(d->loop);
}

const char *
vrmHelperDaemonSocketPath(vrmHelperDaemon *d)
{
    return d->socketPath;
}

void
vrmHelperDaemonFree(vrmHelperDaemon *d)
{
    GHashTableIter it;
    gpointer v;

    if (!d)
        return;
    /* clients still waiting get an answer; engines go on running */
    g_hash_table_iter_init(&it, d->jobs);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        vrmHelperJob *job = v;

        if (job->waiter) {
            vrmHelperConn *w = job->waiter;

            job->waiter = NULL;
            vrmHelperConnReplyError(w, VRM_ERR_INTERNAL,
                                    _("virt-rdmad is stopping."));
        }
        if (job->pid > 0 && !vrmJobStateIsFinal(job->record->state))
            vrmHelperSave(d, job);
    }
    if (d->listenWatch)
        g_source_remove(d->listenWatch);
    if (d->pollTimer)
        g_source_remove(d->pollTimer);
    if (d->waitTimer)
        g_source_remove(d->waitTimer);
    if (d->sigterm)
        g_source_remove(d->sigterm);
    if (d->sigint)
        g_source_remove(d->sigint);
    if (d->listenFd >= 0)
        close(d->listenFd);
    if (d->ownSocket)
        unlink(d->socketPath);
    g_hash_table_destroy(d->jobs);
    g_main_loop_unref(d->loop);
    g_free(d->socketPath);
    g_free(d->enginePath);
    vrmHelperConfigFree(d->conf);
    g_free(d);
}
