/*
 * vrmcontrol.h: messages between the tools (CLI, hook) and virt-rdmad
 *
 * One XML document per message; the framing (length prefix) belongs to
 * the socket code, not here. Root elements are in no namespace; the
 * migration parameters, offer and answer travel as the same
 * <rdma:migration> element as in the domain metadata. Schema:
 * xml/schemas/control.rng. Documentation and examples: docs/xml.rst.
 *
 *   <job-incoming>  the destination's hook -> its helper: a migration of
 *                   this domain arrives; negotiate it with the source's helper
 *     <domain name="web1" uuid="..."/>
 *     <rdma:migration xmlns:rdma="...">parameters, <locator/></rdma:migration>
 *   </job-incoming>
 *   <job-prepare>   tool/library -> the source's helper: an intent
 *     <domain name="web1" uuid="..."/>
 *     <overrides><channels count="5"/>...</overrides>   command-line values
 *   </job-prepare>
 *   <host-info/>    what the helper sees of its host (virt-rdma capabilities)
 *   <job-query id="42"/>, <job-query domain="web1"/>, <job-query intent="7"/>
 *   <job-cancel id="42"/>, <job-cancel intent="7"/>
 *   <job-list/>
 *   <job-events/>   a subscription: <reply status="ok"/>, then one
 *                   <reply status="ok"><job .../></reply> each time a job
 *                   the caller may see changes state, until it hangs up
 *   <peer-check host="hv-2" address="192.0.2.2"/>   (root) a TLS handshake
 *                   with that host's helper on the configured port: ok, or
 *                   why not
 *   <reply status="ok"> <job .../>* | <intent .../> | <host-info .../> </reply>
 *   <reply status="error"><error code="policy">message</error></reply>
 *
 *   <job id="42" role="source" state="transferring" owner="0" intent="7">
 *     <domain name="web1" uuid="..."/>
 *     <socket path="/run/virt-rdma/qemu/UUID/migrate.sock"/>
 *     <rdma:migration ...><locator/><offer/><answer/></rdma:migration>
 *                     (the peer's locator; the offer without its token)
 *     <stats bytes-sent=".." bytes-received=".." mbps=".." chunks=".."
 *            pinned-bytes=".." registration-ns=".." channels=".."
 *            [cpu-ns=".."] [capabilities="0x.."]/>
 *     <error code="peer">why it failed</error>
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
 *   vrmJobRecordNew() / Free / Copy          one <job>
 *   vrmJobRecordParseNode(node)  vrmJobRecordFormatBuf(buf, job, level)
 *                                            a record never carries a token:
 *                                            the parser refuses one
 *   vrmIntentRecordNew() / Free              one <intent>
 *   vrmHostInfoNew() / Free                  <host-info> of a reply
 * Enums: vrmControlType, vrmJobRole, vrmJobState, vrmReplyStatus,
 *   vrmIntentState, vrmHostInfoStatus.
 */
#pragma once

#include "vrmmigrationdef.h"
#include "vrmjobstat.h"

typedef enum {
    VRM_CONTROL_JOB_INCOMING,
    VRM_CONTROL_JOB_PREPARE,
    VRM_CONTROL_HOST_INFO,
    VRM_CONTROL_JOB_QUERY,
    VRM_CONTROL_JOB_CANCEL,
    VRM_CONTROL_JOB_LIST,
    VRM_CONTROL_JOB_EVENTS,
    VRM_CONTROL_PEER_CHECK,
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
    VRM_JOB_STATE_OVER_TCP,     /* RDMA could not carry it: libvirt's TCP did
                                 * ([migration] fallback = tcp); error says why */
    VRM_JOB_STATE_UNKNOWN,      /* the engine completed, libvirt could not be
                                 * asked how the migration ended */

    VRM_JOB_STATE_LAST
} vrmJobState;
VRM_ENUM_DECL(vrmJobState);
/* completed, failed, cancelled, over-tcp, unknown: the job will not change
 * again */
bool vrmJobStateIsFinal(vrmJobState state);

typedef enum {
    VRM_REPLY_OK,
    VRM_REPLY_ERROR,

    VRM_REPLY_LAST
} vrmReplyStatus;
VRM_ENUM_DECL(vrmReplyStatus);

typedef enum {
    VRM_INTENT_STATE_PENDING,   /* registered, no migration used it yet */
    VRM_INTENT_STATE_USED,      /* a migration of its domain used it */
    VRM_INTENT_STATE_EXPIRED,   /* not used in time */
    VRM_INTENT_STATE_CANCELLED, /* its owner withdrew it */

    VRM_INTENT_STATE_LAST
} vrmIntentState;
VRM_ENUM_DECL(vrmIntentState);

typedef enum {
    VRM_HOST_INFO_STATUS_OK,
    VRM_HOST_INFO_STATUS_ERROR,     /* configured, but does not work */
    VRM_HOST_INFO_STATUS_OFF,       /* not configured */

    VRM_HOST_INFO_STATUS_LAST
} vrmHostInfoStatus;
VRM_ENUM_DECL(vrmHostInfoStatus);


