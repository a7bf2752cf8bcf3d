/*
 * vrmmigrationdef.h: the <rdma:migration> element of a domain's <metadata>
 *
 *   <rdma:migration xmlns:rdma="http://virt-rdma.org/xmlns/migration/1.0">
 *     <transport device="mlx5_0" port="1" address="192.0.2.10"/>
 *     <pin-all/>                      capability elements, see vrmnegotiation.h
 *     <chunk size="1048576"/>
 *     <channels count="4"/>
 *     <ring depth="16"/>
 *     <bandwidth max="40000"/>        Mbit/s, 0 = unlimited
 *     <locator host="h1" address="192.0.2.1" port="16530"/>
 *                                     the virt-rdmad of the domain's host
 *                                     (live metadata only)
 *   </rdma:migration>
 *
 * <offer> and <answer> children of old versions are read, so that they can
 * be removed; offers and answers now travel between the helpers only
 * (xml/vrmpeer.h), and the token of an offer only there.
 *
 * The children are in no namespace (what virDomainSetMetadata() produces
 * from `virsh metadata --key rdma --uri ... --set '<migration>...'`).
 * Schema: xml/schemas/migration.rng. Documentation: docs/xml.rst.
 *
 * Public API summary
 * ------------------
 * Parameters (per domain, and overrides):
 *   vrmMigrationParamsClear/Free/Copy   lifetime
 *   vrmMigrationParamsMerge(dst, src)   values set in src override dst
 *   vrmMigrationParamsIsEmpty(p)
 *   vrmMigrationParamsParseNode(node, p)      children of <migration> or <overrides>
 *   vrmMigrationParamsFormatBuf(buf, p, lvl)  the same children
 * Locator:
 *   vrmLocatorNew/Free/Copy  vrmLocatorParseNode(node)
 *   vrmLocatorFormatBuf(buf, l, lvl)  vrmLocatorEqual(a, b)
 * Offer (source -> destination) and answer (destination -> source):
 *   vrmOfferNew/Free/Copy  vrmOfferParseNode(node)  vrmOfferFormat(o)
 *                                                   vrmOfferFormatBuf(buf, o, lvl)
 *   vrmAnswerNew/Free/Copy vrmAnswerParseNode(node) vrmAnswerFormat(a)
 *                                                   vrmAnswerFormatBuf(buf, a, lvl)
 *   vrmAnswerAddLimit(a, limit, asked, applied, allowed)
 * The whole element:
 *   vrmMigrationDefNew/Free
 *   vrmMigrationDefParseString(xml)   parse -> validate (migration.rng) ->
 *   vrmMigrationDefParseFile(path)      ParseNode (root check) -> ParseXML(ctxt)
 *   vrmMigrationDefParseNode(doc, root)
 *   vrmMigrationDefParseMetadata(xml) as virDomainGetMetadata() returns it
 *   vrmMigrationDefParseXML(ctxt)
 *   vrmMigrationDefParseElement(node) an element inside another document
 *                                     (domain XML, control message)
 *   vrmMigrationDefFormat(def)        "<rdma:migration xmlns:rdma=...>...\n"
 *   vrmMigrationDefFormatBuf(buf, def, prefix, level)
 * Enums (TypeToString/TypeFromString): vrmAnswerStatus, vrmRefusalReason,
 *   vrmLimit.
 *
 * Error handling: functions return NULL/-1 and report once with
 * vrmReportError(VRM_ERR_XML, ...); messages name the element, the
 * attribute, the bad value and the allowed values.
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

#include "vrmxmlutil.h"
#include "vrmtoken.h"

typedef struct _vrmMigrationParams vrmMigrationParams;
struct _vrmMigrationParams {
    char *device;               /* <transport device>: RDMA device, NULL: host default */
    unsigned int devicePort;    /* <transport port>: device port, 0: host default */
    char *address;              /* <transport address>: IP literal, NULL: host default */
    guint32 capsOn;             /* capability bits switched on (<pin-all/>) */
    guint32 capsOff;            /* capability bits switched off (<pin-all enabled="no"/>) */
    unsigned int chunkSize;     /* <chunk size>: bytes, 0: default */
    unsigned int channels;      /* <channels count>: 0: default */
    unsigned int ringDepth;     /* <ring depth>: 0: default */
    bool hasBandwidth;          /* <bandwidth> present */
    unsigned int bandwidth;     /* <bandwidth max>: Mbit/s, 0: unlimited */
};

