/*
 * vrmengine.c: one job on one host: rdma_cm, QEMU's sockets, deadlines,
 * stats, and the order of teardown
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
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* accept4 */
#endif

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
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
#include "vrmerror.h"
#include "vrmsocket.h"
#include "vrmi18n.h"
#include "vrmlog.h"

#define VRM_ENGINE_TICK_MS 1000
#define VRM_ENGINE_CONNECT_RETRY_MS 200     /* destination: rdma_cm connect */
#define VRM_ENGINE_OPEN_RETRY_MS 50         /* destination: QEMU's socket */
#define VRM_ENGINE_LISTEN_BACKLOG 64
#define VRM_CAP_IPC_LOCK_BIT 14

typedef struct _vrmEngineSlot vrmEngineSlot;

/* What the main thread knows of one channel */
struct _vrmEngineSlot {
    vrmEngine *engine;
    guint32 index;
    vrmChannel *ch;
    struct rdma_cm_id *id;      /* the channel's rdma_cm id */
    bool connected;             /* ESTABLISHED seen */
    bool started;               /* its progress thread runs (or ran) */
    guint retrySource;          /* destination: pending connect retry */
    gint64 openDeadline;        /* destination: QEMU socket connect deadline */
    guint openSource;           /* destination: pending socket retry */
    bool openRequested;         /* destination: CHANNEL_OPEN arrived */
    bool done;                  /* ended cleanly */
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
    vrmEngineSlot *slots;       /* s.channels entries */
    guint32 established;        /* channels with a QP up */
    guint32 acceptedSocks;      /* source: QEMU connections accepted */
    guint32 nextOpen;           /* destination: next socket to connect */
    guint32 rejects;            /* source: connection requests refused */
    int lastReject;             /* source: reason of the last one */
    int unixFd;                 /* source: QEMU's listening socket */
    bool unixOwn;               /* we bound it (--qemu-path): unlink at the end */
    char *portStr;              /* rdma_cm port as text, for rdma_getaddrinfo */
    guint32 rdmaPort;           /* source: the port listened on */
    int statsFd;                /* stats socket */
    int wakefd;                 /* eventfd: progress threads -> main */
    gint64 startUs;
    gint64 connectDeadline;
    gint64 lastProgressUs;
    guint64 lastProgressSum;
    gint64 endUs;
    guint32 caps;               /* capabilities offered */
    bool unusedAnnounced;
    bool finished;              /* every channel ended cleanly */

    GMutex lock;                /* leaf lock: the failure */
    bool failed;
    int failCode;
    char *failReason;
};

/* ------------------------------------------------------------------ */
/* Settings                                                            */

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

