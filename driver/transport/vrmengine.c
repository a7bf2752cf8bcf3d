/*
 * vrmengine.c: one job on one host: rdma_cm and the mutual authentication,
 * QEMU's sockets and their credentials, deadlines, stats, and the order of
 * teardown (docs/protocol.rst, version 2)
 *
 * Threads and the lock rule: the engine's main thread runs a GMainLoop:
 * rdma_cm events, device async events, QEMU's listening socket (source),
 * ordered socket connects (destination), the stats socket, timers and
 * signals. It alone creates and destroys rdma_cm ids, queue pairs and every
 * resource of a channel, and keeps what it knows of each channel in a slot
 * (vrmEngineSlot). Each channel's progress thread reaches the engine only
 * through the vrmChannelHost callbacks: fail() (under e->lock, a leaf lock)
 * and wake() (an eventfd); the main thread then reads the channel's events
 * from its mailbox (vrmChannelTakeEvents).
 *
 * Channels are connected lazily: the destination connects channel 0 at
 * start, and channel k only when the source, whose QEMU opened its k-th
 * connection, asks for it with CHANNEL_CONNECT on channel 0. Memory is
 * registered per channel when it connects, within the job's allowance.
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* accept4, SO_PEERCRED */
#endif

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

/* ------------------------------------------------------------------ */
/* Pinned memory                                                       */

static bool
vrmHaveCapIpcLock(void)
{
    g_autofree char *status = NULL;
    const char *p;
    guint64 caps;

    if (!g_file_get_contents("/proc/self/status", &status, NULL, NULL))
        return false;
    if (!(p = strstr(status, "CapEff:")))
        return false;
    caps = g_ascii_strtoull(p + strlen("CapEff:"), NULL, 16);
    return caps & (G_GUINT64_CONSTANT(1) << VRM_CAP_IPC_LOCK_BIT);
}

/* Would @channels channels fit the allowance, the memlock limit and the
 * host? -1 reported if not. Memory is registered per channel as it
 * connects, so this runs each time one is set up. */
static int
vrmEngineCheckChannels(const vrmEngineSettings *s, guint32 channels)
{
    guint64 need = vrmPinnedBytes(channels, s->ringDepth, s->chunkSize);
    long pages = sysconf(_SC_PHYS_PAGES);
    long pagesize = sysconf(_SC_PAGESIZE);
    guint64 ram = pages > 0 && pagesize > 0 ? (guint64)pages * pagesize : 0;
    struct rlimit rl;

    if (s->maxPinned && need > s->maxPinned) {
        vrmReportError(VRM_ERR_RESOURCE,
                       g_dngettext(GETTEXT_PACKAGE,
                                   "%1$u channel would pin %2$llu bytes, more than the job's allowance of %3$llu bytes (--max-pinned); lower --ring-depth or --chunk-size, or use fewer channels",
                                   "%1$u channels would pin %2$llu bytes, more than the job's allowance of %3$llu bytes (--max-pinned); lower --ring-depth or --chunk-size, or use fewer channels",
                                   channels),
                       channels, (unsigned long long)need,
                       (unsigned long long)s->maxPinned);
        return -1;
    }
    if (ram > 0 && need > ram) {
        vrmReportError(VRM_ERR_RESOURCE,
                       g_dngettext(GETTEXT_PACKAGE,
                                   "%1$u channel would pin %2$llu bytes, more than the %3$llu bytes of memory of this host",
                                   "%1$u channels would pin %2$llu bytes, more than the %3$llu bytes of memory of this host",
                                   channels),
                       channels, (unsigned long long)need,
                       (unsigned long long)ram);
        return -1;
    }
    if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
        vrmReportSystemError(errno, _("cannot read RLIMIT_MEMLOCK"));
        return -1;
    }
    /* the limit the kernel applies to our registrations: checked against
     * what we are about to pin, not against a bound of our own */
    if (rl.rlim_cur != RLIM_INFINITY && need > rl.rlim_cur && !vrmHaveCapIpcLock()) {
        vrmReportError(VRM_ERR_RESOURCE,
                       g_dngettext(GETTEXT_PACKAGE,
                                   "%1$u channel needs %2$llu bytes of locked memory but RLIMIT_MEMLOCK allows %3$llu; raise it (ulimit -l, or the job's allowance in virt-rdmad) or lower --ring-depth or --chunk-size",
                                   "%1$u channels need %2$llu bytes of locked memory but RLIMIT_MEMLOCK allows %3$llu; raise it (ulimit -l, or the job's allowance in virt-rdmad) or lower --ring-depth or --chunk-size",
                                   channels),
                       channels, (unsigned long long)need,
                       (unsigned long long)rl.rlim_cur);
        return -1;
    }
    return 0;
}

int
vrmEngineCheckPinned(const vrmEngineSettings *s)
{
    /* at start: the first channel must fit; each further one is checked
     * when it connects */
    if (vrmEngineCheckChannels(s, 1) < 0)
        return -1;
    VRM_INFO("pinned memory: %llu bytes per channel, at most %llu with %u channels",
             vrmPinnedBytes(1, s->ringDepth, s->chunkSize),
             vrmEngineSettingsPinnedBytes(s), s->channels);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Failure and wake-ups (any thread)                                   */

static void
vrmEngineWake(vrmEngine *e)
{
    guint64 one = 1;

    if (e->wakefd >= 0 && write(e->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        VRM_WARN("cannot wake the engine: %s", g_strerror(errno));
}

static void
vrmEngineFail(vrmEngine *e, int code, const char *reason)
{
    bool first = false;
    guint32 i;

    g_mutex_lock(&e->lock);
    if (!e->failed) {
        e->failed = true;
        e->failCode = code;
        e->failReason = g_strdup(reason);
        first = true;
    }
    g_mutex_unlock(&e->lock);
    if (!first)
        return;
    /* the program prints the reason once, at exit */
    VRM_INFO("the job is failing: %s", reason);
    for (i = 0; i < e->nslots; i++)
        vrmChannelStop(e->slots[i].ch, code, reason);
    vrmEngineWake(e);
}

/* Fail with this thread's last error */
static void
vrmEngineFailLast(vrmEngine *e)
{
    int code = vrmGetLastErrorCode();

    vrmEngineFail(e, code ? code : VRM_ERR_INTERNAL, vrmGetLastErrorMessage());
}

static bool
vrmEngineFailed(vrmEngine *e)
{
    bool failed;

    g_mutex_lock(&e->lock);
    failed = e->failed;
    g_mutex_unlock(&e->lock);
    return failed;
}

/* vrmChannelHost: what a channel's progress thread may do to the engine */
static void
vrmEngineChannelFail(void *opaque, int code, const char *reason)
{
    vrmEngineFail(((vrmEngineSlot *)opaque)->engine, code, reason);
}

static void
vrmEngineChannelWake(void *opaque)
{
    vrmEngineWake(((vrmEngineSlot *)opaque)->engine);
}

/* Warnings a peer can trigger (main thread): a few per window, then a
 * count of what was left out */
static bool
vrmEngineMayWarn(vrmEngine *e)
{
    gint64 now = g_get_monotonic_time();

    if (now - e->logWindowUs > VRM_ENGINE_LOG_WINDOW_US) {
        if (e->logCount > VRM_ENGINE_LOG_BURST)
            VRM_WARN("%u more warnings like the above were not logged",
                     e->logCount - VRM_ENGINE_LOG_BURST);
        e->logWindowUs = now;
        e->logCount = 0;
    }
    return ++e->logCount <= VRM_ENGINE_LOG_BURST;
}

/* "ADDR:PORT" of the peer of @id */
static char *
vrmEnginePeerName(struct rdma_cm_id *id)
{
    struct sockaddr *sa = id ? rdma_get_peer_addr(id) : NULL;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned int port = 0;

    if (sa && sa->sa_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)sa;

        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
    } else if (sa && sa->sa_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;

        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
    }
    return vrmEngineFormatAddress(host, port);
}

/* Has process @pid ended, or is it ending? (a crash closes its sockets in
 * do_exit(), before it becomes a zombie: PF_EXITING is set by then) */
static bool
vrmEngineProcessGone(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
    g_autofree char *stat = NULL;
    g_auto(GStrv) fields = NULL;
    const char *close_paren;
    guint64 flags;

    if (kill(pid, 0) < 0 && errno == ESRCH)
        return true;
    if (!g_file_get_contents(path, &stat, NULL, NULL))
        return true;
    /* "PID (COMM) STATE PPID ... FLAGS(9th)": COMM ends at the last ')' */
    if (!(close_paren = strrchr(stat, ')')) || close_paren[1] != ' ')
        return false;
    if (close_paren[2] == 'Z' || close_paren[2] == 'X')
        return true;
    fields = g_strsplit(close_paren + 2, " ", 8);
    if (g_strv_length(fields) < 8)
        return false;
    flags = g_ascii_strtoull(fields[6], NULL, 10);
    return flags & VRM_PF_EXITING;
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */

static gboolean
vrmEngineAsyncEvent(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmRdmaDevice *dev = opaque;
    vrmEngine *e = dev->owner;
    struct ibv_async_event ev;

    while (ibv_get_async_event(dev->ctx, &ev) == 0) {
        vrmEngineSlot *slot = NULL;

        switch (ev.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
            slot = ev.element.qp->qp_context;
            vrmReportError(VRM_ERR_RDMA,
                           _("channel %1$u: asynchronous error on its queue pair: %2$s"),
                           slot->index, ibv_event_type_str(ev.event_type));
            vrmEngineFailLast(e);
            break;
        case IBV_EVENT_CQ_ERR:
            slot = ev.element.cq->cq_context;
            vrmReportError(VRM_ERR_RDMA,
                           _("channel %1$u: its completion queue overran"), slot->index);
            vrmEngineFailLast(e);
            break;
        case IBV_EVENT_DEVICE_FATAL:
        case IBV_EVENT_PORT_ERR:
            vrmReportError(VRM_ERR_NO_DEVICE, _("RDMA device %1$s failed: %2$s"),
                           dev->name, ibv_event_type_str(ev.event_type));
            vrmEngineFailLast(e);
            break;
        default:
            VRM_DEBUG("device %s: async event %s", dev->name,
                      ibv_event_type_str(ev.event_type));
            break;
        }
        ibv_ack_async_event(&ev);
    }
    return G_SOURCE_CONTINUE;
}

static vrmRdmaDevice *
vrmEngineDevice(vrmEngine *e, struct ibv_context *ctx)
{
    vrmRdmaDevice *dev;
    guint i;
    int flags;

    if (!ctx) {
        vrmReportError(VRM_ERR_NO_DEVICE,
                       _("the RDMA address is not bound to an RDMA device"));
        return NULL;
    }
    for (i = 0; i < e->devices->len; i++) {
        dev = g_ptr_array_index(e->devices, i);
        if (dev->ctx == ctx)
            return dev;
    }
    if (e->s.device && !g_str_equal(e->s.device, ibv_get_device_name(ctx->device))) {
        vrmReportError(VRM_ERR_NO_DEVICE,
                       _("the RDMA address is on device %1$s, not on the requested device %2$s"),
                       ibv_get_device_name(ctx->device), e->s.device);
        return NULL;
    }
    if (!(dev = vrmRdmaDeviceNew(ctx)))
        return NULL;
    dev->owner = e;
    g_ptr_array_add(e->devices, dev);
    flags = fcntl(ctx->async_fd, F_GETFL);
    if (flags >= 0 && fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) == 0) {
        guint id = g_unix_fd_add(ctx->async_fd, G_IO_IN, vrmEngineAsyncEvent, dev);
        g_ptr_array_add(e->asyncSources, GUINT_TO_POINTER(id));
    }
    if (vrmTransferCapsForDevice(e->caps, !dev->iwarp) != e->caps) {
        VRM_INFO("device %s is iWARP: data is announced by descriptor SENDs", dev->name);
        e->caps = vrmTransferCapsForDevice(e->caps, !dev->iwarp);
    }
    return dev;
}


/* ------------------------------------------------------------------ */
/* Slots                                                               */

/* The slot of the channel numbered @index on the wire, or NULL: migration
 * channels from 0, disk channels from VRM_DISK_CHANNEL_BASE */
static vrmEngineSlot *
vrmEngineSlotOf(vrmEngine *e, guint32 index)
{
    if (index < e->s.channels)
        return &e->slots[index];
    if (index >= VRM_DISK_CHANNEL_BASE && index - VRM_DISK_CHANNEL_BASE < e->s.diskChannels)
        return &e->slots[e->s.channels + index - VRM_DISK_CHANNEL_BASE];
    return NULL;
}

/* Bytes per work request: the device's limit (vrmRdmaQPMaxMessage), or
 * none under the test fault that shows why the limit is there */
static guint32
vrmEngineMaxWrite(const vrmEngine *e)
{
    return e->s.fault == VRM_ENGINE_FAULT_WHOLE_WRITES ? VRM_MAX_WRITE_UNLIMITED : 0;
}

static vrmChannel *
vrmEngineNewChannel(vrmEngine *e, vrmEngineSlot *slot)
{
    vrmChannelConfig cfg = {
        .role = e->s.role,
        .index = slot->index,
        .chunkSize = e->s.chunkSize,
        .ringDepth = e->s.ringDepth,
        .pinAll = (e->s.caps & VRM_CAP_PIN_ALL) != 0,
        .maxWrite = vrmEngineMaxWrite(e),
        /* a QEMU whose pid we know is asked about when its stream ends */
        .checkEnd = e->s.role == VRM_ENGINE_ROLE_DESTINATION || e->s.qemuPid > 0,
        .domainUUID = e->s.domainUUID,
        .fault = e->s.fault,
        .faultBytes = e->s.faultBytes,
    };
    vrmChannelHost host = {
        .fail = vrmEngineChannelFail,
        .wake = vrmEngineChannelWake,
        .opaque = slot,
        .jobHeard = &e->jobHeard,
    };

    return vrmChannelNew(&cfg, &host);
}

/* A fact about a slot's connection, once seen, stays: a slot never goes
 * back (but to IDLE, by vrmEngineSlotReset) */
static void
vrmEngineSlotAdvance(vrmEngineSlot *slot, vrmEngineSlotState state)
{
    if (state > slot->state)
        slot->state = state;
}

/* The channel's memory on the device of @id, and its queue pair */
static int
vrmEngineSlotSetup(vrmEngine *e, vrmEngineSlot *slot, struct rdma_cm_id *id,
                   guint32 caps)
{
    vrmChannelConfig cfg = {
        .chunkSize = e->s.chunkSize,
        .ringDepth = e->s.ringDepth,
        .maxWrite = vrmEngineMaxWrite(e),
    };
    vrmRdmaDevice *dev;
    vrmRdmaQP *qp;
    guint32 sq, rq;
    int cqe;

    if (slot->state == VRM_ENGINE_SLOT_IDLE) {
        /* the job's allowance and the memlock limit, channel by channel */
        if (vrmEngineCheckChannels(&e->s, e->setUpChannels + 1) < 0)
            return -1;
    }
    if (!(dev = vrmEngineDevice(e, id->verbs)) ||
        vrmChannelQueueSizes(&cfg, dev, &sq, &rq, &cqe) < 0 ||
        vrmChannelSetup(slot->ch, dev) < 0)
        return -1;
    if (slot->state == VRM_ENGINE_SLOT_IDLE) {
        vrmEngineSlotAdvance(slot, VRM_ENGINE_SLOT_SET_UP);
        e->setUpChannels++;
    }
    if (!(qp = vrmRdmaQPNew(dev, id, sq, rq, cqe, slot)))
        return -1;
    return vrmChannelAttachQP(slot->ch, qp, caps);
}

/* Source: the peer of this slot did not authenticate, its connect went
 * away, or it never completed: drop everything of that connection (a new
 * channel, nothing registered) and listen again. The job goes on. */
static void
vrmEngineSlotReset(vrmEngine *e, vrmEngineSlot *slot, int reason, const char *why)
{
    g_autofree char *peer = vrmEnginePeerName(slot->id);

    g_assert(e->s.role == VRM_ENGINE_ROLE_SOURCE);
    e->rejects++;
    e->lastReject = reason;
    if (vrmEngineMayWarn(e))
        VRM_WARN(_("channel %1$u: %2$s (peer %3$s); listening again"),
                 slot->index, why, peer);
    if (slot->id && slot->state >= VRM_ENGINE_SLOT_ESTABLISHED)
        rdma_disconnect(slot->id);
    vrmChannelStop(slot->ch, VRM_ERR_AUTH, why);
    vrmChannelJoin(slot->ch);
    vrmChannelFree(slot->ch);
    if (slot->id)
        rdma_destroy_id(slot->id);
    slot->id = NULL;
    if (slot->state >= VRM_ENGINE_SLOT_SET_UP)
        e->setUpChannels--;
    slot->state = VRM_ENGINE_SLOT_IDLE;
    slot->ch = vrmEngineNewChannel(e, slot);
}

/* ------------------------------------------------------------------ */
/* rdma_cm                                                             */

static void
vrmEngineSetAckTimeout(struct rdma_cm_id *id)
{
    guint8 timeout = VRM_RDMA_ACK_TIMEOUT;

    if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
                        &timeout, sizeof(timeout)) < 0)
        VRM_DEBUG("cannot set the ACK timeout: %s", g_strerror(errno));
}

