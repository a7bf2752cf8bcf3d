/*
 * vrmenginecm.c: rdma_cm for one job: the source listens and accepts, the
 * destination resolves and connects, channel by channel; the private data
 * of the connect, the mutual authentication, and the reject records
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* accept4, SO_PEERCRED; in each of the engine's files, so
                      * that vrmenginepriv.h's system headers read the same */
#endif

#include "vrmenginepriv.h"

/* What became of a source's connect request */
typedef enum {
    VRM_ENGINE_ACCEPT_FAILED = -1,  /* the job fails (reported) */
    VRM_ENGINE_ACCEPT_ACCEPTED,     /* its slot has the connection */
    VRM_ENGINE_ACCEPT_REFUSED,      /* no slot took it: its id goes after the ack */
    VRM_ENGINE_ACCEPT_DROPPED,      /* its slot could not take it (reported):
                                     * the slot listens again after the ack */
} vrmEngineAcceptResult;

static void
vrmEngineSetAckTimeout(struct rdma_cm_id *id)
{
    guint8 timeout = VRM_RDMA_ACK_TIMEOUT;

    if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
                        &timeout, sizeof(timeout)) < 0)
        VRM_DEBUG("cannot set the ACK timeout: %s", g_strerror(errno));
}

static gboolean
vrmEngineRetryConnect(gpointer opaque)
{
    vrmEngineSlot *slot = opaque;

    slot->retrySource = 0;
    if (!vrmEngineFailed(slot->engine) &&
        vrmEngineConnectChannel(slot->engine, slot) < 0)
        vrmEngineFailLast(slot->engine);
    return G_SOURCE_REMOVE;
}

/* Destination: drop a failed attempt and try again until the deadline */
static void
vrmEngineScheduleRetry(vrmEngine *e, vrmEngineSlot *slot, const char *why)
{
    g_assert(e->s.role == VRM_ENGINE_ROLE_DESTINATION);
    vrmChannelDropQP(slot->ch);
    if (slot->id) {
        rdma_destroy_id(slot->id);
        slot->id = NULL;
    }
    if (g_get_monotonic_time() > slot->connectDeadline) {
        g_autofree char *peer = vrmEngineFormatAddress(e->s.address, e->s.port);

        vrmReportError(VRM_ERR_TIMEOUT,
                       _("could not connect channel %1$u to the source engine at %2$s within %3$u seconds (last attempt: %4$s)"),
                       slot->index, peer, e->s.deadlineConnect, why);
        vrmEngineFailLast(e);
        return;
    }
    VRM_DEBUG("channel %u: %s, retrying", slot->index, why);
    slot->retrySource = g_timeout_add(VRM_ENGINE_CONNECT_RETRY_MS,
                                      vrmEngineRetryConnect, slot);
}

/* The rdma_cm address of the job: to listen on (passive) or to reach. */
int
vrmEngineResolve(vrmEngine *e, bool passive, struct rdma_addrinfo **ai)
{
    struct rdma_addrinfo hints = {
        .ai_flags = passive ? RAI_PASSIVE : 0,
        .ai_port_space = RDMA_PS_TCP,
    };
    int rc;

    if ((rc = rdma_getaddrinfo(e->s.address, e->portStr, &hints, ai)) != 0) {
        g_autofree char *addr = vrmEngineFormatAddress(e->s.address, e->s.port);

        vrmReportError(VRM_ERR_INVALID_ARG, _("cannot resolve the RDMA address %1$s: %2$s"),
                       addr, rc == -1 ? g_strerror(errno) : gai_strerror(rc));
        return -1;
    }
    return 0;
}

/* Destination: connect channel @slot (the first try or a retry) */
int
vrmEngineConnectChannel(vrmEngine *e, vrmEngineSlot *slot)
{
    struct rdma_addrinfo *ai = NULL;
    int rc;

    if (vrmEngineResolve(e, false, &ai) < 0)
        return -1;
    if (rdma_create_id(e->cm, &slot->id, slot, RDMA_PS_TCP) < 0) {
        vrmReportSystemError(errno, _("cannot create an rdma_cm id"));
        rdma_freeaddrinfo(ai);
        return -1;
    }
    rc = rdma_resolve_addr(slot->id, NULL, ai->ai_dst_addr, VRM_RDMA_RESOLVE_TIMEOUT_MS);
    rdma_freeaddrinfo(ai);
    if (rc < 0)
        vrmEngineScheduleRetry(e, slot, g_strerror(errno));
    return 0;
}

