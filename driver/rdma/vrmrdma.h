/*
 * vrmrdma.h: thin verbs provider for the transport
 *
 * One vrmRdmaDevice per verbs context (the one rdma_cm picked for an
 * address): the protection domain and the device limits every queue size is
 * clamped to. Completion queues come with their completion channel; memory
 * registrations are timed for the statistics. Nothing here keeps state shared
 * between threads: a device is created and freed by the engine's main thread,
 * a CQ belongs to the progress thread of one channel.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/* Named QP settings (see docs/protocol.rst, "Selective signaling") */
#define VRM_RDMA_RETRY_COUNT 7          /* transport retries before an error */
#define VRM_RDMA_RNR_RETRY_COUNT 7      /* 7 = retry receiver-not-ready forever */
#define VRM_RDMA_ACK_TIMEOUT 17         /* 4.096 us * 2^17 = 0.54 s per retry */
#define VRM_RDMA_RESOLVE_TIMEOUT_MS 2000
#define VRM_RDMA_CQ_ACK_BATCH 16        /* ack CQ events in batches */
#define VRM_RDMA_RESPONDER_RESOURCES 1

typedef struct {
    struct ibv_context *ctx;            /* not owned: from the rdma_cm id */
    struct ibv_pd *pd;                  /* owned */
    struct ibv_device_attr attr;        /* limits reported by the device */
    bool iwarp;                         /* no immediate data on iWARP */
    char *name;                         /* ibv_get_device_name() */
    void *owner;                        /* not owned: the user of the device */
} vrmRdmaDevice;

vrmRdmaDevice *vrmRdmaDeviceNew(struct ibv_context *ctx);
void vrmRdmaDeviceFree(vrmRdmaDevice *dev);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmRdmaDevice, vrmRdmaDeviceFree);

/* `want` clamped to the device limit `max`, logged when clamped */
guint32 vrmRdmaClamp(guint32 want, int max, const char *what);

typedef struct {
    struct ibv_comp_channel *chan;      /* owned, non-blocking fd */
    struct ibv_cq *cq;                  /* owned */
    unsigned int unacked;               /* events got, not yet acked */
    guint64 fault_after;                /* test hook: fail the N-th completion */
    guint64 polled;                     /* completions returned so far */
} vrmRdmaCQ;

vrmRdmaCQ *vrmRdmaCQNew(vrmRdmaDevice *dev, int cqe, void *context);
void vrmRdmaCQFree(vrmRdmaCQ *cq);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmRdmaCQ, vrmRdmaCQFree);
int vrmRdmaCQArm(vrmRdmaCQ *cq);
/* Consume pending completion events (non-blocking); returns how many */
int vrmRdmaCQTakeEvents(vrmRdmaCQ *cq);
/* ibv_poll_cq with the failure-injection point used by the tests */
int vrmRdmaCQPoll(vrmRdmaCQ *cq, int n, struct ibv_wc *wc);

struct ibv_mr *vrmRdmaRegister(vrmRdmaDevice *dev, void *addr, size_t len,
                               int access, guint64 *usec);
int vrmRdmaDeregister(struct ibv_mr *mr);

/* Error class and a sentence for a failed work completion */
int vrmRdmaWcStatusToError(enum ibv_wc_status status, const char **what);

const char *vrmRdmaCMEventName(enum rdma_cm_event_type type);
