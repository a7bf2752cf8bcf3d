/*
 * vrmfakeprovider.c: a FAKE verbs provider for the unit tests and fuzzers
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <arpa/inet.h>

#include "vrmfakeprovider.h"

#define VRM_FAKE_RECV_MAX 4096

typedef struct {
    struct ibv_mr mr;
    int access;
} vrmFakeMR;

typedef struct {
    vrmRdmaDevice base;
    GPtrArray *mrs;             /* vrmFakeMR */
    guint32 nextKey;
    bool portDown;              /* vrmFakeSetPortDown() */
} vrmFakeDevice;

typedef struct {
    guint64 wrId;
    enum ibv_wr_opcode opcode;
    bool signaled;
    guint64 addr;               /* local */
    guint32 length;
    guint64 remoteAddr;
    guint32 rkey;
    guint32 imm;
} vrmFakeSend;

typedef struct {
    guint64 wrId;
    guint64 addr;
    guint32 length;
} vrmFakeRecv;

/* A first-in first-out queue of fixed-size entries, held by value in one
 * array: posting and carrying a work request allocates nothing (the
 * fuzzer posts and carries hundreds per input) */
typedef struct {
    GArray *a;
    guint head;                 /* the first entry still queued */
} vrmFakeFifo;

static void
vrmFakeFifoInit(vrmFakeFifo *f, guint size)
{
    f->a = g_array_new(FALSE, FALSE, size);
    f->head = 0;
}

static guint
vrmFakeFifoLength(const vrmFakeFifo *f)
{
    return f->a->len - f->head;
}

static void
vrmFakeFifoPush(vrmFakeFifo *f, const void *entry)
{
    /* reclaim the room of the entries gone, once it is most of it */
    if (f->head && f->head >= f->a->len / 2) {
        g_array_remove_range(f->a, 0, f->head);
        f->head = 0;
    }
    g_array_append_vals(f->a, entry, 1);
}

/* The first entry, or NULL; valid until the next push */
static void *
vrmFakeFifoPeek(const vrmFakeFifo *f)
{
    if (f->head >= f->a->len)
        return NULL;
    return f->a->data + (gsize)f->head * g_array_get_element_size(f->a);
}

static void
vrmFakeFifoPop(vrmFakeFifo *f)
{
    if (++f->head >= f->a->len) {
        g_array_set_size(f->a, 0);
        f->head = 0;
    }
}

typedef struct _vrmFakeQP vrmFakeQP;
struct _vrmFakeQP {
    vrmRdmaQP base;
    vrmFakeQP *peer;            /* NULL once it is gone */
    vrmFakeFifo wire;           /* vrmFakeSend posted, not yet carried */
    vrmFakeFifo recvs;          /* vrmFakeRecv posted */
    GArray *cq;                 /* struct ibv_wc */
    int cqe;
    guint32 outstanding;        /* send WRs posted, not retired by a completion */
    guint32 sinceSignal;        /* unsignaled WRs carried since the last signaled one */
    bool error;                 /* the QP went to the error state */
};

static char *violation;

const char *
vrmFakeViolation(void)
{
    return violation;
}

void
vrmFakeViolationReset(void)
{
    g_clear_pointer(&violation, g_free);
}

static void G_GNUC_PRINTF(1, 2)
vrmFakeViolate(const char *fmt, ...)
{
    va_list ap;

    if (violation)
        return;
    va_start(ap, fmt);
    violation = g_strdup_vprintf(fmt, ap);
    va_end(ap);
}

/* The registration of @dev under @key covering [addr, addr+len) with @access */
static bool
vrmFakeCheck(vrmRdmaDevice *d, guint32 key, bool remote, guint64 addr,
             guint64 len, int access)
{
    vrmFakeDevice *dev = (vrmFakeDevice *)d;
    guint i;

    for (i = 0; i < dev->mrs->len; i++) {
        vrmFakeMR *m = g_ptr_array_index(dev->mrs, i);
        guint64 start = (guintptr)m->mr.addr;

        if ((remote ? m->mr.rkey : m->mr.lkey) != key)
            continue;
        return addr >= start && addr + len <= start + m->mr.length &&
               addr + len >= addr && (m->access & access) == access;
    }
    return false;
}

