/*
 * vrmmigrationdef.c: the <rdma:migration> element of a domain's <metadata>
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "vrmmigrationdef.h"
#include "vrmcapability.h"
#include "vrmerror.h"
#include "vrmi18n.h"

VRM_ENUM_IMPL(vrmAnswerStatus, VRM_ANSWER_LAST,
              "accepted",
              "refused",
);

VRM_ENUM_IMPL(vrmRefusalReason, VRM_REFUSAL_LAST,
              "version-too-old",
              "version-too-new",
              "policy",
              "no-device",
              "busy",
              "internal",
);

VRM_ENUM_IMPL(vrmLimit, VRM_LIMIT_LAST,
              "channels",
              "chunk-size",
              "ring-depth",
              "pinned-bytes",
              "bandwidth",
);

static const char *const noAttrs[] = { NULL };


/* ---- parameters ---- */

void
vrmMigrationParamsClear(vrmMigrationParams *params)
{
    if (!params)
        return;
    g_free(params->device);
    g_free(params->address);
    memset(params, 0, sizeof(*params));
}

void
vrmMigrationParamsFree(vrmMigrationParams *params)
{
    if (!params)
        return;
    vrmMigrationParamsClear(params);
    g_free(params);
}

void
vrmMigrationParamsCopy(vrmMigrationParams *dst, const vrmMigrationParams *src)
{
    *dst = *src;
    dst->device = g_strdup(src->device);
    dst->address = g_strdup(src->address);
}

void
vrmMigrationParamsMerge(vrmMigrationParams *dst,
                        const vrmMigrationParams *overrides)
{
    if (overrides->device) {
        g_free(dst->device);
        dst->device = g_strdup(overrides->device);
    }
    if (overrides->devicePort)
        dst->devicePort = overrides->devicePort;
    if (overrides->address) {
        g_free(dst->address);
        dst->address = g_strdup(overrides->address);
    }
    dst->capsOn = (dst->capsOn & ~overrides->capsOff) | overrides->capsOn;
    dst->capsOff = (dst->capsOff & ~overrides->capsOn) | overrides->capsOff;
    if (overrides->chunkSize)
        dst->chunkSize = overrides->chunkSize;
    if (overrides->channels)
        dst->channels = overrides->channels;
    if (overrides->ringDepth)
        dst->ringDepth = overrides->ringDepth;
    if (overrides->hasBandwidth) {
        dst->hasBandwidth = true;
        dst->bandwidth = overrides->bandwidth;
    }
}

bool
vrmMigrationParamsIsEmpty(const vrmMigrationParams *params)
{
    return !params->device && !params->devicePort && !params->address &&
        !params->capsOn && !params->capsOff && !params->chunkSize &&
        !params->channels && !params->ringDepth && !params->hasBandwidth;
}

static int
vrmMigrationParamsParseTransport(xmlNodePtr node, vrmMigrationParams *params)
{
    static const char *const attrs[] = { "device", "port", "address", NULL };

    if (vrmXMLCheckLeaf(node, attrs) < 0 ||
        vrmXMLPropName(node, "device", false, &params->device) < 0 ||
        vrmXMLPropUInt(node, "port", false, VRM_DEVICE_PORT_MIN,
                       VRM_DEVICE_PORT_MAX, &params->devicePort) < 0 ||
        vrmXMLPropAddress(node, "address", false, &params->address) < 0)
        return -1;
    return 0;
}

