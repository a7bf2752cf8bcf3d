/*
 * vrmnegotiationtest.c: capability table, intersection rule, versions and
 * host-policy limits
 */
#include <config.h>

#include <string.h>

#include "vrmtestutils.h"
#include "vrmerror.h"
#include "vrmnegotiation.h"
#include "vrmtestmain.h"

static vrmOffer *
makeOffer(void)
{
    vrmOffer *offer = vrmOfferNew();

    offer->version = VRM_PROTOCOL_VERSION;
    offer->capabilities = VRM_CAP_PIN_ALL | VRM_CAP_WRITE_IMM;
    offer->address = g_strdup("192.0.2.10");
    offer->port = 18515;
    offer->channels = 4;
    offer->chunkSize = 1048576;
    offer->ringDepth = 16;
    offer->bandwidth = 0;
    return offer;
}

static void
testTable(void)
{
    guint32 seen = 0;
    size_t i;

    for (i = 0; i < VRM_CAPABILITY_LAST; i++) {
        const vrmCapabilityInfo *info = vrmCapabilityGetInfo(i);

        g_assert_nonnull(info);
        g_assert_cmpint(info->cap, ==, i);
        /* one bit each, no bit twice */
        g_assert_cmpuint(info->bit & (info->bit - 1), ==, 0);
        g_assert_cmpuint(seen & info->bit, ==, 0);
        seen |= info->bit;
        g_assert_cmpint(vrmCapabilityTypeFromString(vrmCapabilityTypeToString(i)), ==, i);
        g_assert_true(info->side & VRM_SIDE_BOTH);
        /* an option, when there is one, is a long option of its own */
        g_assert_true(!info->option || g_str_has_prefix(info->option, "--rdma-"));
        g_assert_nonnull(info->help);
    }
    g_assert_null(vrmCapabilityGetInfo(VRM_CAPABILITY_LAST));
    /* the values the engine team relies on */
    g_assert_cmpuint(vrmCapabilityGetInfo(VRM_CAPABILITY_PIN_ALL)->bit, ==, 0x1);
    g_assert_cmpuint(vrmCapabilityGetInfo(VRM_CAPABILITY_WRITE_IMM)->bit, ==, 0x2);
    g_assert_cmpstr(vrmCapabilityTypeToString(VRM_CAPABILITY_PIN_ALL), ==, "pin-all");
    g_assert_cmpstr(vrmCapabilityTypeToString(VRM_CAPABILITY_WRITE_IMM), ==, "write-imm");
    /* virt-rdma migrate has --rdma-pin-all (cli-usage.sh runs it), and no
     * option for write-imm (issue 38: the table named one that did not exist) */
    g_assert_cmpstr(vrmCapabilityGetInfo(VRM_CAPABILITY_PIN_ALL)->option, ==, "--rdma-pin-all");
    g_assert_null(vrmCapabilityGetInfo(VRM_CAPABILITY_WRITE_IMM)->option);
    /* one table for both kinds: the engines' own bits are known, and no
     * migration's parameters name them */
    g_assert_cmpuint(vrmCapabilityKnownMask(), ==,
                     VRM_CAP_PIN_ALL | VRM_CAP_WRITE_IMM | VRM_CAP_DISKS | VRM_CAP_TCP);
    g_assert_cmpuint(vrmCapabilityMigrationMask(), ==, VRM_CAP_PIN_ALL | VRM_CAP_WRITE_IMM);
    g_assert_cmpint(vrmCapabilityGetInfo(VRM_CAPABILITY_DISKS)->scope, ==,
                    VRM_CAPABILITY_SCOPE_ENGINE);
    g_assert_cmpint(vrmCapabilityGetInfo(VRM_CAPABILITY_TCP)->scope, ==,
                    VRM_CAPABILITY_SCOPE_ENGINE);
    g_assert_cmpuint(vrmCapabilityDefaultMask(), ==, VRM_CAP_WRITE_IMM);
    g_assert_cmpuint(vrmCapabilityForSide(0xffffffff, VRM_SIDE_SOURCE), ==,
                     vrmCapabilityKnownMask());
}

