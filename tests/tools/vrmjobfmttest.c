/*
 * vrmjobfmttest.c: virt-rdma jobinfo prints what virsh domjobinfo prints
 *
 * tests/tools/jobinfodata/NAME.stats     job type, flags, typed parameters
 * tests/tools/jobinfodata/NAME.out       what `virt-rdma jobinfo` prints
 *                                        for them (libvirt part, then RDMA)
 *
 * /jobfmt/fixture/NAME  our formatter against NAME.out
 *                       (VRM_TEST_REGENERATE_OUTPUT=1 rewrites it)
 * /jobfmt/virsh/NAME    the real virsh 9 (libvirt-clients) shown the same
 *                       parameters through tests/tools/vrmvirshjobshim.c
 *                       prints exactly our libvirt part, text and --rawstats
 * /jobfmt/virsh/random  the same for random parameter sets (the seed is
 *                       printed; VRM_JOBFMT_SEED=N repeats one)
 * /jobfmt/json          the JSON form of a fixture is what python's json
 *                       module reads back, with the same values
 * /jobfmt/json-schema   every fixture's JSON form is a valid "jobinfo" of
 *                       docs/virt-rdma.schema.json
 * /jobfmt/json-schema-codes  the schema's reason codes are vrmErrorCode's
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

#include "virt-rdma.h"
#include "vrmclijobfmt.h"
#include "vrmerror.h"
#include "vrmjobstat.h"
#include "vrmjobstatsfile.h"
#include "vrmtestutils.h"

/* The fixture tests/tools/jobinfodata/@name parsed into @f; its path */
static char *
readFixture(const char *name, vrmJobStatsFile *f)
{
    g_autofree char *dir = vrmTestDataDir("tools/jobinfodata");
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autofree char *text = vrmTestReadFile(path);

    g_assert_nonnull(text);
    g_assert_cmpint(vrmJobStatsFileParse(text, f), ==, 0);
    return g_steal_pointer(&path);
}

/* What virt-rdma jobinfo prints: the libvirt part, a blank line, RDMA */
static char *
formatAll(const vrmJobStatsFile *f)
{
    g_autofree char *lv = vrmJobFormatLibvirt(f->type, f->params, f->nparams,
                                              f->completed, f->anystats);
    g_autofree char *rdma = vrmJobFormatRDMA(f->params, f->nparams);

    return g_strdup_printf("%s\n%s", lv, rdma);
}

static void
testFixture(gconstpointer data)
{
    const char *name = data;
    vrmJobStatsFile f;
    g_autofree char *path = readFixture(name, &f);
    g_autofree char *out = formatAll(&f);
    g_autofree char *outPath = g_strdup_printf("%.*s.out",
                                               (int)(strlen(path) - strlen(".stats")), path);

    g_assert_true(vrmTestCompareToFile(out, outPath));
    vrmJobStatsFileClear(&f);
}

/* Run the real virsh on a statistics file; its output without the blank
 * line virsh adds after every command */
static char *
runVirsh(const char *statsPath, bool completed, bool anystats, bool raw)
{
    const char *shim = g_getenv("VRM_VIRSH_JOBSHIM");
    g_autofree char *preload = NULL;
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_auto(GStrv) envp = g_get_environ();
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autoptr(GError) error = NULL;
    int status = 0;
    size_t len;

    g_assert_nonnull(shim);
    preload = g_strdup(shim);
    g_ptr_array_add(argv, (gpointer)"virsh");
    g_ptr_array_add(argv, (gpointer)"-c");
    g_ptr_array_add(argv, (gpointer)"test:///default");
    g_ptr_array_add(argv, (gpointer)"domjobinfo");
    g_ptr_array_add(argv, (gpointer)"test");
    if (completed)
        g_ptr_array_add(argv, (gpointer)"--completed");
    if (anystats)
        g_ptr_array_add(argv, (gpointer)"--anystats");
    if (raw)
        g_ptr_array_add(argv, (gpointer)"--rawstats");
    g_ptr_array_add(argv, NULL);
    envp = g_environ_setenv(envp, "LD_PRELOAD", preload, TRUE);
    envp = g_environ_setenv(envp, "VRM_JOBSTATS_FILE", statsPath, TRUE);
    envp = g_environ_setenv(envp, "LC_ALL", "C", TRUE);
    envp = g_environ_unsetenv(envp, "ASAN_OPTIONS");
    if (!g_spawn_sync(NULL, (char **)argv->pdata, envp, G_SPAWN_SEARCH_PATH,
                      NULL, NULL, &out, &err, &status, &error))
        g_error("cannot run virsh (Debian package libvirt-clients): %s", error->message);
    if (!g_spawn_check_wait_status(status, NULL))
        g_error("virsh failed on %s: %s", statsPath, err);
    len = strlen(out);
    if (len && out[len - 1] == '\n')
        out[len - 1] = '\0';
    return g_steal_pointer(&out);
}

