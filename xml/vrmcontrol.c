/*
 * vrmcontrol.c: messages between the tools (CLI, hook) and virt-rdmad
 */
#include <config.h>

#include <string.h>

#include "vrmcontrol.h"
#include "vrmcapability.h"
#include "vrmnegotiation.h"
#include "vrmerror.h"
#include "vrmi18n.h"

VRM_ENUM_IMPL(vrmControlType, VRM_CONTROL_LAST,
              "job-incoming",
              "job-prepare",
              "host-info",
              "job-query",
              "job-cancel",
              "job-list",
              "job-events",
              "peer-check",
              "reply",
);

VRM_ENUM_IMPL(vrmJobRole, VRM_JOB_ROLE_LAST,
              "source",
              "destination",
);

VRM_ENUM_IMPL(vrmJobState, VRM_JOB_STATE_LAST,
              "negotiating",
              "connected",
              "transferring",
              "completed",
              "failed",
              "cancelled",
              "over-tcp",
              "unknown",
);

bool
vrmJobStateIsFinal(vrmJobState state)
{
    return state == VRM_JOB_STATE_COMPLETED ||
        state == VRM_JOB_STATE_FAILED ||
        state == VRM_JOB_STATE_CANCELLED ||
        state == VRM_JOB_STATE_OVER_TCP ||
        state == VRM_JOB_STATE_UNKNOWN;
}

VRM_ENUM_IMPL(vrmReplyStatus, VRM_REPLY_LAST,
              "ok",
              "error",
);

VRM_ENUM_IMPL(vrmIntentState, VRM_INTENT_STATE_LAST,
              "pending",
              "used",
              "expired",
              "cancelled",
);

VRM_ENUM_IMPL(vrmHostInfoStatus, VRM_HOST_INFO_STATUS_LAST,
              "ok",
              "error",
              "off",
);

/* Longest UNIX socket path accepted in a job record. */
#define VRM_CONTROL_PATH_MAX 4096

static const char *const noAttrs[] = { NULL };

/* ---- job records ---- */

vrmJobRecord *
vrmJobRecordNew(void)
{
    return g_new0(vrmJobRecord, 1);
}

void
vrmJobRecordFree(vrmJobRecord *job)
{
    if (!job)
        return;
    g_free(job->domainName);
    g_free(job->domainUUID);
    g_free(job->socketPath);
    vrmMigrationDefFree(job->migration);
    g_free(job->error);
    g_free(job);
}

vrmJobRecord *
vrmJobRecordCopy(const vrmJobRecord *job)
{
    vrmJobRecord *copy = g_new0(vrmJobRecord, 1);

    *copy = *job;
    copy->domainName = g_strdup(job->domainName);
    copy->domainUUID = g_strdup(job->domainUUID);
    copy->socketPath = g_strdup(job->socketPath);
    copy->migration = job->migration ? vrmMigrationDefCopy(job->migration) : NULL;
    copy->error = g_strdup(job->error);
    return copy;
}

static void
vrmJobRecordFreeFunc(gpointer job)
{
    vrmJobRecordFree(job);
}

/* <domain name="..." uuid="..."/>; @needUUID: the uuid is required. */
static int
vrmControlParseDomainFull(xmlNodePtr node, char **name, char **uuid,
                          bool needUUID)
{
    static const char *const attrs[] = { "name", "uuid", NULL };

    if (vrmXMLCheckLeaf(node, attrs) < 0 ||
        vrmXMLPropString(node, "name", true, name) < 0 ||
        vrmXMLPropString(node, "uuid", needUUID, uuid) < 0)
        return -1;
    if (!**name) {
        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected a non-empty domain name"),
                       "name", "domain", "");
        return -1;
    }
    if (*uuid && !g_uuid_string_is_valid(*uuid)) {
        g_autofree char *bad = vrmXMLQuote(*uuid);

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected a UUID such as '%4$s'"),
                       "uuid", "domain", bad,
                       "c7a5fdbd-cdaf-9455-926a-d65c16db1809");
        return -1;
    }
    return 0;
}

static int
vrmControlParseDomain(xmlNodePtr node, char **name, char **uuid)
{
    return vrmControlParseDomainFull(node, name, uuid, false);
}

static void
vrmControlFormatDomain(GString *buf, unsigned int level, const char *name,
                       const char *uuid)
{
    vrmXMLIndent(buf, level);
    g_string_append(buf, "<domain");
    vrmXMLAttrStr(buf, "name", name ? name : "");
    if (uuid)
        vrmXMLAttrStr(buf, "uuid", uuid);
    g_string_append(buf, "/>\n");
}

static int
vrmControlParseSocket(xmlNodePtr node, char **path)
{
    static const char *const socketAttrs[] = { "path", NULL };

    if (vrmXMLCheckLeaf(node, socketAttrs) < 0 ||
        vrmXMLPropString(node, "path", true, path) < 0)
        return -1;
    if ((*path)[0] != '/' || strchr(*path, '\n') ||
        strlen(*path) >= VRM_CONTROL_PATH_MAX) {
        g_autofree char *bad = vrmXMLQuote(*path);

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected an absolute path of one line, shorter than %4$d bytes"),
                       "path", "socket", bad, VRM_CONTROL_PATH_MAX);
        return -1;
    }
    return 0;
}

static void
vrmControlFormatSocket(GString *buf, unsigned int level, const char *path)
{
    vrmXMLIndent(buf, level);
    g_string_append(buf, "<socket");
    vrmXMLAttrStr(buf, "path", path);
    g_string_append(buf, "/>\n");
}

