/*
 * vrmflow.c: ring and credit accounting of one channel direction
 */
#include <config.h>

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
                       _("The peer returned %1$u credits while %2$u chunks were in flight."),
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
                       _("The peer announced chunk %1$u where chunk %2$u was expected."),
                       index, f->fill);
        return -1;
    }
    if (f->filled + f->uncredited >= f->depth) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("The peer wrote chunk %1$u without a credit."), index);
        return -1;
    }
    if (length == 0 || length > f->chunk_len) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("The peer announced %1$u bytes in chunk %2$u of %3$u bytes."),
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
                       _("The immediate data names chunk tag %1$u where chunk %2$u was expected."),
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
    f->uncredited++;
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
