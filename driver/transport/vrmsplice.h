/*
 * vrmsplice.h: zero-copy writes of ring memory into a stream socket
 *
 * vmsplice() lends the pages of a buffer to a pipe (references, no copy)
 * and splice() moves those references on into the socket, where the
 * reader's read() copies the bytes out. Until then the socket reads from
 * the buffer itself: the caller must not change a byte it wrote this way
 * before vrmSpliceTaken() says the reader has taken it.
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

typedef struct {
    int pipe[2];                /* -1 when closed */
    guint32 piped;              /* bytes lent to the pipe, not yet in the socket */
} vrmSplice;

/* A pipe sized for @chunk bytes where the system allows; -1 and errno
 * when none can be made (the caller copies instead) */
int vrmSpliceOpen(vrmSplice *z, guint32 chunk);
void vrmSpliceClose(vrmSplice *z);

/*
 * Write the @len bytes at @buf into @sock without copying them. Call
 * again with @buf advanced by what was returned: the first bytes of
 * @buf may already be in the pipe. Returns the bytes that entered the
 * socket (0 is possible), or -1 and errno: EAGAIN when the socket is
 * full, EINVAL, ENOSYS, EPERM or EACCES when the system cannot splice into it
 * (vrmSpliceUnsupported: close, and copy from the same place on).
 */
ssize_t vrmSpliceWrite(vrmSplice *z, int sock, const guint8 *buf, size_t len);
gboolean vrmSpliceUnsupported(int err);

/* Whether @sock may be written by splice at all: only a UNIX stream
 * socket tells (vrmSpliceTaken) when its reader has taken the bytes; any
 * other (QEMU's TCP port in the transparent mode) is copied into */
gboolean vrmSpliceSafe(int sock);

/*
 * Of the @written bytes ever written into @sock by this writer (copied or
 * spliced), how many the reader has surely taken: the socket's unread
 * bytes are at most what SIOCOUTQ reports (its accounting includes each
 * buffer's overhead), and a stream is read in order. -1 and errno if the
 * socket cannot say.
 */
int vrmSpliceTaken(int sock, guint64 written, guint64 *taken);
