/*
 * vrmprototest.c: the wire codec of protocol version 2, its bounds checks
 * and the proofs of the mutual authentication
 */
#include <config.h>

#include <string.h>

#include "vrmcapability.h"
#include "vrmproto.h"
#include "vrmerror.h"
#include "vrmtestmain.h"

static const vrmToken testTokenValue = { {
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
    0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
} };
static const vrmToken *const testToken = &testTokenValue;

static const guint8 nonceD[VRM_PROTO_NONCE_LEN] = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
};
static const guint8 nonceS[VRM_PROTO_NONCE_LEN] = {
    16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
};

static void
testConnReqRoundTrip(void)
{
    vrmProtoConnReq in = {
        .version = 2, .flags = 3, .channel = 5, .channels = 8,
    };
    vrmProtoConnReq out;
    guint8 buf[VRM_PROTO_REQ_LEN];
    /* the documented layout, byte for byte */
    static const guint8 want[VRM_PROTO_REQ_LEN] = {
        0, 0, 0, 2, 0, 0, 0, 3, 0, 5, 0, 8,
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
        0, 0, 0, 0,
    };
    guint8 padded[56] = { 0 };

    G_STATIC_ASSERT(VRM_PROTO_REQ_LEN <= VRM_PROTO_PRIVATE_DATA_MAX);
    memcpy(in.nonce, nonceD, sizeof(in.nonce));
    vrmProtoConnReqEncode(&in, buf);
    g_assert_cmpmem(buf, sizeof(buf), want, sizeof(want));
    g_assert_cmpint(vrmProtoConnReqDecode(buf, sizeof(buf), &out), ==, 0);
    g_assert_cmpuint(out.version, ==, 2);
    g_assert_cmpuint(out.flags, ==, 3);
    g_assert_cmpuint(out.channel, ==, 5);
    g_assert_cmpuint(out.channels, ==, 8);
    g_assert_cmpmem(out.nonce, sizeof(out.nonce), nonceD, sizeof(nonceD));

    /* rdma_cm may pad private data with zeros: accepted */
    memcpy(padded, buf, sizeof(buf));
    g_assert_cmpint(vrmProtoConnReqDecode(padded, sizeof(padded), &out), ==, 0);
}

static void
testConnRepRoundTrip(void)
{
    vrmProtoConnRep in = {
        .version = 2, .flags = 1, .channel = 0, .channels = 4,
    };
    vrmProtoConnRep out;
    guint8 buf[VRM_PROTO_REP_LEN] = { 0 };
    guint8 padded[56] = { 0 };

    G_STATIC_ASSERT(VRM_PROTO_REP_LEN <= VRM_PROTO_PRIVATE_DATA_MAX);
    memcpy(in.nonce, nonceS, sizeof(in.nonce));
    memset(in.mac, 0xab, sizeof(in.mac));
    vrmProtoConnRepEncode(&in, buf);
    g_assert_cmpint(vrmProtoConnRepDecode(buf, sizeof(buf), &out), ==, 0);
    g_assert_cmpuint(out.version, ==, 2);
    g_assert_cmpuint(out.channels, ==, 4);
    g_assert_cmpmem(out.nonce, 16, nonceS, 16);
    g_assert_cmpmem(out.mac, 16, in.mac, 16);
    memcpy(padded, buf, sizeof(buf));
    g_assert_cmpint(vrmProtoConnRepDecode(padded, sizeof(padded), &out), ==, 0);
    /* short, or a reserved field that is not zero */
    g_assert_cmpint(vrmProtoConnRepDecode(buf, sizeof(buf) - 1, &out), ==, -1);
    buf[47] = 1;
    g_assert_cmpint(vrmProtoConnRepDecode(buf, sizeof(buf), &out), ==, -1);
    g_assert_cmpint(vrmProtoConnRepDecode(NULL, 0, &out), ==, -1);
}

static void
testConnReqBounds(void)
{
    guint8 buf[VRM_PROTO_REQ_LEN] = { 0 };
    vrmProtoConnReq out;

    g_assert_cmpint(vrmProtoConnReqDecode(NULL, 0, &out), ==, -1);
    g_assert_cmpint(vrmProtoConnReqDecode(buf, sizeof(buf) - 1, &out), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "31 bytes"));
    buf[31] = 1;    /* reserved */
    g_assert_cmpint(vrmProtoConnReqDecode(buf, sizeof(buf), &out), ==, -1);
}

