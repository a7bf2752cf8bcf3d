/*
 * vrmcontrolfuzz.c: libFuzzer target for the control socket's requests
 * (issue 33)
 *
 * What virt-rdmad receives from a local client (virt-rdma, the hook, the
 * library), through the daemon's own code: the bytes as the reads deliver
 * them (vrmHelperRequestFeed: the length prefix, the cap, one request per
 * connection, no NUL), the document (vrmControlMessageParseString), then
 * what vrmHelperRequest and its handlers check before they act:
 *   job-prepare   vrmHelperPrepareCheck against the default configuration
 *                 and policy, and the intent's socket path;
 *   job-incoming  the migration element and the domain's socket path;
 *   job-query, job-cancel   what names the job;
 *   peer-check    the peer's host and address;
 *   host-info, job-list, job-events, reply   nothing to check (reply is
 *                 refused by the daemon).
 * Input: byte 0 is the size of each read (0: 4096, else 1..255 bytes), the
 * rest is what the client sends. Besides the sanitizers, it aborts if:
 *   - the framing refuses with anything but VRM_ERR_PROTOCOL, or takes a
 *     request of 0 bytes, over VRM_HELPER_REQUEST_MAX, with a NUL, or with
 *     bytes after it;
 *   - the parser reports VRM_ERR_INTERNAL (parser and control.rng disagree);
 *   - an accepted request does not format to a document that parses and
 *     formats to the same text;
 *   - an accepted request lacks what its handler reads (a valid UUID, the
 *     migration element, a job's name), or a domain's socket path leaves
 *     the run directory;
 *   - an intent passes the check with more channels than the host allows.
 * Build: CC=clang meson setup build-fuzz -Dfuzzing=true \
 *          -Db_sanitize=address,undefined -Db_lundef=false
 * Run:   tests/fuzz/run-fuzz.sh build-fuzz 600 vrmcontrolfuzz
 */
#include <config.h>

#include <stdint.h>

#define VRM_FUZZ_NAME "vrmcontrolfuzz"
#include "vrmfuzz.h"
#include "vrmhelperconf.h"
#include "vrmhelperconn.h"
#include "vrmhelperdpriv.h"
#include "vrmnegotiation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a read of the daemon's (vrmHelperConnReadable) */
#define VRM_FUZZ_READ 4096

static vrmHelperConfig *conf;
static vrmHostPolicy policy;


static void
fuzzRoundTrip(const vrmControlMessage *msg)
{
    g_autofree char *out = vrmControlMessageFormat(msg);

    vrmFuzzFixedPoint("control message", out, vrmFuzzControlReformat);
}

/* The domain's directory is under the run directory, whatever the UUID */
static void
fuzzDomain(const vrmControlMessage *msg)
{
    g_autofree char *path = NULL;
    g_autofree char *prefix = NULL;

    if (!msg->domainName || !*msg->domainName ||
        !g_uuid_string_is_valid(msg->domainUUID))
        vrmFuzzFail("an accepted request names no valid domain", msg->domainName,
                    msg->domainUUID);
    path = vrmHelperConfigDomainSocket(conf, msg->domainUUID);
    prefix = g_strconcat(conf->runDir, G_DIR_SEPARATOR_S, NULL);
    if (!g_str_has_prefix(path, prefix) || strstr(path, "/../") ||
        strstr(path, "//"))
        vrmFuzzFail("a domain's socket leaves the run directory", msg->domainUUID,
                    path);
}

static void
fuzzPrepare(const vrmControlMessage *msg)
{
    fuzzDomain(msg);
    vrmResetLastError();
    if (vrmHelperPrepareCheck(conf, &policy, msg->overrides) < 0) {
        if (vrmGetLastErrorCode() == VRM_ERR_INTERNAL)
            vrmFuzzFail("the intent check reports an internal error", NULL,
                        vrmGetLastErrorMessage());
        return;
    }
    if (msg->overrides && (msg->overrides->channels > conf->maxChannels ||
                           msg->overrides->channels > policy.maxChannels))
        vrmFuzzFail("an intent passes with more channels than the host allows",
                    msg->domainName, NULL);
}

