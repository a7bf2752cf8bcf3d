/*
 * vrmhelperdest.c: the destination side of the negotiation
 *
 * libvirt's `migrate begin` hook tells this helper that an RDMA-enabled
 * domain is about to arrive, with the locator the source's helper keeps
 * in the domain's live metadata. The helper connects to it (TLS, mutually
 * authenticated), asks for the migration of that domain, takes the offer
 * if its own policy and pinned-memory budget allow, makes the per-domain
 * directory for the destination QEMU, starts the destination engine with
 * the token, waits until channel 0 is connected and authenticated, and
 * answers. When the source confirms, the hook gets its reply (this host's
 * locator for the domain's XML) before the destination QEMU starts; any
 * failure before that is one line for the hook, and libvirt stops there.
 *
 * When the connection of a post-copy migration that this helper brought in
 * breaks, libvirt says so (RESUMED / POSTCOPY_FAILED) and no hook will run
 * for its recovery: the helper asks the same source helper, the same way,
 * for a recovery job, whose engines wait up to [limits] recovery-window
 * for the operator's `virsh migrate --postcopy --postcopy-resume`. A
 * helper restarted since the migration began finds the source's locator
 * in the job's .run file; if the engine ended while it was away, it missed
 * libvirt's event, and asks libvirt's state instead (running, post-copy
 * failed).
 */
#include <config.h>

#include <string.h>
#include <unistd.h>

#include "vrmhelperdpriv.h"
#include "vrmhelperpolicy.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

/* After the offer, the source may take this long to confirm */
#define VRM_DEST_RESULT_TIMEOUT_S 10

static void
vrmDestReplyWaiter(vrmHelperJob *job, int code, const char *message)
{
    vrmHelperConn *c = job->waiter;

    job->waiter = NULL;
    if (!c)
        return;
    if (code == VRM_ERR_OK) {
        g_autoptr(vrmControlMessage) msg = vrmControlMessageNew(VRM_CONTROL_REPLY);

        msg->status = VRM_REPLY_OK;
        g_ptr_array_set_free_func(msg->jobs, NULL);
        g_ptr_array_add(msg->jobs, job->record);
        vrmHelperConnReplyMessage(c, msg);
        return;
    }
    vrmHelperConnReplyError(c, code, message);
}

/*
 * May this failure let the migration go on over libvirt's TCP? Under
 * [migration] fallback = tcp, everything that says RDMA cannot carry it
 * (the source's helper unreachable or refusing, no device, the budget, the
 * versions, a timeout) may: libvirt then does what it would do without
 * virt-rdma. A cancel may not, nor a job that no hook waits for (a
 * post-copy recovery: its migration is already RDMA's).
 */
static bool
vrmDestMayFallBack(vrmHelperDaemon *d, vrmHelperJob *job, int code)
{
    return d->conf->fallback == VRM_FALLBACK_TCP && job->waiter &&
        code != VRM_ERR_CANCELLED && !job->cancelRequested;
}

/* RDMA cannot carry it, and the policy lets libvirt go on over TCP: one
 * warning, a job record "over TCP: <why>", the fallback counted by the
 * code of its cause, and the hook changes nothing */