/* The <rdma:migration> child of @node, or NULL. */
static xmlNodePtr
vrmControlMigrationChild(xmlNodePtr node)
{
    xmlNodePtr cur;

    for (cur = node->children; cur; cur = cur->next) {
        if (vrmXMLIsElement(cur, VRM_XML_NS_MIGRATION, "migration"))
            return cur;
    }
    return NULL;
}

vrmJobRecord *
vrmJobRecordParseNode(xmlNodePtr node)
{
    static const char *const attrs[] = {
        "id", "role", "state", "owner", "intent", "recovery-of", NULL
    };
    static const char *const children[] = {
        "domain", "socket", "rdma:migration", "stats", "error", NULL
    };
    static const char *const errorAttrs[] = { "code", NULL };
    g_autoptr(vrmJobRecord) job = vrmJobRecordNew();
    xmlNodePtr child;
    int role;
    int state;
    int rc;

    if (vrmXMLCheckAttributes(node, attrs) < 0 ||
        vrmXMLCheckChildren(node, children) < 0 ||
        vrmXMLPropULLong(node, "id", true, 0, G_MAXUINT64, &job->id) < 0 ||
        vrmXMLPropEnum(node, "role", true, vrmJobRoleTypeFromString,
                       vrmJobRoleTypeToString, VRM_JOB_ROLE_LAST, &role) < 0 ||
        vrmXMLPropEnum(node, "state", true, vrmJobStateTypeFromString,
                       vrmJobStateTypeToString, VRM_JOB_STATE_LAST, &state) < 0)
        return NULL;
    job->role = role;
    job->state = state;
    if ((rc = vrmXMLPropUInt(node, "owner", false, 0, G_MAXUINT32,
                             &job->owner)) < 0)
        return NULL;
    job->hasOwner = rc == 1;
    if ((rc = vrmXMLPropULLong(node, "intent", false, 0, G_MAXUINT64,
                               &job->intent)) < 0)
        return NULL;
    job->hasIntent = rc == 1;
    if ((rc = vrmXMLPropULLong(node, "recovery-of", false, 0, G_MAXUINT64,
                               &job->recoveryOf)) < 0)
        return NULL;
    job->hasRecoveryOf = rc == 1;

    if (!(child = vrmXMLRequiredChild(node, "domain")) ||
        vrmControlParseDomain(child, &job->domainName, &job->domainUUID) < 0)
        return NULL;

    if ((child = vrmXMLChild(node, "socket")) &&
        vrmControlParseSocket(child, &job->socketPath) < 0)
        return NULL;

    if ((child = vrmControlMigrationChild(node)) &&
        !(job->migration = vrmMigrationDefParseElement(child)))
        return NULL;
    if (job->migration && job->migration->offer &&
        job->migration->offer->hasToken) {
        /* the token lives in the engines and on the helpers' channel only */
        vrmReportError(VRM_ERR_XML,
                       _("a job record must not carry the token of its offer"));
        return NULL;
    }

    if ((child = vrmXMLChild(node, "stats"))) {
        if (vrmJobStatsParseNode(child, &job->stats) < 0)
            return NULL;
        job->hasStats = true;
    }

    if ((child = vrmXMLChild(node, "error"))) {
        if (vrmXMLCheckAttributes(child, errorAttrs) < 0 ||
            (rc = vrmXMLPropEnum(child, "code", false,
                                 vrmErrorCodeTypeFromString,
                                 vrmErrorCodeTypeToString, VRM_ERR_LAST,
                                 &job->errorCode)) < 0 ||
            vrmXMLTextContent(child, &job->error) < 0)
            return NULL;
        /* helpers older than the code write none (and "ok" names no
         * cause): a failure whose cause is unknown counts as internal */
        if (rc == 0 || job->errorCode == VRM_ERR_OK)
            job->errorCode = VRM_ERR_INTERNAL;
    }

    return g_steal_pointer(&job);
}

void
vrmJobRecordFormatBuf(GString *buf, const vrmJobRecord *job, unsigned int level)
{
    vrmXMLIndent(buf, level);
    g_string_append_printf(buf, "<job id=\"%llu\"", job->id);
    if (job->hasOwner)
        vrmXMLAttrUInt(buf, "owner", job->owner);
    if (job->hasIntent)
        vrmXMLAttrULLong(buf, "intent", job->intent);
    if (job->hasRecoveryOf)
        vrmXMLAttrULLong(buf, "recovery-of", job->recoveryOf);
    g_string_append_printf(buf, " role=\"%s\" state=\"%s\">\n",
                           vrmJobRoleTypeToString(job->role),
                           vrmJobStateTypeToString(job->state));
    vrmControlFormatDomain(buf, level + 1, job->domainName, job->domainUUID);
    if (job->socketPath)
        vrmControlFormatSocket(buf, level + 1, job->socketPath);
    if (job->migration) {
        g_autoptr(vrmMigrationDef) def = vrmMigrationDefCopy(job->migration);

        /* never the token, whatever the caller kept */
        vrmOfferDropToken(def->offer);
        vrmMigrationDefFormatBuf(buf, def, NULL, level + 1);
    }
    if (job->hasStats)
        vrmJobStatsFormatBuf(buf, &job->stats, level + 1);
    if (job->error) {
        vrmXMLIndent(buf, level + 1);
        g_string_append(buf, "<error");
        if (job->errorCode != VRM_ERR_OK &&
            vrmErrorCodeTypeToString(job->errorCode))
            vrmXMLAttrStr(buf, "code", vrmErrorCodeTypeToString(job->errorCode));
        g_string_append(buf, ">");
        vrmXMLEscapeText(buf, job->error);
        g_string_append(buf, "</error>\n");
    }
    vrmXMLIndent(buf, level);
    g_string_append(buf, "</job>\n");
}


