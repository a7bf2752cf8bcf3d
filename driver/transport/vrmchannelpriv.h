/*
 * vrmchannelpriv.h: what the files of one channel share; not for the engine
 *
 * A channel is five files, each calling only those below it (the layering
 * check holds them to it):
 *   vrmchannel.c      life cycle, mailbox, completions, the progress thread
 *   vrmchannelctl.c   control messages: what we send in each state, what the
 *                     peer's mean, and which is legal when (vrmChannelRules)
 *   vrmchanneltx.c    QEMU's socket -> staging chunks -> RDMA WRITEs
 *   vrmchannelrx.c    our ring -> QEMU's socket, credits back
 *   vrmchannelpost.c  rings, work requests and posting, the states' setters
 */
#pragma once

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "vrmchannel.h"
#include "vrmflow.h"
#include "vrmsplice.h"
#include "vrmtransfer.h"
#include "vrmproto.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

#define VRM_CHANNEL_POLL_MS 100         /* longest block without a look at the mailbox */
#define VRM_CHANNEL_STOP_WAIT_US (1000 * 1000)   /* ERROR delivery on the way out */
#define VRM_CHANNEL_END_WAIT_US (2000 * 1000)    /* last completions at a clean end */
#define VRM_CHANNEL_CTL_RESERVE 8       /* send slots kept for control messages */
#define VRM_CHANNEL_REG_WINDOW 4        /* dynamic: chunks registered ahead */
#define VRM_CHANNEL_WC_BATCH 32
#define VRM_CHANNEL_RING_BATCH 170      /* RAM_BLOCKS entries per message */
#define VRM_CHANNEL_KEEPALIVE_US (1000 * 1000) /* probe a silent peer after 1 s */
#define VRM_CHANNEL_PEER_TIMEOUT_US (5 * 1000 * 1000) /* signaled work unanswered */
/* ... on this channel while the job's others complete work: a wire slow
 * enough for that (Soft-RoCE retrying over a lossy link, issue 39) is
 * still a wire; a channel that stays silent this long is not */
#define VRM_CHANNEL_STALL_TIMEOUT_US (30 * 1000 * 1000)
#define VRM_CHANNEL_AUTH_TIMEOUT_US (5 * 1000 * 1000)  /* source: AUTH awaited */
/* A flushed work request or a send rxe could not transmit usually means
 * the peer or the link went, before that is known: librdmacm flushes the
 * queue pair as it hands the engine thread the peer's DISCONNECTED, ahead
 * of the mailbox; rxe fails the send before its port shows down; a killed
 * peer's memory regions go before its connection does, so a write lands
 * on nothing (remote access error) before its DISCONNECTED comes (CI saw
 * that). Such a completion waits this long for the cause before it is the
 * error: two seconds, as a killed engine unpins its buffers first. */
#define VRM_CHANNEL_FAILED_GRACE_US (2 * 1000 * 1000)
/* A chunk that QEMU's writer left part-filled is posted at once only if
 * fewer chunks than this are in flight; otherwise it waits for more bytes
 * or the next credit, whichever comes first (see vrmChannelHoldPartial) */
#define VRM_CHANNEL_HOLD_INFLIGHT 2
/* How often a channel whose ring pages QEMU's socket still reads (zero
 * copy) looks whether QEMU has taken them: the socket wakes a writer only
 * when it is nearly empty, not when a given byte was read */
#define VRM_CHANNEL_TAKEN_POLL_MS 1

G_STATIC_ASSERT(VRM_CHANNEL_RING_BATCH * 24 <= VRM_PROTO_PAYLOAD_MAX);

#define vrm_container_of(ptr, type, member) \
    ((type *)((char *)(ptr) - offsetof(type, member)))

/* ------------------------------------------------------------------ */
/* The channel                                                         */

typedef enum {
    VRM_WR_SEND = 0,            /* a send-queue slot (WRITE or SEND) */
    VRM_WR_RECV,                /* a receive buffer */
} vrmWorkKind;

/* What every wr_id points at; recovered with container_of (SPDK) */
typedef struct {
    vrmWorkKind kind;
} vrmWorkId;