static void
compareWithVirsh(const char *statsPath, const vrmJobStatsFile *f)
{
    g_autofree char *ours = vrmJobFormatLibvirt(f->type, f->params, f->nparams,
                                                f->completed, f->anystats);
    g_autofree char *theirs = runVirsh(statsPath, f->completed, f->anystats, false);
    g_autofree char *oursRaw = vrmJobFormatRaw(f->type, f->params, f->nparams);
    g_autofree char *theirsRaw = runVirsh(statsPath, f->completed, f->anystats, true);

    if (strcmp(ours, theirs) != 0) {
        g_autofree char *text = vrmTestReadFile(statsPath);

        g_printerr("for the parameters\n%s\nvirsh printed\n%s---\nvirt-rdma printed\n%s---\n",
                   text, theirs, ours);
        g_test_fail();
    }
    if (strcmp(oursRaw, theirsRaw) != 0) {
        g_printerr("--rawstats: virsh printed\n%s---\nvirt-rdma printed\n%s---\n",
                   theirsRaw, oursRaw);
        g_test_fail();
    }
}

static void
testVirsh(gconstpointer data)
{
    const char *name = data;
    vrmJobStatsFile f;
    g_autofree char *path = readFixture(name, &f);

    compareWithVirsh(path, &f);
    vrmJobStatsFileClear(&f);
}

/* libvirt's job fields and their types */
static const struct {
    const char *field;
    const char *kind;
} jobFields[] = {
    { "time_elapsed", "ullong" }, { "time_elapsed_net", "ullong" },
    { "time_remaining", "ullong" }, { "downtime", "ullong" },
    { "downtime_net", "ullong" }, { "setup_time", "ullong" },
    { "data_total", "ullong" }, { "data_processed", "ullong" },
    { "data_remaining", "ullong" }, { "memory_total", "ullong" },
    { "memory_processed", "ullong" }, { "memory_remaining", "ullong" },
    { "memory_constant", "ullong" }, { "memory_normal", "ullong" },
    { "memory_normal_bytes", "ullong" }, { "memory_bps", "ullong" },
    { "memory_dirty_rate", "ullong" }, { "memory_page_size", "ullong" },
    { "memory_iteration", "ullong" }, { "memory_postcopy_requests", "ullong" },
    { "disk_total", "ullong" }, { "disk_processed", "ullong" },
    { "disk_remaining", "ullong" }, { "disk_bps", "ullong" },
    { "compression_cache", "ullong" }, { "compression_bytes", "ullong" },
    { "compression_pages", "ullong" }, { "compression_cache_misses", "ullong" },
    { "compression_overflow", "ullong" }, { "auto_converge_throttle", "int" },
    { "success", "bool" }, { "errmsg", "string" },
    { "disk_temp_used", "ullong" }, { "disk_temp_total", "ullong" },
    { "vfio_data_transferred", "ullong" },
};

static unsigned long long
randomValue(GRand *rand)
{
    switch (g_rand_int_range(rand, 0, 5)) {
    case 0:
        return 0;
    case 1:
        return g_rand_int_range(rand, 0, 2048);
    case 2:
        return (unsigned long long)g_rand_int(rand) * g_rand_int_range(rand, 1, 70000);
    case 3:
        return ((unsigned long long)g_rand_int(rand) << 32) | g_rand_int(rand);
    }
    return 1ull << g_rand_int_range(rand, 0, 64);
}

