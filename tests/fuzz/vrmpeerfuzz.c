/*
 * vrmpeerfuzz.c: libFuzzer target for the helpers' channel (issue 33)
 *
 * What one virt-rdmad receives from another once TLS is up, through the
 * daemon's own code: the bytes as the reads deliver them
 * (vrmPeerFrameAppend), the frames cut and parsed (vrmPeerFrameTake,
 * hence vrmPeerMessageParseString), then what each side checks before it
 * acts on a message:
 *   request  the source: vrmHelperSourceCheckRequest (type, version, the
 *            requester's address against the connection's);
 *   offer    the destination: vrmNegotiate against the default policy;
 *   answer   the source: vrmNegotiationCheckAnswer against an offer;
 *   result   both: the peer's error line through vrmLogSanitize.
 * Input: byte 0 is the size of each read (0: VRM_PEER_READ_CHUNK, else
 * 1..255 bytes), the rest is the decrypted stream: frames of a 4-byte
 * big-endian length and a document. Besides the sanitizers, it aborts if:
 *   - a refusal is anything but VRM_ERR_PROTOCOL, or the parser underneath
 *     reports VRM_ERR_INTERNAL (the parser and peer.rng disagree);
 *   - the input buffer grows past a frame and one read;
 *   - an accepted message does not format to a document that parses and
 *     formats to the same text, or fits no frame;
 *   - an accepted message breaks a documented limit (channels, ring, chunk,
 *     path length, error code), or an accepted answer or negotiation
 *     exceeds what was offered or what the policy allows;
 *   - a request passes the requester check from an address it does not
 *     name, or fails it from the address it names;
 *   - a sanitised error line keeps a control character.
 * Build: CC=clang meson setup build-fuzz -Dfuzzing=true \
 *          -Db_sanitize=address,undefined -Db_lundef=false
 * Run:   tests/fuzz/run-fuzz.sh build-fuzz 600 vrmpeerfuzz
 */
#include <config.h>

#include <stdint.h>

#include <arpa/inet.h>

#define VRM_FUZZ_NAME "vrmpeerfuzz"
#include "vrmfuzz.h"
#include "vrmhelperconf.h"
#include "vrmhelperdpriv.h"
#include "vrmhelperpeer.h"
#include "vrmlimits.h"
#include "vrmlog.h"
#include "vrmnegotiation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* what the source offered, for the answers (tests/xml/peerdata/offer.xml) */
#define VRM_FUZZ_OFFER_CHANNELS 9
#define VRM_FUZZ_OFFER_CHUNK (1024u * 1024)
#define VRM_FUZZ_OFFER_RING 4
#define VRM_FUZZ_OFFER_CAPS 0x3

/* two addresses no seed names */
static const char *const vrmFuzzStrangers[] = { "203.0.113.99", "2001:db8::99" };

static vrmHostPolicy policy;

static void
vrmFuzzCheckRefusal(const char *what)
{
    if (vrmGetLastErrorCode() != VRM_ERR_PROTOCOL)
        vrmFuzzFail("a frame was refused with a code other than protocol", what,
                    vrmGetLastErrorMessage());
}

/* @a and @b are the same numeric address */
static bool
vrmFuzzSameAddress(const char *a, const char *b)
{
    guint8 x[16] = { 0 };
    guint8 y[16] = { 0 };
    int family = strchr(b, ':') ? AF_INET6 : AF_INET;

    return inet_pton(family, a, x) == 1 && inet_pton(family, b, y) == 1 &&
        memcmp(x, y, sizeof(x)) == 0;
}

/* format -> parse -> format is a fixed point, and fits a frame */
static void
fuzzRoundTrip(const vrmPeerMessage *msg)
{
    g_autofree char *out = vrmPeerMessageFormat(msg);

    if (strlen(out) > VRM_PEER_FRAME_MAX)
        vrmFuzzFail("an accepted message formats to more than a frame", out, NULL);
    vrmFuzzFixedPoint("peer message", out, vrmFuzzPeerReformat);
}

/* A request or a reach check is taken only from the address its
 * requester names */