static int vrmEngineConnectChannel(vrmEngine *e, vrmEngineSlot *slot);

static gboolean
vrmEngineRetryConnect(gpointer opaque)
{
    vrmEngineSlot *slot = opaque;

    slot->retrySource = 0;
    if (!vrmEngineFailed(slot->engine) &&
        vrmEngineConnectChannel(slot->engine, slot) < 0)
        vrmEngineFailLast(slot->engine);
    return G_SOURCE_REMOVE;
}

/* Destination: drop a failed attempt and try again until the deadline */
static void
vrmEngineScheduleRetry(vrmEngine *e, vrmEngineSlot *slot, const char *why)
{
    g_assert(e->s.role == VRM_ENGINE_ROLE_DESTINATION);
    vrmChannelDropQP(slot->ch);
    if (slot->id) {
        rdma_destroy_id(slot->id);
        slot->id = NULL;
    }
    if (g_get_monotonic_time() > slot->connectDeadline) {
        g_autofree char *peer = vrmEngineFormatAddress(e->s.address, e->s.port);

        vrmReportError(VRM_ERR_TIMEOUT,
                       _("could not connect channel %1$u to the source engine at %2$s within %3$u seconds (last attempt: %4$s)"),
                       slot->index, peer, e->s.deadlineConnect, why);
        vrmEngineFailLast(e);
        return;
    }
    VRM_DEBUG("channel %u: %s, retrying", slot->index, why);
    slot->retrySource = g_timeout_add(VRM_ENGINE_CONNECT_RETRY_MS,
                                      vrmEngineRetryConnect, slot);
}

/* The rdma_cm address of the job: to listen on (passive) or to reach. */
static int
vrmEngineResolve(vrmEngine *e, bool passive, struct rdma_addrinfo **ai)
{
    struct rdma_addrinfo hints = {
        .ai_flags = passive ? RAI_PASSIVE : 0,
        .ai_port_space = RDMA_PS_TCP,
    };
    int rc;

    if ((rc = rdma_getaddrinfo(e->s.address, e->portStr, &hints, ai)) != 0) {
        g_autofree char *addr = vrmEngineFormatAddress(e->s.address, e->s.port);

        vrmReportError(VRM_ERR_INVALID_ARG, _("cannot resolve the RDMA address %1$s: %2$s"),
                       addr, rc == -1 ? g_strerror(errno) : gai_strerror(rc));
        return -1;
    }
    return 0;
}

/* Destination: connect channel @slot (the first try or a retry) */
static int
vrmEngineConnectChannel(vrmEngine *e, vrmEngineSlot *slot)
{
    struct rdma_addrinfo *ai = NULL;
    int rc;

    if (vrmEngineResolve(e, false, &ai) < 0)
        return -1;
    if (rdma_create_id(e->cm, &slot->id, slot, RDMA_PS_TCP) < 0) {
        vrmReportSystemError(errno, _("cannot create an rdma_cm id"));
        rdma_freeaddrinfo(ai);
        return -1;
    }
    rc = rdma_resolve_addr(slot->id, NULL, ai->ai_dst_addr, VRM_RDMA_RESOLVE_TIMEOUT_MS);
    rdma_freeaddrinfo(ai);
    if (rc < 0)
        vrmEngineScheduleRetry(e, slot, g_strerror(errno));
    return 0;
}

/* Destination: the route is there: set the channel up and send the REQ */
static int
vrmEngineSendConnect(vrmEngine *e, vrmEngineSlot *slot)
{
    vrmProtoConnReq req = {
        .version = VRM_PROTOCOL_VERSION,
        .flags = e->caps,
        .channel = slot->index,
        .channels = e->s.channels,
    };
    guint8 pd[VRM_PROTO_REQ_LEN];
    struct rdma_conn_param param = {
        .private_data = pd,
        .private_data_len = sizeof(pd),
        .responder_resources = VRM_RDMA_RESPONDER_RESOURCES,
        .initiator_depth = VRM_RDMA_RESPONDER_RESOURCES,
        .retry_count = VRM_RDMA_RETRY_COUNT,
        .rnr_retry_count = VRM_RDMA_RNR_RETRY_COUNT,
    };

    G_STATIC_ASSERT(VRM_PROTO_REQ_LEN <= VRM_PROTO_PRIVATE_DATA_MAX);
    if (vrmProtoNonce(slot->nonce) < 0)
        return -1;
    memcpy(req.nonce, slot->nonce, sizeof(req.nonce));
    if (e->s.fault == VRM_ENGINE_FAULT_VERSION) {
        /* a version 1 engine: its token in the clear where the nonce is
         * (zeros here: a test never sends the real one) */
        VRM_WARN("test hook: connecting as a protocol version 1 engine");
        req.version = 1;
        memset(req.nonce, 0, sizeof(req.nonce));
    }
    vrmProtoConnReqEncode(&req, pd);

    /* the agreed capabilities come with the REP */
    if (vrmEngineSlotSetup(e, slot, slot->id, e->caps) < 0)
        return -1;
    vrmEngineSetAckTimeout(slot->id);
    if (rdma_connect(slot->id, &param) < 0)
        vrmEngineScheduleRetry(e, slot, g_strerror(errno));
    else if (e->s.fault == VRM_ENGINE_FAULT_VANISH) {
        /* a connect request whose sender is gone by the time it is seen */
        VRM_WARN("test hook: dropping the connect request of channel %u at once",
                 slot->index);
        vrmChannelDropQP(slot->ch);
        rdma_destroy_id(slot->id);
        slot->id = NULL;
        vrmReportError(VRM_ERR_CANCELLED, _("test hook: the connect request was dropped"));
        return -1;
    }
    return 0;
}

