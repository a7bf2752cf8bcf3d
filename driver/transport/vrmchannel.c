/*
 * vrmchannel.c: one channel = one QEMU connection <-> one RC queue pair
 *
 * Data path (progress thread):
 *   socket -> staging chunk -> RDMA WRITEs -> peer's ring, announced as
 *   the transfer mode does it (vrmtransfer.h)
 *   our ring -> socket, credits back with READY
 * Control: the two state machines of vrmchannel.h, driven by one table of
 * which message is legal in which state (vrmChannelRules) and one pump that
 * is a switch on our direction's state (vrmChannelPumpControl).
 */
#include <config.h>

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

VRM_ENUM_IMPL(vrmChannelTx, VRM_CHANNEL_TX_LAST,
              "auth",
              "describe",
              "wait-open",
              "open",
              "stream",
              "eof-sent",
              "done",
);

VRM_ENUM_IMPL(vrmChannelRx, VRM_CHANNEL_RX_LAST,
              "auth",
              "describe",
              "open",
              "stream",
              "drain",
              "done",
);

/* ------------------------------------------------------------------ */
/* Which message is legal in which state                              */

typedef enum {
    VRM_RULE_RX,                /* judged by the peer's direction's state */
    VRM_RULE_TX,                /* an answer to our direction: judged by ours */
} vrmRuleSide;

typedef struct {
    vrmRuleSide side;
    unsigned int roles;         /* VRM_ENGINE_FOR_*: who may receive it */
    unsigned int states;        /* one bit per vrmChannelRx or vrmChannelTx state */
} vrmChannelRule;

#define RX(s) (1u << VRM_CHANNEL_RX_##s)
#define TX(s) (1u << VRM_CHANNEL_TX_##s)
/* every state once the peer has proved who it is */
#define RX_ANY (RX(DESCRIBE) | RX(OPEN) | RX(STREAM) | RX(DRAIN) | RX(DONE))

/* A type without a row (NONE, QEMU_FILE, COMPRESS, REGISTER_FINISHED, and
 * version 1's CHANNEL_UNUSED) is never legal; the decoder refuses those
 * already. Until the destination's AUTH has been checked, AUTH is the only
 * legal message. */
static const vrmChannelRule vrmChannelRules[VRM_MSG_LAST] = {
    [VRM_MSG_AUTH] = { VRM_RULE_RX, VRM_ENGINE_FOR_SOURCE, RX(AUTH) },
    [VRM_MSG_ERROR] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX_ANY },
    [VRM_MSG_READY] = { VRM_RULE_TX, VRM_ENGINE_FOR_BOTH, TX(STREAM) | TX(EOF_SENT) },
    [VRM_MSG_RAM_BLOCKS] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX(DESCRIBE) },
    [VRM_MSG_REGISTER_REQUEST] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX(STREAM) },
    [VRM_MSG_REGISTER_RESULT] = { VRM_RULE_TX, VRM_ENGINE_FOR_BOTH, TX(STREAM) | TX(EOF_SENT) },
    [VRM_MSG_CHANNEL_OPEN] = { VRM_RULE_RX, VRM_ENGINE_FOR_DESTINATION, RX(OPEN) },
    [VRM_MSG_CHANNEL_OPEN_TCP] = { VRM_RULE_RX, VRM_ENGINE_FOR_DESTINATION, RX(OPEN) },
    [VRM_MSG_DATA] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX(STREAM) },
    [VRM_MSG_EOF] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX(STREAM) },
    [VRM_MSG_EOF_ACK] = { VRM_RULE_TX, VRM_ENGINE_FOR_BOTH, TX(EOF_SENT) },
    [VRM_MSG_KEEPALIVE] = { VRM_RULE_RX, VRM_ENGINE_FOR_BOTH, RX_ANY },
    /* before channel 0's own stream too: QEMU connects its disks (NBD)
     * before it starts the migration stream */
    [VRM_MSG_CHANNEL_CONNECT] = { VRM_RULE_RX, VRM_ENGINE_FOR_DESTINATION, RX(OPEN) | RX(STREAM) },
};

#undef RX
#undef TX
#undef RX_ANY

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

/* ------------------------------------------------------------------ */
/* Rings                                                               */

/* Anonymous mappings for every registered buffer: page aligned and zeroed
 * (no stale heap data can reach a socket or the peer), and a page costs
 * nothing until it is used */
static guint8 *
vrmChannelMap(size_t len)
{
    void *mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (mem == MAP_FAILED) {
        vrmReportSystemError(errno, _("cannot allocate %1$zu bytes for a channel"), len);
        return NULL;
    }
    return mem;
}

static void
vrmChannelUnmap(void *mem, size_t len)
{
    if (mem)
        munmap(mem, len);
}

static int
vrmRingAlloc(vrmRing *ring, guint32 depth, guint32 chunk)
{
    if (!(ring->mem = vrmChannelMap((size_t)depth * chunk)))
        return -1;
    ring->depth = depth;
    ring->chunk = chunk;
    ring->mrs = g_new0(struct ibv_mr *, depth);
    return 0;
}

/* pinned-bytes keeps the peak: registrations are not subtracted here */
static void
vrmRingClear(vrmRdmaDevice *dev, vrmRing *ring)
{
    guint32 i;

    if (dev) {
        vrmRdmaDeregister(dev, ring->whole);
        for (i = 0; ring->mrs && i < ring->depth; i++)
            vrmRdmaDeregister(dev, ring->mrs[i]);
    }
    g_free(ring->mrs);
    vrmChannelUnmap(ring->mem, (size_t)ring->depth * ring->chunk);
    memset(ring, 0, sizeof(*ring));
}

static int
vrmRingRegisterChunk(vrmChannel *ch, vrmRing *ring, guint32 i, int access)
{
    guint64 us = 0;

    if (ring->whole || ring->mrs[i])
        return 0;
    if (!(ring->mrs[i] = vrmRdmaRegister(ch->dev, ring->mem + (size_t)i * ring->chunk,
                                         ring->chunk, access, &us)))
        return -1;
    vrmStatsAdd(&ch->stats, VRM_STAT_REGISTRATIONS, 1);
    vrmStatsAdd(&ch->stats, VRM_STAT_REGISTRATION_US, us);
    vrmStatsAdd(&ch->stats, VRM_STAT_PINNED_BYTES, ring->chunk);
    return 0;
}

static int
vrmRingRegisterAll(vrmChannel *ch, vrmRing *ring, int access)
{
    guint64 us = 0;
    size_t len = (size_t)ring->depth * ring->chunk;

    if (!(ring->whole = vrmRdmaRegister(ch->dev, ring->mem, len, access, &us)))
        return -1;
    vrmStatsAdd(&ch->stats, VRM_STAT_REGISTRATIONS, 1);
    vrmStatsAdd(&ch->stats, VRM_STAT_REGISTRATION_US, us);
    vrmStatsAdd(&ch->stats, VRM_STAT_PINNED_BYTES, len);
    return 0;
}

static inline struct ibv_mr *
vrmRingMR(const vrmRing *ring, guint32 i)
{
    return ring->whole ? ring->whole : ring->mrs[i];
}

/* At debug level only: a digest of every chunk as it leaves QEMU's socket
 * on the source and as it is handed to QEMU's socket on the destination,
 * with its stream offset, so that the two engines' logs prove (or
 * disprove) that the transport moved each byte unchanged */
static void
vrmChannelTraceChunk(const vrmChannel *ch, const char *what, guint64 offset,
                     const guint8 *mem, guint32 len)
{
    guint64 h = 0xcbf29ce484222325ull;
    guint32 i;

    if (vrmLogGetLevel() < VRM_LOG_DEBUG)
        return;
    for (i = 0; i + 8 <= len; i += 8) {
        guint64 w;

        memcpy(&w, mem + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < len; i++)
        h = (h ^ mem[i]) * 0x100000001b3ull;
    VRM_DEBUG("channel %u: chunk %s offset %" G_GUINT64_FORMAT " length %u digest %016" G_GINT64_MODIFIER "x",
              ch->cfg.index, what, offset, len, h);
}

/* ------------------------------------------------------------------ */
/* Life cycle (owner)                                                  */

vrmChannel *
vrmChannelNew(const vrmChannelConfig *cfg, const vrmChannelHost *host)
{
    vrmChannel *ch = g_new0(vrmChannel, 1);

    ch->cfg = *cfg;
    ch->mode = vrmTransferModeFor(0);
    ch->host = *host;
    ch->tx = VRM_CHANNEL_TX_AUTH;
    ch->rx = cfg->role == VRM_ENGINE_ROLE_SOURCE ? VRM_CHANNEL_RX_AUTH :
        VRM_CHANNEL_RX_DESCRIBE;
    ch->sock = -1;
    ch->mbFd = -1;
    ch->wakefd = -1;
    ch->splice.pipe[0] = ch->splice.pipe[1] = -1;
    g_mutex_init(&ch->lock);
    return ch;
}

/* The message limit that applies (0: none): the setting, else the
 * device's */
static guint32
vrmChannelMaxWrite(const vrmChannelConfig *cfg, guint32 device)
{
    if (cfg->maxWrite == VRM_MAX_WRITE_UNLIMITED)
        return 0;
    return cfg->maxWrite ? cfg->maxWrite : device;
}

static inline guint32 vrmChannelChunkVerbs(const vrmChannel *ch, guint32 len);

int
vrmChannelQueueSizes(const vrmChannelConfig *cfg, const vrmRdmaDevice *dev,
                     guint32 *sendSize, guint32 *recvSize, int *cqe)
{
    guint32 depth = cfg->ringDepth;
    guint32 limit = vrmChannelMaxWrite(cfg, dev->maxMessage);
    /* verbs work requests of one chunk (a split chunk takes several) */
    guint64 pieces = limit ? ((guint64)cfg->chunkSize + limit - 1) / limit : 1;
    guint64 want = VRM_SEND_SLOTS(depth) + depth * (pieces - 1);
    guint32 minSq = depth + 2 + VRM_CHANNEL_CTL_RESERVE;

    *sendSize = vrmRdmaClamp(MIN(want, G_MAXINT32), dev->maxQpWr, "send queue");
    *recvSize = vrmRdmaClamp(VRM_RECV_SLOTS(depth), dev->maxQpWr, "receive queue");
    if (pieces > 1 && *sendSize < pieces + minSq) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("on device %1$s a chunk of %2$u bytes takes %3$llu work requests (messages of at most %4$u bytes), more than its send queue of %5$d holds; use a smaller chunk size"),
                       dev->name, cfg->chunkSize, (unsigned long long)pieces, limit,
                       dev->maxQpWr);
        return -1;
    }
    if (*sendSize < minSq || *recvSize < VRM_RECV_SLOTS(depth)) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("device %1$s allows %2$d work requests per queue, a ring depth of %3$u needs %4$u"),
                       dev->name, dev->maxQpWr, depth, VRM_RECV_SLOTS(depth));
        return -1;
    }
    *cqe = vrmRdmaClamp(*sendSize + *recvSize + 1, dev->maxCqe, "completion queue");
    if ((guint32)*cqe < *sendSize + *recvSize) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("device %1$s allows %2$d completion queue entries, %3$u are needed"),
                       dev->name, dev->maxCqe, *sendSize + *recvSize);
        return -1;
    }
    return 0;
}

