/*
 * vrmchannel.c: one channel = one QEMU connection <-> one RC queue pair:
 * its life cycle, its mailbox, its completions and its progress thread
 *
 * Data path (progress thread):
 *   socket -> staging chunk -> RDMA WRITEs -> peer's ring, announced as
 *   the transfer mode does it (vrmtransfer.h; vrmchanneltx.c)
 *   our ring -> socket, credits back with READY (vrmchannelrx.c)
 * Control: the two state machines of vrmchannel.h, driven by one table of
 * which message is legal in which state (vrmChannelRules) and one pump that
 * is a switch on our direction's state (vrmChannelPumpControl), both in
 * vrmchannelctl.c. What the files share: vrmchannelpriv.h.
 */
#include <config.h>

#include "vrmchannelpriv.h"

/* ------------------------------------------------------------------ */
/* Life cycle (owner)                                                  */

vrmChannel *
vrmChannelNew(const vrmChannelConfig *cfg, const vrmChannelHost *host)
{
    vrmChannel *ch = g_new0(vrmChannel, 1);

    ch->cfg = *cfg;
    ch->mode = vrmTransferModeFor(0);
    ch->host = *host;
    ch->tx = VRM_CHANNEL_TX_AUTH;
    ch->rx = cfg->role == VRM_ENGINE_ROLE_SOURCE ? VRM_CHANNEL_RX_AUTH :
        VRM_CHANNEL_RX_DESCRIBE;
    ch->sock = -1;
    ch->mbFd = -1;
    ch->wakefd = -1;
    ch->splice.pipe[0] = ch->splice.pipe[1] = -1;
    g_mutex_init(&ch->lock);
    return ch;
}

int
vrmChannelQueueSizes(const vrmChannelConfig *cfg, const vrmRdmaDevice *dev,
                     guint32 *sendSize, guint32 *recvSize, int *cqe)
{
    guint32 depth = cfg->ringDepth;
    guint32 limit = vrmChannelMaxWrite(cfg, dev->maxMessage);
    /* verbs work requests of one chunk (a split chunk takes several) */
    guint64 pieces = limit ? ((guint64)cfg->chunkSize + limit - 1) / limit : 1;
    guint64 want = VRM_SEND_SLOTS(depth) + depth * (pieces - 1);
    guint32 minSq = depth + 2 + VRM_CHANNEL_CTL_RESERVE;

    *sendSize = vrmRdmaClamp(MIN(want, G_MAXINT32), dev->maxQpWr, "send queue");
    *recvSize = vrmRdmaClamp(VRM_RECV_SLOTS(depth), dev->maxQpWr, "receive queue");
    if (pieces > 1 && *sendSize < pieces + minSq) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("on device %1$s a chunk of %2$u bytes takes %3$llu work requests (messages of at most %4$u bytes), more than its send queue of %5$d holds; use a smaller chunk size"),
                       dev->name, cfg->chunkSize, (unsigned long long)pieces, limit,
                       dev->maxQpWr);
        return -1;
    }
    if (*sendSize < minSq || *recvSize < VRM_RECV_SLOTS(depth)) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("device %1$s allows %2$d work requests per queue, a ring depth of %3$u needs %4$u"),
                       dev->name, dev->maxQpWr, depth, VRM_RECV_SLOTS(depth));
        return -1;
    }
    *cqe = vrmRdmaClamp(*sendSize + *recvSize + 1, dev->maxCqe, "completion queue");
    if ((guint32)*cqe < *sendSize + *recvSize) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("device %1$s allows %2$d completion queue entries, %3$u are needed"),
                       dev->name, dev->maxCqe, *sendSize + *recvSize);
        return -1;
    }
    return 0;
}

