/*
 * vrmchannel.h: one channel = one QEMU connection <-> one RC queue pair
 *
 * A channel moves the bytes of one QEMU connection both ways and runs the
 * control protocol of docs/protocol.rst on its queue pair. Its logic is two
 * explicit state machines, one per direction (vrmChannelTx, vrmChannelRx,
 * a comment per state), and one table of which message is legal in which
 * state (vrmchannel.c, vrmChannelRules). It touches the device only through
 * the provider (driver/rdma/vrmrdma.h), so the unit tests run it against a
 * fake provider, and it reaches its owner only through vrmChannelHost
 * (fail, wake): the engine calls the channel, the channel never calls the
 * engine.
 *
 * Threads and the lock rule: the owner (the engine's main thread) creates,
 * sets up, starts, stops and frees a channel and hands it sockets; once
 * started, the channel's progress thread alone runs its logic
 * (vrmChannelStep) and touches its queue pair, rings and socket. The two
 * talk through the channel's mailbox, under the channel's own lock (a leaf
 * lock: nothing else is taken while it is held), and the host's wake().
 * Counters (vrmStats) are relaxed atomics without a lock.
 *
 * Public API summary
 * ------------------
 *   vrmChannelNew(cfg, host) / Free
 *   vrmChannelQueueSizes(cfg, dev, &sq, &rq, &cqe)   -1 if the device is too small
 *   vrmChannelSetup(ch, dev)       rings and control buffers (once)
 *   vrmChannelAttachQP(ch, qp, caps)  the connected QP (owned from now on);
 *                                  posts every receive buffer
 *   vrmChannelDropQP(ch)           frees the QP of a failed connect attempt
 *   vrmChannelStart(ch) / Join     the progress thread
 *   vrmChannelGiveSocket(ch, fd)   QEMU's connection (mailbox)
 *   vrmChannelGiveTcpSocket(ch, fd, open)  source: QEMU's TCP connection,
 *                                  opened on the peer by CHANNEL_OPEN_TCP
 *   vrmChannelStop(ch, code, why)  the job ends: send ERROR, stop (mailbox)
 *   vrmChannelPeerGone(ch)         the peer disconnected (mailbox)
 *   vrmChannelAnnounce(ch0, k)     source: ask the peer to connect channel k;
 *                                  -1 once ch0's stream has ended
 *   vrmChannelCloseMailbox(ch)     the thread, at its clean end: -1 if an
 *                                  announcement came too late to be sent
 *   vrmChannelStreamVerdict(ch, alive, pid)  QEMU is (not) there after its stream ended
 *   vrmChannelTakeEvents(ch, &ev)  what the owner must act on (mailbox)
 *   vrmChannelStep(ch, &progress)  one round of the logic (tests, the thread)
 *   vrmChannelStats(ch, &snap, &first, &last)
 */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "vrmenginesettings.h"
#include "vrmproto.h"
#include "vrmrdma.h"
#include "vrmstats.h"

/* Our direction: what we send on the queue pair */
typedef enum {
    VRM_CHANNEL_TX_AUTH,        /* destination: AUTH to send first; source:
                                 * the peer's AUTH awaited, nothing may go out */
    VRM_CHANNEL_TX_DESCRIBE,    /* our ring description is (partly) to be sent */
    VRM_CHANNEL_TX_WAIT_OPEN,   /* described; no QEMU socket attached yet */
    VRM_CHANNEL_TX_OPEN,        /* source: socket attached, CHANNEL_OPEN to send */
    VRM_CHANNEL_TX_STREAM,      /* socket -> peer's ring, while credits last */
    VRM_CHANNEL_TX_EOF_SENT,    /* our socket ended, EOF posted, EOF_ACK awaited */
    VRM_CHANNEL_TX_DONE,        /* the peer acknowledged every byte */

    VRM_CHANNEL_TX_LAST
} vrmChannelTx;
VRM_ENUM_DECL(vrmChannelTx);

/* The peer's direction: what it may send us */
typedef enum {
    VRM_CHANNEL_RX_AUTH,        /* source: only the destination's AUTH is legal */
    VRM_CHANNEL_RX_DESCRIBE,    /* the peer's ring description is incomplete */
    VRM_CHANNEL_RX_OPEN,        /* described; the peer may not stream yet */
    VRM_CHANNEL_RX_STREAM,      /* peer's data into our ring -> socket */
    VRM_CHANNEL_RX_DRAIN,       /* the peer's EOF arrived; draining, then EOF_ACK */
    VRM_CHANNEL_RX_DONE,        /* every byte delivered and acknowledged */

    VRM_CHANNEL_RX_LAST
} vrmChannelRx;
VRM_ENUM_DECL(vrmChannelRx);

#define VRM_MAX_WRITE_UNLIMITED G_MAXUINT32

