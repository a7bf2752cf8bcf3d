/*
 * vrmcontrol.c: messages between the tools (CLI, hook) and virt-rdmad
 */
#include <config.h>

#include <string.h>

#include "vrmcontrol.h"
#include "vrmerror.h"
#include "vrmi18n.h"

VRM_ENUM_IMPL(vrmControlType, VRM_CONTROL_LAST,
              "job-open",
              "job-accept",
              "job-query",
              "job-cancel",
              "job-list",
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
);

VRM_ENUM_IMPL(vrmReplyStatus, VRM_REPLY_LAST,
              "ok",
              "error",
);

/* Longest UNIX socket path accepted in a job record. */
#define VRM_CONTROL_PATH_MAX 4096

static const char *const noAttrs[] = { NULL };

static int
vrmErrorCodeFromString(const char *str)
{
    int i;

    for (i = 0; i < VRM_ERR_LAST; i++) {
        if (g_strcmp0(vrmErrorCodeTypeToString(i), str) == 0)
            return i;
    }
    return -1;
}

static const char *
vrmErrorCodeToString(int code)
{
    return vrmErrorCodeTypeToString(code);
}


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

static void
vrmJobRecordFreeFunc(gpointer job)
{
    vrmJobRecordFree(job);
}

/* <domain name="..." uuid="..."/>; @nameOnly refuses a uuid. */
static int
vrmControlParseDomain(xmlNodePtr node, char **name, char **uuid)
{
    static const char *const attrs[] = { "name", "uuid", NULL };

    if (vrmXMLCheckLeaf(node, attrs) < 0 ||
        vrmXMLPropString(node, "name", true, name) < 0 ||
        vrmXMLPropString(node, "uuid", false, uuid) < 0)
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

static int
vrmJobRecordParseStats(xmlNodePtr node, vrmJobStats *stats)
{
    static const char *const attrs[] = {
        "bytes-sent", "bytes-received", "mbps", "chunks", "pinned-bytes",
        "registration-ns", "channels", "cpu-ns", NULL
    };
    int rc;

    if (vrmXMLCheckLeaf(node, attrs) < 0 ||
        vrmXMLPropULLong(node, "bytes-sent", true, 0, G_MAXUINT64,
                         &stats->bytesSent) < 0 ||
        vrmXMLPropULLong(node, "bytes-received", true, 0, G_MAXUINT64,
                         &stats->bytesReceived) < 0 ||
        vrmXMLPropUInt(node, "mbps", true, 0, G_MAXUINT32, &stats->mbps) < 0 ||
        vrmXMLPropULLong(node, "chunks", true, 0, G_MAXUINT64,
                         &stats->chunks) < 0 ||
        vrmXMLPropULLong(node, "pinned-bytes", true, 0, G_MAXUINT64,
                         &stats->pinnedBytes) < 0 ||
        vrmXMLPropULLong(node, "registration-ns", true, 0, G_MAXUINT64,
                         &stats->registrationNs) < 0 ||
        vrmXMLPropUInt(node, "channels", true, 0, VRM_CHANNELS_MAX,
                       &stats->channels) < 0)
        return -1;
    if ((rc = vrmXMLPropULLong(node, "cpu-ns", false, 0, G_MAXUINT64,
                               &stats->cpuNs)) < 0)
        return -1;
    stats->hasCpu = rc == 1;
    return 0;
}

vrmJobRecord *
vrmJobRecordParseNode(xmlNodePtr node)
{
    static const char *const attrs[] = { "id", "role", "state", NULL };
    static const char *const children[] = {
        "domain", "socket", "rdma:migration", "stats", "error", NULL
    };
    static const char *const socketAttrs[] = { "path", NULL };
    g_autoptr(vrmJobRecord) job = vrmJobRecordNew();
    xmlNodePtr child;
    int role;
    int state;

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

    if (!(child = vrmXMLRequiredChild(node, "domain")) ||
        vrmControlParseDomain(child, &job->domainName, &job->domainUUID) < 0)
        return NULL;

    if ((child = vrmXMLChild(node, "socket"))) {
        if (vrmXMLCheckLeaf(child, socketAttrs) < 0 ||
            vrmXMLPropString(child, "path", true, &job->socketPath) < 0)
            return NULL;
        if (job->socketPath[0] != '/' || strchr(job->socketPath, '\n') ||
            strlen(job->socketPath) >= VRM_CONTROL_PATH_MAX) {
            g_autofree char *bad = vrmXMLQuote(job->socketPath);

            vrmReportError(VRM_ERR_XML,
                           _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected an absolute path of one line, shorter than %4$d bytes"),
                           "path", "socket", bad, VRM_CONTROL_PATH_MAX);
            return NULL;
        }
    }

    if ((child = vrmControlMigrationChild(node)) &&
        !(job->migration = vrmMigrationDefParseElement(child)))
        return NULL;

    if ((child = vrmXMLChild(node, "stats"))) {
        if (vrmJobRecordParseStats(child, &job->stats) < 0)
            return NULL;
        job->hasStats = true;
    }

    if ((child = vrmXMLChild(node, "error")) &&
        (vrmXMLCheckAttributes(child, noAttrs) < 0 ||
         vrmXMLTextContent(child, &job->error) < 0))
        return NULL;

    return g_steal_pointer(&job);
}

void
vrmJobRecordFormatBuf(GString *buf, const vrmJobRecord *job, unsigned int level)
{
    vrmXMLIndent(buf, level);
    g_string_append_printf(buf, "<job id=\"%llu\" role=\"%s\" state=\"%s\">\n",
                           job->id, vrmJobRoleTypeToString(job->role),
                           vrmJobStateTypeToString(job->state));
    vrmControlFormatDomain(buf, level + 1, job->domainName, job->domainUUID);
    if (job->socketPath) {
        vrmXMLIndent(buf, level + 1);
        g_string_append(buf, "<socket");
        vrmXMLAttrStr(buf, "path", job->socketPath);
        g_string_append(buf, "/>\n");
    }
    if (job->migration)
        vrmMigrationDefFormatBuf(buf, job->migration, NULL, level + 1);
    if (job->hasStats) {
        const vrmJobStats *s = &job->stats;

        vrmXMLIndent(buf, level + 1);
        g_string_append(buf, "<stats");
        vrmXMLAttrULLong(buf, "bytes-sent", s->bytesSent);
        vrmXMLAttrULLong(buf, "bytes-received", s->bytesReceived);
        vrmXMLAttrUInt(buf, "mbps", s->mbps);
        vrmXMLAttrULLong(buf, "chunks", s->chunks);
        vrmXMLAttrULLong(buf, "pinned-bytes", s->pinnedBytes);
        vrmXMLAttrULLong(buf, "registration-ns", s->registrationNs);
        vrmXMLAttrUInt(buf, "channels", s->channels);
        if (s->hasCpu)
            vrmXMLAttrULLong(buf, "cpu-ns", s->cpuNs);
        g_string_append(buf, "/>\n");
    }
    if (job->error) {
        vrmXMLIndent(buf, level + 1);
        g_string_append(buf, "<error>");
        vrmXMLEscapeText(buf, job->error);
        g_string_append(buf, "</error>\n");
    }
    vrmXMLIndent(buf, level);
    g_string_append(buf, "</job>\n");
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

static int
vrmControlParseJobOpen(xmlNodePtr node, vrmControlMessage *msg, bool accept)
{
    static const char *const openChildren[] = {
        "domain", "rdma:migration", "overrides", NULL
    };
    static const char *const acceptChildren[] = {
        "domain", "rdma:migration", NULL
    };
    xmlNodePtr child;

    if (vrmXMLCheckAttributes(node, noAttrs) < 0 ||
        vrmXMLCheckChildren(node, accept ? acceptChildren : openChildren) < 0)
        return -1;
    if (!(child = vrmXMLRequiredChild(node, "domain")) ||
        vrmControlParseDomain(child, &msg->domainName, &msg->domainUUID) < 0)
        return -1;

    if ((child = vrmControlMigrationChild(node)) &&
        !(msg->migration = vrmMigrationDefParseElement(child)))
        return -1;
    if (accept && (!msg->migration || !msg->migration->offer)) {
        vrmReportError(VRM_ERR_XML,
                       _("element '%1$s' needs an 'offer' inside its '%2$s:migration' element"),
                       "job-accept", VRM_XML_NS_PREFIX);
        return -1;
    }

    if ((child = vrmXMLChild(node, "overrides"))) {
        msg->overrides = g_new0(vrmMigrationParams, 1);
        if (vrmXMLCheckAttributes(child, noAttrs) < 0 ||
            vrmMigrationParamsParseNode(child, msg->overrides, NULL) < 0)
            return -1;
    }
    return 0;
}

static int
vrmControlParseJobId(xmlNodePtr node, vrmControlMessage *msg, bool query)
{
    static const char *const queryAttrs[] = { "id", "domain", NULL };
    static const char *const cancelAttrs[] = { "id", NULL };
    int rc;

    if (vrmXMLCheckLeaf(node, query ? queryAttrs : cancelAttrs) < 0 ||
        (rc = vrmXMLPropULLong(node, "id", !query, 0, G_MAXUINT64,
                               &msg->id)) < 0)
        return -1;
    msg->hasId = rc > 0;
    if (!query)
        return 0;

    if (vrmXMLPropString(node, "domain", false, &msg->domainName) < 0)
        return -1;
    if (msg->hasId == (msg->domainName != NULL)) {
        vrmReportError(VRM_ERR_XML,
                       _("element '%1$s' needs exactly one of the attributes '%2$s' and '%3$s'"),
                       "job-query", "id", "domain");
        return -1;
    }
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
    static const char *const okChildren[] = { "job*", NULL };
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
        vrmXMLPropEnum(child, "code", true, vrmErrorCodeFromString,
                       vrmErrorCodeToString, VRM_ERR_LAST,
                       &msg->errorCode) < 0 ||
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
    case VRM_CONTROL_JOB_OPEN:
    case VRM_CONTROL_JOB_ACCEPT:
        rc = vrmControlParseJobOpen(node, msg, type == VRM_CONTROL_JOB_ACCEPT);
        break;
    case VRM_CONTROL_JOB_QUERY:
    case VRM_CONTROL_JOB_CANCEL:
        rc = vrmControlParseJobId(node, msg, type == VRM_CONTROL_JOB_QUERY);
        break;
    case VRM_CONTROL_JOB_LIST:
        rc = vrmXMLCheckLeaf(node, noAttrs);
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

vrmControlMessage *
vrmControlMessageParseString(const char *xml)
{
    g_autoptr(xmlDoc) doc = NULL;
    g_autofree char *schemaMsg = NULL;
    const char *what = _("control message");
    vrmControlMessage *msg;
    int rc;

    if (!(doc = vrmXMLParseMemory(xml, xml ? strlen(xml) : 0, what, false)))
        return NULL;
    if ((rc = vrmXMLValidate(doc, VRM_XML_SCHEMA_CONTROL, &schemaMsg)) < 0)
        return NULL;
    /* as for the migration XML: the parser words the errors */
    msg = vrmControlMessageParseNode(doc, xmlDocGetRootElement(doc));
    if (rc == 0 || !msg)
        return msg;
    vrmControlMessageFree(msg);
    /* a check missing from the parser: a bug, hence INTERNAL */
    vrmReportError(VRM_ERR_INTERNAL, _("%1$s does not match the schema '%2$s': %3$s"),
                   what, vrmXMLSchemaTypeToString(VRM_XML_SCHEMA_CONTROL),
                   schemaMsg);
    return NULL;
}

char *
vrmControlMessageFormat(const vrmControlMessage *msg)
{
    GString *buf = g_string_new(NULL);
    const char *name = vrmControlTypeTypeToString(msg->type);
    size_t i;

    switch (msg->type) {
    case VRM_CONTROL_JOB_OPEN:
    case VRM_CONTROL_JOB_ACCEPT:
        g_string_append_printf(buf, "<%s>\n", name);
        vrmControlFormatDomain(buf, 1, msg->domainName, msg->domainUUID);
        if (msg->migration)
            vrmMigrationDefFormatBuf(buf, msg->migration, NULL, 1);
        if (msg->overrides && msg->type == VRM_CONTROL_JOB_OPEN) {
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
        if (msg->hasId || msg->type == VRM_CONTROL_JOB_CANCEL)
            vrmXMLAttrULLong(buf, "id", msg->id);
        else
            vrmXMLAttrStr(buf, "domain", msg->domainName ? msg->domainName : "");
        g_string_append(buf, "/>\n");
        break;

    case VRM_CONTROL_JOB_LIST:
        g_string_append_printf(buf, "<%s/>\n", name);
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