/* Destination: the route is there: set the channel up and send the REQ */
static int
vrmEngineSendConnect(vrmEngine *e, vrmEngineSlot *slot)
{
    vrmProtoConnReq req = {
        .version = VRM_PROTOCOL_VERSION,
        .flags = e->caps,
        .channel = slot->index,
        .channels = e->s.channels,
    };
    guint8 pd[VRM_PROTO_REQ_LEN];
    struct rdma_conn_param param = {
        .private_data = pd,
        .private_data_len = sizeof(pd),
        .responder_resources = VRM_RDMA_RESPONDER_RESOURCES,
        .initiator_depth = VRM_RDMA_RESPONDER_RESOURCES,
        .retry_count = VRM_RDMA_RETRY_COUNT,
        .rnr_retry_count = VRM_RDMA_RNR_RETRY_COUNT,
    };

    G_STATIC_ASSERT(VRM_PROTO_REQ_LEN <= VRM_PROTO_PRIVATE_DATA_MAX);
    if (vrmProtoNonce(slot->nonce) < 0)
        return -1;
    memcpy(req.nonce, slot->nonce, sizeof(req.nonce));
    if (e->s.fault == VRM_ENGINE_FAULT_VERSION) {
        /* a version 1 engine: its token in the clear where the nonce is
         * (zeros here: a test never sends the real one) */
        VRM_WARN("test hook: connecting as a protocol version 1 engine");
        req.version = 1;
        memset(req.nonce, 0, sizeof(req.nonce));
    }
    vrmProtoConnReqEncode(&req, pd);

    /* the agreed capabilities come with the REP */
    if (vrmEngineSlotSetup(e, slot, slot->id, e->caps) < 0)
        return -1;
    vrmEngineSetAckTimeout(slot->id);
    if (rdma_connect(slot->id, &param) < 0)
        vrmEngineScheduleRetry(e, slot, g_strerror(errno));
    else if (e->s.fault == VRM_ENGINE_FAULT_VANISH) {
        /* a connect request whose sender is gone by the time it is seen */
        VRM_WARN("test hook: dropping the connect request of channel %u at once",
                 slot->index);
        vrmChannelDropQP(slot->ch);
        rdma_destroy_id(slot->id);
        slot->id = NULL;
        vrmReportError(VRM_ERR_CANCELLED, _("test hook: the connect request was dropped"));
        return -1;
    }
    return 0;
}

/* Source: refuse a connect request, with the reject record */
static void
vrmEngineReject(vrmEngine *e, struct rdma_cm_id *id, int reason, bool count)
{
    guint8 rej[VRM_PROTO_REJECT_LEN];
    guint32 version = VRM_PROTOCOL_VERSION;

    if (e->s.fault == VRM_ENGINE_FAULT_VERSION)
        version = 1;
    if (count) {
        e->rejects++;
        e->lastReject = reason;
    }
    vrmProtoRejectEncode(reason, version, rej);
    if (rdma_reject(id, rej, sizeof(rej)) < 0)
        VRM_WARN("rdma_reject failed: %s", g_strerror(errno));
}

/* Source, test hook: the first connect request fails as one whose sender
 * went away before its queue pair existed would (the race of issue 13
 * item 12 that a test cannot time) */
static int
vrmEngineStaleRequest(vrmEngine *e, vrmEngineSlot *slot)
{
    if (e->s.fault != VRM_ENGINE_FAULT_STALE_REQUEST || e->staleInjected)
        return 0;
    e->staleInjected = true;
    VRM_WARN("test hook: channel %u: taking this connect request as one whose sender has gone",
             slot->index);
    vrmReportSystemError(EINVAL, "test hook: no queue pair for a connect request whose sender has gone");
    return -1;
}

/* Everything about the peer's request, checked before any resource
 * exists: VRM_REJECT_NONE and the request's slot, or the reason to refuse
 * it (the error reported) */
