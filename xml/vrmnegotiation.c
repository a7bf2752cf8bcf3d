/*
 * vrmnegotiation.c: host policy and offer/answer rules
 *
 * Tables carry the rules, in the manner of libvirt's
 * qemu_migration_params.c: one row per host-policy limit here, one row per
 * capability bit in util/vrmcapability.c. Adding a capability or a limit
 * is adding a row.
 */
#include <config.h>

#include <string.h>

#include "vrmnegotiation.h"
#include "vrmerror.h"
#include "vrmi18n.h"

guint32
vrmCapabilityFromParams(const vrmMigrationParams *params)
{
    guint32 flags = vrmCapabilityDefaultMask();

    flags |= params->capsOn;
    flags &= ~params->capsOff;
    return flags & vrmCapabilityMigrationMask();
}


/* ---- host policy ---- */

static unsigned int
vrmLog2(unsigned int v)
{
    unsigned int n = 0;

    while (v > 1) {
        v >>= 1;
        n++;
    }
    return n;
}

static bool
vrmChunkSizeValid(unsigned long long size)
{
    return size >= VRM_CHUNK_SIZE_MIN && size <= VRM_CHUNK_SIZE_MAX &&
        (size & (size - 1)) == 0;
}

void
vrmHostPolicyInit(vrmHostPolicy *policy)
{
    unsigned int size;

    memset(policy, 0, sizeof(*policy));
    policy->minVersion = VRM_PROTOCOL_VERSION_MIN;
    policy->maxVersion = VRM_PROTOCOL_VERSION_MAX;
    policy->capabilities = vrmCapabilityMigrationMask();
    policy->maxChannels = VRM_CHANNELS_MAX;
    policy->maxPinnedBytes = 0;
    for (size = VRM_CHUNK_SIZE_MIN; size <= VRM_CHUNK_SIZE_MAX; size <<= 1)
        policy->chunkSizes |= 1u << vrmLog2(size);
    policy->maxRingDepth = VRM_RING_DEPTH_MAX;
    policy->maxBandwidth = 0;
}

int
vrmHostPolicyAllowChunkSize(vrmHostPolicy *policy, unsigned int size)
{
    if (!vrmChunkSizeValid(size)) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("chunk size %1$u is not a power of two from %2$u to %3$u"),
                       size, VRM_CHUNK_SIZE_MIN, VRM_CHUNK_SIZE_MAX);
        return -1;
    }
    policy->chunkSizes |= 1u << vrmLog2(size);
    return 0;
}

char *
vrmHostPolicyFormatChunkSizes(const vrmHostPolicy *policy)
{
    GString *buf = g_string_new(NULL);
    unsigned int size;

    for (size = VRM_CHUNK_SIZE_MIN; size <= VRM_CHUNK_SIZE_MAX; size <<= 1) {
        if (!(policy->chunkSizes & (1u << vrmLog2(size))))
            continue;
        if (buf->len)
            g_string_append_c(buf, ' ');
        g_string_append_printf(buf, "%u", size);
    }
    return g_string_free(buf, FALSE);
}



/* ---- the limit table ---- */

/* The values under negotiation. */
typedef struct {
    unsigned int channels;
    unsigned int chunkSize;
    unsigned int ringDepth;
    unsigned int bandwidth;
} vrmNegotiationValues;

typedef enum {
    VRM_LIMIT_ACTION_REFUSE,    /* out of bounds: refuse the offer */
    VRM_LIMIT_ACTION_CLAMP,     /* out of bounds: apply the limit instead */
} vrmLimitAction;

typedef struct {
    vrmLimit limit;
    vrmLimitAction action;
    /* the value asked for (after the clamps of earlier rows) */
    unsigned long long (*asked)(const vrmNegotiationValues *v);
    /* is @asked within @policy? */
    bool (*allows)(const vrmHostPolicy *policy, unsigned long long asked);
    /* CLAMP rows: the value applied instead, and where it goes */
    unsigned long long (*clamp)(const vrmHostPolicy *policy);
    void (*apply)(vrmNegotiationValues *v, unsigned long long value);
    /* what @policy allows, for messages: "1-16" */
    char *(*describe)(const vrmHostPolicy *policy);
} vrmPolicyLimitInfo;