/* Every bit on and off on each side, plus bits nobody knows. */
static void
testIntersection(void)
{
    static const guint32 unknown[] = { 0, 0x10, 0x80000000, 0xfffffff0 };
    vrmHostPolicy policy;
    guint32 src;
    guint32 dst;
    size_t u;

    vrmHostPolicyInit(&policy);
    for (src = 0; src < 4; src++) {
        for (dst = 0; dst < 4; dst++) {
            for (u = 0; u < G_N_ELEMENTS(unknown); u++) {
                g_autoptr(vrmOffer) offer = makeOffer();
                g_autoptr(vrmAnswer) answer = NULL;

                offer->capabilities = src | unknown[u];
                policy.capabilities = dst | unknown[(u + 1) % G_N_ELEMENTS(unknown)];
                answer = vrmNegotiate(offer, &policy);
                g_assert_cmpint(answer->status, ==, VRM_ANSWER_ACCEPTED);
                g_assert_cmpuint(answer->capabilities, ==, src & dst);
                g_assert_cmpuint(vrmCapabilityIntersect(src | unknown[u], dst | unknown[u]),
                                 ==, src & dst);
                g_assert_cmpint(vrmNegotiationCheckAnswer(offer, answer), ==, 0);
            }
        }
    }
}

static void
testParamsToCapabilities(void)
{
    vrmMigrationParams params = { 0 };

    g_assert_cmpuint(vrmCapabilityFromParams(&params), ==, VRM_CAP_WRITE_IMM);
    params.capsOn = VRM_CAP_PIN_ALL;
    g_assert_cmpuint(vrmCapabilityFromParams(&params), ==, 0x3);
    params.capsOff = VRM_CAP_WRITE_IMM;
    g_assert_cmpuint(vrmCapabilityFromParams(&params), ==, VRM_CAP_PIN_ALL);
    params.capsOn = 0x80000000;     /* unknown: never offered */
    params.capsOff = 0;
    g_assert_cmpuint(vrmCapabilityFromParams(&params), ==, VRM_CAP_WRITE_IMM);
}

static void
testVersions(void)
{
    vrmHostPolicy policy;
    g_autoptr(vrmOffer) offer = makeOffer();
    g_autoptr(vrmAnswer) tooNew = NULL;
    g_autoptr(vrmAnswer) tooOld = NULL;
    g_autoptr(vrmAnswer) inRange = NULL;

    vrmHostPolicyInit(&policy);
    policy.minVersion = 2;
    policy.maxVersion = 3;

    offer->version = 4;
    tooNew = vrmNegotiate(offer, &policy);
    g_assert_cmpint(tooNew->status, ==, VRM_ANSWER_REFUSED);
    g_assert_cmpint(tooNew->reason, ==, VRM_REFUSAL_VERSION_TOO_NEW);
    g_assert_cmpstr(tooNew->message, ==,
                    "protocol version 4 of the source is too new; this host speaks versions 2 to 3");
    vrmResetLastError();
    g_assert_cmpint(vrmNegotiationCheckAnswer(offer, tooNew), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_VERSION);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "the destination refused the migration (version-too-new): protocol version 4 of the source is too new; this host speaks versions 2 to 3");

    offer->version = 1;
    tooOld = vrmNegotiate(offer, &policy);
    g_assert_cmpint(tooOld->reason, ==, VRM_REFUSAL_VERSION_TOO_OLD);
    g_assert_cmpstr(tooOld->message, ==,
                    "protocol version 1 of the source is too old; this host speaks versions 2 to 3");

    offer->version = 3;
    inRange = vrmNegotiate(offer, &policy);
    g_assert_cmpint(inRange->status, ==, VRM_ANSWER_ACCEPTED);
    g_assert_cmpuint(inRange->version, ==, 3);
}

