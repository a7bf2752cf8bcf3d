/*
 * vrmhelpermetrics.h: virt-rdmad's per-host metrics for Prometheus
 *
 * The helper keeps a few per-host totals and writes them, in Prometheus'
 * text exposition format, as virt_rdma.prom into node-exporter's textfile
 * directory ([metrics] textfile-dir). docs/metrics.rst names each metric;
 * vrmHelperMetricTable below is where they are declared, and the only
 * place: formatting, the unit test and the documentation test read it.
 *
 * Only aggregates go into the file: no domain name, UUID, peer or error
 * text (the file is 0644, metrics are read by anybody on the host). Label
 * values come from the helper's own tables (vrmJobState, vrmErrorCode),
 * and are escaped anyway.
 *
 * Counters start at 0 with the helper: Prometheus' rate() takes a restart
 * as a counter reset.
 *
 * Public API summary
 * ------------------
 *   vrmHelperMetricsFormat(m)              the file's text for a snapshot
 *   vrmHelperMetricsWrite(dir, text)       dir/virt_rdma.prom, atomically:
 *                                          a temporary file, fsync, rename;
 *                                          -1 + VRM_ERR_SYSTEM on error
 *   vrmHelperMetricsAppendFamily(buf, metric)
 *   vrmHelperMetricsAppendSample(buf, metric, labels, value)
 *                                          the two line kinds, for the
 *                                          formatter and the tests
 *   vrmHelperMetricsEscapeLabel(value)     \\, \" and \n escaped
 */
#pragma once

#include <glib.h>

#include "vrmcontrol.h"
#include "vrmerror.h"

#define VRM_HELPER_METRICS_FILE "virt_rdma.prom"

typedef enum {
    VRM_METRIC_JOBS_FINISHED,       /* counter {direction, outcome} */
    VRM_METRIC_BYTES,               /* counter {direction} */
    VRM_METRIC_JOBS_RUNNING,        /* gauge {direction} */
    VRM_METRIC_PINNED,              /* gauge */
    VRM_METRIC_PINNED_BUDGET,       /* gauge */
    VRM_METRIC_FALLBACKS,           /* counter {cause} */

    VRM_METRIC_LAST
} vrmHelperMetric;

typedef struct {
    const char *name;               /* the sample's name, _total for counters */
    const char *type;               /* "counter" or "gauge" */
    const char *help;
} vrmHelperMetricDef;

/* Indexed by vrmHelperMetric */
extern const vrmHelperMetricDef vrmHelperMetricTable[VRM_METRIC_LAST];

/* The direction label of a job's role: a source job migrates "out" */
const char *vrmHelperMetricsDirection(vrmJobRole role);

/* One moment of the helper, as the file shows it */
typedef struct {
    /* jobs that ended, by role and final state (only final states count) */
    unsigned long long jobsFinished[VRM_JOB_ROLE_LAST][VRM_JOB_STATE_LAST];
    /* bytes moved over RDMA: ended jobs and running ones so far */
    unsigned long long bytes[VRM_JOB_ROLE_LAST];
    unsigned int jobsRunning[VRM_JOB_ROLE_LAST];
    unsigned long long pinnedBytes;     /* the running jobs' allowances */
    unsigned long long pinnedBudget;    /* [limits] max-pinned-bytes */
    /* migrations let go on over TCP, by the code of their cause */
    unsigned long long fallbacks[VRM_ERR_LAST];
} vrmHelperMetrics;

/* A label: name="value" */
typedef struct {
    const char *name;
    const char *value;
} vrmHelperMetricLabel;

char *vrmHelperMetricsEscapeLabel(const char *value);
void vrmHelperMetricsAppendFamily(GString *buf, vrmHelperMetric metric);
void vrmHelperMetricsAppendSample(GString *buf, vrmHelperMetric metric,
                                  const vrmHelperMetricLabel *labels,
                                  size_t nlabels, unsigned long long value);
char *vrmHelperMetricsFormat(const vrmHelperMetrics *m);
int vrmHelperMetricsWrite(const char *dir, const char *text);
