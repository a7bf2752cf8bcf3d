/*
 * vrmstats.c: per-channel counters and their JSON form
 */
#include <config.h>

#include "vrmstats.h"

static const char *const vrmStatNames[] = {
    "bytes_sent", "bytes_received", "chunks_written", "chunks_received",
    "registrations", "registration_us", "pinned_bytes", "credit_stalls",
    "completions", "cq_polls", "cq_idle_polls", "control_sent",
    "control_received",
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

void
vrmStatsFormatJSON(GString *buf, const vrmStats *s,
                   double mbps_current, double mbps_average)
{
    size_t i;

    for (i = 0; i < VRM_STAT_LAST; i++)
        g_string_append_printf(buf, "\"%s\": %" G_GUINT64_FORMAT ", ",
                               vrmStatNames[i], s->v[i]);
    g_string_append_printf(buf, "\"mbps_current\": %.2f, \"mbps_average\": %.2f",
                           mbps_current, mbps_average);
}

void
vrmJSONAppendString(GString *buf, const char *s)
{
    const unsigned char *p;

    if (!s) {
        g_string_append(buf, "null");
        return;
    }
    g_string_append_c(buf, '"');
    for (p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            g_string_append(buf, "\\\"");
            break;
        case '\\':
            g_string_append(buf, "\\\\");
            break;
        case '\n':
            g_string_append(buf, "\\n");
            break;
        case '\t':
            g_string_append(buf, "\\t");
            break;
        default:
            if (*p < 0x20)
                g_string_append_printf(buf, "\\u%04x", *p);
            else
                g_string_append_c(buf, *p);
        }
    }
    g_string_append_c(buf, '"');
}