int
vrmEngineCheckPinned(const vrmEngineSettings *s)
{
    guint64 need = vrmEngineSettingsPinnedBytes(s);
    long pages = sysconf(_SC_PHYS_PAGES);
    long pagesize = sysconf(_SC_PAGESIZE);
    guint64 ram = pages > 0 && pagesize > 0 ? (guint64)pages * pagesize : 0;
    struct rlimit rl;

    if (s->maxPinned && need > s->maxPinned) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("This job would pin %1$" G_GUINT64_FORMAT " bytes, more than --max-pinned %2$llu; lower --channels, --ring-depth or --chunk-size."),
                       need, s->maxPinned);
        return -1;
    }
    if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
        vrmReportSystemError(errno, _("Cannot read RLIMIT_MEMLOCK"));
        return -1;
    }
    if (ram > 0 && need > ram) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("This job would pin %1$" G_GUINT64_FORMAT " bytes, more than the %2$" G_GUINT64_FORMAT " bytes of memory of this host; lower --channels, --ring-depth or --chunk-size."),
                       need, ram);
        return -1;
    }
    if (rl.rlim_cur != RLIM_INFINITY && need > rl.rlim_cur) {
        if (vrmHaveCapIpcLock()) {
            VRM_INFO("pinning %" G_GUINT64_FORMAT " bytes above RLIMIT_MEMLOCK "
                     "(%llu) with CAP_IPC_LOCK", need, (unsigned long long)rl.rlim_cur);
        } else {
            vrmReportError(VRM_ERR_RESOURCE,
                           _("This job needs %1$" G_GUINT64_FORMAT " bytes of locked memory but RLIMIT_MEMLOCK allows %2$llu; raise it (ulimit -l) or lower --channels, --ring-depth or --chunk-size."),
                           need, (unsigned long long)rl.rlim_cur);
            return -1;
        }
    }
    VRM_INFO("pinned memory bound: %" G_GUINT64_FORMAT " bytes", need);
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
    for (i = 0; i < e->s.channels; i++)
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
                           _("Channel %1$u: asynchronous error on its queue pair: %2$s."),
                           slot->index, ibv_event_type_str(ev.event_type));
            vrmEngineFailLast(e);
            break;
        case IBV_EVENT_CQ_ERR:
            slot = ev.element.cq->cq_context;
            vrmReportError(VRM_ERR_RDMA,
                           _("Channel %1$u: its completion queue overran."), slot->index);
            vrmEngineFailLast(e);
            break;
        case IBV_EVENT_DEVICE_FATAL:
        case IBV_EVENT_PORT_ERR:
            vrmReportError(VRM_ERR_NO_DEVICE, _("RDMA device %1$s failed: %2$s."),
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
                       _("The RDMA address is not bound to an RDMA device."));
        return NULL;
    }
    for (i = 0; i < e->devices->len; i++) {
        dev = g_ptr_array_index(e->devices, i);
        if (dev->ctx == ctx)
            return dev;
    }
    if (e->s.device && !g_str_equal(e->s.device, ibv_get_device_name(ctx->device))) {
        vrmReportError(VRM_ERR_NO_DEVICE,
                       _("The RDMA address is on device %1$s, not on the requested device %2$s."),
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
    if (dev->iwarp && (e->caps & VRM_CAP_WRITE_IMM)) {
        VRM_INFO("device %s is iWARP: data is announced by descriptor SENDs", dev->name);
        e->caps &= ~VRM_CAP_WRITE_IMM;
    }
    return dev;
}

/* The channel's resources on the device of @id, and its queue pair */
static int
vrmEngineSlotSetup(vrmEngine *e, vrmEngineSlot *slot, struct rdma_cm_id *id,
                   guint32 caps)
{
    vrmChannelConfig cfg = {
        .role = e->s.role,
        .index = slot->index,
        .chunkSize = e->s.chunkSize,
        .ringDepth = e->s.ringDepth,
        .pinAll = e->s.pinAll,
    };
    vrmRdmaDevice *dev;
    vrmRdmaQP *qp;
    guint32 sq, rq;
    int cqe;

    if (!(dev = vrmEngineDevice(e, id->verbs)) ||
        vrmChannelQueueSizes(&cfg, dev, &sq, &rq, &cqe) < 0 ||
        vrmChannelSetup(slot->ch, dev) < 0 ||
        !(qp = vrmRdmaQPNew(dev, id, sq, rq, cqe, slot)))
        return -1;
    return vrmChannelAttachQP(slot->ch, qp, caps);
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
    if (g_get_monotonic_time() > e->connectDeadline) {
        g_autofree char *peer = vrmEngineFormatAddress(e->s.address, e->s.port);

        vrmReportError(VRM_ERR_TIMEOUT,
                       _("Could not connect channel %1$u to the source engine at %2$s within %3$u seconds (last attempt: %4$s)."),
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

        vrmReportError(VRM_ERR_INVALID_ARG, _("Cannot resolve the RDMA address %1$s: %2$s"),
                       addr, rc == -1 ? g_strerror(errno) : gai_strerror(rc));
        return -1;
    }
    return 0;
}

static int
vrmEngineConnectChannel(vrmEngine *e, vrmEngineSlot *slot)
{
    struct rdma_addrinfo *ai = NULL;
    int rc;

    if (vrmEngineResolve(e, false, &ai) < 0)
        return -1;
    if (rdma_create_id(e->cm, &slot->id, slot, RDMA_PS_TCP) < 0) {
        vrmReportSystemError(errno, _("Cannot create an rdma_cm id"));
        rdma_freeaddrinfo(ai);
        return -1;
    }
    rc = rdma_resolve_addr(slot->id, NULL, ai->ai_dst_addr, VRM_RDMA_RESOLVE_TIMEOUT_MS);
    rdma_freeaddrinfo(ai);
    if (rc < 0)
        vrmEngineScheduleRetry(e, slot, g_strerror(errno));
    return 0;
}

static int
vrmEngineSendConnect(vrmEngine *e, vrmEngineSlot *slot)
{
    vrmProtoConnData cd = {
        .version = e->s.fault == VRM_ENGINE_FAULT_VERSION ? VRM_PROTOCOL_VERSION + 1 : VRM_PROTOCOL_VERSION,
        .flags = e->caps,
        .channel = slot->index,
        .channels = e->s.channels,
    };
    guint8 pd[VRM_PROTO_CONN_DATA_LEN];
    struct rdma_conn_param param = {
        .private_data = pd,
        .private_data_len = sizeof(pd),
        .responder_resources = VRM_RDMA_RESPONDER_RESOURCES,
        .initiator_depth = VRM_RDMA_RESPONDER_RESOURCES,
        .retry_count = VRM_RDMA_RETRY_COUNT,
        .rnr_retry_count = VRM_RDMA_RNR_RETRY_COUNT,
    };

    G_STATIC_ASSERT(VRM_PROTO_CONN_DATA_LEN <= VRM_PROTO_PRIVATE_DATA_MAX);
    if (e->s.fault == VRM_ENGINE_FAULT_VERSION)
        VRM_WARN("test hook: connecting with protocol version %u", cd.version);
    cd.token = e->token;
    vrmProtoConnDataEncode(&cd, pd);
    vrmTokenClear(&cd.token);

    /* the agreed capabilities come with the accept */
    if (vrmEngineSlotSetup(e, slot, slot->id, e->caps) < 0)
        return -1;
    vrmEngineSetAckTimeout(slot->id);
    if (rdma_connect(slot->id, &param) < 0)
        vrmEngineScheduleRetry(e, slot, g_strerror(errno));
    explicit_bzero(pd, sizeof(pd));
    return 0;
}

static int
vrmEngineAccept(vrmEngine *e, struct rdma_cm_event *ev)
{
    const void *data = ev->param.conn.private_data;
    size_t len = ev->param.conn.private_data_len;
    guint8 rej[VRM_PROTO_REJECT_LEN];
    guint8 reply[VRM_PROTO_CONN_DATA_LEN];
    struct rdma_conn_param param = {
        .private_data = reply,
        .private_data_len = sizeof(reply),
        .responder_resources = VRM_RDMA_RESPONDER_RESOURCES,
        .initiator_depth = VRM_RDMA_RESPONDER_RESOURCES,
        .rnr_retry_count = VRM_RDMA_RNR_RETRY_COUNT,
    };
    vrmProtoConnData cd;
    vrmEngineSlot *slot = NULL;
    guint32 caps;
    int reason;

    /* Everything about the peer is checked before any resource exists. */
    if (vrmProtoConnDataDecode(data, len, &cd) < 0)
        reason = VRM_REJECT_MALFORMED;
    else
        reason = vrmProtoConnDataCheck(&cd, &e->token, e->s.channels);
    if (reason == VRM_REJECT_NONE) {
        slot = &e->slots[cd.channel];
        if (slot->id) {
            vrmReportError(VRM_ERR_PROTOCOL, _("Channel %1$u is already connected."),
                           cd.channel);
            reason = VRM_REJECT_BUSY;
        }
    }
    if (reason != VRM_REJECT_NONE) {
        e->rejects++;
        e->lastReject = reason;
        VRM_WARN(_("Refused a connection request: %1$s"), vrmGetLastErrorMessage());
        vrmProtoRejectEncode(reason, rej);
        if (rdma_reject(ev->id, rej, sizeof(rej)) < 0)
            VRM_WARN("rdma_reject failed: %s", g_strerror(errno));
        return 1;   /* destroy ev->id after the ack */
    }

    slot->id = ev->id;
    slot->id->context = slot;
    caps = vrmProtoNegotiate(e->caps, cd.flags);
    if (vrmEngineSlotSetup(e, slot, slot->id, caps) < 0) {
        vrmProtoRejectEncode(VRM_REJECT_RESOURCES, rej);
        rdma_reject(ev->id, rej, sizeof(rej));
        return -1;
    }
    cd.flags = caps;
    vrmTokenClear(&cd.token);
    vrmProtoConnDataEncode(&cd, reply);
    vrmEngineSetAckTimeout(slot->id);
    if (rdma_accept(slot->id, &param) < 0) {
        vrmReportSystemError(errno, _("Cannot accept channel %1$u"), slot->index);
        return -1;
    }
    VRM_INFO("channel %u accepted, capabilities 0x%x", slot->index, caps);
    return 0;
}

static int
vrmEngineEstablished(vrmEngine *e, vrmEngineSlot *slot, struct rdma_cm_event *ev)
{
    if (e->s.role == VRM_ENGINE_ROLE_DESTINATION) {
        vrmProtoConnData cd;

        if (vrmProtoConnDataDecode(ev->param.conn.private_data,
                                   ev->param.conn.private_data_len, &cd) < 0)
            return -1;
        if (cd.version != VRM_PROTOCOL_VERSION || cd.channel != slot->index ||
            (cd.flags & ~e->caps)) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("The source engine accepted channel %1$u with version %2$u, channel %3$u and capabilities 0x%4$x, which do not match the request."),
                           slot->index, cd.version, cd.channel, cd.flags);
            return -1;
        }
        /* the channel was set up with what we offered: now the agreed set */
        vrmChannelSetCaps(slot->ch, vrmProtoNegotiate(e->caps, cd.flags));
    }
    slot->connected = true;
    e->established++;
    VRM_INFO("channel %u established (%u of %u)", slot->index, e->established,
             e->s.channels);
    if (vrmChannelStart(slot->ch) < 0)
        return -1;
    slot->started = true;
    return 0;
}

