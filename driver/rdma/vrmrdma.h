/*
 * vrmrdma.h: the verbs provider of the transport
 *
 * Everything that touches a device goes through here: memory registration
 * (timed for the stats), queue pair create and destroy (with its completion
 * queue and completion channel), every post (one doorbell per call, counted)
 * and every completion-queue poll, where the failure-injection point sits.
 * The operations are a table (vrmRdmaOps), in the manner of SPDK's
 * rdma_provider: the verbs one here, a FAKE one in the unit tests
 * (tests/driver/vrmfakeprovider.c) that runs the channel logic without a
 * device and checks every work request against what is registered.
 *
 * Threads: a device is created and freed by the engine's main thread; a
 * queue pair is created and freed by the main thread and used in between by
 * the progress thread of its channel only.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/* Named QP settings (see docs/protocol.rst, "Queue pair settings") */
#define VRM_RDMA_RETRY_COUNT 7          /* transport retries before an error */
#define VRM_RDMA_RNR_RETRY_COUNT 7      /* 7 = retry receiver-not-ready forever */
#define VRM_RDMA_ACK_TIMEOUT 17         /* 4.096 us * 2^17 = 0.54 s per retry */
#define VRM_RDMA_RESOLVE_TIMEOUT_MS 2000
#define VRM_RDMA_CQ_ACK_BATCH 16        /* ack CQ events in batches */
#define VRM_RDMA_RESPONDER_RESOURCES 1
#define VRM_RDMA_RXE_VENDOR_ID 0xffffffu /* Soft-RoCE's vendor_id (rxe_param.h) */
#define VRM_RDMA_MTU_MIN 256u           /* IBV_MTU_256: every path carries it */

typedef struct _vrmRdmaDevice vrmRdmaDevice;
typedef struct _vrmRdmaQP vrmRdmaQP;

/* A provider: the operations behind a device and its queue pairs */
typedef struct {
    struct ibv_mr *(*reg)(vrmRdmaDevice *dev, void *addr, size_t len, int access);
    int (*dereg)(vrmRdmaDevice *dev, struct ibv_mr *mr);
    int (*postSend)(vrmRdmaQP *qp, struct ibv_send_wr *wr);   /* errno value */
    int (*postRecv)(vrmRdmaQP *qp, struct ibv_recv_wr *wr);   /* errno value */
    int (*poll)(vrmRdmaQP *qp, int n, struct ibv_wc *wc);     /* < 0: failed */
    int (*arm)(vrmRdmaQP *qp);                                 /* errno value */
    int (*takeEvents)(vrmRdmaQP *qp);                          /* -1 reported */
    bool (*portDown)(vrmRdmaQP *qp);                           /* optional */
    guint32 (*maxMessage)(vrmRdmaQP *qp);                      /* optional */
    void (*qpFree)(vrmRdmaQP *qp);
    void (*devFree)(vrmRdmaDevice *dev);
} vrmRdmaOps;

struct _vrmRdmaDevice {
    const vrmRdmaOps *ops;
    char *name;                         /* ibv_get_device_name() */
    int maxQpWr;                        /* limits every queue is clamped to */
    int maxCqe;
    bool iwarp;                         /* no immediate data on iWARP */
    guint32 maxMessage;                 /* bytes a message may have to be sent
                                         * as one packet on a device that must
                                         * not retransmit longer ones (Soft-RoCE,
                                         * see vrmRdmaQPMaxMessage), 0: any */
    struct ibv_context *ctx;            /* verbs: not owned, from the rdma_cm id */
    struct ibv_pd *pd;                  /* verbs: owned */
    void *owner;                        /* not owned: the user of the device */
};

struct _vrmRdmaQP {
    vrmRdmaDevice *dev;                 /* not owned */
    int eventFd;                        /* readable when a completion is due, -1: none */
    guint32 sendSize;                   /* work requests the send queue holds */
    guint32 recvSize;
    guint64 faultAfter;                 /* test hook: fail the N-th completion */
    enum ibv_wc_status faultStatus;     /* ... with this status (unit tests; the
                                         * engine's hook: IBV_WC_GENERAL_ERR) */
    guint64 polled;                     /* completions returned so far */
    guint64 doorbells;                  /* posts made (each rings the doorbell once) */
};

/* ---- devices ---- */
vrmRdmaDevice *vrmRdmaDeviceNew(struct ibv_context *ctx);      /* verbs */
void vrmRdmaDeviceFree(vrmRdmaDevice *dev);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmRdmaDevice, vrmRdmaDeviceFree);

/* `want` clamped to the device limit `max`, logged when clamped */
guint32 vrmRdmaClamp(guint32 want, int max, const char *what);

struct ibv_mr *vrmRdmaRegister(vrmRdmaDevice *dev, void *addr, size_t len,
                               int access, guint64 *usec);
int vrmRdmaDeregister(vrmRdmaDevice *dev, struct ibv_mr *mr);

/* ---- queue pairs ---- */
/* verbs: a CQ of `cqe` entries with its completion channel, and an RC QP on
 * the rdma_cm id; @context comes back in async events */
vrmRdmaQP *vrmRdmaQPNew(vrmRdmaDevice *dev, struct rdma_cm_id *id,
                        guint32 sendSize, guint32 recvSize, int cqe,
                        void *context);
/* For providers: the fields every queue pair has, and the test hook */
void vrmRdmaQPInit(vrmRdmaQP *qp, vrmRdmaDevice *dev, guint32 sendSize,
                   guint32 recvSize);
void vrmRdmaQPFree(vrmRdmaQP *qp);

int vrmRdmaQPPostSend(vrmRdmaQP *qp, struct ibv_send_wr *wr);   /* -1 reported */
int vrmRdmaQPPostRecv(vrmRdmaQP *qp, struct ibv_recv_wr *wr);   /* -1 reported */
/* Poll up to @n completions, through the failure-injection point */
int vrmRdmaQPPoll(vrmRdmaQP *qp, int n, struct ibv_wc *wc);
int vrmRdmaQPArm(vrmRdmaQP *qp);
/* Consume pending completion events (non-blocking); returns how many */
int vrmRdmaQPTakeEvents(vrmRdmaQP *qp);
/* The port under @qp is known to be down (its link failed) */
bool vrmRdmaQPPortDown(vrmRdmaQP *qp);
/*
 * The most bytes one work request on @qp may carry, 0 for no limit.
 * Soft-RoCE (rxe) of Linux 6.1 can retransmit a message of several
 * packets wrongly: when the acknowledgement of its last packet arrives
 * while a retry re-sends it, the next retry skips all of its packets and
 * sends an empty one under the next message's first PSN, which shifts
 * every later packet by one (the responder then fails the queue pair with
 * "remote invalid request", or delivers a message twice; issue 39,
 * docs/reliability.rst). A message of one packet cannot be caught in the
 * middle of a retry, so on rxe every work request is kept within the path
 * MTU; other devices retransmit in hardware and have no limit.
 */
guint32 vrmRdmaQPMaxMessage(vrmRdmaQP *qp);

/* Error class and a sentence for a failed work completion */
int vrmRdmaWcStatusToError(enum ibv_wc_status status, const char **what);

const char *vrmRdmaCMEventName(enum rdma_cm_event_type type);
