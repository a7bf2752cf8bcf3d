/*
 * vrmstats.c: per-channel counters
 */
#include <config.h>

#include "vrmstats.h"

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
