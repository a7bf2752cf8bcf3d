/*
 * vrmflow.c: ring and credit accounting of one channel direction
 */
#include <config.h>

#include <string.h>

#include "vrmflow.h"
#include "vrmproto.h"
#include "vrmerror.h"
#include "vrmi18n.h"

void
vrmTxFlowInit(vrmTxFlow *f, guint32 depth)
{
    f->depth = depth;
    f->next = 0;
    f->inflight = 0;
}

guint32
vrmTxFlowCredits(const vrmTxFlow *f)
{
    return f->depth - f->inflight;
}

bool
vrmTxFlowTake(vrmTxFlow *f, guint32 *index)
{
    if (f->inflight >= f->depth)
        return false;
    *index = f->next;
    f->next = (f->next + 1) % f->depth;
    f->inflight++;
    return true;
}

guint32
vrmTxFlowPeek(const vrmTxFlow *f, guint32 k)
{
    return (f->next + k) % f->depth;
}

int
vrmTxFlowCredit(vrmTxFlow *f, guint32 credits)
{
    if (credits == 0 || credits > f->inflight) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the peer returned %1$u credits while %2$u chunks were in flight"),
                       credits, f->inflight);
        return -1;
    }
    f->inflight -= credits;
    return 0;
}

void
vrmRxFlowInit(vrmRxFlow *f, guint32 depth, guint32 chunk_len)
{
    *f = (vrmRxFlow) { .depth = depth, .chunk_len = chunk_len };
}

int
vrmRxFlowFill(vrmRxFlow *f, guint32 index, guint32 length)
{
    if (index != f->fill) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the peer announced chunk %1$u where chunk %2$u was expected"),
                       index, f->fill);
        return -1;
    }
    if (f->filled + f->held + f->uncredited >= f->depth) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the peer wrote chunk %1$u without a credit"), index);
        return -1;
    }
    if (length == 0 || length > f->chunk_len) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the peer announced %1$u bytes in chunk %2$u of %3$u bytes"),
                       length, index, f->chunk_len);
        return -1;
    }
    f->fill = (f->fill + 1) % f->depth;
    f->filled++;
    f->bytes += length;
    return 0;
}

int
vrmRxFlowFillTag(vrmRxFlow *f, guint32 tag, guint32 length, guint32 *index)
{
    if (tag != (f->fill & VRM_PROTO_IMM_TAG_MASK)) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the immediate data names chunk tag %1$u where chunk %2$u was expected"),
                       tag, f->fill);
        return -1;
    }
    *index = f->fill;
    return vrmRxFlowFill(f, f->fill, length);
}

void
vrmRxFlowDrained(vrmRxFlow *f)
{
    g_assert(f->filled > 0);
    f->drain = (f->drain + 1) % f->depth;
    f->filled--;
    f->held++;
}

void
vrmRxFlowReleased(vrmRxFlow *f, guint32 n)
{
    g_assert(n <= f->held);
    f->held -= n;
    f->uncredited += n;
}

guint32
vrmRxFlowTakeCredits(vrmRxFlow *f, bool flush)
{
    guint32 threshold = MAX(1, f->depth / 4);
    guint32 n = f->uncredited;

    if (n == 0 || (!flush && n < threshold))
        return 0;
    f->uncredited = 0;
    return n;
}

void
vrmRemoteRingClear(vrmRemoteRing *rr)
{
    g_free(rr->addr);
    g_free(rr->rkey);
    g_free(rr->state);
    g_free(rr->reqTime);
    g_free(rr->queue);
    memset(rr, 0, sizeof(*rr));
}

bool
vrmRemoteRingComplete(const vrmRemoteRing *rr)
{
    return rr->depth && rr->described == rr->depth;
}

int
vrmRemoteRingDescribe(vrmRemoteRing *rr, const vrmProtoRingEntry *e, bool pinAll)
{
    if (vrmRemoteRingComplete(rr)) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the peer described its ring again after entry %1$u"),
                       rr->depth - 1);
        return -1;
    }
    if (vrmProtoRingEntryCheck(e, rr->described, rr->depth, rr->chunk) < 0)
        return -1;
    if (rr->depth == 0) {
        rr->depth = e->depth;
        rr->chunk = e->length;
        rr->addr = g_new0(guint64, e->depth);
        rr->rkey = g_new0(guint32, e->depth);
        rr->state = g_new0(guint8, e->depth);
        rr->reqTime = g_new0(gint64, e->depth);
        rr->queue = g_new0(guint32, e->depth);
    }
    rr->addr[e->index] = e->addr;
    rr->rkey[e->index] = e->rkey;
    rr->state[e->index] = pinAll ? VRM_REMOTE_REGISTERED : VRM_REMOTE_UNKNOWN;
    rr->described++;
    return 0;
}

void
vrmRemoteRingQueueRequests(vrmRemoteRing *rr, const vrmTxFlow *tx,
                           guint32 window, gint64 now)
{
    guint32 k, n = MIN(vrmTxFlowCredits(tx), window);

    g_assert(tx->depth == rr->depth);
    for (k = 0; k < n; k++) {
        guint32 idx = vrmTxFlowPeek(tx, k);

        if (rr->state[idx] != VRM_REMOTE_UNKNOWN)
            continue;
        /* each index is queued once (UNKNOWN -> REQUESTED), so the queue
         * never holds more than the peer's depth */
        g_assert(rr->queued < rr->depth);
        rr->state[idx] = VRM_REMOTE_REQUESTED;
        rr->reqTime[idx] = now;
        rr->queue[rr->queued++] = idx;
    }
}

guint32
vrmRemoteRingTakeRequests(vrmRemoteRing *rr, guint32 *out, guint32 max)
{
    guint32 n = MIN(rr->queued, max);

    memcpy(out, rr->queue, n * sizeof(*out));
    memmove(rr->queue, rr->queue + n, (rr->queued - n) * sizeof(*rr->queue));
    rr->queued -= n;
    return n;
}

int
vrmRemoteRingRegistered(vrmRemoteRing *rr, const vrmProtoRegResult *r,
                        gint64 now, gint64 *waited)
{
    if (r->index >= rr->depth || rr->state[r->index] != VRM_REMOTE_REQUESTED ||
        r->addr != rr->addr[r->index]) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the registration result for chunk %1$u does not match a request"),
                       r->index);
        return -1;
    }
    rr->rkey[r->index] = r->rkey;
    rr->state[r->index] = VRM_REMOTE_REGISTERED;
    *waited = now - rr->reqTime[r->index];
    return 0;
}

bool
vrmRemoteRingUsable(const vrmRemoteRing *rr, guint32 index)
{
    return index < rr->depth && rr->state[index] == VRM_REMOTE_REGISTERED;
}
