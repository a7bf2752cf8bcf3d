/*
 * vrmproto.c: virt-rdma wire protocol version 2 (see docs/protocol.rst)
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "vrmproto.h"
#include "vrmerror.h"
#include "vrmi18n.h"

static const char *const vrmProtoMsgTypeNames[] = {
    "NONE", "ERROR", "READY", "QEMU_FILE", "RAM_BLOCKS", "COMPRESS",
    "REGISTER_REQUEST", "REGISTER_RESULT", "REGISTER_FINISHED",
    "CHANNEL_OPEN", "DATA", "EOF", "EOF_ACK", "CHANNEL_UNUSED", "KEEPALIVE",
    "AUTH", "CHANNEL_CONNECT", "CHANNEL_OPEN_TCP",
};
G_STATIC_ASSERT(G_N_ELEMENTS(vrmProtoMsgTypeNames) == VRM_MSG_LAST);

const char *
vrmProtoMsgTypeToString(int type)
{
    if (type < 0 || type >= VRM_MSG_LAST)
        return NULL;
    return vrmProtoMsgTypeNames[type];
}

const char *
vrmProtoRejectReasonToString(int reason)
{
    switch ((vrmProtoRejectReason)reason) {
    case VRM_REJECT_NONE:
        return _("no reason given");
    case VRM_REJECT_VERSION:
        return _("unsupported protocol version");
    case VRM_REJECT_TOKEN:
        return _("the peer could not prove it holds the job's token");
    case VRM_REJECT_CHANNEL:
        return _("channel index or count does not match");
    case VRM_REJECT_BUSY:
        return _("channel already connected");
    case VRM_REJECT_MALFORMED:
        return _("malformed connection request");
    case VRM_REJECT_RESOURCES:
        return _("no resources for the channel");
    case VRM_REJECT_JOB_ENDED:
        return _("the source engine's job has ended");
    case VRM_REJECT_LAST:
        break;
    }
    return _("unknown reason");
}

/* Big-endian helpers */
static inline void
put32(guint8 *p, guint32 v)
{
    v = GUINT32_TO_BE(v);
    memcpy(p, &v, 4);
}

static inline void
put16(guint8 *p, guint16 v)
{
    v = GUINT16_TO_BE(v);
    memcpy(p, &v, 2);
}

static inline void
put64(guint8 *p, guint64 v)
{
    v = GUINT64_TO_BE(v);
    memcpy(p, &v, 8);
}

static inline guint32
get32(const guint8 *p)
{
    guint32 v;

    memcpy(&v, p, 4);
    return GUINT32_FROM_BE(v);
}

static inline guint16
get16(const guint8 *p)
{
    guint16 v;

    memcpy(&v, p, 2);
    return GUINT16_FROM_BE(v);
}

static inline guint64
get64(const guint8 *p)
{
    guint64 v;

    memcpy(&v, p, 8);
    return GUINT64_FROM_BE(v);
}

/* The layouts of docs/protocol.rst as byte offsets, every field big-endian.
 * REQ and REP, rdma_cm private data: the channel's identity, then the nonce */
#define VRM_CONN_VERSION 0
#define VRM_CONN_FLAGS 4
#define VRM_CONN_CHANNEL 8
#define VRM_CONN_CHANNELS 10
#define VRM_CONN_NONCE 12
#define VRM_REQ_RESERVED (VRM_CONN_NONCE + VRM_PROTO_NONCE_LEN)
#define VRM_REP_MAC (VRM_CONN_NONCE + VRM_PROTO_NONCE_LEN)
#define VRM_REP_RESERVED (VRM_REP_MAC + VRM_PROTO_MAC_SOURCE_LEN)
G_STATIC_ASSERT(VRM_REQ_RESERVED + 4 == VRM_PROTO_REQ_LEN);
G_STATIC_ASSERT(VRM_REP_RESERVED + 4 == VRM_PROTO_REP_LEN);
/* the reject record */
#define VRM_REJECT_MAGIC_AT 0
#define VRM_REJECT_VERSION_AT 4
#define VRM_REJECT_REASON_AT 8
G_STATIC_ASSERT(VRM_REJECT_REASON_AT + 4 == VRM_PROTO_REJECT_LEN);
/* the channel's identity inside the proofs */
#define VRM_MAC_ID_FLAGS 0
#define VRM_MAC_ID_CHANNEL 4
#define VRM_MAC_ID_CHANNELS 6
#define VRM_MAC_ID_LEN 8
/* the control header */
#define VRM_HDR_LEN 0
#define VRM_HDR_TYPE 4
#define VRM_HDR_REPEAT 8
#define VRM_HDR_PADDING 12
G_STATIC_ASSERT(VRM_HDR_PADDING + 4 == VRM_PROTO_HEADER_LEN);
/* entries: a pair {a u32, b u32} (READY, REGISTER_REQUEST, CHANNEL_OPEN,
 * DATA, KEEPALIVE, CHANNEL_CONNECT), RAM_BLOCKS, REGISTER_RESULT, ERROR */