static void
fuzzRequesterBinding(const vrmPeerMessage *msg)
{
    size_t i;

    vrmResetLastError();
    if (vrmHelperSourceCheckRequest(msg, msg->requester->address) < 0 &&
        !(msg->version != VRM_PEER_VERSION && vrmGetLastErrorCode() == VRM_ERR_VERSION))
        vrmFuzzFail("a request is refused from the address it names",
                    msg->requester->address, vrmGetLastErrorMessage());
    for (i = 0; i < G_N_ELEMENTS(vrmFuzzStrangers); i++) {
        vrmResetLastError();
        if (vrmHelperSourceCheckRequest(msg, vrmFuzzStrangers[i]) == 0 &&
            !vrmFuzzSameAddress(msg->requester->address, vrmFuzzStrangers[i]))
            vrmFuzzFail("a request is taken from an address it does not name",
                        msg->requester->address, vrmFuzzStrangers[i]);
        if (vrmGetLastErrorCode() == VRM_ERR_INTERNAL)
            vrmFuzzFail("the requester check reports an internal error",
                        msg->requester->address, vrmGetLastErrorMessage());
    }
    /* never a NULL address: the peer's address is unknown only on the
     * client side, which takes no requests, but it must not crash */
    vrmResetLastError();
    if (vrmHelperSourceCheckRequest(msg, NULL) == 0)
        vrmFuzzFail("a request is taken from no address", msg->requester->address, NULL);
}

static void
fuzzRequest(const vrmPeerMessage *msg)
{
    if (!msg->domainName || !*msg->domainName ||
        !g_uuid_string_is_valid(msg->domainUUID) || !msg->requester ||
        !msg->requester->address ||
        msg->maxChannels < VRM_CHANNELS_MIN || msg->maxChannels > VRM_CHANNELS_MAX)
        vrmFuzzFail("an accepted request breaks a limit", msg->domainName,
                    msg->domainUUID);
    fuzzRequesterBinding(msg);
}

static void
fuzzReachCheck(const vrmPeerMessage *msg)
{
    if (!msg->requester || !msg->requester->address || !msg->requester->host ||
        msg->requester->port == 0 || msg->requester->port > 65535)
        vrmFuzzFail("an accepted reach check names no whole locator", NULL, NULL);
    fuzzRequesterBinding(msg);
}

/* a power of two whose bit the policy has */
static bool
vrmFuzzChunkAllowed(unsigned int size)
{
    if (size == 0 || (size & (size - 1)))
        return false;
    return policy.chunkSizes & (1u << g_bit_nth_lsf(size, -1));
}

static void
fuzzOffer(const vrmPeerMessage *msg)
{
    const vrmOffer *o = msg->offer;
    g_autoptr(vrmAnswer) answer = NULL;
    g_autoptr(vrmOffer) kept = NULL;

    if (!msg->socketPath || msg->socketPath[0] != '/' ||
        strlen(msg->socketPath) >= 4096 || strchr(msg->socketPath, '\n') || !o ||
        !o->hasToken || o->channels < VRM_CHANNELS_MIN ||
        o->channels > VRM_CHANNELS_MAX || o->ringDepth > VRM_RING_DEPTH_MAX ||
        o->chunkSize > VRM_CHUNK_SIZE_MAX || o->disks > VRM_DISK_CHANNELS_MAX)
        vrmFuzzFail("an accepted offer breaks a limit", msg->socketPath, NULL);
    /* what the destination keeps of it */
    kept = vrmOfferCopy(o);
    vrmOfferDropToken(kept);
    if (kept->hasToken)
        vrmFuzzFail("the kept offer still has its token", msg->socketPath, NULL);

    answer = vrmNegotiate(o, &policy);
    if (answer->status != VRM_ANSWER_ACCEPTED)
        return;
    if (answer->channels > policy.maxChannels || answer->channels > o->channels ||
        answer->channels < VRM_CHANNELS_MIN ||
        answer->ringDepth > policy.maxRingDepth || answer->ringDepth > o->ringDepth ||
        answer->chunkSize != o->chunkSize ||
        !vrmFuzzChunkAllowed(answer->chunkSize) ||
        (policy.maxBandwidth && (answer->bandwidth == 0 ||
                                 answer->bandwidth > policy.maxBandwidth)))
        vrmFuzzFail("an accepted negotiation exceeds the offer or the policy",
                    msg->socketPath, NULL);
    /* what the budget is computed from */
    (void)vrmPinnedBytes(answer->channels + o->disks, answer->ringDepth,
                         answer->chunkSize);
}

static void
fuzzAnswer(const vrmPeerMessage *msg)
{
    g_autoptr(vrmOffer) offer = vrmOfferNew();
    const vrmAnswer *a = msg->answer;

    if (!a)
        vrmFuzzFail("an accepted answer message has no answer", NULL, NULL);
    offer->version = 1;
    offer->capabilities = VRM_FUZZ_OFFER_CAPS;
    offer->channels = VRM_FUZZ_OFFER_CHANNELS;
    offer->chunkSize = VRM_FUZZ_OFFER_CHUNK;
    offer->ringDepth = VRM_FUZZ_OFFER_RING;
    vrmResetLastError();
    if (vrmNegotiationCheckAnswer(offer, a) < 0) {
        if (vrmGetLastErrorCode() == VRM_ERR_INTERNAL)
            vrmFuzzFail("the answer check reports an internal error", NULL,
                        vrmGetLastErrorMessage());
        return;
    }
    if (a->status != VRM_ANSWER_ACCEPTED || a->channels != offer->channels ||
        a->chunkSize != offer->chunkSize || a->ringDepth > offer->ringDepth ||
        (a->capabilities & ~offer->capabilities & vrmCapabilityKnownMask()))
        vrmFuzzFail("an answer beyond the offer passes the source's check", NULL, NULL);
}

