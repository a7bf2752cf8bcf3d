/*
 * vrmhelperd.c: virt-rdmad: life cycle, the control socket's requests,
 * intents, host information
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib-unix.h>

#include "vrmhelperdpriv.h"
#include "vrmhelperclient.h"
#include "vrmhelperpolicy.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"
#include "vrmsocket.h"

#define VRM_HELPER_INTENT_SWEEP_S 10
#define VRM_LIBVIRT_QEMU_CONF "/etc/libvirt/qemu.conf"


/* ---- who may do what --------------------------------------------------- */

/* root, our own user, or a member of @gid if @haveGroup (by the kernel's
 * SO_PEERGROUPS: no name-service lookup in the loop) */
static bool
vrmHelperCredInGroup(const vrmHelperCred *cred, gid_t gid, bool haveGroup)
{
    vrmHelperPeer peer = {
        .uid = cred->uid, .gid = cred->gid,
        .groups = cred->groups, .ngroups = cred->ngroups,
    };

    return vrmHelperPeerAllowed(&peer, geteuid(), gid, haveGroup);
}

/* May the client use the control socket? The access group */
static bool
vrmHelperCredAllowed(vrmHelperDaemon *d, const vrmHelperCred *cred)
{
    return vrmHelperCredInGroup(cred, d->accessGid, d->haveGroup);
}

/* May the client migrate domains through libvirt, as an intent's owner
 * would? [access] libvirt-group: an intent makes its owner see that
 * domain's next job and able to cancel it, which only somebody who could
 * abort the migration in libvirt should be */
static bool
vrmHelperCredMayMigrate(vrmHelperDaemon *d, const vrmHelperCred *cred)
{
    return vrmHelperCredInGroup(cred, d->libvirtGid, d->haveLibvirtGroup);
}

/* root and ourselves see every job; the others the jobs they opened */
static bool
vrmHelperCredOwns(const vrmHelperCred *cred, const vrmHelperIntent *intent)
{
    return cred->uid == 0 || cred->uid == geteuid() || intent->owner == cred->uid;
}


/* ---- replies ------------------------------------------------------------ */

static void
vrmHelperReplyJobs(vrmHelperConn *c, vrmJobRecord **records, size_t n)
{
    g_autoptr(vrmControlMessage) msg = vrmControlMessageNew(VRM_CONTROL_REPLY);
    size_t i;

    msg->status = VRM_REPLY_OK;
    /* the records stay in the job table: borrowed */
    g_ptr_array_set_free_func(msg->jobs, NULL);
    for (i = 0; i < n; i++)
        g_ptr_array_add(msg->jobs, records[i]);
    vrmHelperConnReplyMessage(c, msg);
}

static void
vrmHelperReplyIntent(vrmHelperConn *c, vrmIntentRecord *intent)
{
    g_autoptr(vrmControlMessage) msg = vrmControlMessageNew(VRM_CONTROL_REPLY);

    msg->status = VRM_REPLY_OK;
    msg->intentRecord = intent;
    vrmHelperConnReplyMessage(c, msg);
    msg->intentRecord = NULL;
}


/* ---- jobs and intents by request ---------------------------------------- */

static vrmHelperIntent *
vrmHelperFindIntent(vrmHelperDaemon *d, const vrmHelperCred *cred,
                    unsigned long long id)
{
    vrmHelperIntent *intent = g_hash_table_lookup(d->intents, &id);

    if (!intent || !vrmHelperCredOwns(cred, intent)) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("there is no migration intent %1$llu of yours on this host"), id);
        return NULL;
    }
    return intent;
}

static vrmHelperJob *
vrmHelperFindJob(vrmHelperDaemon *d, const vrmHelperCred *cred,
                 const vrmControlMessage *msg)
{
    vrmHelperJob *job = NULL;

    if (msg->hasIntent) {
        vrmHelperIntent *intent = vrmHelperFindIntent(d, cred, msg->intent);

        if (!intent)
            return NULL;
        if (!intent->record->hasJob ||
            !(job = vrmHelperJobsGet(d, intent->record->job))) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("no migration has used intent %1$llu (yet): it is %2$s"),
                           msg->intent, vrmIntentStateTypeToString(intent->record->state));
            return NULL;
        }
        return job;
    }
    if (msg->hasId) {
        job = vrmHelperJobsGet(d, msg->id);
        if (!job || !vrmHelperCredSees(cred, job->record)) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("there is no migration job %1$llu of yours on this host"), msg->id);
            return NULL;
        }
        return job;
    }
    {
        g_autoptr(GPtrArray) all = vrmHelperJobsSorted(d);
        gint i;

        /* the newest job of the domain the client may see */
        for (i = (gint)all->len - 1; i >= 0; i--) {
            vrmHelperJob *j = all->pdata[i];

            if (g_strcmp0(j->record->domainName, msg->domainName) == 0 &&
                vrmHelperCredSees(cred, j->record))
                return j;
        }
    }
    vrmReportError(VRM_ERR_INVALID_ARG,
                   _("there is no migration job of the domain '%1$s' of yours on this host"),
                   msg->domainName);
    return NULL;
}

