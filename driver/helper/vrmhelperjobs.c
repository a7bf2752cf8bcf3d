/*
 * vrmhelperjobs.c: virt-rdmad's job table: the budget, the records, the
 * engines (spawn, stats, exit, adoption after a restart), the end of a job
 */
#include <config.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib-unix.h>

#include "vrmhelperdpriv.h"
#include "vrmhelperengine.h"
#include "vrmhelperpolicy.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

vrmHelperJobRef *
vrmHelperJobRefNew(vrmHelperDaemon *d, vrmHelperJob *job)
{
    vrmHelperJobRef *ref = g_new0(vrmHelperJobRef, 1);

    ref->d = d;
    ref->id = job->record->id;
    return ref;
}


/* ---- the table ---------------------------------------------------------- */

vrmHelperJob *
vrmHelperJobsCreate(vrmHelperDaemon *d, vrmJobRole role, const char *name,
                    const char *uuid)
{
    vrmHelperJob *job = vrmHelperJobNew(d->nextId++, role);
    unsigned long long *id = g_new(unsigned long long, 1);

    job->record->domainName = g_strdup(name);
    job->record->domainUUID = g_ascii_strdown(uuid, -1);
    job->record->socketPath = vrmHelperConfigDomainSocket(d->conf, uuid);
    job->record->hasOwner = true;
    job->record->owner = 0;
    *id = job->record->id;
    g_hash_table_insert(d->jobs, id, job);
    vrmHelperJobsMetricsWrite(d);
    return job;
}

vrmHelperJob *
vrmHelperJobsGet(vrmHelperDaemon *d, unsigned long long id)
{
    return g_hash_table_lookup(d->jobs, &id);
}

GPtrArray *
vrmHelperJobsSorted(vrmHelperDaemon *d)
{
    GPtrArray *all = g_ptr_array_new();
    GHashTableIter it;
    gpointer v;

    g_hash_table_iter_init(&it, d->jobs);
    while (g_hash_table_iter_next(&it, NULL, &v))
        g_ptr_array_add(all, v);
    g_ptr_array_sort(all, vrmHelperJobCompareId);
    return all;
}

static gboolean
vrmHelperJobHasPeer(gpointer id G_GNUC_UNUSED, gpointer value, gpointer pc)
{
    const vrmHelperJob *job = value;

    return job->peer == pc;
}

vrmHelperJob *
vrmHelperJobsOfPeer(vrmHelperDaemon *d, vrmPeerConn *pc)
{
    return g_hash_table_find(d->jobs, vrmHelperJobHasPeer, pc);
}

static gboolean
vrmHelperJobIsLiveOf(gpointer id G_GNUC_UNUSED, gpointer value, gpointer uuid)
{
    const vrmHelperJob *job = value;

    return !vrmJobStateIsFinal(job->record->state) &&
        g_ascii_strcasecmp(job->record->domainUUID ? job->record->domainUUID : "",
                           uuid) == 0;
}

vrmHelperJob *
vrmHelperJobsLiveOfDomain(vrmHelperDaemon *d, const char *uuid)
{
    /* the uuid is only read */
    return g_hash_table_find(d->jobs, vrmHelperJobIsLiveOf, (gpointer)uuid);
}

vrmHelperJob *
vrmHelperJobsLastOfDomain(vrmHelperDaemon *d, const char *uuid, vrmJobRole role)
{
    vrmHelperJob *last = NULL;
    GHashTableIter it;
    gpointer v;

    g_hash_table_iter_init(&it, d->jobs);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        vrmHelperJob *job = v;

        if (job->record->role == role &&
            g_ascii_strcasecmp(job->record->domainUUID ? job->record->domainUUID : "",
                               uuid) == 0 &&
            (!last || job->record->id > last->record->id))
            last = job;
    }
    return last;
}

unsigned int
vrmHelperJobsLive(vrmHelperDaemon *d, GHashTable *ports)
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

unsigned long long
vrmHelperJobsPinned(vrmHelperDaemon *d)
{
    GHashTableIter it;
    gpointer v;
    unsigned long long sum = 0;

    g_hash_table_iter_init(&it, d->jobs);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        vrmHelperJob *job = v;

        if (!vrmJobStateIsFinal(job->record->state))
            sum += job->allowance;
    }
    return sum;
}

int
vrmHelperJobsReserve(vrmHelperDaemon *d, vrmHelperJob *job,
                     unsigned long long allowance)
{
    unsigned long long used = vrmHelperJobsPinned(d) - job->allowance;
    unsigned long long budget = d->conf->maxPinnedBytes;

    if (used > budget || allowance > budget - used) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("this migration needs %1$llu bytes of locked memory, but this host's budget ([limits] max-pinned-bytes = %2$llu) has %3$llu bytes left"),
                       allowance, budget, used > budget ? 0 : budget - used);
        return -1;
    }
    job->allowance = allowance;
    return 0;
}

/* A job goes on when its record cannot be written (its migration matters
 * more than the record): the helper says so once and writes it again
 * every VRM_HELPER_SAVE_RETRY_S seconds until it can (vrmHelperJobsRetrySaves) */