/* Source: refuse a connect request, with the reject record */
static void
vrmEngineReject(vrmEngine *e, struct rdma_cm_id *id, int reason, bool count)
{
    guint8 rej[VRM_PROTO_REJECT_LEN];
    guint32 version = VRM_PROTOCOL_VERSION;

    if (e->s.fault == VRM_ENGINE_FAULT_VERSION)
        version = 1;
    if (count) {
        e->rejects++;
        e->lastReject = reason;
    }
    vrmProtoRejectEncode(reason, version, rej);
    if (rdma_reject(id, rej, sizeof(rej)) < 0)
        VRM_WARN("rdma_reject failed: %s", g_strerror(errno));
}

/* Source, test hook: the first connect request fails as one whose sender
 * went away before its queue pair existed would (the race of issue 13
 * item 12 that a test cannot time) */
static int
vrmEngineStaleRequest(vrmEngine *e, vrmEngineSlot *slot)
{
    if (e->s.fault != VRM_ENGINE_FAULT_STALE_REQUEST || e->staleInjected)
        return 0;
    e->staleInjected = true;
    VRM_WARN("test hook: channel %u: taking this connect request as one whose sender has gone",
             slot->index);
    vrmReportSystemError(EINVAL, "test hook: no queue pair for a connect request whose sender has gone");
    return -1;
}

/* What became of a source's connect request */
typedef enum {
    VRM_ENGINE_ACCEPT_FAILED = -1,  /* the job fails (reported) */
    VRM_ENGINE_ACCEPT_ACCEPTED,     /* its slot has the connection */
    VRM_ENGINE_ACCEPT_REFUSED,      /* no slot took it: its id goes after the ack */
    VRM_ENGINE_ACCEPT_DROPPED,      /* its slot could not take it (reported):
                                     * the slot listens again after the ack */
} vrmEngineAcceptResult;

/* Source: a connect request */
static vrmEngineAcceptResult
vrmEngineAccept(vrmEngine *e, struct rdma_cm_event *ev)
{
    vrmProtoConnReq req;
    vrmProtoConnRep rep = { .version = VRM_PROTOCOL_VERSION };
    guint8 reply[VRM_PROTO_REP_LEN];
    guint8 expect[VRM_PROTO_MAC_LEN];
    struct rdma_conn_param param = {
        .private_data = reply,
        .private_data_len = sizeof(reply),
        .responder_resources = VRM_RDMA_RESPONDER_RESOURCES,
        .initiator_depth = VRM_RDMA_RESPONDER_RESOURCES,
        .rnr_retry_count = VRM_RDMA_RNR_RETRY_COUNT,
    };
    vrmEngineSlot *slot = NULL;
    vrmToken key = e->token;
    guint32 channels;
    int reason;

    /* Everything about the peer is checked before any resource exists. */
    if (e->s.fault == VRM_ENGINE_FAULT_VERSION) {
        vrmReportError(VRM_ERR_VERSION,
                       _("test hook: refusing every peer as a version 1 engine would"));
        reason = VRM_REJECT_VERSION;
    } else if (vrmProtoConnReqDecode(ev->param.conn.private_data,
                                     ev->param.conn.private_data_len, &req) < 0) {
        reason = VRM_REJECT_MALFORMED;
    } else {
        channels = e->agreed ? e->agreed : e->s.channels;
        reason = vrmProtoConnReqCheck(&req, channels,
                                      (e->caps & VRM_CAP_DISKS) ? e->s.diskChannels : 0);
    }
    if (reason == VRM_REJECT_NONE) {
        slot = vrmEngineSlotOf(e, req.channel);
        g_assert(slot);
        if (e->agreed && req.channels < e->agreed) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("the peer asked for channel %1$u with a maximum of %2$u channels after %3$u were agreed"),
                           req.channel, req.channels, e->agreed);
            reason = VRM_REJECT_CHANNEL;
        } else if (!slot->wanted && req.channel != 0) {
            /* lazily: only what QEMU opened, announced by CHANNEL_CONNECT */
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("the peer asked for channel %1$u, which QEMU has not opened"),
                           req.channel);
            reason = VRM_REJECT_CHANNEL;
        } else if (slot->id) {
            vrmReportError(VRM_ERR_PROTOCOL, _("channel %1$u is already connected"),
                           req.channel);
            reason = VRM_REJECT_BUSY;
        }
    }
    if (reason != VRM_REJECT_NONE) {
        g_autofree char *peer = vrmEnginePeerName(ev->id);

        if (vrmEngineMayWarn(e))
            VRM_WARN(_("refused a connection request from %1$s: %2$s"), peer,
                     vrmGetLastErrorMessage());
        vrmEngineReject(e, ev->id, reason, true);
        return VRM_ENGINE_ACCEPT_REFUSED;
    }

    slot->id = ev->id;
    slot->id->context = slot;
    rep.flags = vrmProtoNegotiate(e->caps, req.flags);
    rep.channel = req.channel;
    rep.channels = MIN(e->s.channels, req.channels);
    if (vrmEngineStaleRequest(e, slot) < 0 ||
        vrmEngineSlotSetup(e, slot, slot->id, rep.flags) < 0 || vrmProtoNonce(rep.nonce) < 0) {
        if (vrmGetLastErrorCode() == VRM_ERR_RESOURCE) {
            vrmEngineReject(e, ev->id, VRM_REJECT_RESOURCES, true);
            /* a channel the allowance does not cover ends the job: QEMU
             * would wait for it forever */
            return VRM_ENGINE_ACCEPT_FAILED;
        }
        /* Anything else belongs to this one request: above all a sender
         * that went away between its request and our queue pair (rdma_cm
         * then refuses the queue pair with EINVAL). It costs the job
         * nothing: "busy" asks a live sender to try again, and the slot
         * listens again with the reason logged (issue 13 item 12). */
        vrmEngineReject(e, ev->id, VRM_REJECT_BUSY, false);
        return VRM_ENGINE_ACCEPT_DROPPED;
    }
    if (e->s.fault == VRM_ENGINE_FAULT_IMPOSTOR) {
        VRM_WARN("test hook: answering without the job's token");
        vrmTokenGenerate(&key);
    }
    /* our proof, cut to fit the REP; the destination's, expected in AUTH */
    vrmProtoMacSource(&key, req.nonce, rep.nonce, rep.flags, rep.channel, rep.channels,
                      rep.mac);
    vrmProtoMacDestination(&e->token, rep.nonce, req.nonce, rep.flags, rep.channel,
                           rep.channels, expect);
    vrmTokenClear(&key);
    vrmChannelSetAuth(slot->ch, expect);
    explicit_bzero(expect, sizeof(expect));
    vrmProtoConnRepEncode(&rep, reply);
    vrmEngineSetAckTimeout(slot->id);
    if (rdma_accept(slot->id, &param) < 0) {
        /* its sender has gone already (issue 13 item 12): drop this one,
         * keep listening; the real destination may still come */
        vrmReportSystemError(errno, _("its connect request could not be accepted"));
        return VRM_ENGINE_ACCEPT_DROPPED;
    }
    if (!e->agreed)
        e->agreed = rep.channels;
    VRM_INFO("channel %u accepted, capabilities 0x%x, %u channels", slot->index,
             rep.flags, e->agreed);
    return VRM_ENGINE_ACCEPT_ACCEPTED;
}

/* Destination: the source accepted; it must have proved it holds the
 * token before anything of ours goes out */
static int
vrmEngineVerifySource(vrmEngine *e, vrmEngineSlot *slot, struct rdma_cm_event *ev)
{
    g_autofree char *peer = vrmEngineFormatAddress(e->s.address, e->s.port);
    guint8 mac[VRM_PROTO_MAC_SOURCE_LEN];
    guint8 auth[VRM_PROTO_MAC_LEN];
    vrmProtoConnRep rep;
    vrmToken key = e->token;

    if (vrmProtoConnRepDecode(ev->param.conn.private_data,
                              ev->param.conn.private_data_len, &rep) < 0) {
        g_autofree char *why = g_strdup(vrmGetLastErrorMessage());

        vrmReportError(VRM_ERR_AUTH,
                       _("the peer at %1$s could not prove it holds this job's token: %2$s"),
                       peer, why);
        return -1;
    }
    vrmProtoMacSource(&e->token, slot->nonce, rep.nonce, rep.flags, rep.channel,
                      rep.channels, mac);
    if (!vrmProtoMacEqual(mac, rep.mac, sizeof(mac))) {
        vrmReportError(VRM_ERR_AUTH,
                       _("the peer at %1$s could not prove it holds this job's token"),
                       peer);
        return -1;
    }
    if (rep.version != VRM_PROTOCOL_VERSION || rep.channel != slot->index ||
        (rep.flags & ~e->caps) || rep.channels < 1 || rep.channels > e->s.channels ||
        (e->agreed && rep.channels != e->agreed)) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the source engine accepted channel %1$u with version %2$u, channel %3$u, capabilities 0x%4$x and %5$u channels, which do not match the request"),
                       slot->index, rep.version, rep.channel, rep.flags, rep.channels);
        return -1;
    }
    if (!e->agreed)
        e->agreed = rep.channels;
    if (e->s.fault == VRM_ENGINE_FAULT_BAD_AUTH) {
        VRM_WARN("test hook: sending an AUTH made without the job's token");
        vrmTokenGenerate(&key);
    }
    vrmProtoMacDestination(&key, rep.nonce, slot->nonce, rep.flags, rep.channel,
                           rep.channels, auth);
    vrmTokenClear(&key);
    vrmChannelSetAuth(slot->ch, auth);
    explicit_bzero(auth, sizeof(auth));
    vrmChannelSetCaps(slot->ch, vrmProtoNegotiate(e->caps, rep.flags));
    return 0;
}

static int
vrmEngineEstablished(vrmEngine *e, vrmEngineSlot *slot, struct rdma_cm_event *ev)
{
    if (e->s.role == VRM_ENGINE_ROLE_DESTINATION) {
        if (vrmEngineVerifySource(e, slot, ev) < 0)
            return -1;
        /* the source proved itself; it checks our AUTH next */
        vrmEngineSlotAdvance(slot, VRM_ENGINE_SLOT_AUTHENTICATED);
        e->established++;
    } else {
        vrmEngineSlotAdvance(slot, VRM_ENGINE_SLOT_ESTABLISHED);
    }
    VRM_INFO("channel %u connected", slot->index);
    return vrmChannelStart(slot->ch);
}

/* The destination's view of a reject record (the event already acked:
 * a retry destroys the id, which waits for its events' acks) */