static struct ibv_mr *
vrmFakeReg(vrmRdmaDevice *d, void *addr, size_t len, int access)
{
    vrmFakeDevice *dev = (vrmFakeDevice *)d;
    vrmFakeMR *m = g_new0(vrmFakeMR, 1);

    if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))
        vrmFakeViolate("remote write access without local write (EINVAL on hardware)");
    m->mr.addr = addr;
    m->mr.length = len;
    m->mr.lkey = m->mr.rkey = ++dev->nextKey;
    m->access = access;
    g_ptr_array_add(dev->mrs, m);
    return &m->mr;
}

static int
vrmFakeDereg(vrmRdmaDevice *d, struct ibv_mr *mr)
{
    vrmFakeDevice *dev = (vrmFakeDevice *)d;

    if (!g_ptr_array_remove(dev->mrs, mr)) {
        vrmFakeViolate("deregistration of memory that is not registered");
        return EINVAL;
    }
    return 0;
}

static void
vrmFakeComplete(vrmFakeQP *qp, guint64 wrId, enum ibv_wc_status status,
                enum ibv_wc_opcode opcode, guint32 len, guint32 imm)
{
    struct ibv_wc wc = {
        .wr_id = wrId,
        .status = status,
        .opcode = opcode,
        .byte_len = len,
        .imm_data = imm,
    };

    if (qp->cq->len >= (guint)qp->cqe)
        vrmFakeViolate("completion queue overrun (%d entries)", qp->cqe);
    g_array_append_val(qp->cq, wc);
}

static int
vrmFakePostSend(vrmRdmaQP *q, struct ibv_send_wr *wr)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;

    for (; wr; wr = wr->next) {
        vrmFakeSend s;
        int access = 0;

        if (wr->num_sge != 1) {
            vrmFakeViolate("a send work request with %d scatter/gather entries", wr->num_sge);
            return EINVAL;
        }
        if (!vrmFakeCheck(q->dev, wr->sg_list->lkey, false, wr->sg_list->addr,
                          wr->sg_list->length, access)) {
            vrmFakeViolate("a send work request outside its registered region "
                           "(lkey %u, %u bytes at 0x%llx)", wr->sg_list->lkey,
                           wr->sg_list->length, (unsigned long long)wr->sg_list->addr);
            return EINVAL;
        }
        if (wr->opcode == IBV_WR_SEND && wr->sg_list->length > VRM_FAKE_RECV_MAX)
            vrmFakeViolate("a SEND of %u bytes, more than a control message", wr->sg_list->length);
        /* a device with a message limit (Soft-RoCE's, vrmRdmaQPMaxMessage)
         * must see no work request longer than it */
        if (q->dev->maxMessage && wr->sg_list->length > q->dev->maxMessage)
            vrmFakeViolate("a work request of %u bytes on a device whose messages may have at most %u",
                           wr->sg_list->length, q->dev->maxMessage);
        if (++qp->outstanding > q->sendSize)
            vrmFakeViolate("send queue overflow (%u posted, room for %u)",
                           qp->outstanding, q->sendSize);
        s = (vrmFakeSend) {
            .wrId = wr->wr_id,
            .opcode = wr->opcode,
            .signaled = wr->send_flags & IBV_SEND_SIGNALED,
            .addr = wr->sg_list->addr,
            .length = wr->sg_list->length,
            .remoteAddr = wr->wr.rdma.remote_addr,
            .rkey = wr->wr.rdma.rkey,
            .imm = wr->imm_data,
        };
        vrmFakeFifoPush(&qp->wire, &s);
    }
    return 0;
}

static int
vrmFakePostRecv(vrmRdmaQP *q, struct ibv_recv_wr *wr)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;

    for (; wr; wr = wr->next) {
        vrmFakeRecv r;

        if (wr->num_sge != 1 ||
            !vrmFakeCheck(q->dev, wr->sg_list->lkey, false, wr->sg_list->addr,
                          wr->sg_list->length, IBV_ACCESS_LOCAL_WRITE)) {
            vrmFakeViolate("a receive work request outside its registered region");
            return EINVAL;
        }
        if (vrmFakeFifoLength(&qp->recvs) >= q->recvSize)
            vrmFakeViolate("receive queue overflow (room for %u)", q->recvSize);
        r = (vrmFakeRecv) {
            .wrId = wr->wr_id,
            .addr = wr->sg_list->addr,
            .length = wr->sg_list->length,
        };
        vrmFakeFifoPush(&qp->recvs, &r);
    }
    return 0;
}