static void
testConnReqCheck(void)
{
    vrmProtoConnReq req = { .version = 2, .flags = 3, .channel = 1, .channels = 4 };

    g_assert_cmpint(vrmProtoConnReqCheck(&req, 4, 0), ==, VRM_REJECT_NONE);
    /* the agreed maximum is the smaller one */
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 9, 0), ==, VRM_REJECT_NONE);
    req.channel = 3;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 3, 0), ==, VRM_REJECT_CHANNEL);
    req.channel = 4;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 9, 0), ==, VRM_REJECT_CHANNEL);
    req.channel = 0;
    req.channels = 0;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 9, 0), ==, VRM_REJECT_CHANNEL);
    req.channels = 4;

    /* disk channels: numbered from VRM_DISK_CHANNEL_BASE, only when the
     * request offers the capability and this job carries that many */
    req.flags = 3 | VRM_CAP_DISKS;
    req.channel = VRM_DISK_CHANNEL_BASE;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 4, 2), ==, VRM_REJECT_NONE);
    req.channel = VRM_DISK_CHANNEL_BASE + 1;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 1, 2), ==, VRM_REJECT_NONE);
    req.channel = VRM_DISK_CHANNEL_BASE + 2;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 4, 2), ==, VRM_REJECT_CHANNEL);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "disk channel 2, this job carries 2"));
    req.channel = VRM_DISK_CHANNEL_BASE;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 4, 0), ==, VRM_REJECT_CHANNEL);
    req.flags = 3;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 4, 2), ==, VRM_REJECT_CHANNEL);
    /* between the two ranges: neither */
    req.flags = 3 | VRM_CAP_DISKS;
    req.channel = VRM_DISK_CHANNEL_BASE - 1;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 4, 2), ==, VRM_REJECT_CHANNEL);
    req.channel = 0;
    req.flags = 3;

    /* version 1 (nothing released speaks it) and versions from the future */
    req.version = 1;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 4, 0), ==, VRM_REJECT_VERSION);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_VERSION);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "protocol version 1 was refused"));
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "install the same virt-rdma on both hosts"));
    req.version = 3;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 4, 0), ==, VRM_REJECT_VERSION);
    req.version = 0;
    g_assert_cmpint(vrmProtoConnReqCheck(&req, 4, 0), ==, VRM_REJECT_VERSION);
}

