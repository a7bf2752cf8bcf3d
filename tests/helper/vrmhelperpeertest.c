/*
 * vrmhelperpeertest.c: the helpers' TLS channel over loopback TCP
 *
 * Both ends run in this process, on one GMainLoop, through the real
 * GnuTLS code: PSK with the same and with another cluster key, key files
 * others may read, x509 with certificates made by certtool (gnutls-bin)
 * for the right and the wrong host name, a peer that talks plain text, a
 * peer that never says anything (the deadline, and another peer served
 * meanwhile), and the cap on peers.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/resource.h>

#include <glib/gstdio.h>

#include "vrmtestutils.h"
#include "vrmerror.h"
#include "vrmhelperpeer.h"

typedef struct {
    char *dir;
    vrmHelperConfig *conf;
    vrmPeerCreds *creds;
    vrmPeerServer *srv;
    GPtrArray *serverConns;         /* accepted, owned here */
    unsigned int requests;          /* requests the server answered */
    unsigned int serverFailures;
    /* client side */
    vrmPeerConn *client;
    bool clientReady;
    int clientResult;               /* 0 none yet, 1 ok, -1 failed */
    char *clientError;
    /* the server holds the requester to its certificate (x509) */
    bool checkIdentity;
    unsigned int identityRefused;
    char *identityError;
    const char *requesterHost;      /* NULL: "dst" */
} vrmPeerFixture;

static void
runUntil(bool *flag, int *result, unsigned int ms)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)ms * 1000;

    while (!(flag && *flag) && !(result && *result) &&
           g_get_monotonic_time() < deadline) {
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
    }
}

static bool
writeFileIn(const char *dir, const char *name, const char *text)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);

    return g_file_set_contents(path, text, -1, NULL);
}

static void
removeTree(const char *dir)
{
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dir);

    g_assert_true(g_spawn_command_line_sync(cmd, NULL, NULL, NULL, NULL));
}

static char *
writeKey(const char *dir, const char *name)
{
    char *path = g_build_filename(dir, name, NULL);

    g_assert_cmpint(vrmPeerKeyGenerate(path), ==, 0);
    return path;
}

/* ---- the server side: answer a request with ok ---- */

static void
serverMessage(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque)
{
    vrmPeerFixture *f = opaque;
    g_autoptr(vrmPeerMessage) m = msg;
    g_autoptr(vrmPeerMessage) ok = vrmPeerMessageNew(VRM_PEER_MIGRATION_RESULT);

    g_assert_cmpint(m->type, ==, VRM_PEER_MIGRATION_REQUEST);
    g_assert_cmpstr(m->domainName, ==, "web1");
    if (f->checkIdentity && vrmPeerConnCheckIdentity(pc, m->requester) < 0) {
        f->identityRefused++;
        g_free(f->identityError);
        f->identityError = g_strdup(vrmGetLastErrorMessage());
        ok->errorCode = VRM_ERR_AUTH;
        ok->errorMessage = g_strdup(f->identityError);
        g_assert_cmpint(vrmPeerConnSend(pc, ok), ==, 0);
        return;
    }
    f->requests++;
    g_assert_cmpint(vrmPeerConnSend(pc, ok), ==, 0);
}

static void
serverFailed(vrmPeerConn *pc, gpointer opaque)
{
    vrmPeerFixture *f = opaque;

    f->serverFailures++;
    g_ptr_array_remove(f->serverConns, pc);
}

static const vrmPeerConnCallbacks serverCallbacks = {
    .message = serverMessage,
    .failed = serverFailed,
};

static void
serverAccept(vrmPeerConn *pc, gpointer opaque)
{
    vrmPeerFixture *f = opaque;

    vrmPeerConnSetCallbacks(pc, &serverCallbacks, f);
    vrmPeerConnExpect(pc, 5);
    g_ptr_array_add(f->serverConns, pc);
}

/* ---- the client side: send a request, wait for the result ---- */

