/*
 * vrmtcptest.c: the transparent mode's TCP helpers (util/vrmtcp.c): the
 * kernel's socket tables as text (samples copied from a real
 * /proc/net/tcp and tcp6), and real loopback sockets of this process
 */
#include <config.h>

#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <glib.h>

#include "vrmerror.h"
#include "vrmtcp.h"
#include "vrmtestmain.h"

/* A listener on 127.0.0.1:6666 (uid 0), the connection it accepted from
 * 127.0.0.1:55884 (uid 107), and that client's socket, which believes it
 * reached 127.0.0.2:5555 (uid 64055) */
static const char tcp4[] =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 0100007F:1A0A 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3535113 1 00000000eb56c164 100 0 0 10 0\n"
    "   1: 0100007F:1A0A 0100007F:DA4C 01 00000000:00000000 00:00000000 00000000   107        0 3535115 1 0000000080138f1c 20 0 0 10 -1\n"
    "   2: 0100007F:DA4C 0200007F:15B3 01 00000000:00000000 00:00000000 00000000 64055        0 3535114 2 000000003b3d85ea 20 0 0 10 -1\n"
    "   3: garbage\n"
    "   4: 0100007F:1A0Z 00000000:0000 0A 0 0 0 5\n";

/* QEMU listening on [::]:49152 (uid 64055) */
static const char tcp6[] =
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000000000000:C000 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 64055        0 41 1 0 100 0 0 10 0\n";

static void
addr4(struct sockaddr_storage *ss, const char *ip, unsigned int port)
{
    struct sockaddr_in *in = (struct sockaddr_in *)ss;

    memset(ss, 0, sizeof(*ss));
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    g_assert_cmpint(inet_pton(AF_INET, ip, &in->sin_addr), ==, 1);
}

static void
testTableFind(void)
{
    struct sockaddr_storage l, r;
    uid_t uid = 4242;

    /* the listener, by its address and by a wildcard */
    addr4(&l, "127.0.0.1", 6666);
    g_assert_cmpint(vrmTcpTableFind(tcp4, false, &l, NULL, &uid), ==, 1);
    g_assert_cmpint(uid, ==, 0);
    /* the accepted connection, and the client's side (its own view) */
    addr4(&r, "127.0.0.1", 55884);
    g_assert_cmpint(vrmTcpTableFind(tcp4, false, &l, &r, &uid), ==, 1);
    g_assert_cmpint(uid, ==, 107);
    addr4(&l, "127.0.0.1", 55884);
    addr4(&r, "127.0.0.2", 5555);
    g_assert_cmpint(vrmTcpTableFind(tcp4, false, &l, &r, &uid), ==, 1);
    g_assert_cmpint(uid, ==, 64055);
    /* nobody listens on the client's port; the garbage rows are skipped */
    uid = 4242;
    g_assert_cmpint(vrmTcpTableFind(tcp4, false, &l, NULL, &uid), ==, 0);
    addr4(&l, "127.0.0.1", 0x1a0);
    g_assert_cmpint(vrmTcpTableFind(tcp4, false, &l, NULL, &uid), ==, 0);
    g_assert_cmpint(uid, ==, 4242);
    /* an IPv4 destination served by a dual-stack listener on [::] */
    addr4(&l, "198.18.0.2", 49152);
    g_assert_cmpint(vrmTcpTableFind(tcp6, true, &l, NULL, &uid), ==, 1);
    g_assert_cmpint(uid, ==, 64055);
    addr4(&l, "198.18.0.2", 49153);
    g_assert_cmpint(vrmTcpTableFind(tcp6, true, &l, NULL, &uid), ==, 0);
    /* empty and truncated tables */
    g_assert_cmpint(vrmTcpTableFind("", false, &l, NULL, &uid), ==, 0);
    g_assert_cmpint(vrmTcpTableFind("header\n   0: 0100007F:1A0A", false, &l, NULL, &uid), ==, 0);
}

/* Real sockets: a listener of ours, a connection nothing redirected */
static void
testLoopback(void)
{
    struct sockaddr_storage ss, orig, peer;
    socklen_t len = sizeof(ss);
    uid_t uid = 4242;
    int lfd, cfd, afd;

    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    addr4(&ss, "127.0.0.1", 0);
    g_assert_cmpint(bind(lfd, (struct sockaddr *)&ss, sizeof(struct sockaddr_in)), ==, 0);
    g_assert_cmpint(listen(lfd, 4), ==, 0);
    g_assert_cmpint(getsockname(lfd, (struct sockaddr *)&ss, &len), ==, 0);
    g_assert_cmpint(vrmTcpSocketUid(&ss, NULL, &uid), ==, 1);
    g_assert_cmpint(uid, ==, geteuid());

    cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(connect(cfd, (struct sockaddr *)&ss, sizeof(struct sockaddr_in)), ==, 0);
    len = sizeof(peer);
    afd = accept(lfd, (struct sockaddr *)&peer, &len);
    g_assert_cmpint(afd, >=, 0);
    /* the connecting socket's owner, as the source engine asks it */
    uid = 4242;
    g_assert_cmpint(vrmTcpSocketUid(&peer, &ss, &uid), ==, 1);
    g_assert_cmpint(uid, ==, geteuid());
    /* connected straight to us: not steered, refused by the engine */
    g_assert_cmpint(vrmTcpOriginalDestination(afd, &orig), ==, 0);

    g_assert_cmpint(vrmTcpAddressIsLocal(&ss), ==, 1);
    addr4(&ss, "192.0.2.1", 49152);     /* TEST-NET-1: nobody's */
    g_assert_cmpint(vrmTcpAddressIsLocal(&ss), ==, 0);
    close(afd);
    close(cfd);
    close(lfd);
}

static void
testFormat(void)
{
    struct sockaddr_storage ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    g_autofree char *a = NULL;
    g_autofree char *b = NULL;

    addr4(&ss, "198.18.0.2", 49152);
    a = vrmTcpFormat(&ss);
    g_assert_cmpstr(a, ==, "198.18.0.2:49152");
    memset(&ss, 0, sizeof(ss));
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(49153);
    inet_pton(AF_INET6, "2001:db8::1", &in6->sin6_addr);
    b = vrmTcpFormat(&ss);
    g_assert_cmpstr(b, ==, "[2001:db8::1]:49153");
}

static const vrmTestFunc testFuncs[] = {
    { "/tcp/table-find", testTableFind },
    { "/tcp/loopback", testLoopback },
    { "/tcp/format", testFormat },
};

VRM_TEST_MAIN(NULL, testFuncs)