/* Known answers, computed independently (Python hmac/hashlib) */
static void
testMacs(void)
{
    static const guint8 wantSource[VRM_PROTO_MAC_SOURCE_LEN] = {
        0x97, 0xa2, 0x2d, 0x10, 0x4c, 0x6f, 0x29, 0xe4, 0x4d, 0xe1, 0xcb, 0x55, 0x25, 0xd8, 0xdd, 0x1c
    };
    static const guint8 wantDestination[VRM_PROTO_MAC_LEN] = {
        0x33, 0x4d, 0xcc, 0x82, 0x6c, 0x4e, 0x92, 0xb8, 0xe5, 0x3c, 0xb7, 0x87, 0x72, 0x82, 0x98, 0xc4, 0x73, 0x9f, 0xcc, 0xa8, 0x49, 0x66, 0x54, 0x11, 0x0e, 0xc1, 0xa8, 0x4a, 0x35, 0xac, 0xa8, 0x73
    };
    guint8 mac[VRM_PROTO_MAC_LEN];
    vrmToken other = *testToken;

    vrmProtoMacSource(testToken, nonceD, nonceS, 3, 5, 8, mac);
    g_assert_cmpmem(mac, VRM_PROTO_MAC_SOURCE_LEN, wantSource, sizeof(wantSource));
    vrmProtoMacDestination(testToken, nonceS, nonceD, 3, 5, 8, mac);
    g_assert_cmpmem(mac, VRM_PROTO_MAC_LEN, wantDestination, sizeof(wantDestination));
    g_assert_true(vrmProtoMacEqual(mac, wantDestination, VRM_PROTO_MAC_LEN));

    /* every input counts: the token, the nonces and their order, the
     * channel's identity, the role (label) */
    other.bytes[0] ^= 1;
    vrmProtoMacSource(&other, nonceD, nonceS, 3, 5, 8, mac);
    g_assert_false(vrmProtoMacEqual(mac, wantSource, sizeof(wantSource)));
    vrmProtoMacSource(testToken, nonceS, nonceD, 3, 5, 8, mac);
    g_assert_false(vrmProtoMacEqual(mac, wantSource, sizeof(wantSource)));
    vrmProtoMacSource(testToken, nonceD, nonceS, 1, 5, 8, mac);
    g_assert_false(vrmProtoMacEqual(mac, wantSource, sizeof(wantSource)));
    vrmProtoMacSource(testToken, nonceD, nonceS, 3, 4, 8, mac);
    g_assert_false(vrmProtoMacEqual(mac, wantSource, sizeof(wantSource)));
    vrmProtoMacSource(testToken, nonceD, nonceS, 3, 5, 9, mac);
    g_assert_false(vrmProtoMacEqual(mac, wantSource, sizeof(wantSource)));
    vrmProtoMacDestination(testToken, nonceD, nonceS, 3, 5, 8, mac);
    g_assert_false(vrmProtoMacEqual(mac, wantSource, sizeof(wantSource)));

    /* fresh nonces */
    {
        guint8 a[VRM_PROTO_NONCE_LEN], b[VRM_PROTO_NONCE_LEN];

        g_assert_cmpint(vrmProtoNonce(a), ==, 0);
        g_assert_cmpint(vrmProtoNonce(b), ==, 0);
        g_assert_false(memcmp(a, b, sizeof(a)) == 0);
    }
}

static void
testAuthMessage(void)
{
    guint8 buf[VRM_CONTROL_MESSAGE_MAX];
    guint8 mac[VRM_PROTO_MAC_LEN];
    size_t len;
    vrmProtoMsg msg;
    guint32 a;

    memset(mac, 0x5a, sizeof(mac));
    len = vrmProtoBuildAuth(buf, mac);
    g_assert_cmpuint(len, ==, VRM_PROTO_HEADER_LEN + 32);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    g_assert_cmpuint(msg.hdr.type, ==, VRM_MSG_AUTH);
    g_assert_cmpmem(vrmProtoGetAuth(&msg), 32, mac, 32);
    /* one entry only, of exactly 32 bytes */
    buf[11] = 2;
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, -1);
    buf[11] = 1;
    g_assert_cmpint(vrmProtoMsgDecode(buf, len - 1, &msg), ==, -1);

    len = vrmProtoBuildU32Pair(buf, VRM_MSG_CHANNEL_CONNECT, 3, 0);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    vrmProtoGetU32Pair(&msg, 0, &a, NULL);
    g_assert_cmpuint(a, ==, 3);
    buf[len - 1] = 1;   /* padding */
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, -1);

    /* version 1's CHANNEL_UNUSED is refused */
    len = vrmProtoBuildU32Pair(buf, VRM_MSG_CHANNEL_UNUSED, 1, 0);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "not used in protocol version 2"));
}

/* CHANNEL_OPEN_TCP: the layout of docs/protocol.rst, and every field that
 * a hostile source could get wrong */
