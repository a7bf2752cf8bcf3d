/*
 * vrmtransportpriv.h: engine and channel internals (transport only)
 *
 * Threads and the lock rule:
 * - The engine's main thread runs a GMainLoop: rdma_cm events, device async
 *   events, QEMU's listening socket (source), ordered socket connects
 *   (destination), the stats socket, timers and signals. It alone creates
 *   and destroys rdma_cm ids, QPs and every resource of a channel.
 * - Each channel has one progress thread, started when its QP is
 *   established. It alone touches the channel's CQ, rings, send and receive
 *   slots, flow state and socket while it runs.
 * - The two talk only through the channel's mailbox fields (mb_*) and the
 *   engine's failure fields, all protected by engine->lock, plus eventfds to
 *   wake each other. engine->lock is a leaf lock: nothing else is taken
 *   while it is held. Counters (vrmStats) are atomics without a lock.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "vrmtransport.h"
#include "vrmflow.h"
#include "vrmrdma.h"
#include "vrmstats.h"

typedef enum {
    VRM_WR_SEND = 0,            /* a send-queue slot (WRITE or SEND) */
    VRM_WR_RECV,                /* a receive buffer */

    VRM_WR_LAST
} vrmWorkKind;

/* What every wr_id points at; recovered with container_of */
typedef struct {
    vrmWorkKind kind;
} vrmWorkId;