static void
vrmHelperHandleCancel(vrmHelperDaemon *d, vrmControlMessage *msg, vrmHelperConn *c)
{
    const vrmHelperCred *cred = vrmHelperConnCred(c);
    vrmHelperJob *job;

    if (msg->hasIntent) {
        vrmHelperIntent *intent = vrmHelperFindIntent(d, cred, msg->intent);

        if (!intent) {
            vrmHelperConnReplyLastError(c);
            return;
        }
        if (intent->record->state == VRM_INTENT_STATE_PENDING) {
            unsigned long long id = intent->record->id;

            /* its slot is free at once (issue 33 item 4): the reply is
             * the last anybody hears of it */
            intent->record->state = VRM_INTENT_STATE_CANCELLED;
            vrmHelperReplyIntent(c, intent->record);
            g_hash_table_remove(d->intents, &id);
            return;
        }
    }
    if (!(job = vrmHelperFindJob(d, cred, msg))) {
        vrmHelperConnReplyLastError(c);
        return;
    }
    if (vrmJobStateIsFinal(job->record->state)) {
        g_autofree char *m =
            g_strdup_printf(_("migration job %1$llu has already ended (%2$s)"),
                            job->record->id,
                            vrmJobStateTypeToString(job->record->state));

        vrmHelperConnReplyError(c, VRM_ERR_INVALID_ARG, m);
        return;
    }
    VRM_INFO("job %llu: cancelled by uid %u", job->record->id, (unsigned int)cred->uid);
    job->cancelRequested = true;
    vrmHelperJobsKill(job, SIGTERM);
    vrmHelperJobsFinish(d, job, VRM_JOB_STATE_CANCELLED, VRM_ERR_CANCELLED,
                        _("the migration job was cancelled"));
    vrmHelperReplyJobs(c, &job->record, 1);
}

static void
vrmHelperHandleList(vrmHelperDaemon *d, vrmHelperConn *c)
{
    const vrmHelperCred *cred = vrmHelperConnCred(c);
    g_autoptr(GPtrArray) all = vrmHelperJobsSorted(d);
    g_autofree vrmJobRecord **recs = g_new0(vrmJobRecord *, all->len + 1);
    size_t n = 0;
    guint i;

    for (i = 0; i < all->len; i++) {
        vrmJobRecord *rec = ((vrmHelperJob *)all->pdata[i])->record;

        if (vrmHelperCredSees(cred, rec))
            recs[n++] = rec;
    }
    vrmHelperReplyJobs(c, recs, n);
}

/* ---- a peer, checked ------------------------------------------------------ */

/*
 * virt-rdma capabilities --peer: a TLS handshake with another host's
 * helper on the configured port, as a negotiation would make it; then a
 * reach check: that helper makes the handshake back to our locator, as
 * its migrations to us would, and says how it went. So both ways are
 * checked, and a port closed by this host's firewall shows here. Root
 * only: a member of the access group may not make this host open
 * connections, even to helpers' ports.
 */
typedef struct {
    vrmHelperConn *c;               /* the client waiting */
    vrmPeerConn *pc;
    vrmHelperDaemon *d;
} vrmHelperPeerProbe;

static void
vrmHelperPeerCheckEnd(vrmHelperPeerProbe *chk, bool ok)
{
    if (ok) {
        g_autoptr(vrmControlMessage) reply = vrmControlMessageNew(VRM_CONTROL_REPLY);

        reply->status = VRM_REPLY_OK;
        vrmHelperConnReplyMessage(chk->c, reply);
    } else {
        vrmHelperConnReplyLastError(chk->c);
    }
    vrmPeerConnFree(chk->pc);
    g_free(chk);
}

static void
vrmHelperPeerCheckReady(vrmPeerConn *pc, gpointer opaque)
{
    vrmHelperPeerProbe *chk = opaque;
    g_autoptr(vrmPeerMessage) ask = vrmPeerMessageNew(VRM_PEER_REACH_CHECK);

    VRM_INFO("peer check: the helpers' channel with %s works; asking it to reach us back",
             vrmPeerConnPeerName(pc));
    ask->requester = vrmLocatorCopy(chk->d->locator);
    if (vrmPeerConnSend(pc, ask) < 0) {
        vrmHelperPeerCheckEnd(chk, false);
        return;
    }
    /* its handshake with us has its own [peers] timeout */
    vrmPeerConnExpect(pc, chk->d->conf->peerTimeout + VRM_HELPER_REACH_MARGIN_S);
}