static void
testTcpOpen(void)
{
    guint8 buf[VRM_CONTROL_MESSAGE_MAX];
    vrmProtoTcpOpen in = { .channel = 2, .family = VRM_PROTO_FAMILY_IPV4, .port = 49152,
                           .addr = { 198, 18, 0, 2 } };
    vrmProtoTcpOpen out;
    const guint8 wire[] = { 0, 0, 0, 2, 0, 4, 0xc0, 0x00, 198, 18, 0, 2,
                            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    size_t len;
    vrmProtoMsg msg;

    len = vrmProtoBuildTcpOpen(buf, &in);
    g_assert_cmpuint(len, ==, VRM_PROTO_HEADER_LEN + VRM_PROTO_TCP_OPEN_LEN);
    g_assert_cmpmem(buf + VRM_PROTO_HEADER_LEN, sizeof(wire), wire, sizeof(wire));
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    vrmProtoGetTcpOpen(&msg, &out);
    g_assert_cmpmem(&out, sizeof(out), &in, sizeof(in));

    /* IPv6 uses all 16 bytes */
    in.family = VRM_PROTO_FAMILY_IPV6;
    memset(in.addr, 0xfd, sizeof(in.addr));
    len = vrmProtoBuildTcpOpen(buf, &in);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    /* ... IPv4 only the first 4 */
    in.family = VRM_PROTO_FAMILY_IPV4;
    len = vrmProtoBuildTcpOpen(buf, &in);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "IPv4 address is not zero"));
    memset(in.addr + 4, 0, 12);
    in.family = 10;     /* AF_INET6's number: not ours */
    len = vrmProtoBuildTcpOpen(buf, &in);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "address family 10"));
    in.family = VRM_PROTO_FAMILY_IPV4;
    in.port = 0;
    len = vrmProtoBuildTcpOpen(buf, &in);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "port 0"));
    /* one entry of exactly 24 bytes */
    in.port = 1;
    len = vrmProtoBuildTcpOpen(buf, &in);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len - 1, &msg), ==, -1);
    buf[11] = 2;
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, -1);
}

static void
testReject(void)
{
    guint8 buf[VRM_PROTO_REJECT_LEN];
    guint8 padded[148] = { 0 };
    guint32 version;
    int i;

    for (i = VRM_REJECT_VERSION; i < VRM_REJECT_LAST; i++) {
        vrmProtoRejectEncode(i, 2, buf);
        g_assert_cmpint(vrmProtoRejectDecode(buf, sizeof(buf), &version), ==, i);
        g_assert_cmpuint(version, ==, 2);
        g_assert_nonnull(vrmProtoRejectReasonToString(i));
    }
    /* the layout: magic, the rejecting side's version, the reason */
    vrmProtoRejectEncode(VRM_REJECT_JOB_ENDED, 2, buf);
    {
        static const guint8 want[] = { 0x56, 0x52, 0x4d, 0x52, 0, 0, 0, 2, 0, 0, 0, 7 };

        g_assert_cmpmem(buf, sizeof(buf), want, sizeof(want));
    }
    g_assert_cmpstr(vrmProtoRejectReasonToString(VRM_REJECT_JOB_ENDED), ==,
                    "the source engine's job has ended");
    vrmProtoRejectEncode(VRM_REJECT_VERSION, 1, buf);
    memcpy(padded, buf, sizeof(buf));
    g_assert_cmpint(vrmProtoRejectDecode(padded, sizeof(padded), &version), ==, VRM_REJECT_VERSION);
    g_assert_cmpuint(version, ==, 1);
    /* not ours: a reject by a host where nobody listens */
    g_assert_cmpint(vrmProtoRejectDecode(NULL, 0, NULL), ==, VRM_REJECT_NONE);
    memset(padded, 0, sizeof(padded));
    g_assert_cmpint(vrmProtoRejectDecode(padded, sizeof(padded), NULL), ==, VRM_REJECT_NONE);
    g_assert_cmpint(vrmProtoRejectDecode(buf, 11, NULL), ==, VRM_REJECT_NONE);
    /* ours but with a reason out of range */
    vrmProtoRejectEncode(99, 2, buf);
    g_assert_cmpint(vrmProtoRejectDecode(buf, sizeof(buf), NULL), ==, VRM_REJECT_MALFORMED);
}

static void
testNegotiate(void)
{
    /* the engines agree on the connect private data's flags as the helpers
     * do on the offer's (one function): the seed's rule, intersection,
     * unknown bits ignored */
    g_assert_cmphex(vrmCapabilityIntersect(0x3, 0x3), ==, 0x3);
    g_assert_cmphex(vrmCapabilityIntersect(0x3, 0x1), ==, 0x1);
    g_assert_cmphex(vrmCapabilityIntersect(0x1, 0x2), ==, 0x0);
    g_assert_cmphex(vrmCapabilityIntersect(0xffffffff, 0xffffffff), ==, vrmCapabilityKnownMask());
    g_assert_cmphex(vrmCapabilityIntersect(0xf, 0xc), ==, VRM_CAP_DISKS | VRM_CAP_TCP);
    g_assert_cmphex(vrmCapabilityIntersect(0x3, 0x80000002), ==, 0x2);
    g_assert_cmphex(vrmCapabilityIntersect(0, 0xffffffff), ==, 0);
}

