/*
 * vrmpeer.c: messages between the virt-rdmad of two hosts
 *
 * Peer input for root's daemon on both ends: validated against peer.rng,
 * then parsed as strictly as the other documents (fuzzed by
 * tests/fuzz/vrmxmlfuzz.c).
 */
#include <config.h>

#include <string.h>

#include "vrmpeer.h"
#include "vrmerror.h"
#include "vrmi18n.h"

VRM_ENUM_IMPL(vrmPeerType, VRM_PEER_LAST,
              "migration-request",
              "migration-offer",
              "migration-answer",
              "migration-result",
              "reach-check",
);

/* Longest per-domain path an offer may name. */
#define VRM_PEER_PATH_MAX 4096

static const char *const noAttrs[] = { NULL };

vrmPeerMessage *
vrmPeerMessageNew(vrmPeerType type)
{
    vrmPeerMessage *msg = g_new0(vrmPeerMessage, 1);

    msg->type = type;
    msg->version = VRM_PEER_VERSION;
    return msg;
}

void
vrmPeerMessageFree(vrmPeerMessage *msg)
{
    if (!msg)
        return;
    g_free(msg->domainName);
    g_free(msg->domainUUID);
    vrmLocatorFree(msg->requester);
    g_free(msg->socketPath);
    if (msg->offer)
        vrmTokenClear(&msg->offer->token);
    vrmOfferFree(msg->offer);
    vrmAnswerFree(msg->answer);
    g_free(msg->errorMessage);
    g_free(msg);
}

vrmPeerMessage *
vrmPeerResultNewError(int code, const char *message)
{
    vrmPeerMessage *msg = vrmPeerMessageNew(VRM_PEER_MIGRATION_RESULT);

    msg->errorCode = code > VRM_ERR_OK && code < VRM_ERR_LAST ? code :
        VRM_ERR_INTERNAL;
    msg->errorMessage = g_strdup(message);
    return msg;
}

static int
vrmPeerParseRequest(xmlNodePtr node, vrmPeerMessage *msg)
{
    static const char *const attrs[] = { "version", NULL };
    static const char *const children[] = { "domain", "requester", "limits", "recovery", NULL };
    static const char *const domainAttrs[] = { "name", "uuid", NULL };
    static const char *const limitsAttrs[] = { "max-channels", NULL };
    static const char *const recoveryAttrs[] = { "job", NULL };
    xmlNodePtr child;

    if (vrmXMLCheckAttributes(node, attrs) < 0 ||
        vrmXMLCheckChildren(node, children) < 0 ||
        vrmXMLPropUInt(node, "version", true, 1, G_MAXUINT32, &msg->version) < 0)
        return -1;
    if (!(child = vrmXMLRequiredChild(node, "domain")) ||
        vrmXMLCheckLeaf(child, domainAttrs) < 0 ||
        vrmXMLPropString(child, "name", true, &msg->domainName) < 0 ||
        vrmXMLPropString(child, "uuid", true, &msg->domainUUID) < 0)
        return -1;
    if (!*msg->domainName || !g_uuid_string_is_valid(msg->domainUUID)) {
        g_autofree char *bad = vrmXMLQuote(*msg->domainName ? msg->domainUUID : "");

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected %4$s"),
                       *msg->domainName ? "uuid" : "name", "domain", bad,
                       *msg->domainName ? _("a UUID") : _("a non-empty domain name"));
        return -1;
    }
    if (!(child = vrmXMLRequiredChild(node, "requester")) ||
        !(msg->requester = vrmLocatorParseNode(child)))
        return -1;
    if (!(child = vrmXMLRequiredChild(node, "limits")) ||
        vrmXMLCheckLeaf(child, limitsAttrs) < 0 ||
        vrmXMLPropUInt(child, "max-channels", true, VRM_CHANNELS_MIN,
                       VRM_CHANNELS_MAX, &msg->maxChannels) < 0)
        return -1;
    if ((child = vrmXMLChild(node, "recovery")) &&
        (vrmXMLCheckLeaf(child, recoveryAttrs) < 0 ||
         vrmXMLPropULLong(child, "job", true, 1, G_MAXUINT64, &msg->recoveryOf) < 0))
        return -1;
    return 0;
}