void
vrmHelperJobsSave(vrmHelperDaemon *d, vrmHelperJob *job)
{
    /* every change of state passes here: the subscribers hear of it */
    if (job->eventState != (int)job->record->state) {
        job->eventState = job->record->state;
        vrmHelperEventsJobChanged(d, job);
    }
    if (vrmHelperJobSave(job, d->conf->stateDir) < 0) {
        if (!job->unsaved) {
            VRM_WARN(_("job %1$llu: %2$s; virt-rdmad keeps the job in memory and writes the record again every %3$u s"),
                     job->record->id, vrmGetLastErrorMessage(), VRM_HELPER_SAVE_RETRY_S);
            job->unsaved = true;
            d->unsavedJobs++;
            d->saveRetryAt = g_get_monotonic_time() + VRM_HELPER_SAVE_RETRY_S * G_USEC_PER_SEC;
        }
        vrmResetLastError();
        return;
    }
    if (job->unsaved) {
        job->unsaved = false;
        d->unsavedJobs--;
        VRM_INFO("job %llu: its record is written again", job->record->id);
    }
}

/* Called by the poll timer: the records that did not reach the disk */
static void
vrmHelperJobsRetrySaves(vrmHelperDaemon *d)
{
    GHashTableIter it;
    gpointer value;

    if (!d->unsavedJobs || g_get_monotonic_time() < d->saveRetryAt)
        return;
    d->saveRetryAt = g_get_monotonic_time() + VRM_HELPER_SAVE_RETRY_S * G_USEC_PER_SEC;
    /* counted again: jobs pruned meanwhile no longer count */
    d->unsavedJobs = 0;
    g_hash_table_iter_init(&it, d->jobs);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        vrmHelperJob *job = value;

        if (job->unsaved) {
            d->unsavedJobs++;
            vrmHelperJobsSave(d, job);
        }
    }
}

/* Keep at most history-size finished jobs */
static void
vrmHelperJobsPrune(vrmHelperDaemon *d)
{
    g_autoptr(GPtrArray) all = vrmHelperJobsSorted(d);
    unsigned int finished = 0;
    guint i;

    for (i = 0; i < all->len; i++) {
        vrmHelperJob *job = all->pdata[i];

        if (vrmJobStateIsFinal(job->record->state))
            finished++;
    }
    for (i = 0; i < all->len && finished > d->conf->historySize; i++) {
        vrmHelperJob *job = all->pdata[i];
        unsigned long long id = job->record->id;

        if (!vrmJobStateIsFinal(job->record->state))
            continue;
        vrmHelperJobRemoveFiles(d->conf->stateDir, id);
        g_hash_table_remove(d->jobs, &id);
        finished--;
    }
}

typedef struct {
    vrmHelperJobRef ref;
    vrmHelperPhaseExpiredFunc expired;
} vrmHelperPhaseRef;

static gboolean
vrmHelperJobsPhaseTimeout(gpointer opaque)
{
    vrmHelperPhaseRef *p = opaque;
    vrmHelperJob *job = vrmHelperJobsGet(p->ref.d, p->ref.id);

    if (!job)
        return G_SOURCE_REMOVE;
    job->phaseTimer = 0;
    p->expired(p->ref.d, job);
    return G_SOURCE_REMOVE;
}

VRM_ENUM_IMPL(vrmHelperPhase, VRM_PHASE_LAST,
              "none",
              "source-starting",
              "source-offered",
              "source-running",
              "source-outcome",
              "source-unused",
              "destination-connecting",
              "destination-requested",
              "destination-starting",
              "destination-answered",
              "destination-running",
              "destination-unused",
);

/* The negotiation's turns, one row per phase that waits for the peer */
static const struct {
    vrmHelperPhase phase;
    vrmPeerType expects;
} vrmHelperPhaseTurns[] = {
    { VRM_PHASE_SRC_OFFERED, VRM_PEER_MIGRATION_ANSWER },
    { VRM_PHASE_DST_REQUESTED, VRM_PEER_MIGRATION_OFFER },
    { VRM_PHASE_DST_ANSWERED, VRM_PEER_MIGRATION_RESULT },
};

vrmPeerType
vrmHelperPhaseExpects(vrmHelperPhase phase)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmHelperPhaseTurns); i++) {
        if (vrmHelperPhaseTurns[i].phase == phase)
            return vrmHelperPhaseTurns[i].expects;
    }
    return VRM_PEER_LAST;
}

void
vrmHelperJobsSetPhase(vrmHelperDaemon *d, vrmHelperJob *job, vrmHelperPhase phase,
                      unsigned int timeoutS, vrmHelperPhaseExpiredFunc expired)
{
    g_clear_handle_id(&job->phaseTimer, g_source_remove);
    if (job->phase != (int)phase)
        VRM_DEBUG("job %llu: phase %s -> %s", job->record->id,
                  vrmHelperPhaseTypeToString(job->phase), vrmHelperPhaseTypeToString(phase));
    job->phase = phase;
    if (timeoutS && expired) {
        vrmHelperPhaseRef *p = g_new0(vrmHelperPhaseRef, 1);

        p->ref.d = d;
        p->ref.id = job->record->id;
        p->expired = expired;
        job->phaseTimer = g_timeout_add_seconds_full(G_PRIORITY_DEFAULT, timeoutS,
                                                     vrmHelperJobsPhaseTimeout,
                                                     p, g_free);
    }
}

void
vrmHelperJobsDropToken(vrmHelperJob *job)
{
    vrmTokenClear(&job->token);
    job->hasToken = false;
}


