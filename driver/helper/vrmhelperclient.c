/*
 * vrmhelperclient.c: framing and one-shot requests to virt-rdmad
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* SO_PEERCRED, struct ucred */
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "vrmhelperclient.h"
#include "vrmerror.h"
#include "vrmlog.h"
#include "vrmsocket.h"
#include "vrmi18n.h"

char *
vrmHelperSocketPath(void)
{
    const char *env = g_getenv(VRM_HELPER_SOCKET_ENV);
    g_autoptr(vrmHelperConfig) conf = NULL;

    if (env && *env)
        return g_strdup(env);
    /* a configuration the daemon would refuse: say so when connecting */
    if (!(conf = vrmHelperConfigLoadDefault())) {
        VRM_WARN("%s", vrmGetLastErrorMessage());
        conf = vrmHelperConfigNew();
    }
    return vrmHelperConfigSocketPath(conf);
}

bool
vrmHelperServerAllowed(uid_t server, uid_t self)
{
    return server == 0 || server == self;
}

/* Who serves @fd: root or ourselves, else an impostor */
static int
vrmHelperCheckServer(int fd, const char *path)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        vrmReportSystemError(errno, _("cannot read the credentials of the server of %1$s"),
                             path);
        return -1;
    }
    if (!vrmHelperServerAllowed(cred.uid, geteuid())) {
        vrmReportError(VRM_ERR_AUTH,
                       _("%1$s is served by user %2$u (pid %3$d), not by root: refusing to talk to it (another program took the place of virt-rdmad's socket)"),
                       path, (unsigned int)cred.uid, (int)cred.pid);
        return -1;
    }
    return 0;
}

/* Wait for @events on @fd until @deadline: 1 ready, 0 timed out, -1 error */
static int
vrmHelperWait(int fd, short events, gint64 deadline)
{
    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = events };
        gint64 left = deadline - g_get_monotonic_time();
        int r;

        if (left <= 0)
            return 0;
        r = poll(&pfd, 1, (int)MIN(left / 1000 + 1, G_MAXINT));
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

static int
vrmHelperWriteAll(int fd, const char *data, size_t len, gint64 deadline)
{
    size_t off = 0;

    while (off < len) {
        ssize_t r = send(fd, data + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (r > 0) {
            off += r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = vrmHelperWait(fd, POLLOUT, deadline);

            if (w == 0) {
                vrmReportError(VRM_ERR_TIMEOUT,
                               _("timed out writing to the virt-rdma helper's control socket"));
                return -1;
            }
            if (w > 0)
                continue;
        }
        vrmReportSystemError(errno,
                             _("cannot write to the virt-rdma helper's control socket"));
        return -1;
    }
    return 0;
}

/* 1: all read, 0: EOF before the first byte, -1: error reported */
static int
vrmHelperReadAll(int fd, char *data, size_t len, gint64 deadline)
{
    size_t off = 0;

    while (off < len) {
        ssize_t r = recv(fd, data + off, len - off, MSG_DONTWAIT);

        if (r > 0) {
            off += r;
            continue;
        }
        if (r == 0) {
            if (off == 0)
                return 0;
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("the control socket peer closed the connection in the middle of a message"));
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = vrmHelperWait(fd, POLLIN, deadline);

            if (w == 0) {
                vrmReportError(VRM_ERR_TIMEOUT,
                               _("timed out waiting for a message on the virt-rdma control socket"));
                return -1;
            }
            if (w > 0)
                continue;
        }
        vrmReportSystemError(errno,
                             _("cannot read from the virt-rdma control socket"));
        return -1;
    }
    return 1;
}

int
vrmHelperFrameWrite(int fd, const char *data, size_t len, gint64 deadline)
{
    guint32 be;

    if (len > VRM_HELPER_FRAME_MAX) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("a control message of %1$zu bytes exceeds the limit of %2$u bytes"),
                       len, VRM_HELPER_FRAME_MAX);
        return -1;
    }
    be = GUINT32_TO_BE((guint32)len);
    if (vrmHelperWriteAll(fd, (const char *)&be, sizeof(be), deadline) < 0 ||
        vrmHelperWriteAll(fd, data, len, deadline) < 0)
        return -1;
    return 0;
}

