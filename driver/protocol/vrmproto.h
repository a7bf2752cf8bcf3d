/*
 * vrmproto.h: virt-rdma wire protocol version 2 (see docs/protocol.rst)
 *
 * Pure code: encoders and decoders of the connect private data (REQ, REP,
 * the reject record), the proofs of the mutual authentication, the
 * control header and every control message entry. Decoders check every
 * length against the bytes received and report the first problem with
 * vrmReportError(VRM_ERR_PROTOCOL, ...).
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vrmlimits.h"
#include "vrmtoken.h"

#define VRM_PROTO_PRIVATE_DATA_MAX 56
#define VRM_PROTO_REQ_LEN 32                    /* destination -> source */
#define VRM_PROTO_REP_LEN 48                    /* source -> destination */
#define VRM_PROTO_REJECT_LEN 12
#define VRM_PROTO_REJECT_MAGIC 0x56524d52u      /* "VRMR" */
#define VRM_PROTO_NONCE_LEN 16
#define VRM_PROTO_MAC_SOURCE_LEN 16             /* in the REP: HMAC-SHA256, cut */
#define VRM_PROTO_MAC_LEN 32                    /* in AUTH: HMAC-SHA256, whole */
#define VRM_PROTO_MAC_SOURCE_LABEL "virt-rdma v2 source"
#define VRM_PROTO_MAC_DESTINATION_LABEL "virt-rdma v2 destination"

#define VRM_PROTO_HEADER_LEN 16
#define VRM_PROTO_PAYLOAD_MAX (VRM_CONTROL_MESSAGE_MAX - VRM_PROTO_HEADER_LEN)
#define VRM_PROTO_MAX_REPEAT 4096               /* the seed's bound */
#define VRM_PROTO_ERROR_TEXT_MAX 1024


/* Immediate data of WRITE_WITH_IMM: tag (index % 32) over a 27-bit length */
#define VRM_PROTO_IMM_LEN_BITS 27
#define VRM_PROTO_IMM_LEN_MASK ((1u << VRM_PROTO_IMM_LEN_BITS) - 1)
#define VRM_PROTO_IMM_TAG_MASK 0x1fu


typedef enum {
    VRM_MSG_NONE = 0,
    VRM_MSG_ERROR,
    VRM_MSG_READY,
    VRM_MSG_QEMU_FILE,
    VRM_MSG_RAM_BLOCKS,
    VRM_MSG_COMPRESS,
    VRM_MSG_REGISTER_REQUEST,
    VRM_MSG_REGISTER_RESULT,
    VRM_MSG_REGISTER_FINISHED,
    VRM_MSG_CHANNEL_OPEN,
    VRM_MSG_DATA,
    VRM_MSG_EOF,
    VRM_MSG_EOF_ACK,
    VRM_MSG_CHANNEL_UNUSED,     /* version 1 only: refused in version 2 */
    VRM_MSG_KEEPALIVE,
    VRM_MSG_AUTH,               /* the destination's proof, first on a channel */
    VRM_MSG_CHANNEL_CONNECT,    /* channel 0: QEMU opened connection k */
    VRM_MSG_CHANNEL_OPEN_TCP,   /* CHANNEL_OPEN of a TCP connection, with
                                 * the address QEMU connected to */

    VRM_MSG_LAST
} vrmProtoMsgType;

const char *vrmProtoMsgTypeToString(int type);

typedef enum {
    VRM_REJECT_NONE = 0,
    VRM_REJECT_VERSION,
    VRM_REJECT_TOKEN,
    VRM_REJECT_CHANNEL,
    VRM_REJECT_BUSY,
    VRM_REJECT_MALFORMED,
    VRM_REJECT_RESOURCES,
    VRM_REJECT_JOB_ENDED,

    VRM_REJECT_LAST
} vrmProtoRejectReason;

/* A translated sentence that explains a reject reason. */
const char *vrmProtoRejectReasonToString(int reason);

