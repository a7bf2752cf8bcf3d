/*
 * vrmhelpersource.c: the source side of the negotiation
 *
 * A peer helper (authenticated by the channel) asks for the migration of
 * a domain. This host's libvirt must confirm that the domain runs here
 * and migrates out of here right now, and that it is RDMA-enabled; then
 * the helper applies its policy and the pending intent of
 * `virt-rdma migrate` if there is one, reserves the job's locked memory,
 * makes the per-domain directory, starts the source engine, waits until
 * it listens, and offers (with the token, only on this channel). The
 * destination answers; the answer is checked (version, capabilities,
 * sizes within the offer) and the exchange ends with a result. When the
 * engine ends, libvirt is asked how the migration ended (issue 13 item 8).
 *
 * A request may ask for the recovery of a post-copy migration whose
 * connection broke: then the domain must be paused in post-copy failed
 * (libvirt keeps its outgoing job), and this helper's last outgoing job
 * of it must have gone to the requester; the engines wait up to
 * [limits] recovery-window for `virsh migrate --postcopy-resume`.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "vrmhelperdpriv.h"
#include "vrmhelperpolicy.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"
#include "vrmnetwork.h"

/* How long the source engine may take to listen */
#define VRM_SOURCE_LISTEN_TIMEOUT_S 15
/* QEMU's connections (main and multifd) queued before the engine accepts */
#define VRM_SOURCE_TCP_BACKLOG 64

/* A peer's request, from its arrival until a job takes the channel */
typedef struct {
    vrmHelperDaemon *d;
    vrmPeerConn *pc;                /* NULL once it failed */
    vrmPeerMessage *request;
    bool querying;                  /* libvirt is being asked, or the
                                     * requester reached back */
    unsigned int tries;             /* a recovery: libvirt asked so often */
    vrmPeerConn *back;              /* a reach check: our handshake with the
                                     * requester */
} vrmSourceRequest;

static void
vrmSourceRequestFree(vrmSourceRequest *req)
{
    vrmPeerConnFree(req->back);
    vrmPeerConnFinish(req->pc);
    vrmPeerMessageFree(req->request);
    g_free(req);
}

/* Say no to the peer, log it (a peer can trigger it: rate limited), and
 * close; the error is this thread's last */
static void
vrmHelperJobRefuse(vrmSourceRequest *req)
{
    g_autoptr(vrmPeerMessage) res = vrmPeerResultNewError(vrmGetLastErrorCode(),
                                                          vrmGetLastErrorMessage());

    VRM_WARN_LIMITED(&req->d->peerLog, _("refused the request of the peer helper at %1$s: %2$s"),
                     req->pc ? vrmPeerConnPeerName(req->pc) : "?",
                     vrmGetLastErrorMessage());
    if (req->pc)
        vrmPeerConnSend(req->pc, res);
    vrmSourceRequestFree(req);
}


/* ---- a job's channel to the destination -------------------------------- */

static void vrmSourcePeerMessage(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque);
static void vrmSourcePeerFailed(vrmPeerConn *pc, gpointer opaque);

static const vrmPeerConnCallbacks vrmSourceJobCallbacks = {
    .message = vrmSourcePeerMessage,
    .failed = vrmSourcePeerFailed,
};

/* The negotiation failed here: tell the destination, end the engine */
static void
vrmSourceFail(vrmHelperDaemon *d, vrmHelperJob *job, int code, const char *why)
{
    vrmHelperJobsAbort(job, code, why);
    vrmHelperJobsFinish(d, job, VRM_JOB_STATE_FAILED, code, why);
}

static void
vrmSourceListenExpired(vrmHelperDaemon *d, vrmHelperJob *job)
{
    vrmSourceFail(d, job, VRM_ERR_TIMEOUT,
                  _("the source engine did not start listening in time"));
}

static void
vrmSourceAnswerExpired(vrmHelperDaemon *d, vrmHelperJob *job)
{
    vrmSourceFail(d, job, VRM_ERR_TIMEOUT,
                  _("the destination's helper did not answer the offer in time"));
}

/* The engine answered: once it listens (on the port the kernel chose),
 * offer */
static void
vrmSourceStats(vrmHelperDaemon *d, vrmHelperJob *job)
{
    g_autoptr(vrmPeerMessage) msg = NULL;
    vrmOffer *offer = job->pendingOffer;

    if (job->phase != VRM_PHASE_SRC_STARTING || !job->peer || !offer ||
        !job->rdmaPort || job->steer == VRM_JOB_STEER_ADDING)
        return;
    offer->port = job->rdmaPort;
    msg = vrmPeerMessageNew(VRM_PEER_MIGRATION_OFFER);
    msg->socketPath = g_strdup(job->record->socketPath);
    msg->offer = vrmOfferCopy(offer);
    if (vrmPeerConnSend(job->peer, msg) < 0) {
        vrmHelperJobsFailLast(d, job, vrmSourceFail);
        return;
    }
    /* the token has gone where it had to: not kept here any longer */
    vrmOfferDropToken(offer);
    job->record->migration->offer = g_steal_pointer(&job->pendingOffer);
    vrmHelperJobsSetPhase(d, job, VRM_PHASE_SRC_OFFERED,
                          d->connectTimeout + d->conf->peerTimeout + 5,
                          vrmSourceAnswerExpired);
    vrmPeerConnExpect(job->peer, d->connectTimeout + d->conf->peerTimeout + 5);
    VRM_INFO("job %llu: offered to %s", job->record->id, vrmPeerConnPeerName(job->peer));
}