int
vrmChannelSetup(vrmChannel *ch, vrmRdmaDevice *dev)
{
    int access = IBV_ACCESS_LOCAL_WRITE;
    guint32 depth = ch->cfg.ringDepth;
    int cqe;

    if (ch->dev)
        return 0;       /* already set up (destination retry) */
    if (vrmChannelQueueSizes(&ch->cfg, dev, &ch->qpSend, &ch->rqSize, &cqe) < 0)
        return -1;
    ch->dev = dev;
    ch->sqSize = MIN(VRM_SEND_SLOTS(depth), ch->qpSend);
    ch->sigInterval = MAX(1, ch->sqSize / 4);
    ch->sigVerbs = MAX(1, ch->qpSend / 4);
    ch->ctlLimit = vrmChannelMaxWrite(&ch->cfg, dev->maxMessage);
    if ((ch->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        vrmReportSystemError(errno, _("cannot create an eventfd"));
        return -1;
    }
    ch->sslots = g_new0(vrmSendSlot, ch->sqSize);
    ch->rslots = g_new0(vrmRecvSlot, ch->rqSize);
    ch->wrs = g_new0(struct ibv_send_wr, ch->qpSend);
    ch->sges = g_new0(struct ibv_sge, ch->qpSend);
    ch->lastVerbs = g_new0(guint32, ch->sqSize);
    ch->rwrs = g_new0(struct ibv_recv_wr, ch->rqSize);
    ch->rsges = g_new0(struct ibv_sge, ch->rqSize);
    ch->repost = g_new0(guint32, ch->rqSize);
    ch->regRes = g_new0(vrmProtoRegResult, depth);
    ch->rxLen = g_new0(guint32, depth);
    ch->rxRegd = g_new0(guint8, depth);
    ch->rxFreeAt = g_new0(guint64, depth);

    if (vrmRingAlloc(&ch->ring, depth, ch->cfg.chunkSize) < 0 ||
        vrmRingAlloc(&ch->stage, depth, ch->cfg.chunkSize) < 0)
        return -1;
    if (!(ch->ctlSend = vrmChannelMap((size_t)ch->sqSize * VRM_CONTROL_MESSAGE_MAX)) ||
        !(ch->ctlRecv = vrmChannelMap((size_t)ch->rqSize * VRM_CONTROL_MESSAGE_MAX)))
        return -1;
    if (!(ch->ctlSendMr = vrmRdmaRegister(dev, ch->ctlSend,
                                          (size_t)ch->sqSize * VRM_CONTROL_MESSAGE_MAX,
                                          access, NULL)) ||
        !(ch->ctlRecvMr = vrmRdmaRegister(dev, ch->ctlRecv,
                                          (size_t)ch->rqSize * VRM_CONTROL_MESSAGE_MAX,
                                          access, NULL)))
        return -1;
    vrmStatsAdd(&ch->stats, VRM_STAT_PINNED_BYTES,
                (guint64)(ch->sqSize + ch->rqSize) * VRM_CONTROL_MESSAGE_MAX);

    /* Pin-all is decided by the local setting here; the agreed set can only
     * be smaller, and an unused registration is harmless. */
    if (ch->cfg.pinAll) {
        if (vrmRingRegisterAll(ch, &ch->ring, access | IBV_ACCESS_REMOTE_WRITE) < 0 ||
            vrmRingRegisterAll(ch, &ch->stage, access) < 0)
            return -1;
    }
    vrmRxFlowInit(&ch->rxf, depth, ch->cfg.chunkSize);
    return 0;
}

static int
vrmChannelPostRecvs(vrmChannel *ch, const guint32 *which, guint32 n)
{
    guint32 i;

    if (n == 0)
        return 0;
    for (i = 0; i < n; i++) {
        vrmRecvSlot *slot = &ch->rslots[which[i]];

        slot->id.kind = VRM_WR_RECV;
        slot->index = which[i];
        ch->rsges[i] = (struct ibv_sge) {
            .addr = (uintptr_t)(ch->ctlRecv + (size_t)which[i] * VRM_CONTROL_MESSAGE_MAX),
            .length = VRM_CONTROL_MESSAGE_MAX,
            .lkey = ch->ctlRecvMr->lkey,
        };
        ch->rwrs[i] = (struct ibv_recv_wr) {
            .wr_id = (uintptr_t)&slot->id,
            .next = i + 1 < n ? &ch->rwrs[i + 1] : NULL,
            .sg_list = &ch->rsges[i],
            .num_sge = 1,
        };
    }
    if (vrmRdmaQPPostRecv(ch->qp, ch->rwrs) < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
        vrmReportError(VRM_ERR_RDMA, _("channel %1$u: %2$s"), ch->cfg.index, why);
        return -1;
    }
    ch->recvPosted += n;
    vrmStatsAdd(&ch->stats, VRM_STAT_DOORBELLS, 1);
    return 0;
}

int
vrmChannelAttachQP(vrmChannel *ch, vrmRdmaQP *qp, guint32 caps)
{
    guint32 i;

    g_assert(ch->dev && !ch->qp && !ch->thread);
    ch->qp = qp;
    ch->caps = caps;
    ch->mode = vrmTransferModeFor(caps);
    ch->maxWriteKnown = false;
    ch->recvPosted = 0;
    ch->lastActivity = ch->attachedUs = g_get_monotonic_time();
    for (i = 0; i < ch->rqSize; i++)
        ch->repost[i] = i;
    return vrmChannelPostRecvs(ch, ch->repost, ch->rqSize);
}

void
vrmChannelSetCaps(vrmChannel *ch, guint32 caps)
{
    g_assert(!ch->thread);
    ch->caps = caps;
    ch->mode = vrmTransferModeFor(caps);
}

void
vrmChannelSetAuth(vrmChannel *ch, const guint8 mac[VRM_PROTO_MAC_LEN])
{
    g_assert(!ch->thread);
    memcpy(ch->auth, mac, VRM_PROTO_MAC_LEN);
}

void
vrmChannelDropQP(vrmChannel *ch)
{
    g_assert(!ch->thread);
    vrmRdmaQPFree(g_steal_pointer(&ch->qp));
}

void
vrmChannelJoin(vrmChannel *ch)
{
    if (ch && ch->thread) {
        g_thread_join(ch->thread);
        ch->thread = NULL;
    }
}

void
vrmChannelFree(vrmChannel *ch)
{
    if (!ch)
        return;
    vrmChannelJoin(ch);
    if (ch->sock >= 0)
        close(ch->sock);
    if (ch->mbFd >= 0)
        close(ch->mbFd);
    vrmSpliceClose(&ch->splice);
    /* the queue pair before the memory it may still reference */
    vrmRdmaQPFree(ch->qp);
    vrmRingClear(ch->dev, &ch->ring);
    vrmRingClear(ch->dev, &ch->stage);
    if (ch->dev) {
        vrmRdmaDeregister(ch->dev, ch->ctlSendMr);
        vrmRdmaDeregister(ch->dev, ch->ctlRecvMr);
    }
    vrmChannelUnmap(ch->ctlSend, (size_t)ch->sqSize * VRM_CONTROL_MESSAGE_MAX);
    vrmChannelUnmap(ch->ctlRecv, (size_t)ch->rqSize * VRM_CONTROL_MESSAGE_MAX);
    g_free(ch->sslots);
    g_free(ch->rslots);
    g_free(ch->wrs);
    g_free(ch->sges);
    g_free(ch->lastVerbs);
    g_free(ch->wcFailedWr);
    g_free(ch->rwrs);
    g_free(ch->rsges);
    g_free(ch->repost);
    g_free(ch->regRes);
    g_free(ch->rxLen);
    g_free(ch->rxRegd);
    g_free(ch->rxFreeAt);
    vrmRemoteRingClear(&ch->remote);
    if (ch->wakefd >= 0)
        close(ch->wakefd);
    g_free(ch->mbReason);
    explicit_bzero(ch->auth, sizeof(ch->auth));
    g_mutex_clear(&ch->lock);
    g_free(ch);
}

/* ------------------------------------------------------------------ */
/* Mailbox (any thread)                                                */

static void
vrmChannelWake(vrmChannel *ch)
{
    guint64 one = 1;

    if (ch->wakefd >= 0 && write(ch->wakefd, &one, sizeof(one)) < 0 &&
        errno != EAGAIN)
        VRM_WARN("cannot wake channel %u: %s", ch->cfg.index, g_strerror(errno));
}

void
vrmChannelGiveSocket(vrmChannel *ch, int fd)
{
    g_mutex_lock(&ch->lock);
    g_assert(ch->mbFd < 0);
    ch->mbFd = fd;
    g_mutex_unlock(&ch->lock);
    vrmChannelWake(ch);
}

void
vrmChannelGiveTcpSocket(vrmChannel *ch, int fd, const vrmProtoTcpOpen *open)
{
    g_mutex_lock(&ch->lock);
    g_assert(ch->mbFd < 0);
    ch->mbFd = fd;
    ch->mbTcpOpen = *open;
    ch->mbTcpOpen.channel = ch->cfg.index;
    ch->mbTcpOpenSet = true;
    g_mutex_unlock(&ch->lock);
    vrmChannelWake(ch);
}

void
vrmChannelStop(vrmChannel *ch, int code, const char *reason)
{
    g_mutex_lock(&ch->lock);
    if (!ch->mbStop) {
        ch->mbStop = true;
        ch->mbCode = code;
        ch->mbReason = g_strdup(reason);
    }
    g_mutex_unlock(&ch->lock);
    vrmChannelWake(ch);
}

void
vrmChannelPeerGone(vrmChannel *ch)
{
    g_mutex_lock(&ch->lock);
    ch->mbPeerGone = true;
    g_mutex_unlock(&ch->lock);
    vrmChannelWake(ch);
}

/* Source, channel 0: QEMU opened connection @index after the main
 * connection's stream had ended: too late to announce it */
static void
vrmChannelReportLateConnection(guint32 index)
{
    vrmReportError(VRM_ERR_PROTOCOL,
                   _("QEMU opened connection %1$u after it had closed its main connection"),
                   index);
}

int
vrmChannelAnnounce(vrmChannel *ch, guint32 index)
{
    bool closed;

    g_mutex_lock(&ch->lock);
    closed = ch->mbClosed;
    if (!closed) {
        g_assert(ch->mbNannounce < G_N_ELEMENTS(ch->mbAnnounce));
        ch->mbAnnounce[ch->mbNannounce++] = index;
    }
    g_mutex_unlock(&ch->lock);
    if (closed) {
        vrmChannelReportLateConnection(index);
        return -1;
    }
    vrmChannelWake(ch);
    return 0;
}

int
vrmChannelCloseMailbox(vrmChannel *ch)
{
    guint32 n, first = 0;

    g_mutex_lock(&ch->lock);
    ch->mbClosed = true;
    n = ch->mbNannounce;
    if (n)
        first = ch->mbAnnounce[0];
    g_mutex_unlock(&ch->lock);
    if (n) {
        /* announced after our last look at the mailbox: it can no longer
         * go before our EOF, so the peer would never connect it */
        vrmChannelReportLateConnection(first);
        return -1;
    }
    return 0;
}

void
vrmChannelStreamVerdict(vrmChannel *ch, bool qemuAlive, int qemuPid)
{
    g_mutex_lock(&ch->lock);
    ch->mbVerdict = qemuAlive ? 1 : 2;
    ch->mbQemuPid = qemuPid;
    g_mutex_unlock(&ch->lock);
    vrmChannelWake(ch);
}

void
vrmChannelTakeEvents(vrmChannel *ch, vrmChannelEvents *ev)
{
    g_mutex_lock(&ch->lock);
    *ev = ch->ev;
    ch->ev.openRequested = false;
    ch->ev.tcpOpenSet = false;
    ch->ev.authenticated = false;
    ch->ev.streamEnded = false;
    ch->ev.nconnect = 0;
    g_mutex_unlock(&ch->lock);
}

/* Tell the owner something; it reads it with vrmChannelTakeEvents() */
static void
vrmChannelSignal(vrmChannel *ch, bool *flag)
{
    g_mutex_lock(&ch->lock);
    *flag = true;
    g_mutex_unlock(&ch->lock);
    if (ch->host.wake)
        ch->host.wake(ch->host.opaque);
}

/* ------------------------------------------------------------------ */
/* Send side                                                           */

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

/* The next verbs work request of the batch being built, for logical work
 * request @i: zeroed, chained, identified by its send slot (the pieces
 * of a split chunk all name their chunk's slot: an error on any of them
 * is that chunk's) */
static guint32
vrmChannelNextVerbs(vrmChannel *ch, guint32 i)
{
    guint32 v = ch->batchVerbs++;
    vrmSendSlot *slot = &ch->sslots[(ch->postSeq + i) % ch->sqSize];

    g_assert(v < ch->qpSend);
    memset(&ch->wrs[v], 0, sizeof(ch->wrs[v]));
    ch->wrs[v].wr_id = (uintptr_t)&slot->id;
    ch->wrs[v].sg_list = &ch->sges[v];
    ch->wrs[v].num_sge = 1;
    if (v > 0)
        ch->wrs[v - 1].next = &ch->wrs[v];
    slot->nverbs++;
    return v;
}

/* The send slot of logical WR number i of the batch starting at postSeq,
 * reset; its verbs work requests follow (vrmChannelNextVerbs) */
static vrmSendSlot *
vrmChannelPrepSlot(vrmChannel *ch, guint32 i, gint32 stage)
{
    guint64 seq = ch->postSeq + i;
    vrmSendSlot *slot = &ch->sslots[seq % ch->sqSize];

    slot->id.kind = VRM_WR_SEND;
    slot->seq = seq;
    slot->stage = stage;
    slot->opcode = IBV_WR_SEND;
    slot->len = 0;
    slot->what = 0;
    slot->nverbs = 0;
    return slot;
}

/* Prepare logical WR number i of one verbs work request; returns its
 * index in ch->wrs */
static guint32
vrmChannelPrepWR(vrmChannel *ch, guint32 i, gint32 stage)
{
    vrmChannelPrepSlot(ch, i, stage);
    return ch->lastVerbs[i] = vrmChannelNextVerbs(ch, i);
}

/* Prepare logical WR number i: @len bytes of staging chunk @s into chunk
 * @ridx of the peer's ring, its last WRITE as the transfer mode has it.
 * On a device with a message limit (ch->maxWrite) the chunk goes as
 * plain WRITEs of at most that many bytes, the last one announcing it
 * (write-imm): RC places every earlier WRITE before it completes. */
static void
vrmChannelPrepChunk(vrmChannel *ch, guint32 i, guint32 s, guint32 ridx,
                    guint32 len)
{
    vrmSendSlot *slot = vrmChannelPrepSlot(ch, i, s);
    guint8 *mem = ch->stage.mem + (size_t)s * ch->stage.chunk;
    guint32 lkey = vrmRingMR(&ch->stage, s)->lkey;
    guint32 off = 0;

    for (;;) {
        guint32 piece = ch->maxWrite ? MIN(ch->maxWrite, len - off) : len - off;
        bool last = off + piece == len;
        guint32 v = vrmChannelNextVerbs(ch, i);

        ch->sges[v] = (struct ibv_sge) {
            .addr = (uintptr_t)(mem + off),
            .length = piece,
            .lkey = lkey,
        };
        ch->wrs[v].wr.rdma.remote_addr = ch->remote.addr[ridx] + off;
        ch->wrs[v].wr.rdma.rkey = ch->remote.rkey[ridx];
        ch->wrs[v].opcode = IBV_WR_RDMA_WRITE;
        off += piece;
        if (last) {
            ch->mode->txChunk(&ch->batch, &ch->wrs[v], ridx, len);
            ch->lastVerbs[i] = v;
            slot->opcode = ch->wrs[v].opcode;
            break;
        }
    }
    slot->len = len;
    slot->what = ridx;
}

/* Entries of @type that one control message may carry: its protocol
 * bound, and within the message limit (a message of several packets is
 * what Soft-RoCE may retransmit wrongly); at least one */
static guint32
vrmChannelCtlEntries(const vrmChannel *ch, int type)
{
    guint32 most = vrmProtoMaxEntries(type);
    guint32 limit = ch->maxWriteKnown ? ch->maxWrite : ch->ctlLimit;

    if (limit && limit > VRM_PROTO_HEADER_LEN && vrmProtoEntrySize(type))
        most = MIN(most, (limit - VRM_PROTO_HEADER_LEN) / vrmProtoEntrySize(type));
    return MAX(most, 1);
}

/* The most verbs work requests one chunk of @len bytes takes */
static inline guint32
vrmChannelChunkVerbs(const vrmChannel *ch, guint32 len)
{
    return ch->maxWrite ? MAX(1, (len + ch->maxWrite - 1) / ch->maxWrite) : 1;
}

static void
vrmChannelPrepSend(vrmChannel *ch, guint32 i, size_t len)
{
    const guint8 *buf = vrmChannelCtlBuf(ch, i);
    vrmSendSlot *slot = &ch->sslots[(ch->postSeq + i) % ch->sqSize];
    guint32 v = vrmChannelPrepWR(ch, i, -1);

    ch->sges[v] = (struct ibv_sge) {
        .addr = (uintptr_t)buf,
        .length = len,
        .lkey = ch->ctlSendMr->lkey,
    };
    ch->wrs[v].opcode = IBV_WR_SEND;
    slot->len = len;
    /* the header's type field (big-endian, docs/protocol.rst) */
    slot->what = (guint32)buf[4] << 24 | (guint32)buf[5] << 16 |
                 (guint32)buf[6] << 8 | buf[7];
}

/* Selective signaling (UCX), then one doorbell for the whole batch. The
 * decision is per logical work request (its last verbs one carries the
 * flag); the interval counts verbs work requests, so that the pieces of
 * split chunks are reclaimed in time. */
static int
vrmChannelPostBatch(vrmChannel *ch, guint32 n, bool force_last)
{
    guint32 nv = ch->batchVerbs;
    guint32 i;

    if (n == 0)
        return 0;
    g_assert(n <= ch->sqSize - (guint32)(ch->postSeq - ch->retiredSeq));
    g_assert(nv <= vrmChannelVerbsFree(ch));
    for (i = 0; i < n; i++) {
        guint32 v = ch->lastVerbs[i];
        guint64 seq = ch->postSeq + i;
        guint64 verbs = ch->postedVerbs + v + 1;
        bool last = i == n - 1;
        bool sig = seq + 1 - ch->lastSignaled >= ch->sigInterval ||
                   verbs - ch->lastSignaledVerbs >= ch->sigVerbs;

        if (last && (force_last ||
                     ch->stageUsed == ch->stage.depth ||
                     vrmChannelSqFree(ch) - n < ch->sigInterval ||
                     vrmChannelVerbsFree(ch) - nv < ch->sigVerbs))
            sig = true;
        if (sig) {
            ch->wrs[v].send_flags |= IBV_SEND_SIGNALED;
            ch->lastSignaled = seq + 1;
            ch->lastSignaledVerbs = verbs;
        }
    }
    ch->batchVerbs = 0;
    if (vrmRdmaQPPostSend(ch->qp, ch->wrs) < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
        vrmReportError(VRM_ERR_RDMA, _("channel %1$u: %2$s"), ch->cfg.index, why);
        return -1;
    }
    ch->postSeq += n;
    ch->postedVerbs += nv;
    vrmStatsAdd(&ch->stats, VRM_STAT_DOORBELLS, 1);
    return 0;
}

/* One control message already built at vrmChannelCtlBuf(ch, 0) */
static int
vrmChannelPostCtl(vrmChannel *ch, size_t len, bool signal)
{
    if (vrmChannelSqFree(ch) < 1) {
        vrmReportError(VRM_ERR_INTERNAL,
                       _("the send queue of channel %1$u is full"), ch->cfg.index);
        return -1;
    }
    vrmChannelPrepSend(ch, 0, len);
    vrmStatsAdd(&ch->stats, VRM_STAT_CONTROL_SENT, 1);
    return vrmChannelPostBatch(ch, 1, signal);
}

static int
vrmChannelPostPair(vrmChannel *ch, int type, guint32 a, bool signal)
{
    size_t len = vrmProtoBuildU32Pair(vrmChannelCtlBuf(ch, 0), type, a, 0);

    return vrmChannelPostCtl(ch, len, signal);
}

/* Source: the peer may open its side of this channel: a UNIX socket it
 * knows, or the TCP address QEMU connected to */
static int
vrmChannelPostOpen(vrmChannel *ch)
{
    if (!ch->tcpOpenSet)
        return vrmChannelPostPair(ch, VRM_MSG_CHANNEL_OPEN, ch->cfg.index, false);
    if (!(ch->caps & VRM_CAP_TCP)) {
        vrmReportError(VRM_ERR_VERSION,
                       _("channel %1$u: QEMU's TCP connection cannot be carried: the destination's virt-rdma engine does not take TCP connections (an older virt-rdma, or it was not started for the transparent mode)"),
                       ch->cfg.index);
        return -1;
    }
    return vrmChannelPostCtl(ch, vrmProtoBuildTcpOpen(vrmChannelCtlBuf(ch, 0), &ch->tcpOpen),
                             false);
}

static void
vrmChannelSetTx(vrmChannel *ch, vrmChannelTx state)
{
    VRM_DEBUG("channel %u: tx %s -> %s", ch->cfg.index,
              vrmChannelTxTypeToString(ch->tx), vrmChannelTxTypeToString(state));
    ch->tx = state;
}

static void
vrmChannelSetRx(vrmChannel *ch, vrmChannelRx state)
{
    VRM_DEBUG("channel %u: rx %s -> %s", ch->cfg.index,
              vrmChannelRxTypeToString(ch->rx), vrmChannelRxTypeToString(state));
    ch->rx = state;
}

/* Our ring description: as many RAM_BLOCKS messages as it takes */
static int
vrmChannelSendDescription(vrmChannel *ch, bool *progress)
{
    while (ch->descNext < ch->ring.depth && vrmChannelSqFree(ch) > 0) {
        vrmProtoRingEntry ents[VRM_CHANNEL_RING_BATCH];
        guint32 n = 0;
        size_t len;

        while (n < MIN(G_N_ELEMENTS(ents), vrmChannelCtlEntries(ch, VRM_MSG_RAM_BLOCKS)) &&
               ch->descNext < ch->ring.depth) {
            guint32 i = ch->descNext++;
            struct ibv_mr *mr = vrmRingMR(&ch->ring, i);

            ents[n++] = (vrmProtoRingEntry) {
                .index = i,
                .depth = ch->ring.depth,
                .length = ch->ring.chunk,
                .rkey = (ch->caps & VRM_CAP_PIN_ALL) && mr ? mr->rkey : 0,
                .addr = (uintptr_t)(ch->ring.mem + (size_t)i * ch->ring.chunk),
            };
        }
        len = vrmProtoBuildRing(vrmChannelCtlBuf(ch, 0), ents, n);
        /* the last part signaled: a channel that ends unused has nothing
         * unsignaled left behind it */
        if (vrmChannelPostCtl(ch, len, ch->descNext == ch->ring.depth) < 0)
            return -1;
        *progress = true;
    }
    return 0;
}

/* Test hooks that break the protocol on purpose (virt-rdma-engine(8)) */
static int
vrmChannelFaults(vrmChannel *ch, bool *progress)
{
    const vrmChannelConfig *c = &ch->cfg;

    if (c->fault == VRM_ENGINE_FAULT_OVERSIZE && !ch->faultDone &&
        ch->tx >= VRM_CHANNEL_TX_WAIT_OPEN && vrmChannelSqFree(ch) > 0) {
        /* a SEND longer than any receive buffer: two control buffers
         * (registered together) when they follow each other */
        size_t off = (size_t)(ch->postSeq % ch->sqSize) * VRM_CONTROL_MESSAGE_MAX;
        size_t len = MIN(2 * VRM_CONTROL_MESSAGE_MAX,
                         (size_t)ch->sqSize * VRM_CONTROL_MESSAGE_MAX - off);

        if (len > VRM_CONTROL_MESSAGE_MAX) {
            VRM_WARN("test hook: sending %zu bytes in one SEND on channel %u",
                     len, c->index);
            vrmProtoBuildU32Pair(ch->ctlSend + off, VRM_MSG_KEEPALIVE, 0, 0);
            ch->faultDone = true;
            *progress = true;
            return vrmChannelPostCtl(ch, len, true);
        }
    }
    if (c->fault == VRM_ENGINE_FAULT_MALFORMED && !ch->faultDone &&
        ch->tx == VRM_CHANNEL_TX_STREAM && ch->txTotal >= c->faultBytes &&
        vrmChannelSqFree(ch) > 0) {
        /* a header that announces more bytes than it carries */
        guint8 *buf = vrmChannelCtlBuf(ch, 0);
        size_t len = vrmProtoBuildU32Pair(buf, VRM_MSG_READY, 1, 0);
        vrmProtoHeader bad = { .len = 100, .type = VRM_MSG_READY, .repeat = 1 };

        vrmProtoHeaderEncode(&bad, buf);
        VRM_WARN("test hook: sending a malformed control message on channel %u",
                 c->index);
        ch->faultDone = true;
        *progress = true;
        return vrmChannelPostCtl(ch, len, true);
    }
    return 0;
}

/* Source, channel 0: the connections QEMU opened since our last look
 * (CHANNEL_CONNECT each), once the peer has our description: disk
 * connections come before QEMU's main stream, multifd ones during it */
static int
vrmChannelSendAnnouncements(vrmChannel *ch, bool *progress)
{
    while (ch->nannounce && vrmChannelSqFree(ch) > 0) {
        guint32 k = ch->announce[0];

        if (vrmChannelPostPair(ch, VRM_MSG_CHANNEL_CONNECT, k, false) < 0)
            return -1;
        memmove(ch->announce, ch->announce + 1, --ch->nannounce * sizeof(*ch->announce));
        VRM_DEBUG("channel %u: CHANNEL_CONNECT %u sent", ch->cfg.index, k);
        *progress = true;
    }
    return 0;
}

/* Everything except data WRITEs: a switch on our direction's state, then
 * the answers the peer's direction is owed, while there is room */
static int
vrmChannelPumpControl(vrmChannel *ch, bool *progress)
{
    bool source = ch->cfg.role == VRM_ENGINE_ROLE_SOURCE;
    size_t len;

    switch (ch->tx) {
    case VRM_CHANNEL_TX_AUTH:
        /* the source sends nothing before the destination's AUTH */
        if (source || vrmChannelSqFree(ch) < 2)
            break;
        len = vrmProtoBuildAuth(vrmChannelCtlBuf(ch, 0), ch->auth);
        if (vrmChannelPostCtl(ch, len, false) < 0)
            return -1;
        if (ch->cfg.fault == VRM_ENGINE_FAULT_EARLY_REGISTER) {
            guint32 zero = 0;

            VRM_WARN("test hook: REGISTER_REQUEST before the ring description on channel %u",
                     ch->cfg.index);
            len = vrmProtoBuildRegRequest(vrmChannelCtlBuf(ch, 0), &zero, 1);
            if (vrmChannelPostCtl(ch, len, false) < 0)
                return -1;
        }
        vrmChannelSetTx(ch, VRM_CHANNEL_TX_DESCRIBE);
        *progress = true;
        break;
    case VRM_CHANNEL_TX_DESCRIBE:
        if (vrmChannelSendDescription(ch, progress) < 0)
            return -1;
        if (ch->descNext == ch->ring.depth)
            vrmChannelSetTx(ch, VRM_CHANNEL_TX_WAIT_OPEN);
        break;
    case VRM_CHANNEL_TX_WAIT_OPEN:
        if (vrmChannelSendAnnouncements(ch, progress) < 0)
            return -1;
        if (ch->sock >= 0) {
            /* the source announces the open once the peer is described */
            vrmChannelSetTx(ch, source ? VRM_CHANNEL_TX_OPEN : VRM_CHANNEL_TX_STREAM);
            *progress = true;
        }
        break;
    case VRM_CHANNEL_TX_OPEN:
        if (vrmChannelSendAnnouncements(ch, progress) < 0)
            return -1;
        if (ch->rx != VRM_CHANNEL_RX_OPEN || vrmChannelSqFree(ch) == 0)
            break;
        if (vrmChannelPostOpen(ch) < 0)
            return -1;
        VRM_DEBUG("channel %u: %s sent", ch->cfg.index,
                  ch->tcpOpenSet ? "CHANNEL_OPEN_TCP" : "CHANNEL_OPEN");
        vrmChannelSetTx(ch, VRM_CHANNEL_TX_STREAM);
        /* from now on the destination may stream back */
        vrmChannelSetRx(ch, VRM_CHANNEL_RX_STREAM);
        *progress = true;
        break;
    case VRM_CHANNEL_TX_STREAM:
        /* each announcement before this stream's EOF (vrmChannelPumpTx
         * waits for them) */
        if (vrmChannelSendAnnouncements(ch, progress) < 0)
            return -1;
        break;                          /* data: vrmChannelPumpTx */
    case VRM_CHANNEL_TX_EOF_SENT:       /* waiting for EOF_ACK */
    case VRM_CHANNEL_TX_DONE:
    case VRM_CHANNEL_TX_LAST:
        break;
    }

    /* registrations the peer asked for */
    if (ch->nRegRes && vrmChannelSqFree(ch) > 0) {
        guint32 n = MIN(ch->nRegRes, vrmChannelCtlEntries(ch, VRM_MSG_REGISTER_RESULT));

        len = vrmProtoBuildRegResult(vrmChannelCtlBuf(ch, 0), ch->regRes, n);
        if (vrmChannelPostCtl(ch, len, false) < 0)
            return -1;
        memmove(ch->regRes, ch->regRes + n, (ch->nRegRes - n) * sizeof(*ch->regRes));
        ch->nRegRes -= n;
        *progress = true;
    }
    /* registrations we ask for */
    if (ch->remote.queued && vrmChannelSqFree(ch) > 0) {
        g_autofree guint32 *idx = g_new(guint32, ch->remote.queued);
        guint32 n = vrmRemoteRingTakeRequests(&ch->remote, idx,
                                              vrmChannelCtlEntries(ch, VRM_MSG_REGISTER_REQUEST));

        len = vrmProtoBuildRegRequest(vrmChannelCtlBuf(ch, 0), idx, n);
        if (vrmChannelPostCtl(ch, len, false) < 0)
            return -1;
        *progress = true;
    }
    /* credits for the chunks drained */
    if (ch->creditsDue && vrmChannelSqFree(ch) > 0) {
        VRM_DEBUG("channel %u: sending READY %u (seq %" G_GUINT64_FORMAT ")",
                  ch->cfg.index, ch->creditsDue, ch->postSeq);
        if (vrmChannelPostPair(ch, VRM_MSG_READY, ch->creditsDue, false) < 0)
            return -1;
        ch->creditsDue = 0;
        *progress = true;
    }
    /* the peer's direction ends once every byte is in the socket */
    if (ch->rx == VRM_CHANNEL_RX_DRAIN && ch->rxf.filled == 0 && ch->sock >= 0 &&
        vrmChannelSqFree(ch) > 0) {
        if (shutdown(ch->sock, SHUT_WR) < 0 && errno != ENOTCONN)
            VRM_DEBUG("channel %u: shutdown: %s", ch->cfg.index, g_strerror(errno));
        len = vrmProtoBuildU64(vrmChannelCtlBuf(ch, 0), VRM_MSG_EOF_ACK, ch->rxf.bytes);
        if (vrmChannelPostCtl(ch, len, true) < 0)
            return -1;
        vrmChannelSetRx(ch, VRM_CHANNEL_RX_DONE);
        *progress = true;
        VRM_DEBUG("channel %u: EOF_ACK %" G_GUINT64_FORMAT " sent",
                  ch->cfg.index, ch->rxf.bytes);
    }
    return vrmChannelFaults(ch, progress);
}

static void
vrmChannelNoteBytes(vrmChannel *ch)
{
    gint64 now = g_get_monotonic_time();

    if (!ch->firstByteUs)
        __atomic_store_n(&ch->firstByteUs, now, __ATOMIC_RELAXED);
    __atomic_store_n(&ch->lastByteUs, now, __ATOMIC_RELAXED);
}

static int
vrmChannelSocketError(vrmChannel *ch, int err, bool reading)
{
    if (reading)
        vrmReportSystemError(err, _("channel %1$u: reading QEMU's socket failed"),
                             ch->cfg.index);
    else
        vrmReportSystemError(err,
                             _("channel %1$u: QEMU's socket was closed while %2$llu bytes were still to be delivered"),
                             ch->cfg.index,
                             (unsigned long long)ch->rxf.bytes - __atomic_load_n(&ch->stats.v[VRM_STAT_BYTES_RECEIVED],
                                                             __ATOMIC_RELAXED));
    return -1;
}

/*
 * QEMU's stream ended: EOF (@err 0) or a socket error. With checkEnd, the
 * owner first looks whether QEMU is still there (a crash also reads as
 * EOF): the EOF goes to the peer, or the error ends the job, only once it
 * has answered (vrmChannelStreamVerdict). -1 reported otherwise.
 */
static int
vrmChannelStreamEnds(vrmChannel *ch, int err, bool reading)
{
    if (!ch->cfg.checkEnd) {
        if (err)
            return vrmChannelSocketError(ch, err, reading);
        return 0;
    }
    if (ch->end != VRM_CHANNEL_END_NONE) {
        if (err && ch->end == VRM_CHANNEL_END_CLEARED)
            return vrmChannelSocketError(ch, err, reading);
        return 0;
    }
    ch->end = VRM_CHANNEL_END_ASKED;
    ch->endErr = err;
    ch->endReading = reading;
    VRM_DEBUG("channel %u: QEMU's stream ended (%s); asking whether QEMU lives",
              ch->cfg.index, err ? g_strerror(err) : "end of file");
    vrmChannelSignal(ch, &ch->ev.streamEnded);
    return 0;
}

/* Could the next chunk be written now, bytes permitting? */
static bool
vrmChannelTxCanWrite(const vrmChannel *ch)
{
    return ch->tx == VRM_CHANNEL_TX_STREAM && !ch->sockEof &&
           vrmRemoteRingComplete(&ch->remote) &&
           vrmTxFlowCredits(&ch->txf) > 0 && ch->stageUsed < ch->stage.depth &&
           ((ch->caps & VRM_CAP_PIN_ALL) ||
            vrmRemoteRingUsable(&ch->remote, vrmTxFlowPeek(&ch->txf, 0)));
}

/* Nagle's rule for chunks. Reading QEMU's socket empty is not the end of
 * a message: on a busy host the writer is merely descheduled, and a chunk
 * posted then carries a socket buffer's worth (about 200 KiB) instead of a
 * chunk's, so every byte costs up to five times the WRITEs, credits and
 * completions. While the peer still has chunks to hand to its QEMU, the
 * bytes could not be delivered sooner anyway (one stream, in order), so
 * the part-filled chunk waits; the next credit, more bytes, the end of the
 * stream or a full chunk post it. It never waits on the peer's QEMU for
 * anything that QEMU has not already been given. */
static bool
vrmChannelHoldPartial(const vrmChannel *ch)
{
    return !ch->sockEof && ch->txf.inflight >= VRM_CHANNEL_HOLD_INFLIGHT;
}

/* The message limit of this connection (vrmRdmaQPMaxMessage), learnt
 * when the first chunk goes: the path MTU is the queue pair's only once
 * it is connected. -1 reported if a chunk cannot fit the send queue. */
static int
vrmChannelLearnMaxWrite(vrmChannel *ch)
{
    guint32 verbs;

    if (ch->maxWriteKnown)
        return 0;
    ch->maxWrite = vrmChannelMaxWrite(&ch->cfg, vrmRdmaQPMaxMessage(ch->qp));
    ch->maxWriteKnown = true;
    if (!ch->maxWrite)
        return 0;
    verbs = vrmChannelChunkVerbs(ch, ch->stage.chunk);
    if (verbs + 2 + VRM_CHANNEL_CTL_RESERVE > ch->qpSend) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("channel %1$u: a chunk of %2$u bytes takes %3$u work requests on this connection (messages of at most %4$u bytes), more than its send queue of %5$u holds; use a smaller chunk size"),
                       ch->cfg.index, ch->stage.chunk, verbs, ch->maxWrite, ch->qpSend);
        return -1;
    }
    VRM_DEBUG("channel %u: messages of at most %u bytes, up to %u work requests per chunk",
              ch->cfg.index, ch->maxWrite, verbs);
    return 0;
}