#define VRM_PAIR_A 0
#define VRM_PAIR_B 4
#define VRM_PAIR_LEN 8
#define VRM_RING_INDEX 0
#define VRM_RING_DEPTH 4
#define VRM_RING_LENGTH 8
#define VRM_RING_RKEY 12
#define VRM_RING_ADDR 16
#define VRM_RING_LEN 24
#define VRM_REGRES_INDEX 0
#define VRM_REGRES_RKEY 4
#define VRM_REGRES_ADDR 8
#define VRM_REGRES_LEN 16
#define VRM_ERROR_CODE 0
#define VRM_ERROR_TEXT_LEN 4
#define VRM_ERROR_TEXT 8
/* CHANNEL_OPEN_TCP's entry: {channel u32, family u16, port u16, addr[16]} */
#define VRM_TCP_OPEN_CHANNEL 0
#define VRM_TCP_OPEN_FAMILY 4
#define VRM_TCP_OPEN_PORT 6
#define VRM_TCP_OPEN_ADDR 8
G_STATIC_ASSERT(VRM_TCP_OPEN_ADDR + 16 == VRM_PROTO_TCP_OPEN_LEN);

/* REQ and REP begin alike: the channel's identity and the nonce */
static void
vrmProtoConnIdPut(guint8 *buf, guint32 version, guint32 flags,
                  guint16 channel, guint16 channels, const guint8 *nonce)
{
    put32(buf + VRM_CONN_VERSION, version);
    put32(buf + VRM_CONN_FLAGS, flags);
    put16(buf + VRM_CONN_CHANNEL, channel);
    put16(buf + VRM_CONN_CHANNELS, channels);
    memcpy(buf + VRM_CONN_NONCE, nonce, VRM_PROTO_NONCE_LEN);
}

static void
vrmProtoConnIdGet(const guint8 *p, guint32 *version, guint32 *flags,
                  guint16 *channel, guint16 *channels, guint8 *nonce)
{
    *version = get32(p + VRM_CONN_VERSION);
    *flags = get32(p + VRM_CONN_FLAGS);
    *channel = get16(p + VRM_CONN_CHANNEL);
    *channels = get16(p + VRM_CONN_CHANNELS);
    memcpy(nonce, p + VRM_CONN_NONCE, VRM_PROTO_NONCE_LEN);
}

void
vrmProtoConnReqEncode(const vrmProtoConnReq *req, guint8 buf[VRM_PROTO_REQ_LEN])
{
    memset(buf, 0, VRM_PROTO_REQ_LEN);
    vrmProtoConnIdPut(buf, req->version, req->flags, req->channel, req->channels, req->nonce);
}

int
vrmProtoConnReqDecode(const void *buf, size_t len, vrmProtoConnReq *req)
{
    const guint8 *p = buf;

    if (!buf || len < VRM_PROTO_REQ_LEN) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("connection private data is %1$zu bytes long, at least %2$d are needed"),
                       buf ? len : 0, VRM_PROTO_REQ_LEN);
        return -1;
    }
    /* version 1 had its token where version 2 has the nonce: the layout
     * decodes either, the check refuses version 1 by its number */
    if (get32(p + VRM_REQ_RESERVED) != 0) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the reserved field of the connection private data is not zero"));
        return -1;
    }
    vrmProtoConnIdGet(p, &req->version, &req->flags, &req->channel, &req->channels, req->nonce);
    return 0;
}

void
vrmProtoConnRepEncode(const vrmProtoConnRep *rep, guint8 buf[VRM_PROTO_REP_LEN])
{
    memset(buf, 0, VRM_PROTO_REP_LEN);
    vrmProtoConnIdPut(buf, rep->version, rep->flags, rep->channel, rep->channels, rep->nonce);
    memcpy(buf + VRM_REP_MAC, rep->mac, VRM_PROTO_MAC_SOURCE_LEN);
}