static int
vrmEngineCheckRequest(vrmEngine *e, struct rdma_cm_event *ev, vrmProtoConnReq *req,
                      vrmEngineSlot **slotOut)
{
    guint32 channels = e->agreed ? e->agreed : e->s.channels;
    vrmEngineSlot *slot;
    int reason;

    if (e->s.fault == VRM_ENGINE_FAULT_VERSION) {
        vrmReportError(VRM_ERR_VERSION,
                       _("test hook: refusing every peer as a version 1 engine would"));
        return VRM_REJECT_VERSION;
    }
    if (vrmProtoConnReqDecode(ev->param.conn.private_data,
                              ev->param.conn.private_data_len, req) < 0)
        return VRM_REJECT_MALFORMED;
    reason = vrmProtoConnReqCheck(req, channels,
                                  (e->caps & VRM_CAP_DISKS) ? e->s.diskChannels : 0);
    if (reason != VRM_REJECT_NONE)
        return reason;
    slot = vrmEngineSlotOf(e, req->channel);
    g_assert(slot);
    if (e->agreed && req->channels < e->agreed) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the peer asked for channel %1$u with a maximum of %2$u channels after %3$u were agreed"),
                       req->channel, req->channels, e->agreed);
        return VRM_REJECT_CHANNEL;
    }
    if (!slot->wanted && req->channel != 0) {
        /* lazily: only what QEMU opened, announced by CHANNEL_CONNECT */
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the peer asked for channel %1$u, which QEMU has not opened"),
                       req->channel);
        return VRM_REJECT_CHANNEL;
    }
    if (slot->id) {
        vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u is already connected"),
                       req->channel);
        return VRM_REJECT_BUSY;
    }
    *slotOut = slot;
    return VRM_REJECT_NONE;
}

/* Source: a connect request */
static vrmEngineAcceptResult
vrmEngineAccept(vrmEngine *e, struct rdma_cm_event *ev)
{
    vrmProtoConnReq req;
    vrmProtoConnRep rep = { .version = VRM_PROTOCOL_VERSION };
    guint8 reply[VRM_PROTO_REP_LEN];
    guint8 expect[VRM_PROTO_MAC_LEN];
    struct rdma_conn_param param = {
        .private_data = reply,
        .private_data_len = sizeof(reply),
        .responder_resources = VRM_RDMA_RESPONDER_RESOURCES,
        .initiator_depth = VRM_RDMA_RESPONDER_RESOURCES,
        .rnr_retry_count = VRM_RDMA_RNR_RETRY_COUNT,
    };
    vrmEngineSlot *slot = NULL;
    vrmToken key = e->token;
    int reason = vrmEngineCheckRequest(e, ev, &req, &slot);

    if (reason != VRM_REJECT_NONE) {
        g_autofree char *peer = vrmEnginePeerName(ev->id);

        if (vrmEngineMayWarn(e))
            VRM_WARN(_("refused a connection request from %1$s: %2$s"), peer,
                     vrmGetLastErrorMessage());
        vrmEngineReject(e, ev->id, reason, true);
        return VRM_ENGINE_ACCEPT_REFUSED;
    }

    slot->id = ev->id;
    slot->id->context = slot;
    rep.flags = vrmCapabilityIntersect(e->caps, req.flags);
    rep.channel = req.channel;
    rep.channels = MIN(e->s.channels, req.channels);
    if (vrmEngineStaleRequest(e, slot) < 0 ||
        vrmEngineSlotSetup(e, slot, slot->id, rep.flags) < 0 || vrmProtoNonce(rep.nonce) < 0) {
        if (vrmGetLastErrorCode() == VRM_ERR_RESOURCE) {
            vrmEngineReject(e, ev->id, VRM_REJECT_RESOURCES, true);
            /* a channel the allowance does not cover ends the job: QEMU
             * would wait for it forever */
            return VRM_ENGINE_ACCEPT_FAILED;
        }
        /* Anything else belongs to this one request: above all a sender
         * that went away between its request and our queue pair (rdma_cm
         * then refuses the queue pair with EINVAL). It costs the job
         * nothing: "busy" asks a live sender to try again, and the slot
         * listens again with the reason logged (issue 13 item 12). */
        vrmEngineReject(e, ev->id, VRM_REJECT_BUSY, false);
        return VRM_ENGINE_ACCEPT_DROPPED;
    }
    if (e->s.fault == VRM_ENGINE_FAULT_IMPOSTOR) {
        VRM_WARN("test hook: answering without the job's token");
        vrmTokenGenerate(&key);
    }
    /* our proof, cut to fit the REP; the destination's, expected in AUTH */
    vrmProtoMacSource(&key, req.nonce, rep.nonce, rep.flags, rep.channel, rep.channels,
                      rep.mac);
    vrmProtoMacDestination(&e->token, rep.nonce, req.nonce, rep.flags, rep.channel,
                           rep.channels, expect);
    vrmTokenClear(&key);
    vrmChannelSetAuth(slot->ch, expect);
    explicit_bzero(expect, sizeof(expect));
    vrmProtoConnRepEncode(&rep, reply);
    vrmEngineSetAckTimeout(slot->id);
    if (rdma_accept(slot->id, &param) < 0) {
        /* its sender has gone already (issue 13 item 12): drop this one,
         * keep listening; the real destination may still come */
        vrmReportSystemError(errno, _("its connect request could not be accepted"));
        return VRM_ENGINE_ACCEPT_DROPPED;
    }
    if (!e->agreed)
        e->agreed = rep.channels;
    VRM_INFO("channel %u accepted, capabilities 0x%x, %u channels", slot->index,
             rep.flags, e->agreed);
    return VRM_ENGINE_ACCEPT_ACCEPTED;
}