/* ---- metrics -------------------------------------------------------------- */

/* What a job moved: a source sends, a destination receives */
static unsigned long long
vrmHelperJobsBytes(const vrmHelperJob *job)
{
    const vrmJobRecord *rec = job->record;

    if (!rec->hasStats)
        return 0;
    return rec->role == VRM_JOB_ROLE_SOURCE ? rec->stats.bytesSent :
        rec->stats.bytesReceived;
}

void
vrmHelperJobsMetricsStart(vrmHelperDaemon *d)
{
    const char *dir = d->conf->metricsDir;

    if (!dir) {
        VRM_DEBUG("metrics for node-exporter are off ([metrics] textfile-dir is empty)");
        return;
    }
    /* node-exporter is not installed, or reads elsewhere: nothing to do */
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        VRM_DEBUG("metrics for node-exporter are off: there is no directory %s", dir);
        return;
    }
    d->metricsDir = g_strdup(dir);
    VRM_INFO("metrics for node-exporter in %s/%s", dir, VRM_HELPER_METRICS_FILE);
    /* the counters appear at 0 before the first job */
    vrmHelperJobsMetricsWrite(d);
}

/* The file is small and local: written at once. A failure (a read-only or
 * removed directory, a full disk) is said at a bounded rate and changes
 * nothing else, not even the caller's last error; the next write tries
 * again */
void
vrmHelperJobsMetricsWrite(vrmHelperDaemon *d)
{
    vrmHelperMetrics m = d->metrics;
    g_autofree char *text = NULL;
    g_autofree char *callerError = NULL;
    int callerCode;
    GHashTableIter it;
    gpointer v;

    if (!d->metricsDir)
        return;
    g_hash_table_iter_init(&it, d->jobs);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        vrmHelperJob *job = v;

        if (vrmJobStateIsFinal(job->record->state))
            continue;
        m.jobsRunning[job->record->role]++;
        /* running jobs' bytes so far: the counter grows while they run
         * and does not jump when they end */
        m.bytes[job->record->role] += vrmHelperJobsBytes(job);
    }
    m.pinnedBytes = vrmHelperJobsPinned(d);
    m.pinnedBudget = d->conf->maxPinnedBytes;
    text = vrmHelperMetricsFormat(&m);
    d->metricsWrittenAt = g_get_monotonic_time();
    if ((callerCode = vrmGetLastErrorCode()) != VRM_ERR_OK)
        callerError = g_strdup(vrmGetLastErrorMessage());
    if (vrmHelperMetricsWrite(d->metricsDir, text) < 0) {
        VRM_WARN_LIMITED(&d->metricsLog,
                         _("the metrics for node-exporter are not up to date: %1$s"),
                         vrmGetLastErrorMessage());
        vrmResetLastError();
        if (callerError)
            vrmSetLastError(callerCode, callerError);
        d->metricsFailing = true;
        return;
    }
    if (d->metricsFailing) {
        d->metricsFailing = false;
        VRM_INFO("the metrics for node-exporter are written again");
    }
}


/* ---- the engine's set-up ------------------------------------------------ */

/* No more listening to the engine's set-up pipe */
static void
vrmHelperJobsSetupClose(vrmHelperJob *job)
{
    g_clear_handle_id(&job->engineSetupWatch, g_source_remove);
    if (job->engineSetupFd >= 0) {
        close(job->engineSetupFd);
        job->engineSetupFd = -1;
    }
}

/* The child's word on its set-up, without waiting: false while it has
 * said nothing yet; a failure is kept as the job's reason */
static bool
vrmHelperJobsSetupHeard(vrmHelperJob *job)
{
    int r = vrmHelperEngineSetupRead(job->engineSetupFd, job->engineMemlock);

    if (r == 0)
        return false;
    if (r < 0) {
        g_free(job->engineSetupError);
        job->engineSetupError = g_strdup(vrmGetLastErrorMessage());
        job->engineSetupCode = vrmGetLastErrorCode();
        vrmResetLastError();
        VRM_DEBUG("job %llu: %s", job->record->id, job->engineSetupError);
    }
    return true;
}

/* exec closed the pipe (fine), or the child wrote why it could not: it
 * ends with 126 and the child watch fails the job with that reason */
static gboolean
vrmHelperJobsSetupReadable(gint fd G_GNUC_UNUSED, GIOCondition cond G_GNUC_UNUSED,
                           gpointer opaque)
{
    vrmHelperJobRef *ref = opaque;
    vrmHelperJob *job = vrmHelperJobsGet(ref->d, ref->id);

    if (!job)
        return G_SOURCE_REMOVE;
    if (!vrmHelperJobsSetupHeard(job))
        return G_SOURCE_CONTINUE;
    job->engineSetupWatch = 0;      /* this source is being removed */
    vrmHelperJobsSetupClose(job);
    return G_SOURCE_REMOVE;
}


/* ---- the end of a job --------------------------------------------------- */

static void
vrmHelperJobsReadFinalStats(vrmHelperJob *job, vrmEngineSnapshot *es, bool *have)
{
    g_autofree char *data = NULL;
    gsize len = 0;

    *have = false;
    if (job->statsFile && g_file_get_contents(job->statsFile, &data, &len, NULL) &&
        len < 64 * 1024 && vrmHelperEngineStatsParse(g_strstrip(data), es) == 0)
        *have = true;
    vrmResetLastError();
}

