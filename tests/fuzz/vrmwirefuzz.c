/*
 * vrmwirefuzz.c: libFuzzer target for the wire codec (driver/protocol)
 *
 * The first byte picks a decoder, the rest is what a peer sent:
 *   0  a control message (vrmProtoMsgDecode), then every accessor of its
 *      type over every entry; an accepted message encodes back to the same
 *      bytes with the builders
 *   1  the private data of a REQ (and its check) and of a REP; the proofs
 *      of the mutual authentication over the fields decoded
 *   2  the reject record
 *   3  a WRITE_WITH_IMM immediate value and a ring description entry
 * Besides the sanitizers: no decoder reports VRM_ERR_INTERNAL, and every
 * accepted input round-trips.
 */
#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrmproto.h"
#include "vrmflow.h"
#include "vrmerror.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fuzzFail(const char *what)
{
    fprintf(stderr, "vrmwirefuzz: %s (%s)\n", what, vrmGetLastErrorMessage());
    abort();
}

static void
fuzzMessage(const uint8_t *data, size_t size)
{
    guint8 again[VRM_CONTROL_MESSAGE_MAX];
    vrmProtoMsg msg;
    size_t len = 0;
    guint32 i;

    if (vrmProtoMsgDecode(data, size, &msg) < 0) {
        if (vrmGetLastErrorCode() != VRM_ERR_PROTOCOL)
            fuzzFail("a refusal that is not a protocol error");
        return;
    }
    if (msg.hdr.len + VRM_PROTO_HEADER_LEN != size)
        fuzzFail("a length that does not match what arrived");
    switch ((vrmProtoMsgType)msg.hdr.type) {
    case VRM_MSG_ERROR: {
        g_autofree char *text = NULL;
        guint32 code;

        if (vrmProtoGetError(&msg, &code, &text) == 0)
            len = vrmProtoBuildError(again, code, text);
        else
            return;
        break;
    }
    case VRM_MSG_RAM_BLOCKS: {
        g_autofree vrmProtoRingEntry *e = g_new0(vrmProtoRingEntry, msg.hdr.repeat);

        for (i = 0; i < msg.hdr.repeat; i++) {
            vrmProtoGetRing(&msg, i, &e[i]);
            vrmProtoRingEntryCheck(&e[i], i, e[0].depth, e[0].length);
        }
        len = vrmProtoBuildRing(again, e, msg.hdr.repeat);
        break;
    }
    case VRM_MSG_REGISTER_REQUEST: {
        g_autofree guint32 *idx = g_new0(guint32, msg.hdr.repeat);

        for (i = 0; i < msg.hdr.repeat; i++)
            vrmProtoGetU32Pair(&msg, i, &idx[i], NULL);
        len = vrmProtoBuildRegRequest(again, idx, msg.hdr.repeat);
        break;
    }
    case VRM_MSG_REGISTER_RESULT: {
        g_autofree vrmProtoRegResult *r = g_new0(vrmProtoRegResult, msg.hdr.repeat);

        for (i = 0; i < msg.hdr.repeat; i++)
            vrmProtoGetRegResult(&msg, i, &r[i]);
        len = vrmProtoBuildRegResult(again, r, msg.hdr.repeat);
        break;
    }
    case VRM_MSG_DATA: {
        g_autofree vrmProtoDataEntry *d = g_new0(vrmProtoDataEntry, msg.hdr.repeat);

        for (i = 0; i < msg.hdr.repeat; i++)
            vrmProtoGetU32Pair(&msg, i, &d[i].index, &d[i].length);
        len = vrmProtoBuildData(again, d, msg.hdr.repeat);
        break;
    }
    case VRM_MSG_EOF:
    case VRM_MSG_EOF_ACK:
        len = vrmProtoBuildU64(again, msg.hdr.type, vrmProtoGetU64(&msg));
        break;
    case VRM_MSG_AUTH:
        len = vrmProtoBuildAuth(again, vrmProtoGetAuth(&msg));
        break;
    case VRM_MSG_CHANNEL_OPEN_TCP: {
        vrmProtoTcpOpen open;

        vrmProtoGetTcpOpen(&msg, &open);
        len = vrmProtoBuildTcpOpen(again, &open);
        break;
    }
    default: {
        guint32 a, b;

        vrmProtoGetU32Pair(&msg, 0, &a, &b);
        len = vrmProtoBuildU32Pair(again, msg.hdr.type, a, b);
        break;
    }
    }
    if (len != size || memcmp(again, data, size) != 0)
        fuzzFail("an accepted message does not encode back to the same bytes");
}

static void
fuzzConnData(const uint8_t *data, size_t size)
{
    vrmProtoConnReq req;
    vrmProtoConnRep rep;
    guint8 again[VRM_PROTO_REP_LEN];
    guint8 mac[VRM_PROTO_MAC_LEN];
    vrmToken token = { { 0 } };

    if (vrmProtoConnReqDecode(data, size, &req) == 0) {
        vrmProtoConnReqEncode(&req, again);
        if (memcmp(again, data, VRM_PROTO_REQ_LEN) != 0)
            fuzzFail("an accepted REQ does not encode back");
        vrmProtoConnReqCheck(&req, 1 + (data[0] % 64), data[0] % (VRM_DISK_CHANNELS_MAX + 1));
        if (vrmGetLastErrorCode() == VRM_ERR_INTERNAL)
            fuzzFail("an internal error");
        vrmProtoMacDestination(&token, req.nonce, req.nonce, req.flags, req.channel,
                               req.channels, mac);
    }
    if (vrmProtoConnRepDecode(data, size, &rep) == 0) {
        vrmProtoConnRepEncode(&rep, again);
        if (memcmp(again, data, VRM_PROTO_REP_LEN) != 0)
            fuzzFail("an accepted REP does not encode back");
        vrmProtoMacSource(&token, rep.nonce, rep.nonce, rep.flags, rep.channel,
                          rep.channels, mac);
        /* a forged proof that holds would be a finding */
        if (vrmProtoMacEqual(mac, rep.mac, VRM_PROTO_MAC_SOURCE_LEN))
            fuzzFail("a REP carries a valid proof for the zero token");
    }
}

static void
fuzzReject(const uint8_t *data, size_t size)
{
    guint32 version;
    int reason = vrmProtoRejectDecode(data, size, &version);

    if (reason < VRM_REJECT_NONE || reason >= VRM_REJECT_LAST)
        fuzzFail("a reject reason out of range");
    if (!vrmProtoRejectReasonToString(reason))
        fuzzFail("a reject reason without a sentence");
}

static void
fuzzImm(const uint8_t *data, size_t size)
{
    vrmProtoRingEntry e;
    guint32 imm = 0, tag, len;
    size_t i;

    for (i = 0; i < 4 && i < size; i++)
        imm = (imm << 8) | data[i];
    vrmProtoImmDecode(imm, &tag, &len);
    if (vrmProtoImmEncode(tag, len) != imm)
        fuzzFail("an immediate value does not encode back");
    if (size < 4 + 24)
        return;
    memcpy(&e, data + 4, MIN(sizeof(e), size - 4));
    vrmProtoRingEntryCheck(&e, e.index, 0, 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    vrmResetLastError();
    switch (data[0] % 4) {
    case 0:
        fuzzMessage(data + 1, size - 1);
        break;
    case 1:
        fuzzConnData(data + 1, size - 1);
        break;
    case 2:
        fuzzReject(data + 1, size - 1);
        break;
    case 3:
        fuzzImm(data + 1, size - 1);
        break;
    }
    return 0;
}