static void
vrmHelperPeerCheckMessage(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque)
{
    vrmHelperPeerProbe *chk = opaque;
    g_autoptr(vrmPeerMessage) m = msg;
    const vrmLocator *self = chk->d->locator;

    if (m->type != VRM_PEER_MIGRATION_RESULT) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the virt-rdma helper at %1$s answered the reach check with <%2$s>"),
                       vrmPeerConnPeerName(pc), vrmPeerTypeTypeToString(m->type));
        vrmHelperPeerCheckEnd(chk, false);
        return;
    }
    if (m->errorCode != VRM_ERR_OK) {
        vrmReportError(m->errorCode,
                       _("the virt-rdma helper at %1$s answers, but cannot reach this host's helper back: %2$s; open TCP port %3$u to this host in its firewall"),
                       vrmPeerConnPeerName(pc), m->errorMessage ? m->errorMessage : "",
                       self->port);
        vrmHelperPeerCheckEnd(chk, false);
        return;
    }
    VRM_INFO("peer check: %s reached this helper back", vrmPeerConnPeerName(pc));
    vrmHelperPeerCheckEnd(chk, true);
}

static void
vrmHelperPeerCheckFailed(vrmPeerConn *pc, gpointer opaque)
{
    VRM_INFO("peer check: %s", vrmGetLastErrorMessage());
    vrmHelperPeerCheckEnd(opaque, false);
}

static const vrmPeerConnCallbacks vrmHelperPeerCheckCallbacks = {
    .ready = vrmHelperPeerCheckReady,
    .message = vrmHelperPeerCheckMessage,
    .failed = vrmHelperPeerCheckFailed,
};

static void
vrmHelperHandlePeerCheck(vrmHelperDaemon *d, vrmControlMessage *msg, vrmHelperConn *c)
{
    const vrmHelperCred *cred = vrmHelperConnCred(c);
    g_autoptr(vrmLocator) to = NULL;
    vrmHelperPeerProbe *chk;

    if (cred->uid != 0 && cred->uid != geteuid()) {
        vrmHelperConnReplyError(c, VRM_ERR_AUTH,
                                _("only root may have virt-rdmad check a peer (virt-rdma capabilities --peer)"));
        return;
    }
    if (!d->peerCreds) {
        g_autofree char *why = d->peerProblem ? NULL : vrmPeerChannelOffReason(d->conf);

        vrmHelperConnReplyError(c, VRM_ERR_CONFIG, d->peerProblem ? d->peerProblem : why);
        return;
    }
    to = vrmLocatorNew(msg->peerHost, msg->peerAddress, d->conf->peerPort);
    chk = g_new0(vrmHelperPeerProbe, 1);
    chk->c = c;
    chk->d = d;
    if (!(chk->pc = vrmPeerConnConnect(d->peerCreds, to, d->conf->peerTimeout,
                                       &vrmHelperPeerCheckCallbacks, chk))) {
        g_free(chk);
        vrmHelperConnReplyLastError(c);
    }
}

/* What the host's policy refuses is refused now, not at the peer's
 * request */
int
vrmHelperPrepareCheck(const vrmHelperConfig *conf, const vrmHostPolicy *policy,
                      const vrmMigrationParams *overrides)
{
    g_autoptr(vrmMigrationParams) params = g_new0(vrmMigrationParams, 1);
    g_autoptr(vrmOffer) probe = NULL;

    if (overrides)
        vrmMigrationParamsCopy(params, overrides);
    if (params->channels > conf->maxChannels) {
        vrmReportError(VRM_ERR_POLICY,
                       _("%1$u RDMA channels asked for; this host allows at most %2$u ([limits] max-channels)"),
                       params->channels, conf->maxChannels);
        return -1;
    }
    if (!(probe = vrmOfferFromParams(params, policy, "127.0.0.1", 1)))
        return -1;
    return 0;
}

/*
 * An intent: `virt-rdma migrate` or the library is about to migrate a
 * domain through libvirt with these overrides. The source's helper uses
 * it when a peer asks for that domain; its owner sees that job.
 */
