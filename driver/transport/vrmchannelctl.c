/*
 * vrmchannelctl.c: a channel's control messages: what we send in each state of
 * our direction, what the peer's mean, and which is legal when (one table,
 * vrmChannelRules)
 */
#include <config.h>

#include "vrmchannelpriv.h"

/* Our ring description: as many RAM_BLOCKS messages as it takes */
static int
vrmChannelSendDescription(vrmChannel *ch, bool *progress)
{
    while (ch->descNext < ch->ring.depth && vrmChannelSqFree(ch) > 0) {
        vrmProtoRingEntry ents[VRM_CHANNEL_RING_BATCH];
        guint32 n = 0;
        size_t len;

        while (n < MIN(G_N_ELEMENTS(ents), vrmChannelCtlEntries(ch, VRM_MSG_RAM_BLOCKS)) &&
               ch->descNext < ch->ring.depth) {
            guint32 i = ch->descNext++;
            struct ibv_mr *mr = vrmRingMR(&ch->ring, i);

            ents[n++] = (vrmProtoRingEntry) {
                .index = i,
                .depth = ch->ring.depth,
                .length = ch->ring.chunk,
                .rkey = (ch->caps & VRM_CAP_PIN_ALL) && mr ? mr->rkey : 0,
                .addr = (uintptr_t)(ch->ring.mem + (size_t)i * ch->ring.chunk),
            };
        }
        len = vrmProtoBuildRing(vrmChannelCtlBuf(ch, 0), ents, n);
        /* the last part signaled: a channel that ends unused has nothing
         * unsignaled left behind it */
        if (vrmChannelPostCtl(ch, len, ch->descNext == ch->ring.depth) < 0)
            return -1;
        *progress = true;
    }
    return 0;
}

/* Test hooks that break the protocol on purpose (virt-rdma-engine(8)) */
static int
vrmChannelFaults(vrmChannel *ch, bool *progress)
{
    const vrmChannelConfig *c = &ch->cfg;

    if (c->fault == VRM_ENGINE_FAULT_OVERSIZE && !ch->faultDone &&
        ch->tx >= VRM_CHANNEL_TX_WAIT_OPEN && vrmChannelSqFree(ch) > 0) {
        /* a SEND longer than any receive buffer: two control buffers
         * (registered together) when they follow each other */
        size_t off = (size_t)(ch->postSeq % ch->sqSize) * VRM_CONTROL_MESSAGE_MAX;
        size_t len = MIN(2 * VRM_CONTROL_MESSAGE_MAX,
                         (size_t)ch->sqSize * VRM_CONTROL_MESSAGE_MAX - off);

        if (len > VRM_CONTROL_MESSAGE_MAX) {
            VRM_WARN("test hook: sending %zu bytes in one SEND on channel %u",
                     len, c->index);
            vrmProtoBuildU32Pair(ch->ctlSend + off, VRM_MSG_KEEPALIVE, 0, 0);
            ch->faultDone = true;
            *progress = true;
            return vrmChannelPostCtl(ch, len, true);
        }
    }
    if (c->fault == VRM_ENGINE_FAULT_MALFORMED && !ch->faultDone &&
        ch->tx == VRM_CHANNEL_TX_STREAM && ch->txTotal >= c->faultBytes &&
        vrmChannelSqFree(ch) > 0) {
        /* a header that announces more bytes than it carries */
        guint8 *buf = vrmChannelCtlBuf(ch, 0);
        size_t len = vrmProtoBuildU32Pair(buf, VRM_MSG_READY, 1, 0);
        vrmProtoHeader bad = { .len = 100, .type = VRM_MSG_READY, .repeat = 1 };

        vrmProtoHeaderEncode(&bad, buf);
        VRM_WARN("test hook: sending a malformed control message on channel %u",
                 c->index);
        ch->faultDone = true;
        *progress = true;
        return vrmChannelPostCtl(ch, len, true);
    }
    return 0;
}

/* Source, channel 0: the connections QEMU opened since our last look
 * (CHANNEL_CONNECT each), once the peer has our description: disk
 * connections come before QEMU's main stream, multifd ones during it */
static int
vrmChannelSendAnnouncements(vrmChannel *ch, bool *progress)
{
    while (ch->nannounce && vrmChannelSqFree(ch) > 0) {
        guint32 k = ch->announce[0];

        if (vrmChannelPostPair(ch, VRM_MSG_CHANNEL_CONNECT, k, false) < 0)
            return -1;
        memmove(ch->announce, ch->announce + 1, --ch->nannounce * sizeof(*ch->announce));
        VRM_DEBUG("channel %u: CHANNEL_CONNECT %u sent", ch->cfg.index, k);
        *progress = true;
    }
    return 0;
}