/* An engine that outlived its job's end: reaped here when it exits */
static void
vrmHelperJobsReapLate(GPid pid, gint status, gpointer opaque)
{
    const char *statsSocket = opaque;

    if (statsSocket && unlink(statsSocket) == 0)
        VRM_DEBUG("engine %d ended after its job; removed its stats socket %s",
                  (int)pid, statsSocket);
    g_spawn_close_pid(pid);
}

void
vrmHelperJobsFinish(vrmHelperDaemon *d, vrmHelperJob *job, vrmJobState state,
                    int code, const char *error)
{
    const vrmHelperRoleOps *ops = d->ops[job->record->role];
    vrmEngineSnapshot es = { 0 };
    bool have;
    g_autofree char *why = g_strdup(error);

    if (vrmJobStateIsFinal(job->record->state) && !job->pid && !job->phaseTimer &&
        !job->peer && !job->waiter && !job->domainDir.uuid)
        return;
    if (ops && ops->finishing)
        ops->finishing(d, job);
    vrmHelperJobsReadFinalStats(job, &es, &have);
    if (have)
        vrmHelperJobApplyStats(job, &es);
    vrmEngineSnapshotClear(&es);
    if (job->cancelRequested) {
        state = VRM_JOB_STATE_CANCELLED;
        code = VRM_ERR_CANCELLED;
    }
    if (!vrmJobStateIsFinal(job->record->state) &&
        vrmHelperJobSetState(job, state, code, why) == 0) {
        vrmJobRole role = job->record->role;

        d->metrics.jobsFinished[role][state]++;
        d->metrics.bytes[role] += vrmHelperJobsBytes(job);
    }
    if (job->childWatch) {
        g_source_remove(job->childWatch);
        job->childWatch = 0;
        /* still running (cancelled: SIGTERM is on its way): reap it when
         * it exits, and remove the stats socket it may not have removed */
        if (job->pid > 0 && !job->adopted)
            g_child_watch_add_full(G_PRIORITY_DEFAULT, job->pid, vrmHelperJobsReapLate,
                                   g_strdup(job->statsSocket), g_free);
    }
    job->pid = 0;
    job->cmPort = 0;
    vrmHelperJobsSetPhase(d, job, 0, 0, NULL);
    g_clear_pointer(&job->probe, vrmStatsProbeCancel);
    vrmHelperJobsSetupClose(job);
    /* what was sent to the peer still goes out */
    g_clear_pointer(&job->peer, vrmPeerConnFinish);
    g_clear_handle_id(&job->outcomeTimer, g_source_remove);
    vrmHelperJobsDropToken(job);
    if (job->steer == VRM_JOB_STEER_ACTIVE) {
        /* one that is still being added goes when nft has answered
         * (vrmhelpersource.c) */
        g_autofree char *handles = vrmSteerRulesFormat(&job->steerRules);

        vrmSteerRemove(d->steer, &job->steerRules);
        job->steer = VRM_JOB_STEER_NONE;
        VRM_INFO("job %llu: its steering rules (handles %s) removed",
                 job->record->id, handles);
    }
    if (job->tcpListenFd >= 0) {
        close(job->tcpListenFd);
        job->tcpListenFd = -1;
    }
    vrmRunDirDomainRemove(d->runDir, &job->domainDir);
    vrmHelperJobsSave(d, job);
    vrmHelperJobsPrune(d);
    vrmHelperJobsMetricsWrite(d);
}

void
vrmHelperJobsEngineGone(vrmHelperJob *job)
{
    g_clear_handle_id(&job->childWatch, g_source_remove);
    if (job->pid > 0 && !job->adopted)
        g_spawn_close_pid(job->pid);
    job->pid = 0;
}

void
vrmHelperJobsKill(vrmHelperJob *job, int sig)
{
    if (job->pid > 0)
        kill(job->pid, sig);
}

void
vrmHelperJobsAbort(vrmHelperJob *job, int code, const char *why)
{
    if (job->peer) {
        g_autoptr(vrmPeerMessage) res = vrmPeerResultNewError(code, why);

        vrmPeerConnSend(job->peer, res);
    }
    vrmHelperJobsKill(job, SIGTERM);
}

void
vrmHelperJobsFailLast(vrmHelperDaemon *d, vrmHelperJob *job,
                      vrmHelperJobFailFunc fail)
{
    /* a copy: failing may report errors of its own */
    g_autofree char *why = g_strdup(vrmGetLastErrorMessage());

    fail(d, job, vrmGetLastErrorCode(), why);
}

int
vrmHelperJobsEndedCode(const vrmHelperJob *job)
{
    /* a set-up that failed before exec keeps its own code (the
     * locked-memory limit is the host's resource, not the peer's) */
    return job->engineSetupError ? job->engineSetupCode : VRM_ERR_PEER;
}

void
vrmHelperJobsFailEnded(vrmHelperDaemon *d, vrmHelperJob *job,
                       vrmHelperJobFailFunc fail, const char *reason,
                       const char *otherwise)
{
    fail(d, job, vrmHelperJobsEndedCode(job), reason ? reason : otherwise);
}