static void
testLimitsRefused(void)
{
    vrmHostPolicy policy;
    g_autoptr(vrmOffer) offer = makeOffer();
    g_autoptr(vrmAnswer) answer = NULL;
    g_autoptr(GString) buf = g_string_new(NULL);

    vrmHostPolicyInit(&policy);
    policy.maxChannels = 2;
    policy.chunkSizes = 0;
    g_assert_cmpint(vrmHostPolicyAllowChunkSize(&policy, 65536), ==, 0);
    g_assert_cmpint(vrmHostPolicyAllowChunkSize(&policy, 262144), ==, 0);
    g_assert_cmpint(vrmHostPolicyAllowChunkSize(&policy, 1000), ==, -1);
    policy.maxPinnedBytes = 64ull << 20;

    offer->channels = 8;
    offer->chunkSize = 1048576;
    offer->ringDepth = 16;
    answer = vrmNegotiate(offer, &policy);
    g_assert_cmpint(answer->status, ==, VRM_ANSWER_REFUSED);
    g_assert_cmpint(answer->reason, ==, VRM_REFUSAL_POLICY);
    g_assert_cmpuint(answer->nlimits, ==, 3);
    g_assert_cmpint(answer->limits[0].limit, ==, VRM_LIMIT_CHANNELS);
    g_assert_cmpuint(answer->limits[0].asked, ==, 8);
    g_assert_cmpstr(answer->limits[0].allowed, ==, "1-2");
    g_assert_cmpint(answer->limits[1].limit, ==, VRM_LIMIT_CHUNK_SIZE);
    g_assert_cmpuint(answer->limits[1].asked, ==, 1048576);
    g_assert_cmpstr(answer->limits[1].allowed, ==, "65536 262144");
    g_assert_cmpint(answer->limits[2].limit, ==, VRM_LIMIT_PINNED_BYTES);
    g_assert_cmpuint(answer->limits[2].asked, ==, vrmPinnedBytes(8, 16, 1048576));
    g_assert_cmpstr(answer->limits[2].allowed, ==, "0-67108864");
    g_assert_cmpstr(answer->message, ==,
                    "limit 'channels' exceeded: asked for 8, this host allows 1-2; "
                    "limit 'chunk-size' exceeded: asked for 1048576, this host allows 65536 262144; "
                    "limit 'pinned-bytes' exceeded: asked for 273678336, this host allows 0-67108864");

    vrmAnswerFormatBuf(buf, answer, 0);
    g_assert_cmpstr(buf->str, ==,
                    "<answer status=\"refused\" reason=\"policy\">\n"
                    "  <violation name=\"channels\" asked=\"8\" allowed=\"1-2\"/>\n"
                    "  <violation name=\"chunk-size\" asked=\"1048576\" allowed=\"65536 262144\"/>\n"
                    "  <violation name=\"pinned-bytes\" asked=\"273678336\" allowed=\"0-67108864\"/>\n"
                    "  <message>limit 'channels' exceeded: asked for 8, this host allows 1-2; "
                    "limit 'chunk-size' exceeded: asked for 1048576, this host allows 65536 262144; "
                    "limit 'pinned-bytes' exceeded: asked for 273678336, this host allows 0-67108864</message>\n"
                    "</answer>\n");
}

/* Each limit alone, just over and just at the limit. */
static void
testEachLimit(void)
{
    vrmHostPolicy policy;

    vrmHostPolicyInit(&policy);
    policy.maxChannels = 4;
    {
        g_autoptr(vrmOffer) offer = makeOffer();
        g_autoptr(vrmAnswer) at = NULL;
        g_autoptr(vrmAnswer) over = NULL;

        offer->channels = 4;
        at = vrmNegotiate(offer, &policy);
        g_assert_cmpint(at->status, ==, VRM_ANSWER_ACCEPTED);
        offer->channels = 5;
        over = vrmNegotiate(offer, &policy);
        g_assert_cmpint(over->status, ==, VRM_ANSWER_REFUSED);
        g_assert_cmpuint(over->nlimits, ==, 1);
        g_assert_cmpint(over->limits[0].limit, ==, VRM_LIMIT_CHANNELS);
    }

    vrmHostPolicyInit(&policy);
    policy.maxPinnedBytes = vrmPinnedBytes(4, 16, 1048576);
    {
        g_autoptr(vrmOffer) offer = makeOffer();
        g_autoptr(vrmAnswer) at = vrmNegotiate(offer, &policy);
        g_autoptr(vrmAnswer) over = NULL;

        g_assert_cmpint(at->status, ==, VRM_ANSWER_ACCEPTED);
        offer->ringDepth = 17;
        over = vrmNegotiate(offer, &policy);
        g_assert_cmpint(over->status, ==, VRM_ANSWER_REFUSED);
        g_assert_cmpint(over->limits[0].limit, ==, VRM_LIMIT_PINNED_BYTES);
        g_assert_cmpuint(over->limits[0].asked, ==, vrmPinnedBytes(4, 17, 1048576));
    }
}