static void
vrmHelperHandlePrepare(vrmHelperDaemon *d, vrmControlMessage *msg, vrmHelperConn *c)
{
    const vrmHelperCred *cred = vrmHelperConnCred(c);
    vrmHelperIntent *intent;
    unsigned long long *key;
    GHashTableIter it;
    gpointer v;
    unsigned int mine = 0;

    if (!vrmHelperCredMayMigrate(d, cred)) {
        g_autofree char *why = d->haveLibvirtGroup ?
            g_strdup_printf(_("user %1$u may not prepare migrations on this host: only root and members of the group '%2$s' ([access] libvirt-group), who may migrate domains through libvirt, may"),
                            (unsigned int)cred->uid, d->conf->libvirtGroup) :
            g_strdup_printf(_("user %1$u may not prepare migrations on this host: only root may, since no group names who may migrate domains through libvirt ([access] libvirt-group)"),
                            (unsigned int)cred->uid);

        vrmHelperConnReplyError(c, VRM_ERR_AUTH, why);
        return;
    }
    vrmHelperIntentsExpire(d);
    if (g_hash_table_size(d->intents) >= VRM_HELPER_INTENTS_MAX)
        vrmHelperIntentsDropEnded(d);
    g_hash_table_iter_init(&it, d->intents);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        vrmHelperIntent *other = v;

        if (other->owner == cred->uid &&
            other->record->state == VRM_INTENT_STATE_PENDING)
            mine++;
    }
    if (mine >= VRM_HELPER_INTENTS_PER_OWNER ||
        g_hash_table_size(d->intents) >= VRM_HELPER_INTENTS_MAX) {
        vrmHelperConnReplyError(c, VRM_ERR_RESOURCE,
                                _("too many migration intents are pending on this host; try again in two minutes"));
        return;
    }
    if (vrmHelperPrepareCheck(d->conf, &d->policy, msg->overrides) < 0) {
        vrmHelperConnReplyLastError(c);
        return;
    }
    intent = g_new0(vrmHelperIntent, 1);
    intent->record = vrmIntentRecordNew();
    intent->record->id = d->nextIntent++;
    intent->record->state = VRM_INTENT_STATE_PENDING;
    intent->record->domainName = g_strdup(msg->domainName);
    intent->record->domainUUID = g_ascii_strdown(msg->domainUUID, -1);
    intent->record->socketPath = vrmHelperConfigDomainSocket(d->conf, msg->domainUUID);
    intent->owner = cred->uid;
    intent->overrides = g_steal_pointer(&msg->overrides);
    intent->expires = g_get_monotonic_time() + VRM_HELPER_INTENT_TTL_S * G_USEC_PER_SEC;
    key = g_new(unsigned long long, 1);
    *key = intent->record->id;
    g_hash_table_insert(d->intents, key, intent);
    VRM_INFO("intent %llu: uid %u will migrate %s", intent->record->id,
             (unsigned int)cred->uid, intent->record->domainName);
    vrmHelperReplyIntent(c, intent->record);
}


/* ---- host information ---------------------------------------------------- */

static void
vrmHelperHostDevices(vrmHostInfo *info)
{
    g_autofree char *dir = g_strdup_printf("%s/class/infiniband", vrmHelperSysfsRoot());
    g_autoptr(GPtrArray) names = vrmHelperDeviceNames();
    guint i;

    for (i = 0; i < names->len; i++) {
        const char *dev = names->pdata[i];
        g_autofree char *ports = g_strdup_printf("%s/%s/ports", dir, dev);
        g_autoptr(GDir) pd = g_dir_open(ports, 0, NULL);
        const char *p;

        while (pd && (p = g_dir_read_name(pd))) {
            unsigned long long port;
            g_autofree char *statePath = g_strdup_printf("%s/%s/state", ports, p);
            g_autofree char *state = NULL;
            g_autofree char *address = NULL;
            const char *word;

            if (!vrmParseUInt64(p, &port) || port < 1 || port > 255 ||
                !g_file_get_contents(statePath, &state, NULL, NULL))
                continue;
            /* "4: ACTIVE" */
            word = strchr(state, ':') ? strchr(state, ':') + 1 : state;
            g_strstrip((char *)word);
            if (!vrmValidName(word))
                continue;
            address = vrmHelperDeviceAddress(dev, port);
            vrmResetLastError();
            if (vrmValidName(dev))
                vrmHostInfoAddDevice(info, dev, port, word, address);
        }
    }
}