/* The messages of the channel's phase (ch->tx): AUTH, the ring's
 * description, the announcements, CHANNEL_OPEN */
static int
vrmChannelPumpPhase(vrmChannel *ch, bool *progress)
{
    bool source = ch->cfg.role == VRM_ENGINE_ROLE_SOURCE;
    size_t len;

    switch (ch->tx) {
    case VRM_CHANNEL_TX_AUTH:
        /* the source sends nothing before the destination's AUTH */
        if (source || vrmChannelSqFree(ch) < 2)
            break;
        len = vrmProtoBuildAuth(vrmChannelCtlBuf(ch, 0), ch->auth);
        if (vrmChannelPostCtl(ch, len, false) < 0)
            return -1;
        if (ch->cfg.fault == VRM_ENGINE_FAULT_EARLY_REGISTER) {
            guint32 zero = 0;

            VRM_WARN("test hook: REGISTER_REQUEST before the ring description on channel %u",
                     ch->cfg.index);
            len = vrmProtoBuildRegRequest(vrmChannelCtlBuf(ch, 0), &zero, 1);
            if (vrmChannelPostCtl(ch, len, false) < 0)
                return -1;
        }
        vrmChannelSetTx(ch, VRM_CHANNEL_TX_DESCRIBE);
        *progress = true;
        break;
    case VRM_CHANNEL_TX_DESCRIBE:
        if (vrmChannelSendDescription(ch, progress) < 0)
            return -1;
        if (ch->descNext == ch->ring.depth)
            vrmChannelSetTx(ch, VRM_CHANNEL_TX_WAIT_OPEN);
        break;
    case VRM_CHANNEL_TX_WAIT_OPEN:
        if (vrmChannelSendAnnouncements(ch, progress) < 0)
            return -1;
        if (ch->sock >= 0) {
            /* the source announces the open once the peer is described */
            vrmChannelSetTx(ch, source ? VRM_CHANNEL_TX_OPEN : VRM_CHANNEL_TX_STREAM);
            *progress = true;
        }
        break;
    case VRM_CHANNEL_TX_OPEN:
        if (vrmChannelSendAnnouncements(ch, progress) < 0)
            return -1;
        if (ch->rx != VRM_CHANNEL_RX_OPEN || vrmChannelSqFree(ch) == 0)
            break;
        if (vrmChannelPostOpen(ch) < 0)
            return -1;
        VRM_DEBUG("channel %u: %s sent", ch->cfg.index,
                  ch->tcpOpenSet ? "CHANNEL_OPEN_TCP" : "CHANNEL_OPEN");
        vrmChannelSetTx(ch, VRM_CHANNEL_TX_STREAM);
        /* from now on the destination may stream back */
        vrmChannelSetRx(ch, VRM_CHANNEL_RX_STREAM);
        *progress = true;
        break;
    case VRM_CHANNEL_TX_STREAM:
        /* each announcement before this stream's EOF (vrmChannelPumpTx
         * waits for them) */
        if (vrmChannelSendAnnouncements(ch, progress) < 0)
            return -1;
        break;                          /* data: vrmChannelPumpTx */
    case VRM_CHANNEL_TX_EOF_SENT:       /* waiting for EOF_ACK */
    case VRM_CHANNEL_TX_DONE:
    case VRM_CHANNEL_TX_LAST:
        break;
    }
    return 0;
}