static void
testSettingsRanges(void)
{
    g_assert_cmpint(vrmProtoCheckChunkSize(64 * 1024), ==, 0);
    g_assert_cmpint(vrmProtoCheckChunkSize(1024 * 1024), ==, 0);
    g_assert_cmpint(vrmProtoCheckChunkSize(64 * 1024 * 1024), ==, 0);
    g_assert_cmpint(vrmProtoCheckChunkSize(32 * 1024), ==, -1);
    g_assert_cmpint(vrmProtoCheckChunkSize(128 * 1024 * 1024), ==, -1);
    g_assert_cmpint(vrmProtoCheckChunkSize(3 * 1024 * 1024), ==, -1);
    g_assert_cmpint(vrmProtoCheckChunkSize(0), ==, -1);
    g_assert_cmpint(vrmProtoCheckDepth(1), ==, -1);
    g_assert_cmpint(vrmProtoCheckDepth(2), ==, 0);
    g_assert_cmpint(vrmProtoCheckDepth(1024), ==, 0);
    g_assert_cmpint(vrmProtoCheckDepth(1025), ==, -1);
    g_assert_cmpint(vrmProtoCheckChannels(0), ==, -1);
    g_assert_cmpint(vrmProtoCheckChannels(1), ==, 0);
    g_assert_cmpint(vrmProtoCheckChannels(64), ==, 0);
    g_assert_cmpint(vrmProtoCheckChannels(65), ==, -1);
}

static void
testHeaderLayout(void)
{
    guint8 buf[VRM_CONTROL_MESSAGE_MAX];
    size_t len = vrmProtoBuildU32Pair(buf, VRM_MSG_READY, 7, 0);
    static const guint8 want[] = {
        0, 0, 0, 8, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0,
        0, 0, 0, 7, 0, 0, 0, 0,
    };
    vrmProtoMsg msg;
    guint32 a, b;

    g_assert_cmpmem(buf, len, want, sizeof(want));
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    g_assert_cmpuint(msg.hdr.type, ==, VRM_MSG_READY);
    vrmProtoGetU32Pair(&msg, 0, &a, &b);
    g_assert_cmpuint(a, ==, 7);
    g_assert_cmpuint(b, ==, 0);
}

static void
testSeedNumbering(void)
{
    /* the seed's numbering is part of the wire format */
    g_assert_cmpint(VRM_MSG_NONE, ==, 0);
    g_assert_cmpint(VRM_MSG_ERROR, ==, 1);
    g_assert_cmpint(VRM_MSG_READY, ==, 2);
    g_assert_cmpint(VRM_MSG_QEMU_FILE, ==, 3);
    g_assert_cmpint(VRM_MSG_RAM_BLOCKS, ==, 4);
    g_assert_cmpint(VRM_MSG_COMPRESS, ==, 5);
    g_assert_cmpint(VRM_MSG_REGISTER_REQUEST, ==, 6);
    g_assert_cmpint(VRM_MSG_REGISTER_RESULT, ==, 7);
    g_assert_cmpint(VRM_MSG_REGISTER_FINISHED, ==, 8);
    g_assert_cmpint(VRM_MSG_CHANNEL_OPEN, ==, 9);
    g_assert_cmpint(VRM_MSG_DATA, ==, 10);
    g_assert_cmpint(VRM_MSG_EOF, ==, 11);
    g_assert_cmpint(VRM_MSG_EOF_ACK, ==, 12);
    g_assert_cmpint(VRM_MSG_CHANNEL_UNUSED, ==, 13);
    g_assert_cmpint(VRM_MSG_KEEPALIVE, ==, 14);
    g_assert_cmpint(VRM_MSG_AUTH, ==, 15);
    g_assert_cmpint(VRM_MSG_CHANNEL_CONNECT, ==, 16);
    g_assert_cmpint(VRM_MSG_CHANNEL_OPEN_TCP, ==, 17);
    g_assert_cmpstr(vrmProtoMsgTypeToString(VRM_MSG_REGISTER_RESULT), ==, "REGISTER_RESULT");
    g_assert_null(vrmProtoMsgTypeToString(VRM_MSG_LAST));
    g_assert_null(vrmProtoMsgTypeToString(-1));
}