static vrmHostInfo *
vrmHelperHostInfo(vrmHelperDaemon *d)
{
    vrmHostInfo *info = vrmHostInfoNew();
    struct rlimit rl;
    unsigned int depth = MIN(VRM_RING_DEPTH_DEFAULT, d->conf->maxRingDepth);

    info->version = g_strdup(PACKAGE_VERSION);
    info->uid = geteuid();
    info->runningJobs = vrmHelperJobsLive(d, NULL);
    info->maxJobs = d->conf->maxJobs;
    info->maxChannels = d->conf->maxChannels;
    info->maxRingDepth = d->conf->maxRingDepth;
    info->chunkSizes = d->conf->chunkSizes;
    info->budget = d->conf->maxPinnedBytes;
    info->pinnedUsed = vrmHelperJobsPinned(d);
    info->pinnedOneChannel = vrmPinnedBytes(1, depth, VRM_CHUNK_SIZE_DEFAULT);
    info->pinnedLargestOffer = vrmPinnedBytes(d->conf->maxChannels, depth,
                                              VRM_CHUNK_SIZE_DEFAULT);
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
        info->memlockUnlimited = rl.rlim_max == RLIM_INFINITY;
        info->memlockLimit = rl.rlim_max == RLIM_INFINITY ? 0 : rl.rlim_max;
    }
    info->memlockCanRaise = geteuid() == 0;
    info->engineUser = g_strdup(d->conf->engineUser ? d->conf->engineUser : "-");
    info->engineStatus = d->engineProblem ? VRM_HOST_INFO_STATUS_ERROR :
        VRM_HOST_INFO_STATUS_OK;
    info->engineMessage = g_strdup(d->engineProblem);
    /* what is configured, and whether it works */
    info->peerAuth = g_strdup(d->peerCreds ?
                              vrmPeerAuthTypeToString(vrmPeerCredsAuth(d->peerCreds)) :
                              d->conf->peerAuth == VRM_PEER_AUTH_PSK ? "psk" :
                              d->conf->peerAuth == VRM_PEER_AUTH_X509 ? "x509" : "none");
    if (d->peerServer) {
        info->peerStatus = VRM_HOST_INFO_STATUS_OK;
        info->peerMessage = vrmPeerCredsDescribe(d->peerCreds);
    } else {
        info->peerStatus = g_str_equal(info->peerAuth, "none") ?
            VRM_HOST_INFO_STATUS_OFF : VRM_HOST_INFO_STATUS_ERROR;
        info->peerMessage = g_strdup(d->peerProblem);
    }
    info->locator = vrmLocatorCopy(d->locator);
    info->libvirtURI = g_strdup(d->conf->libvirtURI);
    info->libvirtStatus = vrmHelperVirtStatus(d->virt, &info->libvirtMessage) ?
        VRM_HOST_INFO_STATUS_OK : VRM_HOST_INFO_STATUS_ERROR;
    info->transparentMode = g_strdup(vrmRdmaDefaultTypeToString(d->conf->rdmaDefault));
    if (d->conf->rdmaDefault == VRM_RDMA_DEFAULT_OFF) {
        info->transparentStatus = VRM_HOST_INFO_STATUS_OFF;
    } else if (!d->steer || vrmSteerProblem(d->steer)) {
        info->transparentStatus = VRM_HOST_INFO_STATUS_ERROR;
        info->transparentMessage = g_strdup(d->steer ? vrmSteerProblem(d->steer) :
                                            _("virt-rdmad does not run as root: it cannot add nftables rules"));
    } else {
        info->transparentStatus = VRM_HOST_INFO_STATUS_OK;
    }
    vrmHelperHostDevices(info);
    return info;
}

static void
vrmHelperHandleHostInfo(vrmHelperDaemon *d, vrmHelperConn *c)
{
    g_autoptr(vrmControlMessage) msg = vrmControlMessageNew(VRM_CONTROL_REPLY);

    msg->status = VRM_REPLY_OK;
    msg->hostInfo = vrmHelperHostInfo(d);
    vrmHelperConnReplyMessage(c, msg);
}


/* ---- the control socket's requests ---------------------------------------- */

static void
vrmHelperRequest(vrmHelperConn *c, const char *xml, gpointer opaque)
{
    vrmHelperDaemon *d = opaque;
    const vrmHelperCred *cred = vrmHelperConnCred(c);
    g_autoptr(vrmControlMessage) msg = NULL;
    vrmHelperJob *job;

    if (!vrmHelperCredAllowed(d, cred)) {
        g_autofree char *why = d->haveGroup ?
            g_strdup_printf(_("user %1$u may not use virt-rdmad: only root and members of the group '%2$s' may"),
                            (unsigned int)cred->uid, d->conf->group) :
            g_strdup_printf(_("user %1$u may not use virt-rdmad: only root may"),
                            (unsigned int)cred->uid);

        VRM_WARN_LIMITED(&d->clientLog, "%s", why);
        vrmHelperConnReplyError(c, VRM_ERR_AUTH, why);
        return;
    }
    if (!(msg = vrmControlMessageParseString(xml))) {
        vrmHelperConnReplyLastError(c);
        return;
    }
    VRM_DEBUG("request %s from uid %u", vrmControlTypeTypeToString(msg->type),
              (unsigned int)cred->uid);
    switch (msg->type) {
    case VRM_CONTROL_JOB_INCOMING:
        vrmHelperDestIncoming(d, msg, c);
        return;
    case VRM_CONTROL_JOB_PREPARE:
        vrmHelperHandlePrepare(d, msg, c);
        return;
    case VRM_CONTROL_HOST_INFO:
        vrmHelperHandleHostInfo(d, c);
        return;
    case VRM_CONTROL_JOB_QUERY:
        if (!(job = vrmHelperFindJob(d, cred, msg)))
            vrmHelperConnReplyLastError(c);
        else
            vrmHelperReplyJobs(c, &job->record, 1);
        return;
    case VRM_CONTROL_JOB_CANCEL:
        vrmHelperHandleCancel(d, msg, c);
        return;
    case VRM_CONTROL_JOB_LIST:
        vrmHelperHandleList(d, c);
        return;
    case VRM_CONTROL_JOB_EVENTS:
        vrmHelperEventsSubscribe(d, c);
        return;
    case VRM_CONTROL_PEER_CHECK:
        vrmHelperHandlePeerCheck(d, msg, c);
        return;
    case VRM_CONTROL_REPLY:
    case VRM_CONTROL_LAST:
        break;
    }
    vrmHelperConnReplyError(c, VRM_ERR_PROTOCOL,
                            _("virt-rdmad takes requests, not replies"));
}


/* ---- start ----------------------------------------------------------------- */