static void
clientReady(vrmPeerConn *pc, gpointer opaque)
{
    vrmPeerFixture *f = opaque;
    g_autoptr(vrmPeerMessage) req = vrmPeerMessageNew(VRM_PEER_MIGRATION_REQUEST);

    f->clientReady = true;
    req->domainName = g_strdup("web1");
    req->domainUUID = g_strdup("7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b");
    req->requester = vrmLocatorNew(f->requesterHost ? f->requesterHost : "dst",
                                   "127.0.0.1", 16530);
    req->maxChannels = 9;
    g_assert_cmpint(vrmPeerConnSend(pc, req), ==, 0);
    vrmPeerConnExpect(pc, 5);
}

static void
clientMessage(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque)
{
    vrmPeerFixture *f = opaque;
    g_autoptr(vrmPeerMessage) m = msg;

    f->clientResult = m->type == VRM_PEER_MIGRATION_RESULT &&
        m->errorCode == VRM_ERR_OK ? 1 : -1;
}

static void
clientFailed(vrmPeerConn *pc, gpointer opaque)
{
    vrmPeerFixture *f = opaque;

    f->clientResult = -1;
    g_free(f->clientError);
    f->clientError = g_strdup(vrmGetLastErrorMessage());
}

static const vrmPeerConnCallbacks clientCallbacks = {
    .ready = clientReady,
    .message = clientMessage,
    .failed = clientFailed,
};

static void
fixtureSetUp(vrmPeerFixture *f, gconstpointer data)
{
    f->dir = g_dir_make_tmp("vrmpeertest-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
    f->conf = vrmHelperConfigNew();
    f->serverConns = g_ptr_array_new_with_free_func((GDestroyNotify)vrmPeerConnFree);
}

static void
fixtureTearDown(vrmPeerFixture *f, gconstpointer data)
{
    vrmPeerConnFree(f->client);
    g_ptr_array_unref(f->serverConns);
    vrmPeerServerFree(f->srv);
    vrmPeerCredsFree(f->creds);
    vrmHelperConfigFree(f->conf);
    g_free(f->clientError);
    g_free(f->identityError);
    removeTree(f->dir);
    g_free(f->dir);
}

static void
startServer(vrmPeerFixture *f, unsigned int maxPeers, unsigned int timeout)
{
    g_assert_cmpint(vrmPeerCredsLoad(f->conf, &f->creds), ==, 0);
    g_assert_nonnull(f->creds);
    f->srv = vrmPeerServerNew(f->creds, "127.0.0.1", 0, maxPeers, timeout,
                              serverAccept, f);
    g_assert_nonnull(f->srv);
}

static vrmPeerConn *
connectClient(vrmPeerFixture *f, vrmPeerCreds *creds, const char *host)
{
    g_autoptr(vrmLocator) to = vrmLocatorNew(host, "127.0.0.1",
                                             vrmPeerServerPort(f->srv));

    return vrmPeerConnConnect(creds, to, 5, &clientCallbacks, f);
}

/* The fixture's client asks the server as @host, until it has its result */
static void
clientAsk(vrmPeerFixture *f, const char *host)
{
    f->client = connectClient(f, f->creds, host);
    runUntil(NULL, &f->clientResult, 10000);
}

static void
testPskSameKey(vrmPeerFixture *f, gconstpointer data)
{
    g_free(f->conf->peerKeyFile);
    f->conf->peerKeyFile = writeKey(f->dir, "cluster.key");
    startServer(f, 4, 5);
    g_assert_cmpint(vrmPeerCredsAuth(f->creds), ==, VRM_PEER_AUTH_PSK);
    f->client = connectClient(f, f->creds, "localhost");
    g_assert_nonnull(f->client);
    runUntil(NULL, &f->clientResult, 10000);
    g_assert_cmpint(f->clientResult, ==, 1);
    g_assert_true(f->clientReady);
    g_assert_cmpuint(f->requests, ==, 1);
}

static void
testPskOtherKey(vrmPeerFixture *f, gconstpointer data)
{
    g_autoptr(vrmHelperConfig) other = vrmHelperConfigNew();
    g_autoptr(vrmPeerCreds) otherCreds = NULL;

    g_free(f->conf->peerKeyFile);
    f->conf->peerKeyFile = writeKey(f->dir, "cluster.key");
    g_free(other->peerKeyFile);
    other->peerKeyFile = writeKey(f->dir, "other.key");
    startServer(f, 4, 5);
    g_assert_cmpint(vrmPeerCredsLoad(other, &otherCreds), ==, 0);
    f->client = connectClient(f, otherCreds, "localhost");
    g_assert_nonnull(f->client);
    runUntil(NULL, &f->clientResult, 10000);
    g_assert_cmpint(f->clientResult, ==, -1);
    g_assert_false(f->clientReady);
    g_assert_cmpuint(f->requests, ==, 0);
    g_test_message("client: %s", f->clientError);
    g_assert_nonnull(strstr(f->clientError, "TLS handshake"));
}

static void
testKeyFileOpen(vrmPeerFixture *f, gconstpointer data)
{
    g_autoptr(vrmPeerCreds) creds = NULL;
    g_autofree char *path = writeKey(f->dir, "cluster.key");
    struct stat st;

    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, 0600);
    /* never over an existing key */
    g_assert_cmpint(vrmPeerKeyGenerate(path), ==, -1);
    g_chmod(path, 0640);
    g_free(f->conf->peerKeyFile);
    f->conf->peerKeyFile = g_strdup(path);
    vrmResetLastError();
    g_assert_cmpint(vrmPeerCredsLoad(f->conf, &creds), ==, -1);
    g_assert_null(creds);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "that nobody else may read or write"));
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "chmod 0600"));
}

