/*
 * vrmjobstat.c: a job's statistics, one table
 *
 * The rows are in the order `virt-rdma jobinfo` shows them.
 */
#include <config.h>

#include <string.h>

#include "vrmjobstat.h"
#include "vrmenum.h"
#include "vrmlimits.h"
#include "vrmxmlutil.h"
#include "vrmi18n.h"

#define OFF(field) offsetof(vrmJobStats, field)

static const vrmJobStatInfo vrmJobStatTable[] = {
    { "bytes-sent", VRM_JOB_STAT_SIZE, OFF(bytesSent), false, 0, N_("RDMA bytes sent:") },
    { "bytes-received", VRM_JOB_STAT_SIZE, OFF(bytesReceived), false, 0,
      N_("RDMA bytes received:") },
    { "mbps", VRM_JOB_STAT_MBPS, OFF(mbps), false, 0, N_("RDMA rate:") },
    { "chunks", VRM_JOB_STAT_COUNT, OFF(chunks), false, 0, N_("RDMA chunks:") },
    { "pinned-bytes", VRM_JOB_STAT_SIZE, OFF(pinnedBytes), false, 0, N_("RDMA pinned:") },
    { "registration-ns", VRM_JOB_STAT_NS, OFF(registrationNs), false, 0,
      N_("RDMA registration:") },
    { "channels", VRM_JOB_STAT_CHANNELS, OFF(channels), false, 0, N_("RDMA channels:") },
    { "cpu-ns", VRM_JOB_STAT_NS, OFF(cpuNs), true, OFF(hasCpu), N_("RDMA engine CPU:") },
    { "capabilities", VRM_JOB_STAT_CAPS, OFF(capabilities), true, OFF(hasCapabilities),
      N_("RDMA capabilities:") },
};

VRM_TABLE_IMPL(vrmJobStatInfo, vrmJobStatTable, vrmJobStatCount, vrmJobStatGet);

bool
vrmJobStatIsUInt(const vrmJobStatInfo *row)
{
    switch (row->kind) {
    case VRM_JOB_STAT_MBPS:
    case VRM_JOB_STAT_CHANNELS:
    case VRM_JOB_STAT_CAPS:
        return true;
    case VRM_JOB_STAT_SIZE:
    case VRM_JOB_STAT_COUNT:
    case VRM_JOB_STAT_NS:
    case VRM_JOB_STAT_KIND_LAST:
        break;
    }
    return false;
}

static bool
vrmJobStatPresent(const vrmJobStats *stats, const vrmJobStatInfo *row)
{
    return !row->optional || *(const bool *)((const char *)stats + row->presentOffset);
}

bool
vrmJobStatGetValue(const vrmJobStats *stats, const vrmJobStatInfo *row,
                   unsigned long long *value)
{
    const char *field = (const char *)stats + row->offset;

    if (!vrmJobStatPresent(stats, row))
        return false;
    if (row->kind == VRM_JOB_STAT_CAPS)
        *value = *(const guint32 *)field;
    else if (vrmJobStatIsUInt(row))
        *value = *(const unsigned int *)field;
    else
        *value = *(const unsigned long long *)field;
    return true;
}

/* one attribute; 1 if there, 0 if an optional one is not, -1 on error */
static int
vrmJobStatParseOne(xmlNodePtr node, const vrmJobStatInfo *row, vrmJobStats *stats)
{
    char *field = (char *)stats + row->offset;

    switch (row->kind) {
    case VRM_JOB_STAT_SIZE:
    case VRM_JOB_STAT_COUNT:
    case VRM_JOB_STAT_NS:
        return vrmXMLPropULLong(node, row->name, !row->optional, 0, G_MAXUINT64,
                                (unsigned long long *)field);
    case VRM_JOB_STAT_MBPS:
        return vrmXMLPropUInt(node, row->name, !row->optional, 0, G_MAXUINT32,
                              (unsigned int *)field);
    case VRM_JOB_STAT_CHANNELS:
        return vrmXMLPropUInt(node, row->name, !row->optional, 0, VRM_CHANNELS_MAX,
                              (unsigned int *)field);
    case VRM_JOB_STAT_CAPS:
        return vrmXMLPropHex32(node, row->name, !row->optional, (guint32 *)field);
    case VRM_JOB_STAT_KIND_LAST:
        break;
    }
    g_assert_not_reached();
}

int
vrmJobStatsParseNode(xmlNodePtr node, vrmJobStats *stats)
{
    const char *attrs[G_N_ELEMENTS(vrmJobStatTable) + 1];
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmJobStatTable); i++)
        attrs[i] = vrmJobStatTable[i].name;
    attrs[i] = NULL;
    if (vrmXMLCheckLeaf(node, attrs) < 0)
        return -1;
    for (i = 0; i < G_N_ELEMENTS(vrmJobStatTable); i++) {
        const vrmJobStatInfo *row = &vrmJobStatTable[i];
        int rc = vrmJobStatParseOne(node, row, stats);

        if (rc < 0)
            return -1;
        if (row->optional)
            *(bool *)((char *)stats + row->presentOffset) = rc == 1;
    }
    return 0;
}

void
vrmJobStatsFormatBuf(GString *buf, const vrmJobStats *stats, unsigned int level)
{
    size_t i;

    vrmXMLIndent(buf, level);
    g_string_append(buf, "<stats");
    for (i = 0; i < G_N_ELEMENTS(vrmJobStatTable); i++) {
        const vrmJobStatInfo *row = &vrmJobStatTable[i];
        unsigned long long v;

        if (!vrmJobStatGetValue(stats, row, &v))
            continue;
        if (row->kind == VRM_JOB_STAT_CAPS)
            g_string_append_printf(buf, " %s=\"0x%08llx\"", row->name, v);
        else
            vrmXMLAttrULLong(buf, row->name, v);
    }
    g_string_append(buf, "/>\n");
}