/* Whether chunk @n of the post being built may be filled now: a free
 * staging chunk (registered), a credit, the peer's chunk registered, room
 * in the send queue. 1: yes, 0: not now, -1: error */
static int
vrmChannelTxMayFill(vrmChannel *ch, guint32 n)
{
    guint32 ridx;

    if (ch->stageUsed == ch->stage.depth)
        return 0;
    if (vrmTxFlowCredits(&ch->txf) == 0) {
        if (!ch->stalled) {
            ch->stalled = true;
            vrmStatsAdd(&ch->stats, VRM_STAT_CREDIT_STALLS, 1);
        }
        return 0;
    }
    ridx = vrmTxFlowPeek(&ch->txf, 0);
    if (!(ch->caps & VRM_CAP_PIN_ALL) && !vrmRemoteRingUsable(&ch->remote, ridx)) {
        vrmRemoteRingQueueRequests(&ch->remote, &ch->txf, VRM_CHANNEL_REG_WINDOW,
                                   g_get_monotonic_time());
        return 0;
    }
    if (vrmChannelSqFree(ch) < n + 2 + VRM_CHANNEL_CTL_RESERVE ||
        vrmChannelVerbsFree(ch) < ch->batchVerbs + vrmChannelChunkVerbs(ch, ch->stage.chunk) +
                                  2 + VRM_CHANNEL_CTL_RESERVE)
        return 0;
    if (!ch->stage.whole &&
        vrmRingRegisterChunk(ch, &ch->stage, ch->stageHead, IBV_ACCESS_LOCAL_WRITE) < 0)
        return -1;
    return 1;
}

