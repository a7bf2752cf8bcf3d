/*
 * vrmhelperpeer.c: the channel between the virt-rdmad of two hosts
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* accept4 */
#endif

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib-unix.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "vrmhelperpeer.h"
#include "vrmhelperratelimit.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"
#include "vrmnetwork.h"
#include "vrmsocket.h"
#include "vrmtcp.h"

/* TLS 1.3 only. PSK: only the (EC)DHE modes, for forward secrecy. */
#define VRM_PEER_PRIORITY_PSK "NORMAL:-VERS-ALL:+VERS-TLS1.3:-KX-ALL:+ECDHE-PSK:+DHE-PSK"
#define VRM_PEER_PRIORITY_X509 "NORMAL:-VERS-ALL:+VERS-TLS1.3"
#define VRM_PEER_PSK_USER_PREFIX "virt-rdma-"
#define VRM_PEER_LISTEN_BACKLOG 128
/* A flood from one address holds this many handshakes at most; the rest
 * of its connections are closed at once (issue 33 item 2) */
#define VRM_PEER_HANDSHAKES_PER_ADDRESS 4
/* An unauthenticated connection gets this long, whatever [peers] timeout
 * says (a handshake takes milliseconds) */
#define VRM_PEER_HANDSHAKE_TIMEOUT_S 5

struct _vrmPeerCreds {
    vrmPeerAuth auth;
    /* psk */
    guint8 key[VRM_PEER_KEY_BYTES];
    char *pskUser;                  /* "virt-rdma-" + key id */
    char *keyFile;
    gnutls_psk_client_credentials_t pskClient;
    gnutls_psk_server_credentials_t pskServer;
    /* x509 */
    char *caFile;
    gnutls_certificate_credentials_t certClient;
    gnutls_certificate_credentials_t certServer;
    /* [peers] allowed-dn: patterns a client certificate's subject must
     * match, like libvirt's tls_allowed_dn_list; NULL: any the CA signed */
    GStrv allowedDN;
    /* [peers] allow: the networks peers may be in, both ways; NULL: any */
    GArray *allow;
    /* the local address connections come from: the locator's, which the
     * source compares with the request's; NULL: the kernel's choice */
    char *source;
};

typedef enum {
    VRM_PEER_CONNECTING,    /* client: TCP connect under way */
    VRM_PEER_HANDSHAKE,     /* TLS handshake */
    VRM_PEER_OPEN,          /* messages both ways */
    VRM_PEER_FAILED,        /* the failure was reported: nothing more */
} vrmPeerState;

struct _vrmPeerConn {
    vrmPeerCreds *creds;
    vrmPeerServer *srv;             /* server side: who counts us, or NULL */
    bool client;
    int fd;
    vrmPeerState state;
    gnutls_session_t session;
    char *name;                     /* "ADDR:PORT" */
    char *addr;                     /* server side: the peer's address */
    char *host;                     /* client: the name its certificate must carry */
    char *subject;                  /* x509, server side: the client's DN */
    guint watch;
    GIOCondition watchCond;
    guint timer;                    /* connect/handshake or expect deadline */
    GByteArray *in;                 /* decrypted, not yet a whole frame */
    GByteArray *out;                /* frames not yet taken by GnuTLS */
    size_t sending;                 /* length of the record_send that said AGAIN */
    vrmPeerConnCallbacks cb;
    gpointer opaque;
    unsigned int busy;              /* inside a callback */
    bool zombie;                    /* freed while busy */
    bool closing;                   /* freed once its output is written */
};

struct _vrmPeerServer {
    vrmPeerCreds *creds;
    int fd;
    unsigned int port;
    unsigned int maxPeers;
    unsigned int timeout;
    vrmPeerAcceptFunc func;
    gpointer opaque;
    guint watch;
    guint retry;
    GHashTable *conns;              /* every connection it made, until freed */
    vrmRateLimit log;
};

static vrmRateLimit vrmPeerHandshakeLog = VRM_RATE_LIMIT_INIT(5, 60);

static void vrmPeerConnUpdateWatch(vrmPeerConn *pc);
static void vrmPeerConnSetTimer(vrmPeerConn *pc, unsigned int seconds);
static void vrmPeerServerWatch(vrmPeerServer *srv);


/* ---- credentials ------------------------------------------------------ */

static int
vrmPeerParseHex(const char *text, guint8 *out, size_t n)
{
    size_t i;

    for (i = 0; i < 2 * n; i++) {
        if (!g_ascii_isxdigit(text[i]))
            return -1;
    }
    for (i = 0; i < n; i++)
        out[i] = (g_ascii_xdigit_value(text[2 * i]) << 4) |
            g_ascii_xdigit_value(text[2 * i + 1]);
    return 0;
}

/* The key file: root's alone, 64 hexadecimal characters and a newline */
static int
vrmPeerKeyLoad(const char *path, guint8 key[VRM_PEER_KEY_BYTES])
{
    char buf[2 * VRM_PEER_KEY_BYTES + 3];
    struct stat st;
    ssize_t n;
    int fd;
    int ret = -1;

    if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        vrmReportSystemError(errno, _("cannot open the cluster key %1$s"), path);
        return -1;
    }
    if (fstat(fd, &st) < 0) {
        vrmReportSystemError(errno, _("cannot inspect the cluster key %1$s"), path);
        goto cleanup;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("the cluster key %1$s must be a file of user %2$u that nobody else may read or write (it is %3$u, mode %4$04o): chown %5$u %6$s; chmod 0600 %7$s"),
                       path, (unsigned int)geteuid(), (unsigned int)st.st_uid,
                       (unsigned int)(st.st_mode & 07777), (unsigned int)geteuid(),
                       path, path);
        goto cleanup;
    }
    n = read(fd, buf, sizeof(buf));
    if (n < 2 * VRM_PEER_KEY_BYTES ||
        (n > 2 * VRM_PEER_KEY_BYTES && buf[2 * VRM_PEER_KEY_BYTES] != '\n') ||
        n > 2 * VRM_PEER_KEY_BYTES + 1 ||
        vrmPeerParseHex(buf, key, VRM_PEER_KEY_BYTES) < 0) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("the cluster key %1$s is not %2$d hexadecimal characters; make one with: virt-rdmad --generate-key %3$s"),
                       path, 2 * VRM_PEER_KEY_BYTES, path);
        goto cleanup;
    }
    ret = 0;

 cleanup:
    explicit_bzero(buf, sizeof(buf));
    close(fd);
    return ret;
}