/* ---- intents ---- */

vrmIntentRecord *
vrmIntentRecordNew(void)
{
    return g_new0(vrmIntentRecord, 1);
}

void
vrmIntentRecordFree(vrmIntentRecord *intent)
{
    if (!intent)
        return;
    g_free(intent->domainName);
    g_free(intent->domainUUID);
    g_free(intent->socketPath);
    g_free(intent);
}

static vrmIntentRecord *
vrmIntentRecordParseNode(xmlNodePtr node)
{
    static const char *const attrs[] = { "id", "state", "job", NULL };
    static const char *const children[] = { "domain", "socket", NULL };
    g_autoptr(vrmIntentRecord) intent = vrmIntentRecordNew();
    xmlNodePtr child;
    int state;
    int rc;

    if (vrmXMLCheckAttributes(node, attrs) < 0 ||
        vrmXMLCheckChildren(node, children) < 0 ||
        vrmXMLPropULLong(node, "id", true, 0, G_MAXUINT64, &intent->id) < 0 ||
        vrmXMLPropEnum(node, "state", true, vrmIntentStateTypeFromString,
                       vrmIntentStateTypeToString, VRM_INTENT_STATE_LAST,
                       &state) < 0 ||
        (rc = vrmXMLPropULLong(node, "job", false, 0, G_MAXUINT64,
                               &intent->job)) < 0)
        return NULL;
    intent->state = state;
    intent->hasJob = rc == 1;
    if (!(child = vrmXMLRequiredChild(node, "domain")) ||
        vrmControlParseDomainFull(child, &intent->domainName,
                                  &intent->domainUUID, true) < 0)
        return NULL;
    if (!(child = vrmXMLRequiredChild(node, "socket")) ||
        vrmControlParseSocket(child, &intent->socketPath) < 0)
        return NULL;
    return g_steal_pointer(&intent);
}

static void
vrmIntentRecordFormatBuf(GString *buf, const vrmIntentRecord *intent,
                         unsigned int level)
{
    vrmXMLIndent(buf, level);
    g_string_append(buf, "<intent");
    vrmXMLAttrULLong(buf, "id", intent->id);
    vrmXMLAttrStr(buf, "state", vrmIntentStateTypeToString(intent->state));
    if (intent->hasJob)
        vrmXMLAttrULLong(buf, "job", intent->job);
    g_string_append(buf, ">\n");
    vrmControlFormatDomain(buf, level + 1, intent->domainName, intent->domainUUID);
    vrmControlFormatSocket(buf, level + 1, intent->socketPath ? intent->socketPath : "/");
    vrmXMLIndent(buf, level);
    g_string_append(buf, "</intent>\n");
}


/* ---- host information ---- */

static void
vrmHostInfoDeviceFree(gpointer opaque)
{
    vrmHostInfoDevice *dev = opaque;

    g_free(dev->name);
    g_free(dev->state);
    g_free(dev->address);
    g_free(dev);
}

vrmHostInfo *
vrmHostInfoNew(void)
{
    vrmHostInfo *info = g_new0(vrmHostInfo, 1);

    info->devices = g_ptr_array_new_with_free_func(vrmHostInfoDeviceFree);
    return info;
}

void
vrmHostInfoFree(vrmHostInfo *info)
{
    if (!info)
        return;
    g_free(info->version);
    g_free(info->engineUser);
    g_free(info->engineMessage);
    g_free(info->peerAuth);
    g_free(info->peerMessage);
    vrmLocatorFree(info->locator);
    g_free(info->libvirtURI);
    g_free(info->libvirtMessage);
    g_free(info->transparentMode);
    g_free(info->transparentMessage);
    g_ptr_array_unref(info->devices);
    g_free(info);
}

void
vrmHostInfoAddDevice(vrmHostInfo *info, const char *name, unsigned int port,
                     const char *state, const char *address)
{
    vrmHostInfoDevice *dev = g_new0(vrmHostInfoDevice, 1);

    dev->name = g_strdup(name);
    dev->port = port;
    dev->state = g_strdup(state);
    dev->address = g_strdup(address);
    g_ptr_array_add(info->devices, dev);
}

/* The values of <peers auth=...>, as control.rng lists them */
static int
vrmHostInfoPropPeerAuth(xmlNodePtr node, const char *name, bool required,
                        char **value)
{
    static const char *const methods[] = { "psk", "x509", "none", NULL };
    g_autofree char *str = NULL;
    int rc;

    if ((rc = vrmXMLPropString(node, name, required, &str)) <= 0)
        return rc;
    if (!g_strv_contains(methods, str)) {
        g_autofree char *elem = vrmXMLNodeName(node);
        g_autofree char *bad = vrmXMLQuote(str);

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected psk, x509 or none"),
                       name, elem, bad);
        return -1;
    }
    g_free(*value);
    *value = g_steal_pointer(&str);
    return 1;
}

/* The values of <transparent mode=...>: the helper's [migration] rdma */
static int
vrmHostInfoPropRdmaDefault(xmlNodePtr node, const char *name, bool required,
                           char **value)
{
    int mode;
    int rc;

    if ((rc = vrmXMLPropEnum(node, name, required, vrmRdmaDefaultTypeFromString,
                             vrmRdmaDefaultTypeToString, VRM_RDMA_DEFAULT_LAST,
                             &mode)) <= 0)
        return rc;
    g_free(*value);
    *value = g_strdup(vrmRdmaDefaultTypeToString(mode));
    return 1;
}