/* QEMU's bytes into the staging chunk being filled. *again: the socket
 * has no more for now, or ended */
static int
vrmChannelTxRead(vrmChannel *ch, bool *progress, bool *again)
{
    guint32 cap = MIN(ch->stage.chunk, ch->remote.chunk);
    guint8 *at = ch->stage.mem + (size_t)ch->stageHead * ch->stage.chunk + ch->stageFill;
    ssize_t r;

    *again = false;
    do {
        r = read(ch->sock, at, cap - ch->stageFill);
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            if (vrmChannelStreamEnds(ch, errno, true) < 0)
                return -1;
            ch->sockEof = true;
        }
        *again = true;
    } else if (r == 0) {
        ch->sockEof = true;
        VRM_DEBUG("channel %u: socket EOF after %" G_GUINT64_FORMAT " bytes",
                  ch->cfg.index, ch->txTotal + ch->stageFill);
        vrmChannelStreamEnds(ch, 0, true);
    } else {
        ch->stageFill += r;
        ch->stalled = false;
        vrmChannelNoteBytes(ch);
        *progress = true;
        /* a short read emptied the socket: what another read would learn
         * from EAGAIN, without the syscall (poll tells us of more) */
        if (ch->stageFill < cap)
            *again = true;
    }
    return 0;
}