static void
vrmSourceAnswer(vrmHelperDaemon *d, vrmHelperJob *job, vrmAnswer *answer)
{
    g_autoptr(vrmPeerMessage) ok = vrmPeerMessageNew(VRM_PEER_MIGRATION_RESULT);

    job->record->migration->answer = vrmAnswerCopy(answer);
    if (vrmNegotiationCheckAnswer(job->record->migration->offer, answer) < 0) {
        vrmHelperJobsFailLast(d, job, vrmSourceFail);
        return;
    }
    vrmPeerConnSend(job->peer, ok);
    g_clear_pointer(&job->peer, vrmPeerConnFinish);
    vrmHelperJobsSetPhase(d, job, VRM_PHASE_SRC_RUNNING, 0, NULL);
    vrmHelperJobsSave(d, job);
    VRM_INFO("job %llu: the destination accepted; QEMU's turn", job->record->id);
}

static void
vrmSourcePeerMessage(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque)
{
    vrmHelperDaemon *d = opaque;
    vrmHelperJob *job = vrmHelperJobsOfPeer(d, pc);
    g_autoptr(vrmPeerMessage) m = msg;

    if (!job)
        return;
    if (m->type == VRM_PEER_MIGRATION_RESULT && m->errorCode != VRM_ERR_OK) {
        g_autofree char *line = vrmLogSanitize(m->errorMessage ? m->errorMessage : "");
        g_autofree char *why =
            g_strdup_printf(_("the destination's helper gave up: %1$s"), line);

        g_clear_pointer(&job->peer, vrmPeerConnFree);
        vrmSourceFail(d, job, VRM_ERR_PEER, why);
        return;
    }
    if (m->type != vrmHelperPhaseExpects(job->phase)) {
        vrmSourceFail(d, job, VRM_ERR_PROTOCOL,
                      _("the destination's helper sent a message out of turn"));
        return;
    }
    /* the answer: the only message the source waits for */
    vrmSourceAnswer(d, job, m->answer);
}

static void
vrmSourcePeerFailed(vrmPeerConn *pc, gpointer opaque)
{
    vrmHelperDaemon *d = opaque;
    vrmHelperJob *job = vrmHelperJobsOfPeer(d, pc);
    g_autofree char *why = g_strdup(vrmGetLastErrorMessage());

    if (!job)
        return;
    g_clear_pointer(&job->peer, vrmPeerConnFree);
    if (job->phase == VRM_PHASE_SRC_STARTING || job->phase == VRM_PHASE_SRC_OFFERED)
        vrmSourceFail(d, job, VRM_ERR_PEER, why);
}


/* ---- the end: how did libvirt's migration end? ------------------------- */

static void vrmSourceAskOutcome(vrmHelperDaemon *d, vrmHelperJob *job);
static void vrmSourceOverTcp(vrmHelperDaemon *d, vrmHelperJob *job);

static gboolean
vrmSourceOutcomeAgain(gpointer opaque)
{
    vrmHelperJobRef *ref = opaque;
    vrmHelperJob *job = vrmHelperJobsGet(ref->d, ref->id);

    if (job) {
        job->outcomeTimer = 0;
        vrmSourceAskOutcome(ref->d, job);
    }
    return G_SOURCE_REMOVE;
}