static void
testLimitsClamped(void)
{
    vrmHostPolicy policy;
    g_autoptr(vrmOffer) offer = makeOffer();
    g_autoptr(vrmAnswer) answer = NULL;

    vrmHostPolicyInit(&policy);
    policy.maxRingDepth = 8;
    policy.maxBandwidth = 25000;
    /* the pinned bytes are computed on the clamped ring */
    policy.maxPinnedBytes = vrmPinnedBytes(4, 8, 1048576);
    offer->ringDepth = 64;
    offer->bandwidth = 0;   /* unlimited asks for the cap */

    answer = vrmNegotiate(offer, &policy);
    g_assert_cmpint(answer->status, ==, VRM_ANSWER_ACCEPTED);
    g_assert_cmpuint(answer->ringDepth, ==, 8);
    g_assert_cmpuint(answer->bandwidth, ==, 25000);
    g_assert_cmpuint(answer->nlimits, ==, 2);
    g_assert_cmpint(answer->limits[0].limit, ==, VRM_LIMIT_RING_DEPTH);
    g_assert_cmpuint(answer->limits[0].asked, ==, 64);
    g_assert_cmpuint(answer->limits[0].applied, ==, 8);
    g_assert_cmpint(answer->limits[1].limit, ==, VRM_LIMIT_BANDWIDTH);
    g_assert_cmpuint(answer->limits[1].asked, ==, 0);
    g_assert_cmpuint(answer->limits[1].applied, ==, 25000);
    g_assert_cmpint(vrmNegotiationCheckAnswer(offer, answer), ==, 0);
}

static void
testCheckAnswer(void)
{
    g_autoptr(vrmOffer) offer = makeOffer();
    g_autoptr(vrmAnswer) answer = vrmAnswerNew(VRM_ANSWER_ACCEPTED);
    g_autofree char *expected = NULL;

    offer->capabilities = VRM_CAP_WRITE_IMM;
    answer->version = offer->version;
    answer->capabilities = VRM_CAP_WRITE_IMM | VRM_CAP_PIN_ALL;
    answer->channels = offer->channels;
    answer->chunkSize = offer->chunkSize;
    answer->ringDepth = offer->ringDepth;

    g_assert_cmpint(vrmNegotiationCheckAnswer(offer, answer), ==, -1);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "the destination agreed to capabilities that were not offered: pin-all");

    answer->capabilities = VRM_CAP_WRITE_IMM | 0x100;  /* unknown: ignored */
    g_assert_cmpint(vrmNegotiationCheckAnswer(offer, answer), ==, 0);

    answer->channels = 2;
    g_assert_cmpint(vrmNegotiationCheckAnswer(offer, answer), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_PROTOCOL);
    answer->channels = offer->channels;

    answer->ringDepth = 32;
    g_assert_cmpint(vrmNegotiationCheckAnswer(offer, answer), ==, -1);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "the destination raised the ring depth from 16 to 32");
    answer->ringDepth = 16;

    answer->version = offer->version + 1;
    g_assert_cmpint(vrmNegotiationCheckAnswer(offer, answer), ==, -1);
    expected = g_strdup_printf("the destination answered with protocol version %u to an offer of version %u",
                               offer->version + 1, offer->version);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==, expected);
}