/* What the peer is owed in any phase: registrations, credits, EOF_ACK */
static int
vrmChannelPumpReplies(vrmChannel *ch, bool *progress)
{
    size_t len;

    /* registrations the peer asked for */
    if (ch->nRegRes && vrmChannelSqFree(ch) > 0) {
        guint32 n = MIN(ch->nRegRes, vrmChannelCtlEntries(ch, VRM_MSG_REGISTER_RESULT));

        len = vrmProtoBuildRegResult(vrmChannelCtlBuf(ch, 0), ch->regRes, n);
        if (vrmChannelPostCtl(ch, len, false) < 0)
            return -1;
        memmove(ch->regRes, ch->regRes + n, (ch->nRegRes - n) * sizeof(*ch->regRes));
        ch->nRegRes -= n;
        *progress = true;
    }
    /* registrations we ask for */
    if (ch->remote.queued && vrmChannelSqFree(ch) > 0) {
        g_autofree guint32 *idx = g_new(guint32, ch->remote.queued);
        guint32 n = vrmRemoteRingTakeRequests(&ch->remote, idx,
                                              vrmChannelCtlEntries(ch, VRM_MSG_REGISTER_REQUEST));

        len = vrmProtoBuildRegRequest(vrmChannelCtlBuf(ch, 0), idx, n);
        if (vrmChannelPostCtl(ch, len, false) < 0)
            return -1;
        *progress = true;
    }
    /* credits for the chunks drained */
    if (ch->creditsDue && vrmChannelSqFree(ch) > 0) {
        VRM_DEBUG("channel %u: sending READY %u (seq %" G_GUINT64_FORMAT ")",
                  ch->cfg.index, ch->creditsDue, ch->postSeq);
        if (vrmChannelPostPair(ch, VRM_MSG_READY, ch->creditsDue, false) < 0)
            return -1;
        ch->creditsDue = 0;
        *progress = true;
    }
    /* the peer's direction ends once every byte is in the socket */
    if (ch->rx == VRM_CHANNEL_RX_DRAIN && ch->rxf.filled == 0 && ch->sock >= 0 &&
        vrmChannelSqFree(ch) > 0) {
        if (shutdown(ch->sock, SHUT_WR) < 0 && errno != ENOTCONN)
            VRM_DEBUG("channel %u: shutdown: %s", ch->cfg.index, g_strerror(errno));
        len = vrmProtoBuildU64(vrmChannelCtlBuf(ch, 0), VRM_MSG_EOF_ACK, ch->rxf.bytes);
        if (vrmChannelPostCtl(ch, len, true) < 0)
            return -1;
        vrmChannelSetRx(ch, VRM_CHANNEL_RX_DONE);
        *progress = true;
        VRM_DEBUG("channel %u: EOF_ACK %" G_GUINT64_FORMAT " sent",
                  ch->cfg.index, ch->rxf.bytes);
    }
    return 0;
}

/* Everything except data WRITEs: a switch on our direction's state, then
 * the answers the peer's direction is owed, while there is room */
int
vrmChannelPumpControl(vrmChannel *ch, bool *progress)
{
    if (vrmChannelPumpPhase(ch, progress) < 0 || vrmChannelPumpReplies(ch, progress) < 0)
        return -1;
    return vrmChannelFaults(ch, progress);
}

static int
vrmChannelUnexpected(vrmChannel *ch, int type, const char *why)
{
    vrmReportError(VRM_ERR_PROTOCOL,
                   _("channel %1$u: unexpected %2$s message: %3$s"),
                   ch->cfg.index, vrmProtoMsgTypeToString(type), why);
    return -1;
}

static int
vrmChannelHandleRing(vrmChannel *ch, const vrmProtoMsg *msg)
{
    vrmRemoteRing *rr = &ch->remote;
    guint32 i;

    for (i = 0; i < msg->hdr.repeat; i++) {
        vrmProtoRingEntry e;

        vrmProtoGetRing(msg, i, &e);
        if (vrmRemoteRingComplete(rr))
            return vrmChannelUnexpected(ch, msg->hdr.type, _("more entries than the ring depth"));
        if (vrmRemoteRingDescribe(rr, &e, ch->caps & VRM_CAP_PIN_ALL) < 0) {
            g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
            vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u: %2$s"), ch->cfg.index, why);
            return -1;
        }
    }
    if (vrmRemoteRingComplete(rr)) {
        vrmTxFlowInit(&ch->txf, rr->depth);
        vrmChannelSetRx(ch, VRM_CHANNEL_RX_OPEN);
        VRM_DEBUG("channel %u: peer ring %u x %u bytes", ch->cfg.index,
                  rr->depth, rr->chunk);
    }
    return 0;
}