static void
vrmSourceOutcome(vrmOutcome outcome, const char *detail, gpointer opaque)
{
    vrmHelperJobRef *ref = opaque;
    vrmHelperDaemon *d = ref->d;
    vrmHelperJob *job = vrmHelperJobsGet(d, ref->id);

    if (!job || (job->phase != VRM_PHASE_SRC_OUTCOME && job->phase != VRM_PHASE_SRC_UNUSED)) {
        g_free(ref);
        return;
    }
    if (job->phase == VRM_PHASE_SRC_UNUSED &&
        (outcome != VRM_OUTCOME_PENDING || g_get_monotonic_time() > job->outcomeDeadline)) {
        /* moved without the engine, or the engine's own failure stands */
        if (outcome == VRM_OUTCOME_SUCCEEDED)
            vrmSourceOverTcp(d, job);
        else
            vrmHelperJobsFinish(d, job, VRM_JOB_STATE_FAILED,
                                vrmHelperJobsEndedCode(job), job->unusedWhy);
        g_free(ref);
        return;
    }
    switch (outcome) {
    case VRM_OUTCOME_SUCCEEDED:
        vrmHelperJobsFinish(d, job, vrmOutcomeJobState(outcome), VRM_ERR_OK, NULL);
        break;
    case VRM_OUTCOME_FAILED:
        vrmHelperJobsFinish(d, job, vrmOutcomeJobState(outcome), VRM_ERR_LIBVIRT,
                            _("the transport engine completed, but libvirt reports that the migration failed: the domain still runs on this host"));
        break;
    case VRM_OUTCOME_UNKNOWN: {
        g_autofree char *why =
            g_strdup_printf(_("the transport engine completed, but libvirt could not be asked how the migration ended: %1$s"),
                            detail ? detail : _("unknown error"));

        VRM_WARN(_("job %1$llu: %2$s"), job->record->id, why);
        vrmHelperJobsFinish(d, job, vrmOutcomeJobState(outcome), VRM_ERR_LIBVIRT, why);
        break;
    }
    case VRM_OUTCOME_PENDING:
        if (g_get_monotonic_time() > job->outcomeDeadline) {
            vrmHelperJobsFinish(d, job, VRM_JOB_STATE_FAILED, VRM_ERR_TIMEOUT,
                                _("the transport engine completed, but libvirt did not finish the migration in time"));
            break;
        }
        job->outcomeTimer = g_timeout_add_full(G_PRIORITY_DEFAULT,
                                               VRM_HELPER_OUTCOME_POLL_MS,
                                               vrmSourceOutcomeAgain,
                                               g_steal_pointer(&ref), g_free);
        break;
    }
    g_free(ref);
}

static void
vrmSourceAskOutcome(vrmHelperDaemon *d, vrmHelperJob *job)
{
    vrmHelperVirtQueryOutcome(d->virt, job->record->domainUUID,
                              vrmSourceOutcome, vrmHelperJobRefNew(d, job));
}

/* libvirt moved the domain without the engine: QEMU's URI was neither
 * the domain's socket nor a TCP destination steered here (the
 * transparent mode off, not steered, or a domain with disks); the job
 * record says so, as the destination's does for a fallback */
static void
vrmSourceOverTcp(vrmHelperDaemon *d, vrmHelperJob *job)
{
    g_autofree char *reason =
        g_strdup_printf(_("over TCP: %1$s"),
                        _("libvirt migrated the domain over its own TCP transport, which was not steered to the engine"));

    vrmHelperJobLog(job, VRM_LOG_INFO, VRM_JOB_LOG_OVER_TCP,
                    "job %llu: %s migrated out over libvirt's TCP, not through the engine",
                    job->record->id, job->record->domainName);
    vrmHelperJobsFinish(d, job, VRM_JOB_STATE_OVER_TCP, VRM_ERR_LIBVIRT, reason);
}

/* The engine has ended and libvirt is asked how the migration went
 * (@phase: outcome or unused) */
static void
vrmSourceAskLibvirt(vrmHelperDaemon *d, vrmHelperJob *job, vrmHelperPhase phase)
{
    vrmHelperJobsEngineGone(job);
    job->outcomeDeadline = g_get_monotonic_time() +
        VRM_HELPER_OUTCOME_TIMEOUT_S * G_USEC_PER_SEC;
    vrmHelperJobsSetPhase(d, job, phase, 0, NULL);
    vrmSourceAskOutcome(d, job);
}

static void
vrmSourceEnded(vrmHelperDaemon *d, vrmHelperJob *job, vrmJobState state,
               const char *reason)
{
    if (job->phase == VRM_PHASE_SRC_RUNNING && state == VRM_JOB_STATE_COMPLETED &&
        !job->cancelRequested) {
        /* the engine's view is not the migration's: ask libvirt */
        vrmSourceAskLibvirt(d, job, VRM_PHASE_SRC_OUTCOME);
        return;
    }
    if (job->phase == VRM_PHASE_SRC_RUNNING && state == VRM_JOB_STATE_FAILED &&
        job->record->state < VRM_JOB_STATE_TRANSFERRING && !job->cancelRequested &&
        !job->recoveryOf) {
        /* QEMU's stream never came: libvirt may have migrated it over
         * its own TCP */
        g_free(job->unusedWhy);
        job->unusedWhy = g_strdup(reason);
        vrmSourceAskLibvirt(d, job, VRM_PHASE_SRC_UNUSED);
        return;
    }
    if (job->phase == VRM_PHASE_SRC_STARTING || job->phase == VRM_PHASE_SRC_OFFERED) {
        vrmHelperJobsFailEnded(d, job, vrmSourceFail, reason,
                               _("the source engine ended during the negotiation"));
        return;
    }
    vrmHelperJobsFinish(d, job, state, vrmHelperJobsEndedCode(job), reason);
}

static void
vrmSourceFinishing(vrmHelperDaemon *d, vrmHelperJob *job)
{
    g_clear_pointer(&job->peer, vrmPeerConnFree);
}

const vrmHelperRoleOps vrmHelperSourceOps = {
    .stats = vrmSourceStats,
    .ended = vrmSourceEnded,
    .finishing = vrmSourceFinishing,
};


/* ---- a request: libvirt's facts, then the job -------------------------- */