/* The filled staging chunk becomes chunk @n of the post: into the peer's
 * next credited chunk */
static void
vrmChannelTxTake(vrmChannel *ch, guint32 n)
{
    guint32 s = ch->stageHead;
    guint32 len = ch->stageFill;
    guint32 ridx;

    vrmTxFlowTake(&ch->txf, &ridx);
    vrmChannelPrepChunk(ch, n, s, ridx, len);
    vrmChannelTraceChunk(ch, "sent", ch->txTotal,
                         ch->stage.mem + (size_t)s * ch->stage.chunk, len);
    ch->stageHead = (s + 1) % ch->stage.depth;
    ch->stageUsed++;
    ch->stageFill = 0;
    ch->txTotal += len;
    vrmStatsAdd(&ch->stats, VRM_STAT_CHUNKS_WRITTEN, 1);
    vrmStatsAdd(&ch->stats, VRM_STAT_BYTES_SENT, len);
}

/* Our direction ends after its last WRITE, after every announcement, and
 * (checkEnd) once the owner knows QEMU did not just vanish */
static int
vrmChannelTxEnd(vrmChannel *ch, bool *progress)
{
    size_t len;

    if (!ch->sockEof || ch->stageFill != 0 || ch->nannounce ||
        (ch->cfg.checkEnd && ch->end != VRM_CHANNEL_END_CLEARED) ||
        vrmChannelSqFree(ch) == 0)
        return 0;
    len = vrmProtoBuildU64(vrmChannelCtlBuf(ch, 0), VRM_MSG_EOF, ch->txTotal);
    if (vrmChannelPostCtl(ch, len, true) < 0)
        return -1;
    vrmChannelSetTx(ch, VRM_CHANNEL_TX_EOF_SENT);
    *progress = true;
    VRM_DEBUG("channel %u: EOF %" G_GUINT64_FORMAT " sent", ch->cfg.index, ch->txTotal);
    return 0;
}

/* socket -> staging chunks -> RDMA WRITEs, one post per call */
static int
vrmChannelPumpTx(vrmChannel *ch, bool *progress)
{
    guint32 n = 0;
    size_t ann;

    if (ch->tx != VRM_CHANNEL_TX_STREAM || !vrmRemoteRingComplete(&ch->remote))
        return 0;
    if (vrmChannelLearnMaxWrite(ch) < 0)
        return -1;

    vrmTransferBatchStart(&ch->batch, vrmChannelCtlEntries(ch, VRM_MSG_DATA));
    while (!ch->sockEof && vrmTransferBatchHasRoom(&ch->batch)) {
        bool again;
        int rc;

        if ((rc = vrmChannelTxMayFill(ch, n)) <= 0) {
            if (rc < 0)
                return -1;
            break;
        }
        if (vrmChannelTxRead(ch, progress, &again) < 0)
            return -1;
        if (again && ch->stageFill > 0 && vrmChannelHoldPartial(ch))
            break;
        if (ch->stageFill > 0)
            vrmChannelTxTake(ch, n++);
        if (again)
            break;
    }

    if ((ann = ch->mode->txAnnounce(&ch->batch, vrmChannelCtlBuf(ch, n))) > 0) {
        vrmChannelPrepSend(ch, n, ann);
        n++;
        vrmStatsAdd(&ch->stats, VRM_STAT_CONTROL_SENT, 1);
    }
    if (n > 0) {
        VRM_DEBUG("channel %u: posting %u WRs (%u chunks) from seq %" G_GUINT64_FORMAT
                  ", %u in flight", ch->cfg.index, n, ch->batch.chunks, ch->postSeq,
                  ch->txf.inflight);
        if (vrmChannelPostBatch(ch, n, false) < 0)
            return -1;
        *progress = true;
    }
    return vrmChannelTxEnd(ch, progress);
}

/* Bytes written to QEMU's socket so far */
static inline guint64
vrmChannelRxWritten(const vrmChannel *ch)
{
    return ch->rxTotal + ch->rxOff;
}

/*
 * Ring bytes into QEMU's socket: spliced where the system can (the socket
 * then reads the ring's pages itself), copied otherwise. Returns the
 * bytes written, or -1 and errno.
 */
static ssize_t
vrmChannelDeliverBytes(vrmChannel *ch, const guint8 *buf, size_t len)
{
    ssize_t r;

    if (ch->deliver == VRM_CHANNEL_DELIVER_UNSET) {
        ch->deliver = VRM_CHANNEL_DELIVER_SPLICE;
        if (!vrmSpliceSafe(ch->sock)) {
            VRM_DEBUG("channel %u: QEMU's socket is not a UNIX one: copying",
                      ch->cfg.index);
            ch->deliver = VRM_CHANNEL_DELIVER_COPY;
        } else if (vrmSpliceOpen(&ch->splice, ch->ring.chunk) < 0) {
            VRM_INFO("channel %u: no pipe for zero-copy delivery (%s); copying",
                     ch->cfg.index, g_strerror(errno));
            ch->deliver = VRM_CHANNEL_DELIVER_COPY;
        }
    }
    if (ch->deliver == VRM_CHANNEL_DELIVER_SPLICE) {
        if ((r = vrmSpliceWrite(&ch->splice, ch->sock, buf, len)) > 0) {
            ch->rxSplicedEnd = vrmChannelRxWritten(ch) + r;
            vrmStatsAdd(&ch->stats, VRM_STAT_BYTES_SPLICED, r);
        }
        if (r >= 0 || !vrmSpliceUnsupported(errno))
            return r;
        /* what the pipe held is still in the ring: copied from there on */
        VRM_INFO("channel %u: cannot splice into QEMU's socket (%s); copying",
                 ch->cfg.index, g_strerror(errno));
        vrmSpliceClose(&ch->splice);
        ch->deliver = VRM_CHANNEL_DELIVER_COPY;
    }
    return send(ch->sock, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/*
 * A drained chunk is free for the peer again once no byte of it can still
 * be read from our memory: at once when it was copied; when part of it was
 * spliced, once QEMU has read past its last spliced byte (vrmSpliceTaken:
 * never more than QEMU read). Chunks are freed oldest first, as the peer
 * writes them again in ring order.
 */
static guint32
vrmChannelOldestHeld(const vrmChannel *ch)
{
    return (ch->rxf.drain + ch->rxf.depth - ch->rxf.held) % ch->rxf.depth;
}

static int
vrmChannelReleaseHeld(vrmChannel *ch)
{
    guint32 oldest, n = 0;
    guint64 taken = 0;
    bool asked = false;

    if (!ch->rxf.held)
        return 0;
    oldest = vrmChannelOldestHeld(ch);
    while (n < ch->rxf.held) {
        guint64 need = ch->rxFreeAt[(oldest + n) % ch->rxf.depth];

        if (need > taken && !asked) {
            if (vrmSpliceTaken(ch->sock, vrmChannelRxWritten(ch), &taken) < 0) {
                vrmReportSystemError(errno,
                                     _("channel %1$u: cannot learn how much QEMU has read of its socket"),
                                     ch->cfg.index);
                return -1;
            }
            asked = true;
        }
        if (need > taken)
            break;
        n++;
    }
    if (n)
        vrmRxFlowReleased(&ch->rxf, n);
    return 0;
}

/* Chunks QEMU still reads from our memory, whose credits the peer may
 * need: look again soon. Not while the socket is full: the wait is then
 * for room (POLLOUT, when the socket is three quarters read), by which
 * time the held chunk's bytes are behind QEMU, and a look every
 * millisecond would cost a busy host more than the credit is worth. */
static bool
vrmChannelAwaitsReader(const vrmChannel *ch)
{
    return ch->rx != VRM_CHANNEL_RX_DONE && !ch->rxBlocked && ch->rxf.held &&
           ch->rxFreeAt[vrmChannelOldestHeld(ch)] > 0;
}

/* our ring -> socket; credits come due as chunks are freed */
static int
vrmChannelPumpRx(vrmChannel *ch, bool *progress)
{
    const vrmChannelConfig *c = &ch->cfg;

    /* try again each round: a full socket is seen by send() itself */
    ch->rxBlocked = false;
    /* a socket that failed while the owner looks at QEMU is left alone */
    if (ch->endErr && !ch->endReading)
        return 0;
    while (ch->sock >= 0 && ch->rxf.filled > 0 && !ch->rxBlocked) {
        guint32 idx = ch->rxf.drain;
        guint32 len = ch->rxLen[idx];
        ssize_t r = vrmChannelDeliverBytes(ch, ch->ring.mem + (size_t)idx * ch->ring.chunk + ch->rxOff,
                                           len - ch->rxOff);

        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
                ch->rxBlocked = true;
                break;
            }
            return vrmChannelStreamEnds(ch, errno, false);
        }
        ch->rxOff += r;
        vrmStatsAdd(&ch->stats, VRM_STAT_BYTES_RECEIVED, r);
        vrmChannelNoteBytes(ch);
        *progress = true;
        if (ch->rxOff == len) {
            vrmChannelTraceChunk(ch, "delivered", ch->rxTotal,
                                 ch->ring.mem + (size_t)idx * ch->ring.chunk, len);
            /* any byte of it spliced: free once QEMU read past the last */
            ch->rxFreeAt[idx] = ch->rxSplicedEnd > ch->rxTotal ? ch->rxSplicedEnd : 0;
            ch->rxTotal += len;
            ch->rxOff = 0;
            vrmRxFlowDrained(&ch->rxf);
        }
        if (c->fault == VRM_ENGINE_FAULT_KILL && !ch->faultDone &&
            __atomic_load_n(&ch->stats.v[VRM_STAT_BYTES_RECEIVED], __ATOMIC_RELAXED) >=
            c->faultBytes) {
            VRM_WARN("test hook: killing this engine after %llu bytes", c->faultBytes);
            ch->faultDone = true;
            kill(getpid(), SIGKILL);
        }
    }
    if (ch->sock >= 0 && vrmChannelReleaseHeld(ch) < 0)
        return -1;
    /* after our EOF_ACK the peer writes nothing more: no READY then;
     * while QEMU still reads held chunks, their release follows, and the
     * credits go together */
    if (ch->rx == VRM_CHANNEL_RX_DONE)
        (void)vrmRxFlowTakeCredits(&ch->rxf, true);      /* dropped */
    else
        ch->creditsDue += vrmRxFlowTakeCredits(&ch->rxf,
                                               ch->rxf.filled == 0 && ch->rxf.held == 0);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Receive side                                                        */

static int
vrmChannelUnexpected(vrmChannel *ch, int type, const char *why)
{
    vrmReportError(VRM_ERR_PROTOCOL,
                   _("channel %1$u: unexpected %2$s message: %3$s"),
                   ch->cfg.index, vrmProtoMsgTypeToString(type), why);
    return -1;
}

/* The rules table: is @type legal now? -1 reported if not */
static int
vrmChannelCheckRule(vrmChannel *ch, int type)
{
    const vrmChannelRule *r = &vrmChannelRules[type];
    g_autofree char *why = NULL;

    if (!r->roles)
        return vrmChannelUnexpected(ch, type, _("not used in this protocol version"));
    if (!(r->roles & (1u << ch->cfg.role))) {
        why = g_strdup_printf(_("a %1$s engine never receives it"),
                              vrmEngineRoleTypeToString(ch->cfg.role));
        return vrmChannelUnexpected(ch, type, why);
    }
    if (r->side == VRM_RULE_RX && !(r->states & (1u << ch->rx))) {
        why = g_strdup_printf(_("the peer's direction is in state '%1$s'"),
                              vrmChannelRxTypeToString(ch->rx));
        return vrmChannelUnexpected(ch, type, why);
    }
    if (r->side == VRM_RULE_TX && !(r->states & (1u << ch->tx))) {
        why = g_strdup_printf(_("our direction is in state '%1$s'"),
                              vrmChannelTxTypeToString(ch->tx));
        return vrmChannelUnexpected(ch, type, why);
    }
    return 0;
}

static int
vrmChannelHandleRing(vrmChannel *ch, const vrmProtoMsg *msg)
{
    vrmRemoteRing *rr = &ch->remote;
    guint32 i;

    for (i = 0; i < msg->hdr.repeat; i++) {
        vrmProtoRingEntry e;

        vrmProtoGetRing(msg, i, &e);
        if (vrmRemoteRingComplete(rr))
            return vrmChannelUnexpected(ch, msg->hdr.type, _("more entries than the ring depth"));
        if (vrmRemoteRingDescribe(rr, &e, ch->caps & VRM_CAP_PIN_ALL) < 0) {
            g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
            vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u: %2$s"), ch->cfg.index, why);
            return -1;
        }
    }
    if (vrmRemoteRingComplete(rr)) {
        vrmTxFlowInit(&ch->txf, rr->depth);
        vrmChannelSetRx(ch, VRM_CHANNEL_RX_OPEN);
        VRM_DEBUG("channel %u: peer ring %u x %u bytes", ch->cfg.index,
                  rr->depth, rr->chunk);
    }
    return 0;
}

static int
vrmChannelHandleRegRequest(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint32 i;

    if (ch->caps & VRM_CAP_PIN_ALL)
        return vrmChannelUnexpected(ch, msg->hdr.type, _("every chunk is pinned already"));
    if (msg->hdr.repeat > ch->ring.depth - ch->nRegRes)
        return vrmChannelUnexpected(ch, msg->hdr.type, _("more requests than chunks"));
    for (i = 0; i < msg->hdr.repeat; i++) {
        guint32 idx;

        vrmProtoGetU32Pair(msg, i, &idx, NULL);
        if (idx >= ch->ring.depth) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("channel %1$u: the peer asked to register chunk %2$u of a ring of %3$u"),
                           ch->cfg.index, idx, ch->ring.depth);
            return -1;
        }
        if (ch->rxRegd[idx]) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("channel %1$u: the peer asked to register chunk %2$u twice"),
                           ch->cfg.index, idx);
            return -1;
        }
        if (vrmRingRegisterChunk(ch, &ch->ring, idx,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) < 0)
            return -1;
        ch->rxRegd[idx] = 1;
        ch->regRes[ch->nRegRes++] = (vrmProtoRegResult) {
            .index = idx,
            .rkey = vrmRingMR(&ch->ring, idx)->rkey,
            .addr = (uintptr_t)(ch->ring.mem + (size_t)idx * ch->ring.chunk),
        };
    }
    return 0;
}