/* The user of QEMU on this host: the configuration, else libvirt's
 * qemu.conf, else libvirt-qemu, else root */
static uid_t
vrmHelperQemuUid(vrmHelperDaemon *d)
{
    g_autofree char *data = NULL;
    g_autofree char *name = NULL;
    struct passwd *pw;

    if (d->conf->qemuUser)
        name = g_strdup(d->conf->qemuUser);
    if (!name && g_file_get_contents(VRM_LIBVIRT_QEMU_CONF, &data, NULL, NULL)) {
        g_auto(GStrv) lines = g_strsplit(data, "\n", -1);
        size_t i;

        for (i = 0; lines[i] && !name; i++) {
            g_auto(GStrv) kv = g_strsplit(lines[i], "=", 2);

            if (!kv[0] || !kv[1] || g_strcmp0(g_strstrip(kv[0]), "user") != 0)
                continue;
            g_strstrip(kv[1]);
            if (kv[1][0] == '"' && strlen(kv[1]) > 2 && g_str_has_suffix(kv[1], "\""))
                name = g_strndup(kv[1] + 1, strlen(kv[1]) - 2);
        }
    }
    if (!name && getpwnam("libvirt-qemu"))
        name = g_strdup("libvirt-qemu");
    if (name && name[0] == '+')
        return (uid_t)g_ascii_strtoull(name + 1, NULL, 10);
    if (name && (pw = getpwnam(name)))
        return pw->pw_uid;
    return 0;
}

static void
vrmHelperResolveUsers(vrmHelperDaemon *d)
{
    struct group *gr;
    struct passwd *pw;

    if (d->conf->group && (gr = getgrnam(d->conf->group))) {
        d->haveGroup = true;
        d->accessGid = gr->gr_gid;
    } else if (d->conf->group) {
        VRM_WARN(_("the access group '%1$s' does not exist: only root may use virt-rdmad"),
                 d->conf->group);
    }
    if (d->conf->libvirtGroup && (gr = getgrnam(d->conf->libvirtGroup))) {
        d->haveLibvirtGroup = true;
        d->libvirtGid = gr->gr_gid;
    } else if (d->conf->libvirtGroup && d->haveGroup) {
        VRM_WARN(_("the group '%1$s' ([access] libvirt-group) does not exist: only root may use virt-rdma migrate and the library on this host"),
                 d->conf->libvirtGroup);
    }
    d->engineUid = geteuid();
    d->engineGid = getegid();
    if (geteuid() == 0 && d->conf->engineUser) {
        if ((pw = getpwnam(d->conf->engineUser)) && pw->pw_uid != 0) {
            d->engineUid = pw->pw_uid;
            d->engineGid = pw->pw_gid;
        } else {
            vrmHelperConfigCheckSystem(d->conf);
            d->engineProblem = g_strdup(vrmGetLastErrorMessage());
            vrmResetLastError();
            VRM_WARN("%s", d->engineProblem);
        }
    }
    d->qemuUid = vrmHelperQemuUid(d);
}

/* Our locator: the channel's host name, address and port */
static vrmLocator *
vrmHelperMakeLocator(vrmHelperDaemon *d, unsigned int port)
{
    g_autofree char *address = NULL;
    g_autofree char *device = NULL;
    const char *host = d->conf->peerHost ? d->conf->peerHost : g_get_host_name();

    if (d->conf->peerAddress)
        address = g_strdup(d->conf->peerAddress);
    else if (d->conf->address)
        address = g_strdup(d->conf->address);
    else if (vrmHelperDeviceCheck(d->conf->device, d->conf->devicePort, &device) == 0)
        address = vrmHelperDeviceAddress(device, d->conf->devicePort);
    if (!address) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("no address for the helpers' channel: set [peers] address in the configuration"));
        return NULL;
    }
    if (!vrmValidHostName(host)) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("this host's name '%1$s' cannot be a locator's: set [peers] host in the configuration"),
                       host);
        return NULL;
    }
    return vrmLocatorNew(host, address, port);
}

/* The helpers' channel: credentials, our locator, the listener. A
 * problem turns it off (every RDMA migration is then refused with the
 * reason); it does not stop the daemon. */
