/*
 * vrmhelpermetrics.c: virt-rdmad's per-host metrics for Prometheus
 *
 * Adding a metric is adding a row to vrmHelperMetricTable and its samples
 * to vrmHelperMetricsFormat (and a line to docs/metrics.rst, which the
 * unit test checks).
 */
#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vrmhelpermetrics.h"
#include "vrmi18n.h"

/* Not translated: names and help are a contract with the fleet's queries,
 * the same on every host whatever its locale */
const vrmHelperMetricDef vrmHelperMetricTable[VRM_METRIC_LAST] = {
    [VRM_METRIC_JOBS_FINISHED] = {
        "virt_rdma_jobs_finished_total", "counter",
        "RDMA migration jobs that ended on this host, by direction and outcome.",
    },
    [VRM_METRIC_BYTES] = {
        "virt_rdma_bytes_total", "counter",
        "Bytes RDMA migration jobs moved (sent out, received in), ended and running jobs.",
    },
    [VRM_METRIC_JOBS_RUNNING] = {
        "virt_rdma_jobs_running", "gauge",
        "RDMA migration jobs running on this host, by direction.",
    },
    [VRM_METRIC_PINNED] = {
        "virt_rdma_pinned_bytes", "gauge",
        "Locked memory the running jobs hold in this host's budget, in bytes.",
    },
    [VRM_METRIC_PINNED_BUDGET] = {
        "virt_rdma_pinned_budget_bytes", "gauge",
        "This host's budget of locked memory for RDMA migrations ([limits] max-pinned-bytes), in bytes.",
    },
    [VRM_METRIC_FALLBACKS] = {
        "virt_rdma_fallbacks_total", "counter",
        "Incoming migrations that went on over TCP because RDMA could not carry them, by cause.",
    },
};

/* The label of each role; the states' and causes' labels are their
 * enums' names (vrmJobStateTypeToString, vrmErrorCodeTypeToString) */
static const char *const vrmHelperMetricDirections[] = {
    [VRM_JOB_ROLE_SOURCE] = "out",
    [VRM_JOB_ROLE_DESTINATION] = "in",
};
G_STATIC_ASSERT(G_N_ELEMENTS(vrmHelperMetricDirections) == VRM_JOB_ROLE_LAST);

const char *
vrmHelperMetricsDirection(vrmJobRole role)
{
    if ((int)role < 0 || role >= VRM_JOB_ROLE_LAST)
        return NULL;
    return vrmHelperMetricDirections[role];
}

/* The exposition format escapes \ and newline in help text, and also "
 * in label values */
static void
vrmHelperMetricsAppendEscaped(GString *buf, const char *s, bool quotes)
{
    for (; *s; s++) {
        if (*s == '\\')
            g_string_append(buf, "\\\\");
        else if (*s == '\n')
            g_string_append(buf, "\\n");
        else if (*s == '"' && quotes)
            g_string_append(buf, "\\\"");
        else
            g_string_append_c(buf, *s);
    }
}

char *
vrmHelperMetricsEscapeLabel(const char *value)
{
    GString *buf = g_string_new(NULL);

    vrmHelperMetricsAppendEscaped(buf, value, true);
    return g_string_free(buf, FALSE);
}

void
vrmHelperMetricsAppendFamily(GString *buf, vrmHelperMetric metric)
{
    const vrmHelperMetricDef *def = &vrmHelperMetricTable[metric];

    g_string_append_printf(buf, "# HELP %s ", def->name);
    vrmHelperMetricsAppendEscaped(buf, def->help, false);
    g_string_append_printf(buf, "\n# TYPE %s %s\n", def->name, def->type);
}

void
vrmHelperMetricsAppendSample(GString *buf, vrmHelperMetric metric,
                             const vrmHelperMetricLabel *labels, size_t nlabels,
                             unsigned long long value)
{
    size_t i;

    g_string_append(buf, vrmHelperMetricTable[metric].name);
    for (i = 0; i < nlabels; i++) {
        g_string_append_printf(buf, "%s%s=\"", i ? "," : "{", labels[i].name);
        vrmHelperMetricsAppendEscaped(buf, labels[i].value, true);
        g_string_append_c(buf, '"');
    }
    g_string_append_printf(buf, "%s %llu\n", nlabels ? "}" : "", value);
}

