/*
 * vrmjobstat.h: a job's statistics, one table
 *
 * Each statistic that virt-rdmad reports about a job is one row: its name
 * (the attribute of <stats> in the control socket's job record, and, after
 * "rdma.", the typed parameter that vrmDomainGetJobStats adds to libvirt's),
 * where it lives in vrmJobStats, its range, and how `virt-rdma jobinfo`
 * labels and shows it. The control socket's codec, the library's typed
 * parameters and jobinfo's lines all walk this table: a new statistic is a
 * field of vrmJobStats, a row here and its attribute in control.rng.
 *
 * Public API summary
 * ------------------
 *   vrmJobStatCount() / vrmJobStatGet(i)     the rows, in jobinfo's order
 *   vrmJobStatGetValue(stats, row, &value)   false if the record lacks it
 *   vrmJobStatsParseNode(node, &stats)       <stats .../> into vrmJobStats
 *   vrmJobStatsFormatBuf(buf, &stats, level)
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <glib.h>
#include <libxml/tree.h>

/* How a statistic is stored, carried and shown */
typedef enum {
    VRM_JOB_STAT_SIZE,      /* unsigned long long bytes; jobinfo scales it */
    VRM_JOB_STAT_COUNT,     /* unsigned long long */
    VRM_JOB_STAT_MBPS,      /* unsigned int, Mbit/s */
    VRM_JOB_STAT_NS,        /* unsigned long long nanoseconds; jobinfo: ms */
    VRM_JOB_STAT_CHANNELS,  /* unsigned int, 0 to VRM_CHANNELS_MAX */
    VRM_JOB_STAT_CAPS,      /* guint32 capability bits: hex32 in XML,
                             * names in jobinfo (util/vrmcapability.c) */

    VRM_JOB_STAT_KIND_LAST
} vrmJobStatKind;

typedef struct {
    const char *name;       /* <stats> attribute; typed parameter "rdma." NAME */
    vrmJobStatKind kind;
    size_t offset;          /* of the value in vrmJobStats */
    bool optional;          /* older helpers leave it out; its presence
                             * flag is the bool at presentOffset */
    size_t presentOffset;
    const char *label;      /* N_(): jobinfo's label */
} vrmJobStatInfo;

typedef struct _vrmJobStats vrmJobStats;
/* The values; each is a row of the table in vrmjobstat.c */
struct _vrmJobStats {
    unsigned long long bytesSent;
    unsigned long long bytesReceived;
    unsigned int mbps;                  /* current or final rate, Mbit/s */
    unsigned long long chunks;          /* chunks written */
    unsigned long long pinnedBytes;     /* bytes registered at the peak */
    unsigned long long registrationNs;  /* time spent registering memory */
    unsigned int channels;              /* channels open (or used) */
    bool hasCpu;                        /* cpuNs known (older helpers do not send it) */
    unsigned long long cpuNs;           /* the engine's own CPU time, user + system */
    bool hasCapabilities;               /* older helpers do not send them */
    guint32 capabilities;               /* agreed on the engines' first channel */
};

size_t vrmJobStatCount(void);
const vrmJobStatInfo *vrmJobStatGet(size_t i);
/* The typed parameter's type: VIR_TYPED_PARAM_UINT for the kinds that are
 * unsigned int in vrmJobStats, ULLONG for the others. */
bool vrmJobStatIsUInt(const vrmJobStatInfo *row);
bool vrmJobStatGetValue(const vrmJobStats *stats, const vrmJobStatInfo *row,
                        unsigned long long *value);
int vrmJobStatsParseNode(xmlNodePtr node, vrmJobStats *stats);
void vrmJobStatsFormatBuf(GString *buf, const vrmJobStats *stats, unsigned int level);
