/*
 * vrmxml2xmltest.c: parse -> format round trips over the fixtures
 *
 * tests/xml/<kind>data/NAME.xml          valid input; the formatted output
 *                                        must equal NAME.out.xml if present,
 *                                        else the input itself, byte for byte
 * tests/xml/<kind>data-invalid/NAME.xml  refused input; the error message
 *                                        must equal NAME.err
 * VRM_TEST_REGENERATE_OUTPUT=1 rewrites NAME.out.xml and NAME.err.
 */
#include <config.h>

#include <string.h>

#include "vrmtestutils.h"
#include "vrmcontrol.h"
#include "vrmerror.h"
#include "vrmmigrationdef.h"

typedef char *(*vrmRoundTripFunc)(const char *xml);

typedef struct {
    vrmRoundTripFunc roundTrip;
    char *dir;
    char *name;
} vrmXML2XMLCase;

static void
vrmXML2XMLCaseFree(gpointer opaque)
{
    vrmXML2XMLCase *c = opaque;

    g_free(c->dir);
    g_free(c->name);
    g_free(c);
}

static char *
migrationRoundTrip(const char *xml)
{
    g_autoptr(vrmMigrationDef) def = vrmMigrationDefParseString(xml);

    return def ? vrmMigrationDefFormat(def) : NULL;
}

static char *
controlRoundTrip(const char *xml)
{
    g_autoptr(vrmControlMessage) msg = vrmControlMessageParseString(xml);

    return msg ? vrmControlMessageFormat(msg) : NULL;
}

static void
testValid(gconstpointer opaque)
{
    const vrmXML2XMLCase *c = opaque;
    g_autofree char *path = g_build_filename(c->dir, c->name, NULL);
    g_autofree char *outPath = NULL;
    g_autofree char *input = vrmTestReadFile(path);
    g_autofree char *output = NULL;
    g_autofree char *again = NULL;
    size_t base = strlen(c->name) - strlen(".xml");

    outPath = g_strdup_printf("%s/%.*s.out.xml", c->dir, (int)base, c->name);
    vrmResetLastError();
    if (!(output = c->roundTrip(input))) {
        g_test_message("%s: %s", path, vrmGetLastErrorMessage());
        g_test_fail();
        return;
    }

    if (g_file_test(outPath, G_FILE_TEST_EXISTS) ||
        (g_getenv("VRM_TEST_REGENERATE_OUTPUT") && strcmp(input, output) != 0)) {
        if (!vrmTestCompareToFile(output, outPath))
            g_test_fail();
    } else if (strcmp(input, output) != 0) {
        g_test_message("%s does not round-trip exactly:\n%s", path, output);
        g_test_fail();
    }

    /* the formatter's output is a fixed point */
    again = c->roundTrip(output);
    g_assert_nonnull(again);
    g_assert_cmpstr(again, ==, output);
}

static void
testInvalid(gconstpointer opaque)
{
    const vrmXML2XMLCase *c = opaque;
    g_autofree char *path = g_build_filename(c->dir, c->name, NULL);
    g_autofree char *errPath = vrmTestErrPath(path, ".xml");
    g_autofree char *input = vrmTestReadFile(path);
    g_autofree char *output = NULL;
    g_autofree char *message = NULL;

    vrmResetLastError();
    if ((output = c->roundTrip(input))) {
        g_test_message("%s was accepted:\n%s", path, output);
        g_test_fail();
        return;
    }
    g_assert_cmpint(vrmGetLastErrorCode(), !=, VRM_ERR_OK);
    message = g_strdup_printf("%s\n", vrmGetLastErrorMessage());
    if (!vrmTestCompareToFile(message, errPath))
        g_test_fail();
}

static size_t
addCases(const char *kind, vrmRoundTripFunc roundTrip)
{
    static const char *const excludeOut[] = { ".out.xml", NULL };
    g_autofree char *validSub = g_strdup_printf("xml/%sdata", kind);
    g_autofree char *invalidSub = g_strdup_printf("xml/%sdata-invalid", kind);
    g_autofree char *validDir = vrmTestDataDir(validSub);
    g_autofree char *invalidDir = vrmTestDataDir(invalidSub);
    g_autoptr(GPtrArray) valid = vrmTestListFiles(validDir, ".xml", excludeOut);
    g_autoptr(GPtrArray) invalid = vrmTestListFiles(invalidDir, ".xml", NULL);
    size_t i;

    for (i = 0; i < valid->len; i++) {
        vrmXML2XMLCase *c = g_new0(vrmXML2XMLCase, 1);
        g_autofree char *testPath = NULL;

        c->roundTrip = roundTrip;
        c->dir = g_strdup(validDir);
        c->name = g_strdup(g_ptr_array_index(valid, i));
        testPath = g_strdup_printf("/xml2xml/%s/valid/%s", kind, c->name);
        g_test_add_data_func_full(testPath, c, testValid, vrmXML2XMLCaseFree);
    }
    for (i = 0; i < invalid->len; i++) {
        vrmXML2XMLCase *c = g_new0(vrmXML2XMLCase, 1);
        g_autofree char *testPath = NULL;

        c->roundTrip = roundTrip;
        c->dir = g_strdup(invalidDir);
        c->name = g_strdup(g_ptr_array_index(invalid, i));
        testPath = g_strdup_printf("/xml2xml/%s/invalid/%s", kind, c->name);
        g_test_add_data_func_full(testPath, c, testInvalid, vrmXML2XMLCaseFree);
    }
    g_assert_cmpuint(valid->len, >, 0);
    g_assert_cmpuint(invalid->len, >, 0);
    return valid->len + invalid->len;
}

int
main(int argc, char **argv)
{
    vrmTestInit(&argc, &argv);
    addCases("migration", migrationRoundTrip);
    addCases("control", controlRoundTrip);
    return g_test_run();
}