typedef int (*vrmHostInfoPropFunc)(xmlNodePtr node, const char *name,
                                   bool required, char **value);

/* <NAME attr="..." status="ok|error|off">message</NAME>; parseAttr checks
 * the attribute as the schema does (a parser laxer than the schema lets a
 * peer's reply through that the schema refuses: found by vrmxmlfuzz) */
static int
vrmHostInfoParseStatus(xmlNodePtr node, const char *attr,
                       vrmHostInfoPropFunc parseAttr, char **attrValue,
                       vrmHostInfoStatus *status, char **message)
{
    const char *const attrs[] = { attr, "status", NULL };
    int st;

    if (vrmXMLCheckAttributes(node, attrs) < 0 ||
        parseAttr(node, attr, true, attrValue) < 0 ||
        vrmXMLPropEnum(node, "status", true, vrmHostInfoStatusTypeFromString,
                       vrmHostInfoStatusTypeToString,
                       VRM_HOST_INFO_STATUS_LAST, &st) < 0 ||
        vrmXMLTextContent(node, message) < 0)
        return -1;
    *status = st;
    if (*message && !**message)
        g_clear_pointer(message, g_free);
    return 0;
}

static void
vrmHostInfoFormatStatus(GString *buf, const char *name, const char *attr,
                        const char *attrValue, vrmHostInfoStatus status,
                        const char *message)
{
    vrmXMLIndent(buf, 1);
    g_string_append_printf(buf, "<%s", name);
    vrmXMLAttrStr(buf, attr, attrValue ? attrValue : "");
    vrmXMLAttrStr(buf, "status", vrmHostInfoStatusTypeToString(status));
    g_string_append(buf, ">");
    if (message)
        vrmXMLEscapeText(buf, message);
    g_string_append_printf(buf, "</%s>\n", name);
}

static int
vrmHostInfoParseChunkSizes(xmlNodePtr node, guint32 *mask)
{
    vrmHostPolicy policy = { 0 };
    g_autofree char *list = NULL;
    g_auto(GStrv) items = NULL;
    size_t i;

    if (vrmXMLPropString(node, "chunk-sizes", true, &list) < 0)
        return -1;
    items = g_strsplit(list, " ", -1);
    for (i = 0; items[i]; i++) {
        unsigned long long v;

        if (!vrmParseUInt64(items[i], &v) || v < VRM_CHUNK_SIZE_MIN ||
            v > VRM_CHUNK_SIZE_MAX || (v & (v - 1)) != 0) {
            g_autofree char *bad = vrmXMLQuote(list);

            vrmReportError(VRM_ERR_XML,
                           _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected powers of two from %4$u to %5$u separated by spaces"),
                           "chunk-sizes", "limits", bad, VRM_CHUNK_SIZE_MIN,
                           VRM_CHUNK_SIZE_MAX);
            return -1;
        }
        vrmHostPolicyAllowChunkSize(&policy, v);
    }
    *mask = policy.chunkSizes;
    return 0;
}

static int
vrmHostInfoParseMemlock(xmlNodePtr node, vrmHostInfo *info)
{
    static const char *const attrs[] = { "limit", "can-raise", NULL };
    g_autofree char *limit = NULL;

    if (vrmXMLCheckLeaf(node, attrs) < 0 ||
        vrmXMLPropString(node, "limit", true, &limit) < 0 ||
        vrmXMLPropYesNo(node, "can-raise", true, &info->memlockCanRaise) < 0)
        return -1;
    if (g_str_equal(limit, "unlimited")) {
        info->memlockUnlimited = true;
        return 0;
    }
    return vrmXMLPropULLong(node, "limit", true, 0, G_MAXUINT64,
                            &info->memlockLimit) < 0 ? -1 : 0;
}

static int
vrmHostInfoParseDevice(xmlNodePtr node, vrmHostInfo *info)
{
    static const char *const attrs[] = { "name", "port", "state", "address", NULL };
    g_autofree char *name = NULL;
    g_autofree char *state = NULL;
    g_autofree char *address = NULL;
    unsigned int port;

    if (vrmXMLCheckLeaf(node, attrs) < 0 ||
        vrmXMLPropName(node, "name", true, &name) < 0 ||
        vrmXMLPropUInt(node, "port", true, VRM_DEVICE_PORT_MIN,
                       VRM_DEVICE_PORT_MAX, &port) < 0 ||
        vrmXMLPropName(node, "state", true, &state) < 0 ||
        vrmXMLPropAddress(node, "address", false, &address) < 0)
        return -1;
    vrmHostInfoAddDevice(info, name, port, state, address);
    return 0;
}