static void
testOfferFromParams(void)
{
    vrmHostPolicy policy;
    vrmMigrationParams params = { 0 };
    g_autoptr(vrmOffer) offer = NULL;
    g_autoptr(vrmOffer) refused = NULL;
    vrmToken zero = { { 0 } };

    vrmHostPolicyInit(&policy);
    policy.capabilities = VRM_CAP_WRITE_IMM;
    params.capsOn = VRM_CAP_PIN_ALL;
    refused = vrmOfferFromParams(&params, &policy, "192.0.2.10", 18515);
    g_assert_null(refused);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "this host does not support the capabilities asked for: pin-all");

    policy.capabilities = VRM_CAP_PIN_ALL;     /* no WRITE_WITH_IMM here */
    params.capsOn = VRM_CAP_PIN_ALL;
    params.channels = 4;
    params.device = (char *)"rxe0";
    offer = vrmOfferFromParams(&params, &policy, "192.0.2.10", 18515);
    params.device = NULL;
    g_assert_nonnull(offer);
    g_assert_cmpuint(offer->version, ==, VRM_PROTOCOL_VERSION);
    g_assert_cmpuint(offer->capabilities, ==, VRM_CAP_PIN_ALL);
    g_assert_cmpuint(offer->channels, ==, 4);
    g_assert_cmpuint(offer->chunkSize, ==, VRM_CHUNK_SIZE_DEFAULT);
    g_assert_cmpuint(offer->ringDepth, ==, VRM_RING_DEPTH_DEFAULT);
    g_assert_cmpstr(offer->device, ==, "rxe0");
    g_assert_false(vrmTokenEqual(&offer->token, &zero));
    g_clear_pointer(&offer, vrmOfferFree);

    /* small chunks get a deeper ring, unless a depth is asked for; the
     * host's limit still clamps it */
    params.chunkSize = 64 * 1024;
    offer = vrmOfferFromParams(&params, &policy, "192.0.2.10", 18515);
    g_assert_cmpuint(offer->ringDepth, ==, 16);
    g_clear_pointer(&offer, vrmOfferFree);
    params.ringDepth = 4;
    offer = vrmOfferFromParams(&params, &policy, "192.0.2.10", 18515);
    g_assert_cmpuint(offer->ringDepth, ==, 4);
    g_clear_pointer(&offer, vrmOfferFree);
    params.ringDepth = 0;
    policy.maxRingDepth = 8;
    offer = vrmOfferFromParams(&params, &policy, "192.0.2.10", 18515);
    g_assert_cmpuint(offer->ringDepth, ==, 8);
    policy.maxRingDepth = VRM_RING_DEPTH_MAX;
    params.chunkSize = 0;
    g_assert_cmpuint(vrmRingDepthDefault(64 * 1024), ==, 16);
    g_assert_cmpuint(vrmRingDepthDefault(128 * 1024), ==, 8);
    g_assert_cmpuint(vrmRingDepthDefault(256 * 1024), ==, 4);
    g_assert_cmpuint(vrmRingDepthDefault(VRM_CHUNK_SIZE_DEFAULT), ==, VRM_RING_DEPTH_DEFAULT);
    g_assert_cmpuint(vrmRingDepthDefault(VRM_CHUNK_SIZE_MAX), ==, VRM_RING_DEPTH_DEFAULT);

    policy.maxChannels = 2;
    refused = vrmOfferFromParams(&params, &policy, "192.0.2.10", 18515);
    g_assert_null(refused);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_POLICY);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "the migration parameters exceed this host's policy: limit 'channels' exceeded: asked for 4, this host allows 1-2");
}

static void
testTokens(void)
{
    vrmToken a;
    vrmToken b;
    char hex[VRM_TOKEN_HEX_LEN + 1];

    g_assert_true(vrmTokenParse("000102030405060708090a0b0c0d0e0f", &a));
    g_assert_cmpuint(a.bytes[15], ==, 15);
    vrmTokenFormat(&a, hex);
    g_assert_cmpstr(hex, ==, "000102030405060708090a0b0c0d0e0f");
    g_assert_false(vrmTokenParse("000102030405060708090A0B0C0D0E0F", &b));
    g_assert_false(vrmTokenParse("0001", &b));
    g_assert_cmpint(vrmTokenGenerate(&b), ==, 0);
    g_assert_false(vrmTokenEqual(&a, &b));
    b = a;
    g_assert_true(vrmTokenEqual(&a, &b));
}

static const vrmTestFunc testFuncs[] = {
    { "/negotiation/table", testTable },
    { "/negotiation/intersection", testIntersection },
    { "/negotiation/params", testParamsToCapabilities },
    { "/negotiation/versions", testVersions },
    { "/negotiation/limits-refused", testLimitsRefused },
    { "/negotiation/each-limit", testEachLimit },
    { "/negotiation/limits-clamped", testLimitsClamped },
    { "/negotiation/check-answer", testCheckAnswer },
    { "/negotiation/offer-from-params", testOfferFromParams },
    { "/negotiation/tokens", testTokens },
};

VRM_TEST_MAIN(vrmTestInit, testFuncs)