int
vrmChannelSetup(vrmChannel *ch, vrmRdmaDevice *dev)
{
    int access = IBV_ACCESS_LOCAL_WRITE;
    guint32 depth = ch->cfg.ringDepth;
    int cqe;

    if (ch->dev)
        return 0;       /* already set up (destination retry) */
    if (vrmChannelQueueSizes(&ch->cfg, dev, &ch->qpSend, &ch->rqSize, &cqe) < 0)
        return -1;
    ch->dev = dev;
    ch->sqSize = MIN(VRM_SEND_SLOTS(depth), ch->qpSend);
    ch->sigInterval = MAX(1, ch->sqSize / 4);
    ch->sigVerbs = MAX(1, ch->qpSend / 4);
    ch->ctlLimit = vrmChannelMaxWrite(&ch->cfg, dev->maxMessage);
    if ((ch->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        vrmReportSystemError(errno, _("cannot create an eventfd"));
        return -1;
    }
    ch->sslots = g_new0(vrmSendSlot, ch->sqSize);
    ch->rslots = g_new0(vrmRecvSlot, ch->rqSize);
    ch->wrs = g_new0(struct ibv_send_wr, ch->qpSend);
    ch->sges = g_new0(struct ibv_sge, ch->qpSend);
    ch->lastVerbs = g_new0(guint32, ch->sqSize);
    ch->rwrs = g_new0(struct ibv_recv_wr, ch->rqSize);
    ch->rsges = g_new0(struct ibv_sge, ch->rqSize);
    ch->repost = g_new0(guint32, ch->rqSize);
    ch->regRes = g_new0(vrmProtoRegResult, depth);
    ch->rxLen = g_new0(guint32, depth);
    ch->rxRegd = g_new0(guint8, depth);
    ch->rxFreeAt = g_new0(guint64, depth);

    if (vrmRingAlloc(&ch->ring, depth, ch->cfg.chunkSize) < 0 ||
        vrmRingAlloc(&ch->stage, depth, ch->cfg.chunkSize) < 0)
        return -1;
    if (!(ch->ctlSend = vrmChannelMap((size_t)ch->sqSize * VRM_CONTROL_MESSAGE_MAX)) ||
        !(ch->ctlRecv = vrmChannelMap((size_t)ch->rqSize * VRM_CONTROL_MESSAGE_MAX)))
        return -1;
    if (!(ch->ctlSendMr = vrmRdmaRegister(dev, ch->ctlSend,
                                          (size_t)ch->sqSize * VRM_CONTROL_MESSAGE_MAX,
                                          access, NULL)) ||
        !(ch->ctlRecvMr = vrmRdmaRegister(dev, ch->ctlRecv,
                                          (size_t)ch->rqSize * VRM_CONTROL_MESSAGE_MAX,
                                          access, NULL)))
        return -1;
    vrmStatsAdd(&ch->stats, VRM_STAT_PINNED_BYTES,
                (guint64)(ch->sqSize + ch->rqSize) * VRM_CONTROL_MESSAGE_MAX);

    /* Pin-all is decided by the local setting here; the agreed set can only
     * be smaller, and an unused registration is harmless. */
    if (ch->cfg.pinAll) {
        if (vrmRingRegisterAll(ch, &ch->ring, access | IBV_ACCESS_REMOTE_WRITE) < 0 ||
            vrmRingRegisterAll(ch, &ch->stage, access) < 0)
            return -1;
    }
    vrmRxFlowInit(&ch->rxf, depth, ch->cfg.chunkSize);
    return 0;
}

int
vrmChannelAttachQP(vrmChannel *ch, vrmRdmaQP *qp, guint32 caps)
{
    guint32 i;

    g_assert(ch->dev && !ch->qp && !ch->thread);
    ch->qp = qp;
    ch->caps = caps;
    ch->mode = vrmTransferModeFor(caps);
    ch->maxWriteKnown = false;
    ch->recvPosted = 0;
    ch->lastActivity = ch->attachedUs = g_get_monotonic_time();
    for (i = 0; i < ch->rqSize; i++)
        ch->repost[i] = i;
    return vrmChannelPostRecvs(ch, ch->repost, ch->rqSize);
}

void
vrmChannelSetCaps(vrmChannel *ch, guint32 caps)
{
    g_assert(!ch->thread);
    ch->caps = caps;
    ch->mode = vrmTransferModeFor(caps);
}

void
vrmChannelSetAuth(vrmChannel *ch, const guint8 mac[VRM_PROTO_MAC_LEN])
{
    g_assert(!ch->thread);
    memcpy(ch->auth, mac, VRM_PROTO_MAC_LEN);
}

void
vrmChannelDropQP(vrmChannel *ch)
{
    g_assert(!ch->thread);
    vrmRdmaQPFree(g_steal_pointer(&ch->qp));
}

void
vrmChannelJoin(vrmChannel *ch)
{
    if (ch && ch->thread) {
        g_thread_join(ch->thread);
        ch->thread = NULL;
    }
}

void
vrmChannelFree(vrmChannel *ch)
{
    if (!ch)
        return;
    vrmChannelJoin(ch);
    if (ch->sock >= 0)
        close(ch->sock);
    if (ch->mbFd >= 0)
        close(ch->mbFd);
    vrmSpliceClose(&ch->splice);
    /* the queue pair before the memory it may still reference */
    vrmRdmaQPFree(ch->qp);
    vrmRingClear(ch->dev, &ch->ring);
    vrmRingClear(ch->dev, &ch->stage);
    if (ch->dev) {
        vrmRdmaDeregister(ch->dev, ch->ctlSendMr);
        vrmRdmaDeregister(ch->dev, ch->ctlRecvMr);
    }
    vrmChannelUnmap(ch->ctlSend, (size_t)ch->sqSize * VRM_CONTROL_MESSAGE_MAX);
    vrmChannelUnmap(ch->ctlRecv, (size_t)ch->rqSize * VRM_CONTROL_MESSAGE_MAX);
    g_free(ch->sslots);
    g_free(ch->rslots);
    g_free(ch->wrs);
    g_free(ch->sges);
    g_free(ch->lastVerbs);
    g_free(ch->wcFailedWr);
    g_free(ch->rwrs);
    g_free(ch->rsges);
    g_free(ch->repost);
    g_free(ch->regRes);
    g_free(ch->rxLen);
    g_free(ch->rxRegd);
    g_free(ch->rxFreeAt);
    vrmRemoteRingClear(&ch->remote);
    if (ch->wakefd >= 0)
        close(ch->wakefd);
    g_free(ch->mbReason);
    explicit_bzero(ch->auth, sizeof(ch->auth));
    g_mutex_clear(&ch->lock);
    g_free(ch);
}

/* ------------------------------------------------------------------ */
/* Mailbox (any thread)                                                */

static void
vrmChannelWake(vrmChannel *ch)
{
    guint64 one = 1;

    if (ch->wakefd >= 0 && write(ch->wakefd, &one, sizeof(one)) < 0 &&
        errno != EAGAIN)
        VRM_WARN("cannot wake channel %u: %s", ch->cfg.index, g_strerror(errno));
}

void
vrmChannelGiveSocket(vrmChannel *ch, int fd)
{
    g_mutex_lock(&ch->lock);
    g_assert(ch->mbFd < 0);
    ch->mbFd = fd;
    g_mutex_unlock(&ch->lock);
    vrmChannelWake(ch);
}

void
vrmChannelGiveTcpSocket(vrmChannel *ch, int fd, const vrmProtoTcpOpen *open)
{
    g_mutex_lock(&ch->lock);
    g_assert(ch->mbFd < 0);
    ch->mbFd = fd;
    ch->mbTcpOpen = *open;
    ch->mbTcpOpen.channel = ch->cfg.index;
    ch->mbTcpOpenSet = true;
    g_mutex_unlock(&ch->lock);
    vrmChannelWake(ch);
}

void
vrmChannelStop(vrmChannel *ch, int code, const char *reason)
{
    g_mutex_lock(&ch->lock);
    if (!ch->mbStop) {
        ch->mbStop = true;
        ch->mbCode = code;
        ch->mbReason = g_strdup(reason);
    }
    g_mutex_unlock(&ch->lock);
    vrmChannelWake(ch);
}

void
vrmChannelPeerGone(vrmChannel *ch)
{
    g_mutex_lock(&ch->lock);
    ch->mbPeerGone = true;
    g_mutex_unlock(&ch->lock);
    vrmChannelWake(ch);
}

/* Source, channel 0: QEMU opened connection @index after the main
 * connection's stream had ended: too late to announce it */
static void
vrmChannelReportLateConnection(guint32 index)
{
    vrmReportError(VRM_ERR_PROTOCOL,
                   _("QEMU opened connection %1$u after it had closed its main connection"),
                   index);
}

int
vrmChannelAnnounce(vrmChannel *ch, guint32 index)
{
    bool closed;

    g_mutex_lock(&ch->lock);
    closed = ch->mbClosed;
    if (!closed) {
        g_assert(ch->mbNannounce < G_N_ELEMENTS(ch->mbAnnounce));
        ch->mbAnnounce[ch->mbNannounce++] = index;
    }
    g_mutex_unlock(&ch->lock);
    if (closed) {
        vrmChannelReportLateConnection(index);
        return -1;
    }
    vrmChannelWake(ch);
    return 0;
}

int
vrmChannelCloseMailbox(vrmChannel *ch)
{
    guint32 n, first = 0;

    g_mutex_lock(&ch->lock);
    ch->mbClosed = true;
    n = ch->mbNannounce;
    if (n)
        first = ch->mbAnnounce[0];
    g_mutex_unlock(&ch->lock);
    if (n) {
        /* announced after our last look at the mailbox: it can no longer
         * go before our EOF, so the peer would never connect it */
        vrmChannelReportLateConnection(first);
        return -1;
    }
    return 0;
}

void
vrmChannelStreamVerdict(vrmChannel *ch, bool qemuAlive, int qemuPid)
{
    g_mutex_lock(&ch->lock);
    ch->mbVerdict = qemuAlive ? 1 : 2;
    ch->mbQemuPid = qemuPid;
    g_mutex_unlock(&ch->lock);
    vrmChannelWake(ch);
}

void
vrmChannelTakeEvents(vrmChannel *ch, vrmChannelEvents *ev)
{
    g_mutex_lock(&ch->lock);
    *ev = ch->ev;
    ch->ev.openRequested = false;
    ch->ev.tcpOpenSet = false;
    ch->ev.authenticated = false;
    ch->ev.streamEnded = false;
    ch->ev.nconnect = 0;
    g_mutex_unlock(&ch->lock);
}

/* ------------------------------------------------------------------ */
/* Completions                                                         */

/* The link failed under a work request: say so, not the provider's
 * status for it (rxe completes a send it could not transmit with
 * LOC_QP_OP_ERR, before its port shows down) */
static void
vrmChannelReportPortDown(vrmChannel *ch)
{
    vrmReportError(VRM_ERR_NO_DEVICE, _("RDMA device %1$s failed: %2$s"),
                   ch->qp->dev->name, ibv_event_type_str(IBV_EVENT_PORT_ERR));
}

/* A send-queue work request in words, for the error that names it: what
 * it carried, its number and how many were outstanding with it */
static char *
vrmChannelDescribeSend(const vrmChannel *ch, const vrmSendSlot *slot)
{
    guint64 outstanding = ch->postSeq - ch->retiredSeq;
    guint64 nth = slot->seq - ch->retiredSeq + 1;    /* not retired yet */

    switch (slot->opcode) {
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_WRITE:
        return g_strdup_printf(_("RDMA %1$s of %2$u bytes into chunk %3$u of the peer's ring, work request %4$llu of %5$llu outstanding"),
                               slot->opcode == IBV_WR_RDMA_WRITE ? "WRITE" : "WRITE_WITH_IMM",
                               slot->len, slot->what, (unsigned long long)nth,
                               (unsigned long long)outstanding);
    default:
        return g_strdup_printf(_("SEND of a %1$s message of %2$u bytes, work request %3$llu of %4$llu outstanding"),
                               vrmProtoMsgTypeToString((int)slot->what), slot->len,
                               (unsigned long long)nth,
                               (unsigned long long)outstanding);
    }
}

/* "a work request failed", naming the request where it was a send */
static void
vrmChannelReportFailedWR(const vrmChannel *ch, int code, const char *what,
                         const char *wr)
{
    if (wr)
        vrmReportError(code, _("channel %1$u: a work request failed: %2$s (%3$s)"),
                       ch->cfg.index, what, wr);
    else
        vrmReportError(code, _("channel %1$u: a work request failed: %2$s"),
                       ch->cfg.index, what);
}

/* A completion that failed: the error, or 0 where it is a flush after the
 * end or what a lost peer looks like before its cause is known */
static int
vrmChannelFailedWC(vrmChannel *ch, const struct ibv_wc *wc)
{
    vrmWorkId *wid = (vrmWorkId *)(uintptr_t)wc->wr_id;
    const char *what;
    int code = vrmRdmaWcStatusToError(wc->status, &what);

    if (wc->status == IBV_WC_WR_FLUSH_ERR &&
        (vrmChannelLogicallyDone(ch) || ch->peerGone))
        return 0;
    if (vrmRdmaQPPortDown(ch->qp)) {
        vrmChannelReportPortDown(ch);
        return -1;
    }
    if (wid && wid->kind == VRM_WR_RECV &&
        (wc->status == IBV_WC_LOC_LEN_ERR || wc->status == IBV_WC_LOC_QP_OP_ERR)) {
        /* a receive fails only when the peer sent more than a control
         * message may hold: our buffers are the provider's own, all
         * of VRM_CONTROL_MESSAGE_MAX bytes. The verbs name it
         * LOC_LEN_ERR; rxe completes it with LOC_QP_OP_ERR (its copy
         * into the buffer fails as a malformed request), which the
         * sandbox showed (issue 13 item 12) */
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("channel %1$u: the peer sent a control message larger than %2$d bytes"),
                       ch->cfg.index, VRM_CONTROL_MESSAGE_MAX);
        return -1;
    }
    if (wc->status == IBV_WC_WR_FLUSH_ERR || wc->status == IBV_WC_LOC_QP_OP_ERR ||
        wc->status == IBV_WC_REM_ACCESS_ERR) {
        /* what a lost peer or link looks like before it is known:
         * vrmChannelRound() names the cause within the grace */
        if (!ch->wcFailedUs) {
            ch->wcFailedUs = g_get_monotonic_time();
            ch->wcFailed = wc->status;
            if (wid && wid->kind == VRM_WR_SEND)
                ch->wcFailedWr = vrmChannelDescribeSend(ch, vrm_container_of(wid, vrmSendSlot, id));
        }
        return 0;
    }
    if (wid && wid->kind == VRM_WR_SEND) {
        g_autofree char *wr = vrmChannelDescribeSend(ch, vrm_container_of(wid, vrmSendSlot, id));

        vrmChannelReportFailedWR(ch, code, what, wr);
    } else {
        vrmChannelReportFailedWR(ch, code, what, NULL);
    }
    return -1;
}