/* Destination: the source accepted; it must have proved it holds the
 * token before anything of ours goes out */
static int
vrmEngineVerifySource(vrmEngine *e, vrmEngineSlot *slot, struct rdma_cm_event *ev)
{
    g_autofree char *peer = vrmEngineFormatAddress(e->s.address, e->s.port);
    guint8 mac[VRM_PROTO_MAC_SOURCE_LEN];
    guint8 auth[VRM_PROTO_MAC_LEN];
    vrmProtoConnRep rep;
    vrmToken key = e->token;

    if (vrmProtoConnRepDecode(ev->param.conn.private_data,
                              ev->param.conn.private_data_len, &rep) < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());

        vrmReportError(VRM_ERR_AUTH,
                       _("the peer at %1$s could not prove it holds this job's token: %2$s"),
                       peer, why);
        return -1;
    }
    vrmProtoMacSource(&e->token, slot->nonce, rep.nonce, rep.flags, rep.channel,
                      rep.channels, mac);
    if (!vrmProtoMacEqual(mac, rep.mac, sizeof(mac))) {
        vrmReportError(VRM_ERR_AUTH,
                       _("the peer at %1$s could not prove it holds this job's token"),
                       peer);
        return -1;
    }
    if (rep.version != VRM_PROTOCOL_VERSION || rep.channel != slot->index ||
        (rep.flags & ~e->caps) || rep.channels < 1 || rep.channels > e->s.channels ||
        (e->agreed && rep.channels != e->agreed)) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the source engine accepted channel %1$u with version %2$u, channel %3$u, capabilities 0x%4$x and %5$u channels, which do not match the request"),
                       slot->index, rep.version, rep.channel, rep.flags, rep.channels);
        return -1;
    }
    if (!e->agreed)
        e->agreed = rep.channels;
    if (e->s.fault == VRM_ENGINE_FAULT_BAD_AUTH) {
        VRM_WARN("test hook: sending an AUTH made without the job's token");
        vrmTokenGenerate(&key);
    }
    vrmProtoMacDestination(&key, rep.nonce, slot->nonce, rep.flags, rep.channel,
                           rep.channels, auth);
    vrmTokenClear(&key);
    vrmChannelSetAuth(slot->ch, auth);
    explicit_bzero(auth, sizeof(auth));
    vrmChannelSetCaps(slot->ch, vrmCapabilityIntersect(e->caps, rep.flags));
    return 0;
}