static void
vrmDestOverTcp(vrmHelperDaemon *d, vrmHelperJob *job, int code, const char *why)
{
    g_autoptr(vrmControlMessage) msg = vrmControlMessageNew(VRM_CONTROL_REPLY);
    g_autofree char *reason = g_strdup_printf(_("over TCP: %1$s"), why);
    vrmHelperConn *c = g_steal_pointer(&job->waiter);
    /* what the hook reads; the job itself may be pruned by the end */
    vrmJobRecord *rec = vrmJobRecordCopy(job->record);

    vrmHelperJobLog(job, VRM_LOG_WARNING, VRM_JOB_LOG_OVER_TCP,
                    _("job %1$llu: %2$s migrates in over TCP, not RDMA ([migration] fallback = tcp): %3$s"),
                    job->record->id, job->record->domainName, why);
    rec->state = VRM_JOB_STATE_OVER_TCP;
    g_free(rec->error);
    rec->error = g_strdup(reason);
    msg->status = VRM_REPLY_OK;
    /* a peer may send any number: one that is no code counts as internal */
    if (code <= VRM_ERR_OK || code >= VRM_ERR_LAST)
        code = VRM_ERR_INTERNAL;
    d->metrics.fallbacks[code]++;
    rec->errorCode = code;
    g_ptr_array_add(msg->jobs, rec);
    vrmHelperJobsFinish(d, job, VRM_JOB_STATE_OVER_TCP, code, reason);
    vrmHelperConnReplyMessage(c, msg);
}

/* The negotiation failed: tell the source (if it still listens) and the
 * hook, end the engine, end the job */
static void
vrmDestFail(vrmHelperDaemon *d, vrmHelperJob *job, int code, const char *why)
{
    vrmHelperJobsAbort(job, code, why);
    if (vrmDestMayFallBack(d, job, code)) {
        vrmDestOverTcp(d, job, code, why);
        return;
    }
    vrmDestReplyWaiter(job, code, why);
    vrmHelperJobsFinish(d, job, VRM_JOB_STATE_FAILED, code, why);
}

static void
vrmDestExpired(vrmHelperDaemon *d, vrmHelperJob *job)
{
    if (job->phase == VRM_PHASE_DST_STARTING) {
        g_autofree char *why =
            g_strdup_printf(_("the destination engine could not connect to the source engine at %1$s port %2$u within %3$u seconds"),
                            job->record->migration->offer->address,
                            job->record->migration->offer->port,
                            d->connectTimeout);

        vrmDestFail(d, job, VRM_ERR_TIMEOUT, why);
    } else {
        vrmDestFail(d, job, VRM_ERR_TIMEOUT,
                    _("the source host's virt-rdmad did not answer in time"));
    }
}

/* Channel 0 connected and authenticated (version 1 engines connect every
 * channel at once: all of them) */
static void
vrmDestStats(vrmHelperDaemon *d, vrmHelperJob *job)
{
    g_autoptr(vrmPeerMessage) msg = NULL;
    const vrmAnswer *answer;
    unsigned int needed;

    if (job->phase != VRM_PHASE_DST_STARTING || !job->peer)
        return;
    answer = job->record->migration->answer;
    needed = answer->version >= 2 ? 1 : answer->channels;
    if (job->established < needed)
        return;
    msg = vrmPeerMessageNew(VRM_PEER_MIGRATION_ANSWER);
    msg->answer = vrmAnswerCopy(answer);
    if (vrmPeerConnSend(job->peer, msg) < 0) {
        vrmHelperJobsFailLast(d, job, vrmDestFail);
        return;
    }
    vrmHelperJobsSetPhase(d, job, VRM_PHASE_DST_ANSWERED, VRM_DEST_RESULT_TIMEOUT_S,
                          vrmDestExpired);
    vrmPeerConnExpect(job->peer, VRM_DEST_RESULT_TIMEOUT_S);
}