/* The engine has ended: its record says how; the flow decides the rest */
static void
vrmHelperJobsEngineEnded(vrmHelperDaemon *d, vrmHelperJob *job, int status,
                         bool haveStatus)
{
    const vrmHelperRoleOps *ops = d->ops[job->record->role];
    vrmEngineSnapshot fin = { 0 };
    g_autofree char *reason = NULL;
    vrmJobState state = VRM_JOB_STATE_FAILED;
    GPid pid = job->pid;
    bool have;

    if (job->engineSetupFd >= 0) {
        /* the child has ended: what it wrote is in the pipe already */
        vrmHelperJobsSetupHeard(job);
        vrmHelperJobsSetupClose(job);
    }
    vrmHelperJobsReadFinalStats(job, &fin, &have);
    if (have)
        vrmHelperJobApplyStats(job, &fin);
    if (job->engineSetupError) {
        /* it never became the engine: its set-up says why, not its 126 */
        reason = g_strdup(job->engineSetupError);
    } else if (have && fin.state == VRM_ENGINE_STATE_COMPLETED &&
               (!haveStatus || (WIFEXITED(status) && WEXITSTATUS(status) == 0))) {
        state = VRM_JOB_STATE_COMPLETED;
    } else if (have && fin.error) {
        /* the engine's one line, from its record, never from its log */
        reason = vrmLogSanitize(fin.error);
    } else if (haveStatus && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        state = VRM_JOB_STATE_COMPLETED;
    } else if (haveStatus && WIFSIGNALED(status)) {
        reason = g_strdup_printf(_("the transport engine (pid %1$d) was killed by signal %2$d"),
                                 (int)pid, WTERMSIG(status));
    } else if (haveStatus) {
        reason = g_strdup_printf(_("the transport engine (pid %1$d) ended with status %2$d"),
                                 (int)pid, WEXITSTATUS(status));
    } else {
        reason = g_strdup(_("the transport engine ended while the helper was not watching it"));
    }
    vrmEngineSnapshotClear(&fin);
    g_clear_pointer(&job->probe, vrmStatsProbeCancel);
    /* an engine that was killed could not remove its stats socket; it is
     * gone now, so nobody serves that path any more */
    if (job->statsSocket && unlink(job->statsSocket) == 0)
        VRM_DEBUG("job %llu: removed the stats socket %s the engine left",
                  job->record->id, job->statsSocket);
    if (ops && ops->ended) {
        ops->ended(d, job, state, reason);
        return;
    }
    vrmHelperJobsFinish(d, job, state, vrmHelperJobsEndedCode(job), reason);
}

static void
vrmHelperJobsChildExited(GPid pid, gint status, gpointer opaque)
{
    vrmHelperJobRef *ref = opaque;
    vrmHelperJob *job = vrmHelperJobsGet(ref->d, ref->id);

    if (!job || job->pid != pid)
        return;
    job->childWatch = 0;    /* this source is being removed */
    vrmHelperJobsEngineEnded(ref->d, job, status, true);
}


/* ---- engines ------------------------------------------------------------ */

/*
 * Tests only: with $VRM_HELPER_TEST_TOKEN_DIR set, each job's token is
 * written there (0600), so that the end-to-end tests can look for it in
 * every domain XML. Never set in production (virt-rdmad(8)).
 */
static void
vrmHelperJobsTestToken(vrmHelperJob *job)
{
    const char *dir = g_getenv("VRM_HELPER_TEST_TOKEN_DIR");
    char hex[VRM_TOKEN_HEX_LEN + 2];
    g_autofree char *path = NULL;

    if (!dir || !*dir || !g_file_test(dir, G_FILE_TEST_IS_DIR))
        return;
    vrmTokenFormat(&job->token, hex);
    hex[VRM_TOKEN_HEX_LEN] = '\n';
    hex[VRM_TOKEN_HEX_LEN + 1] = '\0';
    path = g_strdup_printf("%s/job-%llu.token", dir, job->record->id);
    g_file_set_contents_full(path, hex, -1, G_FILE_SET_CONTENTS_NONE, 0600, NULL);
}

