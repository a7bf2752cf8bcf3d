/*
 * vrmtransfertest.c: each transfer mode on its own (vrmtransfer.h): what
 * the sender's last WRITE and announcement carry, and what the receiver
 * reads back from them; which mode the capabilities pick. The channel
 * tests run both modes end to end on the fake provider.
 */
#include <config.h>

#include <string.h>
#include <arpa/inet.h>

#include "vrmtransfer.h"
#include "vrmcapability.h"
#include "vrmproto.h"
#include "vrmlimits.h"
#include "vrmtestmain.h"

static void
testModeFor(void)
{
    g_assert_cmpstr(vrmTransferModeFor(VRM_CAP_WRITE_IMM)->name, ==, "write-imm");
    g_assert_cmpstr(vrmTransferModeFor(VRM_CAP_WRITE_IMM | VRM_CAP_PIN_ALL)->name, ==,
                    "write-imm");
    g_assert_cmpstr(vrmTransferModeFor(0)->name, ==, "write-send");
    g_assert_cmpstr(vrmTransferModeFor(VRM_CAP_PIN_ALL | VRM_CAP_TCP)->name, ==,
                    "write-send");
    /* a device without immediate data keeps every other capability */
    g_assert_cmphex(vrmTransferCapsForDevice(VRM_CAP_WRITE_IMM | VRM_CAP_PIN_ALL, false), ==,
                    VRM_CAP_PIN_ALL);
    g_assert_cmphex(vrmTransferCapsForDevice(VRM_CAP_WRITE_IMM | VRM_CAP_PIN_ALL, true), ==,
                    VRM_CAP_WRITE_IMM | VRM_CAP_PIN_ALL);
    g_assert_cmpstr(vrmTransferModeFor(vrmTransferCapsForDevice(vrmCapabilityKnownMask(), false))->name,
                    ==, "write-send");
}

static void
testWriteImm(void)
{
    const vrmTransferMode *m = vrmTransferModeFor(VRM_CAP_WRITE_IMM);
    vrmTransferBatch b;
    struct ibv_send_wr wr;
    vrmTransferArrival a;
    guint8 buf[VRM_CONTROL_MESSAGE_MAX];
    guint32 i;

    g_assert_true(m->immediate);
    g_assert_nonnull(m->rxImmediate);
    g_assert_null(m->rxMessage);
    /* no announcement to fit: a post is bounded by its chunks only */
    vrmTransferBatchStart(&b, 1);
    for (i = 0; i < VRM_TRANSFER_BATCH_MAX; i++) {
        g_assert_true(vrmTransferBatchHasRoom(&b));
        memset(&wr, 0, sizeof(wr));
        m->txChunk(&b, &wr, i % 40, 65536 - i);
        g_assert_cmpint(wr.opcode, ==, IBV_WR_RDMA_WRITE_WITH_IMM);
        m->rxImmediate(ntohl(wr.imm_data), &a);
        g_assert_true(a.tagged);
        g_assert_cmpuint(a.key, ==, (i % 40) & VRM_PROTO_IMM_TAG_MASK);
        g_assert_cmpuint(a.length, ==, 65536 - i);
    }
    g_assert_false(vrmTransferBatchHasRoom(&b));
    g_assert_cmpuint(b.chunks, ==, VRM_TRANSFER_BATCH_MAX);
    g_assert_cmpuint(b.n, ==, 0);
    g_assert_cmpuint(m->txAnnounce(&b, buf), ==, 0);
}

static void
testWriteSend(void)
{
    const vrmTransferMode *m = vrmTransferModeFor(0);
    vrmTransferBatch b;
    struct ibv_send_wr wr;
    guint8 buf[VRM_CONTROL_MESSAGE_MAX];
    vrmProtoMsg msg;
    size_t len;
    guint32 i;

    g_assert_false(m->immediate);
    g_assert_null(m->rxImmediate);
    g_assert_nonnull(m->rxMessage);
    /* an empty post announces nothing */
    vrmTransferBatchStart(&b, 3);
    g_assert_cmpuint(m->txAnnounce(&b, buf), ==, 0);
    /* the batch ends where one DATA message is full */
    for (i = 0; i < 3; i++) {
        g_assert_true(vrmTransferBatchHasRoom(&b));
        memset(&wr, 0, sizeof(wr));
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        m->txChunk(&b, &wr, 100 + i, 4096 * (i + 1) + 1);
        g_assert_cmpint(wr.opcode, ==, IBV_WR_RDMA_WRITE);
    }
    g_assert_false(vrmTransferBatchHasRoom(&b));
    g_assert_cmpuint(b.chunks, ==, 3);
    len = m->txAnnounce(&b, buf);
    g_assert_cmpuint(len, >, 0);
    g_assert_cmpuint(len, <=, VRM_CONTROL_MESSAGE_MAX);
    /* what the receiver decodes names each chunk, untagged */
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    g_assert_cmpuint(msg.hdr.type, ==, VRM_MSG_DATA);
    g_assert_cmpuint(msg.hdr.repeat, ==, 3);
    for (i = 0; i < 3; i++) {
        vrmTransferArrival a;

        m->rxMessage(&msg, i, &a);
        g_assert_false(a.tagged);
        g_assert_cmpuint(a.key, ==, 100 + i);
        g_assert_cmpuint(a.length, ==, 4096 * (i + 1) + 1);
    }
    /* a limit of 0 (no room measured yet) still lets one chunk through;
     * one over the protocol's cap is cut to it */
    vrmTransferBatchStart(&b, 0);
    g_assert_cmpuint(b.limit, ==, 1);
    vrmTransferBatchStart(&b, VRM_TRANSFER_BATCH_MAX + 7);
    g_assert_cmpuint(b.limit, ==, VRM_TRANSFER_BATCH_MAX);
}

static const vrmTestFunc testFuncs[] = {
    { "/transfer/mode-for", testModeFor },
    { "/transfer/write-imm", testWriteImm },
    { "/transfer/write-send", testWriteSend },
};

VRM_TEST_MAIN(NULL, testFuncs)
