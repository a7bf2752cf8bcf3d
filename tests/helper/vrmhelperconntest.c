/*
 * vrmhelperconntest.c: control-socket clients served without blocking
 * (issue 13 items 5 and 8, issue 15 item 3)
 *
 * In one process and one GMainLoop: a client that sends nothing does not
 * hold the others; a request the daemon answers later does not either;
 * at the client cap the next client waits in the backlog until a slot is
 * free; with no file descriptor left (EMFILE) the loop does not spin and
 * serves the waiting clients once descriptors are back; a request that
 * announces more than the limit is refused without being read; an event
 * subscriber gets what is pushed, in order, is forgotten when it hangs
 * up, and is dropped when it lets too much pile up unread.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "vrmtestutils.h"
#include "vrmerror.h"
#include "vrmhelperclient.h"
#include "vrmhelperconn.h"

typedef struct {
    char *dir;
    char *path;
    int listenFd;
    vrmHelperServer *srv;
    GPtrArray *held;            /* vrmHelperConn * answered later */
    unsigned int handled;
} vrmConnFixture;

static void
handler(vrmHelperConn *c, const char *xml, gpointer opaque)
{
    vrmConnFixture *f = opaque;

    f->handled++;
    if (strstr(xml, "<job-events")) {
        vrmHelperConnSubscribe(c);
        return;
    }
    if (strstr(xml, "domain=\"later\"")) {
        g_ptr_array_add(f->held, c);
        return;
    }
    vrmHelperConnReplyError(c, VRM_ERR_INVALID_ARG, "answered");
}