static void
testChannelOff(vrmPeerFixture *f, gconstpointer data)
{
    g_autoptr(vrmPeerCreds) creds = NULL;
    g_autoptr(vrmLocator) to = vrmLocatorNew("x", "127.0.0.1", 1);

    g_free(f->conf->peerKeyFile);
    f->conf->peerKeyFile = g_build_filename(f->dir, "missing.key", NULL);
    g_free(f->conf->peerCACert);
    f->conf->peerCACert = g_build_filename(f->dir, "missing.pem", NULL);
    g_assert_cmpint(vrmPeerCredsLoad(f->conf, &creds), ==, 0);
    g_assert_null(creds);
    vrmResetLastError();
    g_assert_null(vrmPeerConnConnect(creds, to, 1, &clientCallbacks, f));
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "the helpers' channel is off"));
}

/* certtool: a CA, a server certificate for localhost, a client certificate */
static void
makePki(const char *dir)
{
    const char *steps[] = {
        "certtool --generate-privkey --outfile ca.key",
        "certtool --generate-self-signed --load-privkey ca.key --template ca.tmpl --outfile cacert.pem",
        "certtool --generate-privkey --outfile serverkey.pem",
        "certtool --generate-certificate --load-privkey serverkey.pem --load-ca-certificate cacert.pem --load-ca-privkey ca.key --template server.tmpl --outfile servercert.pem",
        "certtool --generate-privkey --outfile clientkey.pem",
        "certtool --generate-certificate --load-privkey clientkey.pem --load-ca-certificate cacert.pem --load-ca-privkey ca.key --template client.tmpl --outfile clientcert.pem",
    };
    size_t i;

    g_assert_true(writeFileIn(dir, "ca.tmpl", "cn = vrm test CA\nca\ncert_signing_key\nexpiration_days = 2\n"));
    g_assert_true(writeFileIn(dir, "server.tmpl", "cn = localhost\ndns_name = localhost\ntls_www_server\nencryption_key\nsigning_key\nexpiration_days = 2\n"));
    g_assert_true(writeFileIn(dir, "client.tmpl", "cn = client.example\ntls_www_client\nencryption_key\nsigning_key\nexpiration_days = 2\n"));
    for (i = 0; i < G_N_ELEMENTS(steps); i++) {
        g_autofree char *cmd = g_strdup_printf("sh -c 'cd %s && %s >/dev/null 2>&1'", dir, steps[i]);
        int status = -1;

        if (!g_spawn_command_line_sync(cmd, NULL, NULL, &status, NULL) || status != 0)
            g_error("'%s' failed: is gnutls-bin installed (tools/install-deps.sh)?", steps[i]);
    }
}

static void
useX509(vrmHelperConfig *conf, const char *dir)
{
    conf->peerAuth = VRM_PEER_AUTH_X509;
#define SET(field, name) g_free(conf->field); conf->field = g_build_filename(dir, name, NULL)
    SET(peerCACert, "cacert.pem");
    SET(peerServerCert, "servercert.pem");
    SET(peerServerKey, "serverkey.pem");
    SET(peerClientCert, "clientcert.pem");
    SET(peerClientKey, "clientkey.pem");
#undef SET
}