/* The source's offer: our policy, our budget, the directory, the engine */
static int
vrmDestTakeOffer(vrmHelperDaemon *d, vrmHelperJob *job, vrmPeerMessage *msg)
{
    g_autoptr(vrmAnswer) answer = NULL;
    g_autofree char *device = NULL;
    const vrmOffer *offer = msg->offer;

    job->record->migration->offer = vrmOfferCopy(offer);
    vrmOfferDropToken(job->record->migration->offer);
    if (g_strcmp0(msg->socketPath, job->record->socketPath) != 0) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("the source's per-domain path %1$s is not this host's %2$s: give both hosts the same [paths] run-dir"),
                       msg->socketPath, job->record->socketPath);
        return -1;
    }
    if (vrmHelperDeviceCheck(d->conf->device, d->conf->devicePort, &device) < 0)
        return -1;
    answer = vrmNegotiate(offer, &d->policy);
    /* the source's count of disks to copy: one disk channel each */
    job->diskChannels = offer->disks;
    if (answer->status == VRM_ANSWER_ACCEPTED &&
        vrmHelperJobsReserve(d, job, vrmPinnedBytes(answer->channels + offer->disks,
                                                    answer->ringDepth,
                                                    answer->chunkSize)) < 0) {
        vrmAnswerFree(answer);
        answer = vrmAnswerNew(VRM_ANSWER_REFUSED);
        answer->reason = VRM_REFUSAL_BUSY;
        answer->message = g_strdup(vrmGetLastErrorMessage());
    }
    job->record->migration->answer = vrmAnswerCopy(answer);
    if (answer->status == VRM_ANSWER_REFUSED) {
        g_autoptr(vrmPeerMessage) no = vrmPeerMessageNew(VRM_PEER_MIGRATION_ANSWER);

        no->answer = vrmAnswerCopy(answer);
        vrmPeerConnSend(job->peer, no);
        vrmReportError(answer->reason == VRM_REFUSAL_BUSY ? VRM_ERR_RESOURCE : VRM_ERR_POLICY,
                       _("virt-rdmad on this host refused the migration: %1$s"),
                       answer->message ? answer->message :
                       vrmRefusalReasonTypeToString(answer->reason));
        return -1;
    }
    if (vrmRunDirDomainCreate(d->runDir, job->record->domainUUID, d->qemuUid,
                              d->engineGid, false, &job->domainDir, NULL, NULL) < 0)
        return -1;
    job->qemuUid = d->qemuUid;
    job->token = offer->token;
    job->hasToken = true;
    return vrmHelperJobsSpawn(d, job, offer, answer, device);
}

static void
vrmDestPeerReady(vrmPeerConn *pc, gpointer opaque)
{
    vrmHelperDaemon *d = opaque;
    vrmHelperJob *job = vrmHelperJobsOfPeer(d, pc);
    g_autoptr(vrmPeerMessage) req = vrmPeerMessageNew(VRM_PEER_MIGRATION_REQUEST);

    if (!job)
        return;
    req->domainName = g_strdup(job->record->domainName);
    req->domainUUID = g_strdup(job->record->domainUUID);
    req->requester = vrmLocatorCopy(d->locator);
    req->maxChannels = d->conf->maxChannels;
    req->recoveryOf = job->recoveryOf;
    if (vrmPeerConnSend(pc, req) < 0) {
        vrmHelperJobsFailLast(d, job, vrmDestFail);
        return;
    }
    /* the source asks its libvirt and starts its engine meanwhile */
    vrmHelperJobsSetPhase(d, job, VRM_PHASE_DST_REQUESTED,
                          d->conf->peerTimeout + 15 + 1, vrmDestExpired);
    vrmPeerConnExpect(pc, d->conf->peerTimeout + 15);
}

