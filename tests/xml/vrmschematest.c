/*
 * vrmschematest.c: every valid fixture matches its RNG schema, every
 * invalid one is refused (by the well-formedness check or the schema)
 */
#include <config.h>

#include "vrmxmltestutils.h"
#include "vrmerror.h"
#include "vrmxmlutil.h"

typedef struct {
    vrmXMLSchema schema;
    bool valid;
    char *path;
} vrmSchemaCase;

static void
vrmSchemaCaseFree(gpointer opaque)
{
    vrmSchemaCase *c = opaque;

    g_free(c->path);
    g_free(c);
}

static void
testFixture(gconstpointer opaque)
{
    const vrmSchemaCase *c = opaque;
    g_autoptr(xmlDoc) doc = NULL;
    g_autofree char *message = NULL;
    int rc;

    vrmResetLastError();
    if (!(doc = vrmXMLParseFile(c->path, "fixture"))) {
        if (c->valid) {
            g_test_message("%s: %s", c->path, vrmGetLastErrorMessage());
            g_test_fail();
        }
        return;
    }
    rc = vrmXMLValidate(doc, c->schema, &message);
    g_assert_cmpint(rc, >=, 0);
    if (c->valid && rc != 0) {
        g_test_message("%s does not match %s: %s", c->path,
                       vrmXMLSchemaTypeToString(c->schema), message);
        g_test_fail();
    } else if (!c->valid && rc == 0) {
        g_test_message("%s matches %s although it is invalid", c->path,
                       vrmXMLSchemaTypeToString(c->schema));
        g_test_fail();
    }
}

static void
testSchemasLoad(void)
{
    g_autoptr(xmlDoc) doc = NULL;
    int i;

    doc = vrmXMLParseMemory("<job-list/>", 11, "test", false);
    g_assert_nonnull(doc);
    for (i = 0; i < VRM_XML_SCHEMA_LAST; i++) {
        g_autofree char *message = NULL;

        /* 1 (invalid) for migration.rng, 0 for control.rng: never -1 */
        g_assert_cmpint(vrmXMLValidate(doc, i, &message), >=, 0);
    }
    g_assert_cmpint(vrmXMLValidate(doc, VRM_XML_SCHEMA_CONTROL, NULL), ==, 0);
    g_assert_cmpint(vrmXMLValidate(doc, VRM_XML_SCHEMA_MIGRATION, NULL), ==, 1);
}

static void
testMissingSchemaDir(void)
{
    /* run in a subprocess: the schema cache is per process */
    if (g_test_subprocess()) {
        g_autoptr(xmlDoc) doc = vrmXMLParseMemory("<job-list/>", 11, "test", false);

        g_setenv("VRM_SCHEMA_DIR", "/nonexistent", TRUE);
        g_assert_cmpint(vrmXMLValidate(doc, VRM_XML_SCHEMA_CONTROL, NULL), ==, -1);
        g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_INTERNAL);
        g_print("%s\n", vrmGetLastErrorMessage());
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    g_test_trap_assert_stdout("*cannot load the XML schema '/nonexistent/control.rng'*");
}

static size_t
addDir(const char *sub, vrmXMLSchema schema, bool valid)
{
    g_autofree char *dir = vrmTestDataDir(sub);
    g_autoptr(GPtrArray) files = vrmTestListFiles(dir, ".xml", NULL);
    size_t i;

    for (i = 0; i < files->len; i++) {
        vrmSchemaCase *c = g_new0(vrmSchemaCase, 1);
        g_autofree char *testPath = NULL;

        c->schema = schema;
        c->valid = valid;
        c->path = g_build_filename(dir, g_ptr_array_index(files, i), NULL);
        testPath = g_strdup_printf("/schema/%s/%s", sub,
                                   (const char *)g_ptr_array_index(files, i));
        g_test_add_data_func_full(testPath, c, testFixture, vrmSchemaCaseFree);
    }
    g_assert_cmpuint(files->len, >, 0);
    return files->len;
}

int
main(int argc, char **argv)
{
    vrmTestInit(&argc, &argv);
    g_test_add_func("/schema/load", testSchemasLoad);
    g_test_add_func("/schema/missing-dir", testMissingSchemaDir);
    addDir("migrationdata", VRM_XML_SCHEMA_MIGRATION, true);
    addDir("migrationdata-invalid", VRM_XML_SCHEMA_MIGRATION, false);
    addDir("controldata", VRM_XML_SCHEMA_CONTROL, true);
    addDir("controldata-invalid", VRM_XML_SCHEMA_CONTROL, false);
    return g_test_run();
}
