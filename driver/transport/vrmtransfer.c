/*
 * vrmtransfer.c: the transfer modes (see vrmtransfer.h)
 */
#include <config.h>

#include <arpa/inet.h>

#include "vrmtransfer.h"
#include "vrmlimits.h"


/* ---- write-imm: each chunk announces itself ----------------------------- */

static void
vrmTransferImmTxChunk(vrmTransferBatch *batch, struct ibv_send_wr *last,
                      guint32 ridx, guint32 len)
{
    last->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    last->imm_data = htonl(vrmProtoImmEncode(ridx, len));
    batch->chunks++;
}

static size_t
vrmTransferImmTxAnnounce(const vrmTransferBatch *batch G_GNUC_UNUSED,
                         guint8 *buf G_GNUC_UNUSED)
{
    return 0;
}

static void
vrmTransferImmRxImmediate(guint32 imm, vrmTransferArrival *a)
{
    vrmProtoImmDecode(imm, &a->key, &a->length);
    a->tagged = true;
}


/* ---- write-send: one DATA message per post names its chunks ------------- */

static void
vrmTransferSendTxChunk(vrmTransferBatch *batch, struct ibv_send_wr *last,
                       guint32 ridx, guint32 len)
{
    g_assert(batch->n < batch->limit && batch->n < VRM_TRANSFER_BATCH_MAX);
    last->opcode = IBV_WR_RDMA_WRITE;
    batch->entries[batch->n++] = (vrmProtoDataEntry) { .index = ridx, .length = len };
    batch->chunks++;
}

static size_t
vrmTransferSendTxAnnounce(const vrmTransferBatch *batch, guint8 *buf)
{
    if (batch->n == 0)
        return 0;
    return vrmProtoBuildData(buf, batch->entries, batch->n);
}

static void
vrmTransferSendRxMessage(const vrmProtoMsg *msg, guint32 i, vrmTransferArrival *a)
{
    vrmProtoGetU32Pair(msg, i, &a->key, &a->length);
    a->tagged = false;
}


/* In order of preference: the first whose capability was agreed wins; the
 * baseline, needing none, is last */
static const vrmTransferMode vrmTransferModes[] = {
    {
        .name = "write-imm",
        .cap = VRM_CAP_WRITE_IMM,
        .immediate = true,
        .txChunk = vrmTransferImmTxChunk,
        .txAnnounce = vrmTransferImmTxAnnounce,
        .rxImmediate = vrmTransferImmRxImmediate,
    },
    {
        .name = "write-send",
        .cap = 0,
        .txChunk = vrmTransferSendTxChunk,
        .txAnnounce = vrmTransferSendTxAnnounce,
        .rxMessage = vrmTransferSendRxMessage,
    },
};

const vrmTransferMode *
vrmTransferModeFor(guint32 caps)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmTransferModes); i++) {
        if ((caps & vrmTransferModes[i].cap) == vrmTransferModes[i].cap)
            return &vrmTransferModes[i];
    }
    g_assert_not_reached();
}

/* @caps without the modes a device lacking immediate data cannot carry */
guint32
vrmTransferCapsForDevice(guint32 caps, bool hasImmediate)
{
    size_t i;

    if (hasImmediate)
        return caps;
    for (i = 0; i < G_N_ELEMENTS(vrmTransferModes); i++) {
        if (vrmTransferModes[i].immediate)
            caps &= ~vrmTransferModes[i].cap;
    }
    return caps;
}

void
vrmTransferBatchStart(vrmTransferBatch *batch, guint32 limit)
{
    batch->n = 0;
    batch->chunks = 0;
    batch->limit = CLAMP(limit, 1, VRM_TRANSFER_BATCH_MAX);
}

/* Another chunk fits the post and its announcement */
bool
vrmTransferBatchHasRoom(const vrmTransferBatch *batch)
{
    return batch->chunks < VRM_TRANSFER_BATCH_MAX && batch->n < batch->limit;
}