int
vrmProtoConnRepDecode(const void *buf, size_t len, vrmProtoConnRep *rep)
{
    const guint8 *p = buf;

    if (!buf || len < VRM_PROTO_REP_LEN) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the accept's private data is %1$zu bytes long, %2$d are needed"),
                       buf ? len : 0, VRM_PROTO_REP_LEN);
        return -1;
    }
    if (get32(p + VRM_REP_RESERVED) != 0) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the reserved field of the accept's private data is not zero"));
        return -1;
    }
    vrmProtoConnIdGet(p, &rep->version, &rep->flags, &rep->channel, &rep->channels, rep->nonce);
    memcpy(rep->mac, p + VRM_REP_MAC, VRM_PROTO_MAC_SOURCE_LEN);
    return 0;
}

int
vrmProtoConnReqCheck(const vrmProtoConnReq *req, guint32 channels, guint32 disks)
{
    if (req->version != VRM_PROTOCOL_VERSION) {
        if (req->version < VRM_PROTOCOL_VERSION)
            vrmReportError(VRM_ERR_VERSION,
                           _("a peer speaking protocol version %1$u was refused: this engine speaks version %2$d and nothing released speaks version 1; install the same virt-rdma on both hosts"),
                           req->version, VRM_PROTOCOL_VERSION);
        else
            vrmReportError(VRM_ERR_VERSION,
                           _("a peer speaking protocol version %1$u was refused: this engine speaks version %2$d; install the same virt-rdma on both hosts"),
                           req->version, VRM_PROTOCOL_VERSION);
        return VRM_REJECT_VERSION;
    }
    if (req->channel >= VRM_DISK_CHANNEL_BASE) {
        /* a disk channel: only between engines that both carry disks */
        if (!(req->flags & VRM_CAP_DISKS) || req->channels < 1 ||
            (guint32)(req->channel - VRM_DISK_CHANNEL_BASE) >= disks) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("the peer asked for disk channel %1$u, this job carries %2$u disk channels"),
                           (unsigned)(req->channel - VRM_DISK_CHANNEL_BASE), disks);
            return VRM_REJECT_CHANNEL;
        }
        return VRM_REJECT_NONE;
    }
    if (req->channels < 1 || req->channel >= MIN(channels, req->channels)) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the peer asked for channel %1$u of %2$u, this job has %3$u channels"),
                       req->channel, req->channels, channels);
        return VRM_REJECT_CHANNEL;
    }
    return VRM_REJECT_NONE;
}

int
vrmProtoNonce(guint8 nonce[VRM_PROTO_NONCE_LEN])
{
    size_t got = 0;

    while (got < VRM_PROTO_NONCE_LEN) {
        ssize_t rc = getrandom(nonce + got, VRM_PROTO_NONCE_LEN - got, 0);

        if (rc < 0) {
            if (errno == EINTR)
                continue;
            vrmReportSystemError(errno, "%s", _("cannot generate a nonce"));
            return -1;
        }
        got += rc;
    }
    return 0;
}

static void
vrmProtoMac(const vrmToken *token, const char *label, const guint8 *first,
            const guint8 *second, guint32 flags, guint16 channel,
            guint16 channels, guint8 *mac, size_t len)
{
    g_autoptr(GHmac) h = g_hmac_new(G_CHECKSUM_SHA256, token->bytes, VRM_TOKEN_BYTES);
    guint8 id[VRM_MAC_ID_LEN];
    guint8 digest[32];
    gsize dlen = sizeof(digest);

    put32(id + VRM_MAC_ID_FLAGS, flags);
    put16(id + VRM_MAC_ID_CHANNEL, channel);
    put16(id + VRM_MAC_ID_CHANNELS, channels);
    g_hmac_update(h, (const guchar *)label, strlen(label));
    g_hmac_update(h, first, VRM_PROTO_NONCE_LEN);
    g_hmac_update(h, second, VRM_PROTO_NONCE_LEN);
    g_hmac_update(h, id, sizeof(id));
    g_hmac_get_digest(h, digest, &dlen);
    g_assert(dlen == sizeof(digest) && len <= dlen);
    memcpy(mac, digest, len);
    explicit_bzero(digest, sizeof(digest));
}

void
vrmProtoMacSource(const vrmToken *token, const guint8 nonceD[VRM_PROTO_NONCE_LEN],
                  const guint8 nonceS[VRM_PROTO_NONCE_LEN], guint32 flags,
                  guint16 channel, guint16 channels,
                  guint8 mac[VRM_PROTO_MAC_SOURCE_LEN])
{
    vrmProtoMac(token, VRM_PROTO_MAC_SOURCE_LABEL, nonceD, nonceS, flags, channel,
                channels, mac, VRM_PROTO_MAC_SOURCE_LEN);
}

