/*
 * vrmcontrol.h: messages between the tools (CLI, hook) and virt-rdmad
 *
 * One XML document per message; the framing (length prefix) belongs to
 * the socket code, not here. Root elements are in no namespace; the
 * migration parameters, offer and answer travel as the same
 * <rdma:migration> element as in the domain metadata. Schema:
 * xml/schemas/control.rng. Documentation and examples: docs/xml.rst.
 *
 *   <job-open>      tool -> helper: open an outgoing job
 *     <domain name="web1" uuid="..."/>
 *     <rdma:migration xmlns:rdma="...">parameters from the metadata</rdma:migration>
 *     <overrides><channels count="4"/>...</overrides>   command-line values
 *   </job-open>
 *   <job-accept>    hook -> helper: accept an incoming offer
 *     <domain .../> <rdma:migration ...><offer .../></rdma:migration>
 *   </job-accept>
 *   <job-query id="42"/>  or  <job-query domain="web1"/>
 *   <job-cancel id="42"/>
 *   <job-list/>
 *   <reply status="ok"> <job .../>* </reply>
 *   <reply status="error"><error code="policy">message</error></reply>
 *
 *   <job id="42" role="source" state="transferring">
 *     <domain name="web1" uuid="..."/>
 *     <socket path="/run/virt-rdma/job-42.sock"/>
 *     <rdma:migration ...><offer/><answer/></rdma:migration>
 *     <stats bytes-sent=".." bytes-received=".." mbps=".." chunks=".."
 *            pinned-bytes=".." registration-ns=".." channels=".."
 *            [cpu-ns=".."]/>
 *     <error>why it failed</error>
 *   </job>
 *
 * Public API summary
 * ------------------
 *   vrmControlMessageNew(type) / Free
 *   vrmControlReplyNewError(code, message)   <reply status="error">
 *   vrmControlMessageParseString(xml)        parse -> validate (control.rng)
 *   vrmControlMessageParseNode(doc, root)      -> root check -> ParseXML
 *   vrmControlMessageParseXML(ctxt)
 *   vrmControlMessageFormat(msg)             document text (no XML declaration)
 *   vrmJobRecordNew() / Free                 one <job>
 *   vrmJobRecordParseNode(node)  vrmJobRecordFormatBuf(buf, job, level)
 * Enums: vrmControlType, vrmJobRole, vrmJobState, vrmReplyStatus.
 */
#pragma once

#include "vrmmigrationdef.h"

typedef enum {
    VRM_CONTROL_JOB_OPEN,
    VRM_CONTROL_JOB_ACCEPT,
    VRM_CONTROL_JOB_QUERY,
    VRM_CONTROL_JOB_CANCEL,
    VRM_CONTROL_JOB_LIST,
    VRM_CONTROL_REPLY,

    VRM_CONTROL_LAST
} vrmControlType;
VRM_ENUM_DECL(vrmControlType);

typedef enum {
    VRM_JOB_ROLE_SOURCE,
    VRM_JOB_ROLE_DESTINATION,

    VRM_JOB_ROLE_LAST
} vrmJobRole;
VRM_ENUM_DECL(vrmJobRole);

typedef enum {
    VRM_JOB_STATE_NEGOTIATING,  /* offer made or being checked */
    VRM_JOB_STATE_CONNECTED,    /* engines connected, no channel yet */
    VRM_JOB_STATE_TRANSFERRING, /* QEMU streams flowing */
    VRM_JOB_STATE_COMPLETED,
    VRM_JOB_STATE_FAILED,
    VRM_JOB_STATE_CANCELLED,

    VRM_JOB_STATE_LAST
} vrmJobState;
VRM_ENUM_DECL(vrmJobState);

typedef enum {
    VRM_REPLY_OK,
    VRM_REPLY_ERROR,

    VRM_REPLY_LAST
} vrmReplyStatus;
VRM_ENUM_DECL(vrmReplyStatus);

typedef struct {
    unsigned long long bytesSent;
    unsigned long long bytesReceived;
    unsigned int mbps;                  /* current or final rate, Mbit/s */
    unsigned long long chunks;          /* chunks written */
    unsigned long long pinnedBytes;     /* bytes registered at the peak */
    unsigned long long registrationNs;  /* time spent registering memory */
    unsigned int channels;              /* channels open (or used) */
    bool hasCpu;                        /* cpuNs known (older helpers do not send it) */
    unsigned long long cpuNs;           /* the engine's own CPU time, user + system */
} vrmJobStats;

typedef struct _vrmJobRecord vrmJobRecord;
struct _vrmJobRecord {
    unsigned long long id;
    char *domainName;
    char *domainUUID;               /* NULL if unknown */
    vrmJobRole role;
    vrmJobState state;
    char *socketPath;               /* UNIX path QEMU uses, NULL if none yet */
    vrmMigrationDef *migration;     /* offer/answer, NULL if none */
    bool hasStats;
    vrmJobStats stats;
    char *error;                    /* why it failed, NULL otherwise */
};

vrmJobRecord *vrmJobRecordNew(void);
void vrmJobRecordFree(vrmJobRecord *job);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmJobRecord, vrmJobRecordFree);
vrmJobRecord *vrmJobRecordParseNode(xmlNodePtr node);
void vrmJobRecordFormatBuf(GString *buf, const vrmJobRecord *job,
                           unsigned int level);

typedef struct _vrmControlMessage vrmControlMessage;
struct _vrmControlMessage {
    vrmControlType type;
    /* job-open, job-accept; job-query by domain (name only) */
    char *domainName;
    char *domainUUID;
    /* job-open: parameters from the metadata (may be NULL);
     * job-accept: the element carrying the offer (required) */
    vrmMigrationDef *migration;
    /* job-open: command-line overrides (may be NULL) */
    vrmMigrationParams *overrides;
    /* job-query (or domainName), job-cancel */
    bool hasId;
    unsigned long long id;
    /* reply */
    vrmReplyStatus status;
    int errorCode;                  /* vrmErrorCode, when status is error */
    char *errorMessage;
    GPtrArray *jobs;                /* vrmJobRecord, when status is ok */
};

vrmControlMessage *vrmControlMessageNew(vrmControlType type);
void vrmControlMessageFree(vrmControlMessage *msg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmControlMessage, vrmControlMessageFree);
vrmControlMessage *vrmControlReplyNewError(int code, const char *message);

vrmControlMessage *vrmControlMessageParseString(const char *xml);
vrmControlMessage *vrmControlMessageParseNode(xmlDocPtr doc, xmlNodePtr root);
vrmControlMessage *vrmControlMessageParseXML(xmlXPathContextPtr ctxt);
char *vrmControlMessageFormat(const vrmControlMessage *msg);