static unsigned long long
askedChannels(const vrmNegotiationValues *v)
{
    return v->channels;
}

static bool
allowsChannels(const vrmHostPolicy *policy, unsigned long long asked)
{
    return asked >= VRM_CHANNELS_MIN && asked <= policy->maxChannels;
}

static char *
describeChannels(const vrmHostPolicy *policy)
{
    return g_strdup_printf("%u-%u", VRM_CHANNELS_MIN, policy->maxChannels);
}

static unsigned long long
askedChunkSize(const vrmNegotiationValues *v)
{
    return v->chunkSize;
}

static bool
allowsChunkSize(const vrmHostPolicy *policy, unsigned long long asked)
{
    return vrmChunkSizeValid(asked) &&
        (policy->chunkSizes & (1u << vrmLog2(asked)));
}

static unsigned long long
askedRingDepth(const vrmNegotiationValues *v)
{
    return v->ringDepth;
}

static bool
allowsRingDepth(const vrmHostPolicy *policy, unsigned long long asked)
{
    return asked <= policy->maxRingDepth;
}

static unsigned long long
clampRingDepth(const vrmHostPolicy *policy)
{
    return policy->maxRingDepth;
}

static void
applyRingDepth(vrmNegotiationValues *v, unsigned long long value)
{
    v->ringDepth = value;
}

static char *
describeRingDepth(const vrmHostPolicy *policy)
{
    return g_strdup_printf("%u-%u", VRM_RING_DEPTH_MIN, policy->maxRingDepth);
}

static unsigned long long
askedPinnedBytes(const vrmNegotiationValues *v)
{
    return vrmPinnedBytes(v->channels, v->ringDepth, v->chunkSize);
}

static bool
allowsPinnedBytes(const vrmHostPolicy *policy, unsigned long long asked)
{
    return policy->maxPinnedBytes == 0 || asked <= policy->maxPinnedBytes;
}

static char *
describePinnedBytes(const vrmHostPolicy *policy)
{
    if (policy->maxPinnedBytes == 0)
        return g_strdup(_("any amount"));
    return g_strdup_printf("0-%llu", policy->maxPinnedBytes);
}

static unsigned long long
askedBandwidth(const vrmNegotiationValues *v)
{
    return v->bandwidth;
}

static bool
allowsBandwidth(const vrmHostPolicy *policy, unsigned long long asked)
{
    return policy->maxBandwidth == 0 ||
        (asked != 0 && asked <= policy->maxBandwidth);
}

static unsigned long long
clampBandwidth(const vrmHostPolicy *policy)
{
    return policy->maxBandwidth;
}

static void
applyBandwidth(vrmNegotiationValues *v, unsigned long long value)
{
    v->bandwidth = value;
}

static char *
describeBandwidth(const vrmHostPolicy *policy)
{
    if (policy->maxBandwidth == 0)
        return g_strdup(_("any rate"));
    return g_strdup_printf("1-%u", policy->maxBandwidth);
}

/*
 * Checked in this order: the ring depth is clamped before the pinned bytes
 * are computed from it. Channels cannot be clamped (QEMU opens exactly the
 * number of connections it was told) and the chunk size is a property of
 * both rings, so both refuse.
 */
static const vrmPolicyLimitInfo vrmPolicyLimitTable[] = {
    { VRM_LIMIT_CHANNELS, VRM_LIMIT_ACTION_REFUSE,
      askedChannels, allowsChannels, NULL, NULL, describeChannels },
    { VRM_LIMIT_CHUNK_SIZE, VRM_LIMIT_ACTION_REFUSE,
      askedChunkSize, allowsChunkSize, NULL, NULL,
      vrmHostPolicyFormatChunkSizes },
    { VRM_LIMIT_RING_DEPTH, VRM_LIMIT_ACTION_CLAMP,
      askedRingDepth, allowsRingDepth, clampRingDepth, applyRingDepth,
      describeRingDepth },
    { VRM_LIMIT_PINNED_BYTES, VRM_LIMIT_ACTION_REFUSE,
      askedPinnedBytes, allowsPinnedBytes, NULL, NULL, describePinnedBytes },
    { VRM_LIMIT_BANDWIDTH, VRM_LIMIT_ACTION_CLAMP,
      askedBandwidth, allowsBandwidth, clampBandwidth, applyBandwidth,
      describeBandwidth },
};
G_STATIC_ASSERT(G_N_ELEMENTS(vrmPolicyLimitTable) == VRM_LIMIT_LAST);