static int
vrmChannelHandleRegResult(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint32 i;

    if (ch->caps & VRM_CAP_PIN_ALL)
        return vrmChannelUnexpected(ch, msg->hdr.type, _("every chunk is pinned already"));
    for (i = 0; i < msg->hdr.repeat; i++) {
        vrmProtoRegResult r;
        gint64 waited;

        vrmProtoGetRegResult(msg, i, &r);
        if (vrmRemoteRingRegistered(&ch->remote, &r, g_get_monotonic_time(), &waited) < 0) {
            g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
            vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u: %2$s"), ch->cfg.index, why);
            return -1;
        }
        vrmStatsAdd(&ch->stats, VRM_STAT_REGISTRATION_US, waited);
    }
    return 0;
}

/* The peer announced a chunk of our ring, as its transfer mode does */
static int
vrmChannelChunkArrived(vrmChannel *ch, const vrmTransferArrival *a)
{
    guint32 idx = a->key;
    int rc;

    if (!a->tagged && idx >= ch->ring.depth) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("channel %1$u: the peer announced chunk %2$u of a ring of %3$u"),
                       ch->cfg.index, idx, ch->ring.depth);
        return -1;
    }
    rc = a->tagged ? vrmRxFlowFillTag(&ch->rxf, a->key, a->length, &idx)
                   : vrmRxFlowFill(&ch->rxf, idx, a->length);
    if (rc < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
        vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u: %2$s"), ch->cfg.index, why);
        return -1;
    }
    ch->rxLen[idx] = a->length;
    vrmStatsAdd(&ch->stats, VRM_STAT_CHUNKS_RECEIVED, 1);
    return 0;
}

static int
vrmChannelHandleData(vrmChannel *ch, const vrmProtoMsg *msg)
{
    guint32 i;

    if (!ch->mode->rxMessage)
        return vrmChannelUnexpected(ch, msg->hdr.type, _("data is announced by immediate data"));
    for (i = 0; i < msg->hdr.repeat; i++) {
        vrmTransferArrival a;

        ch->mode->rxMessage(msg, i, &a);
        if (vrmChannelChunkArrived(ch, &a) < 0)
            return -1;
    }
    return 0;
}

static int
vrmChannelHandleMessage(vrmChannel *ch, const guint8 *buf, size_t len)
{
    vrmProtoMsg msg;
    guint32 a;
    guint64 total;

    vrmStatsAdd(&ch->stats, VRM_STAT_CONTROL_RECEIVED, 1);
    if (vrmProtoMsgDecode(buf, len, &msg) < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
        vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u: malformed message from the peer: %2$s"),
                       ch->cfg.index, why);
        return -1;
    }
    if (vrmChannelCheckRule(ch, msg.hdr.type) < 0)
        return -1;

    switch ((vrmProtoMsgType)msg.hdr.type) {
    case VRM_MSG_AUTH:
        if (!vrmProtoMacEqual(vrmProtoGetAuth(&msg), ch->auth, VRM_PROTO_MAC_LEN)) {
            ch->unauthenticated = true;
            vrmReportError(VRM_ERR_AUTH,
                           _("channel %1$u: the peer could not prove it holds this job's token"),
                           ch->cfg.index);
            return -1;
        }
        /* from now on it may hear from us: our description, our keys */
        vrmChannelSetRx(ch, VRM_CHANNEL_RX_DESCRIBE);
        vrmChannelSetTx(ch, VRM_CHANNEL_TX_DESCRIBE);
        vrmChannelSignal(ch, &ch->ev.authenticated);
        return 0;
    case VRM_MSG_CHANNEL_CONNECT:
        vrmProtoGetU32Pair(&msg, 0, &a, NULL);
        if (ch->cfg.index != 0)
            return vrmChannelUnexpected(ch, msg.hdr.type, _("only channel 0 carries it"));
        g_mutex_lock(&ch->lock);
        if (ch->ev.nconnect >= G_N_ELEMENTS(ch->ev.connect)) {
            g_mutex_unlock(&ch->lock);
            return vrmChannelUnexpected(ch, msg.hdr.type, _("more connections than channels"));
        }
        ch->ev.connect[ch->ev.nconnect++] = a;
        g_mutex_unlock(&ch->lock);
        if (ch->host.wake)
            ch->host.wake(ch->host.opaque);
        return 0;
    case VRM_MSG_ERROR: {
        g_autofree char *text = NULL;
        g_autofree char *safe = NULL;
        guint32 code;

        if (vrmProtoGetError(&msg, &code, &text) < 0)
            return -1;
        /* the peer's words reach logs and the stats record: made safe */
        safe = vrmLogSanitize(text);
        vrmReportError(VRM_ERR_PEER, _("the peer engine reported an error: %1$s"), safe);
        return -1;
    }
    case VRM_MSG_READY:
        vrmProtoGetU32Pair(&msg, 0, &a, NULL);
        VRM_DEBUG("channel %u: READY %u, %u in flight", ch->cfg.index, a, ch->txf.inflight);
        if (vrmTxFlowCredit(&ch->txf, a) < 0) {
            g_autofree char *why = g_strdup(vrmGetLastErrorMessage());
            vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u: %2$s"), ch->cfg.index, why);
            return -1;
        }
        ch->stalled = false;
        return 0;
    case VRM_MSG_RAM_BLOCKS:
        return vrmChannelHandleRing(ch, &msg);
    case VRM_MSG_REGISTER_REQUEST:
        return vrmChannelHandleRegRequest(ch, &msg);
    case VRM_MSG_REGISTER_RESULT:
        return vrmChannelHandleRegResult(ch, &msg);
    case VRM_MSG_CHANNEL_OPEN:
        vrmProtoGetU32Pair(&msg, 0, &a, NULL);
        if (a != ch->cfg.index)
            return vrmChannelUnexpected(ch, msg.hdr.type, _("it names another channel"));
        vrmChannelSetRx(ch, VRM_CHANNEL_RX_STREAM);
        vrmChannelSignal(ch, &ch->ev.openRequested);
        return 0;
    case VRM_MSG_CHANNEL_OPEN_TCP: {
        vrmProtoTcpOpen open;

        vrmProtoGetTcpOpen(&msg, &open);
        if (open.channel != ch->cfg.index)
            return vrmChannelUnexpected(ch, msg.hdr.type, _("it names another channel"));
        if (!(ch->caps & VRM_CAP_TCP))
            return vrmChannelUnexpected(ch, msg.hdr.type,
                                        _("this job takes no TCP connections"));
        vrmChannelSetRx(ch, VRM_CHANNEL_RX_STREAM);
        g_mutex_lock(&ch->lock);
        ch->ev.tcpOpen = open;
        ch->ev.tcpOpenSet = true;
        g_mutex_unlock(&ch->lock);
        vrmChannelSignal(ch, &ch->ev.openRequested);
        return 0;
    }
    case VRM_MSG_DATA:
        return vrmChannelHandleData(ch, &msg);
    case VRM_MSG_EOF:
        total = vrmProtoGetU64(&msg);
        if (total != ch->rxf.bytes) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("channel %1$u: the peer ended after %2$llu bytes but announced %3$llu"),
                           ch->cfg.index, (unsigned long long)total,
                           (unsigned long long)ch->rxf.bytes);
            return -1;
        }
        vrmChannelSetRx(ch, VRM_CHANNEL_RX_DRAIN);
        VRM_DEBUG("channel %u: peer EOF after %" G_GUINT64_FORMAT " bytes",
                  ch->cfg.index, total);
        return 0;
    case VRM_MSG_EOF_ACK:
        total = vrmProtoGetU64(&msg);
        if (total != ch->txTotal) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("channel %1$u: the peer acknowledged %2$llu bytes, %3$llu were sent"),
                           ch->cfg.index, (unsigned long long)total,
                           (unsigned long long)ch->txTotal);
            return -1;
        }
        vrmChannelSetTx(ch, VRM_CHANNEL_TX_DONE);
        return 0;
    case VRM_MSG_KEEPALIVE:
        return 0;
    case VRM_MSG_NONE:
    case VRM_MSG_QEMU_FILE:
    case VRM_MSG_COMPRESS:
    case VRM_MSG_REGISTER_FINISHED:
    case VRM_MSG_CHANNEL_UNUSED:
    case VRM_MSG_LAST:
        break;
    }
    return vrmChannelUnexpected(ch, msg.hdr.type, _("not used in this protocol version"));
}