static void
fuzzIncoming(const vrmControlMessage *msg)
{
    fuzzDomain(msg);
    if (!msg->migration)
        vrmFuzzFail("an accepted job-incoming has no migration element",
                    msg->domainName, NULL);
    if (msg->migration->params.channels > VRM_CHANNELS_MAX)
        vrmFuzzFail("an accepted job-incoming asks for too many channels",
                    msg->domainName, NULL);
    if (msg->migration->locator && (!msg->migration->locator->host ||
                                    !msg->migration->locator->address))
        vrmFuzzFail("an accepted locator lacks its host or address",
                    msg->domainName, NULL);
}

static void
fuzzRequest(const vrmControlMessage *msg)
{
    fuzzRoundTrip(msg);
    switch (msg->type) {
    case VRM_CONTROL_JOB_INCOMING:
        fuzzIncoming(msg);
        break;
    case VRM_CONTROL_JOB_PREPARE:
        fuzzPrepare(msg);
        break;
    case VRM_CONTROL_JOB_QUERY:
        /* vrmHelperFindJob: by intent, by id, else by name */
        if (!msg->hasIntent && !msg->hasId && !msg->domainName)
            vrmFuzzFail("an accepted job-query names no job", NULL, NULL);
        break;
    case VRM_CONTROL_JOB_CANCEL:
        if (!msg->hasIntent && !msg->hasId && !msg->domainName)
            vrmFuzzFail("an accepted job-cancel names no job", NULL, NULL);
        break;
    case VRM_CONTROL_PEER_CHECK:
        /* vrmHelperHandlePeerCheck builds a locator of both */
        if (!msg->peerHost || !*msg->peerHost || !msg->peerAddress ||
            !*msg->peerAddress)
            vrmFuzzFail("an accepted peer-check lacks its host or address",
                        msg->peerHost, msg->peerAddress);
        break;
    case VRM_CONTROL_HOST_INFO:
    case VRM_CONTROL_JOB_LIST:
    case VRM_CONTROL_JOB_EVENTS:
    case VRM_CONTROL_REPLY:
        break;
    case VRM_CONTROL_LAST:
        /* no default: -Wswitch names a type added without a case here */
        vrmFuzzFail("a message of no known type", NULL, NULL);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GByteArray) in = NULL;
    g_autoptr(vrmControlMessage) msg = NULL;
    const char *xml;
    guint32 len = 0;
    size_t chunk;
    size_t off;
    int rc = 0;

    if (!conf) {
        if (!g_getenv("VRM_SCHEMA_DIR"))
            g_setenv("VRM_SCHEMA_DIR", VRM_SOURCE_SCHEMA_DIR, TRUE);
        conf = vrmHelperConfigNew();
        vrmHelperConfigToPolicy(conf, &policy);
    }
    if (size < 1)
        return 0;
    chunk = data[0] ? data[0] : VRM_FUZZ_READ;
    data++;
    size--;

    /* vrmHelperConnReadable: read until a request is whole or refused */
    in = g_byte_array_new();
    vrmResetLastError();
    for (off = 0; off < size && rc == 0; off += chunk)
        rc = vrmHelperRequestFeed(in, data + off, MIN(chunk, size - off), &len);
    if (in->len > 4 + VRM_HELPER_REQUEST_MAX + 1)
        vrmFuzzFail("the request buffer grew past its cap", NULL, NULL);
    if (rc < 0 && vrmGetLastErrorCode() != VRM_ERR_PROTOCOL)
        vrmFuzzFail("a request was refused with a code other than protocol", NULL,
                    vrmGetLastErrorMessage());
    if (rc <= 0)
        return 0;
    if (len == 0 || len > VRM_HELPER_REQUEST_MAX || in->len != 4 + (gsize)len ||
        memchr(in->data + 4, '\0', len))
        vrmFuzzFail("the framing took a request it should refuse", NULL, NULL);

    /* vrmHelperRequest */
    g_byte_array_append(in, (const guint8 *)"", 1);
    xml = (const char *)in->data + 4;
    vrmResetLastError();
    if (!(msg = vrmControlMessageParseString(xml))) {
        vrmFuzzCheckInternal(xml);
        return 0;
    }
    fuzzRequest(msg);
    vrmResetLastError();
    return 0;
}