/* REQ: the destination asks for a channel (32 bytes) */
typedef struct {
    guint32 version;
    guint32 flags;              /* capabilities wanted */
    guint16 channel;
    guint16 channels;           /* the destination's maximum */
    guint8 nonce[VRM_PROTO_NONCE_LEN];
} vrmProtoConnReq;

/* REP: the source accepts, and proves it holds the token (48 bytes) */
typedef struct {
    guint32 version;
    guint32 flags;              /* agreed */
    guint16 channel;
    guint16 channels;           /* agreed: the smaller maximum */
    guint8 nonce[VRM_PROTO_NONCE_LEN];
    guint8 mac[VRM_PROTO_MAC_SOURCE_LEN];
} vrmProtoConnRep;

void vrmProtoConnReqEncode(const vrmProtoConnReq *req, guint8 buf[VRM_PROTO_REQ_LEN]);
int vrmProtoConnReqDecode(const void *buf, size_t len, vrmProtoConnReq *req);
void vrmProtoConnRepEncode(const vrmProtoConnRep *rep, guint8 buf[VRM_PROTO_REP_LEN]);
int vrmProtoConnRepDecode(const void *buf, size_t len, vrmProtoConnRep *rep);

/* Check a connect request against the listener's settings: the version,
 * then the channel index against @channels. Returns VRM_REJECT_NONE or the
 * reason, and reports it. */
/* @channels: our most migration channels; @disks: our disk channels
 * (0 unless we carry disks), numbered from VRM_DISK_CHANNEL_BASE */
int vrmProtoConnReqCheck(const vrmProtoConnReq *req, guint32 channels, guint32 disks);

/* A fresh nonce from getrandom(); -1 reported */
int vrmProtoNonce(guint8 nonce[VRM_PROTO_NONCE_LEN]);

/* The proofs of the mutual authentication (docs/protocol.rst):
 * HMAC-SHA256 keyed with the token over a label, both nonces in the order
 * of the prover, and the channel's identity as on the wire (flags u32,
 * channel u16, channels u16, big-endian). The source's is cut to 16 bytes
 * to fit the REP; the destination's travels whole in AUTH. */
void vrmProtoMacSource(const vrmToken *token, const guint8 nonceD[VRM_PROTO_NONCE_LEN],
                       const guint8 nonceS[VRM_PROTO_NONCE_LEN], guint32 flags,
                       guint16 channel, guint16 channels,
                       guint8 mac[VRM_PROTO_MAC_SOURCE_LEN]);
void vrmProtoMacDestination(const vrmToken *token, const guint8 nonceS[VRM_PROTO_NONCE_LEN],
                            const guint8 nonceD[VRM_PROTO_NONCE_LEN], guint32 flags,
                            guint16 channel, guint16 channels,
                            guint8 mac[VRM_PROTO_MAC_LEN]);
/* Constant time */
bool vrmProtoMacEqual(const guint8 *a, const guint8 *b, size_t len);

/* The reject record; @version is the rejecting side's */
void vrmProtoRejectEncode(int reason, guint32 version, guint8 buf[VRM_PROTO_REJECT_LEN]);
/* Returns the reason, or VRM_REJECT_NONE if buf is not a virt-rdma reject;
 * *version (may be NULL) the version of the side that rejected. */
int vrmProtoRejectDecode(const void *buf, size_t len, guint32 *version);

/* The seed's rule: unknown bits ignored, result is the intersection. */


/* Settings checks shared by the engine and its peers' descriptions */
int vrmProtoCheckChunkSize(guint64 size);
int vrmProtoCheckDepth(guint64 depth);
int vrmProtoCheckChannels(guint64 channels);

typedef struct {
    guint32 len;
    guint32 type;
    guint32 repeat;
} vrmProtoHeader;

/* A decoded, length-checked control message; payload points into the
 * receive buffer. */
typedef struct {
    vrmProtoHeader hdr;
    const guint8 *payload;
} vrmProtoMsg;

