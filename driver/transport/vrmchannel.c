/*
 * vrmchannel.c: one channel = one QEMU connection <-> one RC QP
 *
 * The progress thread of a channel moves bytes both ways:
 *   socket -> staging chunk -> RDMA WRITE(_WITH_IMM) -> peer's ring
 *   our ring -> socket, credits back with READY
 * and runs the control protocol of docs/protocol.rst on the same QP.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "vrmtransportpriv.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

#define VRM_CHANNEL_POLL_MS 100         /* longest block without a look at the mailbox */
#define VRM_CHANNEL_STOP_WAIT_US (1000 * 1000)   /* ERROR delivery on the way out */
#define VRM_CHANNEL_END_WAIT_US (2000 * 1000)    /* last completions at a clean end */
#define VRM_CHANNEL_CTL_RESERVE 8       /* send slots kept for control messages */
#define VRM_CHANNEL_BATCH_MAX 255       /* chunks per post (one DATA message) */
#define VRM_CHANNEL_REG_WINDOW 4        /* dynamic: chunks registered ahead */
#define VRM_CHANNEL_WC_BATCH 32
#define VRM_CHANNEL_KEEPALIVE_US (1000 * 1000) /* probe a silent peer after 1 s */
#define VRM_CHANNEL_PEER_TIMEOUT_US (5 * 1000 * 1000) /* signaled work unanswered */

#define vrm_container_of(ptr, type, member) \
    ((type *)((char *)(ptr) - offsetof(type, member)))

/* ------------------------------------------------------------------ */
/* Set-up and teardown (main thread)                                   */

static int
vrmRingAlloc(vrmRing *ring, guint32 depth, guint32 chunk)
{
    size_t len = (size_t)depth * chunk;
    int rc;

    ring->depth = depth;
    ring->chunk = chunk;
    if ((rc = posix_memalign((void **)&ring->mem, 4096, len)) != 0) {
        ring->mem = NULL;
        vrmReportSystemError(rc, _("Cannot allocate a ring of %1$zu bytes"), len);
        return -1;
    }
    memset(ring->mem, 0, len);
    ring->mrs = g_new0(struct ibv_mr *, depth);
    return 0;
}

/* pinned_bytes keeps the peak: registrations are not subtracted here */
static void
vrmRingClear(vrmRing *ring)
{
    guint32 i;

    vrmRdmaDeregister(ring->whole);
    for (i = 0; ring->mrs && i < ring->depth; i++)
        vrmRdmaDeregister(ring->mrs[i]);
    g_free(ring->mrs);
    free(ring->mem);
    memset(ring, 0, sizeof(*ring));
}

static int
vrmRingRegisterChunk(vrmChannel *ch, vrmRing *ring, guint32 i, int access)
{
    guint64 us = 0;

    if (ring->whole || ring->mrs[i])
        return 0;
    if (!(ring->mrs[i] = vrmRdmaRegister(ch->dev, ring->mem + (size_t)i * ring->chunk,
                                         ring->chunk, access, &us)))
        return -1;
    vrmStatsAdd(&ch->stats, VRM_STAT_REGISTRATIONS, 1);
    vrmStatsAdd(&ch->stats, VRM_STAT_REGISTRATION_US, us);
    vrmStatsAdd(&ch->stats, VRM_STAT_PINNED_BYTES, ring->chunk);
    return 0;
}

static int
vrmRingRegisterAll(vrmChannel *ch, vrmRing *ring, int access)
{
    guint64 us = 0;
    size_t len = (size_t)ring->depth * ring->chunk;

    if (!(ring->whole = vrmRdmaRegister(ch->dev, ring->mem, len, access, &us)))
        return -1;
    vrmStatsAdd(&ch->stats, VRM_STAT_REGISTRATIONS, 1);
    vrmStatsAdd(&ch->stats, VRM_STAT_REGISTRATION_US, us);
    vrmStatsAdd(&ch->stats, VRM_STAT_PINNED_BYTES, len);
    return 0;
}

static inline struct ibv_mr *
vrmRingMR(const vrmRing *ring, guint32 i)
{
    return ring->whole ? ring->whole : ring->mrs[i];
}

vrmChannel *
vrmChannelNew(vrmEngine *engine, guint32 index)
{
    vrmChannel *ch = g_new0(vrmChannel, 1);

    ch->engine = engine;
    ch->index = index;
    ch->sock = -1;
    ch->mb_fd = -1;
    ch->wakefd = -1;
    return ch;
}

void
vrmChannelWake(vrmChannel *ch)
{
    guint64 one = 1;

    if (ch->wakefd >= 0 && write(ch->wakefd, &one, sizeof(one)) < 0 &&
        errno != EAGAIN)
        VRM_WARN("cannot wake channel %u: %s", ch->index, g_strerror(errno));
}