void vrmMigrationParamsClear(vrmMigrationParams *params);
void vrmMigrationParamsFree(vrmMigrationParams *params);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmMigrationParams, vrmMigrationParamsFree);
void vrmMigrationParamsCopy(vrmMigrationParams *dst,
                            const vrmMigrationParams *src);
void vrmMigrationParamsMerge(vrmMigrationParams *dst,
                             const vrmMigrationParams *overrides);
bool vrmMigrationParamsIsEmpty(const vrmMigrationParams *params);
/*
 * Parse the parameter children of @node into @params. Children other than
 * parameters are refused unless listed in @extra (NULL-terminated, may be
 * NULL): <migration> passes "offer" and "answer".
 */
int vrmMigrationParamsParseNode(xmlNodePtr node, vrmMigrationParams *params,
                                const char *const *extra);
void vrmMigrationParamsFormatBuf(GString *buf, const vrmMigrationParams *params,
                                 unsigned int level);


/* <locator>: where the virt-rdmad of a domain's host answers its peers */
typedef struct _vrmLocator vrmLocator;
struct _vrmLocator {
    char *host;                 /* host name (checked against its x509 certificate) */
    char *address;              /* IP literal of the helpers' channel */
    unsigned int port;          /* TCP port of the helpers' channel */
};

vrmLocator *vrmLocatorNew(const char *host, const char *address,
                          unsigned int port);
void vrmLocatorFree(vrmLocator *locator);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmLocator, vrmLocatorFree);
vrmLocator *vrmLocatorCopy(const vrmLocator *locator);
bool vrmLocatorEqual(const vrmLocator *a, const vrmLocator *b);
vrmLocator *vrmLocatorParseNode(xmlNodePtr node);
void vrmLocatorFormatBuf(GString *buf, const vrmLocator *locator,
                         unsigned int level);

typedef struct _vrmOffer vrmOffer;
struct _vrmOffer {
    unsigned int version;       /* protocol version the source speaks */
    guint32 capabilities;       /* capability bits asked for; unknown bits kept */
    bool hasToken;              /* the token is known (helpers' channel only) */
    vrmToken token;             /* one-time 128-bit token */
    char *address;              /* <endpoint address>: source engine's rdma_cm address */
    unsigned int port;          /* <endpoint port>: its rdma_cm port */
    char *device;               /* <endpoint device>: source device, NULL if unknown */
    unsigned int devicePort;    /* <endpoint device-port>: 0 if unknown */
    unsigned int channels;      /* main + multifd channels */
    unsigned int chunkSize;     /* bytes */
    unsigned int ringDepth;     /* chunks per channel and direction */
    unsigned int bandwidth;     /* Mbit/s, 0: unlimited */
    unsigned int disks;         /* <disks count>: disk channels (NBD), 0: none */
};

vrmOffer *vrmOfferNew(void);
void vrmOfferFree(vrmOffer *offer);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmOffer, vrmOfferFree);
vrmOffer *vrmOfferCopy(const vrmOffer *offer);
vrmOffer *vrmOfferParseNode(xmlNodePtr node);
/* The token is written only if @offer->hasToken. */
void vrmOfferFormatBuf(GString *buf, const vrmOffer *offer, unsigned int level);
/* Forget the token (wiped): what job records and replies keep. */
void vrmOfferDropToken(vrmOffer *offer);
/* "<offer ...>...</offer>\n" at level 0 (g_free). */
char *vrmOfferFormat(const vrmOffer *offer);

typedef enum {
    VRM_ANSWER_ACCEPTED,
    VRM_ANSWER_REFUSED,

    VRM_ANSWER_LAST
} vrmAnswerStatus;
VRM_ENUM_DECL(vrmAnswerStatus);

typedef enum {
    VRM_REFUSAL_VERSION_TOO_OLD,    /* offer's version below our minimum */
    VRM_REFUSAL_VERSION_TOO_NEW,    /* offer's version above our maximum */
    VRM_REFUSAL_POLICY,             /* a host-policy limit is exceeded */
    VRM_REFUSAL_NO_DEVICE,          /* RDMA device or port missing or down */
    VRM_REFUSAL_BUSY,               /* too many concurrent jobs */
    VRM_REFUSAL_INTERNAL,           /* the helper or the engine failed */

    VRM_REFUSAL_LAST
} vrmRefusalReason;
VRM_ENUM_DECL(vrmRefusalReason);