/* A recovery, once the broken job has ended here: is the domain paused
 * in post-copy failed, and did its last outgoing job go to the requester? */
static int
vrmSourceCheckRecovery(vrmHelperDaemon *d, const vrmDomainFacts *f,
                       const vrmPeerMessage *request)
{
    const char *host = d->locator ? d->locator->host : g_get_host_name();
    vrmHelperJob *last = vrmHelperJobsLastOfDomain(d, f->uuid, VRM_JOB_ROLE_SOURCE);

    if (!d->conf->recoveryWindow) {
        vrmReportError(VRM_ERR_POLICY,
                       _("virt-rdmad on %1$s does not recover post-copy migrations over RDMA ([limits] recovery-window is 0)"),
                       host);
        return -1;
    }
    if (!f->postcopyFailed) {
        vrmReportError(VRM_ERR_POLICY,
                       _("the domain '%1$s' on %2$s is not paused in a post-copy migration that failed: nothing to recover"),
                       f->name, host);
        return -1;
    }
    if (!last || !last->record->migration ||
        !vrmLocatorEqual(last->record->migration->locator, request->requester)) {
        vrmReportError(VRM_ERR_POLICY,
                       _("the last RDMA migration of the domain '%1$s' from %2$s did not go to %3$s: no recovery for it there"),
                       f->name, host, request->requester->host);
        return -1;
    }
    return 0;
}

/* Why the domain cannot be migrated out from here, or 0 */
static int
vrmSourceCheckFacts(vrmHelperDaemon *d, const vrmDomainFacts *f,
                    const vrmPeerMessage *request)
{
    const char *host = d->locator ? d->locator->host : g_get_host_name();
    vrmHelperJob *other;

    if (f->error) {
        vrmReportError(VRM_ERR_LIBVIRT,
                       _("virt-rdmad on %1$s cannot ask its libvirt about the domain: %2$s"),
                       host, f->error);
        return -1;
    }
    if (!f->found || !f->active) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("no running domain with UUID %1$s on %2$s"), f->uuid, host);
        return -1;
    }
    if (request->recoveryOf) {
        if (vrmSourceCheckRecovery(d, f, request) < 0)
            return -1;
    } else if (!f->migratingOut) {
        vrmReportError(VRM_ERR_POLICY,
                       _("the domain '%1$s' runs on %2$s but is not migrating out of it"),
                       f->name, host);
        return -1;
    }
    if (!f->rdmaEnabled) {
        vrmReportError(VRM_ERR_POLICY,
                       _("the domain '%1$s' has no <rdma:migration> metadata on %2$s: it is not RDMA-enabled"),
                       f->name, host);
        return -1;
    }
    if (!f->def) {
        vrmReportError(VRM_ERR_XML,
                       _("the virt-rdma metadata of the domain '%1$s' on %2$s is invalid: %3$s"),
                       f->name, host, f->defError ? f->defError : "");
        return -1;
    }
    if (f->def->disabled) {
        vrmReportError(VRM_ERR_POLICY,
                       _("the domain '%1$s' on %2$s never migrates over RDMA: its metadata says <rdma:migration enabled=\"no\">"),
                       f->name, host);
        return -1;
    }
    if ((other = vrmHelperJobsLiveOfDomain(d, f->uuid))) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("a migration job of the domain '%1$s' already runs on %2$s (job %3$llu)"),
                       f->name, host, other->record->id);
        return -1;
    }
    if (d->engineProblem) {
        vrmReportError(VRM_ERR_CONFIG, "%s", d->engineProblem);
        return -1;
    }
    return vrmHelperCheckJobLimit(vrmHelperJobsLive(d, NULL), d->conf->maxJobs);
}

/*
 * The parameters of the offer: the domain's metadata, the pin-all flag of
 * libvirt's job, the intent's overrides; pin-all is on if any of the
 * three says so ("on" wins). Channels: the most both policies allow,
 * unless the metadata or the intent names fewer.
 */
static void
vrmSourceParams(vrmHelperDaemon *d, const vrmDomainFacts *f,
                const vrmHelperIntent *intent, unsigned int peerMax,
                vrmMigrationParams *params)
{
    guint32 pinOn;
    unsigned int max = MIN(d->conf->maxChannels, peerMax);

    vrmMigrationParamsCopy(params, &f->def->params);
    pinOn = (params->capsOn & VRM_CAP_PIN_ALL) |
        (f->pinAllFlag ? VRM_CAP_PIN_ALL : 0) |
        (intent && intent->overrides ? intent->overrides->capsOn & VRM_CAP_PIN_ALL : 0);
    if (intent && intent->overrides)
        vrmMigrationParamsMerge(params, intent->overrides);
    params->capsOn |= pinOn;
    params->capsOff &= ~pinOn;
    params->channels = params->channels ? MIN(params->channels, max) : max;
}

static const char *
vrmSourceDevice(vrmHelperDaemon *d, const vrmMigrationParams *params,
                unsigned int *devPort)
{
    *devPort = params->devicePort ? params->devicePort : d->conf->devicePort;
    return params->device ? params->device : d->conf->device;
}