int
vrmMigrationParamsParseNode(xmlNodePtr node, vrmMigrationParams *params,
                            const char *const *extra)
{
    static const char *const paramElements[] = {
        "transport", "chunk", "channels", "ring", "bandwidth",
    };
    static const char *const enabledAttr[] = { "enabled", NULL };
    static const char *const sizeAttr[] = { "size", NULL };
    static const char *const countAttr[] = { "count", NULL };
    static const char *const depthAttr[] = { "depth", NULL };
    static const char *const maxAttr[] = { "max", NULL };
    g_autoptr(GPtrArray) allowed = g_ptr_array_new();
    xmlNodePtr child;
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(paramElements); i++)
        g_ptr_array_add(allowed, (gpointer)paramElements[i]);
    for (i = 0; i < VRM_CAPABILITY_LAST; i++) {
        if (vrmCapabilityGetInfo(i)->scope == VRM_CAPABILITY_SCOPE_MIGRATION)
            g_ptr_array_add(allowed, (gpointer)vrmCapabilityTypeToString(i));
    }
    for (i = 0; extra && extra[i]; i++)
        g_ptr_array_add(allowed, (gpointer)extra[i]);
    g_ptr_array_add(allowed, NULL);

    if (vrmXMLCheckChildren(node, (const char *const *)allowed->pdata) < 0)
        return -1;

    if ((child = vrmXMLChild(node, "transport")) &&
        vrmMigrationParamsParseTransport(child, params) < 0)
        return -1;

    for (i = 0; i < VRM_CAPABILITY_LAST; i++) {
        const vrmCapabilityInfo *info = vrmCapabilityGetInfo(i);
        bool enabled = true;

        if (info->scope != VRM_CAPABILITY_SCOPE_MIGRATION ||
            !(child = vrmXMLChild(node, vrmCapabilityTypeToString(i))))
            continue;
        if (vrmXMLCheckLeaf(child, enabledAttr) < 0 ||
            vrmXMLPropYesNo(child, "enabled", false, &enabled) < 0)
            return -1;
        if (enabled)
            params->capsOn |= info->bit;
        else
            params->capsOff |= info->bit;
    }

    if ((child = vrmXMLChild(node, "chunk")) &&
        (vrmXMLCheckLeaf(child, sizeAttr) < 0 ||
         vrmXMLPropChunkSize(child, "size", true, &params->chunkSize) < 0))
        return -1;

    if ((child = vrmXMLChild(node, "channels")) &&
        (vrmXMLCheckLeaf(child, countAttr) < 0 ||
         vrmXMLPropUInt(child, "count", true, VRM_CHANNELS_MIN,
                        VRM_CHANNELS_MAX, &params->channels) < 0))
        return -1;

    if ((child = vrmXMLChild(node, "ring")) &&
        (vrmXMLCheckLeaf(child, depthAttr) < 0 ||
         vrmXMLPropUInt(child, "depth", true, VRM_RING_DEPTH_MIN,
                        VRM_RING_DEPTH_MAX, &params->ringDepth) < 0))
        return -1;

    if ((child = vrmXMLChild(node, "bandwidth"))) {
        if (vrmXMLCheckLeaf(child, maxAttr) < 0 ||
            vrmXMLPropUInt(child, "max", true, 0, G_MAXUINT32,
                           &params->bandwidth) < 0)
            return -1;
        params->hasBandwidth = true;
    }
    return 0;
}

void
vrmMigrationParamsFormatBuf(GString *buf, const vrmMigrationParams *params,
                            unsigned int level)
{
    size_t i;

    if (params->device || params->devicePort || params->address) {
        vrmXMLIndent(buf, level);
        g_string_append(buf, "<transport");
        if (params->device)
            vrmXMLAttrStr(buf, "device", params->device);
        if (params->devicePort)
            vrmXMLAttrUInt(buf, "port", params->devicePort);
        if (params->address)
            vrmXMLAttrStr(buf, "address", params->address);
        g_string_append(buf, "/>\n");
    }
    for (i = 0; i < VRM_CAPABILITY_LAST; i++) {
        const vrmCapabilityInfo *info = vrmCapabilityGetInfo(i);

        if (info->scope != VRM_CAPABILITY_SCOPE_MIGRATION)
            continue;
        if (params->capsOn & info->bit) {
            vrmXMLIndent(buf, level);
            g_string_append_printf(buf, "<%s/>\n", vrmCapabilityTypeToString(i));
        } else if (params->capsOff & info->bit) {
            vrmXMLIndent(buf, level);
            g_string_append_printf(buf, "<%s enabled=\"no\"/>\n",
                                   vrmCapabilityTypeToString(i));
        }
    }
    if (params->chunkSize) {
        vrmXMLIndent(buf, level);
        g_string_append_printf(buf, "<chunk size=\"%u\"/>\n", params->chunkSize);
    }
    if (params->channels) {
        vrmXMLIndent(buf, level);
        g_string_append_printf(buf, "<channels count=\"%u\"/>\n",
                               params->channels);
    }
    if (params->ringDepth) {
        vrmXMLIndent(buf, level);
        g_string_append_printf(buf, "<ring depth=\"%u\"/>\n", params->ringDepth);
    }
    if (params->hasBandwidth) {
        vrmXMLIndent(buf, level);
        g_string_append_printf(buf, "<bandwidth max=\"%u\"/>\n",
                               params->bandwidth);
    }
}