typedef struct {
    vrmWorkId id;               /* wr_id */
    guint64 seq;                /* running number of the work request */
    gint32 stage;               /* staging chunk freed when retired, or -1 */
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

typedef struct _vrmChannel vrmChannel;

struct _vrmChannel {
    vrmEngine *engine;          /* owner */
    guint32 index;              /* channel number = QEMU connection order */
    guint32 caps;               /* agreed capabilities */

    /* owned by the main thread */
    struct rdma_cm_id *id;      /* the channel's rdma_cm id */
    vrmRdmaDevice *dev;         /* not owned: engine->devices */
    bool connected;             /* ESTABLISHED seen */
    bool accepted;              /* destination: connect issued */
    guint retry_source;         /* destination: pending retry timer */
    gint64 open_deadline;       /* destination: socket connect deadline */
    guint open_source;          /* destination: pending socket retry timer */
    GThread *thread;

    /* set up by the main thread, then owned by the progress thread */
    vrmRdmaCQ *cq;
    guint32 sq_size;
    guint32 rq_size;
    guint32 sig_interval;       /* signal every Nth send WR at most */
    vrmSendSlot *sslots;        /* sq_size slots, seq % sq_size */
    guint8 *ctl_send;           /* sq_size control buffers */
    struct ibv_mr *ctl_send_mr;
    vrmRecvSlot *rslots;        /* rq_size slots */
    guint8 *ctl_recv;           /* rq_size receive buffers */
    struct ibv_mr *ctl_recv_mr;
    vrmRing rx;                 /* our receive ring, the peer writes it */
    vrmRing stage;              /* our staging ring, we write from it */
    int wakefd;                 /* eventfd: main -> progress thread */

    /* progress thread state */
    guint64 post_seq;           /* seq of the next send WR */
    guint64 retired_seq;        /* every seq below it is retired */
    guint64 last_signaled;      /* seq of the last signaled WR + 1 */
    guint32 stage_head;         /* next staging chunk to fill */
    guint32 stage_used;         /* staging chunks in flight or filling */
    guint32 stage_fill;         /* bytes read into the head chunk */
    vrmRemoteRing remote;
    vrmTxFlow txf;
    vrmRxFlow rxf;
    guint32 *rx_len;            /* bytes announced per chunk of rx */
    guint8 *rx_regd;            /* dynamic: chunks of rx registered for the peer */
    guint32 rx_off;             /* bytes of the drain chunk written */
    int sock;                   /* QEMU's connection, -1 until opened */
    bool sock_eof;              /* read side reached EOF */
    bool rx_blocked;            /* the socket's send buffer is full */
    bool desc_sent;             /* our ring description is out */
    guint32 desc_next;          /* next ring entry to describe */
    bool open_sent;             /* source: CHANNEL_OPEN posted */
    bool opened;                /* a socket was attached */
    bool open_requested;        /* destination: asked the main thread */
    bool unused_sent;           /* source: CHANNEL_UNUSED posted */
    bool unused_wanted;         /* source: the main thread asked for it */
    bool unused;                /* the channel ended unused */
    bool eof_sent;              /* our EOF is posted */
    bool tx_done;               /* our EOF was acknowledged */
    bool peer_eof;              /* the peer's EOF arrived */
    guint64 peer_total;
    bool eof_ack_sent;          /* we acknowledged the peer's EOF */
    guint32 credits_due;        /* credits to return with READY */
    vrmProtoRegResult *reg_res; /* results to send (dynamic) */
    guint32 n_reg_res;
    guint64 tx_total;           /* bytes read from the socket */
    bool stalled;               /* inside a credit stall */
    bool fault_done;            /* the test fault fired */
    gint64 last_activity;       /* last completion polled (monotonic us) */
    guint64 keepalive_seq;      /* seq + 1 of the outstanding KEEPALIVE, 0 none */
    struct ibv_send_wr *wrs;    /* batch scratch, sq_size entries */
    struct ibv_sge *sges;
    struct ibv_recv_wr *rwrs;   /* receive scratch, rq_size entries */
    struct ibv_sge *rsges;
    vrmProtoDataEntry *dents;   /* DATA scratch */

    /* mailbox, under engine->lock */
    int mb_fd;                  /* socket handed over, -1 none */
    bool mb_stop;               /* the job is ending */
    bool mb_disconnected;       /* the peer disconnected */
    bool mb_unused;             /* source: send CHANNEL_UNUSED */
    bool mb_open_req;           /* destination: CHANNEL_OPEN arrived */
    bool mb_done;               /* the channel ended cleanly */
    bool mb_exited;             /* the progress thread returned */

    vrmStats stats;
    /* first and last time this channel moved stream bytes (monotonic us;
     * progress thread writes, others read relaxed): the data phase that
     * mbps_average is measured over, without connection set-up */
    gint64 first_byte_us;
    gint64 last_byte_us;
    vrmStats sample;            /* main thread: snapshot of the last tick */
    double mbps_current;        /* main thread */
};

struct _vrmEngine {
    vrmEngineSettings s;        /* copy of the settings */
    vrmToken token;             /* the job's secret, wiped at the end */
    GMainContext *ctx;
    GMainLoop *loop;
    struct rdma_event_channel *cm;
    struct rdma_cm_id *listen_id;    /* source */
    GPtrArray *devices;         /* vrmRdmaDevice, one per verbs context */
    GPtrArray *async_sources;   /* GSource ids of device async fds */
    vrmChannel **channels;      /* s.channels entries */
    guint32 established;        /* channels with a QP up */
    guint32 accepted_socks;     /* source: QEMU connections accepted */
    guint32 next_open;          /* destination: next socket to connect */
    guint32 rejects;            /* source: connection requests refused */
    int last_reject;            /* source: reason of the last one */
    int unix_fd;                /* source: QEMU's listening socket */
    bool unix_own;              /* we bound it (--qemu-path): unlink at the end */
    char *port_str;             /* rdma_cm port as text, for rdma_getaddrinfo */
    guint32 rdma_port;          /* source: the port listened on */
    int stats_fd;               /* stats socket */
    int wakefd;                 /* eventfd: progress threads -> main */
    gint64 start_us;
    gint64 connect_deadline;
    gint64 last_progress_us;
    guint64 last_progress_sum;
    gint64 end_us;
    guint32 caps;               /* capabilities offered */
    bool unused_announced;
    bool finished;              /* every channel ended cleanly */

    GMutex lock;                /* leaf lock: failure + mailboxes */
    bool failed;
    int fail_code;
    char *fail_reason;
};

/* vrmchannel.c */
vrmChannel *vrmChannelNew(vrmEngine *engine, guint32 index);
int vrmChannelSetup(vrmChannel *ch, vrmRdmaDevice *dev);
int vrmChannelCreateQP(vrmChannel *ch);
int vrmChannelStart(vrmChannel *ch);
void vrmChannelJoin(vrmChannel *ch);
void vrmChannelFree(vrmChannel *ch);
void vrmChannelWake(vrmChannel *ch);

/* vrmengine.c, callable from any thread */
void vrmEngineFail(vrmEngine *engine, int code, const char *reason);
void vrmEngineWake(vrmEngine *engine);