int
vrmPeerKeyGenerate(const char *path)
{
    guint8 key[VRM_PEER_KEY_BYTES];
    char hex[2 * VRM_PEER_KEY_BYTES + 2];
    size_t i;
    int fd;
    int ret = -1;

    if (getrandom(key, sizeof(key), 0) != sizeof(key)) {
        vrmReportSystemError(errno, _("cannot get random bytes for the cluster key"));
        return -1;
    }
    for (i = 0; i < VRM_PEER_KEY_BYTES; i++)
        g_snprintf(hex + 2 * i, 3, "%02x", key[i]);
    hex[2 * VRM_PEER_KEY_BYTES] = '\n';
    hex[2 * VRM_PEER_KEY_BYTES + 1] = '\0';
    if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                   0600)) < 0) {
        vrmReportSystemError(errno, _("cannot create the cluster key %1$s (an existing key is never overwritten)"),
                             path);
        goto cleanup;
    }
    if (fchmod(fd, 0600) < 0 ||
        write(fd, hex, 2 * VRM_PEER_KEY_BYTES + 1) != 2 * VRM_PEER_KEY_BYTES + 1 ||
        fsync(fd) < 0) {
        vrmReportSystemError(errno, _("cannot write the cluster key %1$s"), path);
        close(fd);
        unlink(path);
        goto cleanup;
    }
    close(fd);
    ret = 0;

 cleanup:
    explicit_bzero(key, sizeof(key));
    explicit_bzero(hex, sizeof(hex));
    return ret;
}

static int
vrmPeerPskServerKey(gnutls_session_t session, const char *username,
                    gnutls_datum_t *key)
{
    vrmPeerConn *pc = gnutls_session_get_ptr(session);
    vrmPeerCreds *creds = pc->creds;

    if (g_strcmp0(username, creds->pskUser) != 0) {
        g_autofree char *shown = vrmLogSanitize(username ? username : "");

        /* rate limited with the handshake failure that follows */
        VRM_WARN_LIMITED(&vrmPeerHandshakeLog,
                         _("the peer helper at %1$s uses another cluster key (its id is '%2$s', ours '%3$s'): copy the same key file to every host"),
                         pc->name, shown, creds->pskUser);
        return -1;
    }
    key->data = gnutls_malloc(VRM_PEER_KEY_BYTES);
    if (!key->data)
        return -1;
    memcpy(key->data, creds->key, VRM_PEER_KEY_BYTES);
    key->size = VRM_PEER_KEY_BYTES;
    return 0;
}

static int
vrmPeerCredsLoadPsk(vrmPeerCreds *creds, const vrmHelperConfig *conf)
{
    g_autofree char *sum = NULL;
    gnutls_datum_t key;
    int rc;

    if (vrmPeerKeyLoad(conf->peerKeyFile, creds->key) < 0)
        return -1;
    creds->keyFile = g_strdup(conf->peerKeyFile);
    /* the identity names the key without revealing it: mismatches are
     * told apart from other failures */
    sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, creds->key,
                                      VRM_PEER_KEY_BYTES);
    creds->pskUser = g_strdup_printf(VRM_PEER_PSK_USER_PREFIX "%.16s", sum);
    key.data = creds->key;
    key.size = VRM_PEER_KEY_BYTES;
    if ((rc = gnutls_psk_allocate_client_credentials(&creds->pskClient)) < 0 ||
        (rc = gnutls_psk_set_client_credentials(creds->pskClient, creds->pskUser,
                                                &key, GNUTLS_PSK_KEY_RAW)) < 0 ||
        (rc = gnutls_psk_allocate_server_credentials(&creds->pskServer)) < 0) {
        vrmReportError(VRM_ERR_SYSTEM, _("cannot set up the cluster key: %1$s"),
                       gnutls_strerror(rc));
        return -1;
    }
    gnutls_psk_set_server_credentials_function(creds->pskServer, vrmPeerPskServerKey);
    return 0;
}

static int
vrmPeerCertCreds(gnutls_certificate_credentials_t *out, const char *ca,
                 const char *crl, const char *cert, const char *key)
{
    int rc;

    if ((rc = gnutls_certificate_allocate_credentials(out)) < 0) {
        vrmReportError(VRM_ERR_SYSTEM, _("cannot set up TLS credentials: %1$s"),
                       gnutls_strerror(rc));
        return -1;
    }
    if ((rc = gnutls_certificate_set_x509_trust_file(*out, ca, GNUTLS_X509_FMT_PEM)) <= 0) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("cannot load the CA certificate %1$s ([peers] ca-cert): %2$s"),
                       ca, rc < 0 ? gnutls_strerror(rc) : _("no certificate in it"));
        return -1;
    }
    /* like libvirt: the CA's revocation list when there is one; a
     * certificate it revokes is refused both ways */
    if (crl && g_file_test(crl, G_FILE_TEST_EXISTS) &&
        (rc = gnutls_certificate_set_x509_crl_file(*out, crl, GNUTLS_X509_FMT_PEM)) < 0) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("cannot load the certificate revocation list %1$s ([peers] crl): %2$s"),
                       crl, gnutls_strerror(rc));
        return -1;
    }
    if ((rc = gnutls_certificate_set_x509_key_file(*out, cert, key,
                                                    GNUTLS_X509_FMT_PEM)) < 0) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("cannot load the certificate %1$s with its key %2$s: %3$s"),
                       cert, key, gnutls_strerror(rc));
        return -1;
    }
    return 0;
}

static bool
vrmPeerFilesExist(const char *const *paths)
{
    size_t i;

    for (i = 0; paths[i]; i++) {
        if (access(paths[i], R_OK) < 0)
            return false;
    }
    return true;
}