/* ---- locator ---- */

vrmLocator *
vrmLocatorNew(const char *host, const char *address, unsigned int port)
{
    vrmLocator *locator = g_new0(vrmLocator, 1);

    locator->host = g_strdup(host);
    locator->address = g_strdup(address);
    locator->port = port;
    return locator;
}

void
vrmLocatorFree(vrmLocator *locator)
{
    if (!locator)
        return;
    g_free(locator->host);
    g_free(locator->address);
    g_free(locator);
}

vrmLocator *
vrmLocatorCopy(const vrmLocator *locator)
{
    if (!locator)
        return NULL;
    return vrmLocatorNew(locator->host, locator->address, locator->port);
}

bool
vrmLocatorEqual(const vrmLocator *a, const vrmLocator *b)
{
    if (!a || !b)
        return a == b;
    return g_strcmp0(a->host, b->host) == 0 &&
        g_strcmp0(a->address, b->address) == 0 && a->port == b->port;
}

vrmLocator *
vrmLocatorParseNode(xmlNodePtr node)
{
    static const char *const attrs[] = { "host", "address", "port", NULL };
    g_autoptr(vrmLocator) locator = g_new0(vrmLocator, 1);

    if (vrmXMLCheckLeaf(node, attrs) < 0 ||
        vrmXMLPropHostName(node, "host", true, &locator->host) < 0 ||
        vrmXMLPropAddress(node, "address", true, &locator->address) < 0 ||
        vrmXMLPropUInt(node, "port", true, VRM_CM_PORT_MIN, VRM_CM_PORT_MAX,
                       &locator->port) < 0)
        return NULL;
    return g_steal_pointer(&locator);
}

void
vrmLocatorFormatBuf(GString *buf, const vrmLocator *locator, unsigned int level)
{
    vrmXMLIndent(buf, level);
    g_string_append(buf, "<locator");
    vrmXMLAttrStr(buf, "host", locator->host ? locator->host : "");
    vrmXMLAttrStr(buf, "address", locator->address ? locator->address : "");
    vrmXMLAttrUInt(buf, "port", locator->port);
    g_string_append(buf, "/>\n");
}


/* ---- offer ---- */

vrmOffer *
vrmOfferNew(void)
{
    return g_new0(vrmOffer, 1);
}

void
vrmOfferFree(vrmOffer *offer)
{
    if (!offer)
        return;
    vrmTokenClear(&offer->token);
    g_free(offer->address);
    g_free(offer->device);
    g_free(offer);
}

vrmOffer *
vrmOfferCopy(const vrmOffer *offer)
{
    vrmOffer *ret;

    if (!offer)
        return NULL;
    ret = g_new0(vrmOffer, 1);
    *ret = *offer;
    ret->address = g_strdup(offer->address);
    ret->device = g_strdup(offer->device);
    return ret;
}

/* <channels count/>, <chunk size/>, <ring depth/>, <bandwidth max/>: required. */
static int
vrmParseSizes(xmlNodePtr node, unsigned int *channels, unsigned int *chunkSize,
              unsigned int *ringDepth, unsigned int *bandwidth)
{
    static const char *const sizeAttr[] = { "size", NULL };
    static const char *const countAttr[] = { "count", NULL };
    static const char *const depthAttr[] = { "depth", NULL };
    static const char *const maxAttr[] = { "max", NULL };
    xmlNodePtr child;

    if (!(child = vrmXMLRequiredChild(node, "channels")) ||
        vrmXMLCheckLeaf(child, countAttr) < 0 ||
        vrmXMLPropUInt(child, "count", true, VRM_CHANNELS_MIN,
                       VRM_CHANNELS_MAX, channels) < 0)
        return -1;
    if (!(child = vrmXMLRequiredChild(node, "chunk")) ||
        vrmXMLCheckLeaf(child, sizeAttr) < 0 ||
        vrmXMLPropChunkSize(child, "size", true, chunkSize) < 0)
        return -1;
    if (!(child = vrmXMLRequiredChild(node, "ring")) ||
        vrmXMLCheckLeaf(child, depthAttr) < 0 ||
        vrmXMLPropUInt(child, "depth", true, VRM_RING_DEPTH_MIN,
                       VRM_RING_DEPTH_MAX, ringDepth) < 0)
        return -1;
    if (!(child = vrmXMLRequiredChild(node, "bandwidth")) ||
        vrmXMLCheckLeaf(child, maxAttr) < 0 ||
        vrmXMLPropUInt(child, "max", true, 0, G_MAXUINT32, bandwidth) < 0)
        return -1;
    return 0;
}