int
vrmChannelSetup(vrmChannel *ch, vrmRdmaDevice *dev)
{
    const vrmEngineSettings *s = &ch->engine->s;
    guint32 depth = s->ringDepth;
    guint32 min_sq = depth + 2 + VRM_CHANNEL_CTL_RESERVE;
    int access = IBV_ACCESS_LOCAL_WRITE;
    int cqe;

    if (ch->cq)
        return 0;       /* already set up (destination retry) */
    ch->dev = dev;
    ch->sq_size = vrmRdmaClamp(VRM_SEND_SLOTS(depth), dev->attr.max_qp_wr,
                               "send queue");
    ch->rq_size = vrmRdmaClamp(VRM_RECV_SLOTS(depth), dev->attr.max_qp_wr,
                               "receive queue");
    if (ch->sq_size < min_sq || ch->rq_size < VRM_RECV_SLOTS(depth)) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("Device %1$s allows %2$d work requests per queue, a ring depth of %3$u needs %4$u."),
                       dev->name, dev->attr.max_qp_wr, depth, VRM_RECV_SLOTS(depth));
        return -1;
    }
    ch->sig_interval = MAX(1, ch->sq_size / 4);
    cqe = vrmRdmaClamp(ch->sq_size + ch->rq_size + 1, dev->attr.max_cqe,
                       "completion queue");
    if ((guint32)cqe < ch->sq_size + ch->rq_size) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("Device %1$s allows %2$d completion queue entries, %3$u are needed."),
                       dev->name, dev->attr.max_cqe, ch->sq_size + ch->rq_size);
        return -1;
    }
    if (!(ch->cq = vrmRdmaCQNew(dev, cqe, ch)))
        return -1;

    if ((ch->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        vrmReportSystemError(errno, _("Cannot create an eventfd"));
        return -1;
    }

    ch->sslots = g_new0(vrmSendSlot, ch->sq_size);
    ch->rslots = g_new0(vrmRecvSlot, ch->rq_size);
    ch->wrs = g_new0(struct ibv_send_wr, ch->sq_size);
    ch->sges = g_new0(struct ibv_sge, ch->sq_size);
    ch->rwrs = g_new0(struct ibv_recv_wr, ch->rq_size);
    ch->rsges = g_new0(struct ibv_sge, ch->rq_size);
    ch->dents = g_new0(vrmProtoDataEntry, VRM_CHANNEL_BATCH_MAX);
    ch->reg_res = g_new0(vrmProtoRegResult, depth);
    ch->rx_len = g_new0(guint32, depth);
    ch->rx_regd = g_new0(guint8, depth);

    if (vrmRingAlloc(&ch->rx, depth, s->chunkSize) < 0 ||
        vrmRingAlloc(&ch->stage, depth, s->chunkSize) < 0)
        return -1;
    ch->ctl_send = g_malloc0((size_t)ch->sq_size * VRM_CONTROL_MESSAGE_MAX);
    ch->ctl_recv = g_malloc0((size_t)ch->rq_size * VRM_CONTROL_MESSAGE_MAX);
    if (!(ch->ctl_send_mr = vrmRdmaRegister(dev, ch->ctl_send,
                                            (size_t)ch->sq_size * VRM_CONTROL_MESSAGE_MAX,
                                            access, NULL)) ||
        !(ch->ctl_recv_mr = vrmRdmaRegister(dev, ch->ctl_recv,
                                            (size_t)ch->rq_size * VRM_CONTROL_MESSAGE_MAX,
                                            access, NULL)))
        return -1;
    vrmStatsAdd(&ch->stats, VRM_STAT_PINNED_BYTES,
                (guint64)(ch->sq_size + ch->rq_size) * VRM_CONTROL_MESSAGE_MAX);

    /* Pin-all is decided by the local setting here; the agreed set can only
     * be smaller, and an unused registration is harmless. */
    if (s->pinAll) {
        if (vrmRingRegisterAll(ch, &ch->rx, access | IBV_ACCESS_REMOTE_WRITE) < 0 ||
            vrmRingRegisterAll(ch, &ch->stage, access) < 0)
            return -1;
    }
    return 0;
}

static int
vrmChannelPostRecvs(vrmChannel *ch, const guint32 *which, guint32 n)
{
    struct ibv_recv_wr *bad = NULL;
    guint32 i;
    int rc;

    if (n == 0)
        return 0;
    for (i = 0; i < n; i++) {
        vrmRecvSlot *slot = &ch->rslots[which[i]];
        slot->id.kind = VRM_WR_RECV;
        slot->index = which[i];
        ch->rsges[i] = (struct ibv_sge) {
            .addr = (uintptr_t)(ch->ctl_recv + (size_t)which[i] * VRM_CONTROL_MESSAGE_MAX),
            .length = VRM_CONTROL_MESSAGE_MAX,
            .lkey = ch->ctl_recv_mr->lkey,
        };
        ch->rwrs[i] = (struct ibv_recv_wr) {
            .wr_id = (uintptr_t)&slot->id,
            .next = i + 1 < n ? &ch->rwrs[i + 1] : NULL,
            .sg_list = &ch->rsges[i],
            .num_sge = 1,
        };
    }
    if ((rc = ibv_post_recv(ch->id->qp, ch->rwrs, &bad)) != 0) {
        vrmReportSystemError(rc, _("Cannot post receive buffers on channel %1$u"),
                             ch->index);
        return -1;
    }
    vrmStatsAdd(&ch->stats, VRM_STAT_DOORBELLS, 1);
    return 0;
}

int
vrmChannelCreateQP(vrmChannel *ch)
{
    struct ibv_qp_init_attr attr = {
        .qp_context = ch,
        .send_cq = ch->cq->cq,
        .recv_cq = ch->cq->cq,
        .cap = {
            .max_send_wr = ch->sq_size,
            .max_recv_wr = ch->rq_size,
            .max_send_sge = 1,
            .max_recv_sge = 1,
        },
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
    };
    g_autofree guint32 *all = g_new(guint32, ch->rq_size);
    struct ibv_wc wc[VRM_CHANNEL_WC_BATCH];
    guint32 i;

    /* Completions flushed from a QP of an earlier connect attempt */
    while (ibv_poll_cq(ch->cq->cq, VRM_CHANNEL_WC_BATCH, wc) > 0)
        ;
    if (rdma_create_qp(ch->id, ch->dev->pd, &attr) < 0) {
        vrmReportSystemError(errno, _("Cannot create the queue pair of channel %1$u"),
                             ch->index);
        return -1;
    }
    for (i = 0; i < ch->rq_size; i++)
        all[i] = i;
    return vrmChannelPostRecvs(ch, all, ch->rq_size);
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
    if (ch->mb_fd >= 0)
        close(ch->mb_fd);
    if (ch->id) {
        if (ch->id->qp)
            rdma_destroy_qp(ch->id);
        if (rdma_destroy_id(ch->id) < 0)
            VRM_WARN("rdma_destroy_id on channel %u failed: %s", ch->index,
                     g_strerror(errno));
    }
    vrmRdmaCQFree(ch->cq);
    vrmRingClear(&ch->rx);
    vrmRingClear(&ch->stage);
    vrmRdmaDeregister(ch->ctl_send_mr);
    vrmRdmaDeregister(ch->ctl_recv_mr);
    g_free(ch->ctl_send);
    g_free(ch->ctl_recv);
    g_free(ch->sslots);
    g_free(ch->rslots);
    g_free(ch->wrs);
    g_free(ch->sges);
    g_free(ch->rwrs);
    g_free(ch->rsges);
    g_free(ch->dents);
    g_free(ch->reg_res);
    g_free(ch->rx_len);
    vrmRemoteRingClear(&ch->remote);
    if (ch->wakefd >= 0)
        close(ch->wakefd);
    g_free(ch->rx_regd);
    g_free(ch);
}

/* ------------------------------------------------------------------ */
/* Send side (progress thread)                                         */

static inline guint32
vrmChannelSqFree(const vrmChannel *ch)
{
    return ch->sq_size - (guint32)(ch->post_seq - ch->retired_seq);
}

static inline guint8 *
vrmChannelCtlBuf(vrmChannel *ch, guint32 i)
{
    return ch->ctl_send + (size_t)((ch->post_seq + i) % ch->sq_size) *
           VRM_CONTROL_MESSAGE_MAX;
}

