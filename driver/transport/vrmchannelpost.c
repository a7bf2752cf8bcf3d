/*
 * vrmchannelpost.c: a channel's rings, its work requests and their posting, and
 * the setters of its two states (see vrmchannelpriv.h)
 */
#include <config.h>

#include "vrmchannelpriv.h"

/* the names of the two states, for the debug log and errors */
VRM_ENUM_IMPL(vrmChannelTx, VRM_CHANNEL_TX_LAST,
              "auth",
              "describe",
              "wait-open",
              "open",
              "stream",
              "eof-sent",
              "done",
);

VRM_ENUM_IMPL(vrmChannelRx, VRM_CHANNEL_RX_LAST,
              "auth",
              "describe",
              "open",
              "stream",
              "drain",
              "done",
);

/* Anonymous mappings for every registered buffer: page aligned and zeroed
 * (no stale heap data can reach a socket or the peer), and a page costs
 * nothing until it is used */
guint8 *
vrmChannelMap(size_t len)
{
    void *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (mem == MAP_FAILED) {
        vrmReportSystemError(errno, _("cannot allocate %1$zu bytes for a channel"), len);
        return NULL;
    }
    return mem;
}

void
vrmChannelUnmap(void *mem, size_t len)
{
    if (mem)
        munmap(mem, len);
}

int
vrmRingAlloc(vrmRing *ring, guint32 depth, guint32 chunk)
{
    if (!(ring->mem = vrmChannelMap((size_t)depth * chunk)))
        return -1;
    ring->depth = depth;
    ring->chunk = chunk;
    ring->mrs = g_new0(struct ibv_mr *, depth);
    return 0;
}

/* pinned-bytes keeps the peak: registrations are not subtracted here */
void
vrmRingClear(vrmRdmaDevice *dev, vrmRing *ring)
{
    guint32 i;

    if (dev) {
        vrmRdmaDeregister(dev, ring->whole);
        for (i = 0; ring->mrs && i < ring->depth; i++)
            vrmRdmaDeregister(dev, ring->mrs[i]);
    }
    g_free(ring->mrs);
    vrmChannelUnmap(ring->mem, (size_t)ring->depth * ring->chunk);
    memset(ring, 0, sizeof(*ring));
}

int
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

int
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

struct ibv_mr *
vrmRingMR(const vrmRing *ring, guint32 i)
{
    return ring->whole ? ring->whole : ring->mrs[i];
}

/* At debug level only: a digest of every chunk as it leaves QEMU's socket
 * on the source and as it is handed to QEMU's socket on the destination,
 * with its stream offset, so that the two engines' logs prove (or
 * disprove) that the transport moved each byte unchanged */