static void
vrmHelperStartPeers(vrmHelperDaemon *d)
{
    g_autoptr(vrmLocator) locator = NULL;
    const char *listen;

    if (vrmPeerCredsLoad(d->conf, &d->peerCreds) < 0) {
        d->peerProblem = g_strdup(vrmGetLastErrorMessage());
        VRM_WARN(_("the helpers' channel is off: %1$s"), d->peerProblem);
        return;
    }
    if (!d->peerCreds) {
        d->peerProblem = vrmPeerChannelOffReason(d->conf);
        VRM_WARN("%s", d->peerProblem);
        return;
    }
    if (!(locator = vrmHelperMakeLocator(d, d->conf->peerPort))) {
        d->peerProblem = g_strdup(vrmGetLastErrorMessage());
        VRM_WARN(_("the helpers' channel is off: %1$s"), d->peerProblem);
        g_clear_pointer(&d->peerCreds, vrmPeerCredsFree);
        return;
    }
    /* peers check that our requests come from the locator we name */
    vrmPeerCredsSetSource(d->peerCreds, locator->address);
    listen = d->conf->peerListen ? d->conf->peerListen : locator->address;
    if (!(d->peerServer = vrmPeerServerNew(d->peerCreds, listen, d->conf->peerPort,
                                           d->conf->maxPeers, d->conf->peerTimeout,
                                           vrmHelperSourceAccept, d))) {
        d->peerProblem = g_strdup(vrmGetLastErrorMessage());
        VRM_WARN(_("the helpers' channel is off: %1$s"), d->peerProblem);
        g_clear_pointer(&d->peerCreds, vrmPeerCredsFree);
        return;
    }
    g_autofree char *how = vrmPeerCredsDescribe(d->peerCreds);
    VRM_INFO("helpers' channel on %s port %u, %s; locator %s %s:%u", listen,
             vrmPeerServerPort(d->peerServer), how, locator->host, locator->address,
             locator->port);
    d->locator = g_steal_pointer(&locator);
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

/* Another virt-rdmad that serves our socket: -1, reported (the socket
 * systemd passed us is ours, whoever answers on its path) */
static int
vrmHelperCheckAlone(vrmHelperDaemon *d)
{
    const char *pid = g_getenv("LISTEN_PID");
    int probe;

    if ((pid && g_ascii_strtoll(pid, NULL, 10) == getpid()) ||
        !g_file_test(d->socketPath, G_FILE_TEST_EXISTS))
        return 0;
    probe = vrmHelperConnect(d->socketPath, g_get_monotonic_time() + G_USEC_PER_SEC);
    if (probe < 0) {
        vrmResetLastError();
        return 0;
    }
    close(probe);
    vrmReportError(VRM_ERR_CONFIG, _("another virt-rdmad is already serving %1$s"),
                   d->socketPath);
    return -1;
}

static int
vrmHelperListen(vrmHelperDaemon *d)
{
    g_autofree char *dir = g_path_get_dirname(d->socketPath);
    g_autofree char *base = g_path_get_basename(d->socketPath);
    gid_t gid = d->haveGroup ? d->accessGid : 0;
    int fd;

    if ((fd = vrmHelperActivationFd()) >= 0) {
        VRM_INFO("using the control socket passed by systemd");
        d->listenFd = fd;
        if (vrmSetNonBlock(fd) < 0)
            return -1;
        /* the socket unit's SocketGroup= makes it right; check, repair */
        if (g_str_equal(dir, d->conf->runDir) &&
            vrmRunDirCheckSocket(d->runDir, base, gid) < 0)
            VRM_WARN("%s", vrmGetLastErrorMessage());
        return 0;
    }
    if (vrmHelperCheckAlone(d) < 0)
        return -1;
    if (!g_str_equal(dir, d->conf->runDir)) {
        /* tests: a socket elsewhere, in a directory of their own */
        g_autoptr(vrmRunDir) other = vrmRunDirOpen(dir, geteuid(), getegid());

        if (!other || (fd = vrmRunDirListen(other, base, gid)) < 0)
            return -1;
    } else if ((fd = vrmRunDirListen(d->runDir, base, gid)) < 0) {
        return -1;
    }
    d->ownSocket = true;
    d->listenFd = fd;
    return 0;
}

static gboolean
vrmHelperSignal(gpointer opaque)
{
    vrmHelperDaemon *d = opaque;

    VRM_INFO("stopping; running engines go on and will be found again");
    g_main_loop_quit(d->loop);
    return G_SOURCE_CONTINUE;
}

static gboolean
vrmHelperIntentSweep(gpointer opaque)
{
    vrmHelperIntentsExpire(opaque);
    return G_SOURCE_CONTINUE;
}

vrmHelperDaemon *
vrmHelperDaemonNew(vrmHelperConfig *conf, const vrmHelperOptions *opts)
{
    vrmHelperDaemon *d = g_new0(vrmHelperDaemon, 1);
    const char *engine = g_getenv("VRM_ENGINE");
    vrmRateLimit rl = VRM_RATE_LIMIT_INIT(5, 60);
    /* a directory that stays unwritable: one line every ten minutes */
    vrmRateLimit metricsRl = VRM_RATE_LIMIT_INIT(1, 600);

    d->conf = conf;
    vrmHelperConfigToPolicy(conf, &d->policy);
    d->socketPath = opts && opts->socketPath ? g_strdup(opts->socketPath) :
        vrmHelperConfigSocketPath(conf);
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
    d->nextIntent = 1;
    d->jobs = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                    (GDestroyNotify)vrmHelperJobFree);
    d->intents = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                       (GDestroyNotify)vrmHelperIntentFree);
    d->ops[VRM_JOB_ROLE_SOURCE] = &vrmHelperSourceOps;
    d->ops[VRM_JOB_ROLE_DESTINATION] = &vrmHelperDestOps;
    d->peerLog = rl;
    d->clientLog = rl;
    d->metricsLog = metricsRl;
    d->loop = g_main_loop_new(NULL, FALSE);
    return d;
}