/* Prepare WR number i of the batch starting at post_seq */
static void
vrmChannelPrepWR(vrmChannel *ch, guint32 i, gint32 stage)
{
    guint64 seq = ch->post_seq + i;
    vrmSendSlot *slot = &ch->sslots[seq % ch->sq_size];

    slot->id.kind = VRM_WR_SEND;
    slot->seq = seq;
    slot->stage = stage;
    ch->wrs[i].wr_id = (uintptr_t)&slot->id;
    ch->wrs[i].sg_list = &ch->sges[i];
    ch->wrs[i].num_sge = 1;
    ch->wrs[i].send_flags = 0;
    ch->wrs[i].next = NULL;
    if (i > 0)
        ch->wrs[i - 1].next = &ch->wrs[i];
}

static void
vrmChannelPrepSend(vrmChannel *ch, guint32 i, size_t len)
{
    vrmChannelPrepWR(ch, i, -1);
    ch->sges[i] = (struct ibv_sge) {
        .addr = (uintptr_t)vrmChannelCtlBuf(ch, i),
        .length = len,
        .lkey = ch->ctl_send_mr->lkey,
    };
    ch->wrs[i].opcode = IBV_WR_SEND;
}

/* Selective signaling, then one doorbell for the whole batch */
static int
vrmChannelPostBatch(vrmChannel *ch, guint32 n, bool force_last)
{
    struct ibv_send_wr *bad = NULL;
    guint32 i;
    int rc;

    if (n == 0)
        return 0;
    for (i = 0; i < n; i++) {
        guint64 seq = ch->post_seq + i;
        bool last = i == n - 1;
        bool sig = seq + 1 - ch->last_signaled >= ch->sig_interval;

        if (last && (force_last ||
                     ch->stage_used == ch->stage.depth ||
                     vrmChannelSqFree(ch) - n < ch->sig_interval))
            sig = true;
        if (sig) {
            ch->wrs[i].send_flags |= IBV_SEND_SIGNALED;
            ch->last_signaled = seq + 1;
        }
    }
    if ((rc = ibv_post_send(ch->id->qp, ch->wrs, &bad)) != 0) {
        vrmReportSystemError(rc, _("Cannot post work requests on channel %1$u"),
                             ch->index);
        return -1;
    }
    ch->post_seq += n;
    vrmStatsAdd(&ch->stats, VRM_STAT_DOORBELLS, 1);
    return 0;
}

static int
vrmChannelPostCtl(vrmChannel *ch, size_t len, bool signal)
{
    if (vrmChannelSqFree(ch) < 1) {
        vrmReportError(VRM_ERR_INTERNAL,
                       _("The send queue of channel %1$u is full."), ch->index);
        return -1;
    }
    vrmChannelPrepSend(ch, 0, len);
    vrmStatsAdd(&ch->stats, VRM_STAT_CONTROL_SENT, 1);
    return vrmChannelPostBatch(ch, 1, signal);
}

/* Everything except data WRITEs: in protocol order, while there is room */
static int
vrmChannelPumpControl(vrmChannel *ch, bool *progress)
{
    const vrmEngineSettings *s = &ch->engine->s;

#define ROOM() (vrmChannelSqFree(ch) > 0)

    while (!ch->desc_sent && ROOM()) {
        vrmProtoRingEntry ents[170];
        guint32 n = 0, max = vrmProtoMaxEntries(VRM_MSG_RAM_BLOCKS);
        size_t len;

        G_STATIC_ASSERT(G_N_ELEMENTS(ents) * 24 <= VRM_PROTO_PAYLOAD_MAX);
        max = MIN(max, G_N_ELEMENTS(ents));
        while (n < max && ch->desc_next < ch->rx.depth) {
            guint32 i = ch->desc_next++;
            struct ibv_mr *mr = vrmRingMR(&ch->rx, i);
            ents[n++] = (vrmProtoRingEntry) {
                .index = i,
                .depth = ch->rx.depth,
                .length = ch->rx.chunk,
                .rkey = (ch->caps & VRM_CAP_PIN_ALL) && mr ? mr->rkey : 0,
                .addr = (uintptr_t)(ch->rx.mem + (size_t)i * ch->rx.chunk),
            };
        }
        len = vrmProtoBuildRing(vrmChannelCtlBuf(ch, 0), ents, n);
        if (vrmChannelPostCtl(ch, len, false) < 0)
            return -1;
        if (ch->desc_next == ch->rx.depth)
            ch->desc_sent = true;
        *progress = true;
    }
    if (!ch->desc_sent)
        return 0;

    if (s->role == VRM_ENGINE_ROLE_SOURCE && ch->opened && !ch->open_sent && ROOM()) {
        size_t len = vrmProtoBuildU32Pair(vrmChannelCtlBuf(ch, 0),
                                          VRM_MSG_CHANNEL_OPEN, ch->index, 0);
        if (vrmChannelPostCtl(ch, len, false) < 0)
            return -1;
        ch->open_sent = true;
        *progress = true;
        VRM_DEBUG("channel %u: CHANNEL_OPEN sent", ch->index);
    }
    if (ch->n_reg_res && ROOM()) {
        guint32 n = MIN(ch->n_reg_res, vrmProtoMaxEntries(VRM_MSG_REGISTER_RESULT));
        size_t len = vrmProtoBuildRegResult(vrmChannelCtlBuf(ch, 0), ch->reg_res, n);
        if (vrmChannelPostCtl(ch, len, false) < 0)
            return -1;
        memmove(ch->reg_res, ch->reg_res + n,
                (ch->n_reg_res - n) * sizeof(*ch->reg_res));
        ch->n_reg_res -= n;
        *progress = true;
    }
    if (ch->remote.queued && ROOM()) {
        g_autofree guint32 *idx = g_new(guint32, ch->remote.queued);
        guint32 n = vrmRemoteRingTakeRequests(&ch->remote, idx,
                                              vrmProtoMaxEntries(VRM_MSG_REGISTER_REQUEST));
        size_t len = vrmProtoBuildRegRequest(vrmChannelCtlBuf(ch, 0), idx, n);

        if (vrmChannelPostCtl(ch, len, false) < 0)
            return -1;
        *progress = true;
    }
    if (ch->credits_due && ROOM()) {
        size_t len = vrmProtoBuildU32Pair(vrmChannelCtlBuf(ch, 0), VRM_MSG_READY,
                                          ch->credits_due, 0);

        VRM_DEBUG("channel %u: sending READY %u (seq %" G_GUINT64_FORMAT ")",
                  ch->index, ch->credits_due, ch->post_seq);
        if (vrmChannelPostCtl(ch, len, false) < 0)
            return -1;
        ch->credits_due = 0;
        *progress = true;
    }
    if (ch->peer_eof && ch->rxf.filled == 0 && !ch->eof_ack_sent &&
        ch->sock >= 0 && ROOM()) {
        size_t len;

        if (shutdown(ch->sock, SHUT_WR) < 0 && errno != ENOTCONN)
            VRM_DEBUG("channel %u: shutdown: %s", ch->index, g_strerror(errno));
        len = vrmProtoBuildU64(vrmChannelCtlBuf(ch, 0), VRM_MSG_EOF_ACK,
                               ch->peer_total);
        if (vrmChannelPostCtl(ch, len, true) < 0)
            return -1;
        ch->eof_ack_sent = true;
        *progress = true;
        VRM_DEBUG("channel %u: EOF_ACK %" G_GUINT64_FORMAT " sent",
                  ch->index, ch->peer_total);
    }
    if (s->role == VRM_ENGINE_ROLE_SOURCE && !ch->opened && !ch->unused_sent &&
        ch->unused_wanted && ROOM()) {
        size_t len = vrmProtoBuildU32Pair(vrmChannelCtlBuf(ch, 0),
                                          VRM_MSG_CHANNEL_UNUSED, ch->index, 0);
        if (vrmChannelPostCtl(ch, len, true) < 0)
            return -1;
        ch->unused_sent = true;
        *progress = true;
    }
    if (s->fault == VRM_ENGINE_FAULT_MALFORMED && !ch->fault_done &&
        ch->tx_total >= s->faultBytes && ch->opened && ROOM()) {
        /* Test hook: a header that announces more bytes than it carries */
        guint8 *buf = vrmChannelCtlBuf(ch, 0);
        size_t len = vrmProtoBuildU32Pair(buf, VRM_MSG_READY, 1, 0);
        vrmProtoHeader bad = { .len = 100, .type = VRM_MSG_READY, .repeat = 1 };

        vrmProtoHeaderEncode(&bad, buf);
        VRM_WARN("test hook: sending a malformed control message on channel %u",
                 ch->index);
        if (vrmChannelPostCtl(ch, len, true) < 0)
            return -1;
        ch->fault_done = true;
    }
#undef ROOM
    return 0;
}