static int
vrmFakePoll(vrmRdmaQP *q, int n, struct ibv_wc *wc)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;
    int got = MIN((guint)n, qp->cq->len);

    if (got == 0)
        return 0;
    memcpy(wc, qp->cq->data, got * sizeof(*wc));
    g_array_remove_range(qp->cq, 0, got);
    return got;
}

static int
vrmFakeArm(vrmRdmaQP *q)
{
    return 0;
}

static int
vrmFakeTakeEvents(vrmRdmaQP *q)
{
    return 0;
}

static void
vrmFakeQPFree(vrmRdmaQP *q)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;

    if (qp->peer)
        qp->peer->peer = NULL;
    g_array_free(qp->wire.a, TRUE);
    g_array_free(qp->recvs.a, TRUE);
    g_array_free(qp->cq, TRUE);
    g_free(qp);
}

static void
vrmFakeDevFree(vrmRdmaDevice *d)
{
    vrmFakeDevice *dev = (vrmFakeDevice *)d;

    if (dev->mrs->len)
        vrmFakeViolate("%u registrations left at the end", dev->mrs->len);
    g_ptr_array_free(dev->mrs, TRUE);
}

static bool
vrmFakePortDown(vrmRdmaQP *qp)
{
    return ((vrmFakeDevice *)qp->dev)->portDown;
}

void
vrmFakeSetPortDown(vrmRdmaDevice *dev, bool down)
{
    ((vrmFakeDevice *)dev)->portDown = down;
}

void
vrmFakeQPSetError(vrmRdmaQP *qp)
{
    ((vrmFakeQP *)qp)->error = true;
}

static const vrmRdmaOps vrmFakeOps = {
    .reg = vrmFakeReg,
    .dereg = vrmFakeDereg,
    .postSend = vrmFakePostSend,
    .postRecv = vrmFakePostRecv,
    .poll = vrmFakePoll,
    .arm = vrmFakeArm,
    .takeEvents = vrmFakeTakeEvents,
    .portDown = vrmFakePortDown,
    .qpFree = vrmFakeQPFree,
    .devFree = vrmFakeDevFree,
};

vrmRdmaDevice *
vrmFakeDeviceNew(const char *name)
{
    /* the device struct is the first member: vrmRdmaDeviceFree frees it */
    vrmFakeDevice *dev = g_malloc0(MAX(sizeof(vrmFakeDevice), sizeof(vrmRdmaDevice)));

    dev->base.ops = &vrmFakeOps;
    dev->base.name = g_strdup(name);
    dev->base.maxQpWr = 16384;
    dev->base.maxCqe = 65536;
    dev->mrs = g_ptr_array_new_with_free_func(g_free);
    return &dev->base;
}

static vrmFakeQP *
vrmFakeQPNew(vrmRdmaDevice *dev, guint32 sendSize, guint32 recvSize, int cqe)
{
    vrmFakeQP *qp = g_new0(vrmFakeQP, 1);

    vrmRdmaQPInit(&qp->base, dev, sendSize, recvSize);
    vrmFakeFifoInit(&qp->wire, sizeof(vrmFakeSend));
    vrmFakeFifoInit(&qp->recvs, sizeof(vrmFakeRecv));
    qp->cq = g_array_new(FALSE, TRUE, sizeof(struct ibv_wc));
    qp->cqe = cqe;
    return qp;
}

void
vrmFakeQPPair(vrmRdmaDevice *a, vrmRdmaDevice *b, const guint32 sendSize[2],
              const guint32 recvSize[2], const int cqe[2],
              vrmRdmaQP **qa, vrmRdmaQP **qb)
{
    vrmFakeQP *x = vrmFakeQPNew(a, sendSize[0], recvSize[0], cqe[0]);
    vrmFakeQP *y = vrmFakeQPNew(b, sendSize[1], recvSize[1], cqe[1]);

    x->peer = y;
    y->peer = x;
    *qa = &x->base;
    *qb = &y->base;
}

