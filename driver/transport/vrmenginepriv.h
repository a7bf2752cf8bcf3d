/*
 * vrmenginepriv.h: what the files of the engine share; not for its callers
 *
 * The engine is five files, each calling only those below it (the
 * layering check holds them to it):
 *   vrmengine.c       the job's main loop, deadlines, stats, start and end
 *   vrmenginecm.c     rdma_cm: listen, accept, connect, authenticate
 *   vrmengineqemu.c   QEMU's sockets and their credentials
 *   vrmengineslot.c   slots (one per channel), devices, pinned memory
 *   vrmenginefail.c   failure and wake-ups, from any thread
 */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <glib-unix.h>

#include "vrmtransport.h"
#include "vrmchannel.h"
#include "vrmtransfer.h"
#include "vrmerror.h"
#include "vrmsocket.h"
#include "vrmtcp.h"
#include "vrmi18n.h"
#include "vrmlog.h"

#define VRM_ENGINE_TICK_MS 1000
#define VRM_ENGINE_CONNECT_RETRY_MS 200     /* destination: rdma_cm connect */
#define VRM_ENGINE_OPEN_RETRY_MS 50         /* destination: QEMU's socket */
#define VRM_ENGINE_LISTEN_BACKLOG 64
#define VRM_CAP_IPC_LOCK_BIT 14
#define VRM_ENGINE_LOG_WINDOW_US (10 * G_USEC_PER_SEC) /* peer-triggered warnings */
#define VRM_ENGINE_LOG_BURST 5              /* ... at most this many per window */
#define VRM_PF_EXITING 0x4                  /* /proc/PID/stat flags: in do_exit() */
#define VRM_ENGINE_LINGER_US (2 * G_USEC_PER_SEC) /* failed source: answer "job ended" */

typedef struct _vrmEngineSlot vrmEngineSlot;

/*
 * A slot's RDMA connection, in order: a slot only moves forward
 * (vrmEngineSlotAdvance), except that a source slot whose peer never
 * proved itself starts again from IDLE (vrmEngineSlotReset).
 */
typedef enum {
    VRM_ENGINE_SLOT_IDLE,           /* nothing counts against the allowance */
    VRM_ENGINE_SLOT_SET_UP,         /* its queue pair and memory exist; a
                                     * destination may retry its connect */
    VRM_ENGINE_SLOT_ESTABLISHED,    /* rdma_cm's ESTABLISHED seen, its progress
                                     * thread started (one that cannot start
                                     * ends the job) */
    VRM_ENGINE_SLOT_AUTHENTICATED,  /* the peer proved it holds the token (a
                                     * destination's peer did in its request:
                                     * it goes from SET_UP straight here) */
    VRM_ENGINE_SLOT_DONE,           /* both directions ended cleanly */
} vrmEngineSlotState;

/* Destination: a slot's side towards QEMU, in order */
typedef enum {
    VRM_ENGINE_SLOT_OPEN_NONE,      /* no CHANNEL_OPEN yet */
    VRM_ENGINE_SLOT_OPEN_REQUESTED, /* CHANNEL_OPEN arrived: connecting to QEMU */
    VRM_ENGINE_SLOT_OPEN_CONNECTED, /* connected to QEMU's socket or port */
} vrmEngineSlotOpen;

/* What the main thread knows of one channel */
struct _vrmEngineSlot {
    vrmEngine *engine;
    guint32 index;
    vrmChannel *ch;
    struct rdma_cm_id *id;      /* the channel's rdma_cm id */
    bool disk;                  /* carries an NBD connection (--copy-storage-all) */
    bool wanted;                /* source: QEMU opened it; destination: asked for */
    vrmEngineSlotState state;
    gint64 connectDeadline;     /* connected and authenticated by then */
    guint8 nonce[VRM_PROTO_NONCE_LEN];  /* ours, of this connection */
    int qemuFd;                 /* source: QEMU's connection until authenticated */
    vrmProtoTcpOpen tcpOpen;    /* transparent mode: where QEMU's connection
                                 * was going (source: read; destination: told) */
    bool tcp;                   /* ... the channel is such a TCP connection */
    guint retrySource;          /* destination: pending connect retry */
    gint64 openDeadline;        /* destination: QEMU socket connect deadline */
    guint openSource;           /* destination: pending socket retry (or
                                 * TCP connect) */
    int openFd;                 /* destination: TCP connect in progress, -1 none */
    vrmEngineSlotOpen open;
    vrmStats sample;            /* snapshot of the last tick */
    double mbpsCurrent;
};