static void
testRingRoundTrip(void)
{
    guint8 buf[VRM_CONTROL_MESSAGE_MAX];
    guint32 max = vrmProtoMaxEntries(VRM_MSG_RAM_BLOCKS);
    g_autofree vrmProtoRingEntry *in = g_new0(vrmProtoRingEntry, max);
    vrmProtoMsg msg;
    size_t len;
    guint32 i;

    g_assert_cmpuint(max, ==, 170);
    for (i = 0; i < max; i++)
        in[i] = (vrmProtoRingEntry) {
            .index = i, .depth = 1024, .length = 1 << 20,
            .rkey = 0xdead0000 + i, .addr = G_GUINT64_CONSTANT(0x7f0000000000) + ((guint64)i << 20),
        };
    len = vrmProtoBuildRing(buf, in, max);
    g_assert_cmpuint(len, <=, VRM_CONTROL_MESSAGE_MAX);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    g_assert_cmpuint(msg.hdr.repeat, ==, max);
    for (i = 0; i < max; i++) {
        vrmProtoRingEntry e;
        vrmProtoGetRing(&msg, i, &e);
        g_assert_cmpmem(&e, sizeof(e), &in[i], sizeof(e));
        g_assert_cmpint(vrmProtoRingEntryCheck(&e, i, i ? 1024 : 0, i ? 1 << 20 : 0), ==, 0);
    }
    /* one byte less than announced */
    g_assert_cmpint(vrmProtoMsgDecode(buf, len - 1, &msg), ==, -1);
    /* more than a SEND buffer */
    g_assert_cmpint(vrmProtoMsgDecode(buf, VRM_CONTROL_MESSAGE_MAX + 1, &msg), ==, -1);
}

static void
testRingEntryChecks(void)
{
    vrmProtoRingEntry e = { .index = 3, .depth = 16, .length = 1 << 20, .addr = 4096 };

    g_assert_cmpint(vrmProtoRingEntryCheck(&e, 3, 16, 1 << 20), ==, 0);
    g_assert_cmpint(vrmProtoRingEntryCheck(&e, 2, 16, 1 << 20), ==, -1);   /* gap */
    g_assert_cmpint(vrmProtoRingEntryCheck(&e, 3, 8, 1 << 20), ==, -1);    /* depth changed */
    g_assert_cmpint(vrmProtoRingEntryCheck(&e, 3, 16, 1 << 16), ==, -1);   /* length changed */
    e.depth = 3;
    g_assert_cmpint(vrmProtoRingEntryCheck(&e, 3, 0, 0), ==, -1);          /* index >= depth */
    e.depth = 2000;
    g_assert_cmpint(vrmProtoRingEntryCheck(&e, 3, 0, 0), ==, -1);
    e.depth = 16;
    e.length = 100000;
    g_assert_cmpint(vrmProtoRingEntryCheck(&e, 3, 0, 0), ==, -1);          /* not a power of two */
    e.length = 1 << 20;
    e.addr = G_MAXUINT64 - 100;
    g_assert_cmpint(vrmProtoRingEntryCheck(&e, 3, 0, 0), ==, -1);          /* wraps */
}

static void
testRegisterRoundTrip(void)
{
    guint8 buf[VRM_CONTROL_MESSAGE_MAX];
    guint32 idx[3] = { 4, 5, 6 };
    vrmProtoRegResult res[2] = {
        { .index = 4, .rkey = 0x1234, .addr = 0x10000 },
        { .index = 5, .rkey = 0x5678, .addr = 0x20000 },
    };
    vrmProtoRegResult got;
    vrmProtoMsg msg;
    size_t len;
    guint32 a, b;

    len = vrmProtoBuildRegRequest(buf, idx, 3);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    g_assert_cmpuint(msg.hdr.repeat, ==, 3);
    vrmProtoGetU32Pair(&msg, 2, &a, &b);
    g_assert_cmpuint(a, ==, 6);
    g_assert_cmpuint(b, ==, 0);

    len = vrmProtoBuildRegResult(buf, res, 2);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    vrmProtoGetRegResult(&msg, 1, &got);
    g_assert_cmpmem(&got, sizeof(got), &res[1], sizeof(got));
    g_assert_cmpuint(vrmProtoMaxEntries(VRM_MSG_REGISTER_REQUEST), ==, 510);
    g_assert_cmpuint(vrmProtoMaxEntries(VRM_MSG_REGISTER_RESULT), ==, 255);
    g_assert_cmpuint(vrmProtoMaxEntries(VRM_MSG_ERROR), ==, 0);
}