static void
vrmEngineRejected(vrmEngine *e, vrmEngineSlot *slot, int reason, guint32 version,
                  int status)
{
    g_autofree char *peer = vrmEngineFormatAddress(e->s.address, e->s.port);

    switch (reason) {
    case VRM_REJECT_NONE: {
        /* not a virt-rdma record: nobody listens there (yet) */
        g_autofree char *why = g_strdup_printf("rejected, status %d", status);

        vrmEngineScheduleRetry(e, slot, why);
        return;
    }
    case VRM_REJECT_BUSY:
        /* an unauthenticated connection may hold the channel a moment */
        vrmEngineScheduleRetry(e, slot, vrmProtoRejectReasonToString(reason));
        return;
    case VRM_REJECT_VERSION:
        vrmReportError(VRM_ERR_VERSION,
                       _("the source engine at %1$s refused the protocol version of this engine (it speaks version %2$u, this engine version %3$d; nothing released speaks version 1): install the same virt-rdma on both hosts"),
                       peer, version, VRM_PROTOCOL_VERSION);
        break;
    case VRM_REJECT_JOB_ENDED:
        vrmReportError(VRM_ERR_PEER,
                       _("the source engine at %1$s refused channel %2$u: its job has ended"),
                       peer, slot->index);
        break;
    default:
        vrmReportError(VRM_ERR_PEER, _("the source engine rejected channel %1$u: %2$s"),
                       slot->index, vrmProtoRejectReasonToString(reason));
        break;
    }
    vrmEngineFailLast(e);
}

static gboolean
vrmEngineCMEvent(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngine *e = opaque;
    struct rdma_cm_event *ev;

    while (rdma_get_cm_event(e->cm, &ev) == 0) {
        vrmEngineSlot *slot = ev->id ? ev->id->context : NULL;
        struct rdma_cm_id *destroy = NULL;
        enum rdma_cm_event_type type = ev->event;
        bool source = e->s.role == VRM_ENGINE_ROLE_SOURCE;
        int rc = 0;

        VRM_DEBUG("rdma_cm event %s status %d channel %d",
                  vrmRdmaCMEventName(type), ev->status, slot ? (int)slot->index : -1);
        if (vrmEngineFailed(e)) {
            /* a failed job still answers, with its record: a destination
             * stops at once instead of retrying for its deadline */
            if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
                vrmEngineReject(e, ev->id, VRM_REJECT_JOB_ENDED, false);
                destroy = ev->id;
            }
            rdma_ack_cm_event(ev);
            if (destroy)
                rdma_destroy_id(destroy);
            continue;
        }

        switch (type) {
        case RDMA_CM_EVENT_CONNECT_REQUEST: {
            vrmEngineAcceptResult accepted = vrmEngineAccept(e, ev);

            if (accepted == VRM_ENGINE_ACCEPT_REFUSED)
                destroy = ev->id;
            slot = ev->id->context;
            rdma_ack_cm_event(ev);
            /* ids go only once their events are acked */
            if (destroy)
                rdma_destroy_id(destroy);
            if (accepted == VRM_ENGINE_ACCEPT_DROPPED) {
                g_autofree char *why = g_strdup(vrmGetLastErrorMessage());

                vrmEngineSlotReset(e, slot, VRM_REJECT_NONE, why);
                vrmResetLastError();
            }
            rc = accepted == VRM_ENGINE_ACCEPT_FAILED ? -1 : 0;
            break;
        }
        case RDMA_CM_EVENT_ADDR_RESOLVED:
            rdma_ack_cm_event(ev);
            if (rdma_resolve_route(slot->id, VRM_RDMA_RESOLVE_TIMEOUT_MS) < 0)
                vrmEngineScheduleRetry(e, slot, g_strerror(errno));
            break;
        case RDMA_CM_EVENT_ROUTE_RESOLVED:
            rdma_ack_cm_event(ev);
            rc = vrmEngineSendConnect(e, slot);
            break;
        case RDMA_CM_EVENT_ESTABLISHED:
            rc = vrmEngineEstablished(e, slot, ev);
            rdma_ack_cm_event(ev);
            break;
        case RDMA_CM_EVENT_REJECTED:
            if (source) {
                /* the peer refused our accept: that connection is over */
                rdma_ack_cm_event(ev);
                if (slot && slot->state < VRM_ENGINE_SLOT_ESTABLISHED)
                    vrmEngineSlotReset(e, slot, VRM_REJECT_NONE,
                                       _("the peer refused the accept"));
                break;
            }
            {
                guint32 version = 0;
                int reason = vrmProtoRejectDecode(ev->param.conn.private_data,
                                                  ev->param.conn.private_data_len,
                                                  &version);
                int status = ev->status;

                rdma_ack_cm_event(ev);
                vrmEngineRejected(e, slot, reason, version, status);
            }
            break;
        case RDMA_CM_EVENT_ADDR_ERROR:
        case RDMA_CM_EVENT_ROUTE_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_CONNECT_ERROR:
            rdma_ack_cm_event(ev);
            if (!source && slot && slot->state < VRM_ENGINE_SLOT_ESTABLISHED) {
                vrmEngineScheduleRetry(e, slot, vrmRdmaCMEventName(type));
            } else if (source && slot && slot->state < VRM_ENGINE_SLOT_AUTHENTICATED) {
                /* a connection that never became ours: listen again */
                vrmEngineSlotReset(e, slot, VRM_REJECT_NONE, vrmRdmaCMEventName(type));
            } else {
                vrmReportError(VRM_ERR_PEER, _("channel %1$u: connection error (%2$s)"),
                               slot ? slot->index : 0, vrmRdmaCMEventName(type));
                rc = -1;
            }
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
            rdma_ack_cm_event(ev);
            if (!slot)
                break;
            if (slot->state < VRM_ENGINE_SLOT_ESTABLISHED) {
                if (source) {
                    vrmEngineSlotReset(e, slot, VRM_REJECT_NONE,
                                       _("the peer disconnected before it authenticated"));
                } else {
                    vrmReportError(VRM_ERR_PEER,
                                   _("the peer closed channel %1$u before the end of the stream"),
                                   slot->index);
                    rc = -1;
                }
                break;
            }
            vrmChannelPeerGone(slot->ch);
            break;
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
            rdma_ack_cm_event(ev);
            vrmReportError(VRM_ERR_NO_DEVICE, _("the RDMA device was removed"));
            rc = -1;
            break;
        default:
            rdma_ack_cm_event(ev);
            break;
        }
        if (rc < 0)
            vrmEngineFailLast(e);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
        vrmReportSystemError(errno, _("cannot read rdma_cm events"));
        vrmEngineFailLast(e);
    }
    return G_SOURCE_CONTINUE;
}

/* ------------------------------------------------------------------ */
/* QEMU's sockets                                                      */

/* A listening socket at @path, mode 0600 by the engine's umask (set by
 * its main at start): no chmod by path after bind */
static int
vrmUnixListen(const char *path)
{
    struct sockaddr_un sun;
    struct stat st;
    int fd;

    if (vrmUnixAddress(path, &sun) < 0)
        return -1;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path);
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
        vrmReportSystemError(errno, _("cannot create a UNIX socket"));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        vrmReportSystemError(errno, _("cannot bind a UNIX socket to %1$s"), path);
        close(fd);
        return -1;
    }
    if (listen(fd, VRM_ENGINE_LISTEN_BACKLOG) < 0) {
        vrmReportSystemError(errno, _("cannot listen on %1$s"), path);
        close(fd);
        unlink(path);
        return -1;
    }
    return fd;
}

/* The uid QEMU runs as: --qemu-uid, or ours */
static uid_t
vrmEngineQemuUid(vrmEngine *e)
{
    return e->s.qemuUid >= 0 ? (uid_t)e->s.qemuUid : geteuid();
}

static int
vrmEnginePeerCred(int fd, struct ucred *cred)
{
    socklen_t len = sizeof(*cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) < 0) {
        vrmReportSystemError(errno, _("cannot read the credentials of QEMU's socket"));
        return -1;
    }
    return 0;
}

/* Source: is this connection QEMU's? root (libvirtd hands the socket to
 * QEMU) or exactly QEMU's uid and, when given, its pid */
static bool
vrmEngineQemuAllowed(vrmEngine *e, const struct ucred *cred)
{
    if (cred->uid == 0)
        return true;
    if (cred->uid != vrmEngineQemuUid(e))
        return false;
    return e->s.qemuPid < 0 || cred->pid == e->s.qemuPid;
}

/* Source: the slot for a connection QEMU just opened on the migration
 * socket (@disk false: main, then multifd, in order) or on the disk
 * socket (NBD, one per disk it copies); NULL reported if there is none */
static vrmEngineSlot *
vrmEngineNextQemuSlot(vrmEngine *e, bool disk)
{
    guint32 max = e->agreed ? e->agreed : e->s.channels;

    if (!disk) {
        if (e->acceptedSocks >= max) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("QEMU opened more connections than the %1$u channels of this job"),
                           max);
            return NULL;
        }
        return &e->slots[e->acceptedSocks++];
    }
    if (e->acceptedDisks >= e->s.diskChannels) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("QEMU opened more disk connections than the %1$u disk channels of this job (one per disk of the domain that is neither read-only nor shareable, at most 16): name at most that many with --migrate-disks"),
                       e->s.diskChannels);
        return NULL;
    }
    if (e->agreed && !(vrmChannelCaps(e->slots[0].ch) & VRM_CAP_DISKS)) {
        vrmReportError(VRM_ERR_VERSION,
                       _("QEMU copies a disk (--copy-storage-all) but the destination's virt-rdma engine cannot carry disks; install the same virt-rdma on both hosts"));
        return NULL;
    }
    return &e->slots[e->s.channels + e->acceptedDisks++];
}

/* Source: QEMU's connection to its channel, once the peer proved itself */
static void
vrmEngineGiveQemuSocket(vrmEngineSlot *slot)
{
    if (slot->tcp)
        vrmChannelGiveTcpSocket(slot->ch, slot->qemuFd, &slot->tcpOpen);
    else
        vrmChannelGiveSocket(slot->ch, slot->qemuFd);
    slot->qemuFd = -1;
}

/* Source: QEMU's connection @conn (ours now) takes the next slot; with
 * @tcpOpen, a steered TCP connection and where it was going. -1: the job
 * fails (reported) */