static void
vrmFormatSizes(GString *buf, unsigned int level, unsigned int channels,
               unsigned int chunkSize, unsigned int ringDepth,
               unsigned int bandwidth)
{
    vrmXMLIndent(buf, level);
    g_string_append_printf(buf, "<channels count=\"%u\"/>\n", channels);
    vrmXMLIndent(buf, level);
    g_string_append_printf(buf, "<chunk size=\"%u\"/>\n", chunkSize);
    vrmXMLIndent(buf, level);
    g_string_append_printf(buf, "<ring depth=\"%u\"/>\n", ringDepth);
    vrmXMLIndent(buf, level);
    g_string_append_printf(buf, "<bandwidth max=\"%u\"/>\n", bandwidth);
}

vrmOffer *
vrmOfferParseNode(xmlNodePtr node)
{
    static const char *const attrs[] = {
        "version", "capabilities", "token", NULL
    };
    static const char *const children[] = {
        "endpoint", "channels", "chunk", "ring", "bandwidth", "disks", NULL
    };
    static const char *const endpointAttrs[] = {
        "address", "port", "device", "device-port", NULL
    };
    static const char *const countAttr[] = { "count", NULL };
    g_autoptr(vrmOffer) offer = vrmOfferNew();
    xmlNodePtr endpoint, disks;
    int rc;

    if (vrmXMLCheckAttributes(node, attrs) < 0 ||
        vrmXMLCheckChildren(node, children) < 0 ||
        vrmXMLPropUInt(node, "version", true, 1, G_MAXUINT32,
                       &offer->version) < 0 ||
        vrmXMLPropHex32(node, "capabilities", true, &offer->capabilities) < 0 ||
        (rc = vrmXMLPropHexBytes(node, "token", false, offer->token.bytes,
                                 VRM_TOKEN_BYTES)) < 0)
        return NULL;
    offer->hasToken = rc == 1;

    if (!(endpoint = vrmXMLRequiredChild(node, "endpoint")) ||
        vrmXMLCheckLeaf(endpoint, endpointAttrs) < 0 ||
        vrmXMLPropAddress(endpoint, "address", true, &offer->address) < 0 ||
        vrmXMLPropUInt(endpoint, "port", true, VRM_CM_PORT_MIN,
                       VRM_CM_PORT_MAX, &offer->port) < 0 ||
        vrmXMLPropName(endpoint, "device", false, &offer->device) < 0 ||
        vrmXMLPropUInt(endpoint, "device-port", false, VRM_DEVICE_PORT_MIN,
                       VRM_DEVICE_PORT_MAX, &offer->devicePort) < 0)
        return NULL;

    if (vrmParseSizes(node, &offer->channels, &offer->chunkSize,
                      &offer->ringDepth, &offer->bandwidth) < 0)
        return NULL;
    /* optional: written only when the domain has disks to copy, so that a
     * helper of before it reads every other offer */
    if ((disks = vrmXMLChild(node, "disks")) &&
        (vrmXMLCheckLeaf(disks, countAttr) < 0 ||
         vrmXMLPropUInt(disks, "count", true, 1, VRM_DISK_CHANNELS_MAX,
                        &offer->disks) < 0))
        return NULL;
    return g_steal_pointer(&offer);
}

void
vrmOfferFormatBuf(GString *buf, const vrmOffer *offer, unsigned int level)
{
    vrmXMLIndent(buf, level);
    g_string_append_printf(buf, "<offer version=\"%u\" capabilities=\"0x%08x\"",
                           offer->version, offer->capabilities);
    if (offer->hasToken) {
        char token[VRM_TOKEN_HEX_LEN + 1];

        vrmTokenFormat(&offer->token, token);
        vrmXMLAttrStr(buf, "token", token);
        memset(token, 0, sizeof(token));
    }
    g_string_append(buf, ">\n");
    vrmXMLIndent(buf, level + 1);
    g_string_append(buf, "<endpoint");
    vrmXMLAttrStr(buf, "address", offer->address ? offer->address : "");
    vrmXMLAttrUInt(buf, "port", offer->port);
    if (offer->device)
        vrmXMLAttrStr(buf, "device", offer->device);
    if (offer->devicePort)
        vrmXMLAttrUInt(buf, "device-port", offer->devicePort);
    g_string_append(buf, "/>\n");
    vrmFormatSizes(buf, level + 1, offer->channels, offer->chunkSize,
                   offer->ringDepth, offer->bandwidth);
    if (offer->disks) {
        vrmXMLIndent(buf, level + 1);
        g_string_append_printf(buf, "<disks count=\"%u\"/>\n", offer->disks);
    }
    vrmXMLIndent(buf, level);
    g_string_append(buf, "</offer>\n");
}

