/*
 * vrmtransfer.h: transfer modes, how the receiver learns that a chunk has
 * landed in its ring
 *
 * The bytes always travel as RDMA WRITEs into the peer's ring (vrmchannel.c
 * posts them); a mode decides how each chunk is announced, in the manner
 * of QEMU's MultiFDMethods:
 *   write-imm   the chunk's last WRITE carries immediate data (a tag of its
 *               ring index and its length): one completion per chunk at
 *               the receiver, nothing else on the wire (VRM_CAP_WRITE_IMM);
 *   write-send  plain WRITEs, then one DATA control message (a SEND) per
 *               batch names the chunks: the baseline, and iWARP's mode, which
 *               has no immediate data.
 * The agreed capabilities pick the mode (vrmTransferModeFor). Adding one
 * is a row here; docs/index.rst lists the files it touches.
 */
#pragma once

#include <stdbool.h>

#include <glib.h>
#include <infiniband/verbs.h>

#include "vrmproto.h"

/* chunks one post carries (and one DATA message names, at most) */
#define VRM_TRANSFER_BATCH_MAX 255

/* The chunks of one post, as the sender gathers them */
typedef struct {
    vrmProtoDataEntry entries[VRM_TRANSFER_BATCH_MAX];
    guint32 n;          /* entries the announcement will name */
    guint32 chunks;     /* chunks in the post */
    guint32 limit;      /* entries one announcement may name (>= 1) */
} vrmTransferBatch;

/* A chunk as the receiver learns of it */
typedef struct {
    guint32 key;        /* the ring index, or its tag if @tagged */
    guint32 length;
    bool tagged;        /* only index % 32 travelled: vrmRxFlowFillTag */
} vrmTransferArrival;

typedef struct _vrmTransferMode vrmTransferMode;
struct _vrmTransferMode {
    const char *name;
    guint32 cap;            /* the capability bit that selects it; 0: baseline */
    bool immediate;         /* needs WRITE_WITH_IMM (iWARP has none) */

    /* sender: @last is the chunk's last WRITE (@len bytes into ring chunk
     * @ridx): set its opcode and, if this mode announces per post, note
     * the chunk in @batch */
    void (*txChunk)(vrmTransferBatch *batch, struct ibv_send_wr *last,
                    guint32 ridx, guint32 len);
    /* sender: the message that announces @batch, built into @buf; its
     * length, 0 if this mode sends none */
    size_t (*txAnnounce)(const vrmTransferBatch *batch, guint8 *buf);

    /* receiver: a WRITE with immediate data @imm (host order) completed;
     * NULL: this mode never sends one, so it is a protocol error */
    void (*rxImmediate)(guint32 imm, vrmTransferArrival *a);
    /* receiver: entry @i of a DATA message; NULL: the mode never sends one */
    void (*rxMessage)(const vrmProtoMsg *msg, guint32 i, vrmTransferArrival *a);
};

const vrmTransferMode *vrmTransferModeFor(guint32 caps);
guint32 vrmTransferCapsForDevice(guint32 caps, bool hasImmediate);

void vrmTransferBatchStart(vrmTransferBatch *batch, guint32 limit);
bool vrmTransferBatchHasRoom(const vrmTransferBatch *batch);