int
vrmPeerCredsLoad(const vrmHelperConfig *conf, vrmPeerCreds **out)
{
    g_autoptr(vrmPeerCreds) creds = g_new0(vrmPeerCreds, 1);
    const char *const pki[] = {
        conf->peerCACert, conf->peerServerCert, conf->peerServerKey,
        conf->peerClientCert, conf->peerClientKey, NULL
    };

    *out = NULL;
    creds->auth = conf->peerAuth;
    if (creds->auth == VRM_PEER_AUTH_AUTO) {
        if (vrmPeerFilesExist(pki))
            creds->auth = VRM_PEER_AUTH_X509;
        else if (g_file_test(conf->peerKeyFile, G_FILE_TEST_EXISTS))
            creds->auth = VRM_PEER_AUTH_PSK;
        else
            creds->auth = VRM_PEER_AUTH_NONE;
    }
    if (conf->peerAllow) {
        g_autofree char *bad = NULL;

        if (!(creds->allow = vrmNetworkListParse(conf->peerAllow, &bad))) {
            vrmReportError(VRM_ERR_CONFIG, _("'%1$s' in [peers] allow is not a network"), bad);
            return -1;
        }
    }
    if (conf->peerAllowedDN && creds->auth == VRM_PEER_AUTH_PSK)
        VRM_WARN("%s", _("[peers] allowed-dn names certificate subjects: it has no effect under auth = psk"));
    if (conf->peerAllowedDN) {
        g_auto(GStrv) patterns = g_strsplit(conf->peerAllowedDN, ";", -1);
        g_autoptr(GPtrArray) kept = g_ptr_array_new_with_free_func(g_free);
        size_t i;

        for (i = 0; patterns[i]; i++) {
            g_strstrip(patterns[i]);
            if (*patterns[i])
                g_ptr_array_add(kept, g_strdup(patterns[i]));
        }
        g_ptr_array_add(kept, NULL);
        creds->allowedDN = (GStrv)g_ptr_array_free(g_steal_pointer(&kept), FALSE);
    }
    gnutls_global_init();
    switch ((vrmPeerAuth)creds->auth) {
    case VRM_PEER_AUTH_NONE:
    case VRM_PEER_AUTH_AUTO:
    case VRM_PEER_AUTH_LAST:
        return 0;
    case VRM_PEER_AUTH_PSK:
        if (vrmPeerCredsLoadPsk(creds, conf) < 0)
            return -1;
        break;
    case VRM_PEER_AUTH_X509:
        creds->caFile = g_strdup(conf->peerCACert);
        if (vrmPeerCertCreds(&creds->certServer, conf->peerCACert, conf->peerCRL,
                             conf->peerServerCert, conf->peerServerKey) < 0 ||
            vrmPeerCertCreds(&creds->certClient, conf->peerCACert, conf->peerCRL,
                             conf->peerClientCert, conf->peerClientKey) < 0)
            return -1;
        break;
    }
    *out = g_steal_pointer(&creds);
    return 0;
}

/* No credentials, none asked for: what the daemon logs and refuses with,
 * and what --check-config says. It names the key file the admin has to
 * make, the one step most hosts miss. */
char *
vrmPeerChannelOffReason(const vrmHelperConfig *conf)
{
    if (conf && conf->peerAuth == VRM_PEER_AUTH_NONE)
        return g_strdup(_("the helpers' channel is off on this host ([peers] auth = none): this host neither sends nor receives RDMA migrations; to turn it on, set auth = auto with a cluster key, or auth = x509"));
    if (conf && conf->peerKeyFile && *conf->peerKeyFile)
        return g_strdup_printf(_("the helpers' channel is off on this host: there is no cluster key at %1$s ([peers] key-file; make it on one host with 'virt-rdmad --generate-key %1$s' and copy it, mode 0600, to every host) and no TLS certificates are configured ([peers] auth = x509)"),
                               conf->peerKeyFile);
    return g_strdup(_("the helpers' channel is off on this host: give virt-rdmad a cluster key ([peers] key-file, made with virt-rdmad --generate-key) or libvirt's TLS certificates ([peers] auth = x509)"));
}

void
vrmPeerCredsFree(vrmPeerCreds *creds)
{
    if (!creds)
        return;
    explicit_bzero(creds->key, sizeof(creds->key));
    if (creds->pskClient)
        gnutls_psk_free_client_credentials(creds->pskClient);
    if (creds->pskServer)
        gnutls_psk_free_server_credentials(creds->pskServer);
    if (creds->certClient)
        gnutls_certificate_free_credentials(creds->certClient);
    if (creds->certServer)
        gnutls_certificate_free_credentials(creds->certServer);
    g_free(creds->pskUser);
    g_free(creds->keyFile);
    g_free(creds->caFile);
    g_strfreev(creds->allowedDN);
    g_free(creds->source);
    if (creds->allow)
        g_array_unref(creds->allow);
    g_free(creds);
    gnutls_global_deinit();
}

vrmPeerAuth
vrmPeerCredsAuth(const vrmPeerCreds *creds)
{
    return creds ? creds->auth : VRM_PEER_AUTH_NONE;
}

char *
vrmPeerCredsDescribe(const vrmPeerCreds *creds)
{
    if (!creds || creds->auth == VRM_PEER_AUTH_NONE)
        return g_strdup(_("off"));
    if (creds->auth == VRM_PEER_AUTH_PSK)
        return g_strdup_printf(_("psk (cluster key %1$s, id %2$s)"), creds->keyFile,
                               creds->pskUser + strlen(VRM_PEER_PSK_USER_PREFIX));
    return g_strdup_printf(_("x509 (CA %1$s)"), creds->caFile);
}


/* ---- one connection --------------------------------------------------- */

static vrmPeerConn *
vrmPeerConnNew(vrmPeerCreds *creds, int fd, bool client, const char *name)
{
    vrmPeerConn *pc = g_new0(vrmPeerConn, 1);

    pc->creds = creds;
    pc->fd = fd;
    pc->client = client;
    pc->name = g_strdup(name);
    pc->in = g_byte_array_new();
    pc->out = g_byte_array_new();
    return pc;
}

static void
vrmPeerConnStop(vrmPeerConn *pc)
{
    g_clear_handle_id(&pc->watch, g_source_remove);
    g_clear_handle_id(&pc->timer, g_source_remove);
}

static void
vrmPeerConnDestroy(vrmPeerConn *pc)
{
    vrmPeerConnStop(pc);
    if (pc->srv) {
        vrmPeerServer *srv = pc->srv;

        g_hash_table_remove(srv->conns, pc);
        pc->srv = NULL;
        vrmPeerServerWatch(srv);
    }
    if (pc->session)
        gnutls_deinit(pc->session);
    if (pc->fd >= 0)
        close(pc->fd);
    g_byte_array_unref(pc->in);
    g_byte_array_unref(pc->out);
    g_free(pc->name);
    g_free(pc->addr);
    g_free(pc->host);
    g_free(pc->subject);
    g_free(pc);
}

static gboolean
vrmPeerConnFinishTimeout(gpointer opaque)
{
    vrmPeerConn *pc = opaque;

    pc->timer = 0;
    vrmPeerConnFree(pc);
    return G_SOURCE_REMOVE;
}