static int
vrmEngineEstablished(vrmEngine *e, vrmEngineSlot *slot, struct rdma_cm_event *ev)
{
    if (e->s.role == VRM_ENGINE_ROLE_DESTINATION) {
        if (vrmEngineVerifySource(e, slot, ev) < 0)
            return -1;
        /* the source proved itself; it checks our AUTH next */
        vrmEngineSlotAdvance(slot, VRM_ENGINE_SLOT_AUTHENTICATED);
        e->established++;
    } else {
        vrmEngineSlotAdvance(slot, VRM_ENGINE_SLOT_ESTABLISHED);
    }
    VRM_INFO("channel %u connected", slot->index);
    return vrmChannelStart(slot->ch);
}

/* The destination's view of a reject record (the event already acked:
 * a retry destroys the id, which waits for its events' acks) */
static void
vrmEngineRejected(vrmEngine *e, vrmEngineSlot *slot, int reason, guint32 version,
                  int status)
{
    g_autofree char *peer = vrmEngineFormatAddress(e->s.address, e->s.port);

    switch (reason) {
    case VRM_REJECT_NONE: {
        /* not a virt-rdma record: nobody listens there (yet) */
        g_autofree char *why = g_strdup_printf("rejected, status %d", status);

        vrmEngineScheduleRetry(e, slot, why);
        return;
    }
    case VRM_REJECT_BUSY:
        /* an unauthenticated connection may hold the channel a moment */
        vrmEngineScheduleRetry(e, slot, vrmProtoRejectReasonToString(reason));
        return;
    case VRM_REJECT_VERSION:
        vrmReportError(VRM_ERR_VERSION,
                       _("the source engine at %1$s refused the protocol version of this engine (it speaks version %2$u, this engine version %3$d; nothing released speaks version 1): install the same virt-rdma on both hosts"),
                       peer, version, VRM_PROTOCOL_VERSION);
        break;
    case VRM_REJECT_JOB_ENDED:
        vrmReportError(VRM_ERR_PEER,
                       _("the source engine at %1$s refused channel %2$u: its job has ended"),
                       peer, slot->index);
        break;
    default:
        vrmReportError(VRM_ERR_PEER, _("the source engine rejected channel %1$u: %2$s"),
                       slot->index, vrmProtoRejectReasonToString(reason));
        break;
    }
    vrmEngineFailLast(e);
}

/* A failed job still answers, with its record: a destination stops at
 * once instead of retrying for its deadline */
static void
vrmEngineCMAfterFailure(vrmEngine *e, struct rdma_cm_event *ev)
{
    struct rdma_cm_id *destroy = NULL;

    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
        vrmEngineReject(e, ev->id, VRM_REJECT_JOB_ENDED, false);
        destroy = ev->id;
    }
    rdma_ack_cm_event(ev);
    if (destroy)
        rdma_destroy_id(destroy);
}

static int
vrmEngineCMConnectRequest(vrmEngine *e, struct rdma_cm_event *ev)
{
    vrmEngineAcceptResult accepted = vrmEngineAccept(e, ev);
    struct rdma_cm_id *id = ev->id;
    vrmEngineSlot *slot = id->context;

    rdma_ack_cm_event(ev);
    /* ids go only once their events are acked */
    if (accepted == VRM_ENGINE_ACCEPT_REFUSED)
        rdma_destroy_id(id);
    if (accepted == VRM_ENGINE_ACCEPT_DROPPED) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());

        vrmEngineSlotReset(e, slot, VRM_REJECT_NONE, why);
        vrmResetLastError();
    }
    return accepted == VRM_ENGINE_ACCEPT_FAILED ? -1 : 0;
}

static void
vrmEngineCMRejected(vrmEngine *e, vrmEngineSlot *slot, struct rdma_cm_event *ev)
{
    guint32 version = 0;
    int reason;
    int status = ev->status;

    if (e->s.role == VRM_ENGINE_ROLE_SOURCE) {
        /* the peer refused our accept: that connection is over */
        rdma_ack_cm_event(ev);
        if (slot && slot->state < VRM_ENGINE_SLOT_ESTABLISHED)
            vrmEngineSlotReset(e, slot, VRM_REJECT_NONE,
                               _("the peer refused the accept"));
        return;
    }
    reason = vrmProtoRejectDecode(ev->param.conn.private_data,
                                  ev->param.conn.private_data_len, &version);
    rdma_ack_cm_event(ev);
    vrmEngineRejected(e, slot, reason, version, status);
}