/* A send completed: it retires every work request up to it (UCX) */
static void
vrmChannelSendDone(vrmChannel *ch, vrmSendSlot *slot)
{
    guint64 seq;

    for (seq = ch->retiredSeq; seq <= slot->seq; seq++) {
        vrmSendSlot *done = &ch->sslots[seq % ch->sqSize];

        ch->retiredVerbs += done->nverbs;
        if (done->stage >= 0) {
            g_assert(ch->stageUsed > 0);
            ch->stageUsed--;
        }
    }
    ch->retiredSeq = slot->seq + 1;
    if (ch->keepaliveSeq && ch->retiredSeq >= ch->keepaliveSeq)
        ch->keepaliveSeq = 0;
}

/* A receive completed: a control message, or a chunk announced by
 * immediate data; its buffer goes back on the queue */
static int
vrmChannelRecvDone(vrmChannel *ch, const struct ibv_wc *wc, vrmRecvSlot *slot,
                   guint32 *nrepost)
{
    const guint8 *buf = ch->ctlRecv + (size_t)slot->index * VRM_CONTROL_MESSAGE_MAX;

    g_assert(ch->recvPosted > 0);
    ch->recvPosted--;
    ch->repost[(*nrepost)++] = slot->index;
    if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        vrmTransferArrival a;

        if (!ch->mode->rxImmediate || ch->rx != VRM_CHANNEL_RX_STREAM) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("channel %1$u: unexpected RDMA write with immediate data"),
                           ch->cfg.index);
            return -1;
        }
        ch->mode->rxImmediate(ntohl(wc->imm_data), &a);
        return vrmChannelChunkArrived(ch, &a);
    }
    if (wc->opcode != IBV_WC_RECV) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("channel %1$u: unexpected receive completion opcode %2$d"),
                       ch->cfg.index, wc->opcode);
        return -1;
    }
    return vrmChannelHandleMessage(ch, buf, wc->byte_len);
}

