/*
 * vrmhelpermetricstest.c: the metrics file, read back by Prometheus' own
 * parser (python3-prometheus-client, through vrmmetricsparse.py)
 */
#include <config.h>

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vrmtestutils.h"
#include "vrmerror.h"
#include "vrmhelpermetrics.h"
#include "vrmtestmain.h"

static char *
testHex(const char *s)
{
    GString *buf = g_string_new(NULL);

    for (; *s; s++)
        g_string_append_printf(buf, "%02x", (unsigned char)*s);
    return g_string_free(buf, FALSE);
}

/* What vrmmetricsparse.py prints for @text */
static char *
testParse(const char *text)
{
    g_autofree char *testDir = vrmTestDataDir("helper");
    g_autofree char *script = g_build_filename(testDir, "vrmmetricsparse.py", NULL);
    const char *args[] = { script, NULL };
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;

    if (!vrmTestRunPython(args, "t.prom", text, &out, &err))
        g_error("the Prometheus parser refused the text (is python3-prometheus-client installed?):\n%s\n---\n%s",
                err, text);
    return g_steal_pointer(&out);
}

static void
testFamily(GString *buf, const char *name, const char *type, const char *help)
{
    g_autofree char *hex = testHex(help);
    size_t len = strlen(name);

    /* the parser names a counter's family without its _total */
    if (g_str_equal(type, "counter") && g_str_has_suffix(name, "_total"))
        len -= strlen("_total");
    g_string_append_printf(buf, "family %.*s %s %s\n", (int)len, name, type, hex);
}

static void
testSample(GString *buf, const char *name, const char *k1, const char *v1,
           const char *k2, const char *v2, unsigned long long value)
{
    g_string_append_printf(buf, "sample %s", name);
    if (k1) {
        g_autofree char *hex = testHex(v1);

        g_string_append_printf(buf, " %s=%s", k1, hex);
    }
    if (k2) {
        g_autofree char *hex = testHex(v2);

        g_string_append_printf(buf, " %s=%s", k2, hex);
    }
    g_string_append_printf(buf, " %llu\n", value);
}

/* Every series of a snapshot whose values all differ, read back */
static void
testFormat(void)
{
    static const char *const dirs[] = { "out", "in" };    /* by vrmJobRole */
    static const char *const finals[] = {
        "completed", "failed", "cancelled", "over-tcp", "unknown",
    };
    vrmHelperMetrics m = { 0 };
    g_autoptr(GString) want = g_string_new(NULL);
    g_autofree char *text = NULL;
    g_autofree char *got = NULL;
    const vrmHelperMetricDef *t = vrmHelperMetricTable;
    int role;
    size_t i;
    int code;

    for (role = 0; role < VRM_JOB_ROLE_LAST; role++) {
        int state;

        for (state = 0; state < VRM_JOB_STATE_LAST; state++)
            m.jobsFinished[role][state] = 100 * (role + 1) + state;
        m.bytes[role] = (1ULL << 40) + 7 + role;
        m.jobsRunning[role] = 2 + role;
    }
    m.pinnedBytes = 3ULL << 30;
    m.pinnedBudget = 8ULL << 30;
    for (code = 0; code < VRM_ERR_LAST; code++)
        m.fallbacks[code] = 1000 + code;

    text = vrmHelperMetricsFormat(&m);
    got = testParse(text);

    testFamily(want, t[VRM_METRIC_JOBS_FINISHED].name, "counter",
               t[VRM_METRIC_JOBS_FINISHED].help);
    for (role = 0; role < VRM_JOB_ROLE_LAST; role++) {
        for (i = 0; i < G_N_ELEMENTS(finals); i++) {
            int state = vrmJobStateTypeFromString(finals[i]);

            g_assert_cmpint(state, >=, 0);
            testSample(want, "virt_rdma_jobs_finished_total", "direction", dirs[role],
                       "outcome", finals[i], 100 * (role + 1) + state);
        }
    }
    testFamily(want, t[VRM_METRIC_BYTES].name, "counter", t[VRM_METRIC_BYTES].help);
    for (role = 0; role < VRM_JOB_ROLE_LAST; role++)
        testSample(want, "virt_rdma_bytes_total", "direction", dirs[role], NULL, NULL,
                   (1ULL << 40) + 7 + role);
    testFamily(want, t[VRM_METRIC_JOBS_RUNNING].name, "gauge",
               t[VRM_METRIC_JOBS_RUNNING].help);
    for (role = 0; role < VRM_JOB_ROLE_LAST; role++)
        testSample(want, "virt_rdma_jobs_running", "direction", dirs[role], NULL, NULL,
                   2 + role);
    testFamily(want, t[VRM_METRIC_PINNED].name, "gauge", t[VRM_METRIC_PINNED].help);
    testSample(want, "virt_rdma_pinned_bytes", NULL, NULL, NULL, NULL, 3ULL << 30);
    testFamily(want, t[VRM_METRIC_PINNED_BUDGET].name, "gauge",
               t[VRM_METRIC_PINNED_BUDGET].help);
    testSample(want, "virt_rdma_pinned_budget_bytes", NULL, NULL, NULL, NULL, 8ULL << 30);
    testFamily(want, t[VRM_METRIC_FALLBACKS].name, "counter",
               t[VRM_METRIC_FALLBACKS].help);
    for (code = VRM_ERR_OK + 1; code < VRM_ERR_LAST; code++)
        testSample(want, "virt_rdma_fallbacks_total", "cause",
                   vrmErrorCodeTypeToString(code), NULL, NULL, 1000 + code);

    g_assert_cmpstr(got, ==, want->str);
    /* the error codes' table names the causes */
    g_assert_nonnull(strstr(text, "virt_rdma_fallbacks_total{cause=\"no-device\"} 1010\n"));
    g_assert_null(strstr(text, "cause=\"ok\""));
}