static void
testDataAndEof(void)
{
    guint8 buf[VRM_CONTROL_MESSAGE_MAX];
    vrmProtoDataEntry d[2] = { { 0, 1 }, { 1, 1 << 20 } };
    vrmProtoMsg msg;
    size_t len;
    guint32 a, b;

    len = vrmProtoBuildData(buf, d, 2);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    vrmProtoGetU32Pair(&msg, 1, &a, &b);
    g_assert_cmpuint(a, ==, 1);
    g_assert_cmpuint(b, ==, 1 << 20);

    len = vrmProtoBuildU64(buf, VRM_MSG_EOF, G_GUINT64_CONSTANT(0x123456789a));
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    g_assert_cmpuint(vrmProtoGetU64(&msg), ==, G_GUINT64_CONSTANT(0x123456789a));
}

static void
testErrorMessage(void)
{
    guint8 buf[VRM_CONTROL_MESSAGE_MAX];
    g_autofree char *text = NULL;
    g_autofree char *longtext = NULL;
    vrmProtoMsg msg;
    guint32 code;
    size_t len;

    len = vrmProtoBuildError(buf, VRM_ERR_AUTH, "bad token é");
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    g_assert_cmpint(vrmProtoGetError(&msg, &code, &text), ==, 0);
    g_assert_cmpuint(code, ==, VRM_ERR_AUTH);
    g_assert_cmpstr(text, ==, "bad token é");
    g_clear_pointer(&text, g_free);

    /* long texts are cut at a character boundary, within the limit */
    longtext = g_strnfill(2000, 'x');
    longtext[VRM_PROTO_ERROR_TEXT_MAX - 1] = (char)0xc3;
    longtext[VRM_PROTO_ERROR_TEXT_MAX] = (char)0xa9;
    len = vrmProtoBuildError(buf, 1, longtext);
    g_assert_cmpuint(len, <=, VRM_PROTO_HEADER_LEN + 8 + VRM_PROTO_ERROR_TEXT_MAX);
    g_assert_cmpint(vrmProtoMsgDecode(buf, len, &msg), ==, 0);
    g_assert_cmpint(vrmProtoGetError(&msg, &code, &text), ==, 0);
    g_assert_true(g_utf8_validate(text, -1, NULL));
}

static void
testImmediate(void)
{
    guint32 tag, len;

    vrmProtoImmDecode(vrmProtoImmEncode(37, 1), &tag, &len);
    g_assert_cmpuint(tag, ==, 37 % 32);
    g_assert_cmpuint(len, ==, 1);
    vrmProtoImmDecode(vrmProtoImmEncode(1023, VRM_CHUNK_SIZE_MAX), &tag, &len);
    g_assert_cmpuint(tag, ==, 31);
    g_assert_cmpuint(len, ==, VRM_CHUNK_SIZE_MAX);
    G_STATIC_ASSERT(VRM_CHUNK_SIZE_MAX <= VRM_PROTO_IMM_LEN_MASK);
}