static vrmHostInfo *
vrmHostInfoParseNode(xmlNodePtr node)
{
    static const char *const attrs[] = { "version", "uid", NULL };
    static const char *const children[] = {
        "jobs", "limits", "pinned", "memlock", "engine", "peers", "locator",
        "libvirt", "transparent", "device*", NULL
    };
    static const char *const jobsAttrs[] = { "running", "max", NULL };
    static const char *const limitsAttrs[] = {
        "max-channels", "max-ring-depth", "chunk-sizes", NULL
    };
    static const char *const pinnedAttrs[] = {
        "budget", "used", "one-channel", "largest-offer", NULL
    };
    g_autoptr(vrmHostInfo) info = vrmHostInfoNew();
    xmlNodePtr child;

    if (vrmXMLCheckAttributes(node, attrs) < 0 ||
        vrmXMLCheckChildren(node, children) < 0 ||
        vrmXMLPropString(node, "version", true, &info->version) < 0 ||
        vrmXMLPropUInt(node, "uid", true, 0, G_MAXUINT32, &info->uid) < 0)
        return NULL;
    if (!(child = vrmXMLRequiredChild(node, "jobs")) ||
        vrmXMLCheckLeaf(child, jobsAttrs) < 0 ||
        vrmXMLPropUInt(child, "running", true, 0, G_MAXUINT32,
                       &info->runningJobs) < 0 ||
        vrmXMLPropUInt(child, "max", true, 0, G_MAXUINT32, &info->maxJobs) < 0)
        return NULL;
    if (!(child = vrmXMLRequiredChild(node, "limits")) ||
        vrmXMLCheckLeaf(child, limitsAttrs) < 0 ||
        vrmXMLPropUInt(child, "max-channels", true, VRM_CHANNELS_MIN,
                       VRM_CHANNELS_MAX, &info->maxChannels) < 0 ||
        vrmXMLPropUInt(child, "max-ring-depth", true, VRM_RING_DEPTH_MIN,
                       VRM_RING_DEPTH_MAX, &info->maxRingDepth) < 0 ||
        vrmHostInfoParseChunkSizes(child, &info->chunkSizes) < 0)
        return NULL;
    if (!(child = vrmXMLRequiredChild(node, "pinned")) ||
        vrmXMLCheckLeaf(child, pinnedAttrs) < 0 ||
        vrmXMLPropULLong(child, "budget", true, 0, G_MAXUINT64, &info->budget) < 0 ||
        vrmXMLPropULLong(child, "used", true, 0, G_MAXUINT64, &info->pinnedUsed) < 0 ||
        vrmXMLPropULLong(child, "one-channel", true, 0, G_MAXUINT64,
                         &info->pinnedOneChannel) < 0 ||
        vrmXMLPropULLong(child, "largest-offer", true, 0, G_MAXUINT64,
                         &info->pinnedLargestOffer) < 0)
        return NULL;
    if (!(child = vrmXMLRequiredChild(node, "memlock")) ||
        vrmHostInfoParseMemlock(child, info) < 0)
        return NULL;
    if (!(child = vrmXMLRequiredChild(node, "engine")) ||
        vrmHostInfoParseStatus(child, "user", vrmXMLPropName, &info->engineUser,
                               &info->engineStatus, &info->engineMessage) < 0)
        return NULL;
    if (!(child = vrmXMLRequiredChild(node, "peers")) ||
        vrmHostInfoParseStatus(child, "auth", vrmHostInfoPropPeerAuth, &info->peerAuth,
                               &info->peerStatus, &info->peerMessage) < 0)
        return NULL;
    if ((child = vrmXMLChild(node, "locator")) &&
        !(info->locator = vrmLocatorParseNode(child)))
        return NULL;
    if (!(child = vrmXMLRequiredChild(node, "libvirt")) ||
        vrmHostInfoParseStatus(child, "uri", vrmXMLPropString, &info->libvirtURI,
                               &info->libvirtStatus, &info->libvirtMessage) < 0)
        return NULL;
    if ((child = vrmXMLChild(node, "transparent")) &&
        vrmHostInfoParseStatus(child, "mode", vrmHostInfoPropRdmaDefault, &info->transparentMode,
                               &info->transparentStatus, &info->transparentMessage) < 0)
        return NULL;
    for (child = node->children; child; child = child->next) {
        if (vrmXMLIsOurChild(child, "device") &&
            vrmHostInfoParseDevice(child, info) < 0)
            return NULL;
    }
    return g_steal_pointer(&info);
}

static void
vrmHostInfoFormatBuf(GString *buf, const vrmHostInfo *info)
{
    vrmHostPolicy chunks = { .chunkSizes = info->chunkSizes };
    g_autofree char *list = vrmHostPolicyFormatChunkSizes(&chunks);
    size_t i;

    g_string_append(buf, "<host-info");
    vrmXMLAttrStr(buf, "version", info->version ? info->version : "");
    vrmXMLAttrUInt(buf, "uid", info->uid);
    g_string_append(buf, ">\n");
    vrmXMLIndent(buf, 1);
    g_string_append(buf, "<jobs");
    vrmXMLAttrUInt(buf, "running", info->runningJobs);
    vrmXMLAttrUInt(buf, "max", info->maxJobs);
    g_string_append(buf, "/>\n");
    vrmXMLIndent(buf, 1);
    g_string_append(buf, "<limits");
    vrmXMLAttrUInt(buf, "max-channels", info->maxChannels);
    vrmXMLAttrUInt(buf, "max-ring-depth", info->maxRingDepth);
    vrmXMLAttrStr(buf, "chunk-sizes", list);
    g_string_append(buf, "/>\n");
    vrmXMLIndent(buf, 1);
    g_string_append(buf, "<pinned");
    vrmXMLAttrULLong(buf, "budget", info->budget);
    vrmXMLAttrULLong(buf, "used", info->pinnedUsed);
    vrmXMLAttrULLong(buf, "one-channel", info->pinnedOneChannel);
    vrmXMLAttrULLong(buf, "largest-offer", info->pinnedLargestOffer);
    g_string_append(buf, "/>\n");
    vrmXMLIndent(buf, 1);
    g_string_append(buf, "<memlock");
    if (info->memlockUnlimited)
        vrmXMLAttrStr(buf, "limit", "unlimited");
    else
        vrmXMLAttrULLong(buf, "limit", info->memlockLimit);
    vrmXMLAttrStr(buf, "can-raise", info->memlockCanRaise ? "yes" : "no");
    g_string_append(buf, "/>\n");
    vrmHostInfoFormatStatus(buf, "engine", "user", info->engineUser,
                            info->engineStatus, info->engineMessage);
    vrmHostInfoFormatStatus(buf, "peers", "auth", info->peerAuth,
                            info->peerStatus, info->peerMessage);
    if (info->locator)
        vrmLocatorFormatBuf(buf, info->locator, 1);
    vrmHostInfoFormatStatus(buf, "libvirt", "uri", info->libvirtURI,
                            info->libvirtStatus, info->libvirtMessage);
    if (info->transparentMode)
        vrmHostInfoFormatStatus(buf, "transparent", "mode", info->transparentMode,
                                info->transparentStatus, info->transparentMessage);
    for (i = 0; i < info->devices->len; i++) {
        const vrmHostInfoDevice *dev = g_ptr_array_index(info->devices, i);

        vrmXMLIndent(buf, 1);
        g_string_append(buf, "<device");
        vrmXMLAttrStr(buf, "name", dev->name);
        vrmXMLAttrUInt(buf, "port", dev->port);
        vrmXMLAttrStr(buf, "state", dev->state);
        if (dev->address)
            vrmXMLAttrStr(buf, "address", dev->address);
        g_string_append(buf, "/>\n");
    }
    g_string_append(buf, "</host-info>\n");
}