static int
vrmChannelHandleWC(vrmChannel *ch, struct ibv_wc *wc, guint32 *nrepost)
{
    vrmWorkId *wid = (vrmWorkId *)(uintptr_t)wc->wr_id;

    if (wc->status != IBV_WC_SUCCESS)
        return vrmChannelFailedWC(ch, wc);
    if (wid->kind == VRM_WR_SEND) {
        vrmChannelSendDone(ch, vrm_container_of(wid, vrmSendSlot, id));
        return 0;
    }
    return vrmChannelRecvDone(ch, wc, vrm_container_of(wid, vrmRecvSlot, id), nrepost);
}

static int
vrmChannelPollCQ(vrmChannel *ch, bool *progress)
{
    struct ibv_wc wc[VRM_CHANNEL_WC_BATCH];
    guint32 nrepost = 0;
    int ret = 0;

    while (ret == 0) {
        int n = vrmRdmaQPPoll(ch->qp, VRM_CHANNEL_WC_BATCH, wc);
        int i;

        vrmStatsAdd(&ch->stats, VRM_STAT_CQ_POLLS, 1);
        if (n < 0) {
            ret = -1;
            break;
        }
        if (n == 0) {
            vrmStatsAdd(&ch->stats, VRM_STAT_CQ_IDLE_POLLS, 1);
            break;
        }
        vrmStatsAdd(&ch->stats, VRM_STAT_COMPLETIONS, n);
        ch->lastActivity = g_get_monotonic_time();
        if (ch->host.jobHeard)
            __atomic_store_n(ch->host.jobHeard, ch->lastActivity, __ATOMIC_RELAXED);
        *progress = true;
        for (i = 0; i < n && ret == 0; i++)
            ret = vrmChannelHandleWC(ch, &wc[i], &nrepost);
    }
    if (ret == 0 && nrepost && !vrmChannelLogicallyDone(ch))
        ret = vrmChannelPostRecvs(ch, ch->repost, nrepost);
    return ret;
}