static int
vrmEngineTakeQemuConnection(vrmEngine *e, int conn, bool disk,
                            const vrmProtoTcpOpen *tcpOpen)
{
    vrmEngineSlot *slot;

    if (!(slot = vrmEngineNextQemuSlot(e, disk))) {
        close(conn);
        return -1;
    }
    slot->qemuFd = conn;
    if (tcpOpen) {
        slot->tcp = true;
        slot->tcpOpen = *tcpOpen;
    }
    if (slot->index > 0) {
        /* lazily: the destination connects the channel now */
        slot->wanted = true;
        slot->connectDeadline = g_get_monotonic_time() +
                                (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;
        if (vrmChannelAnnounce(e->slots[0].ch, slot->index) < 0)
            return -1;
    }
    if (slot->state >= VRM_ENGINE_SLOT_AUTHENTICATED)
        vrmEngineGiveQemuSocket(slot);
    return 0;
}

/* Source: a migration connection of the other kind than the job's first
 * (its socket path, or TCP steered here) is not QEMU's migration: QEMU
 * migrates over one URI. Refused with a warning; the job goes on. */
static bool
vrmEngineQemuKindAllowed(vrmEngine *e, bool tcp)
{
    if (e->acceptedSocks == 0 || e->slots[0].tcp == tcp)
        return true;
    if (vrmEngineMayWarn(e))
        VRM_WARN(_("refused a migration connection over %1$s: QEMU's first one came over %2$s, and it migrates over one of them"),
                 tcp ? "TCP" : _("its socket"), tcp ? _("its socket") : "TCP");
    return false;
}

/* Source: QEMU's connections on one of its sockets */
static void
vrmEngineAcceptQemu(vrmEngine *e, int fd, bool disk)
{
    struct ucred cred;
    int conn;

    while ((conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        if (vrmEnginePeerCred(conn, &cred) < 0) {
            close(conn);
            vrmEngineFailLast(e);
            return;
        }
        if (!vrmEngineQemuAllowed(e, &cred)) {
            /* not QEMU: refused, QEMU's own connections go on */
            if (vrmEngineMayWarn(e))
                VRM_WARN(_("refused a connection to QEMU's socket from pid %1$d (uid %2$u): only root or QEMU (uid %3$u%4$s) may connect"),
                         (int)cred.pid, (unsigned)cred.uid, (unsigned)vrmEngineQemuUid(e),
                         e->s.qemuPid > 0 ? _(", its pid") : "");
            close(conn);
            continue;
        }
        if (!disk && !vrmEngineQemuKindAllowed(e, false)) {
            close(conn);
            continue;
        }
        /* what an operator reads in the helper's log (tests read the stats) */
        VRM_INFO("QEMU connection %u accepted (%s, pid %d, uid %u)",
                 disk ? VRM_DISK_CHANNEL_BASE + e->acceptedDisks : e->acceptedSocks,
                 disk ? "a disk's" : "migration", (int)cred.pid, (unsigned)cred.uid);
        if (vrmEngineTakeQemuConnection(e, conn, disk, NULL) < 0) {
            vrmEngineFailLast(e);
            return;
        }
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        vrmReportSystemError(errno, _("cannot accept a connection from QEMU"));
        vrmEngineFailLast(e);
    }
}

static gboolean
vrmEngineUnixAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngineAcceptQemu(opaque, fd, false);
    return G_SOURCE_CONTINUE;
}

static gboolean
vrmEngineDiskAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngineAcceptQemu(opaque, fd, true);
    return G_SOURCE_CONTINUE;
}

/* A TCP address as CHANNEL_OPEN_TCP names it, and back */
static bool
vrmEngineTcpOpenOf(const struct sockaddr_storage *ss, vrmProtoTcpOpen *open)
{
    memset(open, 0, sizeof(*open));
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

        open->family = VRM_PROTO_FAMILY_IPV4;
        open->port = ntohs(in->sin_port);
        memcpy(open->addr, &in->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

        open->family = VRM_PROTO_FAMILY_IPV6;
        open->port = ntohs(in6->sin6_port);
        memcpy(open->addr, &in6->sin6_addr, 16);
    } else {
        return false;
    }
    return open->port != 0;
}

static socklen_t
vrmEngineTcpSockaddr(const vrmProtoTcpOpen *open, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (open->family == VRM_PROTO_FAMILY_IPV4) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;

        in->sin_family = AF_INET;
        in->sin_port = htons(open->port);
        memcpy(&in->sin_addr, open->addr, 4);
        return sizeof(*in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(open->port);
        memcpy(&in6->sin6_addr, open->addr, 16);
        return sizeof(*in6);
    }
}

/* Source, transparent mode: is @conn (from @peer) a connection of QEMU's
 * that the job's rule steered here? Its original destination (@open) is
 * what the peer connects to. false: refused, and said why. */
static bool
vrmEngineTcpAdmit(vrmEngine *e, int conn, const struct sockaddr_storage *peer,
                  vrmProtoTcpOpen *open)
{
    g_autofree char *from = vrmTcpFormat(peer);
    g_autofree char *to = NULL;
    struct sockaddr_storage orig;
    uid_t uid = 0;
    int rc;

    if ((rc = vrmTcpOriginalDestination(conn, &orig)) <= 0) {
        /* a local process that connected to the engine's port itself */
        if (rc < 0)
            vrmResetLastError();
        if (vrmEngineMayWarn(e))
            VRM_WARN(_("refused a TCP connection from %1$s: it was not steered to this job by the transparent mode's rule"),
                     from);
        return false;
    }
    to = vrmTcpFormat(&orig);
    /* the connecting socket, as it sees itself: bound to @peer, connected
     * to where it was going */
    if ((rc = vrmTcpSocketUid(peer, &orig, &uid)) <= 0 ||
        (uid != 0 && uid != vrmEngineQemuUid(e))) {
        if (rc < 0)
            vrmResetLastError();
        if (vrmEngineMayWarn(e)) {
            if (rc > 0)
                VRM_WARN(_("refused a TCP connection from %1$s to %2$s: its socket belongs to uid %3$u, not to QEMU's user (uid %4$u) or root"),
                         from, to, (unsigned)uid, (unsigned)vrmEngineQemuUid(e));
            else
                VRM_WARN(_("refused a TCP connection from %1$s to %2$s: its socket is not in the kernel's table (it closed at once)"),
                         from, to);
        }
        return false;
    }
    if (!vrmEngineTcpOpenOf(&orig, open))
        return false;
    VRM_INFO("QEMU connection %u accepted (TCP from %s to %s, uid %u)",
             e->acceptedSocks, from, to, (unsigned)uid);
    return true;
}

static gboolean
vrmEngineTcpAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngine *e = opaque;
    struct sockaddr_storage peer;
    socklen_t len = sizeof(peer);
    vrmProtoTcpOpen open;
    int conn;

    while ((conn = accept4(fd, (struct sockaddr *)&peer, &len,
                           SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        len = sizeof(peer);
        if (!vrmEngineTcpAdmit(e, conn, &peer, &open) ||
            !vrmEngineQemuKindAllowed(e, true)) {
            close(conn);
            continue;
        }
        vrmTcpSetNoDelay(conn);
        if (vrmEngineTakeQemuConnection(e, conn, false, &open) < 0) {
            vrmEngineFailLast(e);
            return G_SOURCE_CONTINUE;
        }
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
        errno != ECONNABORTED) {
        vrmReportSystemError(errno, _("cannot accept a connection from QEMU"));
        vrmEngineFailLast(e);
    }
    return G_SOURCE_CONTINUE;
}

/* Destination: is the listener QEMU of this domain? Its uid is QEMU's (or
 * root) and, when the domain is known, its command line names it. */
static int
vrmEngineCheckListener(vrmEngine *e, int fd, const char *sockPath)
{
    g_autofree char *path = NULL;
    g_autofree char *cmdline = NULL;
    struct ucred cred;
    gsize len = 0, off;
    bool named = false;

    if (vrmEnginePeerCred(fd, &cred) < 0)
        return -1;
    if (cred.uid != 0 && cred.uid != vrmEngineQemuUid(e)) {
        vrmReportError(VRM_ERR_AUTH,
                       _("QEMU's socket %1$s is served by pid %2$d of uid %3$u, not by QEMU's user (uid %4$u) or root; refusing to send it the migration"),
                       sockPath, (int)cred.pid, (unsigned)cred.uid,
                       (unsigned)vrmEngineQemuUid(e));
        return -1;
    }
    if (e->s.domainUUID) {
        path = g_strdup_printf("/proc/%d/cmdline", (int)cred.pid);
        if (g_file_get_contents(path, &cmdline, &len, NULL)) {
            for (off = 0; off < len; off += strlen(cmdline + off) + 1) {
                const char *arg = cmdline + off;
                gsize next = off + strlen(arg) + 1;

                if (g_str_equal(arg, "-uuid") && next < len &&
                    g_ascii_strcasecmp(cmdline + next, e->s.domainUUID) == 0)
                    named = true;
            }
        }
        if (!named) {
            vrmReportError(VRM_ERR_AUTH,
                           _("QEMU's socket %1$s is served by pid %2$d, whose command line does not carry -uuid %3$s: not QEMU of this domain; refusing to send it the migration"),
                           sockPath, (int)cred.pid, e->s.domainUUID);
            return -1;
        }
    }
    e->qemuPid = cred.pid;
    return 0;
}

static void vrmEngineOpenNext(vrmEngine *e);
static gboolean vrmEngineOpenRetry(gpointer opaque);

static gboolean
vrmEngineOpenTcpWritable(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngineSlot *slot = opaque;

    slot->openSource = 0;
    vrmEngineOpenNext(slot->engine);
    return G_SOURCE_REMOVE;
}

/* Destination, transparent mode: may the source have channel @slot opened
 * to the TCP address it names? Only a port of QEMU's (libvirt's migration
 * range) on one of this host's addresses */
static int
vrmEngineTcpTargetAllowed(vrmEngine *e, vrmEngineSlot *slot,
                          const struct sockaddr_storage *ss, const char *to)
{
    int rc;

    if (!e->s.tcpPortMax) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the source's QEMU opened channel %1$u over TCP (to %2$s), but this engine was started without the transparent mode (--tcp-port-min, --tcp-port-max)"),
                       slot->index, to);
        return -1;
    }
    if (slot->tcpOpen.port < e->s.tcpPortMin || slot->tcpOpen.port > e->s.tcpPortMax) {
        vrmReportError(VRM_ERR_AUTH,
                       _("the source asks for channel %1$u to be opened to %2$s, outside QEMU's migration ports %3$u-%4$u; refused"),
                       slot->index, to, e->s.tcpPortMin, e->s.tcpPortMax);
        return -1;
    }
    if ((rc = vrmTcpAddressIsLocal(ss)) < 0)
        return -1;
    if (rc == 0) {
        vrmReportError(VRM_ERR_AUTH,
                       _("the source asks for channel %1$u to be opened to %2$s, which is not an address of this host; refused (an engine connects only to its own host's QEMU)"),
                       slot->index, to);
        return -1;
    }
    return 0;
}

/* Destination, transparent mode: connect @slot's channel to QEMU's TCP
 * port that the source's QEMU meant to reach, without blocking (a connect
 * in progress is watched), retrying a refused one until the deadline.
 * 1: connected, 0: in progress or a retry is scheduled, -1: the job fails. */