char *
vrmHelperFrameRead(int fd, gint64 deadline, size_t *lenp)
{
    guint32 be;
    size_t len;
    g_autofree char *data = NULL;
    int r;

    if ((r = vrmHelperReadAll(fd, (char *)&be, sizeof(be), deadline)) <= 0) {
        if (r == 0)
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("the control socket peer closed the connection without a message"));
        return NULL;
    }
    len = GUINT32_FROM_BE(be);
    if (len == 0 || len > VRM_HELPER_FRAME_MAX) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("a control message announces %1$zu bytes; the allowed size is 1 to %2$u bytes"),
                       len, VRM_HELPER_FRAME_MAX);
        return NULL;
    }
    data = g_malloc(len + 1);
    if ((r = vrmHelperReadAll(fd, data, len, deadline)) <= 0) {
        if (r == 0)
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("the control socket peer closed the connection in the middle of a message"));
        return NULL;
    }
    data[len] = '\0';
    if (strlen(data) != len) {
        vrmReportError(VRM_ERR_PROTOCOL, _("a control message contains a NUL byte"));
        return NULL;
    }
    if (lenp)
        *lenp = len;
    return g_steal_pointer(&data);
}

int
vrmHelperConnect(const char *path, gint64 deadline)
{
    struct sockaddr_un sa;
    int fd;

    if (vrmUnixAddress(path, &sa) < 0)
        return -1;
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        vrmReportSystemError(errno, _("cannot create a UNIX socket"));
        return -1;
    }
    if (vrmSetNonBlock(fd) < 0)
        goto error;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int err = errno;

        if (err == EINPROGRESS || err == EAGAIN) {
            socklen_t elen = sizeof(err);

            if (vrmHelperWait(fd, POLLOUT, deadline) <= 0) {
                vrmReportError(VRM_ERR_TIMEOUT,
                               _("timed out connecting to the virt-rdma helper at %1$s"),
                               path);
                goto error;
            }
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
                err = errno;
        }
        if (err != 0 && err != EINPROGRESS && err != EAGAIN) {
            if (err == ENOENT || err == ECONNREFUSED)
                vrmReportError(VRM_ERR_PEER, _("the virt-rdma helper (virt-rdmad) is not running on this host: cannot connect to %1$s: %2$s"),
                               path, g_strerror(err));
            else if (err == EACCES || err == EPERM)
                vrmReportError(VRM_ERR_AUTH, _("you may not use the virt-rdma helper: %1$s: %2$s (only root and members of its access group may)"),
                               path, g_strerror(err));
            else
                vrmReportSystemError(err,
                                     _("cannot connect to the virt-rdma helper at %1$s"),
                                     path);
            goto error;
        }
    }
    if (vrmHelperCheckServer(fd, path) < 0)
        goto error;
    return fd;

 error:
    close(fd);
    return -1;
}

/* Connect to @path (NULL: the default) and send @request: the fd, or -1 */
static int
vrmHelperClientSend(const char *path, const vrmControlMessage *request,
                    gint64 deadline)
{
    g_autofree char *xml = vrmControlMessageFormat(request);
    g_autofree char *defPath = NULL;
    int fd;

    if (!xml)
        return -1;
    if (!path)
        path = defPath = vrmHelperSocketPath();
    if ((fd = vrmHelperConnect(path, deadline)) < 0)
        return -1;
    if (vrmHelperFrameWrite(fd, xml, strlen(xml), deadline) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

vrmControlMessage *
vrmHelperClientCall(const char *path,
                    const vrmControlMessage *request,
                    int timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    vrmControlMessage *reply;
    int fd;

    if ((fd = vrmHelperClientSend(path, request, deadline)) < 0)
        return NULL;
    reply = vrmHelperClientNext(fd, deadline);
    close(fd);
    return reply;
}

int
vrmHelperClientSubscribe(const char *path, const vrmControlMessage *request,
                         int timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    g_autoptr(vrmControlMessage) reply = NULL;
    int fd;

    if ((fd = vrmHelperClientSend(path, request, deadline)) < 0)
        return -1;
    if (!(reply = vrmHelperClientNext(fd, deadline)) || vrmHelperReplyCheck(reply) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

vrmControlMessage *
vrmHelperClientNext(int fd, gint64 deadline)
{
    g_autofree char *answer = NULL;
    vrmControlMessage *reply;

    if (!(answer = vrmHelperFrameRead(fd, deadline, NULL)))
        return NULL;
    if (!(reply = vrmControlMessageParseString(answer)))
        return NULL;
    if (reply->type != VRM_CONTROL_REPLY) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the virt-rdma helper answered with <%1$s> instead of <reply>"),
                       vrmControlTypeTypeToString(reply->type));
        vrmControlMessageFree(reply);
        return NULL;
    }
    return reply;
}

int
vrmHelperReplyCheck(const vrmControlMessage *reply)
{
    if (reply->status == VRM_REPLY_OK)
        return 0;
    vrmSetLastError(reply->errorCode > VRM_ERR_OK && reply->errorCode < VRM_ERR_LAST ?
                    reply->errorCode : VRM_ERR_PEER,
                    reply->errorMessage ? reply->errorMessage :
                    _("the virt-rdma helper refused the request without a reason"));
    return -1;
}