int
vrmHelperJobsSpawn(vrmHelperDaemon *d, vrmHelperJob *job, const vrmOffer *offer,
                   const vrmAnswer *answer, const char *device)
{
    bool source = job->record->role == VRM_JOB_ROLE_SOURCE;
    guint32 caps = source ? offer->capabilities : answer->capabilities;
    vrmEngineLaunch l = { 0 };
    g_autofree char *diskPath = NULL;
    int setupFd = -1;
    GPid pid;

    g_free(job->statsSocket);
    g_free(job->statsFile);
    g_free(job->logFile);
    job->statsSocket = vrmRunDirEngineSocket(d->runDir, job->record->id);
    job->statsFile = g_strdup_printf("%s/job-%llu.stats.json", d->conf->stateDir,
                                     job->record->id);
    job->logFile = g_strdup_printf("%s/job-%llu.log", d->conf->stateDir,
                                   job->record->id);
    unlink(job->statsSocket);
    unlink(job->statsFile);
    /* The record first: a job whose record cannot be written could not be
     * followed again after a restart of this helper, and its engine could
     * not write its own; refuse it while nothing runs yet */
    if (vrmHelperJobSave(job, d->conf->stateDir) < 0)
        return -1;

    l.program = d->enginePath;
    l.source = source;
    l.domainUUID = job->record->domainUUID;
    l.qemuPath = job->record->socketPath;
    l.qemuListenFd = job->qemuListenFd;
    l.diskChannels = job->diskChannels;
    l.diskListenFd = job->diskListenFd;
    l.tcpListenFd = job->tcpListenFd;
    l.tcpPortMin = d->conf->migrationPortMin;
    l.tcpPortMax = d->conf->migrationPortMax;
    l.diskPath = diskPath = job->diskChannels ?
        vrmHelperConfigDomainDiskSocket(d->conf, job->record->domainUUID) : NULL;
    l.qemuUid = job->qemuUid;
    l.qemuPid = job->qemuPid;
    l.address = offer->address;
    l.port = offer->port;
    l.channels = source ? offer->channels : answer->channels;
    l.chunkSize = source ? offer->chunkSize : answer->chunkSize;
    l.ringDepth = source ? offer->ringDepth : answer->ringDepth;
    l.caps = caps & vrmCapabilityMigrationMask();
    l.allowance = job->allowance;
    l.device = device;
    l.token = &job->token;
    l.statsSocket = job->statsSocket;
    l.statsFile = job->statsFile;
    l.logFile = job->logFile;
    l.connectTimeout = d->connectTimeout;
    l.idleTimeout = d->idleTimeout;
    l.waitStream = job->waitStream;
    l.debug = d->engineDebug;
    /* as root: the engine user, with nothing else (its QEMU socket, token,
     * records and log come as descriptors) */
    l.dropPrivileges = geteuid() == 0 && !d->engineProblem && d->engineUid != 0;
    l.uid = d->engineUid;
    l.gid = d->engineGid;
    vrmHelperJobsTestToken(job);
    if (vrmHelperEngineSpawn(&l, &pid, &job->startTime, &setupFd) < 0)
        return -1;
    vrmHelperJobsDropToken(job);
    if (job->qemuListenFd >= 0) {
        close(job->qemuListenFd);
        job->qemuListenFd = -1;
    }
    if (job->diskListenFd >= 0) {
        close(job->diskListenFd);
        job->diskListenFd = -1;
    }
    if (job->tcpListenFd >= 0) {
        close(job->tcpListenFd);
        job->tcpListenFd = -1;
    }
    job->pid = pid;
    job->engineUid = l.dropPrivileges ? l.uid : geteuid();
    job->engineMemlock = vrmHelperEngineMemlock(&l);
    if (l.dropPrivileges)
        VRM_DEBUG("job %llu: engine as uid %u gid %u, memlock %llu bytes",
                  job->record->id, (unsigned int)l.uid, (unsigned int)l.gid,
                  job->engineMemlock);
    /* the child's word on its set-up comes later (a failure, or the end
     * of file at exec): heard from the main loop, never waited for */
    vrmHelperJobsSetupClose(job);
    g_clear_pointer(&job->engineSetupError, g_free);
    job->engineSetupFd = setupFd;
    job->engineSetupWatch = g_unix_fd_add_full(G_PRIORITY_DEFAULT, setupFd,
                                               G_IO_IN | G_IO_HUP | G_IO_ERR,
                                               vrmHelperJobsSetupReadable,
                                               vrmHelperJobRefNew(d, job), g_free);
    job->childWatch = g_child_watch_add_full(G_PRIORITY_DEFAULT, pid,
                                             vrmHelperJobsChildExited,
                                             vrmHelperJobRefNew(d, job), g_free);
    VRM_INFO("job %llu: engine pid %d: %s %s, %u channel(s), %u disk channel(s), allowance %llu bytes",
             job->record->id, (int)pid, source ? "source" : "destination",
             job->record->socketPath, l.channels, l.diskChannels, l.allowance);
    vrmHelperJobsSave(d, job);
    return 0;
}


/* ---- following the engines ---------------------------------------------- */

static void
vrmHelperJobsProbeDone(const char *text, gpointer opaque)
{
    vrmHelperJobRef *ref = opaque;
    vrmHelperDaemon *d = ref->d;
    vrmHelperJob *job = vrmHelperJobsGet(d, ref->id);
    const vrmHelperRoleOps *ops;
    vrmEngineSnapshot es = { 0 };
    vrmJobState before;

    g_free(ref);
    if (!job)
        return;
    job->probe = NULL;
    if (!text || vrmHelperEngineStatsParse(text, &es) < 0) {
        vrmResetLastError();
        return;
    }
    before = job->record->state;
    job->statsSeen = true;
    vrmHelperJobApplyStats(job, &es);
    vrmEngineSnapshotClear(&es);
    if (job->record->state != before)
        vrmHelperJobsSave(d, job);
    ops = d->ops[job->record->role];
    if (ops && ops->stats)
        ops->stats(d, job);
}

static void
vrmHelperJobsProbe(vrmHelperDaemon *d, vrmHelperJob *job)
{
    vrmHelperJobRef *ref;

    if (job->probe || job->pid <= 0)
        return;
    ref = vrmHelperJobRefNew(d, job);
    if (!(job->probe = vrmStatsProbeStart(job->statsSocket, job->pid,
                                          VRM_HELPER_PROBE_TIMEOUT_MS,
                                          vrmHelperJobsProbeDone, ref, g_free)))
        g_free(ref);
}

