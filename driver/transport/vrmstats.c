/*
 * vrmstats.c: per-channel counters and their JSON form
 */
#include <config.h>

#include "vrmstats.h"

static const char *const vrmStatNames[] = {
    "bytes_sent", "bytes_received", "chunks_written", "chunks_received",
    "registrations", "registration_us", "pinned_bytes", "credit_stalls",
    "completions", "cq_polls", "cq_idle_polls", "control_sent",
    "control_received", "doorbells", "bytes_spliced",
};
G_STATIC_ASSERT(G_N_ELEMENTS(vrmStatNames) == VRM_STAT_LAST);

const char *
vrmStatTypeToString(int stat)
{
    if (stat < 0 || stat >= VRM_STAT_LAST)
        return NULL;
    return vrmStatNames[stat];
}

void
vrmStatsSnapshot(const vrmStats *s, vrmStats *out)
{
    size_t i;

    for (i = 0; i < VRM_STAT_LAST; i++)
        out->v[i] = __atomic_load_n(&s->v[i], __ATOMIC_RELAXED);
}

void
vrmStatsAccumulate(vrmStats *total, const vrmStats *s)
{
    size_t i;

    for (i = 0; i < VRM_STAT_LAST; i++)
        total->v[i] += s->v[i];
}

double
vrmStatsMbps(guint64 bytes, double seconds)
{
    if (seconds <= 0)
        return 0;
    return (double)bytes * 8.0 / 1e6 / seconds;
}