/* Both directions ended: nothing more will be sent or accepted */
static bool
vrmChannelLogicallyDone(const vrmChannel *ch)
{
    return ch->tx == VRM_CHANNEL_TX_DONE && ch->rx == VRM_CHANNEL_RX_DONE;
}

/* The link failed under a work request: say so, not the provider's
 * status for it (rxe completes a send it could not transmit with
 * LOC_QP_OP_ERR, before its port shows down) */
static void
vrmChannelReportPortDown(vrmChannel *ch)
{
    vrmReportError(VRM_ERR_NO_DEVICE, _("RDMA device %1$s failed: %2$s"),
                   ch->qp->dev->name, ibv_event_type_str(IBV_EVENT_PORT_ERR));
}

/* A send-queue work request in words, for the error that names it: what
 * it carried, its number and how many were outstanding with it */
static char *
vrmChannelDescribeSend(const vrmChannel *ch, const vrmSendSlot *slot)
{
    guint64 outstanding = ch->postSeq - ch->retiredSeq;
    guint64 nth = slot->seq - ch->retiredSeq + 1;    /* not retired yet */

    switch (slot->opcode) {
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_WRITE:
        return g_strdup_printf(_("RDMA %1$s of %2$u bytes into chunk %3$u of the peer's ring, work request %4$llu of %5$llu outstanding"),
                               slot->opcode == IBV_WR_RDMA_WRITE ? "WRITE" : "WRITE_WITH_IMM",
                               slot->len, slot->what, (unsigned long long)nth,
                               (unsigned long long)outstanding);
    default:
        return g_strdup_printf(_("SEND of a %1$s message of %2$u bytes, work request %3$llu of %4$llu outstanding"),
                               vrmProtoMsgTypeToString((int)slot->what), slot->len,
                               (unsigned long long)nth,
                               (unsigned long long)outstanding);
    }
}

/* "a work request failed", naming the request where it was a send */
static void
vrmChannelReportFailedWR(const vrmChannel *ch, int code, const char *what,
                         const char *wr)
{
    if (wr)
        vrmReportError(code, _("channel %1$u: a work request failed: %2$s (%3$s)"),
                       ch->cfg.index, what, wr);
    else
        vrmReportError(code, _("channel %1$u: a work request failed: %2$s"),
                       ch->cfg.index, what);
}

/* A completion that failed: the error, or 0 where it is a flush after the
 * end or what a lost peer looks like before its cause is known */
static int
vrmChannelFailedWC(vrmChannel *ch, const struct ibv_wc *wc)
{
    vrmWorkId *wid = (vrmWorkId *)(uintptr_t)wc->wr_id;
    const char *what;
    int code = vrmRdmaWcStatusToError(wc->status, &what);

    if (wc->status == IBV_WC_WR_FLUSH_ERR &&
        (vrmChannelLogicallyDone(ch) || ch->peerGone))
        return 0;
    if (vrmRdmaQPPortDown(ch->qp)) {
        vrmChannelReportPortDown(ch);
        return -1;
    }
    if (wid && wid->kind == VRM_WR_RECV &&
        (wc->status == IBV_WC_LOC_LEN_ERR || wc->status == IBV_WC_LOC_QP_OP_ERR)) {
        /* a receive fails only when the peer sent more than a control
         * message may hold: our buffers are the provider's own, all
         * of VRM_CONTROL_MESSAGE_MAX bytes. The verbs name it
         * LOC_LEN_ERR; rxe completes it with LOC_QP_OP_ERR (its copy
         * into the buffer fails as a malformed request), which the
         * sandbox showed (issue 13 item 12) */
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("channel %1$u: the peer sent a control message larger than %2$d bytes"),
                       ch->cfg.index, VRM_CONTROL_MESSAGE_MAX);
        return -1;
    }
    if (wc->status == IBV_WC_WR_FLUSH_ERR || wc->status == IBV_WC_LOC_QP_OP_ERR ||
        wc->status == IBV_WC_REM_ACCESS_ERR) {
        /* what a lost peer or link looks like before it is known:
         * vrmChannelRound() names the cause within the grace */
        if (!ch->wcFailedUs) {
            ch->wcFailedUs = g_get_monotonic_time();
            ch->wcFailed = wc->status;
            if (wid && wid->kind == VRM_WR_SEND)
                ch->wcFailedWr = vrmChannelDescribeSend(ch, vrm_container_of(wid, vrmSendSlot, id));
        }
        return 0;
    }
    if (wid && wid->kind == VRM_WR_SEND) {
        g_autofree char *wr = vrmChannelDescribeSend(ch, vrm_container_of(wid, vrmSendSlot, id));

        vrmChannelReportFailedWR(ch, code, what, wr);
    } else {
        vrmChannelReportFailedWR(ch, code, what, NULL);
    }
    return -1;
}

/* A send completed: it retires every work request up to it (UCX) */
static void
vrmChannelSendDone(vrmChannel *ch, vrmSendSlot *slot)
{
    guint64 seq;

    for (seq = ch->retiredSeq; seq <= slot->seq; seq++) {
        vrmSendSlot *done = &ch->sslots[seq % ch->sqSize];

        ch->retiredVerbs += done->nverbs;
        if (done->stage >= 0) {
            g_assert(ch->stageUsed > 0);
            ch->stageUsed--;
        }
    }
    ch->retiredSeq = slot->seq + 1;
    if (ch->keepaliveSeq && ch->retiredSeq >= ch->keepaliveSeq)
        ch->keepaliveSeq = 0;
}

/* A receive completed: a control message, or a chunk announced by
 * immediate data; its buffer goes back on the queue */
static int
vrmChannelRecvDone(vrmChannel *ch, const struct ibv_wc *wc, vrmRecvSlot *slot,
                   guint32 *nrepost)
{
    const guint8 *buf = ch->ctlRecv + (size_t)slot->index * VRM_CONTROL_MESSAGE_MAX;

    g_assert(ch->recvPosted > 0);
    ch->recvPosted--;
    ch->repost[(*nrepost)++] = slot->index;
    if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        vrmTransferArrival a;

        if (!ch->mode->rxImmediate || ch->rx != VRM_CHANNEL_RX_STREAM) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("channel %1$u: unexpected RDMA write with immediate data"),
                           ch->cfg.index);
            return -1;
        }
        ch->mode->rxImmediate(ntohl(wc->imm_data), &a);
        return vrmChannelChunkArrived(ch, &a);
    }
    if (wc->opcode != IBV_WC_RECV) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("channel %1$u: unexpected receive completion opcode %2$d"),
                       ch->cfg.index, wc->opcode);
        return -1;
    }
    return vrmChannelHandleMessage(ch, buf, wc->byte_len);
}

static int
vrmChannelHandleWC(vrmChannel *ch, struct ibv_wc *wc, guint32 *nrepost)
{
    vrmWorkId *wid = (vrmWorkId *)(uintptr_t)wc->wr_id;

    if (wc->status != IBV_WC_SUCCESS)
        return vrmChannelFailedWC(ch, wc);
    if (wid->kind == VRM_WR_SEND) {
        vrmChannelSendDone(ch, vrm_container_of(wid, vrmSendSlot, id));
        return 0;
    }
    return vrmChannelRecvDone(ch, wc, vrm_container_of(wid, vrmRecvSlot, id), nrepost);
}

static int
vrmChannelPollCQ(vrmChannel *ch, bool *progress)
{
    struct ibv_wc wc[VRM_CHANNEL_WC_BATCH];
    guint32 nrepost = 0;
    int ret = 0;

    while (ret == 0) {
        int n = vrmRdmaQPPoll(ch->qp, VRM_CHANNEL_WC_BATCH, wc);
        int i;

        vrmStatsAdd(&ch->stats, VRM_STAT_CQ_POLLS, 1);
        if (n < 0) {
            ret = -1;
            break;
        }
        if (n == 0) {
            vrmStatsAdd(&ch->stats, VRM_STAT_CQ_IDLE_POLLS, 1);
            break;
        }
        vrmStatsAdd(&ch->stats, VRM_STAT_COMPLETIONS, n);
        ch->lastActivity = g_get_monotonic_time();
        if (ch->host.jobHeard)
            __atomic_store_n(ch->host.jobHeard, ch->lastActivity, __ATOMIC_RELAXED);
        *progress = true;
        for (i = 0; i < n && ret == 0; i++)
            ret = vrmChannelHandleWC(ch, &wc[i], &nrepost);
    }
    if (ret == 0 && nrepost && !vrmChannelLogicallyDone(ch))
        ret = vrmChannelPostRecvs(ch, ch->repost, nrepost);
    return ret;
}

/* ------------------------------------------------------------------ */
/* One round, and the progress thread                                  */

/* The mailbox: a socket, announcements, the owner's verdict, the peer
 * gone, the stop. -1 failed (reported), VRM_CHANNEL_STOPPED, or 0. */