/* An engine found after a restart: not our child, so watch it here */
static bool
vrmHelperJobsCheckAdopted(vrmHelperDaemon *d, vrmHelperJob *job)
{
    if (!job->adopted || job->pid <= 0)
        return true;
    if (vrmProcGone(job->pid)) {
        vrmHelperJobsEngineEnded(d, job, 0, false);
        return false;
    }
    if (!job->statsSeen && g_get_monotonic_time() > job->adoptDeadline) {
        VRM_WARN(_("job %1$llu: its engine (pid %2$d) does not answer since the helper restarted; ending it"),
                 job->record->id, (int)job->pid);
        vrmHelperJobsKill(job, SIGTERM);
        vrmHelperJobsFinish(d, job, VRM_JOB_STATE_FAILED, VRM_ERR_TIMEOUT,
                            _("the helper restarted and could not reach the transport engine, so it ended it"));
        return false;
    }
    return true;
}

/* Probe the engines (only those of negotiating jobs with @waitersOnly);
 * true if some job still negotiates */
static bool
vrmHelperJobsPoll(vrmHelperDaemon *d, bool waitersOnly)
{
    g_autoptr(GPtrArray) all = vrmHelperJobsSorted(d);
    g_autofree unsigned long long *ids = g_new(unsigned long long, all->len + 1);
    bool waiting = false;
    guint i;

    for (i = 0; i < all->len; i++)
        ids[i] = ((vrmHelperJob *)all->pdata[i])->record->id;
    for (i = 0; i < all->len; i++) {
        vrmHelperJob *job = vrmHelperJobsGet(d, ids[i]);
        bool negotiating;

        if (!job || job->pid <= 0)
            continue;
        negotiating = job->phase == VRM_PHASE_SRC_STARTING ||
            job->phase == VRM_PHASE_DST_STARTING;
        if (negotiating)
            waiting = true;
        if (waitersOnly && !negotiating)
            continue;
        if (!vrmHelperJobsCheckAdopted(d, job))
            continue;
        vrmHelperJobsProbe(d, job);
    }
    return waiting;
}

static gboolean
vrmHelperJobsPollTimer(gpointer opaque)
{
    vrmHelperDaemon *d = opaque;

    vrmHelperJobsPoll(d, false);
    vrmHelperJobsRetrySaves(d);
    if (d->metricsDir && vrmHelperJobsLive(d, NULL) > 0 &&
        g_get_monotonic_time() - d->metricsWrittenAt >=
        VRM_HELPER_METRICS_INTERVAL_S * G_USEC_PER_SEC)
        vrmHelperJobsMetricsWrite(d);
    return G_SOURCE_CONTINUE;
}

static gboolean
vrmHelperJobsWaitTimer(gpointer opaque)
{
    vrmHelperDaemon *d = opaque;

    if (vrmHelperJobsPoll(d, true))
        return G_SOURCE_CONTINUE;
    d->waitTimer = 0;
    return G_SOURCE_REMOVE;
}

typedef struct {
    vrmHelperJobRef ref;
    guint ms;                       /* this wait; the next is twice as long */
} vrmHelperJobsEarly;

static gboolean
vrmHelperJobsEarlyProbe(gpointer opaque)
{
    vrmHelperJobsEarly *e = opaque;
    vrmHelperJob *job = vrmHelperJobsGet(e->ref.d, e->ref.id);
    vrmHelperJobsEarly *next;

    if (!job || (job->phase != VRM_PHASE_SRC_STARTING &&
                 job->phase != VRM_PHASE_DST_STARTING))
        return G_SOURCE_REMOVE;
    vrmHelperJobsProbe(e->ref.d, job);
    /* the shared poll takes over once ours would be as slow */
    if (e->ms * 2 <= VRM_HELPER_WAIT_POLL_MS / 2) {
        next = g_memdup2(e, sizeof(*e));
        next->ms *= 2;
        g_timeout_add_full(G_PRIORITY_DEFAULT, next->ms, vrmHelperJobsEarlyProbe,
                           next, g_free);
    }
    return G_SOURCE_REMOVE;
}

/* @job starts to negotiate: its engine is probed soon, then with the other
 * negotiating jobs' every VRM_HELPER_WAIT_POLL_MS until none negotiates */
void
vrmHelperJobsWatchWaiters(vrmHelperDaemon *d, vrmHelperJob *job)
{
    vrmHelperJobsEarly *e = g_new0(vrmHelperJobsEarly, 1);

    e->ref.d = d;
    e->ref.id = job->record->id;
    e->ms = VRM_HELPER_WAIT_FIRST_MS;
    g_timeout_add_full(G_PRIORITY_DEFAULT, e->ms, vrmHelperJobsEarlyProbe, e, g_free);
    if (!d->waitTimer)
        d->waitTimer = g_timeout_add(VRM_HELPER_WAIT_POLL_MS,
                                     vrmHelperJobsWaitTimer, d);
}

void
vrmHelperJobsStartPolling(vrmHelperDaemon *d)
{
    if (!d->pollTimer)
        d->pollTimer = g_timeout_add(VRM_HELPER_POLL_MS, vrmHelperJobsPollTimer, d);
}


/* ---- after a restart ---------------------------------------------------- */