typedef struct {
    vrmWorkId id;               /* wr_id */
    guint64 seq;                /* running number of the work request */
    gint32 stage;               /* staging chunk freed when retired, or -1 */
    /* what it carried, for the error that names a failed one */
    enum ibv_wr_opcode opcode;
    guint32 len;                /* bytes */
    guint32 what;               /* a SEND: its message type; a WRITE: the
                                 * peer's chunk it targets */
    guint32 nverbs;             /* verbs work requests it took (split chunk) */
} vrmSendSlot;

typedef struct {
    vrmWorkId id;               /* wr_id */
    guint32 index;              /* receive buffer number */
} vrmRecvSlot;

/* A ring of chunks in our memory */
typedef struct {
    guint8 *mem;                /* depth * chunk bytes, page aligned */
    guint32 depth;
    guint32 chunk;
    struct ibv_mr *whole;       /* pin-all: one registration */
    struct ibv_mr **mrs;        /* dynamic: per chunk, on first use */
} vrmRing;

/* The end of QEMU's stream, with the owner's verdict (cfg.checkEnd) */
typedef enum {
    VRM_CHANNEL_END_NONE,       /* the stream goes on */
    VRM_CHANNEL_END_ASKED,      /* it ended; is QEMU still there? */
    VRM_CHANNEL_END_CLEARED,    /* it is: the end is an end, not a crash */
} vrmChannelEnd;

/* How our ring's bytes reach QEMU's socket, chosen at the first byte */
typedef enum {
    VRM_CHANNEL_DELIVER_UNSET,
    VRM_CHANNEL_DELIVER_SPLICE, /* page references, no copy (vrmsplice.h) */
    VRM_CHANNEL_DELIVER_COPY,   /* send(): no pipe, or the system refused */
} vrmChannelDeliver;

struct _vrmChannel {
    vrmChannelConfig cfg;
    vrmChannelHost host;
    guint32 caps;               /* agreed with the peer */
    const vrmTransferMode *mode; /* how chunks are announced: from caps */

    /* the two state machines (progress thread) */
    vrmChannelTx tx;
    vrmChannelRx rx;

    /* resources: set up by the owner, then the progress thread's */
    vrmRdmaDevice *dev;         /* not owned */
    vrmRdmaQP *qp;              /* owned */
    guint32 sqSize;             /* send slots: logical work requests */
    guint32 qpSend;             /* verbs work requests the send queue holds */
    guint32 maxWrite;           /* bytes per verbs work request, 0: a chunk
                                 * in one (vrmRdmaQPMaxMessage) */
    bool maxWriteKnown;         /* ... learnt, once the queue pair is connected */
    guint32 ctlLimit;           /* until then: the device's limit, for control
                                 * messages (0: none) */
    guint32 rqSize;
    guint32 sigInterval;        /* signal every Nth send WR at most */
    guint32 sigVerbs;           /* ... and every Nth verbs work request */
    vrmSendSlot *sslots;        /* sqSize slots, seq % sqSize */
    guint8 *ctlSend;            /* sqSize control buffers */
    struct ibv_mr *ctlSendMr;
    vrmRecvSlot *rslots;        /* rqSize slots */
    guint8 *ctlRecv;            /* rqSize receive buffers */
    struct ibv_mr *ctlRecvMr;
    guint32 recvPosted;         /* receive buffers on the queue */
    vrmRing ring;               /* our receive ring, the peer writes it */
    vrmRing stage;              /* our staging ring, we write from it */
    struct ibv_send_wr *wrs;    /* batch scratch, qpSend entries */
    struct ibv_sge *sges;
    guint32 *lastVerbs;         /* per logical WR of a batch: its last verbs one */
    guint32 batchVerbs;         /* verbs WRs of the batch being built */
    struct ibv_recv_wr *rwrs;   /* receive scratch, rqSize entries */
    struct ibv_sge *rsges;
    vrmTransferBatch batch;     /* the chunks of the post being built */
    guint32 *repost;            /* receive buffers to post again */
    GThread *thread;
    int wakefd;                 /* eventfd: owner -> progress thread */
    bool wakeSignalled;         /* poll saw it readable: read it once (the
                                 * mailbox itself is read every round) */

