/*
 * vrmchanneltx.c: a channel's sending side: QEMU's socket -> staging chunks ->
 * RDMA WRITEs into the peer's ring, announced as the transfer mode does it
 */
#include <config.h>

#include "vrmchannelpriv.h"

/* Could the next chunk be written now, bytes permitting? */
bool
vrmChannelTxCanWrite(const vrmChannel *ch)
{
    return ch->tx == VRM_CHANNEL_TX_STREAM && !ch->sockEof &&
           vrmRemoteRingComplete(&ch->remote) &&
           vrmTxFlowCredits(&ch->txf) > 0 && ch->stageUsed < ch->stage.depth &&
           ((ch->caps & VRM_CAP_PIN_ALL) ||
            vrmRemoteRingUsable(&ch->remote, vrmTxFlowPeek(&ch->txf, 0)));
}

/* Nagle's rule for chunks. Reading QEMU's socket empty is not the end of
 * a message: on a busy host the writer is merely descheduled, and a chunk
 * posted then carries a socket buffer's worth (about 200 KiB) instead of a
 * chunk's, so every byte costs up to five times the WRITEs, credits and
 * completions. While the peer still has chunks to hand to its QEMU, the
 * bytes could not be delivered sooner anyway (one stream, in order), so
 * the part-filled chunk waits; the next credit, more bytes, the end of the
 * stream or a full chunk post it. It never waits on the peer's QEMU for
 * anything that QEMU has not already been given. */
static bool
vrmChannelHoldPartial(const vrmChannel *ch)
{
    return !ch->sockEof && ch->txf.inflight >= VRM_CHANNEL_HOLD_INFLIGHT;
}

/* The message limit of this connection (vrmRdmaQPMaxMessage), learnt
 * when the first chunk goes: the path MTU is the queue pair's only once
 * it is connected. -1 reported if a chunk cannot fit the send queue. */
static int
vrmChannelLearnMaxWrite(vrmChannel *ch)
{
    guint32 verbs;

    if (ch->maxWriteKnown)
        return 0;
    ch->maxWrite = vrmChannelMaxWrite(&ch->cfg, vrmRdmaQPMaxMessage(ch->qp));
    ch->maxWriteKnown = true;
    if (!ch->maxWrite)
        return 0;
    verbs = vrmChannelChunkVerbs(ch, ch->stage.chunk);
    if (verbs + 2 + VRM_CHANNEL_CTL_RESERVE > ch->qpSend) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("channel %1$u: a chunk of %2$u bytes takes %3$u work requests on this connection (messages of at most %4$u bytes), more than its send queue of %5$u holds; use a smaller chunk size"),
                       ch->cfg.index, ch->stage.chunk, verbs, ch->maxWrite, ch->qpSend);
        return -1;
    }
    VRM_DEBUG("channel %u: messages of at most %u bytes, up to %u work requests per chunk",
              ch->cfg.index, ch->maxWrite, verbs);
    return 0;
}

/* Whether chunk @n of the post being built may be filled now: a free
 * staging chunk (registered), a credit, the peer's chunk registered, room
 * in the send queue. 1: yes, 0: not now, -1: error */
static int
vrmChannelTxMayFill(vrmChannel *ch, guint32 n)
{
    guint32 ridx;

    if (ch->stageUsed == ch->stage.depth)
        return 0;
    if (vrmTxFlowCredits(&ch->txf) == 0) {
        if (!ch->stalled) {
            ch->stalled = true;
            vrmStatsAdd(&ch->stats, VRM_STAT_CREDIT_STALLS, 1);
        }
        return 0;
    }
    ridx = vrmTxFlowPeek(&ch->txf, 0);
    if (!(ch->caps & VRM_CAP_PIN_ALL) && !vrmRemoteRingUsable(&ch->remote, ridx)) {
        vrmRemoteRingQueueRequests(&ch->remote, &ch->txf, VRM_CHANNEL_REG_WINDOW,
                                   g_get_monotonic_time());
        return 0;
    }
    if (vrmChannelSqFree(ch) < n + 2 + VRM_CHANNEL_CTL_RESERVE ||
        vrmChannelVerbsFree(ch) < ch->batchVerbs + vrmChannelChunkVerbs(ch, ch->stage.chunk) +
                                  2 + VRM_CHANNEL_CTL_RESERVE)
        return 0;
    if (!ch->stage.whole &&
        vrmRingRegisterChunk(ch, &ch->stage, ch->stageHead, IBV_ACCESS_LOCAL_WRITE) < 0)
        return -1;
    return 1;
}

/* QEMU's bytes into the staging chunk being filled. *again: the socket
 * has no more for now, or ended */