void
vrmProtoMacDestination(const vrmToken *token, const guint8 nonceS[VRM_PROTO_NONCE_LEN],
                       const guint8 nonceD[VRM_PROTO_NONCE_LEN], guint32 flags,
                       guint16 channel, guint16 channels,
                       guint8 mac[VRM_PROTO_MAC_LEN])
{
    vrmProtoMac(token, VRM_PROTO_MAC_DESTINATION_LABEL, nonceS, nonceD, flags, channel,
                channels, mac, VRM_PROTO_MAC_LEN);
}

bool
vrmProtoMacEqual(const guint8 *a, const guint8 *b, size_t len)
{
    guint8 diff = 0;
    size_t i;

    for (i = 0; i < len; i++)
        diff |= a[i] ^ b[i];
    return diff == 0;
}

void
vrmProtoRejectEncode(int reason, guint32 version, guint8 buf[VRM_PROTO_REJECT_LEN])
{
    put32(buf + VRM_REJECT_MAGIC_AT, VRM_PROTO_REJECT_MAGIC);
    put32(buf + VRM_REJECT_VERSION_AT, version);
    put32(buf + VRM_REJECT_REASON_AT, reason);
}

int
vrmProtoRejectDecode(const void *buf, size_t len, guint32 *version)
{
    const guint8 *p = buf;
    guint32 reason;

    if (version)
        *version = 0;
    if (!buf || len < VRM_PROTO_REJECT_LEN)
        return VRM_REJECT_NONE;
    if (get32(p + VRM_REJECT_MAGIC_AT) != VRM_PROTO_REJECT_MAGIC)
        return VRM_REJECT_NONE;
    if (version)
        *version = get32(p + VRM_REJECT_VERSION_AT);
    reason = get32(p + VRM_REJECT_REASON_AT);
    if (reason == VRM_REJECT_NONE || reason >= VRM_REJECT_LAST)
        return VRM_REJECT_MALFORMED;
    return reason;
}



int
vrmProtoCheckChunkSize(guint64 size)
{
    if (size < VRM_CHUNK_SIZE_MIN || size > VRM_CHUNK_SIZE_MAX ||
        (size & (size - 1)) != 0) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("chunk size %1$llu is not a power of two between 64 KiB and 64 MiB"),
                       (unsigned long long)size);
        return -1;
    }
    return 0;
}

int
vrmProtoCheckDepth(guint64 depth)
{
    if (depth < VRM_RING_DEPTH_MIN || depth > VRM_RING_DEPTH_MAX) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("ring depth %1$llu is not between %2$d and %3$d"),
                       (unsigned long long)depth, VRM_RING_DEPTH_MIN, VRM_RING_DEPTH_MAX);
        return -1;
    }
    return 0;
}

int
vrmProtoCheckChannels(guint64 channels)
{
    if (channels < 1 || channels > VRM_CHANNELS_MAX) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("channel count %1$llu is not between 1 and %2$d"),
                       (unsigned long long)channels, VRM_CHANNELS_MAX);
        return -1;
    }
    return 0;
}

void
vrmProtoHeaderEncode(const vrmProtoHeader *hdr, guint8 *buf)
{
    put32(buf + VRM_HDR_LEN, hdr->len);
    put32(buf + VRM_HDR_TYPE, hdr->type);
    put32(buf + VRM_HDR_REPEAT, hdr->repeat);
    put32(buf + VRM_HDR_PADDING, 0);
}

size_t
vrmProtoEntrySize(int type)
{
    switch ((vrmProtoMsgType)type) {
    case VRM_MSG_READY:
    case VRM_MSG_REGISTER_REQUEST:
    case VRM_MSG_CHANNEL_OPEN:
    case VRM_MSG_DATA:
    case VRM_MSG_EOF:
    case VRM_MSG_EOF_ACK:
    case VRM_MSG_CHANNEL_UNUSED:
    case VRM_MSG_KEEPALIVE:
    case VRM_MSG_CHANNEL_CONNECT:
        return VRM_PAIR_LEN;
    case VRM_MSG_REGISTER_RESULT:
        return VRM_REGRES_LEN;
    case VRM_MSG_AUTH:
        return VRM_PROTO_MAC_LEN;
    case VRM_MSG_CHANNEL_OPEN_TCP:
        return VRM_PROTO_TCP_OPEN_LEN;
    case VRM_MSG_RAM_BLOCKS:
        return VRM_RING_LEN;
    case VRM_MSG_NONE:
    case VRM_MSG_ERROR:
    case VRM_MSG_QEMU_FILE:
    case VRM_MSG_COMPRESS:
    case VRM_MSG_REGISTER_FINISHED:
    case VRM_MSG_LAST:
        break;
    }
    return 0;
}

