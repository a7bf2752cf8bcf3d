/*
 * vrmfakeprovider.c: a FAKE verbs provider for the unit tests and fuzzers
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>

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
    bool threaded;              /* a NIC thread runs: vrmFakeLock guards mrs */
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

/*
 * The NIC of a pair of queue pairs, in a thread of its own (benchmarks,
 * vrmFakeQPStartNIC): it carries both directions as the tests'
 * vrmFakeQPDeliver() does, and copies a WRITE's bytes with no lock held,
 * as a device's DMA runs beside the CPU that posted it. Lock rule: once a
 * NIC runs, every operation on its queue pairs and their devices takes
 * vrmFakeLock (one lock for every fake NIC, a leaf); the copy is made
 * outside it, from a work request already taken off the wire.
 */
typedef struct {
    GThread *thread;
    GCond cond;                 /* posted work for a sleeping NIC */
    bool sleeping;              /* the NIC waits on cond */
    bool stop;
    vrmFakeQP *qp[2];           /* NULL once freed */
} vrmFakeNIC;

static GMutex vrmFakeLock;

/* What the fake NICs copied (vrmFakeDMAGet) */
static vrmFakeDMA vrmFakeDMATotal;

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
    vrmFakeNIC *nic;            /* its NIC thread, or NULL: the test carries */
    bool armed;                 /* NIC: a completion signals eventFd */
};

static inline void
vrmFakeQPLock(const vrmFakeQP *qp)
{
    if (qp->nic)
        g_mutex_lock(&vrmFakeLock);
}

static inline void
vrmFakeQPUnlock(const vrmFakeQP *qp)
{
    if (qp->nic)
        g_mutex_unlock(&vrmFakeLock);
}

/* A NIC asleep learns of new work (with vrmFakeLock held) */
static inline void
vrmFakeQPDoorbell(const vrmFakeQP *qp)
{
    if (qp->nic && qp->nic->sleeping)
        g_cond_signal(&qp->nic->cond);
}

/* The DMA: every payload byte the fake provider moves between memories */
static void
vrmFakeCopy(void *dst, const void *src, size_t len)
{
    memcpy(dst, src, len);
    __atomic_add_fetch(&vrmFakeDMATotal.bytes, len, __ATOMIC_RELAXED);
    __atomic_add_fetch(&vrmFakeDMATotal.copies, 1, __ATOMIC_RELAXED);
}

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
    m->access = access;
    if (dev->threaded)
        g_mutex_lock(&vrmFakeLock);
    m->mr.lkey = m->mr.rkey = ++dev->nextKey;
    g_ptr_array_add(dev->mrs, m);
    if (dev->threaded)
        g_mutex_unlock(&vrmFakeLock);
    return &m->mr;
}

static int
vrmFakeDereg(vrmRdmaDevice *d, struct ibv_mr *mr)
{
    vrmFakeDevice *dev = (vrmFakeDevice *)d;
    bool found;

    if (dev->threaded)
        g_mutex_lock(&vrmFakeLock);
    found = g_ptr_array_remove(dev->mrs, mr);
    if (dev->threaded)
        g_mutex_unlock(&vrmFakeLock);
    if (!found) {
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
    if (qp->armed && qp->base.eventFd >= 0) {
        guint64 one = 1;

        /* the completion channel's event, as ibv_req_notify_cq() asked */
        qp->armed = false;
        if (write(qp->base.eventFd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            vrmFakeViolate("cannot signal a completion event: %s", g_strerror(errno));
    }
}

static int
vrmFakePostSendLocked(vrmRdmaQP *q, struct ibv_send_wr *wr)
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
vrmFakePostSend(vrmRdmaQP *q, struct ibv_send_wr *wr)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;
    int rc;

    vrmFakeQPLock(qp);
    rc = vrmFakePostSendLocked(q, wr);
    vrmFakeQPDoorbell(qp);
    vrmFakeQPUnlock(qp);
    return rc;
}

static int
vrmFakePostRecvLocked(vrmRdmaQP *q, struct ibv_recv_wr *wr)
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
vrmFakePostRecv(vrmRdmaQP *q, struct ibv_recv_wr *wr)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;
    int rc;

    vrmFakeQPLock(qp);
    rc = vrmFakePostRecvLocked(q, wr);
    /* a SEND of the peer may have waited for this buffer */
    if (qp->peer)
        vrmFakeQPDoorbell(qp->peer);
    vrmFakeQPUnlock(qp);
    return rc;
}

static int
vrmFakePoll(vrmRdmaQP *q, int n, struct ibv_wc *wc)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;
    int got;

    vrmFakeQPLock(qp);
    got = MIN((guint)n, qp->cq->len);
    if (got > 0) {
        memcpy(wc, qp->cq->data, got * sizeof(*wc));
        g_array_remove_range(qp->cq, 0, got);
    }
    vrmFakeQPUnlock(qp);
    return got;
}

