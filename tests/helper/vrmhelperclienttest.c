/*
 * vrmhelperclienttest: control-socket framing and the one-shot client
 */
#include <config.h>

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vrmhelperclient.h"
#include "vrmerror.h"
#include "vrmtestmain.h"

static gint64
soon(int ms)
{
    return g_get_monotonic_time() + (gint64)ms * 1000;
}

static void
testRoundTrip(void)
{
    int sv[2];
    g_autofree char *got = NULL;
    const char *doc = "<job-list/>";
    size_t len = 0;

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    g_assert_cmpint(vrmHelperFrameWrite(sv[0], doc, strlen(doc), soon(1000)), ==, 0);
    got = vrmHelperFrameRead(sv[1], soon(1000), &len);
    g_assert_cmpstr(got, ==, doc);
    g_assert_cmpuint(len, ==, strlen(doc));
    close(sv[0]);
    close(sv[1]);
}

/* A big frame goes through while the reader reads it in pieces */
static gpointer
bigReader(gpointer opaque)
{
    int fd = GPOINTER_TO_INT(opaque);
    size_t len = 0;
    char *got = vrmHelperFrameRead(fd, soon(5000), &len);

    g_assert_nonnull(got);
    g_assert_cmpuint(len, ==, VRM_HELPER_FRAME_MAX);
    g_free(got);
    return NULL;
}

static void
testBig(void)
{
    int sv[2];
    g_autofree char *big = g_malloc(VRM_HELPER_FRAME_MAX + 1);
    GThread *t;

    memset(big, 'x', VRM_HELPER_FRAME_MAX);
    big[VRM_HELPER_FRAME_MAX] = '\0';
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    t = g_thread_new("reader", bigReader, GINT_TO_POINTER(sv[1]));
    g_assert_cmpint(vrmHelperFrameWrite(sv[0], big, VRM_HELPER_FRAME_MAX, soon(5000)), ==, 0);
    g_thread_join(t);

    /* one byte more is refused before anything is written */
    vrmResetLastError();
    g_assert_cmpint(vrmHelperFrameWrite(sv[0], big, VRM_HELPER_FRAME_MAX + 1, soon(100)), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_RESOURCE);
    close(sv[0]);
    close(sv[1]);
}

static void
expectReadError(const void *bytes, size_t n, bool closeWriter, int code,
                const char *text)
{
    int sv[2];
    g_autofree char *got = NULL;

    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    if (n)
        g_assert_cmpint(write(sv[0], bytes, n), ==, (ssize_t)n);
    if (closeWriter)
        close(sv[0]);
    vrmResetLastError();
    got = vrmHelperFrameRead(sv[1], soon(200), NULL);
    g_assert_null(got);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, code);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), text));
    if (!closeWriter)
        close(sv[0]);
    close(sv[1]);
}

static void
testBadFrames(void)
{
    const guint8 zero[4] = { 0, 0, 0, 0 };
    const guint8 huge[4] = { 0x00, 0x10, 0x00, 0x01 };     /* 1 MiB + 1 */
    const guint8 short_[6] = { 0, 0, 0, 9, '<', 'a' };
    const guint8 nul[7] = { 0, 0, 0, 3, 'a', 0, 'b' };

    expectReadError(NULL, 0, true, VRM_ERR_PROTOCOL, "without a message");
    expectReadError(zero, 4, true, VRM_ERR_PROTOCOL, "announces 0 bytes");
    expectReadError(huge, 4, true, VRM_ERR_PROTOCOL, "announces 1048577 bytes");
    expectReadError(short_, 6, true, VRM_ERR_PROTOCOL, "in the middle of a message");
    expectReadError(nul, 7, true, VRM_ERR_PROTOCOL, "NUL byte");
    expectReadError(short_, 2, false, VRM_ERR_TIMEOUT, "timed out");
}

static void
testNotRunning(void)
{
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_LIST);
    g_autoptr(vrmControlMessage) reply = NULL;

    vrmResetLastError();
    reply = vrmHelperClientCall("/nonexistent/virt-rdmad.sock", req, 500);
    g_assert_null(reply);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_PEER);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "the virt-rdma helper (virt-rdmad) is not running on this host: "
                    "cannot connect to /nonexistent/virt-rdmad.sock: No such file or directory");
}

static void
testSocketPath(void)
{
    g_autofree char *fromConfig = NULL;
    g_autofree char *fromEnv = NULL;

    g_unsetenv(VRM_HELPER_SOCKET_ENV);
    fromConfig = vrmHelperSocketPath();
    g_assert_cmpstr(fromConfig, ==, "/run/virt-rdma/virt-rdmad.sock");
    g_setenv(VRM_HELPER_SOCKET_ENV, "/tmp/x.sock", TRUE);
    fromEnv = vrmHelperSocketPath();
    g_assert_cmpstr(fromEnv, ==, "/tmp/x.sock");
    g_unsetenv(VRM_HELPER_SOCKET_ENV);
}

static void
testReplyCheck(void)
{
    g_autoptr(vrmControlMessage) ok = vrmControlMessageNew(VRM_CONTROL_REPLY);
    g_autoptr(vrmControlMessage) err = vrmControlReplyNewError(VRM_ERR_VERSION, "too new");

    ok->status = VRM_REPLY_OK;
    g_assert_cmpint(vrmHelperReplyCheck(ok), ==, 0);
    g_assert_cmpint(vrmHelperReplyCheck(err), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_VERSION);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==, "too new");
}

static const vrmTestFunc testFuncs[] = {
    { "/helper/client/round-trip", testRoundTrip },
    { "/helper/client/big", testBig },
    { "/helper/client/bad-frames", testBadFrames },
    { "/helper/client/not-running", testNotRunning },
    { "/helper/client/socket-path", testSocketPath },
    { "/helper/client/reply-check", testReplyCheck },
};

VRM_TEST_MAIN(NULL, testFuncs)