static void
vrmDestPeerMessage(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque)
{
    vrmHelperDaemon *d = opaque;
    vrmHelperJob *job = vrmHelperJobsOfPeer(d, pc);
    g_autoptr(vrmPeerMessage) m = msg;

    if (!job)
        return;
    if (m->type == VRM_PEER_MIGRATION_RESULT && m->errorCode != VRM_ERR_OK) {
        g_autofree char *line = vrmLogSanitize(m->errorMessage ? m->errorMessage : "");
        g_autofree char *why =
            g_strdup_printf(_("virt-rdmad on the source host (%1$s) refused: %2$s"),
                            vrmPeerConnPeerName(pc), line);

        g_clear_pointer(&job->peer, vrmPeerConnFree);
        vrmDestFail(d, job, m->errorCode, why);
        return;
    }
    if (m->type != vrmHelperPhaseExpects(job->phase)) {
        vrmDestFail(d, job, VRM_ERR_PROTOCOL,
                    _("the source host's virt-rdmad sent a message out of turn"));
        return;
    }
    if (m->type == VRM_PEER_MIGRATION_OFFER) {
        if (vrmDestTakeOffer(d, job, m) < 0) {
            vrmHelperJobsFailLast(d, job, vrmDestFail);
            return;
        }
        vrmHelperJobsSetPhase(d, job, VRM_PHASE_DST_STARTING, d->connectTimeout + 1,
                              vrmDestExpired);
        vrmPeerConnExpect(pc, 0);
        vrmHelperJobsWatchWaiters(d, job);
        return;
    }
    /* the result: ok, the hook may let libvirt go on */
    g_clear_pointer(&job->peer, vrmPeerConnFinish);
    vrmHelperJobsSetPhase(d, job, VRM_PHASE_DST_RUNNING, 0, NULL);
    vrmHelperJobsSave(d, job);
    VRM_INFO("job %llu: negotiated; the hook lets libvirt go on", job->record->id);
    vrmDestReplyWaiter(job, VRM_ERR_OK, NULL);
}

static void
vrmDestPeerFailed(vrmPeerConn *pc, gpointer opaque)
{
    vrmHelperDaemon *d = opaque;
    vrmHelperJob *job = vrmHelperJobsOfPeer(d, pc);
    g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
    int code = vrmGetLastErrorCode();

    if (!job)
        return;
    g_clear_pointer(&job->peer, vrmPeerConnFree);
    if (job->phase != VRM_PHASE_DST_RUNNING)
        vrmDestFail(d, job, code, why);
}

static const vrmPeerConnCallbacks vrmDestCallbacks = {
    .ready = vrmDestPeerReady,
    .message = vrmDestPeerMessage,
    .failed = vrmDestPeerFailed,
};

/* libvirt's answer for a job whose engine ended without QEMU's stream:
 * a domain that runs here with no job of libvirt's any more came over
 * libvirt's own TCP (the source did not steer it to its engine) */
static void
vrmDestUnusedFacts(vrmDomainFacts *facts, gpointer opaque)
{
    g_autofree vrmHelperJobRef *ref = opaque;
    g_autoptr(vrmDomainFacts) f = facts;
    vrmHelperJob *job = vrmHelperJobsGet(ref->d, ref->id);
    g_autofree char *reason = NULL;

    if (!job || job->phase != VRM_PHASE_DST_UNUSED)
        return;
    if (f->error || !vrmDomainFactsSettled(f)) {
        /* the engine's failure stands */
        vrmHelperJobsFinish(ref->d, job, VRM_JOB_STATE_FAILED,
                            vrmHelperJobsEndedCode(job), job->unusedWhy);
        return;
    }
    reason = g_strdup_printf(_("over TCP: %1$s"),
                             _("libvirt migrated the domain over its own TCP transport, which the source did not steer to its engine"));
    vrmHelperJobLog(job, VRM_LOG_INFO, VRM_JOB_LOG_OVER_TCP,
                    "job %llu: %s migrated in over libvirt's TCP, not through the engine",
                    job->record->id, job->record->domainName);
    vrmHelperJobsFinish(ref->d, job, VRM_JOB_STATE_OVER_TCP, VRM_ERR_LIBVIRT, reason);
}

