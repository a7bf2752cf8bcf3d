/*
 * vrmhelperconn.c: the control socket's clients, served without blocking
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* SO_PEERCRED, struct ucred, accept4 */
#endif

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib-unix.h>

#include "vrmhelperconn.h"
#include "vrmhelperclient.h"
#include "vrmhelperratelimit.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

/* After EMFILE/ENFILE, look at the listener again this much later */
#define VRM_HELPER_ACCEPT_RETRY_MS 250

typedef enum {
    VRM_CONN_READING,       /* taking the request: length, then document */
    VRM_CONN_WAITING,       /* handed to the daemon, no watch */
    VRM_CONN_WRITING,       /* sending the reply */
    VRM_CONN_STREAMING,     /* a subscriber: frames go out as they come,
                             * until it hangs up */
} vrmConnState;

/* A subscriber that lets this much pile up unread is dropped: one slow
 * reader must not grow the helper without bound */
#define VRM_HELPER_STREAM_BACKLOG_MAX (256u * 1024)

struct _vrmHelperConn {
    vrmHelperServer *srv;
    int fd;
    vrmConnState state;
    vrmHelperCred cred;
    guint watch;
    GIOCondition watchCond; /* STREAMING: what the watch waits for */
    guint timer;            /* the deadline of the current state */
    GByteArray *in;         /* READING: what arrived */
    GByteArray *out;        /* WRITING: frame to send */
    gsize written;
};

struct _vrmHelperServer {
    int fd;
    unsigned int maxClients;
    vrmHelperRequestFunc handler;
    gpointer opaque;
    guint watch;            /* 0 while not watching the listener */
    guint retry;            /* EMFILE: the timer that looks again */
    GHashTable *conns;      /* vrmHelperConn * set */
    vrmRateLimit acceptLog;
};

static void vrmHelperServerWatch(vrmHelperServer *srv);

static void
vrmHelperConnFree(vrmHelperConn *c)
{
    if (!c)
        return;
    g_clear_handle_id(&c->watch, g_source_remove);
    g_clear_handle_id(&c->timer, g_source_remove);
    if (c->fd >= 0)
        close(c->fd);
    if (c->in)
        g_byte_array_unref(c->in);
    if (c->out)
        g_byte_array_unref(c->out);
    g_free(c);
}

/* The end of a client: free it, and watch the listener again if it was full */
static void
vrmHelperConnClose(vrmHelperConn *c)
{
    vrmHelperServer *srv = c->srv;

    g_hash_table_remove(srv->conns, c);
    vrmHelperConnFree(c);
    vrmHelperServerWatch(srv);
}

static void
vrmHelperConnClearSources(vrmHelperConn *c)
{
    g_clear_handle_id(&c->watch, g_source_remove);
    g_clear_handle_id(&c->timer, g_source_remove);
}

static gboolean
vrmHelperConnWriteTimeout(gpointer opaque)
{
    vrmHelperConn *c = opaque;

    c->timer = 0;
    VRM_DEBUG("client pid %d did not take its reply in time", (int)c->cred.pid);
    vrmHelperConnClose(c);
    return G_SOURCE_REMOVE;
}

/* Send what is pending in @c->out: 1 all of it, 0 the socket is full,
 * -1 the client is gone */