static void
vrmChannelNoteBytes(vrmChannel *ch)
{
    gint64 now = g_get_monotonic_time();

    if (!ch->first_byte_us)
        __atomic_store_n(&ch->first_byte_us, now, __ATOMIC_RELAXED);
    __atomic_store_n(&ch->last_byte_us, now, __ATOMIC_RELAXED);
}

static int
vrmChannelSocketError(vrmChannel *ch, int err, bool reading)
{
    if (reading)
        vrmReportSystemError(err, _("Channel %1$u: reading QEMU's socket failed"),
                             ch->index);
    else
        vrmReportSystemError(err,
                             _("Channel %1$u: QEMU's socket was closed while %2$" G_GUINT64_FORMAT " bytes were still to be delivered"),
                             ch->index,
                             ch->rxf.bytes - __atomic_load_n(&ch->stats.v[VRM_STAT_BYTES_RECEIVED],
                                                             __ATOMIC_RELAXED));
    return -1;
}

static bool
vrmChannelTxReady(const vrmChannel *ch)
{
    return ch->sock >= 0 && !ch->sock_eof && !ch->eof_sent &&
           vrmRemoteRingComplete(&ch->remote);
}

/* socket -> staging chunks -> RDMA WRITEs, one post per call */
static int
vrmChannelPumpTx(vrmChannel *ch, bool *progress)
{
    bool imm = ch->caps & VRM_CAP_WRITE_IMM;
    guint32 n = 0, nd = 0;

    if (!vrmChannelTxReady(ch))
        goto eof;

    while (n < VRM_CHANNEL_BATCH_MAX) {
        guint32 s = ch->stage_head;
        guint32 ridx;
        guint32 cap;
        ssize_t r;
        bool again = false;

        if (ch->stage_used == ch->stage.depth)
            break;
        if (vrmTxFlowCredits(&ch->txf) == 0) {
            if (!ch->stalled) {
                ch->stalled = true;
                vrmStatsAdd(&ch->stats, VRM_STAT_CREDIT_STALLS, 1);
            }
            break;
        }
        ridx = vrmTxFlowPeek(&ch->txf, 0);
        if (!(ch->caps & VRM_CAP_PIN_ALL) && !vrmRemoteRingUsable(&ch->remote, ridx)) {
            vrmRemoteRingQueueRequests(&ch->remote, &ch->txf, VRM_CHANNEL_REG_WINDOW,
                                       g_get_monotonic_time());
            break;
        }
        if (vrmChannelSqFree(ch) < n + 2 + VRM_CHANNEL_CTL_RESERVE)
            break;
        if (!ch->stage.whole &&
            vrmRingRegisterChunk(ch, &ch->stage, s, IBV_ACCESS_LOCAL_WRITE) < 0)
            return -1;

        cap = MIN(ch->stage.chunk, ch->remote.chunk);
        r = read(ch->sock, ch->stage.mem + (size_t)s * ch->stage.chunk + ch->stage_fill,
                 cap - ch->stage_fill);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return vrmChannelSocketError(ch, errno, true);
            again = true;
        } else if (r == 0) {
            ch->sock_eof = true;
            VRM_DEBUG("channel %u: socket EOF after %" G_GUINT64_FORMAT " bytes",
                      ch->index, ch->tx_total + ch->stage_fill);
        } else {
            ch->stage_fill += r;
            ch->stalled = false;
            vrmChannelNoteBytes(ch);
            *progress = true;
            if (ch->stage_fill < cap)
                continue;
        }

        if (ch->stage_fill > 0) {
            guint32 len = ch->stage_fill;

            vrmTxFlowTake(&ch->txf, &ridx);
            vrmChannelPrepWR(ch, n, s);
            ch->sges[n] = (struct ibv_sge) {
                .addr = (uintptr_t)(ch->stage.mem + (size_t)s * ch->stage.chunk),
                .length = len,
                .lkey = vrmRingMR(&ch->stage, s)->lkey,
            };
            ch->wrs[n].wr.rdma.remote_addr = ch->remote.addr[ridx];
            ch->wrs[n].wr.rdma.rkey = ch->remote.rkey[ridx];
            if (imm) {
                ch->wrs[n].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
                ch->wrs[n].imm_data = htonl(vrmProtoImmEncode(ridx, len));
            } else {
                ch->wrs[n].opcode = IBV_WR_RDMA_WRITE;
                ch->dents[nd++] = (vrmProtoDataEntry) { .index = ridx, .length = len };
            }
            n++;
            ch->stage_head = (s + 1) % ch->stage.depth;
            ch->stage_used++;
            ch->stage_fill = 0;
            ch->tx_total += len;
            vrmStatsAdd(&ch->stats, VRM_STAT_CHUNKS_WRITTEN, 1);
            vrmStatsAdd(&ch->stats, VRM_STAT_BYTES_SENT, len);
        }
        if (again || ch->sock_eof)
            break;
    }

    if (nd > 0) {
        size_t len = vrmProtoBuildData(vrmChannelCtlBuf(ch, n), ch->dents, nd);
        vrmChannelPrepSend(ch, n, len);
        n++;
        vrmStatsAdd(&ch->stats, VRM_STAT_CONTROL_SENT, 1);
    }
    if (n > 0) {
        VRM_DEBUG("channel %u: posting %u WRs (%u chunks) from seq %" G_GUINT64_FORMAT
                  ", %u in flight", ch->index, n, imm ? n : nd, ch->post_seq, ch->txf.inflight);
        if (vrmChannelPostBatch(ch, n, false) < 0)
            return -1;
        *progress = true;
    }

 eof:
    if (ch->sock_eof && ch->stage_fill == 0 && !ch->eof_sent &&
        vrmChannelSqFree(ch) > 0 && vrmRemoteRingComplete(&ch->remote)) {
        size_t len = vrmProtoBuildU64(vrmChannelCtlBuf(ch, 0), VRM_MSG_EOF,
                                      ch->tx_total);
        if (vrmChannelPostCtl(ch, len, true) < 0)
            return -1;
        ch->eof_sent = true;
        *progress = true;
        VRM_DEBUG("channel %u: EOF %" G_GUINT64_FORMAT " sent", ch->index,
                  ch->tx_total);
    }
    return 0;
}