/* ---- messages ---- */

vrmControlMessage *
vrmControlMessageNew(vrmControlType type)
{
    vrmControlMessage *msg = g_new0(vrmControlMessage, 1);

    msg->type = type;
    msg->jobs = g_ptr_array_new_with_free_func(vrmJobRecordFreeFunc);
    return msg;
}

void
vrmControlMessageFree(vrmControlMessage *msg)
{
    if (!msg)
        return;
    g_free(msg->domainName);
    g_free(msg->domainUUID);
    vrmMigrationDefFree(msg->migration);
    vrmMigrationParamsFree(msg->overrides);
    g_free(msg->errorMessage);
    g_ptr_array_unref(msg->jobs);
    vrmIntentRecordFree(msg->intentRecord);
    g_free(msg->peerHost);
    g_free(msg->peerAddress);
    vrmHostInfoFree(msg->hostInfo);
    g_free(msg);
}

vrmControlMessage *
vrmControlReplyNewError(int code, const char *message)
{
    vrmControlMessage *msg = vrmControlMessageNew(VRM_CONTROL_REPLY);

    msg->status = VRM_REPLY_ERROR;
    msg->errorCode = code;
    msg->errorMessage = g_strdup(message);
    return msg;
}

/* <job-incoming>: the domain (with its uuid) and its element */
static int
vrmControlParseJobIncoming(xmlNodePtr node, vrmControlMessage *msg)
{
    static const char *const children[] = { "domain", "rdma:migration", NULL };
    xmlNodePtr child;

    if (vrmXMLCheckAttributes(node, noAttrs) < 0 ||
        vrmXMLCheckChildren(node, children) < 0)
        return -1;
    if (!(child = vrmXMLRequiredChild(node, "domain")) ||
        vrmControlParseDomainFull(child, &msg->domainName, &msg->domainUUID,
                                  true) < 0)
        return -1;
    if (!(child = vrmControlMigrationChild(node))) {
        vrmReportError(VRM_ERR_XML,
                       _("element '%1$s' needs a '%2$s:migration' element"),
                       "job-incoming", VRM_XML_NS_PREFIX);
        return -1;
    }
    if (!(msg->migration = vrmMigrationDefParseElement(child)))
        return -1;
    return 0;
}

/* <job-prepare>: the domain (with its uuid) and the overrides */
static int
vrmControlParseJobPrepare(xmlNodePtr node, vrmControlMessage *msg)
{
    static const char *const children[] = { "domain", "overrides", NULL };
    xmlNodePtr child;

    if (vrmXMLCheckAttributes(node, noAttrs) < 0 ||
        vrmXMLCheckChildren(node, children) < 0)
        return -1;
    if (!(child = vrmXMLRequiredChild(node, "domain")) ||
        vrmControlParseDomainFull(child, &msg->domainName, &msg->domainUUID,
                                  true) < 0)
        return -1;
    if ((child = vrmXMLChild(node, "overrides"))) {
        msg->overrides = g_new0(vrmMigrationParams, 1);
        if (vrmXMLCheckAttributes(child, noAttrs) < 0 ||
            vrmMigrationParamsParseNode(child, msg->overrides, NULL) < 0)
            return -1;
    }
    return 0;
}

static int
vrmControlParsePeerCheck(xmlNodePtr node, vrmControlMessage *msg)
{
    static const char *const attrs[] = { "host", "address", NULL };

    if (vrmXMLCheckLeaf(node, attrs) < 0 ||
        vrmXMLPropHostName(node, "host", true, &msg->peerHost) < 0 ||
        vrmXMLPropAddress(node, "address", true, &msg->peerAddress) < 0)
        return -1;
    return 0;
}

