/*
 * vrmrdma.c: the verbs provider of the transport
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "vrmrdma.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

/* ---- the verbs provider --------------------------------------------- */

typedef struct {
    vrmRdmaQP base;
    struct rdma_cm_id *id;              /* not owned: its QP is */
    struct ibv_comp_channel *chan;      /* owned, non-blocking fd */
    struct ibv_cq *cq;                  /* owned */
    unsigned int unacked;               /* events got, not yet acked */
} vrmRdmaVerbsQP;

static struct ibv_mr *
vrmRdmaVerbsReg(vrmRdmaDevice *dev, void *addr, size_t len, int access)
{
    return ibv_reg_mr(dev->pd, addr, len, access);
}

static int
vrmRdmaVerbsDereg(vrmRdmaDevice *dev, struct ibv_mr *mr)
{
    return ibv_dereg_mr(mr);
}

static int
vrmRdmaVerbsPostSend(vrmRdmaQP *qp, struct ibv_send_wr *wr)
{
    vrmRdmaVerbsQP *v = (vrmRdmaVerbsQP *)qp;
    struct ibv_send_wr *bad = NULL;

    return ibv_post_send(v->id->qp, wr, &bad);
}

static int
vrmRdmaVerbsPostRecv(vrmRdmaQP *qp, struct ibv_recv_wr *wr)
{
    vrmRdmaVerbsQP *v = (vrmRdmaVerbsQP *)qp;
    struct ibv_recv_wr *bad = NULL;

    return ibv_post_recv(v->id->qp, wr, &bad);
}

static int
vrmRdmaVerbsPoll(vrmRdmaQP *qp, int n, struct ibv_wc *wc)
{
    return ibv_poll_cq(((vrmRdmaVerbsQP *)qp)->cq, n, wc);
}

static int
vrmRdmaVerbsArm(vrmRdmaQP *qp)
{
    return ibv_req_notify_cq(((vrmRdmaVerbsQP *)qp)->cq, 0);
}

static int
vrmRdmaVerbsTakeEvents(vrmRdmaQP *qp)
{
    vrmRdmaVerbsQP *v = (vrmRdmaVerbsQP *)qp;
    struct ibv_cq *ev_cq;
    void *ev_ctx;
    int n = 0;

    while (ibv_get_cq_event(v->chan, &ev_cq, &ev_ctx) == 0) {
        n++;
        if (++v->unacked >= VRM_RDMA_CQ_ACK_BATCH) {
            ibv_ack_cq_events(v->cq, v->unacked);
            v->unacked = 0;
        }
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
        vrmReportSystemError(errno, _("cannot read a completion event"));
        return -1;
    }
    return n;
}

/* Asked only after a work request failed: one system call */
static bool
vrmRdmaVerbsPortDown(vrmRdmaQP *qp)
{
    vrmRdmaVerbsQP *v = (vrmRdmaVerbsQP *)qp;
    struct ibv_port_attr attr;

    if (!v->id || !v->id->verbs || v->id->port_num == 0 ||
        ibv_query_port(v->id->verbs, v->id->port_num, &attr) != 0)
        return false;
    return attr.state != IBV_PORT_ACTIVE;
}

/* Soft-RoCE (rxe): its path MTU in bytes; other devices: 0 (vrmrdma.h) */
static guint32
vrmRdmaVerbsMaxMessage(vrmRdmaQP *qp)
{
    vrmRdmaVerbsQP *v = (vrmRdmaVerbsQP *)qp;
    struct ibv_qp_attr attr;
    struct ibv_qp_init_attr init;

    if (!qp->dev->maxMessage)
        return 0;
    if (!v->id || !v->id->qp ||
        ibv_query_qp(v->id->qp, &attr, IBV_QP_PATH_MTU, &init) != 0 ||
        attr.path_mtu < IBV_MTU_256 || attr.path_mtu > IBV_MTU_4096)
        return VRM_RDMA_MTU_MIN;      /* the smallest MTU is always safe */
    return MIN(qp->dev->maxMessage, 128u << attr.path_mtu);
}

/* Reverse order of creation; tolerates a half-built queue pair */
static void
vrmRdmaVerbsQPFree(vrmRdmaQP *qp)
{
    vrmRdmaVerbsQP *v = (vrmRdmaVerbsQP *)qp;
    int rc;

    if (v->id && v->id->qp)
        rdma_destroy_qp(v->id);
    if (v->cq) {
        if (v->unacked)
            ibv_ack_cq_events(v->cq, v->unacked);
        if ((rc = ibv_destroy_cq(v->cq)) != 0)
            VRM_WARN("ibv_destroy_cq failed: %s", g_strerror(rc));
    }
    if (v->chan && ibv_destroy_comp_channel(v->chan) != 0)
        VRM_WARN("ibv_destroy_comp_channel failed: %s", g_strerror(errno));
    g_free(v);
}