static void
setUp(vrmConnFixture *f, gconstpointer data)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    f->dir = g_dir_make_tmp("vrmconntest-XXXXXX", NULL);
    f->path = g_build_filename(f->dir, "s.sock", NULL);
    g_strlcpy(sa.sun_path, f->path, sizeof(sa.sun_path));
    f->listenFd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    g_assert_cmpint(bind(f->listenFd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    g_assert_cmpint(listen(f->listenFd, 64), ==, 0);
    f->held = g_ptr_array_new();
    f->srv = vrmHelperServerNew(f->listenFd, GPOINTER_TO_UINT(data) ?
                                GPOINTER_TO_UINT(data) : 64, handler, f);
}

static void
tearDown(vrmConnFixture *f, gconstpointer data)
{
    vrmHelperServerFree(f->srv);
    g_ptr_array_unref(f->held);
    close(f->listenFd);
    unlink(f->path);
    rmdir(f->dir);
    g_free(f->path);
    g_free(f->dir);
}

static void
iterate(unsigned int ms)
{
    gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;

    while (g_get_monotonic_time() < end) {
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
    }
}

static int
rawClient(vrmConnFixture *f)
{
    int fd = vrmHelperConnect(f->path, g_get_monotonic_time() + G_USEC_PER_SEC);

    g_assert_cmpint(fd, >=, 0);
    return fd;
}

static void
sendQuery(int fd, const char *domain)
{
    g_autofree char *xml = g_strdup_printf("<job-query domain=\"%s\"/>", domain);

    g_assert_cmpint(vrmHelperFrameWrite(fd, xml, strlen(xml),
                                        g_get_monotonic_time() + G_USEC_PER_SEC), ==, 0);
}

/* Read a reply while the loop runs (the server is in this process) */
static char *
readReply(int fd, unsigned int ms)
{
    gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;
    g_autoptr(GByteArray) buf = g_byte_array_new();

    while (g_get_monotonic_time() < end) {
        guint8 chunk[4096];
        ssize_t r = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
        guint32 len;

        if (r > 0)
            g_byte_array_append(buf, chunk, r);
        if (buf->len >= 4) {
            memcpy(&len, buf->data, 4);
            len = GUINT32_FROM_BE(len);
            if (buf->len >= 4 + len)
                return g_strndup((const char *)buf->data + 4, len);
        }
        if (r == 0)
            break;
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
    }
    return NULL;
}

static void
testStalledClient(vrmConnFixture *f, gconstpointer data)
{
    int stalled = rawClient(f);
    int held = rawClient(f);
    int other = rawClient(f);
    g_autofree char *reply = NULL;

    /* one sends half a length, one waits for a late answer */
    g_assert_cmpint(write(stalled, "\0\0", 2), ==, 2);
    sendQuery(held, "later");
    iterate(50);
    g_assert_cmpuint(f->held->len, ==, 1);
    sendQuery(other, "now");
    reply = readReply(other, 2000);
    g_assert_nonnull(reply);
    g_assert_nonnull(strstr(reply, "answered"));
    g_clear_pointer(&reply, g_free);

    vrmHelperConnReplyError(g_ptr_array_steal_index(f->held, 0), VRM_ERR_TIMEOUT, "late");
    reply = readReply(held, 2000);
    g_assert_nonnull(strstr(reply, "late"));
    close(stalled);
    close(held);
    close(other);
}

static void
testClientCap(vrmConnFixture *f, gconstpointer data)
{
    int a = rawClient(f);
    int b = rawClient(f);
    int c;
    g_autofree char *reply = NULL;

    sendQuery(a, "later");
    sendQuery(b, "later");
    iterate(50);
    g_assert_cmpuint(f->held->len, ==, 2);
    /* connected (the backlog), not read */
    c = rawClient(f);
    sendQuery(c, "now");
    iterate(100);
    g_assert_cmpuint(f->handled, ==, 2);
    g_assert_cmpuint(vrmHelperServerClients(f->srv), ==, 2);
    vrmHelperConnReplyError(g_ptr_array_steal_index(f->held, 0), VRM_ERR_TIMEOUT, "late");
    reply = readReply(c, 2000);
    g_assert_nonnull(reply);
    g_assert_cmpuint(f->handled, ==, 3);
    vrmHelperConnReplyError(g_ptr_array_steal_index(f->held, 0), VRM_ERR_TIMEOUT, "late");
    iterate(50);
    close(a);
    close(b);
    close(c);
}

static double
cpuSeconds(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
        ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/*
 * issue 13 finding 8: accept4() at EMFILE left the listener readable and
 * the daemon spun at 100 % CPU. Now it stops watching the listener and
 * looks again later; the clients are served once descriptors are back.
 */
static void
testEmfile(vrmConnFixture *f, gconstpointer data)
{
    struct rlimit saved;
    struct rlimit low;
    int clients[4];
    int probe;
    double cpu;
    size_t i;
    g_autofree char *reply = NULL;

    for (i = 0; i < G_N_ELEMENTS(clients); i++)
        clients[i] = rawClient(f);
    for (i = 0; i < G_N_ELEMENTS(clients); i++)
        sendQuery(clients[i], "now");
    /* no descriptor left for accept(): the limit just above the highest */
    probe = dup(0);
    g_assert_cmpint(getrlimit(RLIMIT_NOFILE, &saved), ==, 0);
    low = saved;
    low.rlim_cur = probe;
    close(probe);
    /* the probe's slot stays free for GLib's own wakeups, then fill it */
    probe = dup(0);
    g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &low), ==, 0);
    cpu = cpuSeconds();
    iterate(1000);
    cpu = cpuSeconds() - cpu;
    g_test_message("CPU used in 1 s at EMFILE: %.3f s, requests handled: %u",
                   cpu, f->handled);
    g_assert_cmpuint(f->handled, ==, 0);
    g_assert_cmpfloat(cpu, <, 0.3);
    g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &saved), ==, 0);
    close(probe);
    for (i = 0; i < G_N_ELEMENTS(clients); i++) {
        reply = readReply(clients[i], 3000);
        g_assert_nonnull(reply);
        g_clear_pointer(&reply, g_free);
        close(clients[i]);
    }
    g_assert_cmpuint(f->handled, ==, G_N_ELEMENTS(clients));
}

static void
testTooLarge(vrmConnFixture *f, gconstpointer data)
{
    int fd = rawClient(f);
    guint32 be = GUINT32_TO_BE(VRM_HELPER_REQUEST_MAX + 1);
    g_autofree char *reply = NULL;

    g_assert_cmpint(write(fd, &be, 4), ==, 4);
    reply = readReply(fd, 2000);
    g_assert_nonnull(reply);
    g_assert_nonnull(strstr(reply, "the allowed size is 1 to 65536 bytes"));
    g_assert_cmpuint(f->handled, ==, 0);
    close(fd);
}

static void
pushOne(vrmHelperConn *c, gpointer opaque)
{
    vrmHelperConnPush(c, opaque);
}

static void
subscribe(int fd)
{
    const char *xml = "<job-events/>";

    g_assert_cmpint(vrmHelperFrameWrite(fd, xml, strlen(xml),
                                        g_get_monotonic_time() + G_USEC_PER_SEC), ==, 0);
}