typedef struct {
    vrmEngineRole role;
    guint32 index;                  /* on the wire: QEMU connection order; disks
                                     * from VRM_DISK_CHANNEL_BASE */
    guint32 chunkSize;              /* our rings */
    guint32 ringDepth;
    bool pinAll;                    /* register our rings at set-up */
    guint32 maxWrite;               /* bytes per work request: 0 the device's
                                     * limit (vrmRdmaQPMaxMessage), or
                                     * VRM_MAX_WRITE_UNLIMITED */
    bool checkEnd;                  /* ask the owner before a QEMU stream ends */
    const char *domainUUID;         /* named when QEMU exits mid-stream (or NULL) */
    vrmEngineFault fault;           /* test hooks */
    unsigned long long faultBytes;
} vrmChannelConfig;

/* How a channel reaches its owner, from its progress thread */
typedef struct {
    void (*fail)(void *opaque, int code, const char *reason);
    void (*wake)(void *opaque);
    void *opaque;
    /* optional: shared by the job's channels (relaxed atomic, monotonic
     * us), the last completion any of them polled: a peer that answers
     * on one channel is not gone (see VRM_CHANNEL_PEER_TIMEOUT_US) */
    gint64 *jobHeard;
} vrmChannelHost;

/* What the owner must act on, taken from the mailbox */
typedef struct {
    bool authenticated;             /* the peer proved it holds the token */
    bool authFailed;                /* source: it did not (the thread ended) */
    bool openRequested;             /* destination: CHANNEL_OPEN arrived */
    vrmProtoTcpOpen tcpOpen;        /* ... CHANNEL_OPEN_TCP: the address to open */
    bool tcpOpenSet;
    guint32 connect[VRM_SLOTS_MAX];     /* destination, channel 0: CHANNEL_CONNECTs */
    guint32 nconnect;
    bool streamEnded;               /* QEMU's stream ended (checkEnd): a verdict is awaited */
    bool qemuGone;                  /* QEMU had gone when its stream ended */
    bool done;                      /* both directions ended cleanly */
    bool exited;                    /* the progress thread returned */
} vrmChannelEvents;

typedef struct _vrmChannel vrmChannel;

vrmChannel *vrmChannelNew(const vrmChannelConfig *cfg, const vrmChannelHost *host);
void vrmChannelFree(vrmChannel *ch);

int vrmChannelQueueSizes(const vrmChannelConfig *cfg, const vrmRdmaDevice *dev,
                         guint32 *sendSize, guint32 *recvSize, int *cqe);
int vrmChannelSetup(vrmChannel *ch, vrmRdmaDevice *dev);
int vrmChannelAttachQP(vrmChannel *ch, vrmRdmaQP *qp, guint32 caps);
void vrmChannelDropQP(vrmChannel *ch);
/* Before the start: the capabilities the peer agreed to, and the proof of
 * the mutual authentication: the destination's AUTH to send, or the one
 * the source expects */
void vrmChannelSetCaps(vrmChannel *ch, guint32 caps);
void vrmChannelSetAuth(vrmChannel *ch, const guint8 mac[32]);

int vrmChannelStart(vrmChannel *ch);
void vrmChannelJoin(vrmChannel *ch);

void vrmChannelGiveSocket(vrmChannel *ch, int fd);
void vrmChannelGiveTcpSocket(vrmChannel *ch, int fd, const vrmProtoTcpOpen *open);
void vrmChannelStop(vrmChannel *ch, int code, const char *reason);
void vrmChannelPeerGone(vrmChannel *ch);
/* Source, channel 0: QEMU opened connection @index (CHANNEL_CONNECT) */
int vrmChannelAnnounce(vrmChannel *ch, guint32 index);
int vrmChannelCloseMailbox(vrmChannel *ch);
/* The owner's verdict after streamEnded: is QEMU still there? One that
 * has gone (@qemuPid, named in the error) fails the channel: qemuGone */
void vrmChannelStreamVerdict(vrmChannel *ch, bool qemuAlive, int qemuPid);
void vrmChannelTakeEvents(vrmChannel *ch, vrmChannelEvents *ev);

/* One round: mailbox, completions, both directions, control. -1 with the
 * error reported when the channel failed, VRM_CHANNEL_STOPPED when the
 * owner asked it to stop, VRM_CHANNEL_UNAUTHENTICATED when the peer did
 * not prove it holds the token (source: the owner may listen again), 0
 * otherwise; *progress when anything moved. */
#define VRM_CHANNEL_STOPPED 1
#define VRM_CHANNEL_UNAUTHENTICATED 2
int vrmChannelStep(vrmChannel *ch, bool *progress);
/* Both directions ended (and every signaled send retired) */
bool vrmChannelFinished(const vrmChannel *ch);

guint32 vrmChannelIndex(const vrmChannel *ch);
guint32 vrmChannelCaps(const vrmChannel *ch);
vrmChannelTx vrmChannelTxState(const vrmChannel *ch);
vrmChannelRx vrmChannelRxState(const vrmChannel *ch);
/* Counters, and the first and last time stream bytes moved (monotonic us) */
void vrmChannelStats(const vrmChannel *ch, vrmStats *snap, gint64 *first,
                     gint64 *last);
/* The bookkeeping invariants (tests, fuzzers): credits within the peer's
 * depth, our ring's fill within our depth, send and receive queues within
 * their size. -1 with the error reported when one is broken. */
int vrmChannelCheckInvariants(const vrmChannel *ch);
