/*
 * vrmchannelrx.c: a channel's receiving side: the chunks the peer wrote into our
 * ring -> QEMU's socket (spliced where it can be), credits back with READY
 */
#include <config.h>

#include "vrmchannelpriv.h"

/*
 * Ring bytes into QEMU's socket: spliced where the system can (the socket
 * then reads the ring's pages itself), copied otherwise. Returns the
 * bytes written, or -1 and errno.
 */
static ssize_t
vrmChannelDeliverBytes(vrmChannel *ch, const guint8 *buf, size_t len)
{
    ssize_t r;

    if (ch->deliver == VRM_CHANNEL_DELIVER_UNSET) {
        ch->deliver = VRM_CHANNEL_DELIVER_SPLICE;
        if (!vrmSpliceSafe(ch->sock)) {
            VRM_DEBUG("channel %u: QEMU's socket is not a UNIX one: copying",
                      ch->cfg.index);
            ch->deliver = VRM_CHANNEL_DELIVER_COPY;
        } else if (vrmSpliceOpen(&ch->splice, ch->ring.chunk) < 0) {
            VRM_INFO("channel %u: no pipe for zero-copy delivery (%s); copying",
                     ch->cfg.index, g_strerror(errno));
            ch->deliver = VRM_CHANNEL_DELIVER_COPY;
        }
    }
    if (ch->deliver == VRM_CHANNEL_DELIVER_SPLICE) {
        if ((r = vrmSpliceWrite(&ch->splice, ch->sock, buf, len)) > 0) {
            ch->rxSplicedEnd = vrmChannelRxWritten(ch) + r;
            vrmStatsAdd(&ch->stats, VRM_STAT_BYTES_SPLICED, r);
        }
        if (r >= 0 || !vrmSpliceUnsupported(errno))
            return r;
        /* what the pipe held is still in the ring: copied from there on */
        VRM_INFO("channel %u: cannot splice into QEMU's socket (%s); copying",
                 ch->cfg.index, g_strerror(errno));
        vrmSpliceClose(&ch->splice);
        ch->deliver = VRM_CHANNEL_DELIVER_COPY;
    }
    return send(ch->sock, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/*
 * A drained chunk is free for the peer again once no byte of it can still
 * be read from our memory: at once when it was copied; when part of it was
 * spliced, once QEMU has read past its last spliced byte (vrmSpliceTaken:
 * never more than QEMU read). Chunks are freed oldest first, as the peer
 * writes them again in ring order.
 */
static guint32
vrmChannelOldestHeld(const vrmChannel *ch)
{
    return (ch->rxf.drain + ch->rxf.depth - ch->rxf.held) % ch->rxf.depth;
}

static int
vrmChannelReleaseHeld(vrmChannel *ch)
{
    guint32 oldest, n = 0;
    guint64 taken = 0;
    bool asked = false;

    if (!ch->rxf.held)
        return 0;
    oldest = vrmChannelOldestHeld(ch);
    while (n < ch->rxf.held) {
        guint64 need = ch->rxFreeAt[(oldest + n) % ch->rxf.depth];

        if (need > taken && !asked) {
            if (vrmSpliceTaken(ch->sock, vrmChannelRxWritten(ch), &taken) < 0) {
                vrmReportSystemError(errno,
                                     _("channel %1$u: cannot learn how much QEMU has read of its socket"),
                                     ch->cfg.index);
                return -1;
            }
            asked = true;
        }
        if (need > taken)
            break;
        n++;
    }
    if (n)
        vrmRxFlowReleased(&ch->rxf, n);
    return 0;
}

/* Chunks QEMU still reads from our memory, whose credits the peer may
 * need: look again soon. Not while the socket is full: the wait is then
 * for room (POLLOUT, when the socket is three quarters read), by which
 * time the held chunk's bytes are behind QEMU, and a look every
 * millisecond would cost a busy host more than the credit is worth. */
bool
vrmChannelAwaitsReader(const vrmChannel *ch)
{
    return ch->rx != VRM_CHANNEL_RX_DONE && !ch->rxBlocked && ch->rxf.held &&
           ch->rxFreeAt[vrmChannelOldestHeld(ch)] > 0;
}

/* our ring -> socket; credits come due as chunks are freed */
int
vrmChannelPumpRx(vrmChannel *ch, bool *progress)
{
    const vrmChannelConfig *c = &ch->cfg;

    /* try again each round: a full socket is seen by send() itself */
    ch->rxBlocked = false;
    /* a socket that failed while the owner looks at QEMU is left alone */
    if (ch->endErr && !ch->endReading)
        return 0;
    while (ch->sock >= 0 && ch->rxf.filled > 0 && !ch->rxBlocked) {
        guint32 idx = ch->rxf.drain;
        guint32 len = ch->rxLen[idx];
        ssize_t r = vrmChannelDeliverBytes(ch, ch->ring.mem + (size_t)idx * ch->ring.chunk + ch->rxOff,
                                           len - ch->rxOff);

        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
                ch->rxBlocked = true;
                break;
            }
            return vrmChannelStreamEnds(ch, errno, false);
        }
        ch->rxOff += r;
        vrmStatsAdd(&ch->stats, VRM_STAT_BYTES_RECEIVED, r);
        vrmChannelNoteBytes(ch);
        *progress = true;
        if (ch->rxOff == len) {
            vrmChannelTraceChunk(ch, "delivered", ch->rxTotal,
                                 ch->ring.mem + (size_t)idx * ch->ring.chunk, len);
            /* any byte of it spliced: free once QEMU read past the last */
            ch->rxFreeAt[idx] = ch->rxSplicedEnd > ch->rxTotal ? ch->rxSplicedEnd : 0;
            ch->rxTotal += len;
            ch->rxOff = 0;
            vrmRxFlowDrained(&ch->rxf);
        }
        if (c->fault == VRM_ENGINE_FAULT_KILL && !ch->faultDone &&
            __atomic_load_n(&ch->stats.v[VRM_STAT_BYTES_RECEIVED], __ATOMIC_RELAXED) >=
            c->faultBytes) {
            VRM_WARN("test hook: killing this engine after %llu bytes", c->faultBytes);
            ch->faultDone = true;
            kill(getpid(), SIGKILL);
        }
    }
    if (ch->sock >= 0 && vrmChannelReleaseHeld(ch) < 0)
        return -1;
    /* after our EOF_ACK the peer writes nothing more: no READY then;
     * while QEMU still reads held chunks, their release follows, and the
     * credits go together */
    if (ch->rx == VRM_CHANNEL_RX_DONE)
        (void)vrmRxFlowTakeCredits(&ch->rxf, true);      /* dropped */
    else
        ch->creditsDue += vrmRxFlowTakeCredits(&ch->rxf,
                                               ch->rxf.filled == 0 && ch->rxf.held == 0);
    return 0;
}