typedef enum {
    VRM_LIMIT_CHANNELS,
    VRM_LIMIT_CHUNK_SIZE,
    VRM_LIMIT_RING_DEPTH,
    VRM_LIMIT_PINNED_BYTES,
    VRM_LIMIT_BANDWIDTH,

    VRM_LIMIT_LAST
} vrmLimit;
VRM_ENUM_DECL(vrmLimit);

/*
 * In an accepted answer, a value the destination changed:
 *   <limit name="ring-depth" asked="64" applied="32"/>
 * In a refusal, a limit the offer exceeds:
 *   <violation name="channels" asked="8" allowed="1-4"/>
 */
typedef struct {
    vrmLimit limit;
    unsigned long long asked;
    unsigned long long applied;     /* accepted answers only */
    char *allowed;                  /* refusals only: "1-4", "65536 1048576" */
} vrmLimitEntry;

typedef struct _vrmAnswer vrmAnswer;
struct _vrmAnswer {
    vrmAnswerStatus status;
    /* accepted */
    unsigned int version;           /* agreed protocol version */
    guint32 capabilities;           /* agreed capability bits */
    unsigned int channels;
    unsigned int chunkSize;
    unsigned int ringDepth;
    unsigned int bandwidth;         /* Mbit/s, 0: unlimited */
    /* accepted: values changed; refused: violations */
    vrmLimitEntry *limits;
    size_t nlimits;
    /* refused */
    vrmRefusalReason reason;
    char *message;                  /* human-readable, may be NULL */
};

vrmAnswer *vrmAnswerNew(vrmAnswerStatus status);
void vrmAnswerFree(vrmAnswer *answer);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmAnswer, vrmAnswerFree);
vrmAnswer *vrmAnswerCopy(const vrmAnswer *answer);
void vrmAnswerAddLimit(vrmAnswer *answer, vrmLimit limit,
                       unsigned long long asked, unsigned long long applied,
                       const char *allowed);
vrmAnswer *vrmAnswerParseNode(xmlNodePtr node);
void vrmAnswerFormatBuf(GString *buf, const vrmAnswer *answer,
                        unsigned int level);
char *vrmAnswerFormat(const vrmAnswer *answer);

typedef struct _vrmMigrationDef vrmMigrationDef;
struct _vrmMigrationDef {
    bool disabled;                  /* enabled="no": never over RDMA, whatever
                                     * the host's [migration] rdma says */
    vrmMigrationParams params;
    vrmLocator *locator;            /* NULL if absent */
    vrmOffer *offer;                /* NULL if absent */
    vrmAnswer *answer;              /* NULL if absent */
};

vrmMigrationDef *vrmMigrationDefNew(void);
void vrmMigrationDefFree(vrmMigrationDef *def);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmMigrationDef, vrmMigrationDefFree);
vrmMigrationDef *vrmMigrationDefCopy(const vrmMigrationDef *def);

vrmMigrationDef *vrmMigrationDefParseString(const char *xml);
vrmMigrationDef *vrmMigrationDefParseFile(const char *path);
/* The element as virDomainGetMetadata() returns it: in no namespace */
vrmMigrationDef *vrmMigrationDefParseMetadata(const char *xml);
vrmMigrationDef *vrmMigrationDefParseNode(xmlDocPtr doc, xmlNodePtr root);
vrmMigrationDef *vrmMigrationDefParseXML(xmlXPathContextPtr ctxt);
vrmMigrationDef *vrmMigrationDefParseElement(xmlNodePtr node);

/* @prefix: namespace prefix to use, NULL for VRM_XML_NS_PREFIX. */
void vrmMigrationDefFormatBuf(GString *buf, const vrmMigrationDef *def,
                              const char *prefix, unsigned int level);
char *vrmMigrationDefFormat(const vrmMigrationDef *def);
/* "<migration>...": the form virDomainSetMetadata() takes (no namespace) */
char *vrmMigrationDefFormatMetadata(const vrmMigrationDef *def);
