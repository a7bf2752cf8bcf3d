/*
 * vrmengineslot.c: what the main thread keeps of each channel (a slot and
 * its state machine), the RDMA devices, and the pinned memory a job may use
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* accept4, SO_PEERCRED; in each of the engine's files, so
                      * that vrmenginepriv.h's system headers read the same */
#endif

#include "vrmenginepriv.h"

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

vrmRdmaDevice *
vrmEngineDevice(vrmEngine *e, struct ibv_context *ctx)
{
    vrmRdmaDevice *dev;
    guint32 caps;
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
    caps = vrmTransferCapsForDevice(e->caps, !dev->iwarp);
    if (caps != e->caps) {
        VRM_INFO("device %s is iWARP: data is announced by descriptor SENDs", dev->name);
        e->caps = caps;
    }
    return dev;
}

/* The slot of the channel numbered @index on the wire, or NULL: migration
 * channels from 0, disk channels from VRM_DISK_CHANNEL_BASE */
vrmEngineSlot *
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

vrmChannel *
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
void
vrmEngineSlotAdvance(vrmEngineSlot *slot, vrmEngineSlotState state)
{
    if (state > slot->state)
        slot->state = state;
}

/* The channel's memory on the device of @id, and its queue pair */
int
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
void
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
