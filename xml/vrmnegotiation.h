/*
 * vrmnegotiation.h: host policy and offer/answer rules
 *
 * Public API summary
 * ------------------
 * Capabilities (the table itself: util/vrmcapability.h):
 *   vrmCapabilityFromParams(params)        defaults + <pin-all/> etc.
 * Host policy (data, see vrmPolicyLimitTable in the .c):
 *   vrmHostPolicyInit(&policy)             permissive defaults of this build
 *   vrmHostPolicyAllowChunkSize(&p, size)  add a chunk size to the allowed set
 *   vrmHostPolicyFormatChunkSizes(&p)      "65536 1048576"
 * Negotiation:
 *   vrmOfferFromParams(params, &policy)    source side: defaults + params,
 *                                          checked against the local policy
 *   vrmNegotiate(offer, &policy)           destination side: always returns an
 *                                          answer (accepted or refused)
 *   vrmNegotiationCheckAnswer(offer, ans)  source side: 0 if accepted and
 *                                          consistent, else -1 with the reason
 */
#pragma once

#include "vrmcapability.h"
#include "vrmmigrationdef.h"

guint32 vrmCapabilityFromParams(const vrmMigrationParams *params);

typedef struct {
    unsigned int minVersion;        /* lowest protocol version accepted */
    unsigned int maxVersion;        /* highest protocol version accepted */
    guint32 capabilities;           /* capability bits this host supports */
    unsigned int maxChannels;       /* 1..64 */
    unsigned long long maxPinnedBytes; /* per migration, 0: no limit */
    guint32 chunkSizes;             /* bit n set: 2^n bytes allowed */
    unsigned int maxRingDepth;      /* larger offers are clamped */
    unsigned int maxBandwidth;      /* Mbit/s, 0: no cap; offers are clamped */
} vrmHostPolicy;

void vrmHostPolicyInit(vrmHostPolicy *policy);
int vrmHostPolicyAllowChunkSize(vrmHostPolicy *policy, unsigned int size);
char *vrmHostPolicyFormatChunkSizes(const vrmHostPolicy *policy);

/*
 * Build the source's offer from @params over this build's defaults; the
 * token, the endpoint and the version are filled in too (token generated,
 * endpoint from @address/@port). Values @policy refuses are reported with
 * the limit and the asked value (VRM_ERR_POLICY), and so is a capability
 * switched on in @params that @policy->capabilities lacks; default-on
 * capabilities the host lacks are just left out.
 */
vrmOffer *vrmOfferFromParams(const vrmMigrationParams *params,
                             const vrmHostPolicy *policy,
                             const char *address, unsigned int port);

vrmAnswer *vrmNegotiate(const vrmOffer *offer, const vrmHostPolicy *policy);

int vrmNegotiationCheckAnswer(const vrmOffer *offer, const vrmAnswer *answer);
