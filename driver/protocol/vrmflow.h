/*
 * vrmflow.h: ring and credit accounting of one channel direction
 *
 * Pure bookkeeping, no verbs: the writer side (vrmTxFlow) takes a credit per
 * chunk written into the peer's ring and gets them back with READY; the
 * receiver side (vrmRxFlow) checks that every announced chunk is the one it
 * expects and fits, and decides when to return credits; vrmRemoteRing is
 * what the writer knows of the peer's ring: its description and, without
 * pin-all, which chunks the peer has registered on request.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "vrmproto.h"

typedef struct {
    guint32 depth;          /* chunks in the peer's ring */
    guint32 next;           /* index of the next chunk to write */
    guint32 inflight;       /* chunks written, credit not yet returned */
} vrmTxFlow;

void vrmTxFlowInit(vrmTxFlow *f, guint32 depth);
guint32 vrmTxFlowCredits(const vrmTxFlow *f);
/* Take the next chunk; false if no credit is left. */
bool vrmTxFlowTake(vrmTxFlow *f, guint32 *index);
/* Index of the k-th chunk after the next one (k < depth) */
guint32 vrmTxFlowPeek(const vrmTxFlow *f, guint32 k);
/* READY returned `credits`; -1 (reported) if more than in flight. */
int vrmTxFlowCredit(vrmTxFlow *f, guint32 credits);

typedef struct {
    guint32 depth;          /* chunks in our ring */
    guint32 chunk_len;      /* bytes per chunk */
    guint32 fill;           /* index the peer must write next */
    guint32 drain;          /* index to drain into the socket next */
    guint32 filled;         /* chunks written by the peer, not drained */
    guint32 held;           /* drained, but the socket may still read them */
    guint32 uncredited;     /* released, credit not yet returned */
    guint64 bytes;          /* bytes announced so far */
} vrmRxFlow;

void vrmRxFlowInit(vrmRxFlow *f, guint32 depth, guint32 chunk_len);
/* The peer announced `length` bytes in chunk `index` (DATA) */
int vrmRxFlowFill(vrmRxFlow *f, guint32 index, guint32 length);
/* The same for WRITE_WITH_IMM, where only index % 32 travels */
int vrmRxFlowFillTag(vrmRxFlow *f, guint32 tag, guint32 length,
                     guint32 *index);
/* The oldest filled chunk has been written into the socket. It stays held
 * (no credit for the peer to write it again) until released: at once when
 * its bytes were copied, once the reader took them when the socket holds
 * references to the chunk's pages (zero copy). */
void vrmRxFlowDrained(vrmRxFlow *f);
/* The `n` oldest held chunks are free again, in ring order */
void vrmRxFlowReleased(vrmRxFlow *f, guint32 n);
/* Credits to send now: a quarter of the ring, or any when `flush`. */
guint32 vrmRxFlowTakeCredits(vrmRxFlow *f, bool flush);

typedef enum {
    VRM_REMOTE_UNKNOWN = 0,     /* no rkey yet */
    VRM_REMOTE_REQUESTED,       /* in a REGISTER_REQUEST, queued or sent */
    VRM_REMOTE_REGISTERED,      /* rkey known */
} vrmRemoteState;

/* The peer's receive ring, from its RAM_BLOCKS description. Every array has
 * the PEER's depth entries, whatever our own depth is (issue 13 item 4:
 * the request queue once had ours). */
typedef struct {
    guint32 depth;              /* 0 until the first entry */
    guint32 chunk;
    guint32 described;          /* entries received */
    guint64 *addr;
    guint32 *rkey;
    guint8 *state;              /* vrmRemoteState */
    gint64 *reqTime;            /* when REQUESTED (monotonic us), for the stats */
    guint32 *queue;             /* indexes to put into REGISTER_REQUESTs */
    guint32 queued;
} vrmRemoteRing;

void vrmRemoteRingClear(vrmRemoteRing *rr);
bool vrmRemoteRingComplete(const vrmRemoteRing *rr);
/* One entry of the peer's description, checked; -1 reported */
int vrmRemoteRingDescribe(vrmRemoteRing *rr, const vrmProtoRingEntry *e,
                          bool pinAll);
/* Queue requests for the next @window chunks the writer will use, within
 * its credits, that are neither registered nor requested */
void vrmRemoteRingQueueRequests(vrmRemoteRing *rr, const vrmTxFlow *tx,
                                guint32 window, gint64 now);
/* Move up to @max queued indexes into @out; returns how many */
guint32 vrmRemoteRingTakeRequests(vrmRemoteRing *rr, guint32 *out, guint32 max);
/* One REGISTER_RESULT entry, checked against the request; -1 reported.
 * *waited is how long it took (us). */
int vrmRemoteRingRegistered(vrmRemoteRing *rr, const vrmProtoRegResult *r,
                            gint64 now, gint64 *waited);
bool vrmRemoteRingUsable(const vrmRemoteRing *rr, guint32 index);