void
vrmPeerConnFinish(vrmPeerConn *pc)
{
    static const vrmPeerConnCallbacks none = { 0 };

    if (!pc)
        return;
    if (pc->state != VRM_PEER_OPEN || pc->out->len == 0) {
        vrmPeerConnFree(pc);
        return;
    }
    /* nobody to tell any more: a failure just frees it */
    pc->cb = none;
    pc->closing = true;
    vrmPeerConnSetTimer(pc, 0);
    pc->timer = g_timeout_add_seconds(5, vrmPeerConnFinishTimeout, pc);
}

void
vrmPeerConnFree(vrmPeerConn *pc)
{
    if (!pc)
        return;
    if (pc->busy) {
        /* inside one of our callbacks: finished when it returns */
        pc->zombie = true;
        vrmPeerConnStop(pc);
        return;
    }
    vrmPeerConnDestroy(pc);
}

/* Around a callback, which may free @pc: Leave() says whether it still lives */
static void
vrmPeerConnEnter(vrmPeerConn *pc)
{
    pc->busy++;
}

static bool
vrmPeerConnLeave(vrmPeerConn *pc)
{
    if (--pc->busy == 0 && pc->zombie) {
        vrmPeerConnDestroy(pc);
        return false;
    }
    return !pc->zombie;
}

/* The error is reported by the caller; tell the owner, once */
static void
vrmPeerConnFail(vrmPeerConn *pc)
{
    if (pc->state == VRM_PEER_FAILED)
        return;
    pc->state = VRM_PEER_FAILED;
    vrmPeerConnStop(pc);
    if (!pc->cb.failed) {
        /* not yet given to an owner (a server's handshake) */
        vrmPeerConnFree(pc);
        return;
    }
    vrmPeerConnEnter(pc);
    pc->cb.failed(pc, pc->opaque);
    vrmPeerConnLeave(pc);
}

static gboolean
vrmPeerConnTimeout(gpointer opaque)
{
    vrmPeerConn *pc = opaque;

    pc->timer = 0;
    switch (pc->state) {
    case VRM_PEER_CONNECTING:
        vrmReportError(VRM_ERR_TIMEOUT,
                       _("cannot reach the virt-rdma helper at %1$s: no connection within the deadline"),
                       pc->name);
        break;
    case VRM_PEER_HANDSHAKE:
        vrmReportError(VRM_ERR_TIMEOUT,
                       _("the TLS handshake with the virt-rdma helper at %1$s did not finish in time"),
                       pc->name);
        if (!pc->client)
            VRM_WARN_LIMITED(&vrmPeerHandshakeLog, "%s", vrmGetLastErrorMessage());
        break;
    case VRM_PEER_OPEN:
    case VRM_PEER_FAILED:
        vrmReportError(VRM_ERR_TIMEOUT,
                       _("the virt-rdma helper at %1$s did not answer in time"),
                       pc->name);
        break;
    }
    vrmPeerConnFail(pc);
    return G_SOURCE_REMOVE;
}

static void
vrmPeerConnSetTimer(vrmPeerConn *pc, unsigned int seconds)
{
    g_clear_handle_id(&pc->timer, g_source_remove);
    pc->timer = seconds ? g_timeout_add_seconds(seconds, vrmPeerConnTimeout, pc) : 0;
}

void
vrmPeerConnExpect(vrmPeerConn *pc, unsigned int seconds)
{
    if (pc->state == VRM_PEER_OPEN)
        vrmPeerConnSetTimer(pc, seconds);
}

const char *
vrmPeerConnPeerName(const vrmPeerConn *pc)
{
    return pc->name;
}

const char *
vrmPeerConnPeerAddress(const vrmPeerConn *pc)
{
    return pc->addr;
}

void
vrmPeerCredsSetSource(vrmPeerCreds *creds, const char *address)
{
    g_free(creds->source);
    creds->source = g_strdup(address);
}

void
vrmPeerConnSetCallbacks(vrmPeerConn *pc, const vrmPeerConnCallbacks *cb,
                        gpointer opaque)
{
    pc->cb = *cb;
    pc->opaque = opaque;
}

/* What went wrong in a handshake, in words */
static void
vrmPeerReportHandshake(vrmPeerConn *pc, int rc)
{
    if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR ||
        rc == GNUTLS_E_CERTIFICATE_ERROR) {
        gnutls_datum_t out = { NULL, 0 };
        unsigned int status = gnutls_session_get_verify_cert_status(pc->session);

        g_autofree char *why = NULL;

        gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0);
        why = g_strstrip(g_strdup(out.data ? (const char *)out.data : gnutls_strerror(rc)));
        vrmReportError(VRM_ERR_AUTH,
                       _("the certificate of the virt-rdma helper at %1$s does not verify: %2$s"),
                       pc->name, why);
        gnutls_free(out.data);
        return;
    }
    vrmReportError(VRM_ERR_AUTH,
                   _("the TLS handshake with the virt-rdma helper at %1$s failed: %2$s (do both hosts have the same cluster key, or certificates of the same CA?)"),
                   pc->name, gnutls_strerror(rc));
}

/* The certificate the peer presented (x509 mode), or NULL */
static gnutls_x509_crt_t
vrmPeerConnCertificate(vrmPeerConn *pc)
{
    const gnutls_datum_t *chain;
    unsigned int n = 0;
    gnutls_x509_crt_t crt = NULL;

    if (!pc->session ||
        gnutls_certificate_type_get(pc->session) != GNUTLS_CRT_X509 ||
        !(chain = gnutls_certificate_get_peers(pc->session, &n)) || n == 0)
        return NULL;
    if (gnutls_x509_crt_init(&crt) < 0)
        return NULL;
    if (gnutls_x509_crt_import(crt, &chain[0], GNUTLS_X509_FMT_DER) < 0) {
        gnutls_x509_crt_deinit(crt);
        return NULL;
    }
    return crt;
}

/*
 * Server side, x509: note the client's subject and hold it against
 * [peers] allowed-dn (glob patterns, as libvirt's tls_allowed_dn_list
 * matches the same "C=..,O=..,CN=.." form). The CA may sign for more than
 * the hypervisors (a monitoring box, an operator's laptop): the list says
 * which of its certificates may ask for a migration.
 */
