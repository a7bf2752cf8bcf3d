/*
 * vrmstats.h: per-channel counters (the record is the contract's vrmenginestats.h)
 *
 * Lock rule: each counter is written only by the progress thread of its
 * channel, with relaxed atomic stores; any thread may read a snapshot with
 * vrmStatsSnapshot(). No lock is involved.
 */
#pragma once

#include <glib.h>

typedef enum {
    VRM_STAT_BYTES_SENT = 0,        /* socket -> peer */
    VRM_STAT_BYTES_RECEIVED,        /* peer -> socket */
    VRM_STAT_CHUNKS_WRITTEN,        /* RDMA WRITEs posted */
    VRM_STAT_CHUNKS_RECEIVED,       /* chunks announced by the peer */
    VRM_STAT_REGISTRATIONS,         /* memory registrations made */
    VRM_STAT_REGISTRATION_US,       /* time spent in them */
    VRM_STAT_PINNED_BYTES,          /* bytes registered now */
    VRM_STAT_CREDIT_STALLS,         /* had bytes, had no credit */
    VRM_STAT_COMPLETIONS,           /* work completions polled */
    VRM_STAT_CQ_POLLS,              /* polls of the CQ */
    VRM_STAT_CQ_IDLE_POLLS,         /* polls that found nothing */
    VRM_STAT_CONTROL_SENT,          /* control messages sent */
    VRM_STAT_CONTROL_RECEIVED,      /* control messages received */
    VRM_STAT_DOORBELLS,             /* posts to the device */
    VRM_STAT_BYTES_SPLICED,         /* of BYTES_RECEIVED: into the socket without a copy */

    VRM_STAT_LAST
} vrmStat;

typedef struct {
    guint64 v[VRM_STAT_LAST];
} vrmStats;

static inline void
vrmStatsAdd(vrmStats *s, vrmStat which, guint64 n)
{
    __atomic_store_n(&s->v[which],
                     __atomic_load_n(&s->v[which], __ATOMIC_RELAXED) + n,
                     __ATOMIC_RELAXED);
}

static inline void
vrmStatsSub(vrmStats *s, vrmStat which, guint64 n)
{
    __atomic_store_n(&s->v[which],
                     __atomic_load_n(&s->v[which], __ATOMIC_RELAXED) - n,
                     __ATOMIC_RELAXED);
}

void vrmStatsSnapshot(const vrmStats *s, vrmStats *out);
void vrmStatsAccumulate(vrmStats *total, const vrmStats *s);

/* Megabits per second, as the seed defines mbps: bytes * 8 / 10^6 / s */
double vrmStatsMbps(guint64 bytes, double seconds);