/* ------------------------------------------------------------------ */
/* One round, and the progress thread                                  */

/* The mailbox: a socket, announcements, the owner's verdict, the peer
 * gone, the stop. -1 failed (reported), VRM_CHANNEL_STOPPED, or 0. */
static int
vrmChannelMailbox(vrmChannel *ch)
{
    guint64 junk;
    bool stop;
    int fd, verdict, qemuPid;
    guint32 i, n;

    /* only when it woke us: a read per round would be a syscall for
     * nothing in most rounds (bench-native counted 9-33 per MiB) */
    if (ch->wakeSignalled) {
        ch->wakeSignalled = false;
        if (read(ch->wakefd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
            VRM_DEBUG("channel %u: eventfd read: %s", ch->cfg.index, g_strerror(errno));
    }
    g_mutex_lock(&ch->lock);
    fd = ch->mbFd;
    ch->mbFd = -1;
    if (fd >= 0 && ch->mbTcpOpenSet) {
        ch->tcpOpen = ch->mbTcpOpen;
        ch->tcpOpenSet = true;
    }
    stop = ch->mbStop;
    ch->peerGone = ch->mbPeerGone;
    verdict = ch->mbVerdict;
    qemuPid = ch->mbQemuPid;
    ch->mbVerdict = 0;
    n = ch->mbNannounce;
    for (i = 0; i < n && ch->nannounce < G_N_ELEMENTS(ch->announce); i++)
        ch->announce[ch->nannounce++] = ch->mbAnnounce[i];
    ch->mbNannounce = 0;
    g_mutex_unlock(&ch->lock);
    if (fd >= 0) {
        g_assert(ch->sock < 0);
        ch->sock = fd;
        VRM_DEBUG("channel %u: socket attached", ch->cfg.index);
    }
    if (stop)
        return VRM_CHANNEL_STOPPED;
    if (n && ch->tx > VRM_CHANNEL_TX_STREAM) {
        vrmChannelReportLateConnection(ch->announce[0]);
        return -1;
    }
    if (verdict && ch->end == VRM_CHANNEL_END_ASKED) {
        if (verdict == 2) {
            /* a crash reads as an end of file (issue 13 item 11); QEMU
             * outlives its migration streams, so one gone when a stream
             * ended had crashed */
            vrmChannelSignal(ch, &ch->ev.qemuGone);
            if (ch->cfg.domainUUID)
                vrmReportError(VRM_ERR_PEER, _("QEMU (pid %1$d) of domain %2$s exited mid-stream"),
                               qemuPid, ch->cfg.domainUUID);
            else
                vrmReportError(VRM_ERR_PEER, _("QEMU (pid %1$d) exited mid-stream"),
                               qemuPid);
            return -1;
        }
        ch->end = VRM_CHANNEL_END_CLEARED;
        if (ch->endErr)
            return vrmChannelSocketError(ch, ch->endErr, ch->endReading);
    }
    return 0;
}

/* A silent peer is probed: the probe's completion, or its failure once the
 * transport retries are exhausted, tells whether it lives. Without it a
 * writer waiting for credits would never notice a cut link. */
static int
vrmChannelKeepalive(vrmChannel *ch, gint64 now)
{
    /* nothing before the authentication and our description */
    if (ch->tx < VRM_CHANNEL_TX_WAIT_OPEN || ch->keepaliveSeq ||
        vrmChannelSqFree(ch) == 0 || now - ch->lastActivity <= VRM_CHANNEL_KEEPALIVE_US)
        return 0;
    if (vrmChannelPostPair(ch, VRM_MSG_KEEPALIVE, 0, true) < 0)
        return -1;
    ch->keepaliveSeq = ch->postSeq;
    VRM_DEBUG("channel %u: KEEPALIVE posted (seq %" G_GUINT64_FORMAT ", retired %"
              G_GUINT64_FORMAT ")", ch->cfg.index, ch->postSeq - 1, ch->retiredSeq);
    return 0;
}

/* One round; see vrmChannelStep(), which tells an unauthenticated peer
 * from a failure */
static int
vrmChannelRound(vrmChannel *ch, bool *progress)
{
    gint64 now;
    int rc;

    if ((rc = vrmChannelMailbox(ch)) != 0)
        return rc;
    if (vrmChannelPollCQ(ch, progress) < 0 ||
        vrmChannelPumpRx(ch, progress) < 0 ||
        vrmChannelPumpControl(ch, progress) < 0 ||
        vrmChannelPumpTx(ch, progress) < 0)
        return -1;
    if (vrmChannelLogicallyDone(ch) || *progress)
        return 0;
    now = g_get_monotonic_time();
    if (ch->rx == VRM_CHANNEL_RX_AUTH && now - ch->attachedUs > VRM_CHANNEL_AUTH_TIMEOUT_US) {
        vrmReportError(VRM_ERR_AUTH,
                       _("channel %1$u: the peer sent no AUTH within %2$d seconds"),
                       ch->cfg.index, VRM_CHANNEL_AUTH_TIMEOUT_US / 1000000);
        return -1;
    }
    if (ch->peerGone) {
        vrmReportError(VRM_ERR_PEER,
                       _("the peer closed channel %1$u before the end of the stream"),
                       ch->cfg.index);
        return -1;
    }
    if (ch->wcFailedUs && vrmRdmaQPPortDown(ch->qp)) {
        vrmChannelReportPortDown(ch);
        return -1;
    }
    if (ch->wcFailedUs && now - ch->wcFailedUs > VRM_CHANNEL_FAILED_GRACE_US) {
        const char *what;
        int code = vrmRdmaWcStatusToError(ch->wcFailed, &what);

        vrmChannelReportFailedWR(ch, code, what, ch->wcFailedWr);
        return -1;
    }
    if (vrmChannelKeepalive(ch, now) < 0)
        return -1;
    /* The transport's own retry timer is not enough: Soft-RoCE was seen
     * retrying forever towards a peer whose link went down. Signaled work
     * that stays unanswered, on this channel and on every other of the
     * job, means the peer is gone. */
    if (ch->lastSignaled > ch->retiredSeq) {
        gint64 heard = ch->lastActivity;

        if (ch->host.jobHeard)
            heard = MAX(heard, __atomic_load_n(ch->host.jobHeard, __ATOMIC_RELAXED));
        if (now - heard > VRM_CHANNEL_PEER_TIMEOUT_US) {
            vrmReportError(VRM_ERR_PEER,
                           _("channel %1$u: the peer stopped answering (no completion for %2$d seconds)"),
                           ch->cfg.index, VRM_CHANNEL_PEER_TIMEOUT_US / 1000000);
            return -1;
        }
        if (now - ch->lastActivity > VRM_CHANNEL_STALL_TIMEOUT_US) {
            vrmReportError(VRM_ERR_PEER,
                           _("channel %1$u: the peer stopped answering on this channel (no completion for %2$d seconds, while the job's other channels completed work)"),
                           ch->cfg.index, VRM_CHANNEL_STALL_TIMEOUT_US / 1000000);
            return -1;
        }
    }
    return 0;
}

int
vrmChannelStep(vrmChannel *ch, bool *progress)
{
    int rc = vrmChannelRound(ch, progress);

    /* Until the destination has proved itself, whatever goes wrong (a bad
     * AUTH, anything else, garbage, silence, a disconnect) is a peer that
     * did not authenticate: the source listens again, the job goes on. */
    if (rc < 0 && ch->rx == VRM_CHANNEL_RX_AUTH) {
        ch->unauthenticated = true;
        return VRM_CHANNEL_UNAUTHENTICATED;
    }
    return rc;
}

bool
vrmChannelFinished(const vrmChannel *ch)
{
    return vrmChannelLogicallyDone(ch) && ch->retiredSeq == ch->postSeq;
}

/* On the way out after a failure: tell the peer why, bounded */
static void
vrmChannelSendError(vrmChannel *ch, int code, const char *reason)
{
    gint64 until = g_get_monotonic_time() + VRM_CHANNEL_STOP_WAIT_US;
    guint64 want;
    size_t len;

    /* an unauthenticated peer hears nothing from us, not even why */
    if (code == VRM_ERR_PEER || ch->peerGone || !ch->qp || vrmChannelSqFree(ch) == 0 ||
        ch->rx == VRM_CHANNEL_RX_AUTH)
        return;
    len = vrmProtoBuildError(vrmChannelCtlBuf(ch, 0), code, reason);
    if (vrmChannelPostCtl(ch, len, true) < 0)
        return;
    want = ch->postSeq;
    while (ch->retiredSeq < want && g_get_monotonic_time() < until) {
        struct ibv_wc wc[VRM_CHANNEL_WC_BATCH];
        int n = vrmRdmaQPPoll(ch->qp, VRM_CHANNEL_WC_BATCH, wc);
        int i;

        if (n < 0)
            break;
        for (i = 0; i < n; i++) {
            vrmWorkId *wid = (vrmWorkId *)(uintptr_t)wc[i].wr_id;

            if (wc[i].status != IBV_WC_SUCCESS)
                return;
            if (wid->kind == VRM_WR_SEND)
                ch->retiredSeq = vrm_container_of(wid, vrmSendSlot, id)->seq + 1;
        }
        if (n == 0)
            g_usleep(1000);
    }
}

static void
vrmChannelFailed(vrmChannel *ch)
{
    int code = vrmGetLastErrorCode();
    g_autofree char *reason = g_strdup(vrmGetLastErrorMessage());

    if (ch->host.fail)
        ch->host.fail(ch->host.opaque, code ? code : VRM_ERR_INTERNAL, reason);
    vrmChannelSendError(ch, code ? code : VRM_ERR_INTERNAL, reason);
}

/* Block until a completion, a wake-up or the socket (as far as it matters) */
static int
vrmChannelWait(vrmChannel *ch)
{
    struct pollfd fds[3];
    int nfds = 0;
    bool progress = false;

    /* arm, look once more, then block */
    if (vrmRdmaQPArm(ch->qp) < 0 || vrmChannelPollCQ(ch, &progress) < 0)
        return -1;
    if (progress)
        return 0;
    fds[nfds++] = (struct pollfd) { .fd = ch->qp->eventFd, .events = POLLIN };
    fds[nfds++] = (struct pollfd) { .fd = ch->wakefd, .events = POLLIN };
    if (ch->sock >= 0) {
        short ev = 0;

        if (vrmChannelTxCanWrite(ch))
            ev |= POLLIN;
        if (ch->rxBlocked)
            ev |= POLLOUT;
        if (ev)
            fds[nfds++] = (struct pollfd) { .fd = ch->sock, .events = ev };
    }
    if (poll(fds, nfds, vrmChannelAwaitsReader(ch) ? VRM_CHANNEL_TAKEN_POLL_MS :
             VRM_CHANNEL_POLL_MS) < 0 && errno != EINTR) {
        vrmReportSystemError(errno, _("poll failed on channel %1$u"), ch->cfg.index);
        return -1;
    }
    if (fds[0].revents && vrmRdmaQPTakeEvents(ch->qp) < 0)
        return -1;
    if (fds[1].revents)
        ch->wakeSignalled = true;
    if (nfds > 2 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)))
        ch->rxBlocked = false;
    return 0;
}

