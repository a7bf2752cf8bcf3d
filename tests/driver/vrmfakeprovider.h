/*
 * vrmfakeprovider.h: a FAKE verbs provider for the unit tests and fuzzers
 *
 * Implements vrmRdmaOps (driver/rdma/vrmrdma.h) in memory: two fake queue
 * pairs joined by a wire that the test drives one work request at a time,
 * RDMA WRITE copying into the peer's registered memory, SEND consuming the
 * peer's posted receive buffers. It checks what real hardware would refuse
 * and what the protocol promises, and records the first broken rule as a
 * violation (tests assert there is none):
 *   - every local scatter/gather entry lies inside a registration of its
 *     own device with the access it needs;
 *   - the send queue, the receive queue and the completion queue never hold
 *     more than their size.
 * What a peer can get wrong (a remote key or address outside what the
 * other side registered, a SEND longer than the receive buffer) ends as an
 * error completion, as on hardware, not as a violation.
 */
#pragma once

#include <stdbool.h>

#include "vrmrdma.h"

vrmRdmaDevice *vrmFakeDeviceNew(const char *name);
/* The device's port is down from now on (vrmRdmaQPPortDown) */
void vrmFakeSetPortDown(vrmRdmaDevice *dev, bool down);
/* Queue pairs on @a and @b joined by a wire, each sized as its side asks */
void vrmFakeQPPair(vrmRdmaDevice *a, vrmRdmaDevice *b, const guint32 sendSize[2],
                   const guint32 recvSize[2], const int cqe[2],
                   vrmRdmaQP **qa, vrmRdmaQP **qb);

/* Carry up to @max posted send work requests of @qp to its peer, in
 * order; returns how many. One waiting for a receive buffer stays. */
int vrmFakeQPDeliver(vrmRdmaQP *qp, int max);
/* Work requests posted on @qp and not yet carried */
guint32 vrmFakeQPPending(const vrmRdmaQP *qp);
/* As if the peer had sent @len bytes (a SEND) / a WRITE_WITH_IMM @imm */
void vrmFakeQPInject(vrmRdmaQP *qp, const void *buf, size_t len);
void vrmFakeQPInjectImm(vrmRdmaQP *qp, guint32 imm);
/* @qp goes to the error state, as librdmacm moves it on the peer's
 * DISCONNECTED: its work requests complete flushed from now on */
void vrmFakeQPSetError(vrmRdmaQP *qp);
/* The status a receive too short for its SEND completes with: the
 * verbs' IBV_WC_LOC_LEN_ERR (the default), or what rxe reports,
 * IBV_WC_LOC_QP_OP_ERR (its copy into the buffer fails as malformed) */
void vrmFakeSetOversizeStatus(int status);

/*
 * A NIC thread for the queue pair @qp and its peer (benchmarks,
 * tests/bench/vrmbenchnative.c): it carries their work requests itself,
 * so the channels may run in their own progress threads, and signals
 * each queue pair's completion events on an eventfd (eventFd), as a
 * completion channel does. Once it runs, vrmFakeQPDeliver() must not be
 * called on them. Stop it before the channels free their queue pairs
 * (vrmFakeQPFree stops it otherwise).
 */
void vrmFakeQPStartNIC(vrmRdmaQP *qp);
void vrmFakeQPStopNIC(vrmRdmaQP *qp);

/* What every fake queue pair has copied as a NIC's DMA would (RDMA
 * WRITE payloads and SENDs into receive buffers), since the start */
typedef struct {
    guint64 bytes;
    guint64 copies;             /* memcpy calls */
    guint64 cpuNs;              /* CPU time of the NIC threads that ended */
} vrmFakeDMA;
void vrmFakeDMAGet(vrmFakeDMA *dma);

/* The first broken rule since the last reset, or NULL */
const char *vrmFakeViolation(void);
void vrmFakeViolationReset(void);
