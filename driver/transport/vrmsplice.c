/*
 * vrmsplice.c: zero-copy writes of ring memory into a stream socket
 *
 * Why it is safe (the channel's side of the proof is in vrmchannelrx.c):
 * - vmsplice() without SPLICE_F_GIFT takes references on the buffer's
 *   pages; splice() into an AF_UNIX stream socket appends those pages to
 *   the socket's buffers (Linux 6.1 through unix_stream_sendpage, later
 *   through MSG_SPLICE_PAGES), charging every appended byte and each
 *   buffer's overhead to the writer's send allocation;
 * - the reader's read()/recvmsg() copies bytes out, in order, and the
 *   allocation is returned only after the copy, when a buffer is freed;
 *   so SIOCOUTQ (that allocation) is never less than the bytes not yet
 *   read. QEMU reads its migration sockets this way; a reader that
 *   spliced out of its socket would take the page references with it,
 *   and is not supported.
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* pipe2, vmsplice, splice, F_SETPIPE_SZ */
#endif

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "vrmsplice.h"

/* the default pipe: 16 pages */
#define VRM_SPLICE_PIPE_MIN (64u * 1024)

int
vrmSpliceOpen(vrmSplice *z, guint32 chunk)
{
    z->piped = 0;
    if (pipe2(z->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        z->pipe[0] = z->pipe[1] = -1;
        return -1;
    }
    /* A chunk in one call where allowed. Above fs.pipe-max-size (1 MiB
     * by default), or past the user's pipe-user-pages-soft, the kernel
     * refuses (EPERM) without CAP_SYS_RESOURCE: then the largest size it
     * grants, not the default 64 KiB (4 MiB chunks through 64 KiB pipes
     * took 24 vmsplice and 24 splice calls per MiB; bench-native). A
     * smaller pipe only means more calls. */
    for (guint32 size = chunk; size >= VRM_SPLICE_PIPE_MIN; size /= 2) {
        if (fcntl(z->pipe[1], F_SETPIPE_SZ, (int)MIN(size, (guint32)G_MAXINT)) >= 0)
            break;
    }
    return 0;
}

void
vrmSpliceClose(vrmSplice *z)
{
    /* closing drops the pipe's page references with its contents */
    if (z->pipe[0] >= 0)
        close(z->pipe[0]);
    if (z->pipe[1] >= 0)
        close(z->pipe[1]);
    z->pipe[0] = z->pipe[1] = -1;
    z->piped = 0;
}

gboolean
vrmSpliceSafe(int sock)
{
    int domain = 0;
    socklen_t len = sizeof(domain);

    /* A UNIX stream socket's SIOCOUTQ counts the bytes its reader has not
     * read. A TCP socket's counts those its peer has not acknowledged, and
     * on this host (loopback) the receiver's queue holds the very pages we
     * lent after the acknowledgement: a chunk freed then would change
     * bytes QEMU has not read yet. */
    return getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
           domain == AF_UNIX;
}

gboolean
vrmSpliceUnsupported(int err)
{
    /* EACCES: a security module that mediates the pipe */
    return err == EINVAL || err == ENOSYS || err == EPERM || err == EACCES ||
           err == EOPNOTSUPP;
}

ssize_t
vrmSpliceWrite(vrmSplice *z, int sock, const guint8 *buf, size_t len)
{
    ssize_t r;

    if (z->piped < len) {
        struct iovec iov = {
            .iov_base = (void *)(buf + z->piped),
            .iov_len = len - z->piped,
        };

        r = vmsplice(z->pipe[1], &iov, 1, SPLICE_F_NONBLOCK);
        if (r < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (r > 0)
            z->piped += r;
    }
    if (z->piped == 0) {
        errno = EAGAIN;
        return -1;
    }
    r = splice(z->pipe[0], NULL, sock, NULL, z->piped,
               SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (r < 0)
        return -1;
    z->piped -= r;
    return r;
}

int
vrmSpliceTaken(int sock, guint64 written, guint64 *taken)
{
    int outq = 0;

    if (ioctl(sock, SIOCOUTQ, &outq) < 0)
        return -1;
    *taken = (guint64)MAX(outq, 0) >= written ? 0 : written - (guint64)MAX(outq, 0);
    return 0;
}