static gpointer
vrmChannelThread(gpointer opaque)
{
    vrmChannel *ch = opaque;

    ch->lastActivity = g_get_monotonic_time();
    if (vrmRdmaQPArm(ch->qp) < 0) {
        vrmChannelFailed(ch);
        goto out;
    }
    for (;;) {
        bool progress = false;
        int rc = vrmChannelStep(ch, &progress);

        if (rc == VRM_CHANNEL_UNAUTHENTICATED) {
            /* not a failure of the job: the owner listens again; the
             * impostor learns nothing, not even an ERROR */
            VRM_DEBUG("channel %u: %s", ch->cfg.index, vrmGetLastErrorMessage());
            vrmChannelSignal(ch, &ch->ev.authFailed);
            break;
        }
        if (rc == VRM_CHANNEL_STOPPED) {
            g_autofree char *reason = NULL;
            int code;

            g_mutex_lock(&ch->lock);
            code = ch->mbCode;
            reason = g_strdup(ch->mbReason);
            g_mutex_unlock(&ch->lock);
            vrmChannelSendError(ch, code, reason);
            break;
        }
        if (rc < 0) {
            vrmChannelFailed(ch);
            break;
        }
        if (vrmChannelLogicallyDone(ch)) {
            gint64 now = g_get_monotonic_time();

            if (!ch->doneSince)
                ch->doneSince = now;
            /* wait for the last signaled sends, but not forever */
            if (ch->retiredSeq == ch->postSeq || ch->peerGone ||
                now - ch->doneSince > VRM_CHANNEL_END_WAIT_US) {
                if (vrmChannelCloseMailbox(ch) < 0) {
                    vrmChannelFailed(ch);
                    break;
                }
                VRM_INFO("channel %u ended: %" G_GUINT64_FORMAT " bytes sent, %"
                         G_GUINT64_FORMAT " received", ch->cfg.index, ch->txTotal,
                         ch->rxf.bytes);
                vrmChannelSignal(ch, &ch->ev.done);
                break;
            }
        }
        if (progress)
            continue;
        if (vrmChannelWait(ch) < 0) {
            vrmChannelFailed(ch);
            break;
        }
    }

 out:
    if (ch->sock >= 0) {
        close(ch->sock);
        ch->sock = -1;
    }
    vrmChannelSignal(ch, &ch->ev.exited);
    return NULL;
}