struct _vrmEngine {
    vrmEngineSettings s;        /* copy of the settings */
    vrmToken token;             /* the job's secret, wiped at the end */
    GMainLoop *loop;
    struct rdma_event_channel *cm;
    struct rdma_cm_id *listenId;    /* source */
    GPtrArray *devices;         /* vrmRdmaDevice, one per verbs context */
    GPtrArray *asyncSources;    /* GSource ids of device async fds */
    vrmEngineSlot *slots;       /* migration channels, then disk channels */
    guint32 nslots;             /* s.channels + s.diskChannels */
    guint32 agreed;             /* channels agreed with the peer, 0 before */
    guint32 established;        /* channels connected and authenticated */
    guint32 setUpChannels;      /* channels whose memory is registered */
    guint32 acceptedSocks;      /* source: QEMU connections accepted */
    guint32 acceptedDisks;      /* source: ... of them to copy disks (NBD) */
    guint32 nextConnect;        /* destination: the next channel the source may ask for */
    guint32 nextOpen;           /* destination: next socket to connect */
    guint32 rejects;            /* source: connection requests refused */
    bool staleInjected;         /* source: the stale-request test hook fired */
    int lastReject;             /* source: reason of the last one */
    gint64 logWindowUs;         /* peer-triggered warnings: window start */
    guint logCount;             /* ... and how many in it */
    int unixFd;                 /* source: QEMU's listening socket */
    bool unixOwn;               /* we bound it (--qemu-path): unlink at the end */
    int diskFd;                 /* source: QEMU's NBD client's listening socket */
    bool diskOwn;               /* we bound it (--disk-path): unlink at the end */
    int tcpFd;                  /* source, transparent mode: steered connections */
    pid_t qemuPid;              /* QEMU: source --qemu-pid, destination the listener */
    bool qemuGone;              /* it had exited when its stream ended */
    char *portStr;              /* rdma_cm port as text, for rdma_getaddrinfo */
    guint32 rdmaPort;           /* source: the port listened on */
    int statsFd;                /* stats socket */
    int wakefd;                 /* eventfd: progress threads -> main */
    gint64 startUs;
    gint64 jobHeard;            /* the channels' last completion (vrmChannelHost) */
    gint64 lastProgressUs;
    guint64 lastProgressSum;
    gint64 endUs;
    guint32 caps;               /* capabilities offered */
    bool finished;              /* every channel ended cleanly */

    GMutex lock;                /* leaf lock: the failure */
    bool failed;
    int failCode;
    char *failReason;
};

/* vrmenginefail.c */
void vrmEngineFailLast(vrmEngine *e);
bool vrmEngineFailed(vrmEngine *e);
void vrmEngineChannelFail(void *opaque, int code, const char *reason);
void vrmEngineChannelWake(void *opaque);
bool vrmEngineMayWarn(vrmEngine *e);
char *vrmEnginePeerName(struct rdma_cm_id *id);
bool vrmEngineProcessGone(pid_t pid);

/* vrmengineslot.c */
int vrmEngineCheckPinned(const vrmEngineSettings *s);
vrmRdmaDevice *vrmEngineDevice(vrmEngine *e, struct ibv_context *ctx);
vrmEngineSlot *vrmEngineSlotOf(vrmEngine *e, guint32 index);
vrmChannel *vrmEngineNewChannel(vrmEngine *e, vrmEngineSlot *slot);
void vrmEngineSlotAdvance(vrmEngineSlot *slot, vrmEngineSlotState state);
int vrmEngineSlotSetup(vrmEngine *e, vrmEngineSlot *slot, struct rdma_cm_id *id,
                       guint32 caps);
void vrmEngineSlotReset(vrmEngine *e, vrmEngineSlot *slot, int reason, const char *why);

/* vrmenginecm.c */
int vrmEngineResolve(vrmEngine *e, bool passive, struct rdma_addrinfo **ai);
int vrmEngineConnectChannel(vrmEngine *e, vrmEngineSlot *slot);
gboolean vrmEngineCMEvent(gint fd, GIOCondition cond, gpointer opaque);

/* vrmengineqemu.c */
int vrmEngineUnixListen(const char *path);
void vrmEngineGiveQemuSocket(vrmEngineSlot *slot);
gboolean vrmEngineUnixAccept(gint fd, GIOCondition cond, gpointer opaque);
gboolean vrmEngineDiskAccept(gint fd, GIOCondition cond, gpointer opaque);
socklen_t vrmEngineTcpSockaddr(const vrmProtoTcpOpen *open, struct sockaddr_storage *ss);
gboolean vrmEngineTcpAccept(gint fd, GIOCondition cond, gpointer opaque);
gboolean vrmEngineOpenRetry(gpointer opaque);
void vrmEngineOpenNext(vrmEngine *e);
void vrmEngineStreamEnded(vrmEngine *e, vrmEngineSlot *slot);