static int
vrmChannelTxRead(vrmChannel *ch, bool *progress, bool *again)
{
    guint32 cap = MIN(ch->stage.chunk, ch->remote.chunk);
    guint8 *at = ch->stage.mem + (size_t)ch->stageHead * ch->stage.chunk + ch->stageFill;
    ssize_t r;

    *again = false;
    do {
        r = read(ch->sock, at, cap - ch->stageFill);
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            if (vrmChannelStreamEnds(ch, errno, true) < 0)
                return -1;
            ch->sockEof = true;
        }
        *again = true;
    } else if (r == 0) {
        ch->sockEof = true;
        VRM_DEBUG("channel %u: socket EOF after %" G_GUINT64_FORMAT " bytes",
                  ch->cfg.index, ch->txTotal + ch->stageFill);
        vrmChannelStreamEnds(ch, 0, true);
    } else {
        ch->stageFill += r;
        ch->stalled = false;
        vrmChannelNoteBytes(ch);
        *progress = true;
        /* a short read emptied the socket: what another read would learn
         * from EAGAIN, without the syscall (poll tells us of more) */
        if (ch->stageFill < cap)
            *again = true;
    }
    return 0;
}

/* The filled staging chunk becomes chunk @n of the post: into the peer's
 * next credited chunk */
static void
vrmChannelTxTake(vrmChannel *ch, guint32 n)
{
    guint32 s = ch->stageHead;
    guint32 len = ch->stageFill;
    guint32 ridx;

    vrmTxFlowTake(&ch->txf, &ridx);
    vrmChannelPrepChunk(ch, n, s, ridx, len);
    vrmChannelTraceChunk(ch, "sent", ch->txTotal,
                         ch->stage.mem + (size_t)s * ch->stage.chunk, len);
    ch->stageHead = (s + 1) % ch->stage.depth;
    ch->stageUsed++;
    ch->stageFill = 0;
    ch->txTotal += len;
    vrmStatsAdd(&ch->stats, VRM_STAT_CHUNKS_WRITTEN, 1);
    vrmStatsAdd(&ch->stats, VRM_STAT_BYTES_SENT, len);
}

/* Our direction ends after its last WRITE, after every announcement, and
 * (checkEnd) once the owner knows QEMU did not just vanish */
static int
vrmChannelTxEnd(vrmChannel *ch, bool *progress)
{
    size_t len;

    if (!ch->sockEof || ch->stageFill != 0 || ch->nannounce ||
        (ch->cfg.checkEnd && ch->end != VRM_CHANNEL_END_CLEARED) ||
        vrmChannelSqFree(ch) == 0)
        return 0;
    len = vrmProtoBuildU64(vrmChannelCtlBuf(ch, 0), VRM_MSG_EOF, ch->txTotal);
    if (vrmChannelPostCtl(ch, len, true) < 0)
        return -1;
    vrmChannelSetTx(ch, VRM_CHANNEL_TX_EOF_SENT);
    *progress = true;
    VRM_DEBUG("channel %u: EOF %" G_GUINT64_FORMAT " sent", ch->cfg.index, ch->txTotal);
    return 0;
}

/* socket -> staging chunks -> RDMA WRITEs, one post per call */
int
vrmChannelPumpTx(vrmChannel *ch, bool *progress)
{
    guint32 n = 0;
    size_t ann;

    if (ch->tx != VRM_CHANNEL_TX_STREAM || !vrmRemoteRingComplete(&ch->remote))
        return 0;
    if (vrmChannelLearnMaxWrite(ch) < 0)
        return -1;

    vrmTransferBatchStart(&ch->batch, vrmChannelCtlEntries(ch, VRM_MSG_DATA));
    while (!ch->sockEof && vrmTransferBatchHasRoom(&ch->batch)) {
        bool again;
        int rc;

        if ((rc = vrmChannelTxMayFill(ch, n)) <= 0) {
            if (rc < 0)
                return -1;
            break;
        }
        if (vrmChannelTxRead(ch, progress, &again) < 0)
            return -1;
        if (again && ch->stageFill > 0 && vrmChannelHoldPartial(ch))
            break;
        if (ch->stageFill > 0)
            vrmChannelTxTake(ch, n++);
        if (again)
            break;
    }

    if ((ann = ch->mode->txAnnounce(&ch->batch, vrmChannelCtlBuf(ch, n))) > 0) {
        vrmChannelPrepSend(ch, n, ann);
        n++;
        vrmStatsAdd(&ch->stats, VRM_STAT_CONTROL_SENT, 1);
    }
    if (n > 0) {
        VRM_DEBUG("channel %u: posting %u WRs (%u chunks) from seq %" G_GUINT64_FORMAT
                  ", %u in flight", ch->cfg.index, n, ch->batch.chunks, ch->postSeq,
                  ch->txf.inflight);
        if (vrmChannelPostBatch(ch, n, false) < 0)
            return -1;
        *progress = true;
    }
    return vrmChannelTxEnd(ch, progress);
}