static int
vrmFakeArm(vrmRdmaQP *q)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;

    vrmFakeQPLock(qp);
    qp->armed = true;
    vrmFakeQPUnlock(qp);
    return 0;
}

static int
vrmFakeTakeEvents(vrmRdmaQP *q)
{
    guint64 n = 0;

    if (q->eventFd < 0)
        return 0;
    if (read(q->eventFd, &n, sizeof(n)) < 0)
        return 0;               /* EAGAIN: none */
    return (int)n;
}

static void vrmFakeNICStop(vrmFakeNIC *nic);

static void
vrmFakeQPFree(vrmRdmaQP *q)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;

    if (qp->nic) {
        vrmFakeNIC *nic = qp->nic;

        /* the NIC first: it may still carry towards this queue pair */
        vrmFakeNICStop(nic);
        nic->qp[nic->qp[0] == qp ? 0 : 1] = NULL;
        if (!nic->qp[0] && !nic->qp[1]) {
            g_cond_clear(&nic->cond);
            g_free(nic);
        }
        if (q->eventFd >= 0)
            close(q->eventFd);
    }
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
            vrmFakeCopy((void *)(guintptr)r.addr, buf, len);
        vrmFakeComplete(qp, r.wrId, IBV_WC_SUCCESS, IBV_WC_RECV, len, 0);
    }
    return true;
}

/* With vrmFakeLock held when a NIC runs: it is dropped for the copy */
static int
vrmFakeQPDeliverLocked(vrmRdmaQP *q, int max)
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
                /* the DMA: only this thread takes work off this wire,
                 * and the peer reads the bytes only once told of them */
                vrmFakeQPUnlock(qp);
                vrmFakeCopy((void *)(guintptr)s->remoteAddr, (void *)(guintptr)s->addr,
                            s->length);
                vrmFakeQPLock(qp);
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

int
vrmFakeQPDeliver(vrmRdmaQP *q, int max)
{
    g_assert(!((vrmFakeQP *)q)->nic);
    return vrmFakeQPDeliverLocked(q, max);
}

static gpointer
vrmFakeNICThread(gpointer opaque)
{
    vrmFakeNIC *nic = opaque;
    struct timespec cpu;

    g_mutex_lock(&vrmFakeLock);
    while (!nic->stop) {
        int moved = vrmFakeQPDeliverLocked(&nic->qp[0]->base, 64) +
                    vrmFakeQPDeliverLocked(&nic->qp[1]->base, 64);

        if (moved)
            continue;
        nic->sleeping = true;
        g_cond_wait(&nic->cond, &vrmFakeLock);
        nic->sleeping = false;
    }
    g_mutex_unlock(&vrmFakeLock);
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        __atomic_add_fetch(&vrmFakeDMATotal.cpuNs,
                           (guint64)cpu.tv_sec * 1000000000ull + cpu.tv_nsec,
                           __ATOMIC_RELAXED);
    return NULL;
}

static void
vrmFakeNICStop(vrmFakeNIC *nic)
{
    if (!nic->thread)
        return;
    g_mutex_lock(&vrmFakeLock);
    nic->stop = true;
    g_cond_signal(&nic->cond);
    g_mutex_unlock(&vrmFakeLock);
    g_thread_join(g_steal_pointer(&nic->thread));
}

void
vrmFakeQPStartNIC(vrmRdmaQP *q)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;
    vrmFakeNIC *nic = g_new0(vrmFakeNIC, 1);
    int i;

    g_assert(qp->peer && !qp->nic && !qp->peer->nic);
    g_cond_init(&nic->cond);
    nic->qp[0] = qp;
    nic->qp[1] = qp->peer;
    for (i = 0; i < 2; i++) {
        nic->qp[i]->base.eventFd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        g_assert(nic->qp[i]->base.eventFd >= 0);
        ((vrmFakeDevice *)nic->qp[i]->base.dev)->threaded = true;
        nic->qp[i]->nic = nic;
    }
    nic->thread = g_thread_new("vrm-fake-nic", vrmFakeNICThread, nic);
}

void
vrmFakeQPStopNIC(vrmRdmaQP *q)
{
    vrmFakeQP *qp = (vrmFakeQP *)q;

    if (qp->nic)
        vrmFakeNICStop(qp->nic);
}

void
vrmFakeDMAGet(vrmFakeDMA *dma)
{
    dma->bytes = __atomic_load_n(&vrmFakeDMATotal.bytes, __ATOMIC_RELAXED);
    dma->copies = __atomic_load_n(&vrmFakeDMATotal.copies, __ATOMIC_RELAXED);
    dma->cpuNs = __atomic_load_n(&vrmFakeDMATotal.cpuNs, __ATOMIC_RELAXED);
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