void
vrmOfferDropToken(vrmOffer *offer)
{
    if (!offer)
        return;
    vrmTokenClear(&offer->token);
    offer->hasToken = false;
}

char *
vrmOfferFormat(const vrmOffer *offer)
{
    GString *buf = g_string_new(NULL);

    vrmOfferFormatBuf(buf, offer, 0);
    return g_string_free(buf, FALSE);
}


/* ---- answer ---- */

vrmAnswer *
vrmAnswerNew(vrmAnswerStatus status)
{
    vrmAnswer *answer = g_new0(vrmAnswer, 1);

    answer->status = status;
    return answer;
}

void
vrmAnswerFree(vrmAnswer *answer)
{
    size_t i;

    if (!answer)
        return;
    for (i = 0; i < answer->nlimits; i++)
        g_free(answer->limits[i].allowed);
    g_free(answer->limits);
    g_free(answer->message);
    g_free(answer);
}

vrmAnswer *
vrmAnswerCopy(const vrmAnswer *answer)
{
    vrmAnswer *ret;
    size_t i;

    if (!answer)
        return NULL;
    ret = g_new0(vrmAnswer, 1);
    *ret = *answer;
    ret->message = g_strdup(answer->message);
    ret->limits = g_new0(vrmLimitEntry, answer->nlimits ? answer->nlimits : 1);
    for (i = 0; i < answer->nlimits; i++) {
        ret->limits[i] = answer->limits[i];
        ret->limits[i].allowed = g_strdup(answer->limits[i].allowed);
    }
    return ret;
}

void
vrmAnswerAddLimit(vrmAnswer *answer, vrmLimit limit,
                  unsigned long long asked, unsigned long long applied,
                  const char *allowed)
{
    vrmLimitEntry *entry;

    answer->limits = g_renew(vrmLimitEntry, answer->limits, answer->nlimits + 1);
    entry = &answer->limits[answer->nlimits++];
    entry->limit = limit;
    entry->asked = asked;
    entry->applied = applied;
    entry->allowed = g_strdup(allowed);
}

static int
vrmAnswerForbidAttr(xmlNodePtr node, const char *name, const char *status)
{
    g_autofree char *elem = NULL;
    xmlChar *value = xmlGetNoNsProp(node, BAD_CAST name);

    if (!value)
        return 0;
    xmlFree(value);
    elem = vrmXMLNodeName(node);
    vrmReportError(VRM_ERR_XML,
                   _("attribute '%1$s' of element '%2$s' is not allowed when 'status' is '%3$s'"),
                   name, elem, status);
    return -1;
}

static int
vrmAnswerParseLimits(xmlNodePtr node, vrmAnswer *answer, const char *elemName)
{
    static const char *const limitAttrs[] = { "name", "asked", "applied", NULL };
    static const char *const violationAttrs[] = { "name", "asked", "allowed", NULL };
    bool accepted = answer->status == VRM_ANSWER_ACCEPTED;
    guint32 seen = 0;
    xmlNodePtr cur;

    for (cur = node->children; cur; cur = cur->next) {
        unsigned long long asked = 0;
        unsigned long long applied = 0;
        g_autofree char *allowed = NULL;
        int limit;

        if (!vrmXMLIsOurChild(cur, elemName))
            continue;
        if (vrmXMLCheckLeaf(cur, accepted ? limitAttrs : violationAttrs) < 0 ||
            vrmXMLPropEnum(cur, "name", true, vrmLimitTypeFromString,
                           vrmLimitTypeToString, VRM_LIMIT_LAST, &limit) < 0 ||
            vrmXMLPropULLong(cur, "asked", true, 0, G_MAXUINT64, &asked) < 0)
            return -1;
        if (accepted) {
            if (vrmXMLPropULLong(cur, "applied", true, 0, G_MAXUINT64,
                                 &applied) < 0)
                return -1;
        } else {
            if (vrmXMLPropString(cur, "allowed", true, &allowed) < 0)
                return -1;
        }
        if (seen & (1u << limit)) {
            vrmReportError(VRM_ERR_XML,
                           _("element 'answer' lists the limit '%1$s' more than once"),
                           vrmLimitTypeToString(limit));
            return -1;
        }
        seen |= 1u << limit;
        vrmAnswerAddLimit(answer, limit, asked, applied, allowed);
    }
    return 0;
}