static int
vrmChannelHandleRegRequest(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint32 i;

    if (ch->caps & VRM_CAP_PIN_ALL)
        return vrmChannelUnexpected(ch, msg->hdr.type, _("every chunk is pinned already"));
    if (msg->hdr.repeat > ch->ring.depth - ch->nRegRes)
        return vrmChannelUnexpected(ch, msg->hdr.type, _("more requests than chunks"));
    for (i = 0; i < msg->hdr.repeat; i++) {
        guint32 idx;

        vrmProtoGetU32Pair(msg, i, &idx, NULL);
        if (idx >= ch->ring.depth) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("channel %1$u: the peer asked to register chunk %2$u of a ring of %3$u"),
                           ch->cfg.index, idx, ch->ring.depth);
            return -1;
        }
        if (ch->rxRegd[idx]) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("channel %1$u: the peer asked to register chunk %2$u twice"),
                           ch->cfg.index, idx);
            return -1;
        }
        if (vrmRingRegisterChunk(ch, &ch->ring, idx,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) < 0)
            return -1;
        ch->rxRegd[idx] = 1;
        ch->regRes[ch->nRegRes++] = (vrmProtoRegResult) {
            .index = idx,
            .rkey = vrmRingMR(&ch->ring, idx)->rkey,
            .addr = (uintptr_t)(ch->ring.mem + (size_t)idx * ch->ring.chunk),
        };
    }
    return 0;
}

static int
vrmChannelHandleRegResult(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint32 i;

    if (ch->caps & VRM_CAP_PIN_ALL)
        return vrmChannelUnexpected(ch, msg->hdr.type, _("every chunk is pinned already"));
    for (i = 0; i < msg->hdr.repeat; i++) {
        vrmProtoRegResult r;
        gint64 waited;

        vrmProtoGetRegResult(msg, i, &r);
        if (vrmRemoteRingRegistered(&ch->remote, &r, g_get_monotonic_time(), &waited) < 0) {
            g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
            vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u: %2$s"), ch->cfg.index, why);
            return -1;
        }
        vrmStatsAdd(&ch->stats, VRM_STAT_REGISTRATION_US, waited);
    }
    return 0;
}

/* The peer announced a chunk of our ring, as its transfer mode does */
int
vrmChannelChunkArrived(vrmChannel *ch, const vrmTransferArrival *a)
{
    guint32 idx = a->key;
    int rc;

    if (!a->tagged && idx >= ch->ring.depth) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("channel %1$u: the peer announced chunk %2$u of a ring of %3$u"),
                       ch->cfg.index, idx, ch->ring.depth);
        return -1;
    }
    rc = a->tagged ? vrmRxFlowFillTag(&ch->rxf, a->key, a->length, &idx)
                   : vrmRxFlowFill(&ch->rxf, idx, a->length);
    if (rc < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
        vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u: %2$s"), ch->cfg.index, why);
        return -1;
    }
    ch->rxLen[idx] = a->length;
    vrmStatsAdd(&ch->stats, VRM_STAT_CHUNKS_RECEIVED, 1);
    return 0;
}

static int
vrmChannelHandleData(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint32 i;

    if (!ch->mode->rxMessage)
        return vrmChannelUnexpected(ch, msg->hdr.type, _("data is announced by immediate data"));
    for (i = 0; i < msg->hdr.repeat; i++) {
        vrmTransferArrival a;

        ch->mode->rxMessage(msg, i, &a);
        if (vrmChannelChunkArrived(ch, &a) < 0)
            return -1;
    }
    return 0;
}

static int
vrmChannelHandleAuth(vrmChannel *ch, const vrmProtoMsg *msg)
{
    if (!vrmProtoMacEqual(vrmProtoGetAuth(msg), ch->auth, VRM_PROTO_MAC_LEN)) {
        ch->unauthenticated = true;
        vrmReportError(VRM_ERR_AUTH,
                       _("channel %1$u: the peer could not prove it holds this job's token"),
                       ch->cfg.index);
        return -1;
    }
    /* from now on it may hear from us: our description, our keys */
    vrmChannelSetRx(ch, VRM_CHANNEL_RX_DESCRIBE);
    vrmChannelSetTx(ch, VRM_CHANNEL_TX_DESCRIBE);
    vrmChannelSignal(ch, &ch->ev.authenticated);
    return 0;
}

static int
vrmChannelHandleConnect(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint32 a;

    vrmProtoGetU32Pair(msg, 0, &a, NULL);
    if (ch->cfg.index != 0)
        return vrmChannelUnexpected(ch, msg->hdr.type, _("only channel 0 carries it"));
    g_mutex_lock(&ch->lock);
    if (ch->ev.nconnect >= G_N_ELEMENTS(ch->ev.connect)) {
        g_mutex_unlock(&ch->lock);
        return vrmChannelUnexpected(ch, msg->hdr.type, _("more connections than channels"));
    }
    ch->ev.connect[ch->ev.nconnect++] = a;
    g_mutex_unlock(&ch->lock);
    if (ch->host.wake)
        ch->host.wake(ch->host.opaque);
    return 0;
}