static void
vrmHelperJobsRecoverOne(vrmHelperDaemon *d, vrmHelperJob *job)
{
    unsigned long long id;

    if (vrmJobStateIsFinal(job->record->state)) {
        job->pid = 0;
        return;
    }
    vrmRunDirDomainAdopt(d->runDir, &job->domainDir);
    if (job->pid > 0 &&
        vrmProcIsOurEngine(job->pid, job->engineUid, d->enginePath, job->startTime)) {
        VRM_INFO("job %llu: following its engine again (pid %d)",
                 job->record->id, (int)job->pid);
        job->adopted = true;
        job->adoptDeadline = g_get_monotonic_time() +
            VRM_HELPER_ADOPT_TIMEOUT_S * G_USEC_PER_SEC;
        vrmHelperJobsSetPhase(d, job, job->record->role == VRM_JOB_ROLE_SOURCE ?
                              VRM_PHASE_SRC_RUNNING : VRM_PHASE_DST_RUNNING, 0, NULL);
        return;
    }
    if (job->pid > 0 && !vrmProcGone(job->pid))
        VRM_WARN(_("job %1$llu: pid %2$d is not the engine this helper started (user, program or start time differ); leaving it alone"),
                 job->record->id, (int)job->pid);
    /* the engine is gone: its final record tells the outcome */
    job->adopted = true;
    id = job->record->id;
    vrmHelperJobsEngineEnded(d, job, 0, false);
    /* ending it may have pruned it */
    if ((job = vrmHelperJobsGet(d, id)) && d->ops[job->record->role] &&
        d->ops[job->record->role]->endedUnwatched)
        d->ops[job->record->role]->endedUnwatched(d, job);
}

void
vrmHelperJobsRecover(vrmHelperDaemon *d)
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
    }
    {
        g_autoptr(GPtrArray) all = vrmHelperJobsSorted(d);
        g_autofree unsigned long long *ids = g_new(unsigned long long, all->len + 1);
        guint n = all->len;

        /* by id: recovering one job may prune another from the history */
        for (i = 0; i < n; i++)
            ids[i] = ((vrmHelperJob *)all->pdata[i])->record->id;
        for (i = 0; i < n; i++) {
            vrmHelperJob *job = vrmHelperJobsGet(d, ids[i]);

            if (job && !vrmJobStateIsFinal(job->record->state))
                vrmHelperJobsRecoverOne(d, job);
        }
    }
    vrmHelperJobsPrune(d);
}


/* ---- intents ------------------------------------------------------------ */

void
vrmHelperIntentFree(vrmHelperIntent *intent)
{
    if (!intent)
        return;
    vrmIntentRecordFree(intent->record);
    vrmMigrationParamsFree(intent->overrides);
    g_free(intent);
}

vrmHelperIntent *
vrmHelperIntentsTake(vrmHelperDaemon *d, const char *uuid,
                     unsigned long long jobId)
{
    GHashTableIter it;
    gpointer v;
    vrmHelperIntent *best = NULL;
    gint64 now = g_get_monotonic_time();

    g_hash_table_iter_init(&it, d->intents);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        vrmHelperIntent *intent = v;

        if (intent->record->state != VRM_INTENT_STATE_PENDING ||
            intent->expires < now ||
            g_ascii_strcasecmp(intent->record->domainUUID, uuid) != 0)
            continue;
        if (!best || intent->record->id > best->record->id)
            best = intent;
    }
    if (!best)
        return NULL;
    best->record->state = VRM_INTENT_STATE_USED;
    best->record->hasJob = true;
    best->record->job = jobId;
    return best;
}

void
vrmHelperIntentsExpire(vrmHelperDaemon *d)
{
    g_autoptr(GPtrArray) ended = g_ptr_array_new();
    GHashTableIter it;
    gpointer k;
    gpointer v;
    gint64 now = g_get_monotonic_time();
    guint i;

    g_hash_table_iter_init(&it, d->intents);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        vrmHelperIntent *intent = v;

        if (intent->record->state == VRM_INTENT_STATE_PENDING && intent->expires < now)
            intent->record->state = VRM_INTENT_STATE_EXPIRED;
        /* an ended intent is kept as long as a pending one would be, so
         * that its owner can still ask about it; then it goes */
        if (intent->record->state != VRM_INTENT_STATE_PENDING &&
            intent->expires + VRM_HELPER_INTENT_TTL_S * G_USEC_PER_SEC < now &&
            (!intent->record->hasJob ||
             !vrmHelperJobsGet(d, intent->record->job) ||
             vrmJobStateIsFinal(vrmHelperJobsGet(d, intent->record->job)->record->state)))
            g_ptr_array_add(ended, k);
    }
    for (i = 0; i < ended->len; i++)
        g_hash_table_remove(d->intents, ended->pdata[i]);
}

/* The table is full: drop every intent that has ended (expired, or used
 * by a job that has ended) before its time, so that only pending ones and
 * those of running jobs count against the cap */
void
vrmHelperIntentsDropEnded(vrmHelperDaemon *d)
{
    g_autoptr(GPtrArray) ended = g_ptr_array_new();
    GHashTableIter it;
    gpointer k;
    gpointer v;
    guint i;

    g_hash_table_iter_init(&it, d->intents);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        vrmHelperIntent *intent = v;
        vrmHelperJob *job = intent->record->hasJob ?
            vrmHelperJobsGet(d, intent->record->job) : NULL;

        if (intent->record->state != VRM_INTENT_STATE_PENDING &&
            (!job || vrmJobStateIsFinal(job->record->state)))
            g_ptr_array_add(ended, k);
    }
    for (i = 0; i < ended->len; i++)
        g_hash_table_remove(d->intents, ended->pdata[i]);
}