vrmAnswer *
vrmAnswerParseNode(xmlNodePtr node)
{
    static const char *const attrs[] = {
        "status", "version", "capabilities", "reason", NULL
    };
    static const char *const acceptedChildren[] = {
        "channels", "chunk", "ring", "bandwidth", "limit*", NULL
    };
    static const char *const refusedChildren[] = {
        "violation*", "message", NULL
    };
    g_autoptr(vrmAnswer) answer = NULL;
    int status;
    xmlNodePtr child;

    if (vrmXMLCheckAttributes(node, attrs) < 0 ||
        vrmXMLPropEnum(node, "status", true, vrmAnswerStatusTypeFromString,
                       vrmAnswerStatusTypeToString, VRM_ANSWER_LAST,
                       &status) < 0)
        return NULL;
    answer = vrmAnswerNew(status);

    if (status == VRM_ANSWER_ACCEPTED) {
        if (vrmAnswerForbidAttr(node, "reason", "accepted") < 0 ||
            vrmXMLCheckChildren(node, acceptedChildren) < 0 ||
            vrmXMLPropUInt(node, "version", true, 1, G_MAXUINT32,
                           &answer->version) < 0 ||
            vrmXMLPropHex32(node, "capabilities", true,
                            &answer->capabilities) < 0 ||
            vrmParseSizes(node, &answer->channels, &answer->chunkSize,
                          &answer->ringDepth, &answer->bandwidth) < 0 ||
            vrmAnswerParseLimits(node, answer, "limit") < 0)
            return NULL;
    } else {
        int reason;

        if (vrmAnswerForbidAttr(node, "version", "refused") < 0 ||
            vrmAnswerForbidAttr(node, "capabilities", "refused") < 0 ||
            vrmXMLCheckChildren(node, refusedChildren) < 0 ||
            vrmXMLPropEnum(node, "reason", true, vrmRefusalReasonTypeFromString,
                           vrmRefusalReasonTypeToString, VRM_REFUSAL_LAST,
                           &reason) < 0 ||
            vrmAnswerParseLimits(node, answer, "violation") < 0)
            return NULL;
        answer->reason = reason;
        if ((child = vrmXMLChild(node, "message")) &&
            (vrmXMLCheckAttributes(child, noAttrs) < 0 ||
             vrmXMLTextContent(child, &answer->message) < 0))
            return NULL;
    }
    return g_steal_pointer(&answer);
}

void
vrmAnswerFormatBuf(GString *buf, const vrmAnswer *answer, unsigned int level)
{
    size_t i;

    vrmXMLIndent(buf, level);
    g_string_append_printf(buf, "<answer status=\"%s\"",
                           vrmAnswerStatusTypeToString(answer->status));
    if (answer->status == VRM_ANSWER_ACCEPTED) {
        g_string_append_printf(buf, " version=\"%u\" capabilities=\"0x%08x\">\n",
                               answer->version, answer->capabilities);
        vrmFormatSizes(buf, level + 1, answer->channels, answer->chunkSize,
                       answer->ringDepth, answer->bandwidth);
        for (i = 0; i < answer->nlimits; i++) {
            vrmXMLIndent(buf, level + 1);
            g_string_append_printf(buf,
                                   "<limit name=\"%s\" asked=\"%llu\" applied=\"%llu\"/>\n",
                                   vrmLimitTypeToString(answer->limits[i].limit),
                                   answer->limits[i].asked,
                                   answer->limits[i].applied);
        }
    } else {
        g_string_append_printf(buf, " reason=\"%s\"",
                               vrmRefusalReasonTypeToString(answer->reason));
        if (answer->nlimits == 0 && !answer->message) {
            g_string_append(buf, "/>\n");
            return;
        }
        g_string_append(buf, ">\n");
        for (i = 0; i < answer->nlimits; i++) {
            vrmXMLIndent(buf, level + 1);
            g_string_append_printf(buf, "<violation name=\"%s\" asked=\"%llu\"",
                                   vrmLimitTypeToString(answer->limits[i].limit),
                                   answer->limits[i].asked);
            vrmXMLAttrStr(buf, "allowed", answer->limits[i].allowed ?
                          answer->limits[i].allowed : "");
            g_string_append(buf, "/>\n");
        }
        if (answer->message) {
            vrmXMLIndent(buf, level + 1);
            g_string_append(buf, "<message>");
            vrmXMLEscapeText(buf, answer->message);
            g_string_append(buf, "</message>\n");
        }
    }
    vrmXMLIndent(buf, level);
    g_string_append(buf, "</answer>\n");
}