/* our ring -> socket; credits come due as chunks drain */
static int
vrmChannelPumpRx(vrmChannel *ch, bool *progress)
{
    const vrmEngineSettings *s = &ch->engine->s;

    while (ch->sock >= 0 && ch->rxf.filled > 0 && !ch->rx_blocked) {
        guint32 idx = ch->rxf.drain;
        guint32 len = ch->rx_len[idx];
        ssize_t r = send(ch->sock,
                         ch->rx.mem + (size_t)idx * ch->rx.chunk + ch->rx_off,
                         len - ch->rx_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                ch->rx_blocked = true;
                break;
            }
            return vrmChannelSocketError(ch, errno, false);
        }
        ch->rx_off += r;
        vrmStatsAdd(&ch->stats, VRM_STAT_BYTES_RECEIVED, r);
        vrmChannelNoteBytes(ch);
        *progress = true;
        if (ch->rx_off == len) {
            ch->rx_off = 0;
            vrmRxFlowDrained(&ch->rxf);
        }
        if (s->fault == VRM_ENGINE_FAULT_KILL && !ch->fault_done &&
            __atomic_load_n(&ch->stats.v[VRM_STAT_BYTES_RECEIVED], __ATOMIC_RELAXED) >=
            s->faultBytes) {
            VRM_WARN("test hook: killing this engine after %llu bytes",
                     s->faultBytes);
            ch->fault_done = true;
            kill(getpid(), SIGKILL);
        }
    }
    ch->credits_due += vrmRxFlowTakeCredits(&ch->rxf, ch->rxf.filled == 0);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Receive side (progress thread)                                      */

static int
vrmChannelUnexpected(vrmChannel *ch, const vrmProtoMsg *msg, const char *why)
{
    vrmReportError(VRM_ERR_PROTOCOL,
                   _("Channel %1$u: unexpected %2$s message: %3$s."),
                   ch->index, vrmProtoMsgTypeToString(msg->hdr.type), why);
    return -1;
}

static int
vrmChannelHandleRing(vrmChannel *ch, const vrmProtoMsg *msg)
{
    vrmRemoteRing *rr = &ch->remote;
    guint32 i;

    if (vrmRemoteRingComplete(rr))
        return vrmChannelUnexpected(ch, msg, _("the ring is already described"));
    for (i = 0; i < msg->hdr.repeat; i++) {
        vrmProtoRingEntry e;

        vrmProtoGetRing(msg, i, &e);
        if (vrmRemoteRingDescribe(rr, &e, ch->caps & VRM_CAP_PIN_ALL) < 0)
            return -1;
    }
    if (vrmRemoteRingComplete(rr)) {
        vrmTxFlowInit(&ch->txf, rr->depth);
        VRM_DEBUG("channel %u: peer ring %u x %u bytes", ch->index,
                  rr->depth, rr->chunk);
    }
    return 0;
}

static int
vrmChannelHandleRegRequest(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint32 i;

    if (ch->caps & VRM_CAP_PIN_ALL)
        return vrmChannelUnexpected(ch, msg, _("every chunk is pinned already"));
    if (msg->hdr.repeat > ch->rx.depth - ch->n_reg_res)
        return vrmChannelUnexpected(ch, msg, _("more requests than chunks"));
    for (i = 0; i < msg->hdr.repeat; i++) {
        guint32 idx;

        vrmProtoGetU32Pair(msg, i, &idx, NULL);
        if (idx >= ch->rx.depth) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("Channel %1$u: the peer asked to register chunk %2$u of a ring of %3$u."),
                           ch->index, idx, ch->rx.depth);
            return -1;
        }
        if (ch->rx_regd[idx]) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("Channel %1$u: the peer asked to register chunk %2$u twice."),
                           ch->index, idx);
            return -1;
        }
        if (vrmRingRegisterChunk(ch, &ch->rx, idx,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) < 0)
            return -1;
        ch->rx_regd[idx] = 1;
        ch->reg_res[ch->n_reg_res++] = (vrmProtoRegResult) {
            .index = idx,
            .rkey = vrmRingMR(&ch->rx, idx)->rkey,
            .addr = (uintptr_t)(ch->rx.mem + (size_t)idx * ch->rx.chunk),
        };
    }
    return 0;
}