static int
vrmHelperConnSend(vrmHelperConn *c)
{
    while (c->written < c->out->len) {
        ssize_t r = send(c->fd, c->out->data + c->written, c->out->len - c->written,
                         MSG_NOSIGNAL | MSG_DONTWAIT);

        if (r > 0) {
            c->written += r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        VRM_DEBUG("cannot send to pid %d: %s", (int)c->cred.pid,
                  r < 0 ? g_strerror(errno) : "closed");
        return -1;
    }
    return 1;
}

static gboolean
vrmHelperConnWritable(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmHelperConn *c = opaque;

    if (vrmHelperConnSend(c) == 0)
        return G_SOURCE_CONTINUE;
    /* all of the reply sent, or the client gone: the end either way */
    c->watch = 0;
    vrmHelperConnClose(c);
    return G_SOURCE_REMOVE;
}

void
vrmHelperConnReply(vrmHelperConn *c, const char *xml)
{
    size_t len = xml ? strlen(xml) : 0;
    guint32 be;

    vrmHelperConnClearSources(c);
    if (!xml || len == 0 || len > VRM_HELPER_FRAME_MAX) {
        VRM_WARN(_("a reply of %1$zu bytes cannot be sent; closing the connection"), len);
        vrmHelperConnClose(c);
        return;
    }
    be = GUINT32_TO_BE((guint32)len);
    c->state = VRM_CONN_WRITING;
    c->out = g_byte_array_sized_new(len + sizeof(be));
    g_byte_array_append(c->out, (const guint8 *)&be, sizeof(be));
    g_byte_array_append(c->out, (const guint8 *)xml, len);
    c->written = 0;
    c->watch = g_unix_fd_add(c->fd, G_IO_OUT, vrmHelperConnWritable, c);
    c->timer = g_timeout_add(VRM_HELPER_REPLY_TIMEOUT_MS, vrmHelperConnWriteTimeout, c);
}

void
vrmHelperConnReplyMessage(vrmHelperConn *c, const vrmControlMessage *msg)
{
    g_autofree char *xml = vrmControlMessageFormat(msg);

    vrmHelperConnReply(c, xml);
}

void
vrmHelperConnReplyError(vrmHelperConn *c, int code, const char *message)
{
    g_autoptr(vrmControlMessage) msg =
        vrmControlReplyNewError(code > VRM_ERR_OK && code < VRM_ERR_LAST ?
                                code : VRM_ERR_INTERNAL,
                                message ? message : _("unknown error"));

    vrmHelperConnReplyMessage(c, msg);
}

void
vrmHelperConnReplyLastError(vrmHelperConn *c)
{
    vrmHelperConnReplyError(c, vrmGetLastErrorCode(), vrmGetLastErrorMessage());
}

const vrmHelperCred *
vrmHelperConnCred(const vrmHelperConn *c)
{
    return &c->cred;
}

static gboolean
vrmHelperConnReadTimeout(gpointer opaque)
{
    vrmHelperConn *c = opaque;

    c->timer = 0;
    VRM_DEBUG("client pid %d sent no complete request in time", (int)c->cred.pid);
    vrmHelperConnReplyError(c, VRM_ERR_TIMEOUT,
                            _("no complete request arrived in time on the control socket"));
    return G_SOURCE_REMOVE;
}

/* ---- subscribers --------------------------------------------------------- */

static void vrmHelperConnStreamWatch(vrmHelperConn *c);

/* Write what is pending; -1 if the subscriber is gone */
static int
vrmHelperConnStreamFlush(vrmHelperConn *c)
{
    int rc = vrmHelperConnSend(c);

    if (rc < 0)
        return -1;
    if (rc > 0) {
        g_byte_array_set_size(c->out, 0);
        c->written = 0;
    }
    return 0;
}

static gboolean
vrmHelperConnStreamIO(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmHelperConn *c = opaque;
    GIOCondition was = c->watchCond;

    if (cond & (G_IO_IN | G_IO_HUP | G_IO_ERR)) {
        guint8 b[64];
        ssize_t r = recv(fd, b, sizeof(b), MSG_DONTWAIT);

        /* a subscriber sends nothing: data, EOF or an error ends it */
        if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            c->watch = 0;
            vrmHelperConnClose(c);
            return G_SOURCE_REMOVE;
        }
    }
    if ((cond & G_IO_OUT) && vrmHelperConnStreamFlush(c) < 0) {
        c->watch = 0;
        vrmHelperConnClose(c);
        return G_SOURCE_REMOVE;
    }
    if (!!(was & G_IO_OUT) == (c->out->len > 0))
        return G_SOURCE_CONTINUE;
    /* watch for room only while something waits */
    c->watch = 0;
    vrmHelperConnStreamWatch(c);
    return G_SOURCE_REMOVE;
}

static void
vrmHelperConnStreamWatch(vrmHelperConn *c)
{
    g_clear_handle_id(&c->watch, g_source_remove);
    c->watchCond = G_IO_IN | G_IO_HUP | G_IO_ERR | (c->out->len ? G_IO_OUT : 0);
    c->watch = g_unix_fd_add(c->fd, c->watchCond, vrmHelperConnStreamIO, c);
}

/* Append one frame; false if the subscriber was dropped (freed) */
static bool
vrmHelperConnStreamQueue(vrmHelperConn *c, const char *xml)
{
    size_t len = strlen(xml);
    guint32 be = GUINT32_TO_BE((guint32)len);

    if (len == 0 || len > VRM_HELPER_FRAME_MAX ||
        c->out->len - c->written + len > VRM_HELPER_STREAM_BACKLOG_MAX) {
        VRM_WARN_LIMITED(&c->srv->acceptLog,
                         _("dropping the event subscriber pid %1$d: it does not read its events"),
                         (int)c->cred.pid);
        vrmHelperConnClose(c);
        return false;
    }
    g_byte_array_append(c->out, (const guint8 *)&be, sizeof(be));
    g_byte_array_append(c->out, (const guint8 *)xml, len);
    if (!(c->watchCond & G_IO_OUT))
        vrmHelperConnStreamWatch(c);
    return true;
}