static int
vrmPeerConnCheckSubject(vrmPeerConn *pc)
{
    gnutls_x509_crt_t crt;
    gnutls_datum_t dn = { NULL, 0 };
    size_t i;

    if (pc->creds->auth != VRM_PEER_AUTH_X509)
        return 0;
    if (!(crt = vrmPeerConnCertificate(pc))) {
        vrmReportError(VRM_ERR_AUTH,
                       _("the virt-rdma helper at %1$s presented no certificate"),
                       pc->name);
        return -1;
    }
    if (gnutls_x509_crt_get_dn2(crt, &dn) < 0 || !dn.data) {
        gnutls_x509_crt_deinit(crt);
        vrmReportError(VRM_ERR_AUTH,
                       _("cannot read the subject of the certificate of the virt-rdma helper at %1$s"),
                       pc->name);
        return -1;
    }
    gnutls_x509_crt_deinit(crt);
    g_free(pc->subject);
    pc->subject = g_strndup((const char *)dn.data, dn.size);
    gnutls_free(dn.data);
    if (!pc->creds->allowedDN)
        return 0;
    for (i = 0; pc->creds->allowedDN[i]; i++) {
        if (g_pattern_match_simple(pc->creds->allowedDN[i], pc->subject))
            return 0;
    }
    vrmReportError(VRM_ERR_AUTH,
                   _("the certificate of the virt-rdma helper at %1$s (%2$s) matches no pattern of [peers] allowed-dn"),
                   pc->name, pc->subject);
    return -1;
}

/* Does @crt name @host: a DNS name, or else (no DNS name at all) its
 * common name? GnuTLS looks at the common name only in server
 * certificates; libvirt's client certificates carry the host there. */
static bool
vrmPeerCertNamesHost(gnutls_x509_crt_t crt, const char *host)
{
    char buf[256];
    size_t size;
    unsigned int i;
    int type;

    if (gnutls_x509_crt_check_hostname2(crt, host, 0))
        return true;
    for (i = 0; ; i++) {
        size = sizeof(buf);
        type = gnutls_x509_crt_get_subject_alt_name(crt, i, buf, &size, NULL);
        if (type == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
            break;
        if (type == GNUTLS_SAN_DNSNAME)
            return false;
    }
    size = sizeof(buf);
    if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0,
                                      buf, &size) < 0 ||
        size >= sizeof(buf))
        return false;
    buf[size] = '\0';
    return g_ascii_strcasecmp(buf, host) == 0;
}

int
vrmPeerConnCheckIdentity(vrmPeerConn *pc, const vrmLocator *named)
{
    gnutls_x509_crt_t crt;
    bool match = false;

    if (pc->creds->auth != VRM_PEER_AUTH_X509)
        return 0;
    if (!named || !named->host || !(crt = vrmPeerConnCertificate(pc))) {
        vrmReportError(VRM_ERR_AUTH,
                       _("the virt-rdma helper at %1$s presented no certificate for the host it names"),
                       pc->name);
        return -1;
    }
    /* the host name, else an IP address */
    if (vrmPeerCertNamesHost(crt, named->host))
        match = true;
    if (!match && named->address) {
        g_auto(GStrv) addrs = g_strsplit(named->address, ";", -1);
        size_t i;

        for (i = 0; addrs[i] && !match; i++) {
            guint8 bin[16];
            gnutls_datum_t ip = { bin, 0 };

            if (inet_pton(AF_INET, g_strstrip(addrs[i]), bin) == 1)
                ip.size = 4;
            else if (inet_pton(AF_INET6, addrs[i], bin) == 1)
                ip.size = 16;
            if (ip.size && gnutls_x509_crt_check_ip(crt, ip.data, ip.size, 0))
                match = true;
        }
    }
    gnutls_x509_crt_deinit(crt);
    if (!match) {
        vrmReportError(VRM_ERR_AUTH,
                       _("the certificate of the virt-rdma helper at %1$s (%2$s) names neither the host %3$s nor its address %4$s: a helper may ask only as itself"),
                       pc->name, pc->subject ? pc->subject : "?", named->host,
                       named->address ? named->address : "?");
        return -1;
    }
    return 0;
}

const char *
vrmPeerConnPeerSubject(const vrmPeerConn *pc)
{
    return pc->subject;
}

static void vrmPeerConnReadyServer(vrmPeerConn *pc);

static void
vrmPeerConnHandshake(vrmPeerConn *pc)
{
    int rc = gnutls_handshake(pc->session);

    if (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED) {
        vrmPeerConnUpdateWatch(pc);
        return;
    }
    if (rc < 0) {
        vrmPeerReportHandshake(pc, rc);
        if (!pc->client)
            VRM_WARN_LIMITED(&vrmPeerHandshakeLog, "%s", vrmGetLastErrorMessage());
        vrmPeerConnFail(pc);
        return;
    }
    pc->state = VRM_PEER_OPEN;
    vrmPeerConnSetTimer(pc, 0);
    VRM_DEBUG("TLS channel with %s is up (%s)", pc->name,
              gnutls_protocol_get_name(gnutls_protocol_get_version(pc->session)));
    vrmPeerConnUpdateWatch(pc);
    if (!pc->client) {
        if (vrmPeerConnCheckSubject(pc) < 0) {
            VRM_WARN_LIMITED(&vrmPeerHandshakeLog, "%s", vrmGetLastErrorMessage());
            vrmPeerConnFail(pc);
            return;
        }
        vrmPeerConnReadyServer(pc);
        return;
    }
    if (pc->cb.ready) {
        vrmPeerConnEnter(pc);
        pc->cb.ready(pc, pc->opaque);
        vrmPeerConnLeave(pc);
    }
}

int
vrmPeerFrameAppend(GByteArray *in, const guint8 *chunk, gsize size,
                   const char *name)
{
    if (in->len + size > 4 + VRM_PEER_FRAME_MAX + VRM_PEER_READ_CHUNK) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the virt-rdma helper at %1$s sent more than one message holds"),
                       name);
        return -1;
    }
    g_byte_array_append(in, chunk, size);
    return 0;
}