static int
vrmChannelHandleRegResult(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint32 i;

    if (ch->caps & VRM_CAP_PIN_ALL)
        return vrmChannelUnexpected(ch, msg, _("every chunk is pinned already"));
    for (i = 0; i < msg->hdr.repeat; i++) {
        vrmProtoRegResult r;
        gint64 waited;

        vrmProtoGetRegResult(msg, i, &r);
        if (vrmRemoteRingRegistered(&ch->remote, &r, g_get_monotonic_time(), &waited) < 0) {
            g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
            vrmReportError(VRM_ERR_PROTOCOL, _("Channel %1$u: %2$s"), ch->index, why);
            return -1;
        }
        vrmStatsAdd(&ch->stats, VRM_STAT_REGISTRATION_US, waited);
    }
    return 0;
}

static int
vrmChannelHandleMessage(vrmChannel *ch, const guint8 *buf, size_t len)
{
    vrmEngineRole role = ch->engine->s.role;
    vrmProtoMsg msg;
    guint32 a, i;

    vrmStatsAdd(&ch->stats, VRM_STAT_CONTROL_RECEIVED, 1);
    if (vrmProtoMsgDecode(buf, len, &msg) < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
        vrmReportError(VRM_ERR_PROTOCOL, _("Channel %1$u: malformed message from the peer: %2$s"),
                       ch->index, why);
        return -1;
    }
    if (msg.hdr.type != VRM_MSG_RAM_BLOCKS && msg.hdr.type != VRM_MSG_ERROR &&
        msg.hdr.type != VRM_MSG_REGISTER_REQUEST &&
        !vrmRemoteRingComplete(&ch->remote))
        return vrmChannelUnexpected(ch, &msg, _("the ring description is incomplete"));

    switch ((vrmProtoMsgType)msg.hdr.type) {
    case VRM_MSG_ERROR: {
        g_autofree char *text = NULL;
        guint32 code;

        if (vrmProtoGetError(&msg, &code, &text) < 0)
            return -1;
        vrmReportError(VRM_ERR_PEER, _("The peer engine reported an error: %1$s"), text);
        return -1;
    }
    case VRM_MSG_READY:
        vrmProtoGetU32Pair(&msg, 0, &a, NULL);
        VRM_DEBUG("channel %u: READY %u, %u in flight", ch->index, a, ch->txf.inflight);
        if (vrmTxFlowCredit(&ch->txf, a) < 0) {
            g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
            vrmReportError(VRM_ERR_PROTOCOL, _("Channel %1$u: %2$s"), ch->index, why);
            return -1;
        }
        ch->stalled = false;
        return 0;
    case VRM_MSG_RAM_BLOCKS:
        return vrmChannelHandleRing(ch, &msg);
    case VRM_MSG_REGISTER_REQUEST:
        return vrmChannelHandleRegRequest(ch, &msg);
    case VRM_MSG_REGISTER_RESULT:
        return vrmChannelHandleRegResult(ch, &msg);
    case VRM_MSG_CHANNEL_OPEN:
        vrmProtoGetU32Pair(&msg, 0, &a, NULL);
        if (role != VRM_ENGINE_ROLE_DESTINATION)
            return vrmChannelUnexpected(ch, &msg, _("only the source opens channels"));
        if (a != ch->index)
            return vrmChannelUnexpected(ch, &msg, _("it names another channel"));
        if (ch->open_requested || ch->unused)
            return vrmChannelUnexpected(ch, &msg, _("the channel is already open"));
        ch->open_requested = true;
        g_mutex_lock(&ch->engine->lock);
        ch->mb_open_req = true;
        g_mutex_unlock(&ch->engine->lock);
        vrmEngineWake(ch->engine);
        return 0;
    case VRM_MSG_CHANNEL_UNUSED:
        vrmProtoGetU32Pair(&msg, 0, &a, NULL);
        if (role != VRM_ENGINE_ROLE_DESTINATION || a != ch->index || ch->open_requested)
            return vrmChannelUnexpected(ch, &msg, _("the channel is open"));
        ch->unused = true;
        return 0;
    case VRM_MSG_DATA:
        if (ch->caps & VRM_CAP_WRITE_IMM)
            return vrmChannelUnexpected(ch, &msg, _("data is announced by immediate data"));
        if (ch->peer_eof)
            return vrmChannelUnexpected(ch, &msg, _("the peer already ended this direction"));
        for (i = 0; i < msg.hdr.repeat; i++) {
            guint32 dlen;

            vrmProtoGetU32Pair(&msg, i, &a, &dlen);
            if (a >= ch->rx.depth) {
                vrmReportError(VRM_ERR_PROTOCOL,
                               _("Channel %1$u: the peer announced chunk %2$u of a ring of %3$u."),
                               ch->index, a, ch->rx.depth);
                return -1;
            }
            VRM_DEBUG("channel %u: DATA chunk %u, %u bytes", ch->index, a, dlen);
            if (vrmRxFlowFill(&ch->rxf, a, dlen) < 0)
                return -1;
            ch->rx_len[a] = dlen;
            vrmStatsAdd(&ch->stats, VRM_STAT_CHUNKS_RECEIVED, 1);
        }
        return 0;
    case VRM_MSG_EOF:
        if (ch->peer_eof)
            return vrmChannelUnexpected(ch, &msg, _("the peer already ended this direction"));
        ch->peer_total = vrmProtoGetU64(&msg);
        if (ch->peer_total != ch->rxf.bytes) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("Channel %1$u: the peer ended after %2$" G_GUINT64_FORMAT " bytes but announced %3$" G_GUINT64_FORMAT "."),
                           ch->index, ch->peer_total, ch->rxf.bytes);
            return -1;
        }
        ch->peer_eof = true;
        VRM_DEBUG("channel %u: peer EOF after %" G_GUINT64_FORMAT " bytes",
                  ch->index, ch->peer_total);
        return 0;
    case VRM_MSG_EOF_ACK:
        if (!ch->eof_sent || ch->tx_done)
            return vrmChannelUnexpected(ch, &msg, _("no end of file is outstanding"));
        if (vrmProtoGetU64(&msg) != ch->tx_total) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("Channel %1$u: the peer acknowledged %2$" G_GUINT64_FORMAT " bytes, %3$" G_GUINT64_FORMAT " were sent."),
                           ch->index, vrmProtoGetU64(&msg), ch->tx_total);
            return -1;
        }
        ch->tx_done = true;
        return 0;
    case VRM_MSG_KEEPALIVE:
        return 0;
    case VRM_MSG_NONE:
    case VRM_MSG_QEMU_FILE:
    case VRM_MSG_COMPRESS:
    case VRM_MSG_REGISTER_FINISHED:
    case VRM_MSG_LAST:
        break;
    }
    return vrmChannelUnexpected(ch, &msg, _("not used in this protocol version"));
}