int
vrmChannelStart(vrmChannel *ch)
{
    g_autofree char *name = g_strdup_printf("vrm-ch%u", ch->cfg.index);
    g_autoptr(GError) err = NULL;

    if (!(ch->thread = g_thread_try_new(name, vrmChannelThread, ch, &err))) {
        vrmReportError(VRM_ERR_SYSTEM, _("cannot start the thread of channel %1$u: %2$s"),
                       ch->cfg.index, err->message);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Observation                                                         */

guint32
vrmChannelIndex(const vrmChannel *ch)
{
    return ch->cfg.index;
}

guint32
vrmChannelCaps(const vrmChannel *ch)
{
    return ch->caps;
}

vrmChannelTx
vrmChannelTxState(const vrmChannel *ch)
{
    return ch->tx;
}

vrmChannelRx
vrmChannelRxState(const vrmChannel *ch)
{
    return ch->rx;
}

void
vrmChannelStats(const vrmChannel *ch, vrmStats *snap, gint64 *first, gint64 *last)
{
    vrmStatsSnapshot(&ch->stats, snap);
    *first = __atomic_load_n(&ch->firstByteUs, __ATOMIC_RELAXED);
    *last = __atomic_load_n(&ch->lastByteUs, __ATOMIC_RELAXED);
}

int
vrmChannelCheckInvariants(const vrmChannel *ch)
{
    const char *broken = NULL;

    if (ch->txf.depth && ch->txf.inflight > ch->txf.depth)
        broken = "credits in flight above the peer's ring depth";
    else if (ch->rxf.filled + ch->rxf.held + ch->rxf.uncredited > ch->rxf.depth)
        broken = "our ring filled above its depth";
    else if (ch->postSeq - ch->retiredSeq > ch->sqSize)
        broken = "send queue above its size";
    else if (ch->recvPosted > ch->rqSize)
        broken = "receive queue above its size";
    else if (ch->stageUsed > ch->stage.depth)
        broken = "staging ring above its depth";
    else if (ch->nRegRes > ch->ring.depth)
        broken = "registration results above the ring depth";
    else if (ch->remote.depth && ch->remote.queued > ch->remote.depth)
        broken = "registration requests above the peer's ring depth";
    if (broken) {
        vrmReportError(VRM_ERR_INTERNAL, _("channel %1$u: invariant broken: %2$s"),
                       ch->cfg.index, broken);
        return -1;
    }
    return 0;
}
