/*
 * vrmhelperpeer.h: the channel between the virt-rdmad of two hosts
 *
 * TCP (port 16530 by default), TLS 1.3 with GnuTLS, both sides
 * authenticated by one of two trust anchors (docs/negotiation.rst):
 *   psk   a cluster key file (256 bits, hexadecimal, root 0600), copied to
 *         every host like corosync's authkey; external PSK with (EC)DHE,
 *         so a key that leaks later does not open recorded sessions;
 *   x509  libvirt's PKI: both sides present their certificates, both
 *         verify them against the CA, the client checks the server's
 *         against the host name of the locator it connects to.
 * On the wire: frames of a 4-byte big-endian length and one XML document
 * of at most VRM_PEER_FRAME_MAX bytes (xml/vrmpeer.h). Every read has a
 * deadline (the owner's "expect"), the handshake has one, and a server
 * takes at most max-peers connections at once. Everything runs from the
 * main loop through fd watches; nothing blocks.
 *
 * Public API summary
 * ------------------
 *   vrmPeerCredsLoad(conf, &creds)       NULL creds: the channel is off
 *   vrmPeerChannelOffReason(conf)        what to tell then (allocated): auth
 *                                        none, or auto without files (it names
 *                                        the key file that is missing)
 *   vrmPeerCredsFree(creds)  vrmPeerCredsAuth(creds)  vrmPeerCredsDescribe(creds)
 *   vrmPeerKeyGenerate(path)             a new cluster key file (0600, never
 *                                        over an existing file)
 *   vrmPeerConnConnect(creds, locator, timeout, &callbacks, opaque)
 *   vrmPeerConnSend(pc, msg)             queued; written as the socket allows
 *   vrmPeerConnExpect(pc, seconds)       the next message must come by then
 *   vrmPeerConnFree(pc)  vrmPeerConnFinish(pc)   now / once written
 *   vrmPeerConnPeerName(pc)              "ADDR:PORT" (and the identity), logs
 *   vrmPeerConnPeerAddress(pc)           server side: the address it came from
 *   vrmPeerConnCheckIdentity(pc, named)  server side, x509: its certificate
 *                                        names that locator's host or address
 *   vrmPeerConnPeerSubject(pc)           server side, x509: its DN, or NULL
 *   vrmPeerCredsSetSource(creds, addr)   connect from this local address (the
 *                                        locator's, which peers check)
 *   vrmPeerServerNew(creds, address, port, maxPeers, timeout, cb, opaque)
 *   vrmPeerServerFree(srv)
 * The framing alone, no socket and no TLS (fuzzed by tests/fuzz/vrmpeerfuzz.c):
 *   vrmPeerFrameAppend(in, chunk, size, name)   one read's bytes, bounded
 *   vrmPeerFrameTake(in, name, &msg)            the next whole frame, parsed
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

#include "vrmhelperconf.h"
#include "vrmpeer.h"

/* The cluster key: 256 bits */
#define VRM_PEER_KEY_BYTES 32
/* One read from the TLS session: the input buffer holds at most a whole
 * frame and one such read */
#define VRM_PEER_READ_CHUNK 4096

typedef struct _vrmPeerCreds vrmPeerCreds;
typedef struct _vrmPeerConn vrmPeerConn;
typedef struct _vrmPeerServer vrmPeerServer;

typedef struct {
    /* client only: handshake done, the channel is ready for the request */
    void (*ready)(vrmPeerConn *pc, gpointer opaque);
    /* one message (the callee owns it) */
    void (*message)(vrmPeerConn *pc, vrmPeerMessage *msg, gpointer opaque);
    /* the channel failed or the peer closed it (error reported): the owner
     * frees @pc, now or later, and sends nothing more */
    void (*failed)(vrmPeerConn *pc, gpointer opaque);
} vrmPeerConnCallbacks;

/* A server got an authenticated connection: the callee takes it and sets
 * its callbacks with vrmPeerConnSetCallbacks() */
typedef void (*vrmPeerAcceptFunc)(vrmPeerConn *pc, gpointer opaque);

int vrmPeerCredsLoad(const vrmHelperConfig *conf, vrmPeerCreds **creds);
char *vrmPeerChannelOffReason(const vrmHelperConfig *conf);
void vrmPeerCredsFree(vrmPeerCreds *creds);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmPeerCreds, vrmPeerCredsFree);
vrmPeerAuth vrmPeerCredsAuth(const vrmPeerCreds *creds);
/* "psk (key id 3f2a...)" or "x509 (CA /etc/pki/CA/cacert.pem)" */
char *vrmPeerCredsDescribe(const vrmPeerCreds *creds);
void vrmPeerCredsSetSource(vrmPeerCreds *creds, const char *address);

int vrmPeerKeyGenerate(const char *path);

vrmPeerConn *vrmPeerConnConnect(vrmPeerCreds *creds, const vrmLocator *to,
                                unsigned int timeout,
                                const vrmPeerConnCallbacks *cb,
                                gpointer opaque);
void vrmPeerConnSetCallbacks(vrmPeerConn *pc, const vrmPeerConnCallbacks *cb,
                             gpointer opaque);
int vrmPeerConnSend(vrmPeerConn *pc, const vrmPeerMessage *msg);
void vrmPeerConnExpect(vrmPeerConn *pc, unsigned int seconds);
const char *vrmPeerConnPeerName(const vrmPeerConn *pc);
const char *vrmPeerConnPeerAddress(const vrmPeerConn *pc);
int vrmPeerConnCheckIdentity(vrmPeerConn *pc, const vrmLocator *named);
const char *vrmPeerConnPeerSubject(const vrmPeerConn *pc);
void vrmPeerConnFree(vrmPeerConn *pc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmPeerConn, vrmPeerConnFree);
/* Free @pc once what was sent has been written (at most a few seconds);
 * no callback comes any more: the caller forgets @pc */
void vrmPeerConnFinish(vrmPeerConn *pc);

vrmPeerServer *vrmPeerServerNew(vrmPeerCreds *creds, const char *address,
                                unsigned int port, unsigned int maxPeers,
                                unsigned int timeout, vrmPeerAcceptFunc func,
                                gpointer opaque);
void vrmPeerServerFree(vrmPeerServer *srv);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmPeerServer, vrmPeerServerFree);
/* the port it listens on (the configured one, or the kernel's for 0) */
unsigned int vrmPeerServerPort(const vrmPeerServer *srv);

/*
 * The framing, what an open channel runs on what it decrypts. Append:
 * -1 (VRM_ERR_PROTOCOL reported) if @in would hold more than a whole frame
 * and one read. Take: 1 and *@msg (the caller owns it) if @in starts with
 * a whole frame, removed from @in; 0 if more must come; -1 (reported,
 * VRM_ERR_PROTOCOL) for a length of 0 or over VRM_PEER_FRAME_MAX, a NUL
 * byte, or a document vrmPeerMessageParseString() refuses. @name: the
 * peer, for the error.
 */
int vrmPeerFrameAppend(GByteArray *in, const guint8 *chunk, gsize size,
                       const char *name);
int vrmPeerFrameTake(GByteArray *in, const char *name, vrmPeerMessage **msg);