/*
 * The transparent mode (docs/transparent.rst): the table of our own, made
 * afresh (what a helper that crashed left goes now). Without it, or not
 * as root, migrations over libvirt's TCP go over TCP, with the reason in
 * the log and in `virt-rdma capabilities`.
 */
static void
vrmHelperStartSteering(vrmHelperDaemon *d)
{
    if (d->conf->rdmaDefault == VRM_RDMA_DEFAULT_OFF)
        return;
    if (geteuid() != 0) {
        VRM_INFO("the transparent mode is off: it needs root (nftables)");
        return;
    }
    d->steer = vrmSteerNew(NULL);
    if (vrmSteerReset(d->steer) < 0)
        VRM_WARN(_("the transparent mode is off (migrations over libvirt's TCP go over TCP): %1$s"),
                 vrmSteerProblem(d->steer));
}

int
vrmHelperDaemonStart(vrmHelperDaemon *d)
{
    if (geteuid() == 0 && d->conf->group && !getgrnam(d->conf->group) &&
        vrmHelperConfigCheckSystem(d->conf) < 0)
        return -1;
    vrmHelperResolveUsers(d);
    if (!(d->runDir = vrmRunDirOpen(d->conf->runDir, d->engineUid, d->engineGid)))
        return -1;
    if (g_mkdir_with_parents(d->conf->stateDir, 0700) < 0) {
        vrmReportSystemError(errno, _("cannot create the state directory %1$s"),
                             d->conf->stateDir);
        return -1;
    }
    /* first: a second virt-rdmad ends here, before it touches what the
     * first one holds (its peers' port, its steering rules); the socket
     * itself is made last, once the helper is ready to serve */
    if (vrmHelperCheckAlone(d) < 0)
        return -1;
    signal(SIGPIPE, SIG_IGN);
    vrmHelperStartPeers(d);
    d->virt = vrmHelperVirtNew(d->conf->libvirtURI, d->locator,
                               d->conf->rdmaDefault == VRM_RDMA_DEFAULT_ALL);
    vrmHelperVirtOnPostcopyFailed(d->virt, vrmHelperDestPostcopyFailed, d);
    vrmHelperStartSteering(d);
    vrmHelperJobsRecover(d);
    vrmHelperJobsMetricsStart(d);
    if (vrmHelperListen(d) < 0)
        return -1;
    d->server = vrmHelperServerNew(d->listenFd, d->conf->maxClients,
                                   vrmHelperRequest, d);
    vrmHelperJobsStartPolling(d);
    d->intentTimer = g_timeout_add_seconds(VRM_HELPER_INTENT_SWEEP_S,
                                           vrmHelperIntentSweep, d);
    d->sigterm = g_unix_signal_add(SIGTERM, vrmHelperSignal, d);
    d->sigint = g_unix_signal_add(SIGINT, vrmHelperSignal, d);
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
    /* clients still waiting get an answer; negotiations end; engines go on */
    g_hash_table_iter_init(&it, d->jobs);
    while (g_hash_table_iter_next(&it, NULL, &v)) {
        vrmHelperJob *job = v;

        if (job->waiter) {
            vrmHelperConn *w = job->waiter;

            job->waiter = NULL;
            vrmHelperConnReplyError(w, VRM_ERR_INTERNAL, _("virt-rdmad is stopping"));
        }
        g_clear_pointer(&job->peer, vrmPeerConnFree);
        if (job->pid > 0 && !vrmJobStateIsFinal(job->record->state))
            vrmHelperJobsSave(d, job);
    }
    g_clear_handle_id(&d->pollTimer, g_source_remove);
    g_clear_handle_id(&d->waitTimer, g_source_remove);
    g_clear_handle_id(&d->intentTimer, g_source_remove);
    g_clear_handle_id(&d->sigterm, g_source_remove);
    g_clear_handle_id(&d->sigint, g_source_remove);
    vrmHelperServerFree(d->server);
    if (d->listenFd >= 0)
        close(d->listenFd);
    if (d->ownSocket)
        unlink(d->socketPath);
    vrmHelperVirtFree(d->virt);
    if (d->steer)
        vrmSteerDrop(d->steer);
    vrmSteerFree(d->steer);
    vrmPeerServerFree(d->peerServer);
    g_hash_table_destroy(d->jobs);
    g_hash_table_destroy(d->intents);
    vrmPeerCredsFree(d->peerCreds);
    vrmLocatorFree(d->locator);
    vrmRunDirFree(d->runDir);
    g_main_loop_unref(d->loop);
    g_free(d->socketPath);
    g_free(d->enginePath);
    g_free(d->peerProblem);
    g_free(d->engineProblem);
    g_free(d->metricsDir);
    vrmHelperConfigFree(d->conf);
    g_free(d);
}