static int
vrmChannelMailbox(vrmChannel *ch)
{
    guint64 junk;
    bool stop;
    int fd, verdict, qemuPid;
    guint32 i, n;

    /* only when it woke us: a read per round would be a syscall for
     * nothing in most rounds (bench-native counted 9-33 per MiB) */
    if (ch->wakeSignalled) {
        ch->wakeSignalled = false;
        if (read(ch->wakefd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
            VRM_DEBUG("channel %u: eventfd read: %s", ch->cfg.index, g_strerror(errno));
    }
    g_mutex_lock(&ch->lock);
    fd = ch->mbFd;
    ch->mbFd = -1;
    if (fd >= 0 && ch->mbTcpOpenSet) {
        ch->tcpOpen = ch->mbTcpOpen;
        ch->tcpOpenSet = true;
    }
    stop = ch->mbStop;
    ch->peerGone = ch->mbPeerGone;
    verdict = ch->mbVerdict;
    qemuPid = ch->mbQemuPid;
    ch->mbVerdict = 0;
    n = ch->mbNannounce;
    for (i = 0; i < n && ch->nannounce < G_N_ELEMENTS(ch->announce); i++)
        ch->announce[ch->nannounce++] = ch->mbAnnounce[i];
    ch->mbNannounce = 0;
    g_mutex_unlock(&ch->lock);
    if (fd >= 0) {
        g_assert(ch->sock < 0);
        ch->sock = fd;
        VRM_DEBUG("channel %u: socket attached", ch->cfg.index);
    }
    if (stop)
        return VRM_CHANNEL_STOPPED;
    if (n && ch->tx > VRM_CHANNEL_TX_STREAM) {
        vrmChannelReportLateConnection(ch->announce[0]);
        return -1;
    }
    if (verdict && ch->end == VRM_CHANNEL_END_ASKED) {
        if (verdict == 2) {
            /* a crash reads as an end of file (issue 13 item 11); QEMU
             * outlives its migration streams, so one gone when a stream
             * ended had crashed */
            vrmChannelSignal(ch, &ch->ev.qemuGone);
            if (ch->cfg.domainUUID)
                vrmReportError(VRM_ERR_PEER, _("QEMU (pid %1$d) of domain %2$s exited mid-stream"),
                               qemuPid, ch->cfg.domainUUID);
            else
                vrmReportError(VRM_ERR_PEER, _("QEMU (pid %1$d) exited mid-stream"),
                               qemuPid);
            return -1;
        }
        ch->end = VRM_CHANNEL_END_CLEARED;
        if (ch->endErr)
            return vrmChannelSocketError(ch, ch->endErr, ch->endReading);
    }
    return 0;
}

/* A silent peer is probed: the probe's completion, or its failure once the
 * transport retries are exhausted, tells whether it lives. Without it a
 * writer waiting for credits would never notice a cut link. */
static int
vrmChannelKeepalive(vrmChannel *ch, gint64 now)
{
    /* nothing before the authentication and our description */
    if (ch->tx < VRM_CHANNEL_TX_WAIT_OPEN || ch->keepaliveSeq ||
        vrmChannelSqFree(ch) == 0 || now - ch->lastActivity <= VRM_CHANNEL_KEEPALIVE_US)
        return 0;
    if (vrmChannelPostPair(ch, VRM_MSG_KEEPALIVE, 0, true) < 0)
        return -1;
    ch->keepaliveSeq = ch->postSeq;
    VRM_DEBUG("channel %u: KEEPALIVE posted (seq %" G_GUINT64_FORMAT ", retired %"
              G_GUINT64_FORMAT ")", ch->cfg.index, ch->postSeq - 1, ch->retiredSeq);
    return 0;
}

/* One round; see vrmChannelStep(), which tells an unauthenticated peer
 * from a failure */
static int
vrmChannelRound(vrmChannel *ch, bool *progress)
{
    gint64 now;
    int rc;

    if ((rc = vrmChannelMailbox(ch)) != 0)
        return rc;
    if (vrmChannelPollCQ(ch, progress) < 0 ||
        vrmChannelPumpRx(ch, progress) < 0 ||
        vrmChannelPumpControl(ch, progress) < 0 ||
        vrmChannelPumpTx(ch, progress) < 0)
        return -1;
    if (vrmChannelLogicallyDone(ch) || *progress)
        return 0;
    now = g_get_monotonic_time();
    if (ch->rx == VRM_CHANNEL_RX_AUTH && now - ch->attachedUs > VRM_CHANNEL_AUTH_TIMEOUT_US) {
        vrmReportError(VRM_ERR_AUTH,
                       _("channel %1$u: the peer sent no AUTH within %2$d seconds"),
                       ch->cfg.index, VRM_CHANNEL_AUTH_TIMEOUT_US / 1000000);
        return -1;
    }
    if (ch->peerGone) {
        vrmReportError(VRM_ERR_PEER,
                       _("the peer closed channel %1$u before the end of the stream"),
                       ch->cfg.index);
        return -1;
    }
    if (ch->wcFailedUs && vrmRdmaQPPortDown(ch->qp)) {
        vrmChannelReportPortDown(ch);
        return -1;
    }
    if (ch->wcFailedUs && now - ch->wcFailedUs > VRM_CHANNEL_FAILED_GRACE_US) {
        const char *what;
        int code = vrmRdmaWcStatusToError(ch->wcFailed, &what);

        vrmChannelReportFailedWR(ch, code, what, ch->wcFailedWr);
        return -1;
    }
    if (vrmChannelKeepalive(ch, now) < 0)
        return -1;
    /* The transport's own retry timer is not enough: Soft-RoCE was seen
     * retrying forever towards a peer whose link went down. Signaled work
     * that stays unanswered, on this channel and on every other of the
     * job, means the peer is gone. */
    if (ch->lastSignaled > ch->retiredSeq) {
        gint64 heard = ch->lastActivity;

        if (ch->host.jobHeard)
            heard = MAX(heard, __atomic_load_n(ch->host.jobHeard, __ATOMIC_RELAXED));
        if (now - heard > VRM_CHANNEL_PEER_TIMEOUT_US) {
            vrmReportError(VRM_ERR_PEER,
                           _("channel %1$u: the peer stopped answering (no completion for %2$d seconds)"),
                           ch->cfg.index, VRM_CHANNEL_PEER_TIMEOUT_US / 1000000);
            return -1;
        }
        if (now - ch->lastActivity > VRM_CHANNEL_STALL_TIMEOUT_US) {
            vrmReportError(VRM_ERR_PEER,
                           _("channel %1$u: the peer stopped answering on this channel (no completion for %2$d seconds, while the job's other channels completed work)"),
                           ch->cfg.index, VRM_CHANNEL_STALL_TIMEOUT_US / 1000000);
            return -1;
        }
    }
    return 0;
}

int
vrmChannelStep(vrmChannel *ch, bool *progress)
{
    int rc = vrmChannelRound(ch, progress);

    /* Until the destination has proved itself, whatever goes wrong (a bad
     * AUTH, anything else, garbage, silence, a disconnect) is a peer that
     * did not authenticate: the source listens again, the job goes on. */
    if (rc < 0 && ch->rx == VRM_CHANNEL_RX_AUTH) {
        ch->unauthenticated = true;
        return VRM_CHANNEL_UNAUTHENTICATED;
    }
    return rc;
}

bool
vrmChannelFinished(const vrmChannel *ch)
{
    return vrmChannelLogicallyDone(ch) && ch->retiredSeq == ch->postSeq;
}

/* On the way out after a failure: tell the peer why, bounded */
static void
vrmChannelSendError(vrmChannel *ch, int code, const char *reason)
{
    gint64 until = g_get_monotonic_time() + VRM_CHANNEL_STOP_WAIT_US;
    guint64 want;
    size_t len;

    /* an unauthenticated peer hears nothing from us, not even why */
    if (code == VRM_ERR_PEER || ch->peerGone || !ch->qp || vrmChannelSqFree(ch) == 0 ||
        ch->rx == VRM_CHANNEL_RX_AUTH)
        return;
    len = vrmProtoBuildError(vrmChannelCtlBuf(ch, 0), code, reason);
    if (vrmChannelPostCtl(ch, len, true) < 0)
        return;
    want = ch->postSeq;
    while (ch->retiredSeq < want && g_get_monotonic_time() < until) {
        struct ibv_wc wc[VRM_CHANNEL_WC_BATCH];
        int n = vrmRdmaQPPoll(ch->qp, VRM_CHANNEL_WC_BATCH, wc);
        int i;

        if (n < 0)
            break;
        for (i = 0; i < n; i++) {
            vrmWorkId *wid = (vrmWorkId *)(uintptr_t)wc[i].wr_id;

            if (wc[i].status != IBV_WC_SUCCESS)
                return;
            if (wid->kind == VRM_WR_SEND)
                ch->retiredSeq = vrm_container_of(wid, vrmSendSlot, id)->seq + 1;
        }
        if (n == 0)
            g_usleep(1000);
    }
}

static void
vrmChannelFailed(vrmChannel *ch)
{
    int code = vrmGetLastErrorCode();
    g_autofree char *reason = g_strdup(vrmGetLastErrorMessage());

    if (ch->host.fail)
        ch->host.fail(ch->host.opaque, code ? code : VRM_ERR_INTERNAL, reason);
    vrmChannelSendError(ch, code ? code : VRM_ERR_INTERNAL, reason);
}

/* Block until a completion, a wake-up or the socket (as far as it matters) */
static int
vrmChannelWait(vrmChannel *ch)
{
    struct pollfd fds[3];
    int nfds = 0;
    bool progress = false;

    /* arm, look once more, then block */
    if (vrmRdmaQPArm(ch->qp) < 0 || vrmChannelPollCQ(ch, &progress) < 0)
        return -1;
    if (progress)
        return 0;
    fds[nfds++] = (struct pollfd) { .fd = ch->qp->eventFd, .events = POLLIN };
    fds[nfds++] = (struct pollfd) { .fd = ch->wakefd, .events = POLLIN };
    if (ch->sock >= 0) {
        short ev = 0;

        if (vrmChannelTxCanWrite(ch))
            ev |= POLLIN;
        if (ch->rxBlocked)
            ev |= POLLOUT;
        if (ev)
            fds[nfds++] = (struct pollfd) { .fd = ch->sock, .events = ev };
    }
    if (poll(fds, nfds, vrmChannelAwaitsReader(ch) ? VRM_CHANNEL_TAKEN_POLL_MS :
             VRM_CHANNEL_POLL_MS) < 0 && errno != EINTR) {
        vrmReportSystemError(errno, _("poll failed on channel %1$u"), ch->cfg.index);
        return -1;
    }
    if (fds[0].revents && vrmRdmaQPTakeEvents(ch->qp) < 0)
        return -1;
    if (fds[1].revents)
        ch->wakeSignalled = true;
    if (nfds > 2 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)))
        ch->rxBlocked = false;
    return 0;
}

static gpointer
vrmChannelThread(gpointer opaque)
{
    vrmChannel *ch = opaque;

    ch->lastActivity = g_get_monotonic_time();
    if (vrmRdmaQPArm(ch->qp) < 0) {
        vrmChannelFailed(ch);
        goto out;
    }
    for (;;) {
        bool progress = false;
        int rc = vrmChannelStep(ch, &progress);

        if (rc == VRM_CHANNEL_UNAUTHENTICATED) {
            /* not a failure of the job: the owner listens again; the
             * impostor learns nothing, not even an ERROR */
            VRM_DEBUG("channel %u: %s", ch->cfg.index, vrmGetLastErrorMessage());
            vrmChannelSignal(ch, &ch->ev.authFailed);
            break;
        }
        if (rc == VRM_CHANNEL_STOPPED) {
            g_autofree char *reason = NULL;
            int code;

            g_mutex_lock(&ch->lock);
            code = ch->mbCode;
            reason = g_strdup(ch->mbReason);
            g_mutex_unlock(&ch->lock);
            vrmChannelSendError(ch, code, reason);
            break;
        }
        if (rc < 0) {
            vrmChannelFailed(ch);
            break;
        }
        if (vrmChannelLogicallyDone(ch)) {
            gint64 now = g_get_monotonic_time();

            if (!ch->doneSince)
                ch->doneSince = now;
            /* wait for the last signaled sends, but not forever */
            if (ch->retiredSeq == ch->postSeq || ch->peerGone ||
                now - ch->doneSince > VRM_CHANNEL_END_WAIT_US) {
                if (vrmChannelCloseMailbox(ch) < 0) {
                    vrmChannelFailed(ch);
                    break;
                }
                VRM_INFO("channel %u ended: %" G_GUINT64_FORMAT " bytes sent, %"
                         G_GUINT64_FORMAT " received", ch->cfg.index, ch->txTotal,
                         ch->rxf.bytes);
                vrmChannelSignal(ch, &ch->ev.done);
                break;
            }
        }
        if (progress)
            continue;
        if (vrmChannelWait(ch) < 0) {
            vrmChannelFailed(ch);
            break;
        }
    }

 out:
    if (ch->sock >= 0) {
        close(ch->sock);
        ch->sock = -1;
    }
    vrmChannelSignal(ch, &ch->ev.exited);
    return NULL;
}

int
vrmChannelStart(vrmChannel *ch)
{
    g_autofree char *name = g_strdup_printf("vrm-ch%u", ch->cfg.index);
    g_autoptr(GError) err = NULL;

    if (!(ch->thread = g_thread_try_new(name, vrmChannelThread, ch, &err))) {
        vrmReportError(VRM_ERR_SYSTEM, _("cannot start the thread of channel %1$u: %2$s"),
                       ch->cfg.index, err->message);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Observation                                                         */

guint32
vrmChannelIndex(const vrmChannel *ch)
{
    return ch->cfg.index;
}

guint32
vrmChannelCaps(const vrmChannel *ch)
{
    return ch->caps;
}

vrmChannelTx
vrmChannelTxState(const vrmChannel *ch)
{
    return ch->tx;
}

vrmChannelRx
vrmChannelRxState(const vrmChannel *ch)
{
    return ch->rx;
}

void
vrmChannelStats(const vrmChannel *ch, vrmStats *snap, gint64 *first, gint64 *last)
{
    vrmStatsSnapshot(&ch->stats, snap);
    *first = __atomic_load_n(&ch->firstByteUs, __ATOMIC_RELAXED);
    *last = __atomic_load_n(&ch->lastByteUs, __ATOMIC_RELAXED);
}

int
vrmChannelCheckInvariants(const vrmChannel *ch)
{
    const char *broken = NULL;

    if (ch->txf.depth && ch->txf.inflight > ch->txf.depth)
        broken = "credits in flight above the peer's ring depth";
    else if (ch->rxf.filled + ch->rxf.held + ch->rxf.uncredited > ch->rxf.depth)
        broken = "our ring filled above its depth";
    else if (ch->postSeq - ch->retiredSeq > ch->sqSize)
        broken = "send queue above its size";
    else if (ch->recvPosted > ch->rqSize)
        broken = "receive queue above its size";
    else if (ch->stageUsed > ch->stage.depth)
        broken = "staging ring above its depth";
    else if (ch->nRegRes > ch->ring.depth)
        broken = "registration results above the ring depth";
    else if (ch->remote.depth && ch->remote.queued > ch->remote.depth)
        broken = "registration requests above the peer's ring depth";
    if (broken) {
        vrmReportError(VRM_ERR_INTERNAL, _("channel %1$u: invariant broken: %2$s"),
                       ch->cfg.index, broken);
        return -1;
    }
    return 0;
}
