/*
 * vrmrdma.c: thin verbs provider for the transport
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "vrmrdma.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

vrmRdmaDevice *
vrmRdmaDeviceNew(struct ibv_context *ctx)
{
    g_autoptr(vrmRdmaDevice) dev = g_new0(vrmRdmaDevice, 1);
    int rc;

    dev->ctx = ctx;
    dev->name = g_strdup(ibv_get_device_name(ctx->device));
    if ((rc = ibv_query_device(ctx, &dev->attr)) != 0) {
        vrmReportSystemError(rc, _("Cannot query RDMA device %1$s"), dev->name);
        return NULL;
    }
    dev->iwarp = ctx->device->transport_type == IBV_TRANSPORT_IWARP;
    if (!(dev->pd = ibv_alloc_pd(ctx))) {
        vrmReportSystemError(errno,
                             _("Cannot allocate a protection domain on %1$s"),
                             dev->name);
        return NULL;
    }
    VRM_DEBUG("device %s: max_qp_wr %d max_cqe %d max_sge %d iwarp %d",
              dev->name, dev->attr.max_qp_wr, dev->attr.max_cqe,
              dev->attr.max_sge, dev->iwarp);
    return g_steal_pointer(&dev);
}

void
vrmRdmaDeviceFree(vrmRdmaDevice *dev)
{
    int rc;

    if (!dev)
        return;
    if (dev->pd && (rc = ibv_dealloc_pd(dev->pd)) != 0)
        VRM_WARN("ibv_dealloc_pd on %s failed: %s", dev->name, g_strerror(rc));
    g_free(dev->name);
    g_free(dev);
}

guint32
vrmRdmaClamp(guint32 want, int max, const char *what)
{
    if (max > 0 && want > (guint32)max) {
        VRM_INFO("%s clamped from %u to the device limit %d", what, want, max);
        return max;
    }
    return want;
}

vrmRdmaCQ *
vrmRdmaCQNew(vrmRdmaDevice *dev, int cqe, void *context)
{
    g_autoptr(vrmRdmaCQ) cq = g_new0(vrmRdmaCQ, 1);
    const char *fault = g_getenv("VRM_TEST_FAULT_CQ");
    int flags;

    if (!(cq->chan = ibv_create_comp_channel(dev->ctx))) {
        vrmReportSystemError(errno, _("Cannot create a completion channel on %1$s"),
                             dev->name);
        return NULL;
    }
    flags = fcntl(cq->chan->fd, F_GETFL);
    if (flags < 0 || fcntl(cq->chan->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        vrmReportSystemError(errno, _("Cannot make a completion channel non-blocking"));
        return NULL;
    }
    if (!(cq->cq = ibv_create_cq(dev->ctx, cqe, context, cq->chan, 0))) {
        vrmReportSystemError(errno,
                             _("Cannot create a completion queue of %1$d entries on %2$s"),
                             cqe, dev->name);
        return NULL;
    }
    /* Test hook (documented in virt-rdma-engine(1)): report the N-th
     * completion as failed, to exercise the abort path without hardware. */
    if (fault)
        cq->fault_after = g_ascii_strtoull(fault, NULL, 10);
    return g_steal_pointer(&cq);
}

void
vrmRdmaCQFree(vrmRdmaCQ *cq)
{
    int rc;

    if (!cq)
        return;
    if (cq->cq) {
        if (cq->unacked)
            ibv_ack_cq_events(cq->cq, cq->unacked);
        if ((rc = ibv_destroy_cq(cq->cq)) != 0)
            VRM_WARN("ibv_destroy_cq failed: %s", g_strerror(rc));
    }
    if (cq->chan && (rc = ibv_destroy_comp_channel(cq->chan)) != 0)
        VRM_WARN("ibv_destroy_comp_channel failed: %s", g_strerror(errno));
    g_free(cq);
}

int
vrmRdmaCQArm(vrmRdmaCQ *cq)
{
    int rc;

    if ((rc = ibv_req_notify_cq(cq->cq, 0)) != 0) {
        vrmReportSystemError(rc, _("Cannot arm a completion queue"));
        return -1;
    }
    return 0;
}

int
vrmRdmaCQTakeEvents(vrmRdmaCQ *cq)
{
    struct ibv_cq *ev_cq;
    void *ev_ctx;
    int n = 0;

    while (ibv_get_cq_event(cq->chan, &ev_cq, &ev_ctx) == 0) {
        n++;
        if (++cq->unacked >= VRM_RDMA_CQ_ACK_BATCH) {
            ibv_ack_cq_events(cq->cq, cq->unacked);
            cq->unacked = 0;
        }
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
        vrmReportSystemError(errno, _("Cannot read a completion event"));
        return -1;
    }
    return n;
}

int
vrmRdmaCQPoll(vrmRdmaCQ *cq, int n, struct ibv_wc *wc)
{
    int got = ibv_poll_cq(cq->cq, n, wc);
    int i;

    if (got < 0) {
        vrmReportError(VRM_ERR_RDMA, _("Polling a completion queue failed."));
        return -1;
    }
    for (i = 0; i < got; i++) {
        cq->polled++;
        if (cq->fault_after && cq->polled == cq->fault_after) {
            VRM_WARN("test hook: completion %" G_GUINT64_FORMAT " reported as failed",
                     cq->polled);
            wc[i].status = IBV_WC_GENERAL_ERR;
        }
    }
    return got;
}

struct ibv_mr *
vrmRdmaRegister(vrmRdmaDevice *dev, void *addr, size_t len, int access,
                guint64 *usec)
{
    gint64 start = g_get_monotonic_time();
    struct ibv_mr *mr = ibv_reg_mr(dev->pd, addr, len, access);

    if (!mr) {
        vrmReportSystemError(errno,
                             _("Cannot register %1$zu bytes of memory with %2$s"),
                             len, dev->name);
        return NULL;
    }
    if (usec)
        *usec += g_get_monotonic_time() - start;
    return mr;
}

int
vrmRdmaDeregister(struct ibv_mr *mr)
{
    int rc;

    if (!mr)
        return 0;
    if ((rc = ibv_dereg_mr(mr)) != 0) {
        VRM_WARN("ibv_dereg_mr failed: %s", g_strerror(rc));
        return -1;
    }
    return 0;
}

int
vrmRdmaWcStatusToError(enum ibv_wc_status status, const char **what)
{
    switch (status) {
    case IBV_WC_RETRY_EXC_ERR:
        *what = _("the peer stopped answering (transport retry count exceeded)");
        return VRM_ERR_PEER;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        *what = _("the peer's receive queue stayed empty");
        return VRM_ERR_PEER;
    case IBV_WC_REM_ACCESS_ERR:
        *what = _("the peer refused an RDMA access (remote access error)");
        return VRM_ERR_PROTOCOL;
    case IBV_WC_WR_FLUSH_ERR:
        *what = _("the queue pair was flushed");
        return VRM_ERR_CANCELLED;
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
        *what = _("a local work request was invalid");
        return VRM_ERR_INTERNAL;
    default:
        *what = ibv_wc_status_str(status);
        return VRM_ERR_RDMA;
    }
}

const char *
vrmRdmaCMEventName(enum rdma_cm_event_type type)
{
    return rdma_event_str(type);
}