char *
vrmAnswerFormat(const vrmAnswer *answer)
{
    GString *buf = g_string_new(NULL);

    vrmAnswerFormatBuf(buf, answer, 0);
    return g_string_free(buf, FALSE);
}


/* ---- the whole element ---- */

vrmMigrationDef *
vrmMigrationDefNew(void)
{
    return g_new0(vrmMigrationDef, 1);
}

void
vrmMigrationDefFree(vrmMigrationDef *def)
{
    if (!def)
        return;
    vrmMigrationParamsClear(&def->params);
    vrmLocatorFree(def->locator);
    vrmOfferFree(def->offer);
    vrmAnswerFree(def->answer);
    g_free(def);
}

vrmMigrationDef *
vrmMigrationDefCopy(const vrmMigrationDef *def)
{
    vrmMigrationDef *ret = vrmMigrationDefNew();

    ret->disabled = def->disabled;
    vrmMigrationParamsCopy(&ret->params, &def->params);
    ret->locator = vrmLocatorCopy(def->locator);
    ret->offer = vrmOfferCopy(def->offer);
    ret->answer = vrmAnswerCopy(def->answer);
    return ret;
}

vrmMigrationDef *
vrmMigrationDefParseXML(xmlXPathContextPtr ctxt)
{
    static const char *const extra[] = { "locator", "offer", "answer", NULL };
    static const char *const attrs[] = { "enabled", NULL };
    g_autoptr(vrmMigrationDef) def = vrmMigrationDefNew();
    xmlNodePtr node = ctxt->node;
    xmlNodePtr child;
    bool enabled = true;

    if (vrmXMLCheckAttributes(node, attrs) < 0 ||
        vrmXMLPropYesNo(node, "enabled", false, &enabled) < 0 ||
        vrmMigrationParamsParseNode(node, &def->params, extra) < 0)
        return NULL;
    def->disabled = !enabled;
    if ((child = vrmXMLChild(node, "locator")) &&
        !(def->locator = vrmLocatorParseNode(child)))
        return NULL;
    if ((child = vrmXMLChild(node, "offer")) &&
        !(def->offer = vrmOfferParseNode(child)))
        return NULL;
    if ((child = vrmXMLChild(node, "answer")) &&
        !(def->answer = vrmAnswerParseNode(child)))
        return NULL;
    return g_steal_pointer(&def);
}

vrmMigrationDef *
vrmMigrationDefParseNode(xmlDocPtr doc, xmlNodePtr root)
{
    g_autoptr(xmlXPathContext) ctxt = NULL;

    if (!vrmXMLIsElement(root, VRM_XML_NS_MIGRATION, "migration")) {
        g_autofree char *name = vrmXMLNodeName(root);

        if (root && root->ns && root->ns->href)
            vrmReportError(VRM_ERR_XML,
                           _("expected element 'migration' in namespace '%1$s', found element '%2$s' in namespace '%3$s'"),
                           VRM_XML_NS_MIGRATION, name,
                           (const char *)root->ns->href);
        else
            vrmReportError(VRM_ERR_XML,
                           _("expected element 'migration' in namespace '%1$s', found element '%2$s' in no namespace"),
                           VRM_XML_NS_MIGRATION, name);
        return NULL;
    }
    if (!(ctxt = vrmXMLNewContext(doc)))
        return NULL;
    ctxt->node = root;
    return vrmMigrationDefParseXML(ctxt);
}

static void *
vrmMigrationDefParseRoot(xmlDocPtr doc, xmlNodePtr root)
{
    return vrmMigrationDefParseNode(doc, root);
}

static vrmMigrationDef *
vrmMigrationDefParseDoc(xmlDocPtr doc, const char *what)
{
    return vrmXMLParseValidated(doc, VRM_XML_SCHEMA_MIGRATION, what,
                                vrmMigrationDefParseRoot,
                                (GDestroyNotify)vrmMigrationDefFree);
}