/* The fixture's server and client on a fresh CA's certificates */
static void
usePki(vrmPeerFixture *f)
{
    makePki(f->dir);
    useX509(f->conf, f->dir);
}

static void
testX509(vrmPeerFixture *f, gconstpointer data)
{
    usePki(f);
    startServer(f, 4, 5);
    g_assert_cmpint(vrmPeerCredsAuth(f->creds), ==, VRM_PEER_AUTH_X509);
    clientAsk(f, "localhost");
    g_assert_cmpint(f->clientResult, ==, 1);
    g_assert_cmpuint(f->requests, ==, 1);
}

static void
testX509WrongHost(vrmPeerFixture *f, gconstpointer data)
{
    usePki(f);
    startServer(f, 4, 5);
    /* the locator says another host: its certificate does not match */
    clientAsk(f, "otherhost.example");
    g_assert_cmpint(f->clientResult, ==, -1);
    g_test_message("client: %s", f->clientError);
    g_assert_nonnull(strstr(f->clientError, "does not verify"));
    g_assert_cmpuint(f->requests, ==, 0);
}

/*
 * The requester names a host: under x509 its certificate must name it too
 * (issue 33 item 1: any certificate of the CA could ask as any host). The
 * client's says client.example and no address: asking as "dst" from
 * 127.0.0.1 is refused, as client.example served.
 */
static void
testX509Identity(vrmPeerFixture *f, gconstpointer data)
{
    usePki(f);
    f->checkIdentity = true;
    startServer(f, 4, 5);
    clientAsk(f, "localhost");
    g_assert_cmpint(f->clientResult, ==, -1);
    g_assert_cmpuint(f->identityRefused, ==, 1);
    g_assert_cmpuint(f->requests, ==, 0);
    g_test_message("server: %s", f->identityError);
    g_assert_nonnull(strstr(f->identityError, "names neither the host dst"));
    g_assert_nonnull(strstr(f->identityError, "CN=client.example"));

    g_clear_pointer(&f->client, vrmPeerConnFree);
    f->clientResult = 0;
    f->requesterHost = "client.example";
    clientAsk(f, "localhost");
    g_test_message("client: %s; server: %s", f->clientError, f->identityError);
    g_assert_cmpuint(f->identityRefused, ==, 1);
    g_assert_cmpint(f->clientResult, ==, 1);
    g_assert_cmpuint(f->requests, ==, 1);
}

/* [peers] allowed-dn: a certificate of the CA whose subject matches no
 * pattern is refused after the handshake, before any request; one that
 * matches is served */
static void
testX509AllowedDN(vrmPeerFixture *f, gconstpointer data)
{
    usePki(f);
    f->conf->peerAllowedDN = g_strdup("CN=hv-*.example.org; O=Example,CN=*");
    startServer(f, 4, 5);
    clientAsk(f, "localhost");
    g_assert_cmpint(f->clientResult, ==, -1);
    g_assert_cmpuint(f->requests, ==, 0);
    g_assert_cmpuint(f->serverFailures, ==, 0);
    g_assert_cmpuint(f->serverConns->len, ==, 0);

    /* the same certificates, a list that names the client */
    vrmPeerServerFree(g_steal_pointer(&f->srv));
    vrmPeerCredsFree(g_steal_pointer(&f->creds));
    g_clear_pointer(&f->client, vrmPeerConnFree);
    f->clientResult = 0;
    g_free(f->conf->peerAllowedDN);
    f->conf->peerAllowedDN = g_strdup("CN=hv-*.example.org;CN=client.*");
    startServer(f, 4, 5);
    clientAsk(f, "localhost");
    g_assert_cmpint(f->clientResult, ==, 1);
    g_assert_cmpuint(f->requests, ==, 1);
}

/* The CA revoked the client's certificate (a CRL at [peers] crl, as at
 * libvirt's /etc/pki/CA/cacrl.pem): the handshake fails, nothing is asked
 * (issue 33 item 8); without the CRL the same certificates work */
