/*
 * vrmtestutils.c: fixtures and golden files for the XML tests
 */
#include <config.h>

#include <string.h>
#include <unistd.h>

#include "vrmtestutils.h"
#include "vrmi18n.h"

void
vrmTestInit(int *argc, char ***argv)
{
    /* tests always use the schemas of the tree they test */
    g_setenv("VRM_SCHEMA_DIR", VRM_SOURCE_SCHEMA_DIR, TRUE);
    g_setenv("LC_ALL", "C", TRUE);
    vrmI18nInit();
    g_test_init(argc, argv, NULL);
}

char *
vrmTestDataDir(const char *subdir)
{
    const char *src = g_getenv("VRM_SOURCE_DIR");
    g_autofree char *root = NULL;

    if (src && *src) {
        root = g_strdup(src);
    } else {
        /* VRM_SOURCE_SCHEMA_DIR is <source>/xml/schemas */
        g_autofree char *xmldir = g_path_get_dirname(VRM_SOURCE_SCHEMA_DIR);

        root = g_path_get_dirname(xmldir);
    }
    return g_build_filename(root, "tests", subdir, NULL);
}

/* Debian's interpreter: the one python3-jsonschema and
 * python3-prometheus-client install into (a python3 earlier in PATH may be
 * another) */
#define VRM_TEST_PYTHON "/usr/bin/python3"

bool
vrmTestRunPython(const char *const *args, const char *name, const char *text,
                 char **out, char **err)
{
    g_autofree char *dir = g_dir_make_tmp("vrmtest-XXXXXX", NULL);
    g_autofree char *path = NULL;
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_autoptr(GError) gerr = NULL;
    int status = 0;
    size_t i;

    g_assert_nonnull(dir);
    path = g_build_filename(dir, name, NULL);
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    g_ptr_array_add(argv, (char *)VRM_TEST_PYTHON);
    for (i = 0; args[i]; i++)
        g_ptr_array_add(argv, (char *)args[i]);
    g_ptr_array_add(argv, path);
    g_ptr_array_add(argv, NULL);
    if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                      out, err, &status, &gerr))
        g_error("cannot run %s: %s", VRM_TEST_PYTHON, gerr->message);
    unlink(path);
    rmdir(dir);
    return g_spawn_check_wait_status(status, NULL);
}

void
vrmTestAssertJSONValid(const char *kind, const char *text)
{
    g_autofree char *utilDir = vrmTestDataDir("util");
    g_autofree char *testsDir = g_path_get_dirname(utilDir);
    g_autofree char *root = g_path_get_dirname(testsDir);
    g_autofree char *script = g_build_filename(utilDir, "vrmjsonvalidate.py", NULL);
    g_autofree char *schema = g_build_filename(root, "docs", "virt-rdma.schema.json", NULL);
    const char *args[] = { script, schema, kind, NULL };
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;

    if (!vrmTestRunPython(args, "out.json", text, &out, &err))
        g_error("the output is no valid %s of docs/virt-rdma.schema.json (is python3-jsonschema installed?):\n%s%s",
                kind, out, err);
    g_test_message("%s: schema %s", kind, g_strstrip(out));
}

static gint
vrmTestCompareNames(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

GPtrArray *
vrmTestListFiles(const char *dir, const char *suffix,
                 const char *const *exclude)
{
    g_autoptr(GError) gerr = NULL;
    g_autoptr(GDir) d = g_dir_open(dir, 0, &gerr);
    GPtrArray *files = g_ptr_array_new_with_free_func(g_free);
    const char *name;

    if (!d)
        g_error("cannot open fixture directory %s: %s", dir, gerr->message);
    while ((name = g_dir_read_name(d))) {
        bool skip = !g_str_has_suffix(name, suffix);
        size_t i;

        for (i = 0; !skip && exclude && exclude[i]; i++)
            skip = g_str_has_suffix(name, exclude[i]);
        if (!skip)
            g_ptr_array_add(files, g_strdup(name));
    }
    g_ptr_array_sort(files, vrmTestCompareNames);
    return files;
}

char *
vrmTestReadFile(const char *path)
{
    g_autoptr(GError) gerr = NULL;
    char *data = NULL;

    if (!g_file_get_contents(path, &data, NULL, &gerr))
        g_error("cannot read %s: %s", path, gerr->message);
    return data;
}

bool
vrmTestCompareToFile(const char *actual, const char *path)
{
    g_autofree char *expected = NULL;
    g_autoptr(GError) gerr = NULL;
    size_t i;
    int line = 1;

    if (g_getenv("VRM_TEST_REGENERATE_OUTPUT")) {
        if (!g_file_set_contents(path, actual, -1, &gerr))
            g_error("cannot write %s: %s", path, gerr->message);
        return true;
    }
    if (!g_file_get_contents(path, &expected, NULL, &gerr)) {
        g_test_message("cannot read %s: %s (set VRM_TEST_REGENERATE_OUTPUT=1 to create it)",
                       path, gerr->message);
        return false;
    }
    if (strcmp(expected, actual) == 0)
        return true;
    for (i = 0; expected[i] && expected[i] == actual[i]; i++) {
        if (expected[i] == '\n')
            line++;
    }
    g_test_message("%s differs at line %d\n--- expected\n%s\n+++ actual\n%s",
                   path, line, expected, actual);
    return false;
}

char *
vrmTestErrPath(const char *fixture, const char *suffix)
{
    size_t len = strlen(fixture) - strlen(suffix);

    return g_strdup_printf("%.*s.err", (int)len, fixture);
}