int
vrmPeerFrameTake(GByteArray *in, const char *name, vrmPeerMessage **msg)
{
    guint32 len;
    g_autofree char *xml = NULL;

    *msg = NULL;
    if (in->len < 4)
        return 0;
    memcpy(&len, in->data, 4);
    len = GUINT32_FROM_BE(len);
    if (len == 0 || len > VRM_PEER_FRAME_MAX) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the virt-rdma helper at %1$s announced a message of %2$u bytes; the limit is %3$u"),
                       name, len, VRM_PEER_FRAME_MAX);
        return -1;
    }
    if (in->len < 4 + (gsize)len)
        return 0;
    xml = g_strndup((const char *)in->data + 4, len);
    g_byte_array_remove_range(in, 0, 4 + len);
    if (strlen(xml) != len || !(*msg = vrmPeerMessageParseString(xml))) {
        g_autofree char *why = g_strdup(strlen(xml) != len ?
                                        _("a NUL byte") : vrmGetLastErrorMessage());

        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the virt-rdma helper at %1$s sent a bad message: %2$s"),
                       name, why);
        return -1;
    }
    return 1;
}

/* Whole frames from @pc->in to the owner; false if @pc is gone */
static bool
vrmPeerConnDeliver(vrmPeerConn *pc)
{
    while (pc->state == VRM_PEER_OPEN) {
        vrmPeerMessage *msg;
        int rc = vrmPeerFrameTake(pc->in, pc->name, &msg);

        if (rc < 0) {
            vrmPeerConnFail(pc);
            return false;
        }
        if (rc == 0)
            return true;
        vrmPeerConnSetTimer(pc, 0);
        vrmPeerConnEnter(pc);
        pc->cb.message(pc, msg, pc->opaque);
        if (!vrmPeerConnLeave(pc))
            return false;
    }
    return true;
}

static void
vrmPeerConnRead(vrmPeerConn *pc)
{
    guint8 chunk[VRM_PEER_READ_CHUNK];

    for (;;) {
        ssize_t r = gnutls_record_recv(pc->session, chunk, sizeof(chunk));

        if (r > 0) {
            if (vrmPeerFrameAppend(pc->in, chunk, r, pc->name) < 0) {
                vrmPeerConnFail(pc);
                return;
            }
            if (!vrmPeerConnDeliver(pc))
                return;
            if (pc->state != VRM_PEER_OPEN)
                return;
            continue;
        }
        if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
            return;
        if (r == 0 || r == GNUTLS_E_PREMATURE_TERMINATION)
            vrmReportError(VRM_ERR_PEER,
                           _("the virt-rdma helper at %1$s closed the channel"),
                           pc->name);
        else
            vrmReportError(VRM_ERR_PEER,
                           _("the channel with the virt-rdma helper at %1$s failed: %2$s"),
                           pc->name, gnutls_strerror((int)r));
        vrmPeerConnFail(pc);
        return;
    }
}

static void
vrmPeerConnWrite(vrmPeerConn *pc)
{
    while (pc->out->len > 0) {
        size_t len = pc->sending ? pc->sending : MIN(pc->out->len, 16384);
        ssize_t r = gnutls_record_send(pc->session, pc->out->data, len);

        if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED) {
            /* GnuTLS wants the same call again */
            pc->sending = len;
            return;
        }
        pc->sending = 0;
        if (r < 0) {
            vrmReportError(VRM_ERR_PEER,
                           _("cannot write to the virt-rdma helper at %1$s: %2$s"),
                           pc->name, gnutls_strerror((int)r));
            vrmPeerConnFail(pc);
            return;
        }
        g_byte_array_remove_range(pc->out, 0, r);
    }
    if (pc->closing)
        vrmPeerConnFree(pc);
}

static gboolean
vrmPeerConnReady(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmPeerConn *pc = opaque;

    vrmPeerConnEnter(pc);
    switch (pc->state) {
    case VRM_PEER_CONNECTING: {
        int err = 0;
        socklen_t len = sizeof(err);

        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err) {
            vrmReportError(VRM_ERR_PEER,
                           _("cannot reach the virt-rdma helper at %1$s: %2$s (is virt-rdmad running there, and port %3$s open?)"),
                           pc->name, g_strerror(err), strrchr(pc->name, ':') + 1);
            vrmPeerConnFail(pc);
            break;
        }
        pc->state = VRM_PEER_HANDSHAKE;
        vrmPeerConnHandshake(pc);
        break;
    }
    case VRM_PEER_HANDSHAKE:
        vrmPeerConnHandshake(pc);
        break;
    case VRM_PEER_OPEN:
        if (cond & (G_IO_IN | G_IO_HUP | G_IO_ERR))
            vrmPeerConnRead(pc);
        if (pc->state == VRM_PEER_OPEN && !pc->zombie)
            vrmPeerConnWrite(pc);
        break;
    case VRM_PEER_FAILED:
        break;
    }
    if (vrmPeerConnLeave(pc) && pc->state != VRM_PEER_FAILED)
        vrmPeerConnUpdateWatch(pc);
    return G_SOURCE_CONTINUE;
}

/* Watch for what the state needs: connect and handshake follow GnuTLS,
 * an open channel reads always and writes while it has something */
static void
vrmPeerConnUpdateWatch(vrmPeerConn *pc)
{
    GIOCondition cond;

    switch (pc->state) {
    case VRM_PEER_CONNECTING:
        cond = G_IO_OUT;
        break;
    case VRM_PEER_HANDSHAKE:
        cond = gnutls_record_get_direction(pc->session) ? G_IO_OUT : G_IO_IN;
        break;
    case VRM_PEER_OPEN:
        cond = G_IO_IN | (pc->out->len ? G_IO_OUT : 0);
        break;
    case VRM_PEER_FAILED:
    default:
        return;
    }
    if (pc->watch && cond == pc->watchCond)
        return;
    g_clear_handle_id(&pc->watch, g_source_remove);
    pc->watchCond = cond;
    pc->watch = g_unix_fd_add(pc->fd, cond, vrmPeerConnReady, pc);
}

int
vrmPeerConnSend(vrmPeerConn *pc, const vrmPeerMessage *msg)
{
    g_autofree char *xml = vrmPeerMessageFormat(msg);
    size_t len = strlen(xml);
    guint32 be = GUINT32_TO_BE((guint32)len);

    if (pc->state != VRM_PEER_OPEN) {
        vrmReportError(VRM_ERR_PEER,
                       _("the channel with the virt-rdma helper at %1$s is not open"),
                       pc->name);
        return -1;
    }
    if (len > VRM_PEER_FRAME_MAX) {
        vrmReportError(VRM_ERR_INTERNAL,
                       _("a message of %1$zu bytes is larger than the helpers' channel carries"),
                       len);
        return -1;
    }
    g_byte_array_append(pc->out, (const guint8 *)&be, 4);
    g_byte_array_append(pc->out, (const guint8 *)xml, len);
    if (msg->type == VRM_PEER_MIGRATION_OFFER)
        explicit_bzero(xml, len);
    vrmPeerConnWrite(pc);
    if (pc->state == VRM_PEER_OPEN)
        vrmPeerConnUpdateWatch(pc);
    return pc->state == VRM_PEER_FAILED ? -1 : 0;
}