static void
testX509Revoked(vrmPeerFixture *f, gconstpointer data)
{
    g_autofree char *cmd = NULL;
    int status = -1;

    makePki(f->dir);
    g_assert_true(writeFileIn(f->dir, "crl.tmpl", "crl_next_update = 2\ncrl_number = 1\n"));
    cmd = g_strdup_printf("sh -c 'cd %s && certtool --generate-crl --load-ca-privkey ca.key "
                          "--load-ca-certificate cacert.pem --load-certificate clientcert.pem "
                          "--template crl.tmpl --outfile cacrl.pem >/dev/null 2>&1'", f->dir);
    g_assert_true(g_spawn_command_line_sync(cmd, NULL, NULL, &status, NULL));
    g_assert_cmpint(status, ==, 0);
    useX509(f->conf, f->dir);
    g_free(f->conf->peerCRL);
    f->conf->peerCRL = g_build_filename(f->dir, "cacrl.pem", NULL);
    startServer(f, 4, 5);
    clientAsk(f, "localhost");
    g_test_message("client: %s", f->clientError);
    g_assert_cmpint(f->clientResult, ==, -1);
    g_assert_cmpuint(f->requests, ==, 0);
}

/* A raw TCP connection to the server; @text is sent if not NULL */
static int
rawConnect(vrmPeerFixture *f, const char *text)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    sa.sin_port = htons(vrmPeerServerPort(f->srv));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g_assert_cmpint(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    if (text)
        g_assert_cmpint(write(fd, text, strlen(text)), ==, (ssize_t)strlen(text));
    return fd;
}

/* A non-blocking TCP connection to the server from 127.0.0.@last; @text
 * is sent once connected, if not NULL; -1 when the system refuses more */
static int
connectFrom(vrmPeerFixture *f, unsigned int last, const char *text)
{
    struct sockaddr_in from = { .sin_family = AF_INET };
    struct sockaddr_in to = { .sin_family = AF_INET };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    if (fd < 0)
        return -1;
    from.sin_addr.s_addr = htonl(INADDR_LOOPBACK + last - 1);
    to.sin_port = htons(vrmPeerServerPort(f->srv));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g_assert_cmpint(bind(fd, (struct sockaddr *)&from, sizeof(from)), ==, 0);
    if (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    if (text && write(fd, text, strlen(text)) < 0 && errno != EAGAIN)
        g_assert_cmpint(errno, ==, ENOTCONN);
    return fd;
}

/*
 * A flood from one address (127.0.0.2): a thousand idle connections and a
 * hundred handshakes that stall after a record header. A peer from another
 * address (127.0.0.1) is served at once, not after the flood's deadlines
 * (issue 33 item 2: 16 slots, each held 10 s, before).
 */
static void
testFlood(vrmPeerFixture *f, gconstpointer data)
{
    g_autoptr(GArray) fds = g_array_new(FALSE, FALSE, sizeof(int));
    struct rlimit rl;
    unsigned int idle = 1000, slow = 100, i;
    gint64 start;
    int fd;

    /* room for the flood's descriptors in this process */
    g_assert_cmpint(getrlimit(RLIMIT_NOFILE, &rl), ==, 0);
    rl.rlim_cur = MIN(rl.rlim_max, 4096);
    g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &rl), ==, 0);
    if (rl.rlim_cur < 1300) {
        idle = rl.rlim_cur - 300;
        slow = 50;
    }
    g_free(f->conf->peerKeyFile);
    f->conf->peerKeyFile = writeKey(f->dir, "cluster.key");
    startServer(f, 16, 10);
    for (i = 0; i < idle + slow; i++) {
        /* a TLS handshake record's header, and nothing after it */
        if ((fd = connectFrom(f, 2, i < idle ? NULL : "\x16\x03\x01\x02\x00")) >= 0)
            g_array_append_val(fds, fd);
        if (i % 64 == 0)
            g_main_context_iteration(NULL, FALSE);
    }
    g_test_message("flood: %u connections from 127.0.0.2", fds->len);
    g_assert_cmpuint(fds->len, >=, idle / 2);
    start = g_get_monotonic_time();
    f->client = connectClient(f, f->creds, "localhost");
    g_assert_nonnull(f->client);
    runUntil(NULL, &f->clientResult, 20000);
    g_test_message("the peer from 127.0.0.1 was served in %lld ms",
                   (long long)(g_get_monotonic_time() - start) / 1000);
    g_assert_cmpint(f->clientResult, ==, 1);
    g_assert_cmpuint(f->requests, ==, 1);
    g_assert_cmpint(g_get_monotonic_time() - start, <, 3 * G_USEC_PER_SEC);
    for (i = 0; i < fds->len; i++)
        close(g_array_index(fds, int, i));
}