void
vrmChannelTraceChunk(const vrmChannel *ch, const char *what, guint64 offset,
                     const guint8 *mem, guint32 len)
{
    guint64 h = 0xcbf29ce484222325ull;
    guint32 i;

    if (vrmLogGetLevel() < VRM_LOG_DEBUG)
        return;
    for (i = 0; i + 8 <= len; i += 8) {
        guint64 w;

        memcpy(&w, mem + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < len; i++)
        h = (h ^ mem[i]) * 0x100000001b3ull;
    VRM_DEBUG("channel %u: chunk %s offset %" G_GUINT64_FORMAT " length %u digest %016" G_GINT64_MODIFIER "x",
              ch->cfg.index, what, offset, len, h);
}

/* The message limit that applies (0: none): the setting, else the
 * device's */
guint32
vrmChannelMaxWrite(const vrmChannelConfig *cfg, guint32 device)
{
    if (cfg->maxWrite == VRM_MAX_WRITE_UNLIMITED)
        return 0;
    return cfg->maxWrite ? cfg->maxWrite : device;
}

int
vrmChannelPostRecvs(vrmChannel *ch, const guint32 *which, guint32 n)
{
    guint32 i;

    if (n == 0)
        return 0;
    for (i = 0; i < n; i++) {
        vrmRecvSlot *slot = &ch->rslots[which[i]];

        slot->id.kind = VRM_WR_RECV;
        slot->index = which[i];
        ch->rsges[i] = (struct ibv_sge) {
            .addr = (uintptr_t)(ch->ctlRecv + (size_t)which[i] * VRM_CONTROL_MESSAGE_MAX),
            .length = VRM_CONTROL_MESSAGE_MAX,
            .lkey = ch->ctlRecvMr->lkey,
        };
        ch->rwrs[i] = (struct ibv_recv_wr) {
            .wr_id = (uintptr_t)&slot->id,
            .next = i + 1 < n ? &ch->rwrs[i + 1] : NULL,
            .sg_list = &ch->rsges[i],
            .num_sge = 1,
        };
    }
    if (vrmRdmaQPPostRecv(ch->qp, ch->rwrs) < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
        vrmReportError(VRM_ERR_RDMA, _("channel %1$u: %2$s"), ch->cfg.index, why);
        return -1;
    }
    ch->recvPosted += n;
    vrmStatsAdd(&ch->stats, VRM_STAT_DOORBELLS, 1);
    return 0;
}

/* Tell the owner something; it reads it with vrmChannelTakeEvents() */
void
vrmChannelSignal(vrmChannel *ch, bool *flag)
{
    g_mutex_lock(&ch->lock);
    *flag = true;
    g_mutex_unlock(&ch->lock);
    if (ch->host.wake)
        ch->host.wake(ch->host.opaque);
}

/* The next verbs work request of the batch being built, for logical work
 * request @i: zeroed, chained, identified by its send slot (the pieces
 * of a split chunk all name their chunk's slot: an error on any of them
 * is that chunk's) */
static guint32
vrmChannelNextVerbs(vrmChannel *ch, guint32 i)
{
    guint32 v = ch->batchVerbs++;
    vrmSendSlot *slot = &ch->sslots[(ch->postSeq + i) % ch->sqSize];

    g_assert(v < ch->qpSend);
    memset(&ch->wrs[v], 0, sizeof(ch->wrs[v]));
    ch->wrs[v].wr_id = (uintptr_t)&slot->id;
    ch->wrs[v].sg_list = &ch->sges[v];
    ch->wrs[v].num_sge = 1;
    if (v > 0)
        ch->wrs[v - 1].next = &ch->wrs[v];
    slot->nverbs++;
    return v;
}

/* The send slot of logical WR number i of the batch starting at postSeq,
 * reset; its verbs work requests follow (vrmChannelNextVerbs) */
static vrmSendSlot *
vrmChannelPrepSlot(vrmChannel *ch, guint32 i, gint32 stage)
{
    guint64 seq = ch->postSeq + i;
    vrmSendSlot *slot = &ch->sslots[seq % ch->sqSize];

    slot->id.kind = VRM_WR_SEND;
    slot->seq = seq;
    slot->stage = stage;
    slot->opcode = IBV_WR_SEND;
    slot->len = 0;
    slot->what = 0;
    slot->nverbs = 0;
    return slot;
}

/* Prepare logical WR number i of one verbs work request; returns its
 * index in ch->wrs */
static guint32
vrmChannelPrepWR(vrmChannel *ch, guint32 i, gint32 stage)
{
    vrmChannelPrepSlot(ch, i, stage);
    return ch->lastVerbs[i] = vrmChannelNextVerbs(ch, i);
}

/* Prepare logical WR number i: @len bytes of staging chunk @s into chunk
 * @ridx of the peer's ring, its last WRITE as the transfer mode has it.
 * On a device with a message limit (ch->maxWrite) the chunk goes as
 * plain WRITEs of at most that many bytes, the last one announcing it
 * (write-imm): RC places every earlier WRITE before it completes. */
void
vrmChannelPrepChunk(vrmChannel *ch, guint32 i, guint32 s, guint32 ridx,
                    guint32 len)
{
    vrmSendSlot *slot = vrmChannelPrepSlot(ch, i, s);
    guint8 *mem = ch->stage.mem + (size_t)s * ch->stage.chunk;
    guint32 lkey = vrmRingMR(&ch->stage, s)->lkey;
    guint32 off = 0;

    for (;;) {
        guint32 piece = ch->maxWrite ? MIN(ch->maxWrite, len - off) : len - off;
        bool last = off + piece == len;
        guint32 v = vrmChannelNextVerbs(ch, i);

        ch->sges[v] = (struct ibv_sge) {
            .addr = (uintptr_t)(mem + off),
            .length = piece,
            .lkey = lkey,
        };
        ch->wrs[v].wr.rdma.remote_addr = ch->remote.addr[ridx] + off;
        ch->wrs[v].wr.rdma.rkey = ch->remote.rkey[ridx];
        ch->wrs[v].opcode = IBV_WR_RDMA_WRITE;
        off += piece;
        if (last) {
            ch->mode->txChunk(&ch->batch, &ch->wrs[v], ridx, len);
            ch->lastVerbs[i] = v;
            slot->opcode = ch->wrs[v].opcode;
            break;
        }
    }
    slot->len = len;
    slot->what = ridx;
}

/* Entries of @type that one control message may carry: its protocol
 * bound, and within the message limit (a message of several packets is
 * what Soft-RoCE may retransmit wrongly); at least one */
guint32
vrmChannelCtlEntries(const vrmChannel *ch, int type)
{
    guint32 most = vrmProtoMaxEntries(type);
    guint32 limit = ch->maxWriteKnown ? ch->maxWrite : ch->ctlLimit;

    if (limit && limit > VRM_PROTO_HEADER_LEN && vrmProtoEntrySize(type))
        most = MIN(most, (limit - VRM_PROTO_HEADER_LEN) / vrmProtoEntrySize(type));
    return MAX(most, 1);
}

void
vrmChannelPrepSend(vrmChannel *ch, guint32 i, size_t len)
{
    const guint8 *buf = vrmChannelCtlBuf(ch, i);
    vrmSendSlot *slot = &ch->sslots[(ch->postSeq + i) % ch->sqSize];
    guint32 v = vrmChannelPrepWR(ch, i, -1);

    ch->sges[v] = (struct ibv_sge) {
        .addr = (uintptr_t)buf,
        .length = len,
        .lkey = ch->ctlSendMr->lkey,
    };
    ch->wrs[v].opcode = IBV_WR_SEND;
    slot->len = len;
    /* the header's type field (big-endian, docs/protocol.rst) */
    slot->what = (guint32)buf[4] << 24 | (guint32)buf[5] << 16 |
                 (guint32)buf[6] << 8 | buf[7];
}

/* Selective signaling (UCX), then one doorbell for the whole batch. The
 * decision is per logical work request (its last verbs one carries the
 * flag); the interval counts verbs work requests, so that the pieces of
 * split chunks are reclaimed in time. */
int
vrmChannelPostBatch(vrmChannel *ch, guint32 n, bool force_last)
{
    guint32 nv = ch->batchVerbs;
    guint32 i;

    if (n == 0)
        return 0;
    g_assert(n <= ch->sqSize - (guint32)(ch->postSeq - ch->retiredSeq));
    g_assert(nv <= vrmChannelVerbsFree(ch));
    for (i = 0; i < n; i++) {
        guint32 v = ch->lastVerbs[i];
        guint64 seq = ch->postSeq + i;
        guint64 verbs = ch->postedVerbs + v + 1;
        bool last = i == n - 1;
        bool sig = seq + 1 - ch->lastSignaled >= ch->sigInterval ||
                   verbs - ch->lastSignaledVerbs >= ch->sigVerbs;

        if (last && (force_last ||
                     ch->stageUsed == ch->stage.depth ||
                     vrmChannelSqFree(ch) - n < ch->sigInterval ||
                     vrmChannelVerbsFree(ch) - nv < ch->sigVerbs))
            sig = true;
        if (sig) {
            ch->wrs[v].send_flags |= IBV_SEND_SIGNALED;
            ch->lastSignaled = seq + 1;
            ch->lastSignaledVerbs = verbs;
        }
    }
    ch->batchVerbs = 0;
    if (vrmRdmaQPPostSend(ch->qp, ch->wrs) < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
        vrmReportError(VRM_ERR_RDMA, _("channel %1$u: %2$s"), ch->cfg.index, why);
        return -1;
    }
    ch->postSeq += n;
    ch->postedVerbs += nv;
    vrmStatsAdd(&ch->stats, VRM_STAT_DOORBELLS, 1);
    return 0;
}

/* One control message already built at vrmChannelCtlBuf(ch, 0) */
int
vrmChannelPostCtl(vrmChannel *ch, size_t len, bool signal)
{
    if (vrmChannelSqFree(ch) < 1) {
        vrmReportError(VRM_ERR_INTERNAL,
                       _("the send queue of channel %1$u is full"), ch->cfg.index);
        return -1;
    }
    vrmChannelPrepSend(ch, 0, len);
    vrmStatsAdd(&ch->stats, VRM_STAT_CONTROL_SENT, 1);
    return vrmChannelPostBatch(ch, 1, signal);
}

int
vrmChannelPostPair(vrmChannel *ch, int type, guint32 a, bool signal)
{
    size_t len = vrmProtoBuildU32Pair(vrmChannelCtlBuf(ch, 0), type, a, 0);

    return vrmChannelPostCtl(ch, len, signal);
}

/* Source: the peer may open its side of this channel: a UNIX socket it
 * knows, or the TCP address QEMU connected to */
int
vrmChannelPostOpen(vrmChannel *ch)
{
    if (!ch->tcpOpenSet)
        return vrmChannelPostPair(ch, VRM_MSG_CHANNEL_OPEN, ch->cfg.index, false);
    if (!(ch->caps & VRM_CAP_TCP)) {
        vrmReportError(VRM_ERR_VERSION,
                       _("channel %1$u: QEMU's TCP connection cannot be carried: the destination's virt-rdma engine does not take TCP connections (an older virt-rdma, or it was not started for the transparent mode)"),
                       ch->cfg.index);
        return -1;
    }
    return vrmChannelPostCtl(ch, vrmProtoBuildTcpOpen(vrmChannelCtlBuf(ch, 0), &ch->tcpOpen),
                             false);
}

void
vrmChannelSetTx(vrmChannel *ch, vrmChannelTx state)
{
    VRM_DEBUG("channel %u: tx %s -> %s", ch->cfg.index,
              vrmChannelTxTypeToString(ch->tx), vrmChannelTxTypeToString(state));
    ch->tx = state;
}

void
vrmChannelSetRx(vrmChannel *ch, vrmChannelRx state)
{
    VRM_DEBUG("channel %u: rx %s -> %s", ch->cfg.index,
              vrmChannelRxTypeToString(ch->rx), vrmChannelRxTypeToString(state));
    ch->rx = state;
}

void
vrmChannelNoteBytes(vrmChannel *ch)
{
    gint64 now = g_get_monotonic_time();

    if (!ch->firstByteUs)
        __atomic_store_n(&ch->firstByteUs, now, __ATOMIC_RELAXED);
    __atomic_store_n(&ch->lastByteUs, now, __ATOMIC_RELAXED);
}

int
vrmChannelSocketError(vrmChannel *ch, int err, bool reading)
{
    if (reading)
        vrmReportSystemError(err, _("channel %1$u: reading QEMU's socket failed"),
                             ch->cfg.index);
    else
        vrmReportSystemError(err,
                             _("channel %1$u: QEMU's socket was closed while %2$llu bytes were still to be delivered"),
                             ch->cfg.index,
                             (unsigned long long)ch->rxf.bytes - __atomic_load_n(&ch->stats.v[VRM_STAT_BYTES_RECEIVED],
                                                             __ATOMIC_RELAXED));
    return -1;
}

/*
 * QEMU's stream ended: EOF (@err 0) or a socket error. With checkEnd, the
 * owner first looks whether QEMU is still there (a crash also reads as
 * EOF): the EOF goes to the peer, or the error ends the job, only once it
 * has answered (vrmChannelStreamVerdict). -1 reported otherwise.
 */
int
vrmChannelStreamEnds(vrmChannel *ch, int err, bool reading)
{
    if (!ch->cfg.checkEnd) {
        if (err)
            return vrmChannelSocketError(ch, err, reading);
        return 0;
    }
    if (ch->end != VRM_CHANNEL_END_NONE) {
        if (err && ch->end == VRM_CHANNEL_END_CLEARED)
            return vrmChannelSocketError(ch, err, reading);
        return 0;
    }
    ch->end = VRM_CHANNEL_END_ASKED;
    ch->endErr = err;
    ch->endReading = reading;
    VRM_DEBUG("channel %u: QEMU's stream ended (%s); asking whether QEMU lives",
              ch->cfg.index, err ? g_strerror(err) : "end of file");
    vrmChannelSignal(ch, &ch->ev.streamEnded);
    return 0;
}

/* Bytes written to QEMU's socket so far */
guint64
vrmChannelRxWritten(const vrmChannel *ch)
{
    return ch->rxTotal + ch->rxOff;
}

/* Both directions ended: nothing more will be sent or accepted */
bool
vrmChannelLogicallyDone(const vrmChannel *ch)
{
    return ch->tx == VRM_CHANNEL_TX_DONE && ch->rx == VRM_CHANNEL_RX_DONE;
}