guint32
vrmProtoMaxEntries(int type)
{
    size_t sz = vrmProtoEntrySize(type);
    guint32 n;

    if (sz == 0)
        return 0;
    n = VRM_PROTO_PAYLOAD_MAX / sz;
    return MIN(n, VRM_PROTO_MAX_REPEAT);
}

static bool
vrmProtoSingleEntry(int type)
{
    return type == VRM_MSG_ERROR || type == VRM_MSG_READY ||
           type == VRM_MSG_CHANNEL_OPEN || type == VRM_MSG_EOF ||
           type == VRM_MSG_EOF_ACK || type == VRM_MSG_KEEPALIVE ||
           type == VRM_MSG_AUTH || type == VRM_MSG_CHANNEL_CONNECT ||
           type == VRM_MSG_CHANNEL_OPEN_TCP;
}

static int
vrmProtoTcpOpenCheck(const guint8 *p)
{
    guint16 family = get16(p + VRM_TCP_OPEN_FAMILY);
    size_t i;

    if (family != VRM_PROTO_FAMILY_IPV4 && family != VRM_PROTO_FAMILY_IPV6) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("a CHANNEL_OPEN_TCP message names address family %1$u, neither 4 (IPv4) nor 6 (IPv6)"),
                       family);
        return -1;
    }
    if (get16(p + VRM_TCP_OPEN_PORT) == 0) {
        vrmReportError(VRM_ERR_PROTOCOL, _("a CHANNEL_OPEN_TCP message names port 0"));
        return -1;
    }
    for (i = 4; family == VRM_PROTO_FAMILY_IPV4 && i < 16; i++) {
        if (p[VRM_TCP_OPEN_ADDR + i] != 0) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("the padding of a CHANNEL_OPEN_TCP message's IPv4 address is not zero"));
            return -1;
        }
    }
    return 0;
}

/* The framing: the header against what arrived, a known type, the limits */
static int
vrmProtoMsgDecodeHeader(const void *buf, size_t received, vrmProtoMsg *msg)
{
    const guint8 *p = buf;
    guint32 padding;

    if (received < VRM_PROTO_HEADER_LEN) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("a control message of %1$zu bytes is shorter than its 16-byte header"),
                       received);
        return -1;
    }
    if (received > VRM_CONTROL_MESSAGE_MAX) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("a control message of %1$zu bytes exceeds the %2$d-byte limit"),
                       received, VRM_CONTROL_MESSAGE_MAX);
        return -1;
    }
    msg->hdr.len = get32(p + VRM_HDR_LEN);
    msg->hdr.type = get32(p + VRM_HDR_TYPE);
    msg->hdr.repeat = get32(p + VRM_HDR_REPEAT);
    padding = get32(p + VRM_HDR_PADDING);
    msg->payload = p + VRM_PROTO_HEADER_LEN;

    if (msg->hdr.len != received - VRM_PROTO_HEADER_LEN) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("a control message announces %1$u data bytes but %2$zu arrived"),
                       msg->hdr.len, received - VRM_PROTO_HEADER_LEN);
        return -1;
    }
    if (padding != 0) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the padding of a control message header is not zero"));
        return -1;
    }
    if (msg->hdr.type >= VRM_MSG_LAST) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("unknown control message type %1$u"), msg->hdr.type);
        return -1;
    }
    if (msg->hdr.repeat > VRM_PROTO_MAX_REPEAT) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("a %1$s message repeats %2$u times, more than the limit of %3$d"),
                       vrmProtoMsgTypeToString(msg->hdr.type),
                       msg->hdr.repeat, VRM_PROTO_MAX_REPEAT);
        return -1;
    }
    return 0;
}

