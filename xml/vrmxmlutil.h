/*
 * vrmxmlutil.h: XML helpers shared by every virt-rdma document type
 *
 * Public API summary
 * ------------------
 * Documents:
 *   vrmXMLParseMemory(data, len, what, dtd) well-formed check, no DTD, no network;
 *                                           errors name the line and the cause
 *   vrmXMLParseFile(path)                   same, reading a file
 *   vrmXMLSchemaDir()                       $VRM_SCHEMA_DIR, else the installed
 *                                           directory (if absent, the source tree
 *                                           when built with source_schema_fallback)
 *   vrmXMLParseValidated(doc, schema, what, parse, free)
 *                                           validate, then read with the parser
 *   vrmXMLValidate(doc, schema, &msg)       RNG validation: 0 valid, 1 invalid (msg
 *                                           set), -1 schema not loadable (reported)
 *   vrmXMLNewContext(doc)                   XPath context with ctxt->node = root
 *
 * Strict structure checks (each reports a translatable error and returns -1):
 *   vrmXMLCheckAttributes(node, allowed)    unknown attribute -> lists the allowed ones
 *   vrmXMLCheckChildren(node, allowed)      unknown / namespaced / repeated child
 *                                           element or stray text ("name*" in
 *                                           @allowed: may repeat; "rdma:migration":
 *                                           our element, whatever its prefix)
 *   vrmXMLTextContent(node, &text)          text-only element
 *   vrmXMLCheckLeaf(node, attrs)            attributes + no content
 *   vrmXMLRequiredChild(node, name)         child element or "missing" error
 *   vrmXMLChild(node, name)                 first child element of ours: in no
 *                                           namespace or in the migration one
 *   vrmXMLIsOurChild(node, name)            the same test for one node
 *   vrmXMLIsElement(node, ns, name)         namespace-aware name test
 *
 * Typed attribute getters: return 1 when set, 0 when absent and not required,
 * -1 (error reported) when invalid or required and absent. The message names
 * the element, the attribute, the bad value and the allowed values.
 *   vrmXMLPropUInt  vrmXMLPropULLong  vrmXMLPropHex32  vrmXMLPropEnum
 *   vrmXMLPropString  vrmXMLPropName  vrmXMLPropAddress  vrmXMLPropChunkSize
 *   vrmXMLPropYesNo  vrmXMLPropHexBytes  vrmXMLPropHostName
 *
 * Thread safety: every function may be called from any thread; the schema
 * cache is locked and error reports are per thread (vrmerror.h).
 *
 * Formatting (GString based, two spaces per level, escaped, XML-safe text):
 *   vrmXMLIndent  vrmXMLAttrStr  vrmXMLAttrUInt  vrmXMLAttrULLong  vrmXMLEscapeText
 */
#pragma once

#include <stdbool.h>

#include <glib.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>

#include "vrmenum.h"
#include "vrmlimits.h"
#include "vrmparse.h"

/* Namespace of the <migration> element in a domain's <metadata>. */
#define VRM_XML_NS_MIGRATION "http://virt-rdma.org/xmlns/migration/1.0"
/* Conventional prefix for that namespace. */
#define VRM_XML_NS_PREFIX "rdma"

/* Largest document any of our parsers accepts (a big domain XML fits). */
#define VRM_XML_MAX_DOCUMENT_SIZE (16u * 1024 * 1024)


G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlDoc, xmlFreeDoc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlXPathContext, xmlXPathFreeContext);

/* Schemas shipped in xml/schemas. */
typedef enum {
    VRM_XML_SCHEMA_MIGRATION,   /* migration.rng: the <rdma:migration> element */
    VRM_XML_SCHEMA_CONTROL,     /* control.rng: control-socket messages */
    VRM_XML_SCHEMA_PEER,        /* peer.rng: messages between helpers */

    VRM_XML_SCHEMA_LAST
} vrmXMLSchema;

VRM_ENUM_DECL(vrmXMLSchema);

char *vrmXMLSchemaDir(void);

/*
 * Parse @len bytes of @data (UTF-8). @what names the document in error
 * messages ("migration XML", "domain XML"...). Documents with a DOCTYPE
 * are refused unless @allowDTD; a DTD that declares entities is always
 * refused.
 */
xmlDocPtr vrmXMLParseMemory(const char *data, size_t len,
                            const char *what, bool allowDTD);
xmlDocPtr vrmXMLParseFile(const char *path, const char *what);

/*
 * Validate @doc against @schema. Returns 0 if valid, 1 if invalid with a
 * description of the first problems in @message (not reported as an
 * error: callers decide), -1 if the schema cannot be loaded (reported).
 * The compiled schemas are cached per process.
 */