static int
vrmPeerSessionNew(vrmPeerConn *pc)
{
    vrmPeerCreds *creds = pc->creds;
    bool psk = creds->auth == VRM_PEER_AUTH_PSK;
    const char *errPos = NULL;
    int rc;

    if ((rc = gnutls_init(&pc->session, (pc->client ? GNUTLS_CLIENT : GNUTLS_SERVER) |
                          GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL)) < 0)
        goto error;
    gnutls_session_set_ptr(pc->session, pc);
    if ((rc = gnutls_priority_set_direct(pc->session,
                                         psk ? VRM_PEER_PRIORITY_PSK :
                                         VRM_PEER_PRIORITY_X509, &errPos)) < 0)
        goto error;
    if (psk) {
        rc = pc->client ?
            gnutls_credentials_set(pc->session, GNUTLS_CRD_PSK, creds->pskClient) :
            gnutls_credentials_set(pc->session, GNUTLS_CRD_PSK, creds->pskServer);
    } else if (pc->client) {
        if ((rc = gnutls_credentials_set(pc->session, GNUTLS_CRD_CERTIFICATE,
                                         creds->certClient)) >= 0 &&
            (rc = gnutls_server_name_set(pc->session, GNUTLS_NAME_DNS, pc->host,
                                         strlen(pc->host))) >= 0)
            gnutls_session_set_verify_cert(pc->session, pc->host, 0);
    } else {
        if ((rc = gnutls_credentials_set(pc->session, GNUTLS_CRD_CERTIFICATE,
                                         creds->certServer)) >= 0) {
            gnutls_certificate_server_set_request(pc->session, GNUTLS_CERT_REQUIRE);
            gnutls_session_set_verify_cert(pc->session, NULL, 0);
        }
    }
    if (rc < 0)
        goto error;
    gnutls_transport_set_int(pc->session, pc->fd);
    return 0;

 error:
    vrmReportError(VRM_ERR_SYSTEM, _("cannot set up a TLS session: %1$s"),
                   gnutls_strerror(rc));
    return -1;
}

static char *
vrmPeerFormatAddress(const char *address, unsigned int port)
{
    return strchr(address, ':') ? g_strdup_printf("[%s]:%u", address, port) :
        g_strdup_printf("%s:%u", address, port);
}

/* The request names our locator; the source checks that the connection
 * comes from its address: so it must */
static int
vrmPeerBindSource(int fd, const char *address, int family)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_family = family,
                              .ai_flags = AI_NUMERICHOST | AI_PASSIVE };
    struct addrinfo *ai = NULL;
    int rc;

    if ((rc = getaddrinfo(address, "0", &hints, &ai)) != 0) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("cannot connect from this host's locator address %1$s ([peers] address) to a peer of another address family: %2$s"),
                       address, gai_strerror(rc));
        return -1;
    }
    rc = bind(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc < 0) {
        vrmReportSystemError(errno,
                             _("cannot connect from this host's locator address %1$s ([peers] address)"),
                             address);
        return -1;
    }
    return 0;
}

vrmPeerConn *
vrmPeerConnConnect(vrmPeerCreds *creds, const vrmLocator *to,
                   unsigned int timeout, const vrmPeerConnCallbacks *cb,
                   gpointer opaque)
{
    g_autofree char *name = vrmPeerFormatAddress(to->address, to->port);
    g_autofree char *port = g_strdup_printf("%u", to->port);
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
    struct addrinfo *ai = NULL;
    g_autoptr(vrmPeerConn) pc = NULL;
    int fd;
    int rc;

    if (!creds || creds->auth == VRM_PEER_AUTH_NONE) {
        g_autofree char *why = vrmPeerChannelOffReason(NULL);

        vrmReportError(VRM_ERR_CONFIG, "%s", why);
        return NULL;
    }
    if ((rc = getaddrinfo(to->address, port, &hints, &ai)) != 0) {
        vrmReportError(VRM_ERR_INVALID_ARG, _("'%1$s' is not an address: %2$s"),
                       to->address, gai_strerror(rc));
        return NULL;
    }
    /* a locator is anybody's to write: connect only where peers may be */
    if (!vrmNetworkListHasSockaddr(creds->allow, ai->ai_addr)) {
        vrmReportError(VRM_ERR_POLICY,
                       _("the virt-rdma helper at %1$s is outside the networks this host's helpers may talk to ([peers] allow)"),
                       name);
        freeaddrinfo(ai);
        return NULL;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        vrmReportSystemError(errno, _("cannot create a TCP socket"));
        freeaddrinfo(ai);
        return NULL;
    }
    vrmTcpSetNoDelay(fd);
    pc = vrmPeerConnNew(creds, fd, true, name);
    pc->host = g_strdup(to->host);
    if (creds->source && vrmPeerBindSource(fd, creds->source, ai->ai_family) < 0) {
        freeaddrinfo(ai);
        return NULL;
    }
    pc->cb = *cb;
    pc->opaque = opaque;
    rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc < 0 && errno != EINPROGRESS) {
        vrmReportError(VRM_ERR_PEER,
                       _("cannot reach the virt-rdma helper at %1$s: %2$s (is virt-rdmad running there, and port %3$u open?)"),
                       name, g_strerror(errno), to->port);
        return NULL;
    }
    if (vrmPeerSessionNew(pc) < 0)
        return NULL;
    pc->state = VRM_PEER_CONNECTING;
    vrmPeerConnSetTimer(pc, timeout);
    vrmPeerConnUpdateWatch(pc);
    return g_steal_pointer(&pc);
}


/* ---- the server ------------------------------------------------------- */

static void
vrmPeerConnReadyServer(vrmPeerConn *pc)
{
    vrmPeerServer *srv = pc->srv;

    if (!srv) {
        vrmPeerConnFree(pc);
        return;
    }
    if (pc->subject)
        VRM_INFO("peer helper %s connected (%s)", pc->name, pc->subject);
    else
        VRM_INFO("peer helper %s connected", pc->name);
    vrmPeerConnEnter(pc);
    srv->func(pc, srv->opaque);
    vrmPeerConnLeave(pc);
}