/* Malformed (and a few good) messages from tests/driver/protocorpus */
static void
testCorpus(void)
{
    const char *srcdir = g_getenv("VRM_SOURCE_DIR");
    g_autofree char *dir = NULL;
    g_autoptr(GDir) d = NULL;
    const char *name;
    guint n = 0;

    g_assert_nonnull(srcdir);
    dir = g_build_filename(srcdir, "tests", "driver", "protocorpus", NULL);
    d = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(d);
    while ((name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autofree char *text = NULL;
        g_autoptr(GByteArray) bytes = g_byte_array_new();
        g_auto(GStrv) lines = NULL;
        const char *expect;
        vrmProtoMsg msg;
        const char *p;
        int rc;

        if (!g_str_has_suffix(name, ".hex"))
            continue;
        g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
        lines = g_strsplit(text, "\n", 2);
        g_assert_true(g_str_has_prefix(lines[0], "# expect: "));
        expect = lines[0] + strlen("# expect: ");
        for (p = lines[1] ? lines[1] : ""; *p; p++) {
            guint8 byte;
            if (g_ascii_isspace(*p))
                continue;
            g_assert_true(g_ascii_isxdigit(p[0]) && g_ascii_isxdigit(p[1]));
            byte = (g_ascii_xdigit_value(p[0]) << 4) | g_ascii_xdigit_value(p[1]);
            g_byte_array_append(bytes, &byte, 1);
            p++;
        }
        vrmResetLastError();
        rc = vrmProtoMsgDecode(bytes->data, bytes->len, &msg);
        if (g_str_equal(expect, "error")) {
            if (rc != -1)
                g_error("%s: decoded, a malformed message was expected", name);
            g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_PROTOCOL);
        } else if (g_str_equal(expect, "error-text")) {
            g_autofree char *t = NULL;
            guint32 code;
            g_assert_cmpint(rc, ==, 0);
            g_assert_cmpint(vrmProtoGetError(&msg, &code, &t), ==, -1);
        } else {
            g_assert_true(g_str_has_prefix(expect, "ok "));
            if (rc != 0)
                g_error("%s: %s", name, vrmGetLastErrorMessage());
            g_assert_cmpstr(vrmProtoMsgTypeToString(msg.hdr.type), ==, expect + 3);
        }
        n++;
    }
    g_assert_cmpuint(n, >=, 20);
}

/* Every truncation of every valid message is refused */
static void
testTruncations(void)
{
    guint8 buf[VRM_CONTROL_MESSAGE_MAX];
    vrmProtoDataEntry d[3] = { { 0, 1 }, { 1, 2 }, { 2, 3 } };
    size_t lens[4];
    guint8 copies[4][64];
    vrmProtoMsg msg;
    size_t i, cut;

    lens[0] = vrmProtoBuildData(buf, d, 3);
    memcpy(copies[0], buf, lens[0]);
    lens[1] = vrmProtoBuildU64(buf, VRM_MSG_EOF_ACK, 99);
    memcpy(copies[1], buf, lens[1]);
    lens[2] = vrmProtoBuildError(buf, 1, "x");
    memcpy(copies[2], buf, lens[2]);
    lens[3] = vrmProtoBuildU32Pair(buf, VRM_MSG_CHANNEL_OPEN, 3, 0);
    memcpy(copies[3], buf, lens[3]);
    for (i = 0; i < G_N_ELEMENTS(lens); i++) {
        g_assert_cmpint(vrmProtoMsgDecode(copies[i], lens[i], &msg), ==, 0);
        for (cut = 0; cut < lens[i]; cut++)
            g_assert_cmpint(vrmProtoMsgDecode(copies[i], cut, &msg), ==, -1);
    }
}

static const vrmTestFunc testFuncs[] = {
    { "/proto/req/roundtrip", testConnReqRoundTrip },
    { "/proto/req/bounds", testConnReqBounds },
    { "/proto/req/check", testConnReqCheck },
    { "/proto/rep/roundtrip", testConnRepRoundTrip },
    { "/proto/macs", testMacs },
    { "/proto/auth-connect", testAuthMessage },
    { "/proto/reject", testReject },
    { "/proto/tcp-open", testTcpOpen },
    { "/proto/negotiate", testNegotiate },
    { "/proto/settings", testSettingsRanges },
    { "/proto/header", testHeaderLayout },
    { "/proto/numbering", testSeedNumbering },
    { "/proto/ring/roundtrip", testRingRoundTrip },
    { "/proto/ring/checks", testRingEntryChecks },
    { "/proto/register", testRegisterRoundTrip },
    { "/proto/data-eof", testDataAndEof },
    { "/proto/error", testErrorMessage },
    { "/proto/immediate", testImmediate },
    { "/proto/corpus", testCorpus },
    { "/proto/truncations", testTruncations },
};

VRM_TEST_MAIN(NULL, testFuncs)