static int
vrmChannelHandleError(vrmChannel *ch G_GNUC_UNUSED, const vrmProtoMsg *msg)
{
    g_autofree char *text = NULL;
    g_autofree char *safe = NULL;
    guint32 code;

    if (vrmProtoGetError(msg, &code, &text) < 0)
        return -1;
    /* the peer's words reach logs and the stats record: made safe */
    safe = vrmLogSanitize(text);
    vrmReportError(VRM_ERR_PEER, _("the peer engine reported an error: %1$s"), safe);
    return -1;
}

static int
vrmChannelHandleReady(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint32 a;

    vrmProtoGetU32Pair(msg, 0, &a, NULL);
    VRM_DEBUG("channel %u: READY %u, %u in flight", ch->cfg.index, a, ch->txf.inflight);
    if (vrmTxFlowCredit(&ch->txf, a) < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
        vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u: %2$s"), ch->cfg.index, why);
        return -1;
    }
    ch->stalled = false;
    return 0;
}

static int
vrmChannelHandleOpen(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint32 a;

    vrmProtoGetU32Pair(msg, 0, &a, NULL);
    if (a != ch->cfg.index)
        return vrmChannelUnexpected(ch, msg->hdr.type, _("it names another channel"));
    vrmChannelSetRx(ch, VRM_CHANNEL_RX_STREAM);
    vrmChannelSignal(ch, &ch->ev.openRequested);
    return 0;
}

static int
vrmChannelHandleOpenTcp(vrmChannel *ch, const vrmProtoMsg *msg)
{
    vrmProtoTcpOpen open;

    vrmProtoGetTcpOpen(msg, &open);
    if (open.channel != ch->cfg.index)
        return vrmChannelUnexpected(ch, msg->hdr.type, _("it names another channel"));
    if (!(ch->caps & VRM_CAP_TCP))
        return vrmChannelUnexpected(ch, msg->hdr.type,
                                    _("this job takes no TCP connections"));
    vrmChannelSetRx(ch, VRM_CHANNEL_RX_STREAM);
    g_mutex_lock(&ch->lock);
    ch->ev.tcpOpen = open;
    ch->ev.tcpOpenSet = true;
    g_mutex_unlock(&ch->lock);
    vrmChannelSignal(ch, &ch->ev.openRequested);
    return 0;
}

static int
vrmChannelHandleEof(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint64 total = vrmProtoGetU64(msg);

    if (total != ch->rxf.bytes) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("channel %1$u: the peer ended after %2$llu bytes but announced %3$llu"),
                       ch->cfg.index, (unsigned long long)total,
                       (unsigned long long)ch->rxf.bytes);
        return -1;
    }
    vrmChannelSetRx(ch, VRM_CHANNEL_RX_DRAIN);
    VRM_DEBUG("channel %u: peer EOF after %" G_GUINT64_FORMAT " bytes",
              ch->cfg.index, total);
    return 0;
}

static int
vrmChannelHandleEofAck(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint64 total = vrmProtoGetU64(msg);

    if (total != ch->txTotal) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("channel %1$u: the peer acknowledged %2$llu bytes, %3$llu were sent"),
                       ch->cfg.index, (unsigned long long)total,
                       (unsigned long long)ch->txTotal);
        return -1;
    }
    vrmChannelSetTx(ch, VRM_CHANNEL_TX_DONE);
    return 0;
}

/* its arrival is the point: the peer is there */
static int
vrmChannelHandleKeepalive(vrmChannel *ch G_GNUC_UNUSED,
                          const vrmProtoMsg *msg G_GNUC_UNUSED)
{
    return 0;
}

/* ------------------------------------------------------------------ */
/* Which message is legal in which state, and what handles it          */

typedef enum {
    VRM_RULE_RX,                /* judged by the peer's direction's state */
    VRM_RULE_TX,                /* an answer to our direction: judged by ours */
} vrmRuleSide;

typedef struct {
    vrmRuleSide side;
    unsigned int roles;         /* VRM_ENGINE_FOR_*: who may receive it */
    unsigned int states;        /* one bit per vrmChannelRx or vrmChannelTx state */
    int (*handle)(vrmChannel *ch, const vrmProtoMsg *msg);  /* -1: reported */
} vrmChannelRule;

#define RX(s) (1u << VRM_CHANNEL_RX_##s)
#define TX(s) (1u << VRM_CHANNEL_TX_##s)
/* every state once the peer has proved who it is */
#define RX_ANY (RX(DESCRIBE) | RX(OPEN) | RX(STREAM) | RX(DRAIN) | RX(DONE))