static bool
vrmChannelEnding(vrmChannel *ch)
{
    bool stop;

    g_mutex_lock(&ch->engine->lock);
    stop = ch->mb_stop || ch->mb_disconnected;
    g_mutex_unlock(&ch->engine->lock);
    return stop;
}

static bool
vrmChannelLogicallyDone(const vrmChannel *ch)
{
    return ch->unused || (ch->unused_sent && ch->retired_seq == ch->post_seq) ||
           (ch->opened && ch->tx_done && ch->eof_ack_sent);
}

static int
vrmChannelHandleWC(vrmChannel *ch, struct ibv_wc *wc, guint32 *repost,
                   guint32 *nrepost)
{
    vrmWorkId *wid = (vrmWorkId *)(uintptr_t)wc->wr_id;

    if (wc->status != IBV_WC_SUCCESS) {
        const char *what;
        int code = vrmRdmaWcStatusToError(wc->status, &what);

        if (wc->status == IBV_WC_WR_FLUSH_ERR &&
            (vrmChannelLogicallyDone(ch) || vrmChannelEnding(ch)))
            return 0;
        vrmReportError(code, _("Channel %1$u: a work request failed: %2$s."),
                       ch->index, what);
        return -1;
    }

    if (wid->kind == VRM_WR_SEND) {
        vrmSendSlot *slot = vrm_container_of(wid, vrmSendSlot, id);
        guint64 seq;

        for (seq = ch->retired_seq; seq <= slot->seq; seq++) {
            vrmSendSlot *done = &ch->sslots[seq % ch->sq_size];
            if (done->stage >= 0) {
                g_assert(ch->stage_used > 0);
                ch->stage_used--;
            }
        }
        ch->retired_seq = slot->seq + 1;
        if (ch->keepalive_seq && ch->retired_seq >= ch->keepalive_seq)
            ch->keepalive_seq = 0;
        return 0;
    } else {
        vrmRecvSlot *slot = vrm_container_of(wid, vrmRecvSlot, id);
        const guint8 *buf = ch->ctl_recv + (size_t)slot->index * VRM_CONTROL_MESSAGE_MAX;

        repost[(*nrepost)++] = slot->index;
        if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
            guint32 tag, len, idx;

            if (!(ch->caps & VRM_CAP_WRITE_IMM) || !ch->desc_sent || ch->peer_eof) {
                vrmReportError(VRM_ERR_PROTOCOL,
                               _("Channel %1$u: unexpected RDMA write with immediate data."),
                               ch->index);
                return -1;
            }
            vrmProtoImmDecode(ntohl(wc->imm_data), &tag, &len);
            if (vrmRxFlowFillTag(&ch->rxf, tag, len, &idx) < 0)
                return -1;
            ch->rx_len[idx] = len;
            vrmStatsAdd(&ch->stats, VRM_STAT_CHUNKS_RECEIVED, 1);
            return 0;
        }
        if (wc->opcode != IBV_WC_RECV) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("Channel %1$u: unexpected receive completion opcode %2$d."),
                           ch->index, wc->opcode);
            return -1;
        }
        return vrmChannelHandleMessage(ch, buf, wc->byte_len);
    }
}

static int
vrmChannelPollCQ(vrmChannel *ch, bool *progress)
{
    struct ibv_wc wc[VRM_CHANNEL_WC_BATCH];
    g_autofree guint32 *repost = g_new(guint32, ch->rq_size);
    guint32 nrepost = 0;
    int ret = 0;

    while (ret == 0) {
        int n = vrmRdmaCQPoll(ch->cq, VRM_CHANNEL_WC_BATCH, wc);
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
        ch->last_activity = g_get_monotonic_time();
        *progress = true;
        for (i = 0; i < n && ret == 0; i++)
            ret = vrmChannelHandleWC(ch, &wc[i], repost, &nrepost);
    }
    if (ret == 0 && nrepost && !vrmChannelLogicallyDone(ch))
        ret = vrmChannelPostRecvs(ch, repost, nrepost);
    return ret;
}

/* ------------------------------------------------------------------ */
/* The progress thread                                                 */

static void
vrmChannelAttachSocket(vrmChannel *ch, int fd)
{
    ch->sock = fd;
    ch->opened = true;
    VRM_DEBUG("channel %u: socket attached", ch->index);
}

