/*
 * vrmhelperclient.h: the control socket of virt-rdmad, client and framing
 *
 * A message on the control socket is a 4-byte big-endian length followed
 * by one XML document of that many bytes (xml/vrmcontrol.h), at most
 * VRM_HELPER_FRAME_MAX bytes. A client connects, sends one request, reads
 * one reply, and closes; a subscriber (<job-events/>) reads replies until
 * it closes. Every read and write has a deadline.
 *
 * Before it sends anything, a client checks who serves the socket
 * (SO_PEERCRED): root, or the client's own user (a helper run without
 * privileges for tests). Anybody else is an impostor that took the
 * socket's place, and gets nothing.
 *
 * Public API summary
 * ------------------
 *   vrmHelperSocketPath()                  $VRM_HELPER_SOCKET (the CLI and
 *                                          the library only), else the one
 *                                          of the helper's configuration
 *   vrmHelperServerAllowed(server, self)   the SO_PEERCRED decision
 *   vrmHelperFrameWrite(fd, data, len, deadline)
 *   vrmHelperFrameRead(fd, deadline)       one document, NUL-terminated
 *   vrmHelperClientCall(path, req, timeout_ms)
 *                                          one request -> the parsed reply
 *   vrmHelperClientSubscribe(path, req, timeout_ms)
 *                                          a subscription (job-events): the
 *                                          fd once the helper said ok
 *   vrmHelperClientNext(fd, deadline)      the next reply on it (G_MAXINT64:
 *                                          as long as it takes)
 *   vrmHelperReplyCheck(reply)             0 if ok, else -1 with the
 *                                          helper's error reported as ours
 * Deadlines are g_get_monotonic_time() values in microseconds.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

#include "vrmcontrol.h"
#include "vrmhelperconf.h"

#define VRM_HELPER_FRAME_MAX (1024u * 1024)
#define VRM_HELPER_SOCKET_ENV "VRM_HELPER_SOCKET"

/* Where the CLI and the library find the helper (g_free). */
char *vrmHelperSocketPath(void);

bool vrmHelperServerAllowed(uid_t server, uid_t self);

int vrmHelperFrameWrite(int fd, const char *data, size_t len, gint64 deadline);
char *vrmHelperFrameRead(int fd, gint64 deadline, size_t *len);

/* Connect to @path with a deadline and check the server's credentials;
 * -1 with the error reported. */
int vrmHelperConnect(const char *path, gint64 deadline);

vrmControlMessage *vrmHelperClientCall(const char *path,
                                       const vrmControlMessage *request,
                                       int timeout_ms);

int vrmHelperClientSubscribe(const char *path, const vrmControlMessage *request,
                             int timeout_ms);
vrmControlMessage *vrmHelperClientNext(int fd, gint64 deadline);

int vrmHelperReplyCheck(const vrmControlMessage *reply);