static void
testVirshRandom(void)
{
    const char *seedEnv = g_getenv("VRM_JOBFMT_SEED");
    guint32 seed = seedEnv ? (guint32)g_ascii_strtoull(seedEnv, NULL, 10) : g_random_int();
    g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
    g_autofree char *path = g_build_filename(g_get_tmp_dir(), "vrmjobfmttest-XXXXXX", NULL);
    int fd = g_mkstemp(path);
    int round;

    g_assert_cmpint(fd, >=, 0);
    close(fd);
    g_test_message("seed %u (VRM_JOBFMT_SEED=%u repeats it)", seed, seed);
    for (round = 0; round < 60 && !g_test_failed(); round++) {
        g_autoptr(GString) text = g_string_new(NULL);
        vrmJobStatsFile f;
        size_t i;

        g_string_append_printf(text, "type %d\n", g_rand_int_range(rand, 0, 7));
        g_string_append_printf(text, "flags%s%s\n",
                               g_rand_boolean(rand) ? " completed" : "",
                               g_rand_boolean(rand) ? " anystats" : "");
        g_string_append_printf(text, "operation int %d\n", g_rand_int_range(rand, 0, 12));
        for (i = 0; i < G_N_ELEMENTS(jobFields); i++) {
            if (g_rand_int_range(rand, 0, 3) == 0)
                continue;
            if (g_str_equal(jobFields[i].kind, "string"))
                g_string_append_printf(text, "%s string failed: %u\n",
                                       jobFields[i].field, g_rand_int(rand));
            else if (g_str_equal(jobFields[i].kind, "int"))
                g_string_append_printf(text, "%s int %d\n", jobFields[i].field,
                                       g_rand_int_range(rand, 0, 100));
            else if (g_str_equal(jobFields[i].kind, "bool"))
                g_string_append_printf(text, "%s bool %d\n", jobFields[i].field,
                                       g_rand_boolean(rand));
            else
                g_string_append_printf(text, "%s ullong %llu\n", jobFields[i].field,
                                       randomValue(rand));
        }
        g_assert_true(g_file_set_contents(path, text->str, -1, NULL));
        g_assert_cmpint(vrmJobStatsFileParse(text->str, &f), ==, 0);
        compareWithVirsh(path, &f);
        vrmJobStatsFileClear(&f);
    }
    unlink(path);
}

static void
testJSON(void)
{
    vrmJobStatsFile f;
    g_autofree char *path = readFixture("outgoing-completed-rdma.stats", &f);
    g_autofree char *json = vrmJobFormatJSON(f.type, f.params, f.nparams);
    /* (held for its g_autofree; clang's -Wunused-variable counts no use) */
    g_assert_nonnull(path);
    const char *check =
        "import json, sys\n"
        "d = json.loads(sys.argv[1])\n"
        "assert d['type'] == 'completed', d\n"
        "assert d['operation'] == 'outgoing-migration', d\n"
        "assert d['libvirt']['memory_processed'] == 133432197, d\n"
        "assert d['libvirt']['downtime'] == 419, d\n"
        "assert d['rdma']['job-id'] == 7, d\n"
        "assert d['rdma']['state'] == 'completed', d\n"
        "assert d['rdma']['channels'] == 5, d\n"
        "assert 'operation' not in d['libvirt'], d\n"
        "assert d['format-version'] == 1, d\n";
    const char *argv[] = { "python3", "-c", check, json, NULL };
    g_autofree char *err = NULL;
    int status = 0;

    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH,
                               NULL, NULL, NULL, &err, &status, NULL));
    if (!g_spawn_check_wait_status(status, NULL))
        g_error("the JSON form does not read back: %s\n%s", err, json);
    vrmJobStatsFileClear(&f);
}

/* Every fixture's JSON form is a valid "jobinfo" of the documented schema
 * (sizes beyond 2^63, a terminal escape in an error, no statistics) */
static void
testJSONSchema(void)
{
    g_autofree char *dir = vrmTestDataDir("tools/jobinfodata");
    g_autoptr(GPtrArray) names = vrmTestListFiles(dir, ".stats", NULL);
    g_autoptr(GString) lines = g_string_new(NULL);
    guint i;

    for (i = 0; i < names->len; i++) {
        vrmJobStatsFile f;
        g_autofree char *path = readFixture(names->pdata[i], &f);
        g_autofree char *json = vrmJobFormatJSON(f.type, f.params, f.nparams);

        g_assert_nonnull(path);
        g_assert_true(g_str_has_suffix(json, "}\n") && !strchr(json, '\n')[1]);
        g_string_append(lines, json);
        vrmJobStatsFileClear(&f);
    }
    vrmTestAssertJSONValid("jobinfo", lines->str);
}