void
vrmHelperConnSubscribe(vrmHelperConn *c)
{
    g_autoptr(vrmControlMessage) ok = vrmControlMessageNew(VRM_CONTROL_REPLY);
    g_autofree char *xml = vrmControlMessageFormat(ok);

    vrmHelperConnClearSources(c);
    c->state = VRM_CONN_STREAMING;
    if (!c->out)
        c->out = g_byte_array_new();
    c->written = 0;
    c->watchCond = 0;
    if (vrmHelperConnStreamQueue(c, xml))
        VRM_DEBUG("pid %d subscribed to job events", (int)c->cred.pid);
}

void
vrmHelperConnPush(vrmHelperConn *c, const char *xml)
{
    if (c->state == VRM_CONN_STREAMING)
        vrmHelperConnStreamQueue(c, xml);
}

/* The subscribers now (a copy: a push may drop one) */
static GPtrArray *
vrmHelperServerStreamsList(vrmHelperServer *srv)
{
    GPtrArray *list = g_ptr_array_new();
    GHashTableIter it;
    gpointer k;

    g_hash_table_iter_init(&it, srv->conns);
    while (g_hash_table_iter_next(&it, &k, NULL)) {
        vrmHelperConn *c = k;

        if (c->state == VRM_CONN_STREAMING)
            g_ptr_array_add(list, c);
    }
    return list;
}

void
vrmHelperServerForEachSubscriber(vrmHelperServer *srv, vrmHelperSubscriberFunc func,
                                 gpointer opaque)
{
    g_autoptr(GPtrArray) list = vrmHelperServerStreamsList(srv);
    guint i;

    for (i = 0; i < list->len; i++)
        func(list->pdata[i], opaque);
}

unsigned int
vrmHelperServerSubscribers(vrmHelperServer *srv, uid_t uid)
{
    g_autoptr(GPtrArray) list = vrmHelperServerStreamsList(srv);
    unsigned int n = 0;
    guint i;

    for (i = 0; i < list->len; i++) {
        vrmHelperConn *c = list->pdata[i];

        if (uid == (uid_t)-1 || c->cred.uid == uid)
            n++;
    }
    return n;
}

int
vrmHelperRequestFeed(GByteArray *in, const guint8 *chunk, gsize size,
                     guint32 *lenp)
{
    guint32 len;

    /* never more than one byte past the largest request */
    if (in->len + size > 4 + VRM_HELPER_REQUEST_MAX + 1)
        size = 4 + VRM_HELPER_REQUEST_MAX + 1 - in->len;
    g_byte_array_append(in, chunk, size);
    if (in->len < 4)
        return 0;
    memcpy(&len, in->data, 4);
    len = GUINT32_FROM_BE(len);
    if (len == 0 || len > VRM_HELPER_REQUEST_MAX) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("a request announces %1$u bytes; the allowed size is 1 to %2$u bytes"),
                       len, VRM_HELPER_REQUEST_MAX);
        return -1;
    }
    if (in->len < 4 + (gsize)len)
        return 0;
    if (in->len > 4 + (gsize)len) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("a client sent more than one request on one connection"));
        return -1;
    }
    if (memchr(in->data + 4, '\0', len)) {
        vrmReportError(VRM_ERR_PROTOCOL, _("a request contains a NUL byte"));
        return -1;
    }
    *lenp = len;
    return 1;
}

static gboolean
vrmHelperConnReadable(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmHelperConn *c = opaque;
    vrmHelperServer *srv = c->srv;
    guint8 chunk[4096];
    guint32 len = 0;
    int rc = 0;

    while (rc == 0) {
        ssize_t r = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);

        if (r > 0) {
            rc = vrmHelperRequestFeed(c->in, chunk, r, &len);
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return G_SOURCE_CONTINUE;
        /* EOF or an error before a whole request: nobody to answer */
        c->watch = 0;
        vrmHelperConnClose(c);
        return G_SOURCE_REMOVE;
    }

    /* this watch ends here; the reply (now or later) makes its own */
    c->watch = 0;
    if (rc < 0) {
        vrmHelperConnReplyLastError(c);
        return G_SOURCE_REMOVE;
    }
    g_clear_handle_id(&c->timer, g_source_remove);
    c->state = VRM_CONN_WAITING;
    g_byte_array_append(c->in, (const guint8 *)"", 1);
    vrmResetLastError();
    srv->handler(c, (const char *)c->in->data + 4, srv->opaque);
    return G_SOURCE_REMOVE;
}