static int
vrmPeerParseReachCheck(xmlNodePtr node, vrmPeerMessage *msg)
{
    static const char *const attrs[] = { "version", NULL };
    static const char *const children[] = { "requester", NULL };
    xmlNodePtr child;

    if (vrmXMLCheckAttributes(node, attrs) < 0 ||
        vrmXMLCheckChildren(node, children) < 0 ||
        vrmXMLPropUInt(node, "version", true, 1, G_MAXUINT32, &msg->version) < 0 ||
        !(child = vrmXMLRequiredChild(node, "requester")) ||
        !(msg->requester = vrmLocatorParseNode(child)))
        return -1;
    return 0;
}

static int
vrmPeerParseOffer(xmlNodePtr node, vrmPeerMessage *msg)
{
    static const char *const children[] = { "socket", "offer", NULL };
    static const char *const socketAttrs[] = { "path", NULL };
    xmlNodePtr child;

    if (vrmXMLCheckAttributes(node, noAttrs) < 0 ||
        vrmXMLCheckChildren(node, children) < 0)
        return -1;
    if (!(child = vrmXMLRequiredChild(node, "socket")) ||
        vrmXMLCheckLeaf(child, socketAttrs) < 0 ||
        vrmXMLPropString(child, "path", true, &msg->socketPath) < 0)
        return -1;
    if (msg->socketPath[0] != '/' || strchr(msg->socketPath, '\n') ||
        strlen(msg->socketPath) >= VRM_PEER_PATH_MAX) {
        g_autofree char *bad = vrmXMLQuote(msg->socketPath);

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected an absolute path of one line, shorter than %4$d bytes"),
                       "path", "socket", bad, VRM_PEER_PATH_MAX);
        return -1;
    }
    if (!(child = vrmXMLRequiredChild(node, "offer")) ||
        !(msg->offer = vrmOfferParseNode(child)))
        return -1;
    if (!msg->offer->hasToken) {
        vrmReportError(VRM_ERR_XML,
                       _("element '%1$s' is missing its required attribute '%2$s'"),
                       "offer", "token");
        return -1;
    }
    return 0;
}

static int
vrmPeerParseAnswer(xmlNodePtr node, vrmPeerMessage *msg)
{
    static const char *const children[] = { "answer", NULL };
    xmlNodePtr child;

    if (vrmXMLCheckAttributes(node, noAttrs) < 0 ||
        vrmXMLCheckChildren(node, children) < 0 ||
        !(child = vrmXMLRequiredChild(node, "answer")) ||
        !(msg->answer = vrmAnswerParseNode(child)))
        return -1;
    return 0;
}

static int
vrmPeerParseResult(xmlNodePtr node, vrmPeerMessage *msg)
{
    static const char *const okAttrs[] = { "status", NULL };
    static const char *const errorAttrs[] = { "status", "code", NULL };
    g_autofree char *status = NULL;

    if (vrmXMLPropString(node, "status", true, &status) < 0)
        return -1;
    if (g_str_equal(status, "ok"))
        return vrmXMLCheckLeaf(node, okAttrs);
    if (!g_str_equal(status, "error")) {
        g_autofree char *bad = vrmXMLQuote(status);

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; allowed values: %4$s"),
                       "status", "migration-result", bad, "'ok', 'error'");
        return -1;
    }
    if (vrmXMLCheckAttributes(node, errorAttrs) < 0 ||
        vrmXMLPropErrorCode(node, "code", &msg->errorCode) < 0 ||
        vrmXMLTextContent(node, &msg->errorMessage) < 0)
        return -1;
    if (msg->errorCode == VRM_ERR_OK) {
        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; an error result needs an error code"),
                       "code", "migration-result", "ok");
        return -1;
    }
    return 0;
}

static void *
vrmPeerMessageParseRoot(xmlDocPtr doc G_GNUC_UNUSED, xmlNodePtr node)
{
    g_autoptr(vrmPeerMessage) msg = NULL;
    int type;
    int rc = -1;

    if (!node || node->ns ||
        (type = vrmPeerTypeTypeFromString((const char *)node->name)) < 0) {
        g_autofree char *name = node ? vrmXMLNodeName(node) : g_strdup("");
        g_autofree char *list = vrmEnumAllowedValues(vrmPeerTypeTypeToString,
                                                     VRM_PEER_LAST);

        vrmReportError(VRM_ERR_XML,
                       _("unknown message '%1$s' from a peer helper; allowed messages: %2$s"),
                       name, list);
        return NULL;
    }
    msg = vrmPeerMessageNew(type);
    switch ((vrmPeerType)type) {
    case VRM_PEER_MIGRATION_REQUEST:
        rc = vrmPeerParseRequest(node, msg);
        break;
    case VRM_PEER_MIGRATION_OFFER:
        rc = vrmPeerParseOffer(node, msg);
        break;
    case VRM_PEER_MIGRATION_ANSWER:
        rc = vrmPeerParseAnswer(node, msg);
        break;
    case VRM_PEER_MIGRATION_RESULT:
        rc = vrmPeerParseResult(node, msg);
        break;
    case VRM_PEER_REACH_CHECK:
        rc = vrmPeerParseReachCheck(node, msg);
        break;
    case VRM_PEER_LAST:
        break;
    }
    if (rc < 0)
        return NULL;
    return g_steal_pointer(&msg);
}

