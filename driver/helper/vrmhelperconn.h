/*
 * vrmhelperconn.h: the control socket's clients, served without blocking
 *
 * One request and one reply per connection (framing: vrmhelperclient.h).
 * Each client is a small state machine driven by fd watches of the main
 * loop: READING (a deadline for the whole request, a bounded buffer) ->
 * WAITING (the daemon holds it until it can answer, e.g. until an engine
 * has connected) -> WRITING (a deadline for the whole reply) -> closed.
 * A slow or stuck client never holds the loop.
 *
 * The listener is watched only while there is room: at the client cap,
 * and when accept() fails for want of file descriptors (EMFILE, ENFILE),
 * the server stops watching it and looks again later, so pending
 * connections wait in the kernel's backlog instead of spinning the loop.
 *
 * Public API summary
 * ------------------
 *   vrmHelperServerNew(fd, maxClients, handler, opaque)
 *   vrmHelperServerFree(srv)        closes every client, not the listener
 *   vrmHelperServerClients(srv)
 *   vrmHelperConnCred(c)            SO_PEERCRED of the client
 *   vrmHelperConnReply(c, xml)      answer and close (takes no ownership)
 *   vrmHelperConnReplyError(c, code, message)
 *   vrmHelperConnReplyMessage(c, msg)
 *   vrmHelperConnReplyLastError(c)  this thread's last vrmerror
 *   vrmHelperRequestFeed(in, chunk, size, &len)
 *                                   the framing alone, no socket (fuzzed by
 *                                   tests/fuzz/vrmcontrolfuzz.c)
 * After a Reply* call the connection belongs to the server again: the
 * caller must forget it.
 *
 * A subscriber (virt-rdma events) is the other shape: the reply is
 * <reply status="ok"/>, then the daemon pushes frames to it as things
 * happen, until it hangs up (STREAMING). It sends nothing more; one that
 * lets more than 256 KiB pile up unread is dropped.
 *   vrmHelperConnSubscribe(c)       answer ok, keep it as a subscriber
 *   vrmHelperConnPush(c, xml)       one frame (may drop @c: forget it)
 *   vrmHelperServerForEachSubscriber(srv, func, opaque)
 *   vrmHelperServerSubscribers(srv, uid)    how many ((uid_t)-1: all)
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

#include "vrmcontrol.h"

/* The largest request a client may send (replies may be larger) */
#define VRM_HELPER_REQUEST_MAX (64u * 1024)
/* A client has this long to send its whole request */
#define VRM_HELPER_REQUEST_TIMEOUT_MS (10 * 1000)
/* ... and to take its whole reply */
#define VRM_HELPER_REPLY_TIMEOUT_MS (5 * 1000)

/* The kernel's word on a client: SO_PEERCRED and SO_PEERGROUPS (no
 * name-service lookup, which could block the loop) */
#define VRM_HELPER_CRED_GROUPS_MAX 256
typedef struct {
    uid_t uid;
    gid_t gid;
    pid_t pid;
    gid_t groups[VRM_HELPER_CRED_GROUPS_MAX];
    unsigned int ngroups;
} vrmHelperCred;

typedef struct _vrmHelperConn vrmHelperConn;
typedef struct _vrmHelperServer vrmHelperServer;

/* A whole request arrived: @xml is NUL-terminated and valid until the reply */
typedef void (*vrmHelperRequestFunc)(vrmHelperConn *c, const char *xml,
                                     gpointer opaque);

vrmHelperServer *vrmHelperServerNew(int listenFd, unsigned int maxClients,
                                    vrmHelperRequestFunc handler,
                                    gpointer opaque);
void vrmHelperServerFree(vrmHelperServer *srv);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmHelperServer, vrmHelperServerFree);
unsigned int vrmHelperServerClients(const vrmHelperServer *srv);

const vrmHelperCred *vrmHelperConnCred(const vrmHelperConn *c);
void vrmHelperConnReply(vrmHelperConn *c, const char *xml);
void vrmHelperConnReplyError(vrmHelperConn *c, int code, const char *message);
void vrmHelperConnReplyMessage(vrmHelperConn *c, const vrmControlMessage *msg);
void vrmHelperConnReplyLastError(vrmHelperConn *c);

typedef void (*vrmHelperSubscriberFunc)(vrmHelperConn *c, gpointer opaque);
void vrmHelperConnSubscribe(vrmHelperConn *c);
void vrmHelperConnPush(vrmHelperConn *c, const char *xml);
void vrmHelperServerForEachSubscriber(vrmHelperServer *srv,
                                      vrmHelperSubscriberFunc func,
                                      gpointer opaque);
unsigned int vrmHelperServerSubscribers(vrmHelperServer *srv, uid_t uid);
/*
 * The framing of a request, what the client's fd watch runs on each chunk
 * it receives: append @chunk to @in (never more than one byte past the
 * largest frame), then 1 if @in holds one whole request (@len: the
 * document's length, after the 4-byte prefix), 0 if more must come, -1 if
 * the request is refused (VRM_ERR_PROTOCOL reported): a length of 0 or
 * over VRM_HELPER_REQUEST_MAX, bytes past the request, a NUL byte in it.
 */
int vrmHelperRequestFeed(GByteArray *in, const guint8 *chunk, gsize size,
                         guint32 *len);