/* Label values with every character the format escapes, and more */
static void
testEscape(void)
{
    static const char *const hostile[] = {
        "a\"b", "back\\slash", "new\nline", "\\\"\n", "}{,=", "end\\", "é ü ✓", "",
    };
    g_autoptr(GString) text = g_string_new(NULL);
    g_autoptr(GString) want = g_string_new(NULL);
    g_autofree char *got = NULL;
    g_autofree char *esc = vrmHelperMetricsEscapeLabel("a\\b\"c\nd");
    size_t i;

    g_assert_cmpstr(esc, ==, "a\\\\b\\\"c\\nd");

    vrmHelperMetricsAppendFamily(text, VRM_METRIC_JOBS_FINISHED);
    testFamily(want, vrmHelperMetricTable[VRM_METRIC_JOBS_FINISHED].name, "counter",
               vrmHelperMetricTable[VRM_METRIC_JOBS_FINISHED].help);
    for (i = 0; i < G_N_ELEMENTS(hostile); i++) {
        vrmHelperMetricLabel labels[] = {
            { "direction", hostile[i] },
            { "outcome", hostile[G_N_ELEMENTS(hostile) - 1 - i] },
        };

        vrmHelperMetricsAppendSample(text, VRM_METRIC_JOBS_FINISHED, labels,
                                     G_N_ELEMENTS(labels), i + 1);
        testSample(want, "virt_rdma_jobs_finished_total", "direction", hostile[i],
                   "outcome", hostile[G_N_ELEMENTS(hostile) - 1 - i], i + 1);
    }
    got = testParse(text->str);
    g_assert_cmpstr(got, ==, want->str);
}

/* dir/virt_rdma.prom, 0644 whatever the umask, nothing else left behind */
static void
testWrite(void)
{
    g_autofree char *dir = g_dir_make_tmp("vrmmetrics-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, VRM_HELPER_METRICS_FILE, NULL);
    g_autofree char *missing = g_build_filename(dir, "missing", NULL);
    g_autofree char *data = NULL;
    g_autoptr(GDir) d = NULL;
    struct stat st;
    mode_t old = umask(077);
    unsigned int files = 0;

    g_assert_cmpint(vrmHelperMetricsWrite(dir, "a 1\n"), ==, 0);
    g_assert_cmpint(vrmHelperMetricsWrite(dir, "b 2\n"), ==, 0);
    umask(old);
    g_assert_true(g_file_get_contents(path, &data, NULL, NULL));
    g_assert_cmpstr(data, ==, "b 2\n");
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, 0644);
    d = g_dir_open(dir, 0, NULL);
    while (g_dir_read_name(d))
        files++;
    g_assert_cmpuint(files, ==, 1);

    vrmResetLastError();
    g_assert_cmpint(vrmHelperMetricsWrite(missing, "a 1\n"), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_SYSTEM);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), missing));
    vrmResetLastError();

    unlink(path);
    g_assert_cmpint(rmdir(dir), ==, 0);
}

/* docs/metrics.rst names every metric of the table, with its type */
static void
testDocumented(void)
{
    g_autofree char *docs = vrmTestDataDir("../docs");
    g_autofree char *path = g_build_filename(docs, "metrics.rst", NULL);
    g_autofree char *text = vrmTestReadFile(path);
    size_t i;

    for (i = 0; i < VRM_METRIC_LAST; i++) {
        g_autofree char *entry = g_strdup_printf("``%s`` (%s",
                                                 vrmHelperMetricTable[i].name,
                                                 vrmHelperMetricTable[i].type);

        if (!strstr(text, entry))
            g_error("%s does not document %s", path, entry);
    }
}

static const vrmTestFunc testFuncs[] = {
    { "/helpermetrics/format", testFormat },
    { "/helpermetrics/escape", testEscape },
    { "/helpermetrics/write", testWrite },
    { "/helpermetrics/documented", testDocumented },
};

VRM_TEST_MAIN(vrmTestInit, testFuncs)
