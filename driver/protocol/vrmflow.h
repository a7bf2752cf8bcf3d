/*
 * vrmflow.h: ring and credit accounting of one channel direction
 *
 * Pure bookkeeping, no verbs: the writer side (vrmTxFlow) takes a credit per
 * chunk written into the peer's ring and gets them back with READY; the
 * receiver side (vrmRxFlow) checks that every announced chunk is the one it
 * expects and fits, and decides when to return credits.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>

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
    guint32 uncredited;     /* chunks drained, credit not yet returned */
    guint64 bytes;          /* bytes announced so far */
} vrmRxFlow;

void vrmRxFlowInit(vrmRxFlow *f, guint32 depth, guint32 chunk_len);
/* The peer announced `length` bytes in chunk `index` (DATA) */
int vrmRxFlowFill(vrmRxFlow *f, guint32 index, guint32 length);
/* The same for WRITE_WITH_IMM, where only index % 32 travels */
int vrmRxFlowFillTag(vrmRxFlow *f, guint32 tag, guint32 length,
                     guint32 *index);
/* The oldest filled chunk has been written into the socket */
void vrmRxFlowDrained(vrmRxFlow *f);
/* Credits to send now: a quarter of the ring, or any when `flush`. */
guint32 vrmRxFlowTakeCredits(vrmRxFlow *f, bool flush);