static vrmHelperConn *
vrmHelperConnNew(vrmHelperServer *srv, int fd)
{
    vrmHelperConn *c = g_new0(vrmHelperConn, 1);
    struct ucred cred;
    socklen_t clen = sizeof(cred);

    c->srv = srv;
    c->fd = fd;
    c->in = g_byte_array_new();
    c->state = VRM_CONN_READING;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
        socklen_t glen = sizeof(c->cred.groups);

        c->cred.uid = cred.uid;
        c->cred.gid = cred.gid;
        c->cred.pid = cred.pid;
        /* more groups than fit: only the first ones count */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, c->cred.groups, &glen) == 0)
            c->cred.ngroups = glen / sizeof(gid_t);
    } else {
        /* nobody: refused by every check */
        c->cred.uid = (uid_t)-1;
        c->cred.gid = (gid_t)-1;
    }
    c->watch = g_unix_fd_add(fd, G_IO_IN | G_IO_HUP | G_IO_ERR,
                             vrmHelperConnReadable, c);
    c->timer = g_timeout_add(VRM_HELPER_REQUEST_TIMEOUT_MS, vrmHelperConnReadTimeout, c);
    g_hash_table_add(srv->conns, c);
    return c;
}

static gboolean
vrmHelperServerRetry(gpointer opaque)
{
    vrmHelperServer *srv = opaque;

    srv->retry = 0;
    vrmHelperServerWatch(srv);
    return G_SOURCE_REMOVE;
}

static void
vrmHelperServerUnwatch(vrmHelperServer *srv)
{
    g_clear_handle_id(&srv->watch, g_source_remove);
}

static gboolean
vrmHelperServerAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmHelperServer *srv = opaque;

    while (g_hash_table_size(srv->conns) < srv->maxClients) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (cfd >= 0) {
            vrmHelperConnNew(srv, cfd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return G_SOURCE_CONTINUE;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
            errno == ENOMEM) {
            /* the connection stays in the backlog; no busy loop meanwhile */
            VRM_WARN_LIMITED(&srv->acceptLog,
                             _("cannot accept a client on the control socket: %1$s; trying again in %2$d ms"),
                             g_strerror(errno), VRM_HELPER_ACCEPT_RETRY_MS);
            srv->watch = 0;
            if (!srv->retry)
                srv->retry = g_timeout_add(VRM_HELPER_ACCEPT_RETRY_MS,
                                           vrmHelperServerRetry, srv);
            return G_SOURCE_REMOVE;
        }
        VRM_WARN_LIMITED(&srv->acceptLog,
                         _("cannot accept a client on the control socket: %1$s"),
                         g_strerror(errno));
        return G_SOURCE_CONTINUE;
    }
    /* full: the next ones wait in the backlog until a client is done */
    srv->watch = 0;
    return G_SOURCE_REMOVE;
}

static void
vrmHelperServerWatch(vrmHelperServer *srv)
{
    if (srv->watch || srv->retry || srv->fd < 0 ||
        g_hash_table_size(srv->conns) >= srv->maxClients)
        return;
    srv->watch = g_unix_fd_add(srv->fd, G_IO_IN, vrmHelperServerAccept, srv);
}

vrmHelperServer *
vrmHelperServerNew(int listenFd, unsigned int maxClients,
                   vrmHelperRequestFunc handler, gpointer opaque)
{
    vrmHelperServer *srv = g_new0(vrmHelperServer, 1);
    vrmRateLimit rl = VRM_RATE_LIMIT_INIT(5, 60);

    srv->fd = listenFd;
    srv->maxClients = maxClients ? maxClients : 1;
    srv->handler = handler;
    srv->opaque = opaque;
    srv->conns = g_hash_table_new(NULL, NULL);
    srv->acceptLog = rl;
    vrmHelperServerWatch(srv);
    return srv;
}

void
vrmHelperServerFree(vrmHelperServer *srv)
{
    GHashTableIter it;
    gpointer c;

    if (!srv)
        return;
    vrmHelperServerUnwatch(srv);
    g_clear_handle_id(&srv->retry, g_source_remove);
    g_hash_table_iter_init(&it, srv->conns);
    while (g_hash_table_iter_next(&it, &c, NULL))
        vrmHelperConnFree(c);
    g_hash_table_destroy(srv->conns);
    g_free(srv);
}

unsigned int
vrmHelperServerClients(const vrmHelperServer *srv)
{
    return g_hash_table_size(srv->conns);
}
