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
#include "vrmpeer.h"
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

static char *
peerRoundTrip(const char *xml)
{
    g_autoptr(vrmPeerMessage) msg = vrmPeerMessageParseString(xml);

    return msg ? vrmPeerMessageFormat(msg) : NULL;
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

/* A case a file of @files in @dir: /xml2xml/@kind/@validity/<file> */
static void
addFiles(const char *kind, const char *validity, const char *dir, GPtrArray *files,
         vrmRoundTripFunc roundTrip, GTestDataFunc func)
{
    size_t i;

    for (i = 0; i < files->len; i++) {
        vrmXML2XMLCase *c = g_new0(vrmXML2XMLCase, 1);
        g_autofree char *testPath = NULL;

        c->roundTrip = roundTrip;
        c->dir = g_strdup(dir);
        c->name = g_strdup(g_ptr_array_index(files, i));
        testPath = g_strdup_printf("/xml2xml/%s/%s/%s", kind, validity, c->name);
        g_test_add_data_func_full(testPath, c, func, vrmXML2XMLCaseFree);
    }
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

    addFiles(kind, "valid", validDir, valid, roundTrip, testValid);
    addFiles(kind, "invalid", invalidDir, invalid, roundTrip, testInvalid);
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
    addCases("peer", peerRoundTrip);
    return g_test_run();
}