/* ---- the transparent mode: QEMU's TCP steered to the engine ----------- */

/* Never a reason to refuse: the migration may not even be over TCP (a
 * per-domain URI), and over TCP it still works */
static void
vrmSourceNotSteered(vrmHelperJob *job, const char *why)
{
    VRM_WARN(_("job %1$llu: not steered: %2$s; a migration over libvirt's TCP goes over TCP"),
             job->record->id, why);
}

static void
vrmSourceSteerAdded(const vrmSteerRules *rules, const char *error, gpointer opaque)
{
    g_autofree vrmHelperJobRef *ref = opaque;
    vrmHelperDaemon *d = ref->d;
    vrmHelperJob *job = vrmHelperJobsGet(d, ref->id);
    g_autofree char *handles = NULL;

    if (!job || job->steer != VRM_JOB_STEER_ADDING ||
        vrmJobStateIsFinal(job->record->state)) {
        /* the job ended while nft ran */
        if (job)
            job->steer = VRM_JOB_STEER_NONE;
        vrmSteerRemove(d->steer, rules);
        return;
    }
    if (!rules->n) {
        job->steer = VRM_JOB_STEER_NONE;
        vrmSourceNotSteered(job, error);
        vrmSourceStats(d, job);
        return;
    }
    job->steer = VRM_JOB_STEER_ACTIVE;
    job->steerRules = *rules;
    handles = vrmSteerRulesFormat(rules);
    VRM_INFO("job %llu: QEMU's TCP connections to ports %u-%u steered to its engine (rule handles %s; QEMU: %s; libvirt's daemon: %s)",
             job->record->id, d->conf->migrationPortMin, d->conf->migrationPortMax,
             handles, job->steerCgroup ? job->steerCgroup : "its uid only",
             job->steerDaemonCgroup ? job->steerDaemonCgroup : "its uid only");
    /* the offer may have waited for the rule */
    vrmSourceStats(d, job);
}

/* Another live job that steers: libvirt's daemon connects the main stream
 * of every migration that is not parallel, and nothing in its
 * connections tells the domain, so one job at a time steers them */
static gboolean
vrmSourceSteersBeside(gpointer id G_GNUC_UNUSED, gpointer value, gpointer job)
{
    const vrmHelperJob *other = value;

    return other != job && other->steer != VRM_JOB_STEER_NONE &&
        !vrmJobStateIsFinal(other->record->state);
}

static vrmHelperJob *
vrmSourceSteerConflict(vrmHelperDaemon *d, vrmHelperJob *job)
{
    return g_hash_table_find(d->jobs, vrmSourceSteersBeside, job);
}

/* libvirt's daemon: its uid and its own cgroup (NULL: none). false: not
 * found */
static bool
vrmSourceSteerDaemon(uid_t *uid, char **cgroup, unsigned int *level)
{
    pid_t pid = vrmSteerLibvirtDaemon(VRM_STEER_LIBVIRT_RUN_DIR);
    g_autofree char *dir = NULL;
    g_autofree char *file = NULL;
    g_autofree char *text = NULL;
    struct stat st;

    if (pid <= 0)
        return false;
    dir = g_strdup_printf("/proc/%d", (int)pid);
    file = g_strdup_printf("/proc/%d/cgroup", (int)pid);
    if (stat(dir, &st) < 0 || !g_file_get_contents(file, &text, NULL, NULL))
        return false;
    *uid = st.st_uid;
    *cgroup = vrmSteerDaemonCgroupParse(text, level);
    return true;
}

/*
 * The hook cannot see libvirt's migration URI, so every source job is
 * ready for both: QEMU's socket on the per-domain path, and, in the
 * transparent mode, a TCP listener on 127.0.0.1 that rules of its own
 * steer this QEMU's connections (and libvirt's daemon's, made for it) to
 * libvirt's migration ports to. Not steered (the migration then goes over
 * TCP, if that is its URI): the mode off, a recovery, a domain whose
 * disks the engine would have to tell from its memory on TCP, another
 * job that steers, libvirt's daemon not found, and a listener or a rule
 * that cannot be made (a warning): none of these fails the job.
 */