/* A type without a row (NONE, QEMU_FILE, COMPRESS, REGISTER_FINISHED, and
 * version 1's CHANNEL_UNUSED) is never legal; the decoder refuses those
 * already. Until the destination's AUTH has been checked, AUTH is the only
 * legal message. A row's handler runs only for a message legal now, so
 * no handler checks the state again. */
static const vrmChannelRule vrmChannelRules[VRM_MSG_LAST] = {
    [VRM_MSG_AUTH] = { VRM_RULE_RX, VRM_ENGINE_FOR_SOURCE, RX(AUTH),
        vrmChannelHandleAuth },
    [VRM_MSG_ERROR] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX_ANY,
        vrmChannelHandleError },
    [VRM_MSG_READY] = { VRM_RULE_TX, VRM_ENGINE_FOR_BOTH, TX(STREAM) | TX(EOF_SENT),
        vrmChannelHandleReady },
    [VRM_MSG_RAM_BLOCKS] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX(DESCRIBE),
        vrmChannelHandleRing },
    [VRM_MSG_REGISTER_REQUEST] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX(STREAM),
        vrmChannelHandleRegRequest },
    [VRM_MSG_REGISTER_RESULT] = { VRM_RULE_TX, VRM_ENGINE_FOR_BOTH, TX(STREAM) | TX(EOF_SENT),
        vrmChannelHandleRegResult },
    [VRM_MSG_CHANNEL_OPEN] = { VRM_RULE_RX, VRM_ENGINE_FOR_DESTINATION, RX(OPEN),
        vrmChannelHandleOpen },
    [VRM_MSG_CHANNEL_OPEN_TCP] = { VRM_RULE_RX, VRM_ENGINE_FOR_DESTINATION, RX(OPEN),
        vrmChannelHandleOpenTcp },
    [VRM_MSG_DATA] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX(STREAM),
        vrmChannelHandleData },
    [VRM_MSG_EOF] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX(STREAM),
        vrmChannelHandleEof },
    [VRM_MSG_EOF_ACK] = { VRM_RULE_TX, VRM_ENGINE_FOR_BOTH, TX(EOF_SENT),
        vrmChannelHandleEofAck },
    [VRM_MSG_KEEPALIVE] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX_ANY,
        vrmChannelHandleKeepalive },
    /* before channel 0's own stream too: QEMU connects its disks (NBD)
     * before it starts the migration stream */
    [VRM_MSG_CHANNEL_CONNECT] = { VRM_RULE_RX, VRM_ENGINE_FOR_DESTINATION, RX(OPEN) | RX(STREAM),
        vrmChannelHandleConnect },
};

#undef RX
#undef TX
#undef RX_ANY

/* The rules table: is @type legal now? -1 reported if not */
static int
vrmChannelCheckRule(vrmChannel *ch, int type)
{
    const vrmChannelRule *r = &vrmChannelRules[type];
    g_autofree char *why = NULL;

    if (!r->roles || !r->handle)
        return vrmChannelUnexpected(ch, type, _("not used in this protocol version"));
    if (!(r->roles & (1u << ch->cfg.role))) {
        why = g_strdup_printf(_("a %1$s engine never receives it"),
                              vrmEngineRoleTypeToString(ch->cfg.role));
        return vrmChannelUnexpected(ch, type, why);
    }
    if (r->side == VRM_RULE_RX && !(r->states & (1u << ch->rx))) {
        why = g_strdup_printf(_("the peer's direction is in state '%1$s'"),
                              vrmChannelRxTypeToString(ch->rx));
        return vrmChannelUnexpected(ch, type, why);
    }
    if (r->side == VRM_RULE_TX && !(r->states & (1u << ch->tx))) {
        why = g_strdup_printf(_("our direction is in state '%1$s'"),
                              vrmChannelTxTypeToString(ch->tx));
        return vrmChannelUnexpected(ch, type, why);
    }
    return 0;
}

int
vrmChannelHandleMessage(vrmChannel *ch, const guint8 *buf, size_t len)
{
    vrmProtoMsg msg;

    vrmStatsAdd(&ch->stats, VRM_STAT_CONTROL_RECEIVED, 1);
    if (vrmProtoMsgDecode(buf, len, &msg) < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
        vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u: malformed message from the peer: %2$s"),
                       ch->cfg.index, why);
        return -1;
    }
    if (vrmChannelCheckRule(ch, msg.hdr.type) < 0)
        return -1;
    return vrmChannelRules[msg.hdr.type].handle(ch, &msg);
}