typedef struct _vrmJobRecord vrmJobRecord;
struct _vrmJobRecord {
    unsigned long long id;
    bool hasOwner;
    unsigned int owner;             /* uid of whoever opened it */
    bool hasIntent;
    unsigned long long intent;      /* the intent it used */
    bool hasRecoveryOf;
    unsigned long long recoveryOf;  /* the job of this host whose broken
                                     * post-copy migration it recovers */
    char *domainName;
    char *domainUUID;               /* NULL if unknown */
    vrmJobRole role;
    vrmJobState state;
    char *socketPath;               /* UNIX path QEMU uses, NULL if none yet */
    vrmMigrationDef *migration;     /* offer/answer, NULL if none */
    bool hasStats;
    vrmJobStats stats;
    char *error;                    /* why it failed, NULL otherwise */
    int errorCode;                  /* vrmErrorCode of error; VRM_ERR_OK
                                     * when error is NULL */
};

vrmJobRecord *vrmJobRecordNew(void);
void vrmJobRecordFree(vrmJobRecord *job);
vrmJobRecord *vrmJobRecordCopy(const vrmJobRecord *job);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmJobRecord, vrmJobRecordFree);
vrmJobRecord *vrmJobRecordParseNode(xmlNodePtr node);
void vrmJobRecordFormatBuf(GString *buf, const vrmJobRecord *job,
                           unsigned int level);

typedef struct _vrmIntentRecord vrmIntentRecord;
struct _vrmIntentRecord {
    unsigned long long id;
    vrmIntentState state;
    bool hasJob;
    unsigned long long job;         /* the job that used it */
    char *domainName;
    char *domainUUID;
    char *socketPath;               /* the per-domain path: unix://PATH */
};

vrmIntentRecord *vrmIntentRecordNew(void);
void vrmIntentRecordFree(vrmIntentRecord *intent);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmIntentRecord, vrmIntentRecordFree);

typedef struct {
    char *name;                     /* RDMA device */
    unsigned int port;
    char *state;                    /* "ACTIVE", "DOWN"... */
    char *address;                  /* IP of its netdev, NULL if none */
} vrmHostInfoDevice;

typedef struct _vrmHostInfo vrmHostInfo;
struct _vrmHostInfo {
    char *version;                  /* the helper's */
    unsigned int uid;               /* the helper's */
    unsigned int runningJobs;
    unsigned int maxJobs;
    unsigned int maxChannels;
    unsigned int maxRingDepth;
    guint32 chunkSizes;             /* bit n: 2^n bytes */
    unsigned long long budget;      /* max-pinned-bytes of all jobs together */
    unsigned long long pinnedUsed;  /* allowances of the running jobs */
    unsigned long long pinnedOneChannel; /* one channel at the defaults */
    unsigned long long pinnedLargestOffer; /* a job at the largest offer */
    bool memlockUnlimited;          /* the helper's own hard limit */
    unsigned long long memlockLimit;
    bool memlockCanRaise;           /* it may raise it (CAP_SYS_RESOURCE) */
    char *engineUser;
    vrmHostInfoStatus engineStatus;
    char *engineMessage;
    char *peerAuth;                 /* "psk", "x509" or "none" */
    vrmHostInfoStatus peerStatus;
    char *peerMessage;
    vrmLocator *locator;            /* NULL: the channel is off */
    char *libvirtURI;
    vrmHostInfoStatus libvirtStatus;
    char *libvirtMessage;
    char *transparentMode;          /* [migration] rdma; NULL: an older helper */
    vrmHostInfoStatus transparentStatus;
    char *transparentMessage;
    GPtrArray *devices;             /* vrmHostInfoDevice */
};

vrmHostInfo *vrmHostInfoNew(void);
void vrmHostInfoFree(vrmHostInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmHostInfo, vrmHostInfoFree);
void vrmHostInfoAddDevice(vrmHostInfo *info, const char *name,
                          unsigned int port, const char *state,
                          const char *address);

typedef struct _vrmControlMessage vrmControlMessage;
struct _vrmControlMessage {
    vrmControlType type;
    /* job-incoming, job-prepare; job-query by domain (name only) */
    char *domainName;
    char *domainUUID;
    /* job-incoming: the incoming domain's element (required) */
    vrmMigrationDef *migration;
    /* job-prepare: command-line overrides (may be NULL) */
    vrmMigrationParams *overrides;
    /* peer-check: the helper to try (its port: the configured one) */
    char *peerHost;
    char *peerAddress;
    /* job-query (or domainName or intent), job-cancel (or intent) */
    bool hasId;
    unsigned long long id;
    bool hasIntent;
    unsigned long long intent;
    /* reply */
    vrmReplyStatus status;
    int errorCode;                  /* vrmErrorCode, when status is error */
    char *errorMessage;
    GPtrArray *jobs;                /* vrmJobRecord, when status is ok */
    vrmIntentRecord *intentRecord;  /* or one intent */
    vrmHostInfo *hostInfo;          /* or what the helper sees */
};

vrmControlMessage *vrmControlMessageNew(vrmControlType type);
void vrmControlMessageFree(vrmControlMessage *msg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmControlMessage, vrmControlMessageFree);
vrmControlMessage *vrmControlReplyNewError(int code, const char *message);

vrmControlMessage *vrmControlMessageParseString(const char *xml);
vrmControlMessage *vrmControlMessageParseNode(xmlDocPtr doc, xmlNodePtr root);
vrmControlMessage *vrmControlMessageParseXML(xmlXPathContextPtr ctxt);
char *vrmControlMessageFormat(const vrmControlMessage *msg);