guint32
vrmFakeQPPending(const vrmRdmaQP *q)
{
    return vrmFakeFifoLength(&((const vrmFakeQP *)q)->wire);
}

static int vrmFakeOversizeStatus = IBV_WC_LOC_LEN_ERR;

void
vrmFakeSetOversizeStatus(int status)
{
    vrmFakeOversizeStatus = status;
}

/* A receive at @qp: consume a buffer and complete it; false if none */
static bool
vrmFakeReceive(vrmFakeQP *qp, const void *buf, size_t len, bool imm, guint32 immData)
{
    vrmFakeRecv *p = vrmFakeFifoPeek(&qp->recvs), r;

    if (!p)
        return false;
    r = *p;
    vrmFakeFifoPop(&qp->recvs);
    if (imm) {
        vrmFakeComplete(qp, r.wrId, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
                        len, immData);
    } else if (len > r.length) {
        vrmFakeComplete(qp, r.wrId, vrmFakeOversizeStatus, IBV_WC_RECV, 0, 0);
        qp->error = true;
    } else {
        if (len)
            memcpy((void *)(guintptr)r.addr, buf, len);
        vrmFakeComplete(qp, r.wrId, IBV_WC_SUCCESS, IBV_WC_RECV, len, 0);
    }
    return true;
}

int
vrmFakeQPDeliver(vrmRdmaQP *q, int max)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;
    int done = 0;

    while (done < max && vrmFakeFifoLength(&qp->wire)) {
        vrmFakeSend cur = *(vrmFakeSend *)vrmFakeFifoPeek(&qp->wire), *s = &cur;
        vrmFakeQP *peer = qp->peer;
        enum ibv_wc_status status = IBV_WC_SUCCESS;
        enum ibv_wc_opcode op = s->opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;

        if (qp->error || !peer || peer->error) {
            status = IBV_WC_WR_FLUSH_ERR;
        } else if (s->opcode == IBV_WR_SEND) {
            if (!vrmFakeFifoLength(&peer->recvs))
                break;          /* receiver not ready: the hardware retries */
            vrmFakeReceive(peer, (void *)(guintptr)s->addr, s->length, false, 0);
            if (peer->error)
                status = IBV_WC_REM_INV_REQ_ERR;
        } else {
            bool imm = s->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

            if (imm && !vrmFakeFifoLength(&peer->recvs))
                break;
            if (!vrmFakeCheck(peer->base.dev, s->rkey, true, s->remoteAddr, s->length,
                              IBV_ACCESS_REMOTE_WRITE)) {
                status = IBV_WC_REM_ACCESS_ERR;
                peer->error = true;
            } else {
                memcpy((void *)(guintptr)s->remoteAddr, (void *)(guintptr)s->addr, s->length);
                if (imm)
                    vrmFakeReceive(peer, NULL, s->length, true, s->imm);
            }
        }
        vrmFakeFifoPop(&qp->wire);
        done++;
        if (status != IBV_WC_SUCCESS) {
            qp->error = true;
            vrmFakeComplete(qp, s->wrId, status, op, 0, 0);
        } else if (s->signaled) {
            vrmFakeComplete(qp, s->wrId, status, op, 0, 0);
        }
        /* a completion retires it and every unsignaled one before it */
        qp->sinceSignal++;
        if (s->signaled || status != IBV_WC_SUCCESS) {
            qp->outstanding -= qp->sinceSignal;
            qp->sinceSignal = 0;
        }
    }
    return done;
}

void
vrmFakeQPInject(vrmRdmaQP *q, const void *buf, size_t len)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;

    if (!vrmFakeReceive(qp, buf, len, false, 0))
        qp->error = true;       /* no buffer: the peer's SEND would fail */
}

void
vrmFakeQPInjectImm(vrmRdmaQP *q, guint32 imm)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;
    guint32 len = ntohl(imm) & ((1u << 27) - 1);

    if (!vrmFakeReceive(qp, NULL, len, true, imm))
        qp->error = true;
}