/* The entries against their type */
static int
vrmProtoMsgCheckPayload(const vrmProtoMsg *msg)
{
    size_t esz;

    switch ((vrmProtoMsgType)msg->hdr.type) {
    case VRM_MSG_NONE:
    case VRM_MSG_QEMU_FILE:
    case VRM_MSG_COMPRESS:
    case VRM_MSG_REGISTER_FINISHED:
    case VRM_MSG_CHANNEL_UNUSED:
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("control message type %1$s is not used in protocol version 2"),
                       vrmProtoMsgTypeToString(msg->hdr.type));
        return -1;
    case VRM_MSG_ERROR:
        if (msg->hdr.repeat != 1 || msg->hdr.len < VRM_ERROR_TEXT ||
            get32(msg->payload + VRM_ERROR_TEXT_LEN) != msg->hdr.len - VRM_ERROR_TEXT ||
            msg->hdr.len - VRM_ERROR_TEXT > VRM_PROTO_ERROR_TEXT_MAX) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("malformed ERROR message (%1$u data bytes, repeat %2$u)"),
                           msg->hdr.len, msg->hdr.repeat);
            return -1;
        }
        return 0;
    default:
        break;
    }

    esz = vrmProtoEntrySize(msg->hdr.type);
    if (msg->hdr.repeat == 0 ||
        (vrmProtoSingleEntry(msg->hdr.type) && msg->hdr.repeat != 1) ||
        (size_t)msg->hdr.repeat * esz != msg->hdr.len) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("a %1$s message has %2$u data bytes for %3$u entries of %4$zu bytes"),
                       vrmProtoMsgTypeToString(msg->hdr.type),
                       msg->hdr.len, msg->hdr.repeat, esz);
        return -1;
    }
    if (msg->hdr.type == VRM_MSG_READY || msg->hdr.type == VRM_MSG_CHANNEL_OPEN ||
        msg->hdr.type == VRM_MSG_CHANNEL_CONNECT ||
        msg->hdr.type == VRM_MSG_KEEPALIVE ||
        msg->hdr.type == VRM_MSG_REGISTER_REQUEST) {
        guint32 i;
        for (i = 0; i < msg->hdr.repeat; i++) {
            if (get32(msg->payload + i * VRM_PAIR_LEN + VRM_PAIR_B) != 0 ||
                (msg->hdr.type == VRM_MSG_KEEPALIVE &&
                 get32(msg->payload + VRM_PAIR_A) != 0)) {
                vrmReportError(VRM_ERR_PROTOCOL,
                               _("the padding of a %1$s entry is not zero"),
                               vrmProtoMsgTypeToString(msg->hdr.type));
                return -1;
            }
        }
    }
    if (msg->hdr.type == VRM_MSG_CHANNEL_OPEN_TCP)
        return vrmProtoTcpOpenCheck(msg->payload);
    return 0;
}

int
vrmProtoMsgDecode(const void *buf, size_t received, vrmProtoMsg *msg)
{
    if (vrmProtoMsgDecodeHeader(buf, received, msg) < 0)
        return -1;
    return vrmProtoMsgCheckPayload(msg);
}

static size_t
vrmProtoFinish(guint8 *buf, int type, guint32 repeat, size_t len)
{
    vrmProtoHeader hdr = { .len = len, .type = type, .repeat = repeat };

    g_assert(len <= VRM_PROTO_PAYLOAD_MAX);
    vrmProtoHeaderEncode(&hdr, buf);
    return VRM_PROTO_HEADER_LEN + len;
}

size_t
vrmProtoBuildError(guint8 *buf, guint32 code, const char *text)
{
    guint8 *p = buf + VRM_PROTO_HEADER_LEN;
    size_t tlen = text ? strlen(text) : 0;

    if (tlen > VRM_PROTO_ERROR_TEXT_MAX) {
        /* cut at a character boundary */
        const char *end = text + VRM_PROTO_ERROR_TEXT_MAX;
        const char *prev = g_utf8_find_prev_char(text, end + 1);
        tlen = prev ? (size_t)(prev - text) : 0;
        while (tlen > VRM_PROTO_ERROR_TEXT_MAX)
            tlen--;
    }
    put32(p + VRM_ERROR_CODE, code);
    put32(p + VRM_ERROR_TEXT_LEN, tlen);
    if (tlen)
        memcpy(p + VRM_ERROR_TEXT, text, tlen);
    return vrmProtoFinish(buf, VRM_MSG_ERROR, 1, VRM_ERROR_TEXT + tlen);
}

size_t
vrmProtoBuildAuth(guint8 *buf, const guint8 mac[VRM_PROTO_MAC_LEN])
{
    memcpy(buf + VRM_PROTO_HEADER_LEN, mac, VRM_PROTO_MAC_LEN);
    return vrmProtoFinish(buf, VRM_MSG_AUTH, 1, VRM_PROTO_MAC_LEN);
}