static int
vrmEngineOpenTcpSlot(vrmEngine *e, vrmEngineSlot *slot)
{
    struct sockaddr_storage ss;
    socklen_t sslen = vrmEngineTcpSockaddr(&slot->tcpOpen, &ss);
    socklen_t len = sizeof(int);
    g_autofree char *to = vrmTcpFormat(&ss);
    uid_t uid = 0;
    int fd, err = 0, rc;

    if (!slot->openDeadline) {
        slot->openDeadline = g_get_monotonic_time() +
                             (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;
        if (vrmEngineTcpTargetAllowed(e, slot, &ss, to) < 0)
            return -1;
    }
    if (slot->openFd < 0) {
        if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
            vrmReportSystemError(errno, _("cannot create a TCP socket"));
            return -1;
        }
        vrmTcpSetNoDelay(fd);
        if (connect(fd, (struct sockaddr *)&ss, sslen) == 0)
            goto connected;
        err = errno;
        if (err == EINPROGRESS) {
            slot->openFd = fd;
            slot->openSource = g_unix_fd_add(fd, G_IO_OUT, vrmEngineOpenTcpWritable, slot);
            return 0;
        }
    } else {
        fd = slot->openFd;
        slot->openFd = -1;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err == 0)
            goto connected;
    }
    close(fd);
    if ((err == ECONNREFUSED || err == EAGAIN || err == EINTR) &&
        g_get_monotonic_time() < slot->openDeadline) {
        slot->openSource = g_timeout_add(VRM_ENGINE_OPEN_RETRY_MS, vrmEngineOpenRetry, slot);
        return 0;
    }
    vrmReportSystemError(err,
                         _("could not connect channel %1$u to QEMU at %2$s within %3$u seconds"),
                         slot->index, to, e->s.deadlineConnect);
    return -1;

 connected:
    /* no credentials over TCP: the kernel's table names the listener's owner */
    if ((rc = vrmTcpSocketUid(&ss, NULL, &uid)) <= 0 ||
        (uid != 0 && uid != vrmEngineQemuUid(e))) {
        if (rc == 0)
            vrmReportError(VRM_ERR_AUTH,
                           _("nobody listens on QEMU's port %1$s any more; refusing to send it the migration"),
                           to);
        else if (rc > 0)
            vrmReportError(VRM_ERR_AUTH,
                           _("QEMU's port %1$s is served by uid %2$u, not by QEMU's user (uid %3$u) or root; refusing to send it the migration"),
                           to, (unsigned)uid, (unsigned)vrmEngineQemuUid(e));
        close(fd);
        return -1;
    }
    VRM_INFO("channel %u connected to QEMU at %s (TCP, uid %u)", slot->index, to,
             (unsigned)uid);
    vrmChannelGiveSocket(slot->ch, fd);
    slot->open = VRM_ENGINE_SLOT_OPEN_CONNECTED;
    return 1;
}

static gboolean
vrmEngineOpenRetry(gpointer opaque)
{
    vrmEngineSlot *slot = opaque;

    slot->openSource = 0;
    vrmEngineOpenNext(slot->engine);
    return G_SOURCE_REMOVE;
}

/* Destination: connect @slot's channel to QEMU's socket at @path, without
 * ever blocking: a listener that does not take connections (its backlog
 * full) is retried until the deadline like one that is not there yet.
 * 1: connected, 0: a retry is scheduled, -1: the job fails. */
static int
vrmEngineOpenSlot(vrmEngine *e, vrmEngineSlot *slot, const char *path)
{
    struct sockaddr_un sun;
    int fd;

    if (!path) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the source's QEMU opened channel %1$u on its UNIX socket, but this engine takes only TCP connections (the transparent mode): start both engines the same way"),
                       slot->index);
        return -1;
    }
    if (!slot->openDeadline)
        slot->openDeadline = g_get_monotonic_time() +
                             (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;
    if (vrmUnixAddress(path, &sun) < 0)
        return -1;
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
        vrmReportSystemError(errno, _("cannot create a UNIX socket"));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        int err = errno;

        close(fd);
        if ((err == ENOENT || err == ECONNREFUSED || err == EAGAIN || err == EINTR) &&
            g_get_monotonic_time() < slot->openDeadline) {
            slot->openSource = g_timeout_add(VRM_ENGINE_OPEN_RETRY_MS,
                                             vrmEngineOpenRetry, slot);
            return 0;
        }
        vrmReportSystemError(err,
                             _("could not connect channel %1$u to QEMU at %2$s within %3$u seconds"),
                             slot->index, path, e->s.deadlineConnect);
        return -1;
    }
    if (vrmEngineCheckListener(e, fd, path) < 0) {
        close(fd);
        return -1;
    }
    VRM_INFO("channel %u connected to QEMU (pid %d) at %s", slot->index, (int)e->qemuPid,
             path);
    vrmChannelGiveSocket(slot->ch, fd);
    slot->open = VRM_ENGINE_SLOT_OPEN_CONNECTED;
    return 1;
}

/* Destination: the channels whose CHANNEL_OPEN arrived. Migration
 * channels strictly in channel order (QEMU takes its main connection
 * first); disk channels each as it comes (every NBD connection stands
 * alone). */
static void
vrmEngineOpenNext(vrmEngine *e)
{
    guint32 i;
    int rc;

    while (e->nextOpen < e->s.channels && !vrmEngineFailed(e)) {
        vrmEngineSlot *slot = &e->slots[e->nextOpen];

        if (slot->open == VRM_ENGINE_SLOT_OPEN_NONE || slot->openSource)
            break;
        rc = slot->tcp ? vrmEngineOpenTcpSlot(e, slot) :
                         vrmEngineOpenSlot(e, slot, e->s.qemuPath);
        if (rc < 0) {
            vrmEngineFailLast(e);
            return;
        }
        if (rc == 0)
            break;
        e->nextOpen++;
    }
    for (i = e->s.channels; i < e->nslots && !vrmEngineFailed(e); i++) {
        vrmEngineSlot *slot = &e->slots[i];

        if (slot->open != VRM_ENGINE_SLOT_OPEN_REQUESTED || slot->openSource)
            continue;
        if (vrmEngineOpenSlot(e, slot, e->s.diskPath) < 0) {
            vrmEngineFailLast(e);
            return;
        }
    }
}

/* A channel's QEMU stream ended: did QEMU go with it? (issue 13 item 11) */
static void
vrmEngineStreamEnded(vrmEngine *e, vrmEngineSlot *slot)
{
    vrmChannelStreamVerdict(slot->ch, !(e->qemuPid > 0 && vrmEngineProcessGone(e->qemuPid)),
                            (int)e->qemuPid);
}

/* ------------------------------------------------------------------ */
/* Stats                                                               */

static double
vrmDataSeconds(gint64 first_us, gint64 last_us)
{
    return first_us ? (last_us - first_us) / 1e6 : 0.0;
}

void
vrmEngineGetStats(vrmEngine *e, vrmEngineStats *st)
{
    gint64 now = e->endUs ? e->endUs : g_get_monotonic_time();
    vrmStats total = { 0 };
    double curTotal = 0;
    gint64 dataFirst = 0, dataLast = 0;
    struct rusage ru;
    guint32 caps = e->caps;
    guint32 i;

    vrmEngineStatsInit(st);
    g_mutex_lock(&e->lock);
    st->state = e->failed ? VRM_ENGINE_STATE_FAILED :
        e->finished ? VRM_ENGINE_STATE_COMPLETED : VRM_ENGINE_STATE_RUNNING;
    if (e->failed) {
        st->error = g_strdup(e->failReason);
        st->errorCode = e->failCode ? e->failCode : VRM_ERR_INTERNAL;
    }
    g_mutex_unlock(&e->lock);

    for (i = 0; i < e->nslots; i++) {
        if (e->slots[i].state >= VRM_ENGINE_SLOT_ESTABLISHED) {
            caps = vrmChannelCaps(e->slots[i].ch);
            break;
        }
    }
    st->role = e->s.role;
    st->protocolVersion = VRM_PROTOCOL_VERSION;
    st->pinAll = caps & VRM_CAP_PIN_ALL;
    st->writeImm = caps & VRM_CAP_WRITE_IMM;
    st->channels = e->agreed ? e->agreed : e->s.channels;
    st->established = e->established;
    st->qemuConnections = e->s.role == VRM_ENGINE_ROLE_SOURCE ?
        e->acceptedSocks : e->nextOpen;
    for (i = e->s.channels; i < e->nslots; i++)
        st->diskConnections += e->s.role == VRM_ENGINE_ROLE_SOURCE ?
            e->slots[i].wanted : e->slots[i].open == VRM_ENGINE_SLOT_OPEN_CONNECTED;
    st->qemuGone = e->qemuGone;
    st->rdmaPort = e->rdmaPort;
    st->chunkSize = e->s.chunkSize;
    st->ringDepth = e->s.ringDepth;
    st->pinnedBound = vrmPinnedBytes(st->channels + e->s.diskChannels, e->s.ringDepth,
                                     e->s.chunkSize);
    st->elapsedS = e->startUs ? (now - e->startUs) / 1e6 : 0;
    /* The engine's own CPU time (all threads): what RDMA costs the host */
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        st->cpuUserS = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
        st->cpuSystemS = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    }
    for (i = 0; i < e->nslots; i++) {
        gint64 first, last;
        vrmStats snap;

        vrmChannelStats(e->slots[i].ch, &snap, &first, &last);
        if (first && (!dataFirst || first < dataFirst))
            dataFirst = first;
        dataLast = MAX(dataLast, last);
        vrmStatsAccumulate(&total, &snap);
        curTotal += e->slots[i].mbpsCurrent;
    }
    /* averages are taken over the data phase: first to last stream byte */
    st->dataS = vrmDataSeconds(dataFirst, dataLast);
    st->mbps = curTotal;
    st->mbpsAverage = vrmStatsMbps(total.v[VRM_STAT_BYTES_SENT] +
                                   total.v[VRM_STAT_BYTES_RECEIVED], st->dataS);
    st->bytesSent = total.v[VRM_STAT_BYTES_SENT];
    st->bytesReceived = total.v[VRM_STAT_BYTES_RECEIVED];
    st->bytesSpliced = total.v[VRM_STAT_BYTES_SPLICED];
    st->chunks = total.v[VRM_STAT_CHUNKS_WRITTEN];
    st->chunksReceived = total.v[VRM_STAT_CHUNKS_RECEIVED];
    st->registrations = total.v[VRM_STAT_REGISTRATIONS];
    st->registrationNs = total.v[VRM_STAT_REGISTRATION_US] * 1000;
    st->pinnedBytes = total.v[VRM_STAT_PINNED_BYTES];
    st->creditStalls = total.v[VRM_STAT_CREDIT_STALLS];
    st->completions = total.v[VRM_STAT_COMPLETIONS];
    st->cqPolls = total.v[VRM_STAT_CQ_POLLS];
    st->cqIdlePolls = total.v[VRM_STAT_CQ_IDLE_POLLS];
    st->doorbells = total.v[VRM_STAT_DOORBELLS];
    st->controlSent = total.v[VRM_STAT_CONTROL_SENT];
    st->controlReceived = total.v[VRM_STAT_CONTROL_RECEIVED];
}

static gboolean
vrmEngineStatsAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngine *e = opaque;
    int conn;

    while ((conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        g_auto(vrmEngineStats) st = { 0 };
        g_autofree char *json = NULL;
        g_autofree char *line = NULL;

        vrmEngineGetStats(e, &st);
        json = vrmEngineStatsFormat(&st);
        line = g_strconcat(json, "\n", NULL);
        /* one record, far below the socket buffer: one non-blocking send;
         * a reader that does not take it loses it, the engine never waits */
        if (send(conn, line, strlen(line), MSG_NOSIGNAL) < 0)
            VRM_DEBUG("stats client: %s", g_strerror(errno));
        close(conn);
    }
    return G_SOURCE_CONTINUE;
}

/* ------------------------------------------------------------------ */
/* Main loop glue                                                      */


/* ------------------------------------------------------------------ */
/* Main loop glue                                                      */