static int
vrmControlParseJobId(xmlNodePtr node, vrmControlMessage *msg, bool query)
{
    static const char *const queryAttrs[] = { "id", "domain", "intent", NULL };
    static const char *const cancelAttrs[] = { "id", "intent", NULL };
    const char *elem = query ? "job-query" : "job-cancel";
    int rc;

    if (vrmXMLCheckLeaf(node, query ? queryAttrs : cancelAttrs) < 0 ||
        (rc = vrmXMLPropULLong(node, "id", false, 0, G_MAXUINT64,
                               &msg->id)) < 0)
        return -1;
    msg->hasId = rc > 0;
    if ((rc = vrmXMLPropULLong(node, "intent", false, 0, G_MAXUINT64,
                               &msg->intent)) < 0)
        return -1;
    msg->hasIntent = rc > 0;
    if (query &&
        vrmXMLPropString(node, "domain", false, &msg->domainName) < 0)
        return -1;
    if (msg->hasId + msg->hasIntent + (msg->domainName != NULL) != 1) {
        if (query)
            vrmReportError(VRM_ERR_XML,
                           _("element '%1$s' needs exactly one of the attributes '%2$s', '%3$s' and '%4$s'"),
                           elem, "id", "intent", "domain");
        else
            vrmReportError(VRM_ERR_XML,
                           _("element '%1$s' needs exactly one of the attributes '%2$s' and '%3$s'"),
                           elem, "id", "intent");
        return -1;
    }
    if (!query)
        return 0;
    if (msg->domainName && !*msg->domainName) {
        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected a non-empty domain name"),
                       "domain", "job-query", "");
        return -1;
    }
    return 0;
}

static int
vrmControlParseReply(xmlNodePtr node, vrmControlMessage *msg)
{
    static const char *const attrs[] = { "status", NULL };
    static const char *const okChildren[] = { "job*", "intent", "host-info", NULL };
    static const char *const errorChildren[] = { "error", NULL };
    static const char *const errorAttrs[] = { "code", NULL };
    xmlNodePtr child;
    int status;

    if (vrmXMLCheckAttributes(node, attrs) < 0 ||
        vrmXMLPropEnum(node, "status", true, vrmReplyStatusTypeFromString,
                       vrmReplyStatusTypeToString, VRM_REPLY_LAST,
                       &status) < 0)
        return -1;
    msg->status = status;

    if (status == VRM_REPLY_OK) {
        if (vrmXMLCheckChildren(node, okChildren) < 0)
            return -1;
        if ((child = vrmXMLChild(node, "intent"))) {
            if (vrmXMLChild(node, "job") || vrmXMLChild(node, "host-info")) {
                vrmReportError(VRM_ERR_XML,
                               _("a reply carries jobs, an intent or host information, not several of them"));
                return -1;
            }
            return (msg->intentRecord = vrmIntentRecordParseNode(child)) ? 0 : -1;
        }
        if ((child = vrmXMLChild(node, "host-info"))) {
            if (vrmXMLChild(node, "job")) {
                vrmReportError(VRM_ERR_XML,
                               _("a reply carries jobs, an intent or host information, not several of them"));
                return -1;
            }
            return (msg->hostInfo = vrmHostInfoParseNode(child)) ? 0 : -1;
        }
        for (child = node->children; child; child = child->next) {
            vrmJobRecord *job;

            if (!vrmXMLIsElement(child, NULL, "job"))
                continue;
            if (!(job = vrmJobRecordParseNode(child)))
                return -1;
            g_ptr_array_add(msg->jobs, job);
        }
        return 0;
    }

    if (vrmXMLCheckChildren(node, errorChildren) < 0 ||
        !(child = vrmXMLRequiredChild(node, "error")) ||
        vrmXMLCheckAttributes(child, errorAttrs) < 0 ||
        vrmXMLPropErrorCode(child, "code", &msg->errorCode) < 0 ||
        vrmXMLTextContent(child, &msg->errorMessage) < 0)
        return -1;
    return 0;
}

vrmControlMessage *
vrmControlMessageParseXML(xmlXPathContextPtr ctxt)
{
    xmlNodePtr node = ctxt->node;
    g_autoptr(vrmControlMessage) msg = NULL;
    int type = vrmControlTypeTypeFromString((const char *)node->name);
    int rc = -1;

    if (type < 0 || node->ns) {
        g_autofree char *name = vrmXMLNodeName(node);
        g_autofree char *list = vrmEnumAllowedValues(vrmControlTypeTypeToString,
                                                     VRM_CONTROL_LAST);

        vrmReportError(VRM_ERR_XML,
                       _("unknown control message '%1$s'; allowed messages: %2$s"),
                       name, list);
        return NULL;
    }
    msg = vrmControlMessageNew(type);
    switch ((vrmControlType)type) {
    case VRM_CONTROL_JOB_INCOMING:
        rc = vrmControlParseJobIncoming(node, msg);
        break;
    case VRM_CONTROL_JOB_PREPARE:
        rc = vrmControlParseJobPrepare(node, msg);
        break;
    case VRM_CONTROL_HOST_INFO:
        rc = vrmXMLCheckLeaf(node, noAttrs);
        break;
    case VRM_CONTROL_JOB_QUERY:
    case VRM_CONTROL_JOB_CANCEL:
        rc = vrmControlParseJobId(node, msg, type == VRM_CONTROL_JOB_QUERY);
        break;
    case VRM_CONTROL_JOB_LIST:
    case VRM_CONTROL_JOB_EVENTS:
        rc = vrmXMLCheckLeaf(node, noAttrs);
        break;
    case VRM_CONTROL_PEER_CHECK:
        rc = vrmControlParsePeerCheck(node, msg);
        break;
    case VRM_CONTROL_REPLY:
        rc = vrmControlParseReply(node, msg);
        break;
    case VRM_CONTROL_LAST:
        break;
    }
    if (rc < 0)
        return NULL;
    return g_steal_pointer(&msg);
}