static void
vrmSourceSteerPrepare(vrmHelperDaemon *d, vrmHelperJob *job, const vrmOffer *offer)
{
    struct sockaddr_in addr = { .sin_family = AF_INET };
    socklen_t len = sizeof(addr);
    vrmSteerMatch match = { 0 };
    vrmHelperJobRef *ref;
    vrmHelperJob *other;
    unsigned int level = 0;
    unsigned int daemonLevel = 0;
    int fd;

    if (!d->steer || vrmSteerProblem(d->steer) || job->recoveryOf)
        return;
    if (offer->disks) {
        VRM_INFO("job %llu: not steered: the domain has disks, which the transparent mode does not carry yet; a migration over libvirt's TCP goes over TCP",
                 job->record->id);
        return;
    }
    if ((other = vrmSourceSteerConflict(d, job))) {
        VRM_INFO("job %llu: not steered: job %llu steers libvirt's connections to migration ports, which do not tell their domain; a migration over libvirt's TCP goes over TCP",
                 job->record->id, other->record->id);
        return;
    }
    if (!vrmSourceSteerDaemon(&match.daemonUid, &job->steerDaemonCgroup, &daemonLevel)) {
        VRM_INFO("job %llu: not steered: libvirt's daemon is not found (%s/libvirtd.pid, %s/virtqemud.pid), and it makes the main connection of a migration that is not parallel; a migration over libvirt's TCP goes over TCP",
                 job->record->id, VRM_STEER_LIBVIRT_RUN_DIR, VRM_STEER_LIBVIRT_RUN_DIR);
        return;
    }
    job->steerCgroup = vrmSteerQemuCgroup(job->qemuPid, &level);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        listen(fd, VRM_SOURCE_TCP_BACKLOG) < 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) < 0) {
        vrmReportSystemError(errno, _("cannot make the transparent mode's TCP listener on 127.0.0.1"));
        vrmSourceNotSteered(job, vrmGetLastErrorMessage());
        vrmResetLastError();
        if (fd >= 0)
            close(fd);
        return;
    }
    job->tcpListenFd = fd;
    match.qemuUid = job->qemuUid;
    match.cgroup = job->steerCgroup;
    match.cgroupLevel = level;
    match.daemonCgroup = job->steerDaemonCgroup;
    match.daemonCgroupLevel = daemonLevel;
    match.portMin = d->conf->migrationPortMin;
    match.portMax = d->conf->migrationPortMax;
    ref = vrmHelperJobRefNew(d, job);
    if (vrmSteerAdd(d->steer, &match, ntohs(addr.sin_port), job->record->id,
                    vrmSourceSteerAdded, ref) < 0) {
        g_free(ref);
        vrmSourceNotSteered(job, vrmGetLastErrorMessage());
        vrmResetLastError();
        return;
    }
    job->steer = VRM_JOB_STEER_ADDING;
}

/* Device, address, port; the offer; the budget; directory; engine.
 * The job exists even when this fails (-1): the caller ends it. */
static int
vrmSourceStartJob(vrmSourceRequest *req, const vrmDomainFacts *f,
                  vrmHelperJob **jobp)
{
    vrmHelperDaemon *d = req->d;
    g_autoptr(vrmMigrationParams) params = g_new0(vrmMigrationParams, 1);
    g_autofree char *device = NULL;
    g_autofree char *address = NULL;
    g_autoptr(vrmOffer) offer = NULL;
    vrmHelperIntent *intent;
    unsigned int devPort = 1;
    vrmHelperJob *broken = NULL;
    vrmHelperJob *job;

    if (req->request->recoveryOf)
        broken = vrmHelperJobsLastOfDomain(d, f->uuid, VRM_JOB_ROLE_SOURCE);
    *jobp = job = vrmHelperJobsCreate(d, VRM_JOB_ROLE_SOURCE, f->name, f->uuid);
    if (req->request->recoveryOf) {
        /* the engines wait for the operator's --postcopy-resume; whoever
         * owned the broken job owns its recovery (virt-rdma migrate
         * --postcopy-resume looks for it as that user) */
        job->recoveryOf = req->request->recoveryOf;
        job->waitStream = d->conf->recoveryWindow;
        if (broken) {
            job->record->owner = broken->record->owner;
            job->record->hasRecoveryOf = true;
            job->record->recoveryOf = broken->record->id;
        }
        intent = NULL;
    } else if ((intent = vrmHelperIntentsTake(d, f->uuid, job->record->id))) {
        job->record->owner = intent->owner;
        job->record->hasIntent = true;
        job->record->intent = intent->record->id;
    }
    vrmSourceParams(d, f, intent, req->request->maxChannels, params);
    job->record->migration = vrmMigrationDefNew();
    vrmMigrationParamsCopy(&job->record->migration->params, params);
    job->record->migration->locator = vrmLocatorCopy(req->request->requester);
    job->qemuUid = f->qemuUid >= 0 ? f->qemuUid : d->qemuUid;
    job->qemuPid = f->qemuPid;

    if (vrmHelperDeviceCheck(vrmSourceDevice(d, params, &devPort), devPort, &device) < 0)
        return -1;
    if (params->address)
        address = g_strdup(params->address);
    else if (d->conf->address)
        address = g_strdup(d->conf->address);
    else if (!(address = vrmHelperDeviceAddress(device, devPort)))
        return -1;
    /* port 0: the kernel chooses, the engine reports it, the offer says it */
    if (!(offer = vrmOfferFromParams(params, &d->policy, address, 0)))
        return -1;
    g_free(offer->device);
    offer->device = g_strdup(device);
    offer->devicePort = devPort;
    /* a disk channel for each disk QEMU may copy (--copy-storage-all); a
     * domain with more than a job can carry copies at most that many at
     * once (QEMU's extra connections are refused with a sentence) */
    offer->disks = MIN(f->disks, VRM_DISK_CHANNELS_MAX);
    job->diskChannels = offer->disks;
    if (vrmHelperJobsReserve(d, job, vrmPinnedBytes(offer->channels + offer->disks,
                                                    offer->ringDepth,
                                                    offer->chunkSize)) < 0)
        return -1;
    job->token = offer->token;
    job->hasToken = true;
    /* QEMU's socket, bound here while its directory is root's alone */
    if (vrmRunDirDomainCreate(d->runDir, f->uuid, job->qemuUid, d->engineGid,
                              true, &job->domainDir, &job->qemuListenFd,
                              offer->disks ? &job->diskListenFd : NULL) < 0)
        return -1;
    vrmSourceSteerPrepare(d, job, offer);
    if (vrmHelperJobsSpawn(d, job, offer, NULL, device) < 0)
        return -1;
    job->pendingOffer = g_steal_pointer(&offer);
    return 0;
}