static void
vrmEngineDisconnected(vrmEngine *e, vrmEngineSlot *slot)
{
    if (!slot->started && !slot->done) {
        vrmReportError(VRM_ERR_PEER,
                       _("The peer closed channel %1$u before the end of the stream."),
                       slot->index);
        vrmEngineFailLast(e);
    }
    vrmChannelPeerGone(slot->ch);
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
        int rc = 0;

        VRM_DEBUG("rdma_cm event %s status %d channel %d",
                  vrmRdmaCMEventName(type), ev->status, slot ? (int)slot->index : -1);
        if (vrmEngineFailed(e)) {
            if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
                rdma_reject(ev->id, NULL, 0);
                destroy = ev->id;
            }
            rdma_ack_cm_event(ev);
            if (destroy)
                rdma_destroy_id(destroy);
            continue;
        }

        switch (type) {
        case RDMA_CM_EVENT_CONNECT_REQUEST:
            rc = vrmEngineAccept(e, ev);
            if (rc == 1) {
                destroy = ev->id;
                rc = 0;
            }
            rdma_ack_cm_event(ev);
            if (destroy)
                rdma_destroy_id(destroy);
            break;
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
        case RDMA_CM_EVENT_REJECTED: {
            int reason = vrmProtoRejectDecode(ev->param.conn.private_data,
                                              ev->param.conn.private_data_len);
            int status = ev->status;

            rdma_ack_cm_event(ev);
            if (reason != VRM_REJECT_NONE) {
                vrmReportError(reason == VRM_REJECT_TOKEN ? VRM_ERR_AUTH :
                               reason == VRM_REJECT_VERSION ? VRM_ERR_VERSION :
                               VRM_ERR_PEER,
                               _("The source engine rejected channel %1$u: %2$s."),
                               slot->index, vrmProtoRejectReasonToString(reason));
                rc = -1;
            } else {
                g_autofree char *why = g_strdup_printf("rejected, status %d", status);
                vrmEngineScheduleRetry(e, slot, why);
            }
            break;
        }
        case RDMA_CM_EVENT_ADDR_ERROR:
        case RDMA_CM_EVENT_ROUTE_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_CONNECT_ERROR:
            rdma_ack_cm_event(ev);
            if (e->s.role == VRM_ENGINE_ROLE_DESTINATION && slot && !slot->connected) {
                vrmEngineScheduleRetry(e, slot, vrmRdmaCMEventName(type));
            } else {
                vrmReportError(VRM_ERR_PEER, _("Channel %1$u: connection error (%2$s)."),
                               slot ? slot->index : 0, vrmRdmaCMEventName(type));
                rc = -1;
            }
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
            rdma_ack_cm_event(ev);
            if (slot)
                vrmEngineDisconnected(e, slot);
            break;
        case RDMA_CM_EVENT_DEVICE_REMOVAL:
            rdma_ack_cm_event(ev);
            vrmReportError(VRM_ERR_NO_DEVICE, _("The RDMA device was removed."));
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
        vrmReportSystemError(errno, _("Cannot read rdma_cm events"));
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
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    struct stat st;
    int fd;

    g_strlcpy(sun.sun_path, path, sizeof(sun.sun_path));
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path);
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
        vrmReportSystemError(errno, _("Cannot create a UNIX socket"));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        vrmReportSystemError(errno, _("Cannot bind a UNIX socket to %1$s"), path);
        close(fd);
        return -1;
    }
    if (listen(fd, VRM_ENGINE_LISTEN_BACKLOG) < 0) {
        vrmReportSystemError(errno, _("Cannot listen on %1$s"), path);
        close(fd);
        unlink(path);
        return -1;
    }
    return fd;
}