vrmControlMessage *
vrmControlMessageParseNode(xmlDocPtr doc, xmlNodePtr root)
{
    g_autoptr(xmlXPathContext) ctxt = NULL;

    if (!root) {
        vrmReportError(VRM_ERR_XML, _("control message has no root element"));
        return NULL;
    }
    if (!(ctxt = vrmXMLNewContext(doc)))
        return NULL;
    ctxt->node = root;
    return vrmControlMessageParseXML(ctxt);
}

static void *
vrmControlMessageParseRoot(xmlDocPtr doc, xmlNodePtr root)
{
    return vrmControlMessageParseNode(doc, root);
}

vrmControlMessage *
vrmControlMessageParseString(const char *xml)
{
    g_autoptr(xmlDoc) doc = NULL;
    const char *what = _("control message");

    if (!(doc = vrmXMLParseMemory(xml, xml ? strlen(xml) : 0, what, false)))
        return NULL;
    return vrmXMLParseValidated(doc, VRM_XML_SCHEMA_CONTROL, what,
                                vrmControlMessageParseRoot,
                                (GDestroyNotify)vrmControlMessageFree);
}

char *
vrmControlMessageFormat(const vrmControlMessage *msg)
{
    GString *buf = g_string_new(NULL);
    const char *name = vrmControlTypeTypeToString(msg->type);
    size_t i;

    switch (msg->type) {
    case VRM_CONTROL_JOB_INCOMING:
    case VRM_CONTROL_JOB_PREPARE:
        g_string_append_printf(buf, "<%s>\n", name);
        vrmControlFormatDomain(buf, 1, msg->domainName, msg->domainUUID);
        if (msg->migration && msg->type != VRM_CONTROL_JOB_PREPARE)
            vrmMigrationDefFormatBuf(buf, msg->migration, NULL, 1);
        if (msg->overrides && msg->type == VRM_CONTROL_JOB_PREPARE) {
            if (vrmMigrationParamsIsEmpty(msg->overrides)) {
                g_string_append(buf, "  <overrides/>\n");
            } else {
                g_string_append(buf, "  <overrides>\n");
                vrmMigrationParamsFormatBuf(buf, msg->overrides, 2);
                g_string_append(buf, "  </overrides>\n");
            }
        }
        g_string_append_printf(buf, "</%s>\n", name);
        break;

    case VRM_CONTROL_JOB_QUERY:
    case VRM_CONTROL_JOB_CANCEL:
        g_string_append_printf(buf, "<%s", name);
        if (msg->hasIntent)
            vrmXMLAttrULLong(buf, "intent", msg->intent);
        else if (msg->hasId || msg->type == VRM_CONTROL_JOB_CANCEL)
            vrmXMLAttrULLong(buf, "id", msg->id);
        else
            vrmXMLAttrStr(buf, "domain", msg->domainName ? msg->domainName : "");
        g_string_append(buf, "/>\n");
        break;

    case VRM_CONTROL_HOST_INFO:
    case VRM_CONTROL_JOB_LIST:
    case VRM_CONTROL_JOB_EVENTS:
        g_string_append_printf(buf, "<%s/>\n", name);
        break;

    case VRM_CONTROL_PEER_CHECK:
        g_string_append_printf(buf, "<%s", name);
        vrmXMLAttrStr(buf, "host", msg->peerHost ? msg->peerHost : "");
        vrmXMLAttrStr(buf, "address", msg->peerAddress ? msg->peerAddress : "");
        g_string_append(buf, "/>\n");
        break;

    case VRM_CONTROL_REPLY:
        g_string_append_printf(buf, "<reply status=\"%s\"",
                               vrmReplyStatusTypeToString(msg->status));
        if (msg->status == VRM_REPLY_ERROR) {
            const char *code = vrmErrorCodeTypeToString(msg->errorCode);

            g_string_append(buf, ">\n  <error");
            vrmXMLAttrStr(buf, "code", code ? code : "internal");
            g_string_append(buf, ">");
            vrmXMLEscapeText(buf, msg->errorMessage ? msg->errorMessage : "");
            g_string_append(buf, "</error>\n</reply>\n");
        } else if (msg->intentRecord) {
            g_string_append(buf, ">\n");
            vrmIntentRecordFormatBuf(buf, msg->intentRecord, 1);
            g_string_append(buf, "</reply>\n");
        } else if (msg->hostInfo) {
            g_autoptr(GString) info = g_string_new(NULL);
            g_auto(GStrv) lines = NULL;
            size_t j;

            vrmHostInfoFormatBuf(info, msg->hostInfo);
            lines = g_strsplit(info->str, "\n", -1);
            g_string_append(buf, ">\n");
            for (j = 0; lines[j]; j++) {
                if (*lines[j])
                    g_string_append_printf(buf, "  %s\n", lines[j]);
            }
            g_string_append(buf, "</reply>\n");
        } else if (msg->jobs->len == 0) {
            g_string_append(buf, "/>\n");
        } else {
            g_string_append(buf, ">\n");
            for (i = 0; i < msg->jobs->len; i++)
                vrmJobRecordFormatBuf(buf, g_ptr_array_index(msg->jobs, i), 1);
            g_string_append(buf, "</reply>\n");
        }
        break;

    case VRM_CONTROL_LAST:
        break;
    }
    return g_string_free(buf, FALSE);
}