vrmPeerMessage *
vrmPeerMessageParseString(const char *xml)
{
    g_autoptr(xmlDoc) doc = NULL;
    const char *what = _("peer message");
    size_t len = xml ? strlen(xml) : 0;

    if (len > VRM_PEER_FRAME_MAX) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("a message of %1$zu bytes from a peer helper exceeds the limit of %2$u bytes"),
                       len, VRM_PEER_FRAME_MAX);
        return NULL;
    }
    if (!(doc = vrmXMLParseMemory(xml, len, what, false)))
        return NULL;
    return vrmXMLParseValidated(doc, VRM_XML_SCHEMA_PEER, what,
                                vrmPeerMessageParseRoot,
                                (GDestroyNotify)vrmPeerMessageFree);
}

static void
vrmPeerFormatRequester(GString *buf, const vrmLocator *requester)
{
    g_string_append(buf, "  <requester");
    if (requester) {
        vrmXMLAttrStr(buf, "host", requester->host);
        vrmXMLAttrStr(buf, "address", requester->address);
        vrmXMLAttrUInt(buf, "port", requester->port);
    }
    g_string_append(buf, "/>\n");
}

char *
vrmPeerMessageFormat(const vrmPeerMessage *msg)
{
    GString *buf = g_string_new(NULL);
    const char *name = vrmPeerTypeTypeToString(msg->type);

    switch (msg->type) {
    case VRM_PEER_MIGRATION_REQUEST:
        g_string_append_printf(buf, "<%s version=\"%u\">\n", name, msg->version);
        g_string_append(buf, "  <domain");
        vrmXMLAttrStr(buf, "name", msg->domainName ? msg->domainName : "");
        vrmXMLAttrStr(buf, "uuid", msg->domainUUID ? msg->domainUUID : "");
        g_string_append(buf, "/>\n");
        vrmPeerFormatRequester(buf, msg->requester);
        g_string_append(buf, "  <limits");
        vrmXMLAttrUInt(buf, "max-channels", msg->maxChannels);
        g_string_append(buf, "/>\n");
        if (msg->recoveryOf) {
            g_string_append(buf, "  <recovery");
            vrmXMLAttrULLong(buf, "job", msg->recoveryOf);
            g_string_append(buf, "/>\n");
        }
        g_string_append_printf(buf, "</%s>\n", name);
        break;
    case VRM_PEER_REACH_CHECK:
        g_string_append_printf(buf, "<%s version=\"%u\">\n", name, msg->version);
        vrmPeerFormatRequester(buf, msg->requester);
        g_string_append_printf(buf, "</%s>\n", name);
        break;
    case VRM_PEER_MIGRATION_OFFER:
        g_string_append_printf(buf, "<%s>\n  <socket", name);
        vrmXMLAttrStr(buf, "path", msg->socketPath ? msg->socketPath : "");
        g_string_append(buf, "/>\n");
        if (msg->offer)
            vrmOfferFormatBuf(buf, msg->offer, 1);
        g_string_append_printf(buf, "</%s>\n", name);
        break;
    case VRM_PEER_MIGRATION_ANSWER:
        g_string_append_printf(buf, "<%s>\n", name);
        if (msg->answer)
            vrmAnswerFormatBuf(buf, msg->answer, 1);
        g_string_append_printf(buf, "</%s>\n", name);
        break;
    case VRM_PEER_MIGRATION_RESULT:
        if (msg->errorCode == VRM_ERR_OK) {
            g_string_append_printf(buf, "<%s status=\"ok\"/>\n", name);
            break;
        }
        g_string_append_printf(buf, "<%s status=\"error\"", name);
        vrmXMLAttrStr(buf, "code", vrmErrorCodeTypeToString(msg->errorCode));
        g_string_append(buf, ">");
        vrmXMLEscapeText(buf, msg->errorMessage ? msg->errorMessage : "");
        g_string_append_printf(buf, "</%s>\n", name);
        break;
    case VRM_PEER_LAST:
        break;
    }
    return g_string_free(buf, FALSE);
}