/* [peers] allow: a connection from outside is closed before any TLS, and
 * this side does not connect outside either, whatever a locator says */
static void
testAllow(vrmPeerFixture *f, gconstpointer data)
{
    g_autoptr(vrmLocator) outside = NULL;
    char buf[16];
    gint64 deadline;
    ssize_t n = -1;
    int fd;

    g_free(f->conf->peerKeyFile);
    f->conf->peerKeyFile = writeKey(f->dir, "cluster.key");
    f->conf->peerAllow = g_strdup("127.0.0.1/32;192.0.2.0/24");
    startServer(f, 4, 5);
    fd = connectFrom(f, 2, "\x16\x03\x01\x02\x00");
    g_assert_cmpint(fd, >=, 0);
    deadline = g_get_monotonic_time() + 3 * G_USEC_PER_SEC;
    while (g_get_monotonic_time() < deadline) {
        g_main_context_iteration(NULL, FALSE);
        if ((n = read(fd, buf, sizeof(buf))) >= 0 || (errno != EAGAIN && errno != ENOTCONN))
            break;
        g_usleep(2000);
    }
    /* closed at once: end of file or a reset, no TLS alert */
    g_assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
    g_assert_cmpuint(f->serverConns->len, ==, 0);
    close(fd);
    /* inside: served */
    clientAsk(f, "localhost");
    g_assert_cmpint(f->clientResult, ==, 1);
    /* a locator outside: not even a connection */
    outside = vrmLocatorNew("elsewhere", "127.0.0.3", vrmPeerServerPort(f->srv));
    vrmResetLastError();
    g_assert_null(vrmPeerConnConnect(f->creds, outside, 5, &clientCallbacks, f));
    g_test_message("%s", vrmGetLastErrorMessage());
    {
        g_autofree char *want =
            g_strdup_printf("the virt-rdma helper at 127.0.0.3:%u is outside the networks this host's helpers may talk to ([peers] allow)",
                            vrmPeerServerPort(f->srv));

        g_assert_cmpstr(vrmGetLastErrorMessage(), ==, want);
    }
}

/* Plain text where TLS is expected: the handshake fails, nothing else */
static void
testPlainText(vrmPeerFixture *f, gconstpointer data)
{
    bool never = false;
    int fd;

    g_free(f->conf->peerKeyFile);
    f->conf->peerKeyFile = writeKey(f->dir, "cluster.key");
    startServer(f, 4, 5);
    fd = rawConnect(f, "GET / HTTP/1.0\r\n\r\n<migration-request version='1'/>");
    runUntil(&never, NULL, 500);
    g_assert_cmpuint(f->serverConns->len, ==, 0);
    g_assert_cmpuint(f->requests, ==, 0);
    close(fd);
}

/*
 * A peer that connects and says nothing holds one slot until the
 * handshake deadline; meanwhile another peer is served at once, and at
 * the cap (one peer) the next one waits for the slot instead of being
 * refused.
 */
static void
testStalledPeer(vrmPeerFixture *f, gconstpointer data)
{
    gint64 start;
    int fd;

    g_free(f->conf->peerKeyFile);
    f->conf->peerKeyFile = writeKey(f->dir, "cluster.key");
    startServer(f, GPOINTER_TO_UINT(data), 2);
    fd = rawConnect(f, NULL);
    start = g_get_monotonic_time();
    clientAsk(f, "localhost");
    g_assert_cmpint(f->clientResult, ==, 1);
    if (GPOINTER_TO_UINT(data) > 1)
        g_assert_cmpint(g_get_monotonic_time() - start, <, 1500 * 1000);
    else
        g_assert_cmpint(g_get_monotonic_time() - start, >=, 1500 * 1000);
    close(fd);
}