static void vrmSourceFacts(vrmDomainFacts *facts, gpointer opaque);

static gboolean
vrmSourceRequeryLater(gpointer opaque)
{
    vrmSourceRequest *req = opaque;

    vrmHelperVirtQueryDomain(req->d->virt, req->request->domainUUID, vrmSourceFacts, req);
    return G_SOURCE_REMOVE;
}

static void
vrmSourceFacts(vrmDomainFacts *facts, gpointer opaque)
{
    vrmSourceRequest *req = opaque;
    g_autoptr(vrmDomainFacts) f = facts;
    vrmHelperDaemon *d = req->d;
    vrmHelperJob *job = NULL;

    req->querying = false;
    if (!req->pc) {
        /* the peer went away meanwhile */
        vrmSourceRequestFree(req);
        return;
    }
    if (req->request->recoveryOf &&
        ((f->postcopyFailed && vrmHelperJobsLiveOfDomain(d, f->uuid)) ||
         (!f->postcopyFailed && f->migratingOut)) &&
        ++req->tries < VRM_HELPER_RECOVERY_TRIES) {
        /* libvirt keeps the outgoing job through post-copy: the break may
         * reach this side's libvirt and engine later than the
         * destination's, look again */
        req->querying = true;
        g_timeout_add(VRM_HELPER_RECOVERY_POLL_MS, vrmSourceRequeryLater, req);
        return;
    }
    vrmResetLastError();
    if (vrmSourceCheckFacts(d, f, req->request) < 0) {
        vrmHelperJobRefuse(req);
        return;
    }
    if (vrmSourceStartJob(req, f, &job) < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
        int code = vrmGetLastErrorCode();

        vrmHelperJobsFinish(d, job, VRM_JOB_STATE_FAILED, code, why);
        vrmSetLastError(code, why);
        vrmHelperJobRefuse(req);
        return;
    }
    /* the job takes the channel */
    job->peer = g_steal_pointer(&req->pc);
    vrmPeerConnSetCallbacks(job->peer, &vrmSourceJobCallbacks, d);
    vrmPeerConnExpect(job->peer, 0);
    vrmHelperJobsSetPhase(d, job, VRM_PHASE_SRC_STARTING, VRM_SOURCE_LISTEN_TIMEOUT_S,
                          vrmSourceListenExpired);
    vrmHelperJobsWatchWaiters(d, job);
    if (job->recoveryOf)
        vrmHelperJobLog(job, VRM_LOG_INFO, VRM_JOB_LOG_STARTED,
                        "job %llu: recovery of the post-copy migration of %s (%s) to %s (its job %llu); the engines wait %u s for QEMU",
                        job->record->id, f->name, f->uuid, vrmPeerConnPeerName(job->peer),
                        job->recoveryOf, job->waitStream);
    else
        vrmHelperJobLog(job, VRM_LOG_INFO, VRM_JOB_LOG_STARTED,
                        "job %llu: %s (%s) migrates out to %s, owner %u%s", job->record->id,
                        f->name, f->uuid, vrmPeerConnPeerName(job->peer), job->record->owner,
                        job->record->hasIntent ? ", with an intent" : "");
    vrmSourceRequestFree(req);
}

/*
 * A request of our version, and its requester acts only as the host it
 * names: its connection must come from its locator's address (issue 33
 * item 1; under x509 its certificate must name that host too, checked by
 * the caller, vrmPeerConnCheckIdentity). With one cluster key for all, the
 * address is what tells one holder of the key from another; the recovery
 * then goes only where the offer went (vrmSourceCheckRecovery), to a
 * requester bound the same way.
 */
