/*
 * vrmerrortest.c: the error facility keeps one report per thread
 */
#include <config.h>

#include <errno.h>

#include "vrmerror.h"
#include "vrmtestmain.h"

static void
testReportKeepsMessageAndCode(void)
{
    vrmResetLastError();
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_OK);

    vrmReportError(VRM_ERR_PROTOCOL, "bad length %u", 17u);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_PROTOCOL);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==, "bad length 17");
}

static void
testSystemErrorAppendsStrerror(void)
{
    g_autofree char *want = g_strdup_printf("cannot open /x: %s",
                                            g_strerror(ENOENT));

    errno = EINTR;
    vrmReportSystemError(ENOENT, "cannot open %s", "/x");
    g_assert_cmpint(errno, ==, EINTR);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_SYSTEM);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==, want);
}

static gpointer
otherThread(gpointer opaque)
{
    vrmReportError(VRM_ERR_TIMEOUT, "other thread");
    return GINT_TO_POINTER(vrmGetLastErrorCode());
}

static void
testErrorsArePerThread(void)
{
    GThread *t;

    vrmReportError(VRM_ERR_AUTH, "main thread");
    t = g_thread_new("other", otherThread, NULL);
    g_assert_cmpint(GPOINTER_TO_INT(g_thread_join(t)), ==, VRM_ERR_TIMEOUT);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==, "main thread");
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_AUTH);
}

static void
testCodeNames(void)
{
    size_t i;

    for (i = 0; i < VRM_ERR_LAST; i++) {
        g_assert_nonnull(vrmErrorCodeTypeToString(i));
        /* and back: the one parser of the names (XML and engine stats) */
        g_assert_cmpint(vrmErrorCodeTypeFromString(vrmErrorCodeTypeToString(i)), ==, i);
    }
    g_assert_null(vrmErrorCodeTypeToString(VRM_ERR_LAST));
    g_assert_null(vrmErrorCodeTypeToString(-1));
    g_assert_cmpint(vrmErrorCodeTypeFromString("no-such-code"), ==, -1);
    g_assert_cmpint(vrmErrorCodeTypeFromString(NULL), ==, -1);
}

static const vrmTestFunc testFuncs[] = {
    { "/error/report", testReportKeepsMessageAndCode },
    { "/error/system", testSystemErrorAppendsStrerror },
    { "/error/per-thread", testErrorsArePerThread },
    { "/error/code-names", testCodeNames },
};

VRM_TEST_MAIN(NULL, testFuncs)
