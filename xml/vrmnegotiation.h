/*
 * vrmnegotiation.h: capability table, host policy and offer/answer rules
 *
 * Public API summary
 * ------------------
 * Capabilities (32-bit flags, seed rule: unknown bits are ignored, the
 * agreed set is the intersection of both sides' known bits):
 *   vrmCapabilityTypeToString/FromString   "pin-all", "write-imm"
 *   vrmCapabilityGetInfo(cap)              bit, side, default, CLI option, help
 *   vrmCapabilityKnownMask()               bits this build understands
 *   vrmCapabilityDefaultMask()             bits on unless switched off
 *   vrmCapabilityIntersect(src, dst)       agreed bits
 *   vrmCapabilityForSide(flags, side)      bits a given side acts on
 *   vrmCapabilityFormat(flags)             "pin-all, write-imm" ("none")
 *   vrmCapabilityFromParams(params)        defaults + <pin-all/> etc.
 * Host policy (data, see vrmPolicyLimitTable in the .c):
 *   vrmHostPolicyInit(&policy)             permissive defaults of this build
 *   vrmHostPolicyAllowChunkSize(&p, size)  add a chunk size to the allowed set
 *   vrmHostPolicyFormatChunkSizes(&p)      "65536 1048576"
 *   vrmPinnedBytes(channels, depth, chunk) bytes pinned on one host
 * Negotiation:
 *   vrmOfferFromParams(params, &policy)    source side: defaults + params,
 *                                          checked against the local policy
 *   vrmNegotiate(offer, &policy)           destination side: always returns an
 *                                          answer (accepted or refused)
 *   vrmNegotiationCheckAnswer(offer, ans)  source side: 0 if accepted and
 *                                          consistent, else -1 with the reason
 */
#pragma once

#include "vrmmigrationdef.h"

typedef enum {
    VRM_CAPABILITY_PIN_ALL,        /* register whole rings up front (seed: PIN_ALL) */
    VRM_CAPABILITY_WRITE_IMM,      /* data notified by RDMA WRITE_WITH_IMM */

    VRM_CAPABILITY_LAST
} vrmCapability;
VRM_ENUM_DECL(vrmCapability);

typedef enum {
    VRM_SIDE_SOURCE = 1 << 0,
    VRM_SIDE_DESTINATION = 1 << 1,
    VRM_SIDE_BOTH = VRM_SIDE_SOURCE | VRM_SIDE_DESTINATION,
} vrmSide;

typedef struct {
    vrmCapability cap;
    guint32 bit;            /* flag in the offer/answer and connect private data */
    vrmSide side;           /* whose engine acts on it once agreed */
    bool defaultOn;         /* asked for unless switched off */
    const char *option;     /* virt-rdma migrate option that switches it on */
    const char *help;       /* N_() text for --help and docs */
} vrmCapabilityInfo;

#define VRM_CAP_FLAG_PIN_ALL 0x1u
#define VRM_CAP_FLAG_WRITE_IMM 0x2u

const vrmCapabilityInfo *vrmCapabilityGetInfo(vrmCapability cap);
guint32 vrmCapabilityKnownMask(void);
guint32 vrmCapabilityDefaultMask(void);
guint32 vrmCapabilityIntersect(guint32 source, guint32 destination);
guint32 vrmCapabilityForSide(guint32 flags, vrmSide side);
char *vrmCapabilityFormat(guint32 flags);
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
unsigned long long vrmPinnedBytes(unsigned int channels, unsigned int ringDepth,
                                  unsigned int chunkSize);

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