/*
 * Run the limit table over @values. Clamps are applied to @values and,
 * if @answer, recorded as <limit>; violations are recorded in @violations
 * (as <violation> entries of a refusal) and their sentences joined in
 * @message. Returns the number of violations.
 */
static size_t
vrmPolicyApply(const vrmHostPolicy *policy, vrmNegotiationValues *values,
               vrmAnswer *answer, vrmAnswer *violations, GString *message)
{
    size_t nviolations = 0;
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmPolicyLimitTable); i++) {
        const vrmPolicyLimitInfo *info = &vrmPolicyLimitTable[i];
        unsigned long long asked = info->asked(values);
        g_autofree char *allowed = NULL;

        if (info->allows(policy, asked))
            continue;

        if (info->action == VRM_LIMIT_ACTION_CLAMP) {
            unsigned long long applied = info->clamp(policy);

            info->apply(values, applied);
            if (answer)
                vrmAnswerAddLimit(answer, info->limit, asked, applied, NULL);
            continue;
        }

        allowed = info->describe(policy);
        vrmAnswerAddLimit(violations, info->limit, asked, 0, allowed);
        if (message->len)
            g_string_append(message, "; ");
        g_string_append_printf(message,
                               _("limit '%1$s' exceeded: asked for %2$llu, this host allows %3$s"),
                               vrmLimitTypeToString(info->limit), asked, allowed);
        nviolations++;
    }
    return nviolations;
}


/* ---- negotiation ---- */

vrmOffer *
vrmOfferFromParams(const vrmMigrationParams *params,
                   const vrmHostPolicy *policy,
                   const char *address, unsigned int port)
{
    g_autoptr(vrmOffer) offer = vrmOfferNew();
    g_autoptr(vrmAnswer) violations = vrmAnswerNew(VRM_ANSWER_REFUSED);
    g_autoptr(GString) message = g_string_new(NULL);
    unsigned int chunkSize = params->chunkSize ? params->chunkSize : VRM_CHUNK_SIZE_DEFAULT;
    vrmNegotiationValues values = {
        .channels = params->channels ? params->channels : VRM_CHANNELS_DEFAULT,
        .chunkSize = chunkSize,
        .ringDepth = params->ringDepth ? params->ringDepth : vrmRingDepthDefault(chunkSize),
        .bandwidth = params->hasBandwidth ? params->bandwidth : 0,
    };

    if (vrmPolicyApply(policy, &values, NULL, violations, message) > 0) {
        vrmReportError(VRM_ERR_POLICY,
                       _("the migration parameters exceed this host's policy: %1$s"),
                       message->str);
        return NULL;
    }
    {
        /* asked for explicitly but not supported here: say so */
        guint32 missing = params->capsOn & vrmCapabilityMigrationMask() &
            ~policy->capabilities;

        if (missing) {
            g_autofree char *names = vrmCapabilityFormat(missing);

            vrmReportError(VRM_ERR_POLICY,
                           _("this host does not support the capabilities asked for: %1$s"),
                           names);
            return NULL;
        }
    }
    if (vrmTokenGenerate(&offer->token) < 0)
        return NULL;
    offer->hasToken = true;

    offer->version = VRM_PROTOCOL_VERSION;
    offer->capabilities = vrmCapabilityFromParams(params) & policy->capabilities;
    offer->address = g_strdup(address);
    offer->port = port;
    offer->device = g_strdup(params->device);
    offer->devicePort = params->devicePort;
    offer->channels = values.channels;
    offer->chunkSize = values.chunkSize;
    offer->ringDepth = values.ringDepth;
    offer->bandwidth = values.bandwidth;
    return g_steal_pointer(&offer);
}