/* Channels that must be connected and authenticated by now */
static int
vrmEngineCheckDeadlines(vrmEngine *e, gint64 now)
{
    guint32 i;

    for (i = 0; i < e->nslots; i++) {
        vrmEngineSlot *slot = &e->slots[i];

        if (slot->openFd >= 0 && now > slot->openDeadline) {
            /* a TCP connect to QEMU still in progress (its SYN unanswered):
             * the watch alone would wait for ever */
            struct sockaddr_storage ss;
            g_autofree char *to = NULL;

            vrmEngineTcpSockaddr(&slot->tcpOpen, &ss);
            to = vrmTcpFormat(&ss);
            vrmReportError(VRM_ERR_TIMEOUT,
                           _("could not connect channel %1$u to QEMU at %2$s within %3$u seconds"),
                           slot->index, to, e->s.deadlineConnect);
            return -1;
        }
        if (!slot->wanted || slot->state >= VRM_ENGINE_SLOT_AUTHENTICATED ||
            now <= slot->connectDeadline)
            continue;
        if (e->s.role == VRM_ENGINE_ROLE_SOURCE && e->rejects)
            vrmReportError(VRM_ERR_TIMEOUT,
                           _("channel %1$u was not connected by an authenticated peer within %2$u seconds; %3$u connection attempts were refused (last: %4$s)"),
                           slot->index, e->s.deadlineConnect, e->rejects,
                           vrmProtoRejectReasonToString(e->lastReject));
        else
            vrmReportError(VRM_ERR_TIMEOUT,
                           _("channel %1$u was not connected within %2$u seconds"),
                           slot->index, e->s.deadlineConnect);
        return -1;
    }
    return 0;
}

/* QEMU has begun: connected on the source, announced on the destination */
static bool
vrmEngineStreamBegun(const vrmEngine *e)
{
    return e->s.role == VRM_ENGINE_ROLE_SOURCE ? e->acceptedSocks > 0 :
        e->slots[0].open != VRM_ENGINE_SLOT_OPEN_NONE;
}

static gboolean
vrmEngineTick(gpointer opaque)
{
    vrmEngine *e = opaque;
    gint64 now = g_get_monotonic_time();
    guint64 sum = 0;
    guint32 i;

    for (i = 0; i < e->nslots; i++) {
        vrmEngineSlot *slot = &e->slots[i];
        gint64 first, last;
        vrmStats snap;
        guint64 delta;

        vrmChannelStats(slot->ch, &snap, &first, &last);
        delta = snap.v[VRM_STAT_BYTES_SENT] + snap.v[VRM_STAT_BYTES_RECEIVED] -
                slot->sample.v[VRM_STAT_BYTES_SENT] - slot->sample.v[VRM_STAT_BYTES_RECEIVED];
        slot->mbpsCurrent = vrmStatsMbps(delta, VRM_ENGINE_TICK_MS / 1000.0);
        slot->sample = snap;
        /* keepalive completions are no progress */
        sum += snap.v[VRM_STAT_BYTES_SENT] + snap.v[VRM_STAT_BYTES_RECEIVED] +
               snap.v[VRM_STAT_REGISTRATIONS];
    }
    sum += e->established + e->acceptedSocks + e->acceptedDisks + e->nextOpen;
    if (sum != e->lastProgressSum) {
        e->lastProgressSum = sum;
        e->lastProgressUs = now;
    }
    if (vrmEngineCheckDeadlines(e, now) < 0) {
        vrmEngineFailLast(e);
    } else if (e->s.role == VRM_ENGINE_ROLE_SOURCE && !vrmEngineStreamBegun(e) &&
               e->s.qemuPid > 0 && vrmEngineProcessGone(e->s.qemuPid)) {
        /* its migration went elsewhere (libvirt's TCP, not steered here),
         * or it ended: nothing will come; the helper asks libvirt which */
        vrmReportError(VRM_ERR_PEER,
                       _("QEMU (pid %1$lld) exited without opening its migration stream to this engine"),
                       (long long)e->s.qemuPid);
        vrmEngineFailLast(e);
    } else if (e->s.waitStream && !vrmEngineStreamBegun(e)) {
        if (now - e->startUs > (gint64)e->s.waitStream * G_USEC_PER_SEC) {
            vrmReportError(VRM_ERR_TIMEOUT,
                           _("QEMU did not begin its migration stream within %1$u seconds"),
                           e->s.waitStream);
            vrmEngineFailLast(e);
        }
    } else if (e->s.idleTimeout &&
               now - e->lastProgressUs > (gint64)e->s.idleTimeout * G_USEC_PER_SEC) {
        vrmReportError(VRM_ERR_TIMEOUT,
                       _("nothing moved on any channel for %1$u seconds (idle timeout)"),
                       e->s.idleTimeout);
        vrmEngineFailLast(e);
    }
    return G_SOURCE_CONTINUE;
}

static gboolean
vrmEngineSignal(gpointer opaque)
{
    vrmEngine *e = opaque;

    vrmReportError(VRM_ERR_CANCELLED, _("interrupted by a signal"));
    vrmEngineFailLast(e);
    return G_SOURCE_CONTINUE;
}

/* Destination: channel 0 carried CHANNEL_CONNECT{k}: connect channel k */
static int
vrmEngineConnectRequested(vrmEngine *e, guint32 k)
{
    vrmEngineSlot *slot;

    if (k >= VRM_DISK_CHANNEL_BASE) {
        /* a disk: QEMU opens those in any order, each once */
        slot = vrmEngineSlotOf(e, k);
        if (!slot || slot->wanted) {
            if (!e->s.diskChannels)
                vrmReportError(VRM_ERR_PROTOCOL,
                               _("the source's QEMU copies a disk, but this job carries no disks: the destination's virt-rdmad found no disk to copy in the domain's definition"));
            else
                vrmReportError(VRM_ERR_PROTOCOL,
                               _("the source asked for disk channel %1$u, which is connected already or beyond the %2$u disk channels of this job"),
                               k - VRM_DISK_CHANNEL_BASE, e->s.diskChannels);
            return -1;
        }
    } else {
        /* QEMU opens its migration connections one after the other: so
         * must they come */
        if (k != e->nextConnect || k >= e->agreed) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("the source asked for channel %1$u where channel %2$u of %3$u was next"),
                           k, e->nextConnect, e->agreed);
            return -1;
        }
        slot = &e->slots[k];
        e->nextConnect++;
    }
    slot->wanted = true;
    slot->connectDeadline = g_get_monotonic_time() +
                            (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;
    VRM_INFO("channel %u: QEMU opened it on the source, connecting", k);
    return vrmEngineConnectChannel(e, slot);
}

/* Every channel QEMU opened has ended, the main one too (it is wanted
 * from the start), and every disk connection */
static bool
vrmEngineAllDone(vrmEngine *e)
{
    guint32 i;

    for (i = 0; i < e->nslots; i++) {
        if (e->slots[i].wanted && e->slots[i].state != VRM_ENGINE_SLOT_DONE)
            return false;
    }
    return true;
}