const guint8 *
vrmProtoGetAuth(const vrmProtoMsg *msg)
{
    g_assert(msg->hdr.type == VRM_MSG_AUTH && msg->hdr.len == VRM_PROTO_MAC_LEN);
    return msg->payload;
}

void
vrmProtoGetTcpOpen(const vrmProtoMsg *msg, vrmProtoTcpOpen *open)
{
    const guint8 *p = msg->payload;

    g_assert(msg->hdr.type == VRM_MSG_CHANNEL_OPEN_TCP &&
             msg->hdr.len == VRM_PROTO_TCP_OPEN_LEN);
    open->channel = get32(p + VRM_TCP_OPEN_CHANNEL);
    open->family = get16(p + VRM_TCP_OPEN_FAMILY);
    open->port = get16(p + VRM_TCP_OPEN_PORT);
    memcpy(open->addr, p + VRM_TCP_OPEN_ADDR, sizeof(open->addr));
}

size_t
vrmProtoBuildTcpOpen(guint8 *buf, const vrmProtoTcpOpen *open)
{
    guint8 *p = buf + VRM_PROTO_HEADER_LEN;

    put32(p + VRM_TCP_OPEN_CHANNEL, open->channel);
    put16(p + VRM_TCP_OPEN_FAMILY, open->family);
    put16(p + VRM_TCP_OPEN_PORT, open->port);
    memcpy(p + VRM_TCP_OPEN_ADDR, open->addr, sizeof(open->addr));
    return vrmProtoFinish(buf, VRM_MSG_CHANNEL_OPEN_TCP, 1, VRM_PROTO_TCP_OPEN_LEN);
}

size_t
vrmProtoBuildU32Pair(guint8 *buf, int type, guint32 a, guint32 b)
{
    put32(buf + VRM_PROTO_HEADER_LEN + VRM_PAIR_A, a);
    put32(buf + VRM_PROTO_HEADER_LEN + VRM_PAIR_B, b);
    return vrmProtoFinish(buf, type, 1, 8);
}

size_t
vrmProtoBuildU64(guint8 *buf, int type, guint64 value)
{
    put64(buf + VRM_PROTO_HEADER_LEN, value);
    return vrmProtoFinish(buf, type, 1, 8);
}

size_t
vrmProtoBuildRing(guint8 *buf, const vrmProtoRingEntry *entries, guint32 n)
{
    guint8 *p = buf + VRM_PROTO_HEADER_LEN;
    guint32 i;

    g_assert(n >= 1 && n <= vrmProtoMaxEntries(VRM_MSG_RAM_BLOCKS));
    for (i = 0; i < n; i++, p += VRM_RING_LEN) {
        put32(p + VRM_RING_INDEX, entries[i].index);
        put32(p + VRM_RING_DEPTH, entries[i].depth);
        put32(p + VRM_RING_LENGTH, entries[i].length);
        put32(p + VRM_RING_RKEY, entries[i].rkey);
        put64(p + VRM_RING_ADDR, entries[i].addr);
    }
    return vrmProtoFinish(buf, VRM_MSG_RAM_BLOCKS, n, (size_t)n * VRM_RING_LEN);
}

size_t
vrmProtoBuildRegRequest(guint8 *buf, const guint32 *indexes, guint32 n)
{
    guint8 *p = buf + VRM_PROTO_HEADER_LEN;
    guint32 i;

    g_assert(n >= 1 && n <= vrmProtoMaxEntries(VRM_MSG_REGISTER_REQUEST));
    for (i = 0; i < n; i++, p += VRM_PAIR_LEN) {
        put32(p + VRM_PAIR_A, indexes[i]);
        put32(p + VRM_PAIR_B, 0);
    }
    return vrmProtoFinish(buf, VRM_MSG_REGISTER_REQUEST, n, (size_t)n * VRM_PAIR_LEN);
}

size_t
vrmProtoBuildRegResult(guint8 *buf, const vrmProtoRegResult *res, guint32 n)
{
    guint8 *p = buf + VRM_PROTO_HEADER_LEN;
    guint32 i;

    g_assert(n >= 1 && n <= vrmProtoMaxEntries(VRM_MSG_REGISTER_RESULT));
    for (i = 0; i < n; i++, p += VRM_REGRES_LEN) {
        put32(p + VRM_REGRES_INDEX, res[i].index);
        put32(p + VRM_REGRES_RKEY, res[i].rkey);
        put64(p + VRM_REGRES_ADDR, res[i].addr);
    }
    return vrmProtoFinish(buf, VRM_MSG_REGISTER_RESULT, n, (size_t)n * VRM_REGRES_LEN);
}