int
vrmHelperSourceCheckRequest(const vrmPeerMessage *msg, const char *from)
{
    bool asking = msg->type == VRM_PEER_MIGRATION_REQUEST ||
                  msg->type == VRM_PEER_REACH_CHECK;

    if (!asking || msg->version != VRM_PEER_VERSION) {
        vrmReportError(!asking ? VRM_ERR_PROTOCOL : VRM_ERR_VERSION,
                       _("expected a migration request or a reach check of version %1$d, got <%2$s> version %3$u"),
                       VRM_PEER_VERSION, vrmPeerTypeTypeToString(msg->type), msg->version);
        return -1;
    }
    if (!msg->requester || !vrmNetworkAddressEqual(msg->requester->address, from)) {
        vrmReportError(VRM_ERR_AUTH,
                       _("the request names the helper at %1$s but comes from %2$s: a helper may ask only as itself"),
                       msg->requester && msg->requester->address ? msg->requester->address : "?",
                       from ? from : "?");
        return -1;
    }
    return 0;
}

/* ---- a reach check (virt-rdma capabilities --peer on the requester) ---- */

/* Any holder of the cluster's credentials may ask for reach checks, as
 * often as it likes: their lines are rate-limited */
static vrmRateLimit vrmSourceReachLog = VRM_RATE_LIMIT_INIT(5, 60);

/* Tell the requester how our handshake with it went, and close */
static void
vrmSourceReachEnd(vrmSourceRequest *req, bool ok)
{
    g_autoptr(vrmPeerMessage) res = NULL;

    if (ok) {
        res = vrmPeerMessageNew(VRM_PEER_MIGRATION_RESULT);
        VRM_INFO_LIMITED(&vrmSourceReachLog, "reach check: this helper reached %s:%u back",
                         req->request->requester->address, req->request->requester->port);
    } else {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());

        res = vrmPeerResultNewError(vrmGetLastErrorCode(), why);
        VRM_INFO_LIMITED(&vrmSourceReachLog, "reach check: %s", why);
    }
    if (req->pc)
        vrmPeerConnSend(req->pc, res);
    vrmSourceRequestFree(req);
}

static void
vrmSourceReachReady(vrmPeerConn *pc, gpointer opaque)
{
    vrmSourceReachEnd(opaque, true);
}

static void
vrmSourceReachMessage(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque)
{
    /* nothing was asked: nothing can come before ready */
    vrmPeerMessageFree(msg);
}

static void
vrmSourceReachFailed(vrmPeerConn *pc, gpointer opaque)
{
    vrmSourceReachEnd(opaque, false);
}

static const vrmPeerConnCallbacks vrmSourceReachCallbacks = {
    .ready = vrmSourceReachReady,
    .message = vrmSourceReachMessage,
    .failed = vrmSourceReachFailed,
};

/* The handshake a migration of ours would make with the requester, to the
 * locator it named, whose address the caller has bound to this channel's
 * source: the requester learns whether its port is open to us */
static void
vrmSourceReachBack(vrmSourceRequest *req)
{
    req->querying = true;
    vrmPeerConnExpect(req->pc, 0);
    if (!(req->back = vrmPeerConnConnect(req->d->peerCreds, req->request->requester,
                                         req->d->conf->peerTimeout,
                                         &vrmSourceReachCallbacks, req)))
        vrmSourceReachEnd(req, false);
}

static void
vrmSourceRequestMessage(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque)
{
    vrmSourceRequest *req = opaque;

    if (req->request || req->querying) {
        vrmPeerMessageFree(msg);
        vrmReportError(VRM_ERR_PROTOCOL, _("a second request on one channel"));
        vrmHelperJobRefuse(req);
        return;
    }
    if (vrmHelperSourceCheckRequest(msg, vrmPeerConnPeerAddress(pc)) < 0 ||
        vrmPeerConnCheckIdentity(pc, msg->requester) < 0) {
        vrmPeerMessageFree(msg);
        vrmHelperJobRefuse(req);
        return;
    }
    req->request = msg;
    if (msg->type == VRM_PEER_REACH_CHECK) {
        vrmSourceReachBack(req);
        return;
    }
    req->querying = true;
    vrmPeerConnExpect(pc, 0);
    vrmHelperVirtQueryDomain(req->d->virt, msg->domainUUID, vrmSourceFacts, req);
}

static void
vrmSourceRequestFailed(vrmPeerConn *pc, gpointer opaque)
{
    vrmSourceRequest *req = opaque;

    VRM_DEBUG("peer %s: %s", vrmPeerConnPeerName(pc), vrmGetLastErrorMessage());
    g_clear_pointer(&req->pc, vrmPeerConnFree);
    /* libvirt's answer (or the reach check's end) is still to come: it
     * frees the request */
    if (!req->querying)
        vrmSourceRequestFree(req);
}

static const vrmPeerConnCallbacks vrmSourceRequestCallbacks = {
    .message = vrmSourceRequestMessage,
    .failed = vrmSourceRequestFailed,
};

void
vrmHelperSourceAccept(vrmPeerConn *pc, gpointer opaque)
{
    vrmHelperDaemon *d = opaque;
    vrmSourceRequest *req = g_new0(vrmSourceRequest, 1);

    req->d = d;
    req->pc = pc;
    vrmPeerConnSetCallbacks(pc, &vrmSourceRequestCallbacks, req);
    vrmPeerConnExpect(pc, d->conf->peerTimeout);
}