static void
testSubscribers(vrmConnFixture *f, gconstpointer data)
{
    int reader = rawClient(f);
    int sleeper = rawClient(f);
    g_autofree char *first = NULL;
    g_autofree char *big = g_strnfill(4000, 'x');
    g_autofree char *event = g_strdup_printf("<reply status=\"ok\"><!-- %s --></reply>", big);
    unsigned int i;

    subscribe(reader);
    subscribe(sleeper);
    first = readReply(reader, 2000);
    g_assert_cmpstr(first, ==, "<reply status=\"ok\"/>\n");
    g_assert_cmpuint(vrmHelperServerSubscribers(f->srv, (uid_t)-1), ==, 2);
    g_assert_cmpuint(vrmHelperServerSubscribers(f->srv, getuid()), ==, 2);
    g_assert_cmpuint(vrmHelperServerSubscribers(f->srv, getuid() + 1), ==, 0);

    /* the reader takes each event as it comes; the sleeper reads nothing
     * and is dropped once more than 256 KiB wait for it */
    for (i = 0; i < 200 && vrmHelperServerSubscribers(f->srv, (uid_t)-1) == 2; i++) {
        g_autofree char *got = NULL;

        vrmHelperServerForEachSubscriber(f->srv, pushOne, event);
        got = readReply(reader, 2000);
        g_assert_cmpstr(got, ==, event);
    }
    g_test_message("sleeper dropped after %u events of %zu bytes", i, strlen(event));
    g_assert_cmpuint(vrmHelperServerSubscribers(f->srv, (uid_t)-1), ==, 1);
    g_assert_cmpuint(i, >, 256 * 1024 / 4096 - 1);
    g_assert_cmpuint(i, <, 200);

    /* the reader hangs up: forgotten, its slot free */
    close(reader);
    iterate(100);
    g_assert_cmpuint(vrmHelperServerSubscribers(f->srv, (uid_t)-1), ==, 0);
    g_assert_cmpuint(vrmHelperServerClients(f->srv), ==, 0);
    close(sleeper);
}

/* The framing alone (vrmHelperRequestFeed): what vrmcontrolfuzz runs */
static void
testFeed(void)
{
    static const char doc[] = "<job-list/>";
    guint32 be = GUINT32_TO_BE(sizeof(doc) - 1);
    g_autoptr(GByteArray) in = g_byte_array_new();
    guint32 len = 0;
    gsize i;

    /* byte by byte: whole only at the last one */
    for (i = 0; i < 4; i++)
        g_assert_cmpint(vrmHelperRequestFeed(in, (const guint8 *)&be + i, 1, &len), ==, 0);
    for (i = 0; i + 1 < sizeof(doc) - 1; i++)
        g_assert_cmpint(vrmHelperRequestFeed(in, (const guint8 *)doc + i, 1, &len), ==, 0);
    g_assert_cmpint(vrmHelperRequestFeed(in, (const guint8 *)doc + i, 1, &len), ==, 1);
    g_assert_cmpuint(len, ==, sizeof(doc) - 1);

    /* one byte more: a second request */
    g_assert_cmpint(vrmHelperRequestFeed(in, (const guint8 *)"<", 1, &len), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_PROTOCOL);

    /* a NUL byte inside */
    g_byte_array_set_size(in, 0);
    g_assert_cmpint(vrmHelperRequestFeed(in, (const guint8 *)&be, 4, &len), ==, 0);
    g_assert_cmpint(vrmHelperRequestFeed(in, (const guint8 *)"<job-list/\0", 11, &len), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "NUL"));
    vrmResetLastError();
}

int
main(int argc, char **argv)
{
    vrmTestInit(&argc, &argv);
#define ADD(path, func, cap) \
    g_test_add(path, vrmConnFixture, GUINT_TO_POINTER(cap), setUp, func, tearDown)
    ADD("/conn/stalled-client", testStalledClient, 0);
    ADD("/conn/client-cap", testClientCap, 2);
    ADD("/conn/emfile", testEmfile, 0);
    ADD("/conn/too-large", testTooLarge, 0);
    ADD("/conn/subscribers", testSubscribers, 0);
#undef ADD
    g_test_add_func("/conn/feed", testFeed);
    return g_test_run();
}
