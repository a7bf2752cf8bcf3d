/*
 * vrmpeer.h: messages between the virt-rdmad of two hosts
 *
 * They travel on the helpers' own channel (TLS, mutually authenticated;
 * driver/helper/vrmhelperpeer.c), one XML document per frame of at most
 * VRM_PEER_FRAME_MAX bytes. Schema: xml/schemas/peer.rng. The exchange of
 * one migration, started by the destination's helper from its hook:
 *
 *   dst -> src  <migration-request version="1">
 *                 <domain name="web1" uuid="..."/>
 *                 <requester host="dst" address="192.0.2.20" port="16530"/>
 *                 <limits max-channels="9"/>
 *               </migration-request>
 *   src -> dst  <migration-offer>
 *                 <socket path="/run/virt-rdma/qemu/UUID/migrate.sock"/>
 *                 <offer version= capabilities= token=>...</offer>
 *               </migration-offer>
 *   dst -> src  <migration-answer><answer status="accepted" .../></migration-answer>
 *   src -> dst  <migration-result status="ok"/>
 *
 * A post-copy migration whose connection broke is recovered by a second
 * exchange of the same four messages: the destination's request then
 * carries <recovery job="N"/> (N: the destination's failed job), and the
 * source offers only for a domain paused in post-copy failed whose last
 * outgoing job went to the requester. An older peer refuses it (schema).
 *
 * Either side may send <migration-result status="error" code="policy">one
 * line</migration-result> instead of its next message; the exchange ends
 * there. The offer is the only message that carries the token.
 *
 * `virt-rdma capabilities --peer` checks both ways: after the handshake
 * the checking helper asks the other to reach it back, and gets a result:
 *
 *   A -> B      <reach-check version="1">
 *                 <requester host="a" address="192.0.2.10" port="16530"/>
 *               </reach-check>
 *   B -> A      <migration-result status="ok"/>   (B's handshake with A
 *                                                  worked; else an error)
 *
 * B connects only to the requester's own address (the channel's source),
 * so a peer cannot point B at a third host.
 *
 * Public API summary
 * ------------------
 *   vrmPeerMessageNew(type) / Free
 *   vrmPeerResultNewError(code, message)
 *   vrmPeerMessageParseString(xml)    parse -> validate (peer.rng) -> parse
 *   vrmPeerMessageFormat(msg)         document text
 * Enums: vrmPeerType.
 */
#pragma once

#include "vrmmigrationdef.h"

/* One frame on the helpers' channel, length prefix excluded. */
#define VRM_PEER_FRAME_MAX (64u * 1024)
/* Version of these messages (not of the engines' wire protocol). */
#define VRM_PEER_VERSION 1

typedef enum {
    VRM_PEER_MIGRATION_REQUEST,
    VRM_PEER_MIGRATION_OFFER,
    VRM_PEER_MIGRATION_ANSWER,
    VRM_PEER_MIGRATION_RESULT,
    VRM_PEER_REACH_CHECK,

    VRM_PEER_LAST
} vrmPeerType;
VRM_ENUM_DECL(vrmPeerType);

typedef struct _vrmPeerMessage vrmPeerMessage;
struct _vrmPeerMessage {
    vrmPeerType type;
    /* request, reach check */
    unsigned int version;
    char *domainName;
    char *domainUUID;
    vrmLocator *requester;          /* the destination's (the checker's) own locator */
    unsigned int maxChannels;       /* the destination's policy */
    unsigned long long recoveryOf;  /* the destination's failed job of a
                                     * post-copy to recover, or 0 */
    /* offer */
    char *socketPath;
    vrmOffer *offer;                /* with its token */
    /* answer */
    vrmAnswer *answer;
    /* result */
    int errorCode;                  /* VRM_ERR_OK: status ok */
    char *errorMessage;
};

vrmPeerMessage *vrmPeerMessageNew(vrmPeerType type);
void vrmPeerMessageFree(vrmPeerMessage *msg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmPeerMessage, vrmPeerMessageFree);
vrmPeerMessage *vrmPeerResultNewError(int code, const char *message);

vrmPeerMessage *vrmPeerMessageParseString(const char *xml);
char *vrmPeerMessageFormat(const vrmPeerMessage *msg);