vrmAnswer *
vrmNegotiate(const vrmOffer *offer, const vrmHostPolicy *policy)
{
    g_autoptr(vrmAnswer) answer = vrmAnswerNew(VRM_ANSWER_ACCEPTED);
    g_autoptr(vrmAnswer) refusal = vrmAnswerNew(VRM_ANSWER_REFUSED);
    g_autoptr(GString) message = g_string_new(NULL);
    vrmNegotiationValues values = {
        .channels = offer->channels,
        .chunkSize = offer->chunkSize,
        .ringDepth = offer->ringDepth,
        .bandwidth = offer->bandwidth,
    };

    if (offer->version < policy->minVersion ||
        offer->version > policy->maxVersion) {
        bool old = offer->version < policy->minVersion;

        refusal->reason = old ? VRM_REFUSAL_VERSION_TOO_OLD :
            VRM_REFUSAL_VERSION_TOO_NEW;
        refusal->message =
            g_strdup_printf(old ?
                            _("protocol version %1$u of the source is too old; this host speaks versions %2$u to %3$u") :
                            _("protocol version %1$u of the source is too new; this host speaks versions %2$u to %3$u"),
                            offer->version, policy->minVersion,
                            policy->maxVersion);
        return g_steal_pointer(&refusal);
    }

    if (vrmPolicyApply(policy, &values, answer, refusal, message) > 0) {
        refusal->reason = VRM_REFUSAL_POLICY;
        refusal->message = g_strdup(message->str);
        return g_steal_pointer(&refusal);
    }

    answer->version = offer->version;
    answer->capabilities = vrmCapabilityIntersect(offer->capabilities,
                                                  policy->capabilities);
    answer->channels = values.channels;
    answer->chunkSize = values.chunkSize;
    answer->ringDepth = values.ringDepth;
    answer->bandwidth = values.bandwidth;
    return g_steal_pointer(&answer);
}

int
vrmNegotiationCheckAnswer(const vrmOffer *offer, const vrmAnswer *answer)
{
    guint32 extra;

    if (answer->status == VRM_ANSWER_REFUSED) {
        int code = VRM_ERR_POLICY;

        if (answer->reason == VRM_REFUSAL_VERSION_TOO_OLD ||
            answer->reason == VRM_REFUSAL_VERSION_TOO_NEW)
            code = VRM_ERR_VERSION;
        else if (answer->reason == VRM_REFUSAL_NO_DEVICE)
            code = VRM_ERR_NO_DEVICE;
        else if (answer->reason == VRM_REFUSAL_BUSY)
            code = VRM_ERR_RESOURCE;
        else if (answer->reason == VRM_REFUSAL_INTERNAL)
            code = VRM_ERR_PEER;
        vrmReportError(code,
                       _("the destination refused the migration (%1$s): %2$s"),
                       vrmRefusalReasonTypeToString(answer->reason),
                       answer->message ? answer->message : _("no reason given"));
        return -1;
    }

    if (answer->version != offer->version) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the destination answered with protocol version %1$u to an offer of version %2$u"),
                       answer->version, offer->version);
        return -1;
    }
    extra = answer->capabilities & ~offer->capabilities & vrmCapabilityKnownMask();
    if (extra) {
        g_autofree char *names = vrmCapabilityFormat(extra);

        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the destination agreed to capabilities that were not offered: %1$s"),
                       names);
        return -1;
    }
    if (answer->channels != offer->channels ||
        answer->chunkSize != offer->chunkSize) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the destination changed the channel count or the chunk size (%1$u channels of %2$u bytes offered, %3$u of %4$u answered)"),
                       offer->channels, offer->chunkSize,
                       answer->channels, answer->chunkSize);
        return -1;
    }
    if (answer->ringDepth > offer->ringDepth) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the destination raised the ring depth from %1$u to %2$u"),
                       offer->ringDepth, answer->ringDepth);
        return -1;
    }
    return 0;
}