static void
vrmDestEnded(vrmHelperDaemon *d, vrmHelperJob *job, vrmJobState state,
             const char *reason)
{
    if (job->phase == VRM_PHASE_DST_RUNNING && state == VRM_JOB_STATE_FAILED &&
        job->record->state < VRM_JOB_STATE_TRANSFERRING && !job->cancelRequested &&
        !job->recoveryOf && d->virt) {
        /* QEMU's stream never came: libvirt may have migrated the
         * domain over its own TCP */
        g_free(job->unusedWhy);
        job->unusedWhy = g_strdup(reason);
        vrmHelperJobsEngineGone(job);
        vrmHelperJobsSetPhase(d, job, VRM_PHASE_DST_UNUSED, 0, NULL);
        vrmHelperVirtQueryDomain(d->virt, job->record->domainUUID, vrmDestUnusedFacts,
                                 vrmHelperJobRefNew(d, job));
        return;
    }
    if (job->phase != VRM_PHASE_DST_RUNNING && job->phase != VRM_PHASE_NONE) {
        vrmHelperJobsFailEnded(d, job, vrmDestFail, reason,
                               _("the destination engine ended during the negotiation"));
        return;
    }
    vrmHelperJobsFinish(d, job, state, vrmHelperJobsEndedCode(job), reason);
}

static void
vrmDestFinishing(vrmHelperDaemon *d, vrmHelperJob *job)
{
    /* a cancel or the daemon's end: the hook learns it at once */
    vrmDestReplyWaiter(job, VRM_ERR_CANCELLED, _("the migration job was ended"));
}

/* After a restart, libvirt's state stands in for the event this helper
 * missed: the guest runs here, its missing pages wait for a recovery */
static void
vrmDestUnwatchedFacts(vrmDomainFacts *facts, gpointer opaque)
{
    g_autoptr(vrmDomainFacts) f = facts;

    if (f->error)
        VRM_DEBUG("cannot ask libvirt about %s after the restart: %s", f->uuid, f->error);
    else if (f->found && f->incomingPostcopyFailed)
        vrmHelperDestPostcopyFailed(f->uuid, opaque);
}

static void
vrmDestEndedUnwatched(vrmHelperDaemon *d, vrmHelperJob *job)
{
    if (job->record->state != VRM_JOB_STATE_FAILED || !job->sourceLocator ||
        !job->record->domainUUID || !d->virt)
        return;
    vrmHelperVirtQueryDomain(d->virt, job->record->domainUUID, vrmDestUnwatchedFacts, d);
}

const vrmHelperRoleOps vrmHelperDestOps = {
    .stats = vrmDestStats,
    .ended = vrmDestEnded,
    .finishing = vrmDestFinishing,
    .endedUnwatched = vrmDestEndedUnwatched,
};

/* What makes RDMA impossible for an incoming migration, before asking
 * anybody */
static int
vrmDestCheck(vrmHelperDaemon *d, const vrmControlMessage *msg)
{
    if (!msg->migration->locator) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("the domain '%1$s' carries no virt-rdma locator: virt-rdmad is not running on the source host, or the domain was started before it; start it there (it adds the locator), or migrate without the unix:// URI"),
                       msg->domainName);
        return -1;
    }
    if (!d->peerCreds) {
        vrmReportError(VRM_ERR_CONFIG, "%s", d->peerProblem);
        return -1;
    }
    if (d->engineProblem) {
        vrmReportError(VRM_ERR_CONFIG, "%s", d->engineProblem);
        return -1;
    }
    return vrmHelperCheckJobLimit(vrmHelperJobsLive(d, NULL), d->conf->maxJobs);
}