/* ADDR_ERROR, ROUTE_ERROR, UNREACHABLE, CONNECT_ERROR (acked) */
static int
vrmEngineCMConnectError(vrmEngine *e, vrmEngineSlot *slot, enum rdma_cm_event_type type)
{
    bool source = e->s.role == VRM_ENGINE_ROLE_SOURCE;

    if (!source && slot && slot->state < VRM_ENGINE_SLOT_ESTABLISHED) {
        vrmEngineScheduleRetry(e, slot, vrmRdmaCMEventName(type));
        return 0;
    }
    if (source && slot && slot->state < VRM_ENGINE_SLOT_AUTHENTICATED) {
        /* a connection that never became ours: listen again */
        vrmEngineSlotReset(e, slot, VRM_REJECT_NONE, vrmRdmaCMEventName(type));
        return 0;
    }
    vrmReportError(VRM_ERR_PEER, _("channel %1$u: connection error (%2$s)"),
                   slot ? slot->index : 0, vrmRdmaCMEventName(type));
    return -1;
}

/* DISCONNECTED (acked) */
static int
vrmEngineCMDisconnected(vrmEngine *e, vrmEngineSlot *slot)
{
    if (!slot)
        return 0;
    if (slot->state >= VRM_ENGINE_SLOT_ESTABLISHED) {
        vrmChannelPeerGone(slot->ch);
        return 0;
    }
    if (e->s.role == VRM_ENGINE_ROLE_SOURCE) {
        vrmEngineSlotReset(e, slot, VRM_REJECT_NONE,
                           _("the peer disconnected before it authenticated"));
        return 0;
    }
    vrmReportError(VRM_ERR_PEER,
                   _("the peer closed channel %1$u before the end of the stream"),
                   slot->index);
    return -1;
}

/* One event of a running job; each case acks it (some must read it
 * first, some must ack it before they destroy its id). -1: the job fails. */
static int
vrmEngineCMDispatch(vrmEngine *e, struct rdma_cm_event *ev)
{
    vrmEngineSlot *slot = ev->id ? ev->id->context : NULL;
    enum rdma_cm_event_type type = ev->event;
    int rc;

    switch (type) {
    case RDMA_CM_EVENT_CONNECT_REQUEST:
        return vrmEngineCMConnectRequest(e, ev);
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        rdma_ack_cm_event(ev);
        if (rdma_resolve_route(slot->id, VRM_RDMA_RESOLVE_TIMEOUT_MS) < 0)
            vrmEngineScheduleRetry(e, slot, g_strerror(errno));
        return 0;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
        rdma_ack_cm_event(ev);
        return vrmEngineSendConnect(e, slot);
    case RDMA_CM_EVENT_ESTABLISHED:
        rc = vrmEngineEstablished(e, slot, ev);
        rdma_ack_cm_event(ev);
        return rc;
    case RDMA_CM_EVENT_REJECTED:
        vrmEngineCMRejected(e, slot, ev);
        return 0;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
        rdma_ack_cm_event(ev);
        return vrmEngineCMConnectError(e, slot, type);
    case RDMA_CM_EVENT_DISCONNECTED:
        rdma_ack_cm_event(ev);
        return vrmEngineCMDisconnected(e, slot);
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        rdma_ack_cm_event(ev);
        vrmReportError(VRM_ERR_NO_DEVICE, _("the RDMA device was removed"));
        return -1;
    default:
        rdma_ack_cm_event(ev);
        return 0;
    }
}

gboolean
vrmEngineCMEvent(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngine *e = opaque;
    struct rdma_cm_event *ev;

    while (rdma_get_cm_event(e->cm, &ev) == 0) {
        vrmEngineSlot *slot = ev->id ? ev->id->context : NULL;

        VRM_DEBUG("rdma_cm event %s status %d channel %d",
                  vrmRdmaCMEventName(ev->event), ev->status, slot ? (int)slot->index : -1);
        if (vrmEngineFailed(e))
            vrmEngineCMAfterFailure(e, ev);
        else if (vrmEngineCMDispatch(e, ev) < 0)
            vrmEngineFailLast(e);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
        vrmReportSystemError(errno, _("cannot read rdma_cm events"));
        vrmEngineFailLast(e);
    }
    return G_SOURCE_CONTINUE;
}