static gboolean
vrmPeerServerRetry(gpointer opaque)
{
    vrmPeerServer *srv = opaque;

    srv->retry = 0;
    vrmPeerServerWatch(srv);
    return G_SOURCE_REMOVE;
}

/* The connections from @addr still in their handshake */
static unsigned int
vrmPeerServerHandshakesOf(vrmPeerServer *srv, const char *addr)
{
    GHashTableIter it;
    gpointer key;
    unsigned int n = 0;

    g_hash_table_iter_init(&it, srv->conns);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        const vrmPeerConn *pc = key;

        n += pc->state == VRM_PEER_HANDSHAKE && g_strcmp0(pc->addr, addr) == 0;
    }
    return n;
}

static gboolean
vrmPeerServerAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmPeerServer *srv = opaque;

    while (g_hash_table_size(srv->conns) < srv->maxPeers) {
        struct sockaddr_storage sa;
        socklen_t salen = sizeof(sa);
        char host[NI_MAXHOST] = "?";
        char serv[NI_MAXSERV] = "?";
        g_autofree char *name = NULL;
        vrmPeerConn *pc;
        int cfd = accept4(fd, (struct sockaddr *)&sa, &salen,
                          SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (cfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return G_SOURCE_CONTINUE;
            VRM_WARN_LIMITED(&srv->log,
                             _("cannot accept a peer helper: %1$s"), g_strerror(errno));
            srv->watch = 0;
            if (!srv->retry)
                srv->retry = g_timeout_add(250, vrmPeerServerRetry, srv);
            return G_SOURCE_REMOVE;
        }
        vrmTcpSetNoDelay(cfd);
        getnameinfo((struct sockaddr *)&sa, salen, host, sizeof(host), serv,
                    sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV);
        name = vrmPeerFormatAddress(host, (unsigned int)atoi(serv));
        /* before any TLS: who may not be a peer, and one address's share */
        if (!vrmNetworkListHasSockaddr(srv->creds->allow, (struct sockaddr *)&sa)) {
            VRM_WARN_LIMITED(&srv->log,
                             _("refused a connection from %1$s: outside [peers] allow"), name);
            close(cfd);
            continue;
        }
        if (vrmPeerServerHandshakesOf(srv, host) >= VRM_PEER_HANDSHAKES_PER_ADDRESS) {
            VRM_WARN_LIMITED(&srv->log,
                             _("refused a connection from %1$s: %2$u handshakes from that address are under way"),
                             name, VRM_PEER_HANDSHAKES_PER_ADDRESS);
            close(cfd);
            continue;
        }
        pc = vrmPeerConnNew(srv->creds, cfd, false, name);
        pc->addr = g_strdup(host);
        if (vrmPeerSessionNew(pc) < 0) {
            VRM_WARN("%s", vrmGetLastErrorMessage());
            vrmPeerConnDestroy(pc);
            continue;
        }
        pc->srv = srv;
        g_hash_table_add(srv->conns, pc);
        pc->state = VRM_PEER_HANDSHAKE;
        vrmPeerConnSetTimer(pc, MIN(srv->timeout, VRM_PEER_HANDSHAKE_TIMEOUT_S));
        vrmPeerConnUpdateWatch(pc);
    }
    /* at the cap: the next ones wait in the backlog */
    srv->watch = 0;
    return G_SOURCE_REMOVE;
}

static void
vrmPeerServerWatch(vrmPeerServer *srv)
{
    if (srv->watch || srv->retry || srv->fd < 0 ||
        g_hash_table_size(srv->conns) >= srv->maxPeers)
        return;
    srv->watch = g_unix_fd_add(srv->fd, G_IO_IN, vrmPeerServerAccept, srv);
}

vrmPeerServer *
vrmPeerServerNew(vrmPeerCreds *creds, const char *address, unsigned int port,
                 unsigned int maxPeers, unsigned int timeout,
                 vrmPeerAcceptFunc func, gpointer opaque)
{
    g_autofree char *name = vrmPeerFormatAddress(address, port);
    g_autofree char *portStr = g_strdup_printf("%u", port);
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE };
    struct addrinfo *ai = NULL;
    struct sockaddr_storage sa;
    socklen_t salen = sizeof(sa);
    vrmPeerServer *srv;
    vrmRateLimit rl = VRM_RATE_LIMIT_INIT(5, 60);
    int one = 1;
    int fd;
    int rc;

    if ((rc = getaddrinfo(address, portStr, &hints, &ai)) != 0) {
        vrmReportError(VRM_ERR_CONFIG, _("'%1$s' is not an address: %2$s"),
                       address, gai_strerror(rc));
        return NULL;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
        listen(fd, VRM_PEER_LISTEN_BACKLOG) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &salen) < 0) {
        vrmReportSystemError(errno,
                             _("cannot listen for peer helpers on %1$s ([peers] listen and port)"),
                             name);
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return NULL;
    }
    freeaddrinfo(ai);
    srv = g_new0(vrmPeerServer, 1);
    srv->creds = creds;
    srv->fd = fd;
    srv->port = ntohs(sa.ss_family == AF_INET6 ?
                      ((struct sockaddr_in6 *)&sa)->sin6_port :
                      ((struct sockaddr_in *)&sa)->sin_port);
    srv->maxPeers = maxPeers ? maxPeers : 1;
    srv->timeout = timeout ? timeout : 10;
    srv->func = func;
    srv->opaque = opaque;
    srv->conns = g_hash_table_new(NULL, NULL);
    srv->log = rl;
    vrmPeerServerWatch(srv);
    return srv;
}

void
vrmPeerServerFree(vrmPeerServer *srv)
{
    GHashTableIter it;
    gpointer key;

    if (!srv)
        return;
    g_clear_handle_id(&srv->watch, g_source_remove);
    g_clear_handle_id(&srv->retry, g_source_remove);
    /* connections still in their handshake are ours; the others are
     * their owners', who only lose the back pointer */
    g_hash_table_iter_init(&it, srv->conns);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        vrmPeerConn *pc = key;

        pc->srv = NULL;
        g_hash_table_iter_remove(&it);
        if (!pc->cb.failed)
            vrmPeerConnFree(pc);
    }
    g_hash_table_destroy(srv->conns);
    if (srv->fd >= 0)
        close(srv->fd);
    g_free(srv);
}

unsigned int
vrmPeerServerPort(const vrmPeerServer *srv)
{
    return srv->port;
}