void
vrmHelperDestIncoming(vrmHelperDaemon *d, vrmControlMessage *msg,
                      vrmHelperConn *c)
{
    const vrmHelperCred *cred = vrmHelperConnCred(c);
    vrmHelperJob *job;
    vrmHelperJob *other;
    g_autofree char *why = NULL;
    int code = VRM_ERR_OK;

    if (cred->uid != 0 && cred->uid != geteuid()) {
        vrmHelperConnReplyError(c, VRM_ERR_AUTH,
                                _("only root (libvirt's hook) may announce an incoming migration"));
        return;
    }
    /* never two at once, whatever the transport */
    if ((other = vrmHelperJobsLiveOfDomain(d, msg->domainUUID))) {
        why = g_strdup_printf(_("a migration job of the domain '%1$s' already runs on this host (job %2$llu)"),
                              msg->domainName, other->record->id);
        vrmHelperConnReplyError(c, VRM_ERR_RESOURCE, why);
        return;
    }
    if (vrmDestCheck(d, msg) < 0) {
        why = g_strdup(vrmGetLastErrorMessage());
        code = vrmGetLastErrorCode();
    }
    job = vrmHelperJobsCreate(d, VRM_JOB_ROLE_DESTINATION, msg->domainName,
                              msg->domainUUID);
    job->waiter = c;
    if (why) {
        /* recorded too: the fleet's tools see why a migration went over TCP */
        vrmDestFail(d, job, code, why);
        return;
    }
    job->record->migration = vrmMigrationDefNew();
    vrmMigrationParamsCopy(&job->record->migration->params, &msg->migration->params);
    /* where the domain's helper is once it has arrived: here */
    job->record->migration->locator = vrmLocatorCopy(d->locator);
    /* and where it was: a recovery asks there again */
    job->sourceLocator = vrmLocatorCopy(msg->migration->locator);
    vrmHelperJobsSetPhase(d, job, VRM_PHASE_DST_CONNECTING, d->conf->peerTimeout + 1,
                          vrmDestExpired);
    if (!(job->peer = vrmPeerConnConnect(d->peerCreds, msg->migration->locator,
                                         d->conf->peerTimeout, &vrmDestCallbacks, d))) {
        vrmHelperJobsFailLast(d, job, vrmDestFail);
        return;
    }
    vrmHelperJobLog(job, VRM_LOG_INFO, VRM_JOB_LOG_STARTED,
                    "job %llu: %s (%s) migrates in from %s (%s)", job->record->id,
                    msg->domainName, msg->domainUUID, msg->migration->locator->host,
                    vrmPeerConnPeerName(job->peer));
    vrmHelperJobsSave(d, job);
}


/* ---- the recovery of a post-copy migration that broke ------------------ */

typedef struct {
    vrmHelperDaemon *d;
    unsigned long long broken;      /* the job whose connection broke */
    unsigned int tries;
} vrmDestRecovery;

/* The broken job has ended here: ask its source helper for a recovery */
static void
vrmDestRecoveryStart(vrmHelperDaemon *d, vrmHelperJob *broken)
{
    const vrmJobRecord *was = broken->record;
    const char *why = NULL;
    vrmHelperJob *job;

    vrmResetLastError();
    if (!d->peerCreds)
        why = d->peerProblem;
    else if (d->engineProblem)
        why = d->engineProblem;
    else if (vrmHelperCheckJobLimit(vrmHelperJobsLive(d, NULL), d->conf->maxJobs) < 0)
        why = vrmGetLastErrorMessage();
    if (why) {
        VRM_WARN(_("cannot ask for the recovery of job %1$llu: %2$s"), was->id, why);
        return;
    }
    job = vrmHelperJobsCreate(d, VRM_JOB_ROLE_DESTINATION, was->domainName,
                              was->domainUUID);
    job->record->migration = vrmMigrationDefNew();
    if (was->migration)
        vrmMigrationParamsCopy(&job->record->migration->params, &was->migration->params);
    job->record->migration->locator = vrmLocatorCopy(d->locator);
    job->sourceLocator = vrmLocatorCopy(broken->sourceLocator);
    job->recoveryOf = was->id;
    job->record->hasRecoveryOf = true;
    job->record->recoveryOf = was->id;
    job->waitStream = d->conf->recoveryWindow;
    vrmHelperJobsSetPhase(d, job, VRM_PHASE_DST_CONNECTING, d->conf->peerTimeout + 1,
                          vrmDestExpired);
    if (!(job->peer = vrmPeerConnConnect(d->peerCreds, job->sourceLocator,
                                         d->conf->peerTimeout, &vrmDestCallbacks, d))) {
        vrmHelperJobsFailLast(d, job, vrmDestFail);
        return;
    }
    VRM_INFO("job %llu: recovery of job %llu, the post-copy migration of %s (%s) from %s",
             job->record->id, was->id, was->domainName, was->domainUUID,
             job->sourceLocator->host);
    vrmHelperJobsSave(d, job);
}