/* Returns true when the job is stopping */
static bool
vrmChannelMailbox(vrmChannel *ch, bool *disconnected)
{
    guint64 junk;
    bool stop;
    int fd;

    if (read(ch->wakefd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
        VRM_DEBUG("channel %u: eventfd read: %s", ch->index, g_strerror(errno));
    g_mutex_lock(&ch->engine->lock);
    fd = ch->mb_fd;
    ch->mb_fd = -1;
    stop = ch->mb_stop;
    *disconnected = ch->mb_disconnected;
    if (ch->mb_unused)
        ch->unused_wanted = true;
    g_mutex_unlock(&ch->engine->lock);
    if (fd >= 0)
        vrmChannelAttachSocket(ch, fd);
    return stop;
}

static void
vrmChannelSendError(vrmChannel *ch)
{
    g_autofree char *reason = NULL;
    gint64 until = g_get_monotonic_time() + VRM_CHANNEL_STOP_WAIT_US;
    guint64 want;
    int code;
    size_t len;

    g_mutex_lock(&ch->engine->lock);
    reason = g_strdup(ch->engine->fail_reason);
    code = ch->engine->fail_code;
    g_mutex_unlock(&ch->engine->lock);
    if (code == VRM_ERR_PEER || vrmChannelSqFree(ch) == 0)
        return;
    len = vrmProtoBuildError(vrmChannelCtlBuf(ch, 0), code, reason);
    if (vrmChannelPostCtl(ch, len, true) < 0)
        return;
    want = ch->post_seq;
    while (ch->retired_seq < want && g_get_monotonic_time() < until) {
        struct ibv_wc wc[VRM_CHANNEL_WC_BATCH];
        int n = ibv_poll_cq(ch->cq->cq, VRM_CHANNEL_WC_BATCH, wc);
        int i;

        if (n < 0)
            break;
        for (i = 0; i < n; i++) {
            vrmWorkId *wid = (vrmWorkId *)(uintptr_t)wc[i].wr_id;
            if (wc[i].status != IBV_WC_SUCCESS)
                return;
            if (wid->kind == VRM_WR_SEND)
                ch->retired_seq = vrm_container_of(wid, vrmSendSlot, id)->seq + 1;
        }
        if (n == 0)
            g_usleep(1000);
    }
}

static void
vrmChannelFailed(vrmChannel *ch)
{
    int code = vrmGetLastErrorCode();

    vrmEngineFail(ch->engine, code ? code : VRM_ERR_INTERNAL,
                  vrmGetLastErrorMessage());
}

static gpointer
vrmChannelThread(gpointer opaque)
{
    vrmChannel *ch = opaque;
    gint64 done_since = 0;
    bool disconnected = false;

    ch->last_activity = g_get_monotonic_time();
    if (vrmRdmaCQArm(ch->cq) < 0) {
        vrmChannelFailed(ch);
        goto out;
    }

    for (;;) {
        bool progress = false;
        struct pollfd fds[3];
        int nfds = 0;

        if (vrmChannelMailbox(ch, &disconnected)) {
            if (!disconnected)
                vrmChannelSendError(ch);
            break;
        }
        if (vrmChannelPollCQ(ch, &progress) < 0 ||
            vrmChannelPumpRx(ch, &progress) < 0 ||
            vrmChannelPumpControl(ch, &progress) < 0 ||
            vrmChannelPumpTx(ch, &progress) < 0) {
            vrmChannelFailed(ch);
            vrmChannelSendError(ch);
            break;
        }

        if (vrmChannelLogicallyDone(ch)) {
            gint64 now = g_get_monotonic_time();

            if (!done_since)
                done_since = now;
            /* wait for the last signaled sends, but not forever */
            if (ch->retired_seq == ch->post_seq || disconnected ||
                now - done_since > VRM_CHANNEL_END_WAIT_US) {
                g_mutex_lock(&ch->engine->lock);
                ch->mb_done = true;
                g_mutex_unlock(&ch->engine->lock);
                VRM_INFO("channel %u ended: %" G_GUINT64_FORMAT " bytes sent, %"
                         G_GUINT64_FORMAT " received", ch->index, ch->tx_total,
                         ch->rxf.bytes);
                break;
            }
        } else if (disconnected && !progress) {
            vrmReportError(VRM_ERR_PEER,
                           _("The peer closed channel %1$u before the end of the stream."),
                           ch->index);
            vrmChannelFailed(ch);
            break;
        }
        if (progress)
            continue;

        /* A silent peer is probed: the probe's completion, or its failure
         * once the transport retries are exhausted, tells whether it lives.
         * Without it a writer waiting for credits would never notice a
         * cut link. */
        if (ch->desc_sent && !ch->keepalive_seq && vrmChannelSqFree(ch) > 0 &&
            g_get_monotonic_time() - ch->last_activity > VRM_CHANNEL_KEEPALIVE_US) {
            size_t len = vrmProtoBuildU32Pair(vrmChannelCtlBuf(ch, 0),
                                              VRM_MSG_KEEPALIVE, 0, 0);
            if (vrmChannelPostCtl(ch, len, true) < 0) {
                vrmChannelFailed(ch);
                break;
            }
            ch->keepalive_seq = ch->post_seq;
            VRM_DEBUG("channel %u: KEEPALIVE posted (seq %" G_GUINT64_FORMAT
                      ", retired %" G_GUINT64_FORMAT ")", ch->index, ch->post_seq - 1,
                      ch->retired_seq);
        }
        /* The transport's own retry timer is not enough: Soft-RoCE was seen
         * retrying forever towards a peer whose link went down. Signaled
         * work that stays unanswered means the peer is gone. */
        if (ch->last_signaled > ch->retired_seq &&
            g_get_monotonic_time() - ch->last_activity > VRM_CHANNEL_PEER_TIMEOUT_US) {
            vrmReportError(VRM_ERR_PEER,
                           _("Channel %1$u: the peer stopped answering (no completion for %2$d seconds)."),
                           ch->index, VRM_CHANNEL_PEER_TIMEOUT_US / 1000000);
            vrmChannelFailed(ch);
            break;
        }

        /* Nothing moved: arm, look once more, then block. */
        if (vrmRdmaCQArm(ch->cq) < 0 || vrmChannelPollCQ(ch, &progress) < 0) {
            vrmChannelFailed(ch);
            vrmChannelSendError(ch);
            break;
        }
        if (progress)
            continue;
        fds[nfds++] = (struct pollfd) { .fd = ch->cq->chan->fd, .events = POLLIN };
        fds[nfds++] = (struct pollfd) { .fd = ch->wakefd, .events = POLLIN };
        if (ch->sock >= 0) {
            short ev = 0;
            if (vrmChannelTxReady(ch) && vrmTxFlowCredits(&ch->txf) > 0 &&
                ch->stage_used < ch->stage.depth &&
                ((ch->caps & VRM_CAP_PIN_ALL) ||
                 vrmRemoteRingUsable(&ch->remote, vrmTxFlowPeek(&ch->txf, 0))))
                ev |= POLLIN;
            if (ch->rx_blocked)
                ev |= POLLOUT;
            if (ev)
                fds[nfds++] = (struct pollfd) { .fd = ch->sock, .events = ev };
        }
        if (poll(fds, nfds, VRM_CHANNEL_POLL_MS) < 0 && errno != EINTR) {
            vrmReportSystemError(errno, _("poll failed on channel %1$u"), ch->index);
            vrmChannelFailed(ch);
            break;
        }
        if (fds[0].revents && vrmRdmaCQTakeEvents(ch->cq) < 0) {
            vrmChannelFailed(ch);
            break;
        }
        if (nfds > 2 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)))
            ch->rx_blocked = false;
    }

 out:
    if (ch->sock >= 0) {
        close(ch->sock);
        ch->sock = -1;
    }
    g_mutex_lock(&ch->engine->lock);
    ch->mb_exited = true;
    g_mutex_unlock(&ch->engine->lock);
    vrmEngineWake(ch->engine);
    return NULL;
}

int
vrmChannelStart(vrmChannel *ch)
{
    g_autofree char *name = g_strdup_printf("vrm-ch%u", ch->index);
    g_autoptr(GError) err = NULL;

    vrmRxFlowInit(&ch->rxf, ch->rx.depth, ch->rx.chunk);
    if (!(ch->thread = g_thread_try_new(name, vrmChannelThread, ch, &err))) {
        vrmReportError(VRM_ERR_SYSTEM, _("Cannot start the thread of channel %1$u: %2$s"),
                       ch->index, err->message);
        return -1;
    }
    return 0;
}