/* A channel told something: act on its events */
static gboolean
vrmEngineWoken(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngine *e = opaque;
    guint64 junk;
    guint32 i, j;

    if (read(fd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
        VRM_DEBUG("engine eventfd: %s", g_strerror(errno));
    for (i = 0; i < e->nslots; i++) {
        vrmEngineSlot *slot = &e->slots[i];
        vrmChannelEvents ev;

        vrmChannelTakeEvents(slot->ch, &ev);
        /* a fact for the final stats even when the job is failing: a
         * channel reports QEMU gone and fails the job at once, so the
         * failure is often seen first */
        if (ev.qemuGone)
            e->qemuGone = true;
        if (vrmEngineFailed(e))
            continue;
        if (ev.authFailed) {
            vrmEngineSlotReset(e, slot, VRM_REJECT_TOKEN,
                               _("the peer could not prove it holds this job's token"));
            continue;
        }
        if (ev.authenticated && slot->state < VRM_ENGINE_SLOT_AUTHENTICATED) {
            vrmEngineSlotAdvance(slot, VRM_ENGINE_SLOT_AUTHENTICATED);
            e->established++;
            VRM_INFO("channel %u: the peer proved it holds the token (%u established)",
                     slot->index, e->established);
            if (slot->qemuFd >= 0)
                vrmEngineGiveQemuSocket(slot);
        }
        if (ev.openRequested && slot->open == VRM_ENGINE_SLOT_OPEN_NONE)
            slot->open = VRM_ENGINE_SLOT_OPEN_REQUESTED;
        if (ev.tcpOpenSet) {
            slot->tcp = true;
            slot->tcpOpen = ev.tcpOpen;
        }
        for (j = 0; j < ev.nconnect; j++) {
            if (vrmEngineConnectRequested(e, ev.connect[j]) < 0) {
                vrmEngineFailLast(e);
                break;
            }
        }
        if (ev.streamEnded)
            vrmEngineStreamEnded(e, slot);
        if (ev.done)
            vrmEngineSlotAdvance(slot, VRM_ENGINE_SLOT_DONE);
    }
    if (vrmEngineFailed(e)) {
        g_main_loop_quit(e->loop);
        return G_SOURCE_CONTINUE;
    }
    if (e->s.role == VRM_ENGINE_ROLE_DESTINATION)
        vrmEngineOpenNext(e);
    if (vrmEngineAllDone(e)) {
        e->finished = true;
        g_main_loop_quit(e->loop);
    }
    return G_SOURCE_CONTINUE;
}

vrmEngine *
vrmEngineNew(const vrmEngineSettings *settings, const vrmToken *token)
{
    vrmEngine *e = g_new0(vrmEngine, 1);
    guint32 i;

    vrmEngineSettingsCopy(&e->s, settings);
    e->token = *token;
    e->portStr = g_strdup_printf("%u", e->s.port);
    g_mutex_init(&e->lock);
    e->unixFd = -1;
    e->diskFd = -1;
    e->tcpFd = -1;
    e->statsFd = -1;
    e->wakefd = -1;
    e->qemuPid = e->s.qemuPid > 0 ? (pid_t)e->s.qemuPid : 0;
    e->devices = g_ptr_array_new_with_free_func((GDestroyNotify)vrmRdmaDeviceFree);
    e->asyncSources = g_ptr_array_new();
    e->nslots = e->s.channels + e->s.diskChannels;
    e->slots = g_new0(vrmEngineSlot, e->nslots);
    for (i = 0; i < e->nslots; i++) {
        vrmEngineSlot *slot = &e->slots[i];

        slot->engine = e;
        slot->disk = i >= e->s.channels;
        slot->index = slot->disk ? VRM_DISK_CHANNEL_BASE + i - e->s.channels : i;
        slot->qemuFd = -1;
        slot->openFd = -1;
        slot->ch = vrmEngineNewChannel(e, slot);
    }
    e->nextConnect = 1;
    e->caps = (e->s.caps & vrmCapabilityKnownMask()) |
              (e->s.diskChannels ? VRM_CAP_DISKS : 0) |
              (e->s.tcpListenFd >= 0 || e->s.tcpPortMax ? VRM_CAP_TCP : 0);
    return e;
}

/* Source: while it tears down, a failed job still answers connect
 * requests with its reject record */
static void
vrmEngineDrainCM(vrmEngine *e)
{
    if (e->cm && e->s.role == VRM_ENGINE_ROLE_SOURCE && vrmEngineFailed(e))
        vrmEngineCMEvent(e->cm->fd, G_IO_IN, e);
}

/* Source whose job failed: before it goes, a moment more of "job ended"
 * answers, so a destination still connecting stops at once instead of
 * retrying for its deadline (issue 13 item 12) */
static void
vrmEngineLinger(vrmEngine *e)
{
    gint64 until = g_get_monotonic_time() + VRM_ENGINE_LINGER_US;

    if (!e->cm || !e->listenId || e->s.role != VRM_ENGINE_ROLE_SOURCE || !vrmEngineFailed(e))
        return;
    while (g_get_monotonic_time() < until) {
        struct pollfd pfd = { .fd = e->cm->fd, .events = POLLIN };

        if (poll(&pfd, 1, 100) > 0)
            vrmEngineCMEvent(e->cm->fd, G_IO_IN, e);
    }
}

/* One of QEMU's listening sockets: closed, and unlinked if we bound it */
static void
vrmEngineCloseListener(int *fd, bool own, const char *path)
{
    if (*fd < 0)
        return;
    close(*fd);
    *fd = -1;
    if (own)
        unlink(path);
}

static void
vrmEngineTeardown(vrmEngine *e)
{
    guint32 i;

    /* 1. stop the progress threads (each bounded: poll interval + ERROR wait) */
    for (i = 0; i < e->nslots; i++)
        vrmChannelStop(e->slots[i].ch, VRM_ERR_CANCELLED, _("the job ended"));
    for (i = 0; i < e->nslots; i++) {
        vrmChannelEvents ev;

        vrmChannelJoin(e->slots[i].ch);
        vrmEngineDrainCM(e);
        /* the channel's last word, final now that its thread has ended:
         * "QEMU gone" comes just before the failure it causes, which can
         * end the main loop before the loop has read it */
        vrmChannelTakeEvents(e->slots[i].ch, &ev);
        if (ev.qemuGone)
            e->qemuGone = true;
    }
    e->endUs = g_get_monotonic_time();
    /* 2. QEMU's listening socket and the sockets not handed over */
    vrmEngineCloseListener(&e->unixFd, e->unixOwn, e->s.qemuPath);
    vrmEngineCloseListener(&e->diskFd, e->diskOwn, e->s.diskPath);
    vrmEngineCloseListener(&e->tcpFd, false, NULL);
    /* 3. disconnect; queue pairs, registrations and ids go in vrmEngineFree */
    for (i = 0; i < e->nslots; i++) {
        vrmEngineSlot *slot = &e->slots[i];

        if (slot->qemuFd >= 0)
            close(slot->qemuFd);
        slot->qemuFd = -1;
        if (slot->retrySource)
            g_source_remove(slot->retrySource);
        if (slot->openSource)
            g_source_remove(slot->openSource);
        slot->retrySource = slot->openSource = 0;
        if (slot->openFd >= 0)
            close(slot->openFd);
        slot->openFd = -1;
        if (slot->id && slot->state >= VRM_ENGINE_SLOT_ESTABLISHED)
            rdma_disconnect(slot->id);
    }
    vrmEngineDrainCM(e);
    vrmEngineLinger(e);
}

void
vrmEngineFree(vrmEngine *e)
{
    guint32 i;

    if (!e)
        return;
    for (i = 0; e->slots && i < e->nslots; i++) {
        /* the channel (queue pair, memory) before its rdma_cm id */
        vrmChannelFree(e->slots[i].ch);
        if (e->slots[i].id && rdma_destroy_id(e->slots[i].id) < 0)
            VRM_WARN("rdma_destroy_id on channel %u failed: %s", e->slots[i].index,
                     g_strerror(errno));
        if (e->slots[i].qemuFd >= 0)
            close(e->slots[i].qemuFd);
    }
    g_free(e->slots);
    if (e->listenId)
        rdma_destroy_id(e->listenId);
    for (i = 0; e->asyncSources && i < e->asyncSources->len; i++)
        g_source_remove(GPOINTER_TO_UINT(g_ptr_array_index(e->asyncSources, i)));
    if (e->asyncSources)
        g_ptr_array_free(e->asyncSources, TRUE);
    if (e->devices)
        g_ptr_array_free(e->devices, TRUE);
    if (e->cm)
        rdma_destroy_event_channel(e->cm);
    vrmEngineCloseListener(&e->unixFd, e->unixOwn, e->s.qemuPath);
    if (e->s.qemuListenFd >= 0)
        close(e->s.qemuListenFd);
    vrmEngineCloseListener(&e->diskFd, e->diskOwn, e->s.diskPath);
    if (e->s.diskListenFd >= 0)
        close(e->s.diskListenFd);
    vrmEngineCloseListener(&e->tcpFd, false, NULL);
    if (e->s.tcpListenFd >= 0)
        close(e->s.tcpListenFd);
    if (e->statsFd >= 0) {
        close(e->statsFd);
        unlink(e->s.statsSocket);
    }
    if (e->wakefd >= 0)
        close(e->wakefd);
    if (e->loop)
        g_main_loop_unref(e->loop);
    g_free(e->failReason);
    g_free(e->portStr);
    g_mutex_clear(&e->lock);
    vrmTokenClear(&e->token);
    vrmEngineSettingsClear(&e->s);
    g_free(e);
}

static int
vrmEngineListenRdma(vrmEngine *e)
{
    struct rdma_addrinfo *ai = NULL;
    g_autofree char *addr = vrmEngineFormatAddress(e->s.address, e->s.port);
    int rc;

    if (vrmEngineResolve(e, true, &ai) < 0)
        return -1;
    if (rdma_create_id(e->cm, &e->listenId, NULL, RDMA_PS_TCP) < 0) {
        vrmReportSystemError(errno, _("cannot create an rdma_cm id"));
        rdma_freeaddrinfo(ai);
        return -1;
    }
    rc = rdma_bind_addr(e->listenId, ai->ai_src_addr);
    rdma_freeaddrinfo(ai);
    if (rc < 0) {
        vrmReportSystemError(errno, _("cannot bind to the RDMA address %1$s"), addr);
        return -1;
    }
    if (e->listenId->verbs && !vrmEngineDevice(e, e->listenId->verbs))
        return -1;
    if (rdma_listen(e->listenId, VRM_ENGINE_LISTEN_BACKLOG) < 0) {
        vrmReportSystemError(errno, _("cannot listen on the RDMA address %1$s"), addr);
        return -1;
    }
    /* port 0: the kernel chose one; the stats record tells the launcher */
    e->rdmaPort = ntohs(rdma_get_src_port(e->listenId));
    VRM_INFO("listening on %s port %u for up to %u channels", e->s.address, e->rdmaPort,
             e->s.channels);
    return 0;
}

/* Source: QEMU's listening socket, inherited (*@inherited, from the
 * launcher, which owns its path) or bound at @path here (*@own) */
static int
vrmEngineTakeListener(int *inherited, const char *path, int *fd, bool *own)
{
    if (*inherited >= 0) {
        *fd = *inherited;
        *inherited = -1;
        if (vrmSetNonBlock(*fd) < 0 || fcntl(*fd, F_SETFD, FD_CLOEXEC) < 0)
            return -1;
        return 0;
    }
    if ((*fd = vrmUnixListen(path)) < 0)
        return -1;
    *own = true;
    return 0;
}

static int vrmEngineRunInner(vrmEngine *e);

int
vrmEngineRun(vrmEngine *e)
{
    int ret = vrmEngineRunInner(e);

    if (ret < 0 && !vrmEngineFailed(e))
        vrmEngineFailLast(e);
    if (!e->endUs)
        e->endUs = g_get_monotonic_time();
    return ret;
}

static int
vrmEngineRunInner(vrmEngine *e)
{
    guint sources[10];
    guint nsources = 0;
    guint32 i;
    int flags;

    e->startUs = e->lastProgressUs = g_get_monotonic_time();
    e->loop = g_main_loop_new(NULL, FALSE);
    /* channel 0 is wanted from the start: the destination connects it at
     * once (the helper's "connected" point) */
    e->slots[0].wanted = true;
    e->slots[0].connectDeadline = e->startUs + (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;

    if (vrmEngineSettingsValidate(&e->s) < 0 || vrmEngineCheckPinned(&e->s) < 0)
        return -1;
    if ((e->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        vrmReportSystemError(errno, _("cannot create an eventfd"));
        return -1;
    }
    if (!(e->cm = rdma_create_event_channel())) {
        vrmReportSystemError(errno, _("cannot open the rdma_cm event channel (is rdma_ucm loaded?)"));
        return -1;
    }
    flags = fcntl(e->cm->fd, F_GETFL);
    if (flags < 0 || fcntl(e->cm->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        vrmReportSystemError(errno, _("cannot make the rdma_cm event channel non-blocking"));
        return -1;
    }
    if (e->s.statsSocket &&
        (e->statsFd = vrmUnixListen(e->s.statsSocket)) < 0)
        return -1;

    if (e->s.role == VRM_ENGINE_ROLE_SOURCE) {
        if (vrmEngineListenRdma(e) < 0)
            return -1;
        if (e->s.tcpListenFd >= 0) {
            /* the transparent mode: QEMU's TCP connections, steered here */
            if (vrmEngineTakeListener(&e->s.tcpListenFd, NULL, &e->tcpFd, NULL) < 0)
                return -1;
            sources[nsources++] = g_unix_fd_add(e->tcpFd, G_IO_IN, vrmEngineTcpAccept, e);
        }
        if (e->s.qemuListenFd >= 0 || e->s.qemuPath) {
            /* the per-domain path (with a TCP listener too, the helper's
             * jobs: the hook cannot tell which URI libvirt was given) */
            if (vrmEngineTakeListener(&e->s.qemuListenFd, e->s.qemuPath,
                                      &e->unixFd, &e->unixOwn) < 0)
                return -1;
            sources[nsources++] = g_unix_fd_add(e->unixFd, G_IO_IN, vrmEngineUnixAccept, e);
        }
        if (e->s.diskChannels) {
            if (vrmEngineTakeListener(&e->s.diskListenFd, e->s.diskPath,
                                      &e->diskFd, &e->diskOwn) < 0)
                return -1;
            sources[nsources++] = g_unix_fd_add(e->diskFd, G_IO_IN, vrmEngineDiskAccept, e);
        }
        if (e->s.fault == VRM_ENGINE_FAULT_FAIL) {
            vrmReportError(VRM_ERR_INTERNAL, _("test hook: failing right after listening"));
            vrmEngineFailLast(e);
        }
    } else if (vrmEngineConnectChannel(e, &e->slots[0]) < 0) {
        return -1;
    }
    sources[nsources++] = g_unix_fd_add(e->cm->fd, G_IO_IN, vrmEngineCMEvent, e);
    sources[nsources++] = g_unix_fd_add(e->wakefd, G_IO_IN, vrmEngineWoken, e);
    if (e->statsFd >= 0)
        sources[nsources++] = g_unix_fd_add(e->statsFd, G_IO_IN, vrmEngineStatsAccept, e);
    sources[nsources++] = g_timeout_add(VRM_ENGINE_TICK_MS, vrmEngineTick, e);
    sources[nsources++] = g_unix_signal_add(SIGINT, vrmEngineSignal, e);
    sources[nsources++] = g_unix_signal_add(SIGTERM, vrmEngineSignal, e);
    g_assert(nsources <= G_N_ELEMENTS(sources));

    if (!vrmEngineFailed(e))
        g_main_loop_run(e->loop);

    vrmEngineTeardown(e);
    for (i = 0; i < nsources; i++)
        g_source_remove(sources[i]);

    if (!e->finished || vrmEngineFailed(e)) {
        g_mutex_lock(&e->lock);
        vrmSetLastError(e->failCode ? e->failCode : VRM_ERR_INTERNAL,
                        e->failReason ? e->failReason : _("the job ended before its channels did"));
        g_mutex_unlock(&e->lock);
        return -1;
    }
    return 0;
}