static void
vrmRdmaVerbsDevFree(vrmRdmaDevice *dev)
{
    int rc;

    if (dev->pd && (rc = ibv_dealloc_pd(dev->pd)) != 0)
        VRM_WARN("ibv_dealloc_pd on %s failed: %s", dev->name, g_strerror(rc));
}

static const vrmRdmaOps vrmRdmaVerbsOps = {
    .reg = vrmRdmaVerbsReg,
    .dereg = vrmRdmaVerbsDereg,
    .postSend = vrmRdmaVerbsPostSend,
    .postRecv = vrmRdmaVerbsPostRecv,
    .poll = vrmRdmaVerbsPoll,
    .arm = vrmRdmaVerbsArm,
    .takeEvents = vrmRdmaVerbsTakeEvents,
    .portDown = vrmRdmaVerbsPortDown,
    .maxMessage = vrmRdmaVerbsMaxMessage,
    .qpFree = vrmRdmaVerbsQPFree,
    .devFree = vrmRdmaVerbsDevFree,
};

vrmRdmaDevice *
vrmRdmaDeviceNew(struct ibv_context *ctx)
{
    g_autoptr(vrmRdmaDevice) dev = g_new0(vrmRdmaDevice, 1);
    struct ibv_device_attr attr;
    int rc;

    dev->ops = &vrmRdmaVerbsOps;
    dev->ctx = ctx;
    dev->name = g_strdup(ibv_get_device_name(ctx->device));
    if ((rc = ibv_query_device(ctx, &attr)) != 0) {
        vrmReportSystemError(rc, _("cannot query RDMA device %1$s"), dev->name);
        return NULL;
    }
    dev->maxQpWr = attr.max_qp_wr;
    dev->maxCqe = attr.max_cqe;
    dev->iwarp = ctx->device->transport_type == IBV_TRANSPORT_IWARP;
    if (attr.vendor_id == VRM_RDMA_RXE_VENDOR_ID) {
        struct ibv_port_attr port;

        /* the queue pairs size their send queues with the port's MTU;
         * each one's path MTU bounds its messages (vrmRdmaQPMaxMessage) */
        dev->maxMessage = ibv_query_port(ctx, 1, &port) == 0 &&
                          port.active_mtu >= IBV_MTU_256 && port.active_mtu <= IBV_MTU_4096 ?
                          128u << port.active_mtu : VRM_RDMA_MTU_MIN;
    }
    if (!(dev->pd = ibv_alloc_pd(ctx))) {
        vrmReportSystemError(errno,
                             _("cannot allocate a protection domain on %1$s"),
                             dev->name);
        return NULL;
    }
    VRM_DEBUG("device %s: max_qp_wr %d max_cqe %d max_sge %d iwarp %d max_message %u",
              dev->name, attr.max_qp_wr, attr.max_cqe, attr.max_sge, dev->iwarp,
              dev->maxMessage);
    return g_steal_pointer(&dev);
}