/* Until the broken job has ended here (its engine sees the break within
 * seconds), look again */
static gboolean
vrmDestRecoveryTry(gpointer opaque)
{
    vrmDestRecovery *r = opaque;
    vrmHelperJob *broken = vrmHelperJobsGet(r->d, r->broken);

    if (!broken)
        return G_SOURCE_REMOVE;
    if (!vrmJobStateIsFinal(broken->record->state)) {
        if (++r->tries < VRM_HELPER_RECOVERY_TRIES)
            return G_SOURCE_CONTINUE;
        if (broken->record->hasRecoveryOf) {
            VRM_INFO("the incoming post-copy migration of %s broke; job %llu already recovers it",
                     broken->record->domainUUID, r->broken);
            return G_SOURCE_REMOVE;
        }
        VRM_WARN(_("job %1$llu: its post-copy migration broke, but the job did not end within %2$d seconds: no recovery asked"),
                 r->broken, VRM_HELPER_RECOVERY_TRIES * VRM_HELPER_RECOVERY_POLL_MS / 1000);
        return G_SOURCE_REMOVE;
    }
    /* libvirt told twice of one break: one recovery */
    if (vrmHelperJobsLastOfDomain(r->d, broken->record->domainUUID,
                                  VRM_JOB_ROLE_DESTINATION) == broken)
        vrmDestRecoveryStart(r->d, broken);
    return G_SOURCE_REMOVE;
}

void
vrmHelperDestPostcopyFailed(const char *uuid, gpointer opaque)
{
    vrmHelperDaemon *d = opaque;
    vrmHelperJob *broken = vrmHelperJobsLastOfDomain(d, uuid, VRM_JOB_ROLE_DESTINATION);
    vrmHelperJob *out = vrmHelperJobsLastOfDomain(d, uuid, VRM_JOB_ROLE_SOURCE);
    vrmDestRecovery *r;

    /* the domain's newest job here must be the incoming one that broke */
    if (!broken || !broken->sourceLocator ||
        (out && out->record->id > broken->record->id)) {
        VRM_INFO("the incoming post-copy migration of %s broke; no RDMA job of this virt-rdmad carried it: nothing to recover",
                 uuid);
        return;
    }
    /* a recovery that broke in turn is recovered once it has ended; but
     * libvirt's event and, after a restart, its state may both tell of the
     * one break whose recovery still waits for QEMU: that recovery stays
     * (vrmDestRecoveryTry) */
    if (!d->conf->recoveryWindow) {
        VRM_INFO("job %llu: its post-copy migration broke; [limits] recovery-window is 0: no recovery over RDMA",
                 broken->record->id);
        return;
    }
    if (broken->record->hasRecoveryOf && !vrmJobStateIsFinal(broken->record->state))
        VRM_INFO("job %llu: the post-copy migration it recovers broke; asking %s for another recovery once it ends",
                 broken->record->id, broken->sourceLocator->host);
    else
        VRM_INFO("job %llu: its post-copy migration broke; asking %s for a recovery",
                 broken->record->id, broken->sourceLocator->host);
    r = g_new0(vrmDestRecovery, 1);
    r->d = d;
    r->broken = broken->record->id;
    if (vrmDestRecoveryTry(r) == G_SOURCE_REMOVE) {
        g_free(r);
        return;
    }
    g_timeout_add_full(G_PRIORITY_DEFAULT, VRM_HELPER_RECOVERY_POLL_MS,
                       vrmDestRecoveryTry, r, g_free);
}