/* The framing alone (vrmPeerFrameTake): what the fuzzer vrmpeerfuzz runs */
static void
appendFrame(GByteArray *in, const char *doc, gsize len)
{
    guint32 be = GUINT32_TO_BE((guint32)len);

    g_byte_array_append(in, (const guint8 *)&be, 4);
    g_byte_array_append(in, (const guint8 *)doc, len);
}

static void
testFraming(void)
{
    static const char ok[] = "<migration-result status=\"ok\"/>";
    g_autoptr(GByteArray) in = g_byte_array_new();
    g_autoptr(vrmPeerMessage) msg = NULL;
    guint32 zero = 0;

    /* two frames in one read, then a partial one */
    appendFrame(in, ok, strlen(ok));
    appendFrame(in, ok, strlen(ok));
    g_byte_array_append(in, (const guint8 *)"\0\0", 2);
    g_assert_cmpint(vrmPeerFrameTake(in, "t", &msg), ==, 1);
    g_assert_cmpint(msg->type, ==, VRM_PEER_MIGRATION_RESULT);
    g_clear_pointer(&msg, vrmPeerMessageFree);
    g_assert_cmpint(vrmPeerFrameTake(in, "t", &msg), ==, 1);
    g_clear_pointer(&msg, vrmPeerMessageFree);
    g_assert_cmpint(vrmPeerFrameTake(in, "t", &msg), ==, 0);
    g_assert_null(msg);
    g_assert_cmpuint(in->len, ==, 2);

    /* a length of 0 */
    g_byte_array_set_size(in, 0);
    g_byte_array_append(in, (const guint8 *)&zero, 4);
    g_assert_cmpint(vrmPeerFrameTake(in, "t", &msg), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_PROTOCOL);

    /* a NUL byte inside the document */
    g_byte_array_set_size(in, 0);
    appendFrame(in, ok, sizeof(ok));
    g_assert_cmpint(vrmPeerFrameTake(in, "t", &msg), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "a NUL byte"));
    g_assert_null(msg);

    /* never more than a frame and one read in the buffer */
    g_byte_array_set_size(in, 4 + VRM_PEER_FRAME_MAX);
    g_assert_cmpint(vrmPeerFrameAppend(in, (const guint8 *)ok, 1, "t"), ==, 0);
    g_byte_array_set_size(in, 4 + VRM_PEER_FRAME_MAX + VRM_PEER_READ_CHUNK);
    g_assert_cmpint(vrmPeerFrameAppend(in, (const guint8 *)ok, 1, "t"), ==, -1);
    vrmResetLastError();
}

/* The cases on a fresh vrmPeerFixture each */
static const struct {
    const char *path;
    void (*func)(vrmPeerFixture *f, gconstpointer data);
    unsigned int data;          /* the case's parameter; 0: none */
} fixtureCases[] = {
    { "/peer/psk/same-key", testPskSameKey, 0 },
    { "/peer/psk/other-key", testPskOtherKey, 0 },
    { "/peer/psk/key-file", testKeyFileOpen, 0 },
    { "/peer/off", testChannelOff, 0 },
    { "/peer/x509/ok", testX509, 0 },
    { "/peer/x509/wrong-host", testX509WrongHost, 0 },
    { "/peer/x509/revoked", testX509Revoked, 0 },
    { "/peer/x509/identity", testX509Identity, 0 },
    { "/peer/x509/allowed-dn", testX509AllowedDN, 0 },
    { "/peer/plain-text", testPlainText, 0 },
    { "/peer/flood", testFlood, 0 },
    { "/peer/allow", testAllow, 0 },
    { "/peer/stalled/served-meanwhile", testStalledPeer, 4 },
    { "/peer/stalled/cap-waits", testStalledPeer, 1 },
};

int
main(int argc, char **argv)
{
    size_t i;

    vrmTestInit(&argc, &argv);
    for (i = 0; i < G_N_ELEMENTS(fixtureCases); i++)
        g_test_add(fixtureCases[i].path, vrmPeerFixture, GUINT_TO_POINTER(fixtureCases[i].data),
                   fixtureSetUp, fixtureCases[i].func, fixtureTearDown);
    g_test_add_func("/peer/framing", testFraming);
    return g_test_run();
}