vrmRdmaQP *
vrmRdmaQPNew(vrmRdmaDevice *dev, struct rdma_cm_id *id, guint32 sendSize,
             guint32 recvSize, int cqe, void *context)
{
    vrmRdmaVerbsQP *v = g_new0(vrmRdmaVerbsQP, 1);
    struct ibv_qp_init_attr attr = {
        .qp_context = context,
        .cap = {
            .max_send_wr = sendSize,
            .max_recv_wr = recvSize,
            .max_send_sge = 1,
            .max_recv_sge = 1,
        },
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
    };
    int flags;

    vrmRdmaQPInit(&v->base, dev, sendSize, recvSize);
    if (!(v->chan = ibv_create_comp_channel(dev->ctx))) {
        vrmReportSystemError(errno, _("cannot create a completion channel on %1$s"),
                             dev->name);
        goto error;
    }
    flags = fcntl(v->chan->fd, F_GETFL);
    if (flags < 0 || fcntl(v->chan->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        vrmReportSystemError(errno, _("cannot make a completion channel non-blocking"));
        goto error;
    }
    if (!(v->cq = ibv_create_cq(dev->ctx, cqe, context, v->chan, 0))) {
        vrmReportSystemError(errno,
                             _("cannot create a completion queue of %1$d entries on %2$s"),
                             cqe, dev->name);
        goto error;
    }
    attr.send_cq = v->cq;
    attr.recv_cq = v->cq;
    if (rdma_create_qp(id, dev->pd, &attr) < 0) {
        vrmReportSystemError(errno, _("cannot create a queue pair on %1$s"), dev->name);
        goto error;
    }
    v->id = id;
    v->base.eventFd = v->chan->fd;
    return &v->base;

 error:
    vrmRdmaVerbsQPFree(&v->base);
    return NULL;
}

/* ---- every provider --------------------------------------------------- */

void
vrmRdmaDeviceFree(vrmRdmaDevice *dev)
{
    if (!dev)
        return;
    if (dev->ops && dev->ops->devFree)
        dev->ops->devFree(dev);
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

struct ibv_mr *
vrmRdmaRegister(vrmRdmaDevice *dev, void *addr, size_t len, int access,
                guint64 *usec)
{
    gint64 start = g_get_monotonic_time();
    struct ibv_mr *mr = dev->ops->reg(dev, addr, len, access);

    if (!mr) {
        vrmReportSystemError(errno,
                             _("cannot register %1$zu bytes of memory with %2$s"),
                             len, dev->name);
        return NULL;
    }
    if (usec)
        *usec += g_get_monotonic_time() - start;
    return mr;
}

int
vrmRdmaDeregister(vrmRdmaDevice *dev, struct ibv_mr *mr)
{
    int rc;

    if (!mr)
        return 0;
    if ((rc = dev->ops->dereg(dev, mr)) != 0) {
        VRM_WARN("deregistering memory on %s failed: %s", dev->name, g_strerror(rc));
        return -1;
    }
    return 0;
}

void
vrmRdmaQPInit(vrmRdmaQP *qp, vrmRdmaDevice *dev, guint32 sendSize,
              guint32 recvSize)
{
    const char *fault = g_getenv("VRM_TEST_FAULT_CQ");

    qp->dev = dev;
    qp->eventFd = -1;
    qp->sendSize = sendSize;
    qp->recvSize = recvSize;
    qp->faultStatus = IBV_WC_GENERAL_ERR;
    /* Test hook (documented in virt-rdma-engine(8)): report the N-th
     * completion as failed, to exercise the abort path without hardware. */
    if (fault)
        qp->faultAfter = g_ascii_strtoull(fault, NULL, 10);
}

guint32
vrmRdmaQPMaxMessage(vrmRdmaQP *qp)
{
    if (qp->dev->ops->maxMessage)
        return qp->dev->ops->maxMessage(qp);
    return qp->dev->maxMessage;
}

void
vrmRdmaQPFree(vrmRdmaQP *qp)
{
    if (qp)
        qp->dev->ops->qpFree(qp);
}

int
vrmRdmaQPPostSend(vrmRdmaQP *qp, struct ibv_send_wr *wr)
{
    int rc = qp->dev->ops->postSend(qp, wr);

    if (rc != 0) {
        vrmReportSystemError(rc, _("cannot post work requests on %1$s"), qp->dev->name);
        return -1;
    }
    __atomic_store_n(&qp->doorbells, qp->doorbells + 1, __ATOMIC_RELAXED);
    return 0;
}

int
vrmRdmaQPPostRecv(vrmRdmaQP *qp, struct ibv_recv_wr *wr)
{
    int rc = qp->dev->ops->postRecv(qp, wr);

    if (rc != 0) {
        vrmReportSystemError(rc, _("cannot post receive buffers on %1$s"), qp->dev->name);
        return -1;
    }
    __atomic_store_n(&qp->doorbells, qp->doorbells + 1, __ATOMIC_RELAXED);
    return 0;
}

int
vrmRdmaQPPoll(vrmRdmaQP *qp, int n, struct ibv_wc *wc)
{
    int got = qp->dev->ops->poll(qp, n, wc);
    int i;

    if (got < 0) {
        vrmReportError(VRM_ERR_RDMA, _("polling a completion queue failed"));
        return -1;
    }
    for (i = 0; i < got; i++) {
        qp->polled++;
        if (qp->faultAfter && qp->polled == qp->faultAfter) {
            VRM_WARN("test hook: completion %" G_GUINT64_FORMAT " reported as failed",
                     qp->polled);
            wc[i].status = qp->faultStatus;
        }
    }
    return got;
}

bool
vrmRdmaQPPortDown(vrmRdmaQP *qp)
{
    return qp->dev->ops->portDown && qp->dev->ops->portDown(qp);
}

int
vrmRdmaQPArm(vrmRdmaQP *qp)
{
    int rc = qp->dev->ops->arm(qp);

    if (rc != 0) {
        vrmReportSystemError(rc, _("cannot arm a completion queue"));
        return -1;
    }
    return 0;
}

int
vrmRdmaQPTakeEvents(vrmRdmaQP *qp)
{
    return qp->dev->ops->takeEvents(qp);
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