static gboolean
vrmEngineUnixAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngine *e = opaque;
    vrmEngineSlot *slot;
    int conn;

    while ((conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        if (e->acceptedSocks >= e->s.channels || e->unusedAnnounced) {
            close(conn);
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("QEMU opened more connections than the %1$u channels of this job."),
                           e->s.channels);
            vrmEngineFailLast(e);
            return G_SOURCE_CONTINUE;
        }
        slot = &e->slots[e->acceptedSocks++];
        VRM_INFO("QEMU connection %u accepted", slot->index);
        vrmChannelGiveSocket(slot->ch, conn);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        vrmReportSystemError(errno, _("Cannot accept a connection from QEMU"));
        vrmEngineFailLast(e);
    }
    return G_SOURCE_CONTINUE;
}

static void vrmEngineOpenNext(vrmEngine *e);

static gboolean
vrmEngineOpenRetry(gpointer opaque)
{
    vrmEngineSlot *slot = opaque;

    slot->openSource = 0;
    vrmEngineOpenNext(slot->engine);
    return G_SOURCE_REMOVE;
}

/* Destination: connect QEMU's sockets strictly in channel order */
static void
vrmEngineOpenNext(vrmEngine *e)
{
    while (e->nextOpen < e->s.channels && !vrmEngineFailed(e)) {
        vrmEngineSlot *slot = &e->slots[e->nextOpen];
        struct sockaddr_un sun = { .sun_family = AF_UNIX };
        int fd;

        if (!slot->openRequested || slot->openSource)
            return;
        if (!slot->openDeadline)
            slot->openDeadline = g_get_monotonic_time() +
                                 (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;

        g_strlcpy(sun.sun_path, e->s.qemuPath, sizeof(sun.sun_path));
        if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
            vrmReportSystemError(errno, _("Cannot create a UNIX socket"));
            vrmEngineFailLast(e);
            return;
        }
        if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
            int err = errno;

            close(fd);
            if ((err == ENOENT || err == ECONNREFUSED || err == EAGAIN) &&
                g_get_monotonic_time() < slot->openDeadline) {
                slot->openSource = g_timeout_add(VRM_ENGINE_OPEN_RETRY_MS,
                                                 vrmEngineOpenRetry, slot);
                return;
            }
            vrmReportSystemError(err,
                                 _("Could not connect channel %1$u to QEMU at %2$s within %3$u seconds"),
                                 slot->index, e->s.qemuPath, e->s.deadlineConnect);
            vrmEngineFailLast(e);
            return;
        }
        if (vrmSetNonBlock(fd) < 0) {
            close(fd);
            vrmEngineFailLast(e);
            return;
        }
        VRM_INFO("channel %u connected to QEMU", slot->index);
        vrmChannelGiveSocket(slot->ch, fd);
        e->nextOpen++;
    }
}