    /* the send queue */
    guint64 postSeq;            /* seq of the next send WR */
    guint64 retiredSeq;         /* every seq below it is retired */
    guint64 lastSignaled;       /* seq of the last signaled WR + 1 */
    guint64 postedVerbs;        /* verbs work requests posted */
    guint64 retiredVerbs;       /* ... and retired */
    guint64 lastSignaledVerbs;  /* postedVerbs count of the last signaled one */
    guint64 keepaliveSeq;       /* seq + 1 of the outstanding KEEPALIVE, 0 none */
    gint64 lastActivity;        /* last completion polled (monotonic us) */

    /* our direction */
    guint32 descNext;           /* next entry of our description to send */
    guint32 stageHead;          /* next staging chunk to fill */
    guint32 stageUsed;          /* staging chunks in flight or filling */
    guint32 stageFill;          /* bytes read into the head chunk */
    guint64 txTotal;            /* bytes read from the socket */
    vrmTxFlow txf;
    vrmRemoteRing remote;       /* the peer's ring */
    bool sockEof;               /* the socket's read side ended */
    bool stalled;               /* inside a credit stall (counted once) */

    /* the peer's direction */
    vrmRxFlow rxf;
    guint32 *rxLen;             /* bytes announced per chunk of our ring */
    guint8 *rxRegd;             /* dynamic: chunks registered for the peer */
    guint32 rxOff;              /* bytes of the drain chunk written */
    bool rxBlocked;             /* the socket's send buffer is full */
    guint64 rxTotal;            /* bytes written to the socket, whole chunks */
    guint64 rxSplicedEnd;       /* bytes written to the socket after the
                                 * last byte spliced (vrmChannelRxWritten) */
    guint64 *rxFreeAt;          /* per chunk: bytes QEMU must have read before
                                 * the chunk is free again, 0 at once */
    vrmChannelDeliver deliver;  /* how our ring reaches the socket */
    vrmSplice splice;
    guint32 creditsDue;         /* credits to return with READY */
    vrmProtoRegResult *regRes;  /* REGISTER_RESULT entries to send */
    guint32 nRegRes;

    int sock;                   /* QEMU's connection, -1 until given */
    vrmProtoTcpOpen tcpOpen;    /* source: the TCP address QEMU connected to */
    bool tcpOpenSet;            /* ... sent by CHANNEL_OPEN_TCP, not CHANNEL_OPEN */
    bool faultDone;             /* the test fault fired */
    bool peerGone;              /* the peer disconnected (from the mailbox) */
    gint64 wcFailedUs;          /* first completion awaiting its cause (see
                                 * VRM_CHANNEL_FAILED_GRACE_US), or 0 */
    enum ibv_wc_status wcFailed;    /* and its status */
    char *wcFailedWr;           /* and its work request, described (a send) */
    gint64 doneSince;           /* both directions ended at (monotonic us) */
    gint64 attachedUs;          /* the queue pair came (monotonic us) */

    /* the mutual authentication */
    guint8 auth[VRM_PROTO_MAC_LEN]; /* destination: to send; source: expected */
    bool unauthenticated;       /* source: the peer failed to prove itself */

    /* source, channel 0: connections QEMU opened, to announce */
    guint32 announce[VRM_SLOTS_MAX];
    guint32 nannounce;

    /* the end of QEMU's stream, when the owner must say whether QEMU lives */
    vrmChannelEnd end;
    int endErr;                 /* the socket error that ended it, 0 for EOF */
    bool endReading;            /* ... while reading (or writing) */

    /* mailbox, under lock */
    GMutex lock;
    int mbFd;                   /* socket handed over, -1 none */
    vrmProtoTcpOpen mbTcpOpen;  /* ... and the TCP address it was meant for */
    bool mbTcpOpenSet;
    bool mbStop;                /* the job is ending */
    int mbCode;                 /* and why, for the ERROR to the peer */
    char *mbReason;
    bool mbPeerGone;
    guint32 mbAnnounce[VRM_SLOTS_MAX];
    guint32 mbNannounce;
    bool mbClosed;              /* the stream ended: nothing more is read */
    int mbVerdict;              /* 0 none, 1 QEMU alive, 2 gone */
    int mbQemuPid;              /* (gone) its pid */
    vrmChannelEvents ev;        /* for the owner */