int vrmXMLValidate(xmlDocPtr doc, vrmXMLSchema schema, char **message);

/* Reads a document from its root: NULL with the error reported */
typedef void *(*vrmXMLParseRootFunc)(xmlDocPtr doc, xmlNodePtr root);

/*
 * Validate @doc against @schema, then read it with @parse (@freeFunc frees
 * what it returns). When the schema refuses the document, the parser still
 * runs: its message names the element, attribute and allowed values,
 * which the schema's does not. Should the parser accept what the schema
 * refuses, the schema's words are reported (INTERNAL: a check is missing
 * from the parser). @what names the document.
 */
void *vrmXMLParseValidated(xmlDocPtr doc, vrmXMLSchema schema, const char *what,
                           vrmXMLParseRootFunc parse, GDestroyNotify freeFunc);

xmlXPathContextPtr vrmXMLNewContext(xmlDocPtr doc);

bool vrmXMLIsElement(xmlNodePtr node, const char *nsURI, const char *name);
bool vrmXMLIsOurChild(xmlNodePtr node, const char *name);
xmlNodePtr vrmXMLChild(xmlNodePtr node, const char *name);

int vrmXMLCheckAttributes(xmlNodePtr node, const char *const *allowed);
int vrmXMLCheckChildren(xmlNodePtr node, const char *const *allowed);
/* Attribute check plus "no child elements, no text". */
int vrmXMLCheckLeaf(xmlNodePtr node, const char *const *allowedAttrs);
/* The child element @name of @node; reports an error if it is missing. */
xmlNodePtr vrmXMLRequiredChild(xmlNodePtr node, const char *name);
/* Text of an element that must hold text only (no child elements). */
int vrmXMLTextContent(xmlNodePtr node, char **text);
/* A value quoted in a message: valid UTF-8, no control characters, short. */
char *vrmXMLQuote(const char *str);
/* "prefix:name" or "name", for messages. */
char *vrmXMLNodeName(xmlNodePtr node);

int vrmXMLPropString(xmlNodePtr node, const char *name, bool required,
                     char **value);
int vrmXMLPropUInt(xmlNodePtr node, const char *name, bool required,
                   unsigned int min, unsigned int max, unsigned int *value);
int vrmXMLPropULLong(xmlNodePtr node, const char *name, bool required,
                     unsigned long long min, unsigned long long max,
                     unsigned long long *value);
/* "0x" followed by 1 to 8 hexadecimal digits. */
int vrmXMLPropHex32(xmlNodePtr node, const char *name, bool required,
                    guint32 *value);
int vrmXMLPropEnum(xmlNodePtr node, const char *name, bool required,
                   vrmEnumFromStringFunc fromString,
                   vrmEnumToStringFunc toString, int last, int *value);
/* 'yes' or 'no'. */
int vrmXMLPropYesNo(xmlNodePtr node, const char *name, bool required,
                    bool *value);
/* A device, group or domain-like name: [A-Za-z0-9_.-], 1 to 64 characters. */
int vrmXMLPropName(xmlNodePtr node, const char *name, bool required,
                   char **value);
/* An IPv4 or IPv6 literal. */
int vrmXMLPropAddress(xmlNodePtr node, const char *name, bool required,
                      char **value);
/* A vrmErrorCode by its name ("policy"); required. */
int vrmXMLPropErrorCode(xmlNodePtr node, const char *name, int *code);
/* A host name (vrmValidHostName()). */
int vrmXMLPropHostName(xmlNodePtr node, const char *name, bool required,
                       char **value);
/* Exactly 2 * @n lowercase hexadecimal characters. */
int vrmXMLPropHexBytes(xmlNodePtr node, const char *name, bool required,
                       guint8 *bytes, size_t n);
/* A power of two from VRM_CHUNK_SIZE_MIN to VRM_CHUNK_SIZE_MAX. */
int vrmXMLPropChunkSize(xmlNodePtr node, const char *name, bool required,
                        unsigned int *value);

void vrmXMLIndent(GString *buf, unsigned int level);
/* Appends ' name="value"', escaped. */
void vrmXMLAttrStr(GString *buf, const char *name, const char *value);
void vrmXMLAttrUInt(GString *buf, const char *name, unsigned int value);
void vrmXMLAttrULLong(GString *buf, const char *name,
                      unsigned long long value);
/*
 * Escape @str for text or attribute content. Invalid UTF-8 and characters
 * XML 1.0 forbids become U+FFFD; tab, newline and carriage return become
 * character references so that they survive re-indentation and attribute
 * normalisation.
 */
void vrmXMLEscapeText(GString *buf, const char *str);