size_t
vrmProtoBuildData(guint8 *buf, const vrmProtoDataEntry *entries, guint32 n)
{
    guint8 *p = buf + VRM_PROTO_HEADER_LEN;
    guint32 i;

    g_assert(n >= 1 && n <= vrmProtoMaxEntries(VRM_MSG_DATA));
    for (i = 0; i < n; i++, p += VRM_PAIR_LEN) {
        put32(p + VRM_PAIR_A, entries[i].index);
        put32(p + VRM_PAIR_B, entries[i].length);
    }
    return vrmProtoFinish(buf, VRM_MSG_DATA, n, (size_t)n * VRM_PAIR_LEN);
}

void
vrmProtoGetU32Pair(const vrmProtoMsg *msg, guint32 i, guint32 *a, guint32 *b)
{
    g_assert(i < msg->hdr.repeat);
    *a = get32(msg->payload + i * VRM_PAIR_LEN + VRM_PAIR_A);
    if (b)
        *b = get32(msg->payload + i * VRM_PAIR_LEN + VRM_PAIR_B);
}

guint64
vrmProtoGetU64(const vrmProtoMsg *msg)
{
    return get64(msg->payload);
}

void
vrmProtoGetRing(const vrmProtoMsg *msg, guint32 i, vrmProtoRingEntry *e)
{
    const guint8 *p = msg->payload + (size_t)i * VRM_RING_LEN;

    g_assert(i < msg->hdr.repeat);
    e->index = get32(p + VRM_RING_INDEX);
    e->depth = get32(p + VRM_RING_DEPTH);
    e->length = get32(p + VRM_RING_LENGTH);
    e->rkey = get32(p + VRM_RING_RKEY);
    e->addr = get64(p + VRM_RING_ADDR);
}

void
vrmProtoGetRegResult(const vrmProtoMsg *msg, guint32 i, vrmProtoRegResult *r)
{
    const guint8 *p = msg->payload + (size_t)i * VRM_REGRES_LEN;

    g_assert(i < msg->hdr.repeat);
    r->index = get32(p + VRM_REGRES_INDEX);
    r->rkey = get32(p + VRM_REGRES_RKEY);
    r->addr = get64(p + VRM_REGRES_ADDR);
}

int
vrmProtoGetError(const vrmProtoMsg *msg, guint32 *code, char **text)
{
    guint32 tlen = msg->hdr.len - VRM_ERROR_TEXT;
    const char *t = (const char *)msg->payload + VRM_ERROR_TEXT;

    *code = get32(msg->payload + VRM_ERROR_CODE);
    if (!g_utf8_validate(t, tlen, NULL)) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the text of an ERROR message is not valid UTF-8"));
        return -1;
    }
    *text = g_strndup(t, tlen);
    return 0;
}

int
vrmProtoRingEntryCheck(const vrmProtoRingEntry *e, guint32 expect,
                       guint32 depth_seen, guint32 length_seen)
{
    if (e->index != expect) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("ring description entry %1$u arrived where entry %2$u was expected"),
                       e->index, expect);
        return -1;
    }
    if (e->depth < VRM_RING_DEPTH_MIN || e->depth > VRM_RING_DEPTH_MAX ||
        (depth_seen && e->depth != depth_seen) || e->index >= e->depth) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("ring description entry %1$u has an invalid depth %2$u"),
                       e->index, e->depth);
        return -1;
    }
    if (e->length < VRM_CHUNK_SIZE_MIN || e->length > VRM_CHUNK_SIZE_MAX ||
        (e->length & (e->length - 1)) ||
        (length_seen && e->length != length_seen)) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("ring description entry %1$u has an invalid chunk length %2$u"),
                       e->index, e->length);
        return -1;
    }
    if (e->addr + e->length < e->addr) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("ring description entry %1$u wraps around the address space"),
                       e->index);
        return -1;
    }
    return 0;
}

guint32
vrmProtoImmEncode(guint32 index, guint32 length)
{
    return ((index & VRM_PROTO_IMM_TAG_MASK) << VRM_PROTO_IMM_LEN_BITS) |
           (length & VRM_PROTO_IMM_LEN_MASK);
}

void
vrmProtoImmDecode(guint32 imm, guint32 *tag, guint32 *length)
{
    *tag = imm >> VRM_PROTO_IMM_LEN_BITS;
    *length = imm & VRM_PROTO_IMM_LEN_MASK;
}