    vrmStats stats;
    /* first and last time this channel moved stream bytes (monotonic us;
     * progress thread writes, others read relaxed): the data phase that
     * mbps-average is measured over, without connection set-up */
    gint64 firstByteUs;
    gint64 lastByteUs;
};

/* ---- the send queue's room (vrmchannelpost.c posts into it) ---- */

/* Work requests of the verbs send queue in use: every logical one, and
 * the extra pieces of the chunks split to the device's message limit */
static inline guint32
vrmChannelVerbsFree(const vrmChannel *ch)
{
    return ch->qpSend - (guint32)(ch->postedVerbs - ch->retiredVerbs);
}

/* Send slots free: a logical work request needs one, and the queue pair
 * at least one verbs work request */
static inline guint32
vrmChannelSqFree(const vrmChannel *ch)
{
    return MIN(ch->sqSize - (guint32)(ch->postSeq - ch->retiredSeq),
               vrmChannelVerbsFree(ch));
}

static inline guint8 *
vrmChannelCtlBuf(vrmChannel *ch, guint32 i)
{
    return ch->ctlSend + (size_t)((ch->postSeq + i) % ch->sqSize) *
           VRM_CONTROL_MESSAGE_MAX;
}

/* The most verbs work requests one chunk of @len bytes takes */
static inline guint32
vrmChannelChunkVerbs(const vrmChannel *ch, guint32 len)
{
    return ch->maxWrite ? MAX(1, (len + ch->maxWrite - 1) / ch->maxWrite) : 1;
}

/* vrmchannelpost.c */
guint8 *vrmChannelMap(size_t len);
void vrmChannelUnmap(void *mem, size_t len);
int vrmRingAlloc(vrmRing *ring, guint32 depth, guint32 chunk);
void vrmRingClear(vrmRdmaDevice *dev, vrmRing *ring);
int vrmRingRegisterChunk(vrmChannel *ch, vrmRing *ring, guint32 i, int access);
int vrmRingRegisterAll(vrmChannel *ch, vrmRing *ring, int access);
struct ibv_mr *vrmRingMR(const vrmRing *ring, guint32 i);
void vrmChannelTraceChunk(const vrmChannel *ch, const char *what, guint64 offset,
                          const guint8 *mem, guint32 len);
guint32 vrmChannelMaxWrite(const vrmChannelConfig *cfg, guint32 device);
int vrmChannelPostRecvs(vrmChannel *ch, const guint32 *which, guint32 n);
void vrmChannelSignal(vrmChannel *ch, bool *flag);
void vrmChannelPrepChunk(vrmChannel *ch, guint32 i, guint32 s, guint32 ridx,
                         guint32 len);
guint32 vrmChannelCtlEntries(const vrmChannel *ch, int type);
void vrmChannelPrepSend(vrmChannel *ch, guint32 i, size_t len);
int vrmChannelPostBatch(vrmChannel *ch, guint32 n, bool force_last);
int vrmChannelPostCtl(vrmChannel *ch, size_t len, bool signal);
int vrmChannelPostPair(vrmChannel *ch, int type, guint32 a, bool signal);
int vrmChannelPostOpen(vrmChannel *ch);
void vrmChannelSetTx(vrmChannel *ch, vrmChannelTx state);
void vrmChannelSetRx(vrmChannel *ch, vrmChannelRx state);
void vrmChannelNoteBytes(vrmChannel *ch);
int vrmChannelSocketError(vrmChannel *ch, int err, bool reading);
int vrmChannelStreamEnds(vrmChannel *ch, int err, bool reading);
guint64 vrmChannelRxWritten(const vrmChannel *ch);
bool vrmChannelLogicallyDone(const vrmChannel *ch);

/* vrmchanneltx.c */
bool vrmChannelTxCanWrite(const vrmChannel *ch);
int vrmChannelPumpTx(vrmChannel *ch, bool *progress);

/* vrmchannelrx.c */
bool vrmChannelAwaitsReader(const vrmChannel *ch);
int vrmChannelPumpRx(vrmChannel *ch, bool *progress);

/* vrmchannelctl.c */
int vrmChannelPumpControl(vrmChannel *ch, bool *progress);
int vrmChannelChunkArrived(vrmChannel *ch, const vrmTransferArrival *a);
int vrmChannelHandleMessage(vrmChannel *ch, const guint8 *buf, size_t len);