static void
fuzzResult(const vrmPeerMessage *msg)
{
    g_autofree char *line = NULL;
    const char *p;

    if (msg->errorCode < VRM_ERR_OK || msg->errorCode >= VRM_ERR_LAST)
        vrmFuzzFail("a result carries an unknown error code", msg->errorMessage, NULL);
    if (msg->errorCode == VRM_ERR_OK)
        return;
    line = vrmLogSanitize(msg->errorMessage ? msg->errorMessage : "");
    for (p = line; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            vrmFuzzFail("a sanitised error line keeps a control character",
                        msg->errorMessage, line);
    }
}

static void
fuzzMessage(const vrmPeerMessage *msg)
{
    fuzzRoundTrip(msg);
    switch (msg->type) {
    case VRM_PEER_MIGRATION_REQUEST:
        fuzzRequest(msg);
        break;
    case VRM_PEER_MIGRATION_OFFER:
        fuzzOffer(msg);
        break;
    case VRM_PEER_MIGRATION_ANSWER:
        fuzzAnswer(msg);
        break;
    case VRM_PEER_MIGRATION_RESULT:
        fuzzResult(msg);
        break;
    case VRM_PEER_REACH_CHECK:
        fuzzReachCheck(msg);
        break;
    case VRM_PEER_LAST:
        /* no default: -Wswitch names a type added without a case here */
        vrmFuzzFail("a message of no known type", NULL, NULL);
    }
}

/* The frame at the head of @in, if whole and of an allowed length: to ask
 * the parser itself why it was refused */
static char *
fuzzPeekFrame(GByteArray *in)
{
    guint32 len;

    if (in->len < 4)
        return NULL;
    memcpy(&len, in->data, 4);
    len = GUINT32_FROM_BE(len);
    if (len == 0 || len > VRM_PEER_FRAME_MAX || in->len < 4 + (gsize)len ||
        memchr(in->data + 4, '\0', len))
        return NULL;
    return g_strndup((const char *)in->data + 4, len);
}

/* Every whole frame in @in, as vrmPeerConnDeliver takes them; false once
 * the channel would fail */
static bool
fuzzDeliver(GByteArray *in)
{
    for (;;) {
        g_autofree char *frame = fuzzPeekFrame(in);
        g_autoptr(vrmPeerMessage) msg = NULL;
        int rc = vrmPeerFrameTake(in, "fuzz", &msg);

        if (rc == 0)
            return true;
        if (rc < 0) {
            vrmFuzzCheckRefusal(frame);
            if (frame) {
                g_autoptr(vrmPeerMessage) again = NULL;

                vrmResetLastError();
                if ((again = vrmPeerMessageParseString(frame)))
                    vrmFuzzFail("a frame refused by the channel parses alone",
                                frame, NULL);
                vrmFuzzCheckInternal(frame);
            }
            return false;
        }
        if (!msg)
            vrmFuzzFail("a frame was taken without a message", frame, NULL);
        fuzzMessage(msg);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool initialized;
    g_autoptr(GByteArray) in = NULL;
    size_t chunk;
    size_t off;

    if (!initialized) {
        g_autoptr(vrmHelperConfig) conf = vrmHelperConfigNew();

        if (!g_getenv("VRM_SCHEMA_DIR"))
            g_setenv("VRM_SCHEMA_DIR", VRM_SOURCE_SCHEMA_DIR, TRUE);
        vrmHelperConfigToPolicy(conf, &policy);
        initialized = true;
    }
    if (size < 1)
        return 0;
    chunk = data[0] ? data[0] : VRM_PEER_READ_CHUNK;
    data++;
    size--;

    in = g_byte_array_new();
    vrmResetLastError();
    for (off = 0; off < size; off += chunk) {
        size_t n = MIN(chunk, size - off);

        if (vrmPeerFrameAppend(in, data + off, n, "fuzz") < 0) {
            vrmFuzzCheckRefusal(NULL);
            break;
        }
        if (in->len > 4 + VRM_PEER_FRAME_MAX + VRM_PEER_READ_CHUNK)
            vrmFuzzFail("the input buffer holds more than a frame and a read", NULL, NULL);
        if (!fuzzDeliver(in))
            break;
    }
    vrmResetLastError();
    return 0;
}