/* The schema's job reason codes are vrmErrorCode's names, all but "ok"
 * (a reason is never ok), in the enum's order */
static void
testJSONSchemaCodes(void)
{
    g_autofree char *testsDir = vrmTestDataDir("");
    g_autofree char *root = g_path_get_dirname(testsDir);
    g_autofree char *path = g_build_filename(root, "docs", "virt-rdma.schema.json", NULL);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) err = NULL;
    JsonObject *reason;
    JsonArray *codes;
    guint i;

    if (!json_parser_load_from_file(parser, path, &err))
        g_error("%s: %s", path, err->message);
    reason = json_object_get_object_member(
        json_object_get_object_member(json_node_get_object(json_parser_get_root(parser)),
                                      "$defs"), "job-reason");
    codes = json_object_get_array_member(
        json_object_get_object_member(
            json_object_get_object_member(
                json_array_get_object_element(json_object_get_array_member(reason, "oneOf"), 1),
                "properties"), "code"), "enum");
    g_assert_cmpuint(json_array_get_length(codes), ==, VRM_ERR_LAST - 1);
    for (i = 0; i < json_array_get_length(codes); i++)
        g_assert_cmpstr(json_array_get_string_element(codes, i), ==,
                        vrmErrorCodeTypeToString(VRM_ERR_OK + 1 + i));
}

/* The public header's names of our statistics are the table's rows
 * (xml/vrmjobstat.c), in its order: the library and jobinfo derive them */
static void
testStatNames(void)
{
    static const char *const published[] = {
        VRM_JOB_STATS_BYTES_SENT, VRM_JOB_STATS_BYTES_RECEIVED, VRM_JOB_STATS_MBPS,
        VRM_JOB_STATS_CHUNKS, VRM_JOB_STATS_PINNED_BYTES,
        VRM_JOB_STATS_REGISTRATION_NS, VRM_JOB_STATS_CHANNELS, VRM_JOB_STATS_CPU_NS,
        VRM_JOB_STATS_CAPABILITIES,
    };
    size_t i;

    g_assert_cmpuint(vrmJobStatCount(), ==, G_N_ELEMENTS(published));
    for (i = 0; i < G_N_ELEMENTS(published); i++) {
        g_autofree char *field = g_strconcat(VRM_PARAM_PREFIX, vrmJobStatGet(i)->name, NULL);

        g_assert_cmpstr(field, ==, published[i]);
        g_assert_cmpuint(strlen(field), <, VIR_TYPED_PARAM_FIELD_LENGTH);
        g_assert_true(vrmJobStatGet(i)->label && *vrmJobStatGet(i)->label);
    }
    g_assert_null(vrmJobStatGet(vrmJobStatCount()));
}

int
main(int argc, char **argv)
{
    g_autofree char *dir = NULL;
    g_autoptr(GPtrArray) names = NULL;
    guint i;

    vrmTestInit(&argc, &argv);
    /* libvirt's typed-parameter calls use its per-thread error state */
    if (virInitialize() < 0)
        g_error("cannot initialize libvirt");
    dir = vrmTestDataDir("tools/jobinfodata");
    names = vrmTestListFiles(dir, ".stats", NULL);
    for (i = 0; i < names->len; i++) {
        const char *name = names->pdata[i];
        g_autofree char *fixture = g_strdup_printf("/jobfmt/fixture/%s", name);
        g_autofree char *virsh = g_strdup_printf("/jobfmt/virsh/%s", name);

        g_test_add_data_func(fixture, name, testFixture);
        g_test_add_data_func(virsh, name, testVirsh);
    }
    g_test_add_func("/jobfmt/virsh/random", testVirshRandom);
    g_test_add_func("/jobfmt/json", testJSON);
    g_test_add_func("/jobfmt/json-schema", testJSONSchema);
    g_test_add_func("/jobfmt/json-schema-codes", testJSONSchemaCodes);
    g_test_add_func("/jobfmt/stat-names", testStatNames);
    return g_test_run();
}