vrmMigrationDef *
vrmMigrationDefParseString(const char *xml)
{
    g_autoptr(xmlDoc) doc = NULL;
    const char *what = _("migration XML");

    if (!(doc = vrmXMLParseMemory(xml, xml ? strlen(xml) : 0, what, false)))
        return NULL;
    return vrmMigrationDefParseDoc(doc, what);
}

vrmMigrationDef *
vrmMigrationDefParseMetadata(const char *xml)
{
    g_autoptr(xmlDoc) doc = NULL;
    const char *what = _("migration metadata");
    xmlNodePtr root;

    if (!(doc = vrmXMLParseMemory(xml, xml ? strlen(xml) : 0, what, false)))
        return NULL;
    root = xmlDocGetRootElement(doc);
    /* virDomainGetMetadata() gives the element without its namespace */
    if (root && !root->ns && xmlStrEqual(root->name, BAD_CAST "migration"))
        xmlSetNs(root, xmlNewNs(root, BAD_CAST VRM_XML_NS_MIGRATION,
                                BAD_CAST VRM_XML_NS_PREFIX));
    return vrmMigrationDefParseDoc(doc, what);
}

vrmMigrationDef *
vrmMigrationDefParseFile(const char *path)
{
    g_autoptr(xmlDoc) doc = NULL;
    const char *what = _("migration XML");

    if (!(doc = vrmXMLParseFile(path, what)))
        return NULL;
    return vrmMigrationDefParseDoc(doc, what);
}

vrmMigrationDef *
vrmMigrationDefParseElement(xmlNodePtr node)
{
    g_autoptr(xmlDoc) doc = xmlNewDoc(BAD_CAST "1.0");
    xmlNodePtr copy;

    if (!doc || !(copy = xmlDocCopyNode(node, doc, 1))) {
        vrmReportError(VRM_ERR_INTERNAL,
                       _("out of memory copying the migration element"));
        return NULL;
    }
    xmlDocSetRootElement(doc, copy);
    xmlReconciliateNs(doc, copy);
    return vrmMigrationDefParseDoc(doc, _("the migration element"));
}

/* @prefix NULL: no prefix and no namespace (virDomainSetMetadata()'s form) */
static void
vrmMigrationDefFormatElement(GString *buf, const vrmMigrationDef *def,
                             const char *prefix, unsigned int level)
{
    g_autofree char *name = prefix ? g_strdup_printf("%s:migration", prefix) :
        g_strdup("migration");
    size_t start;

    vrmXMLIndent(buf, level);
    g_string_append_printf(buf, "<%s", name);
    if (prefix)
        g_string_append_printf(buf, " xmlns:%s=\"%s\"", prefix, VRM_XML_NS_MIGRATION);
    if (def->disabled)
        vrmXMLAttrStr(buf, "enabled", "no");
    start = buf->len;
    g_string_append(buf, ">\n");
    vrmMigrationParamsFormatBuf(buf, &def->params, level + 1);
    if (def->locator)
        vrmLocatorFormatBuf(buf, def->locator, level + 1);
    if (def->offer)
        vrmOfferFormatBuf(buf, def->offer, level + 1);
    if (def->answer)
        vrmAnswerFormatBuf(buf, def->answer, level + 1);
    if (buf->len == start + 2) {
        g_string_truncate(buf, start);
        g_string_append(buf, "/>\n");
        return;
    }
    vrmXMLIndent(buf, level);
    g_string_append_printf(buf, "</%s>\n", name);
}

void
vrmMigrationDefFormatBuf(GString *buf, const vrmMigrationDef *def,
                         const char *prefix, unsigned int level)
{
    vrmMigrationDefFormatElement(buf, def, prefix ? prefix : VRM_XML_NS_PREFIX,
                                 level);
}

char *
vrmMigrationDefFormatMetadata(const vrmMigrationDef *def)
{
    GString *buf = g_string_new(NULL);

    vrmMigrationDefFormatElement(buf, def, NULL, 0);
    return g_string_free(buf, FALSE);
}

char *
vrmMigrationDefFormat(const vrmMigrationDef *def)
{
    GString *buf = g_string_new(NULL);

    vrmMigrationDefFormatBuf(buf, def, NULL, 0);
    return g_string_free(buf, FALSE);
}