void vrmProtoHeaderEncode(const vrmProtoHeader *hdr, guint8 *buf);
int vrmProtoMsgDecode(const void *buf, size_t received, vrmProtoMsg *msg);
/* Size in bytes of one entry of a type, 0 for variable or reserved types */
size_t vrmProtoEntrySize(int type);
/* Largest repeat that fits in one message for a type */
guint32 vrmProtoMaxEntries(int type);

/* Message builders: write header + entries into buf (VRM_CONTROL_MESSAGE_MAX
 * bytes) and return the total length. */
typedef struct {
    guint32 index;
    guint32 depth;
    guint32 length;
    guint32 rkey;
    guint64 addr;
} vrmProtoRingEntry;

typedef struct {
    guint32 index;
    guint32 rkey;
    guint64 addr;
} vrmProtoRegResult;

typedef struct {
    guint32 index;
    guint32 length;
} vrmProtoDataEntry;

/* CHANNEL_OPEN_TCP's one entry: the source QEMU connected this channel to
 * a TCP address (before the source host steered it into the engine) */
#define VRM_PROTO_TCP_OPEN_LEN 24
typedef enum {
    VRM_PROTO_FAMILY_IPV4 = 4,
    VRM_PROTO_FAMILY_IPV6 = 6,
} vrmProtoFamily;

typedef struct {
    guint32 channel;
    guint16 family;             /* vrmProtoFamily */
    guint16 port;               /* never 0 */
    guint8 addr[16];            /* IPv4: the first 4 bytes, the rest zero */
} vrmProtoTcpOpen;

size_t vrmProtoBuildError(guint8 *buf, guint32 code, const char *text);
size_t vrmProtoBuildTcpOpen(guint8 *buf, const vrmProtoTcpOpen *open);
size_t vrmProtoBuildAuth(guint8 *buf, const guint8 mac[VRM_PROTO_MAC_LEN]);
size_t vrmProtoBuildU32Pair(guint8 *buf, int type, guint32 a, guint32 b);
size_t vrmProtoBuildU64(guint8 *buf, int type, guint64 value);
size_t vrmProtoBuildRing(guint8 *buf, const vrmProtoRingEntry *entries,
                         guint32 n);
size_t vrmProtoBuildRegRequest(guint8 *buf, const guint32 *indexes,
                               guint32 n);
size_t vrmProtoBuildRegResult(guint8 *buf, const vrmProtoRegResult *res,
                              guint32 n);
size_t vrmProtoBuildData(guint8 *buf, const vrmProtoDataEntry *entries,
                         guint32 n);

/* Entry accessors; i < msg->hdr.repeat, checked by vrmProtoMsgDecode */
void vrmProtoGetU32Pair(const vrmProtoMsg *msg, guint32 i,
                        guint32 *a, guint32 *b);
guint64 vrmProtoGetU64(const vrmProtoMsg *msg);
void vrmProtoGetRing(const vrmProtoMsg *msg, guint32 i,
                     vrmProtoRingEntry *e);
void vrmProtoGetRegResult(const vrmProtoMsg *msg, guint32 i,
                          vrmProtoRegResult *r);
const guint8 *vrmProtoGetAuth(const vrmProtoMsg *msg);
/* CHANNEL_OPEN_TCP's entry (checked by vrmProtoMsgDecode) */
void vrmProtoGetTcpOpen(const vrmProtoMsg *msg, vrmProtoTcpOpen *open);
/* ERROR: code and a newly allocated, validated text */
int vrmProtoGetError(const vrmProtoMsg *msg, guint32 *code, char **text);

/* Ring entries: the checks of docs/protocol.rst for entry number `expect` */
int vrmProtoRingEntryCheck(const vrmProtoRingEntry *e, guint32 expect,
                           guint32 depth_seen, guint32 length_seen);

guint32 vrmProtoImmEncode(guint32 index, guint32 length);
void vrmProtoImmDecode(guint32 imm, guint32 *tag, guint32 *length);