/* ------------------------------------------------------------------ */
/* Stats                                                               */

/* seconds from the first to the last stream byte; 0 before any */
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

    for (i = 0; i < e->s.channels; i++) {
        if (e->slots[i].connected) {
            caps = vrmChannelCaps(e->slots[i].ch);
            break;
        }
    }
    st->role = e->s.role;
    st->protocolVersion = VRM_PROTOCOL_VERSION;
    st->pinAll = caps & VRM_CAP_PIN_ALL;
    st->writeImm = caps & VRM_CAP_WRITE_IMM;
    st->channels = e->s.channels;
    st->established = e->established;
    st->qemuConnections = e->s.role == VRM_ENGINE_ROLE_SOURCE ?
        e->acceptedSocks : e->nextOpen;
    st->rdmaPort = e->rdmaPort;
    st->chunkSize = e->s.chunkSize;
    st->ringDepth = e->s.ringDepth;
    st->pinnedBound = vrmEngineSettingsPinnedBytes(&e->s);
    st->elapsedS = e->startUs ? (now - e->startUs) / 1e6 : 0;
    /* The engine's own CPU time (all threads): what RDMA costs the host */
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        st->cpuUserS = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
        st->cpuSystemS = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    }
    for (i = 0; i < e->s.channels; i++) {
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

static gboolean
vrmEngineTick(gpointer opaque)
{
    vrmEngine *e = opaque;
    gint64 now = g_get_monotonic_time();
    guint64 sum = 0;
    guint32 i;

    for (i = 0; i < e->s.channels; i++) {
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
    sum += e->established + e->acceptedSocks + e->nextOpen;
    if (sum != e->lastProgressSum) {
        e->lastProgressSum = sum;
        e->lastProgressUs = now;
    }
    if (e->established < e->s.channels && now > e->connectDeadline) {
        if (e->s.role == VRM_ENGINE_ROLE_SOURCE && e->rejects)
            vrmReportError(VRM_ERR_TIMEOUT,
                           _("Only %1$u of %2$u channels were connected within %3$u seconds; %4$u connection requests were refused (last: %5$s)."),
                           e->established, e->s.channels, e->s.deadlineConnect,
                           e->rejects, vrmProtoRejectReasonToString(e->lastReject));
        else
            vrmReportError(VRM_ERR_TIMEOUT,
                           _("Only %1$u of %2$u channels were connected within %3$u seconds."),
                           e->established, e->s.channels, e->s.deadlineConnect);
        vrmEngineFailLast(e);
    } else if (e->s.idleTimeout &&
               now - e->lastProgressUs > (gint64)e->s.idleTimeout * G_USEC_PER_SEC) {
        vrmReportError(VRM_ERR_TIMEOUT,
                       _("Nothing moved on any channel for %1$u seconds (idle timeout)."),
                       e->s.idleTimeout);
        vrmEngineFailLast(e);
    }
    return G_SOURCE_CONTINUE;
}

static gboolean
vrmEngineSignal(gpointer opaque)
{
    vrmEngine *e = opaque;

    vrmReportError(VRM_ERR_CANCELLED, _("Interrupted by a signal."));
    vrmEngineFailLast(e);
    return G_SOURCE_CONTINUE;
}

/* A channel told something: act on its events */
static gboolean
vrmEngineWoken(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngine *e = opaque;
    guint32 i, done = 0;
    guint64 junk;

    if (read(fd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
        VRM_DEBUG("engine eventfd: %s", g_strerror(errno));
    if (vrmEngineFailed(e)) {
        g_main_loop_quit(e->loop);
        return G_SOURCE_CONTINUE;
    }
    for (i = 0; i < e->s.channels; i++) {
        vrmEngineSlot *slot = &e->slots[i];
        vrmChannelEvents ev;

        vrmChannelTakeEvents(slot->ch, &ev);
        if (ev.openRequested)
            slot->openRequested = true;
        slot->done = ev.done;
        done += slot->done;
    }
    if (e->s.role == VRM_ENGINE_ROLE_DESTINATION)
        vrmEngineOpenNext(e);
    /* v1: once the main channel has ended, the channels QEMU did not open
     * end unused */
    if (e->s.role == VRM_ENGINE_ROLE_SOURCE && e->slots[0].done && !e->unusedAnnounced) {
        e->unusedAnnounced = true;
        for (i = e->acceptedSocks; i < e->s.channels; i++)
            vrmChannelWantUnused(e->slots[i].ch);
    }
    if (done == e->s.channels) {
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
    e->statsFd = -1;
    e->wakefd = -1;
    e->devices = g_ptr_array_new_with_free_func((GDestroyNotify)vrmRdmaDeviceFree);
    e->asyncSources = g_ptr_array_new();
    e->slots = g_new0(vrmEngineSlot, e->s.channels);
    for (i = 0; i < e->s.channels; i++) {
        vrmEngineSlot *slot = &e->slots[i];
        vrmChannelConfig cfg = {
            .role = e->s.role,
            .index = i,
            .chunkSize = e->s.chunkSize,
            .ringDepth = e->s.ringDepth,
            .pinAll = e->s.pinAll,
            .fault = e->s.fault,
            .faultBytes = e->s.faultBytes,
        };
        vrmChannelHost host = {
            .fail = vrmEngineChannelFail,
            .wake = vrmEngineChannelWake,
            .opaque = slot,
        };

        slot->engine = e;
        slot->index = i;
        slot->ch = vrmChannelNew(&cfg, &host);
    }
    e->caps = (e->s.pinAll ? VRM_CAP_PIN_ALL : 0) |
              (e->s.noWriteImm ? 0 : VRM_CAP_WRITE_IMM);
    return e;
}

static void
vrmEngineTeardown(vrmEngine *e)
{
    guint32 i;

    /* 1. stop the progress threads (each bounded: poll interval + ERROR wait) */
    for (i = 0; i < e->s.channels; i++)
        vrmChannelStop(e->slots[i].ch, VRM_ERR_CANCELLED, _("the job ended"));
    for (i = 0; i < e->s.channels; i++)
        vrmChannelJoin(e->slots[i].ch);
    e->endUs = g_get_monotonic_time();
    /* 2. QEMU's listening socket */
    if (e->unixFd >= 0) {
        close(e->unixFd);
        e->unixFd = -1;
        if (e->unixOwn)
            unlink(e->s.qemuPath);
    }
    /* 3. disconnect; queue pairs, registrations and ids go in vrmEngineFree */
    for (i = 0; i < e->s.channels; i++) {
        vrmEngineSlot *slot = &e->slots[i];

        if (slot->retrySource)
            g_source_remove(slot->retrySource);
        if (slot->openSource)
            g_source_remove(slot->openSource);
        slot->retrySource = slot->openSource = 0;
        if (slot->id && slot->connected)
            rdma_disconnect(slot->id);
    }
}

void
vrmEngineFree(vrmEngine *e)
{
    guint32 i;

    if (!e)
        return;
    for (i = 0; e->slots && i < e->s.channels; i++) {
        /* the channel (queue pair, memory) before its rdma_cm id */
        vrmChannelFree(e->slots[i].ch);
        if (e->slots[i].id && rdma_destroy_id(e->slots[i].id) < 0)
            VRM_WARN("rdma_destroy_id on channel %u failed: %s", i, g_strerror(errno));
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
    if (e->unixFd >= 0) {
        close(e->unixFd);
        if (e->unixOwn)
            unlink(e->s.qemuPath);
    }
    if (e->s.qemuListenFd >= 0)
        close(e->s.qemuListenFd);
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
        vrmReportSystemError(errno, _("Cannot create an rdma_cm id"));
        rdma_freeaddrinfo(ai);
        return -1;
    }
    rc = rdma_bind_addr(e->listenId, ai->ai_src_addr);
    rdma_freeaddrinfo(ai);
    if (rc < 0) {
        vrmReportSystemError(errno, _("Cannot bind to the RDMA address %1$s"), addr);
        return -1;
    }
    if (e->listenId->verbs && !vrmEngineDevice(e, e->listenId->verbs))
        return -1;
    if (rdma_listen(e->listenId, VRM_ENGINE_LISTEN_BACKLOG) < 0) {
        vrmReportSystemError(errno, _("Cannot listen on the RDMA address %1$s"), addr);
        return -1;
    }
    /* port 0: the kernel chose one; the stats record tells the launcher */
    e->rdmaPort = ntohs(rdma_get_src_port(e->listenId));
    VRM_INFO("listening on %s port %u for %u channels", e->s.address, e->rdmaPort,
             e->s.channels);
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
    guint sources[8];
    guint nsources = 0;
    guint32 i;
    int flags;

    e->startUs = e->lastProgressUs = g_get_monotonic_time();
    e->connectDeadline = e->startUs + (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;
    e->loop = g_main_loop_new(NULL, FALSE);

    if (vrmEngineSettingsValidate(&e->s) < 0 || vrmEngineCheckPinned(&e->s) < 0)
        return -1;
    if ((e->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        vrmReportSystemError(errno, _("Cannot create an eventfd"));
        return -1;
    }
    if (!(e->cm = rdma_create_event_channel())) {
        vrmReportSystemError(errno, _("Cannot open the rdma_cm event channel (is rdma_ucm loaded?)"));
        return -1;
    }
    flags = fcntl(e->cm->fd, F_GETFL);
    if (flags < 0 || fcntl(e->cm->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        vrmReportSystemError(errno, _("Cannot make the rdma_cm event channel non-blocking"));
        return -1;
    }
    if (e->s.statsSocket &&
        (e->statsFd = vrmUnixListen(e->s.statsSocket)) < 0)
        return -1;

    if (e->s.role == VRM_ENGINE_ROLE_SOURCE) {
        if (vrmEngineListenRdma(e) < 0)
            return -1;
        if (e->s.qemuListenFd >= 0) {
            /* inherited from the launcher, which owns its path */
            e->unixFd = e->s.qemuListenFd;
            e->s.qemuListenFd = -1;
            if (vrmSetNonBlock(e->unixFd) < 0 ||
                fcntl(e->unixFd, F_SETFD, FD_CLOEXEC) < 0)
                return -1;
        } else {
            if ((e->unixFd = vrmUnixListen(e->s.qemuPath)) < 0)
                return -1;
            e->unixOwn = true;
        }
        sources[nsources++] = g_unix_fd_add(e->unixFd, G_IO_IN, vrmEngineUnixAccept, e);
    } else {
        for (i = 0; i < e->s.channels; i++) {
            if (vrmEngineConnectChannel(e, &e->slots[i]) < 0)
                return -1;
        }
    }
    sources[nsources++] = g_unix_fd_add(e->cm->fd, G_IO_IN, vrmEngineCMEvent, e);
    sources[nsources++] = g_unix_fd_add(e->wakefd, G_IO_IN, vrmEngineWoken, e);
    if (e->statsFd >= 0)
        sources[nsources++] = g_unix_fd_add(e->statsFd, G_IO_IN, vrmEngineStatsAccept, e);
    sources[nsources++] = g_timeout_add(VRM_ENGINE_TICK_MS, vrmEngineTick, e);
    sources[nsources++] = g_unix_signal_add(SIGINT, vrmEngineSignal, e);
    sources[nsources++] = g_unix_signal_add(SIGTERM, vrmEngineSignal, e);

    if (!vrmEngineFailed(e))
        g_main_loop_run(e->loop);

    vrmEngineTeardown(e);
    for (i = 0; i < nsources; i++)
        g_source_remove(sources[i]);

    if (!e->finished || vrmEngineFailed(e)) {
        g_mutex_lock(&e->lock);
        vrmSetLastError(e->failCode ? e->failCode : VRM_ERR_INTERNAL,
                        e->failReason ? e->failReason : _("The job ended before its channels did."));
        g_mutex_unlock(&e->lock);
        return -1;
    }
    return 0;
}