char *
vrmHelperMetricsFormat(const vrmHelperMetrics *m)
{
    GString *buf = g_string_new(NULL);
    int role;
    int state;
    int code;

    /* every series from the start, at 0: a rate needs two samples */
    vrmHelperMetricsAppendFamily(buf, VRM_METRIC_JOBS_FINISHED);
    for (role = 0; role < VRM_JOB_ROLE_LAST; role++) {
        for (state = 0; state < VRM_JOB_STATE_LAST; state++) {
            vrmHelperMetricLabel labels[] = {
                { "direction", vrmHelperMetricsDirection(role) },
                { "outcome", vrmJobStateTypeToString(state) },
            };

            if (!vrmJobStateIsFinal(state))
                continue;
            vrmHelperMetricsAppendSample(buf, VRM_METRIC_JOBS_FINISHED, labels,
                                         G_N_ELEMENTS(labels),
                                         m->jobsFinished[role][state]);
        }
    }
    vrmHelperMetricsAppendFamily(buf, VRM_METRIC_BYTES);
    for (role = 0; role < VRM_JOB_ROLE_LAST; role++) {
        vrmHelperMetricLabel label = { "direction", vrmHelperMetricsDirection(role) };

        vrmHelperMetricsAppendSample(buf, VRM_METRIC_BYTES, &label, 1, m->bytes[role]);
    }
    vrmHelperMetricsAppendFamily(buf, VRM_METRIC_JOBS_RUNNING);
    for (role = 0; role < VRM_JOB_ROLE_LAST; role++) {
        vrmHelperMetricLabel label = { "direction", vrmHelperMetricsDirection(role) };

        vrmHelperMetricsAppendSample(buf, VRM_METRIC_JOBS_RUNNING, &label, 1,
                                     m->jobsRunning[role]);
    }
    vrmHelperMetricsAppendFamily(buf, VRM_METRIC_PINNED);
    vrmHelperMetricsAppendSample(buf, VRM_METRIC_PINNED, NULL, 0, m->pinnedBytes);
    vrmHelperMetricsAppendFamily(buf, VRM_METRIC_PINNED_BUDGET);
    vrmHelperMetricsAppendSample(buf, VRM_METRIC_PINNED_BUDGET, NULL, 0, m->pinnedBudget);
    vrmHelperMetricsAppendFamily(buf, VRM_METRIC_FALLBACKS);
    /* "ok" is no cause */
    for (code = VRM_ERR_OK + 1; code < VRM_ERR_LAST; code++) {
        vrmHelperMetricLabel label = { "cause", vrmErrorCodeTypeToString(code) };

        vrmHelperMetricsAppendSample(buf, VRM_METRIC_FALLBACKS, &label, 1,
                                     m->fallbacks[code]);
    }
    return g_string_free(buf, FALSE);
}

/*
 * Through a descriptor of the directory: the temporary file and the rename
 * stay in the directory that was opened, whatever its path becomes. The
 * temporary name does not end in .prom: node-exporter never reads it
 * half-written.
 */
int
vrmHelperMetricsWrite(const char *dir, const char *text)
{
    static const char tmpName[] = "." VRM_HELPER_METRICS_FILE ".tmp";
    size_t len = strlen(text);
    size_t done = 0;
    int dfd;
    int fd;

    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        vrmReportSystemError(errno, _("cannot open the metrics directory %1$s"), dir);
        return -1;
    }
    if ((fd = openat(dfd, tmpName, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                     0644)) < 0) {
        vrmReportSystemError(errno, _("cannot create %1$s/%2$s"), dir, tmpName);
        close(dfd);
        return -1;
    }
    /* metrics are no secret: readable by node-exporter's user, whatever
     * the helper's umask */
    if (fchmod(fd, 0644) < 0)
        goto error;
    while (done < len) {
        ssize_t n = write(fd, text + done, len - done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto error;
        done += n;
    }
    if (fsync(fd) < 0)
        goto error;
    if (close(fd) < 0) {
        fd = -1;
        goto error;
    }
    fd = -1;
    if (renameat(dfd, tmpName, dfd, VRM_HELPER_METRICS_FILE) < 0)
        goto error;
    /* the rename itself survives a crash */
    fsync(dfd);
    close(dfd);
    return 0;

 error:
    vrmReportSystemError(errno, _("cannot write the metrics file %1$s/%2$s"),
                         dir, VRM_HELPER_METRICS_FILE);
    if (fd >= 0)
        close(fd);
    unlinkat(dfd, tmpName, 0);
    close(dfd);
    return -1;
}
