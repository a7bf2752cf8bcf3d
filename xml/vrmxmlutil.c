/*
 * vrmxmlutil.c: XML helpers shared by every virt-rdma document type
 */
#include <config.h>

#include <arpa/inet.h>
#include <string.h>

#include <libxml/relaxng.h>
#include <libxml/xpathInternals.h>
#include <libxml/xmlerror.h>

#include "vrmxmlutil.h"
#include "vrmerror.h"
#include "vrmi18n.h"

#if LIBXML_VERSION >= 21200
# define VRM_XML_ERROR_CONST const
#else
# define VRM_XML_ERROR_CONST
#endif

/* Schema validation reports at most this many problems. */
#define VRM_XML_MAX_SCHEMA_ERRORS 3
/* Values quoted in error messages are cut to this many characters. */
#define VRM_XML_MAX_QUOTED 64

static char *
vrmXMLJoinAllowed(const char *const *allowed)
{
    GString *buf = g_string_new(NULL);
    size_t i;

    for (i = 0; allowed && allowed[i]; i++) {
        size_t len = strlen(allowed[i]);

        if (len > 0 && allowed[i][len - 1] == '*')
            len--;
        if (i > 0)
            g_string_append(buf, ", ");
        g_string_append_printf(buf, "'%.*s'", (int)len, allowed[i]);
    }
    if (buf->len == 0)
        g_string_append(buf, _("none"));
    return g_string_free(buf, FALSE);
}

VRM_ENUM_IMPL(vrmXMLSchema, VRM_XML_SCHEMA_LAST,
              "migration.rng",
              "control.rng",
              "peer.rng",
);

char *
vrmXMLQuote(const char *str)
{
    g_autofree char *valid = g_utf8_make_valid(str ? str : "", -1);
    GString *buf = g_string_new(NULL);
    const char *p;
    glong count = 0;

    for (p = valid; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);

        if (count++ == VRM_XML_MAX_QUOTED) {
            g_string_append(buf, "...");
            break;
        }
        if (c < 0x20 || c == 0x7f)
            g_string_append_c(buf, '?');
        else
            g_string_append_unichar(buf, c);
    }
    return g_string_free(buf, FALSE);
}

char *
vrmXMLNodeName(xmlNodePtr node)
{
    if (!node || !node->name)
        return g_strdup("?");
    if (node->ns && node->ns->prefix)
        return g_strdup_printf("%s:%s", (const char *)node->ns->prefix,
                               (const char *)node->name);
    return vrmXMLQuote((const char *)node->name);
}

char *
vrmXMLSchemaDir(void)
{
    const char *env = g_getenv("VRM_SCHEMA_DIR");

    if (env && *env)
        return g_strdup(env);
#if VRM_SCHEMA_FALLBACK_TO_SOURCE
    if (!g_file_test(VRM_SCHEMA_DIR, G_FILE_TEST_IS_DIR))
        return g_strdup(VRM_SOURCE_SCHEMA_DIR);
#endif
    return g_strdup(VRM_SCHEMA_DIR);
}

static int
vrmXMLCheckDTD(xmlDocPtr doc, const char *what, bool allowDTD)
{
    xmlDtdPtr dtd = doc->intSubset;

    if (!dtd)
        return 0;
    if (!allowDTD) {
        vrmReportError(VRM_ERR_XML,
                       _("%1$s must not contain a DOCTYPE declaration"),
                       what);
        return -1;
    }
    if (dtd->entities || dtd->pentities) {
        vrmReportError(VRM_ERR_XML,
                       _("%1$s must not declare entities in its DOCTYPE"),
                       what);
        return -1;
    }
    return 0;
}

/* First well-formedness error of the parse running in this thread. */
static __thread char *parseFirstError;
static __thread int parseFirstErrorLine;

static void
vrmXMLParseError(void *opaque, VRM_XML_ERROR_CONST xmlError *err)
{
    if (parseFirstError || !err || !err->message || err->level < XML_ERR_ERROR)
        return;
    parseFirstError = g_strstrip(g_strdup(err->message));
    parseFirstErrorLine = err->line;
}

xmlDocPtr
vrmXMLParseMemory(const char *data, size_t len, const char *what,
                  bool allowDTD)
{
    xmlParserCtxtPtr pctxt = NULL;
    g_autoptr(xmlDoc) doc = NULL;
    int flags = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING;

    if (!data) {
        vrmReportError(VRM_ERR_XML, _("%1$s is missing"), what);
        return NULL;
    }
    if (len > VRM_XML_MAX_DOCUMENT_SIZE) {
        vrmReportError(VRM_ERR_XML,
                       _("%1$s is %2$zu bytes long; the limit is %3$u bytes"),
                       what, len, VRM_XML_MAX_DOCUMENT_SIZE);
        return NULL;
    }

    if (!(pctxt = xmlNewParserCtxt())) {
        vrmReportError(VRM_ERR_INTERNAL, _("out of memory creating an XML parser"));
        return NULL;
    }
    /* the first error names the cause; later ones are consequences */
    pctxt->sax->initialized = XML_SAX2_MAGIC;
    pctxt->sax->serror = vrmXMLParseError;
    g_clear_pointer(&parseFirstError, g_free);
    doc = xmlCtxtReadMemory(pctxt, data, (int)len, NULL, "UTF-8", flags);
    /* an undeclared prefix only clears nsWellFormed */
    if (!doc || !pctxt->wellFormed || !pctxt->nsWellFormed) {
        VRM_XML_ERROR_CONST xmlError *err = xmlCtxtGetLastError(pctxt);
        g_autofree char *msg = g_steal_pointer(&parseFirstError);
        int line = parseFirstErrorLine;

        if (!msg && err && err->message) {
            msg = g_strstrip(g_strdup(err->message));
            line = err->line;
        }
        if (msg) {
            vrmReportError(VRM_ERR_XML,
                           _("%1$s is not well-formed at line %2$d: %3$s"),
                           what, line, msg);
        } else {
            vrmReportError(VRM_ERR_XML, _("%1$s is not well-formed"), what);
        }
        xmlFreeParserCtxt(pctxt);
        return NULL;
    }
    xmlFreeParserCtxt(pctxt);
    g_clear_pointer(&parseFirstError, g_free);

    if (!xmlDocGetRootElement(doc)) {
        vrmReportError(VRM_ERR_XML, _("%1$s has no root element"), what);
        return NULL;
    }
    if (vrmXMLCheckDTD(doc, what, allowDTD) < 0)
        return NULL;
    return g_steal_pointer(&doc);
}

xmlDocPtr
vrmXMLParseFile(const char *path, const char *what)
{
    g_autofree char *data = NULL;
    g_autoptr(GError) gerr = NULL;
    gsize len = 0;

    if (!g_file_get_contents(path, &data, &len, &gerr)) {
        vrmReportError(VRM_ERR_XML, _("cannot read %1$s '%2$s': %3$s"),
                       what, path, gerr->message);
        return NULL;
    }
    return vrmXMLParseMemory(data, len, what, false);
}


/* ---- schema validation ---- */

typedef struct {
    GString *buf;
    unsigned int count;
} vrmXMLErrorCollector;

static void
vrmXMLCollectError(void *opaque, VRM_XML_ERROR_CONST xmlError *err)
{
    vrmXMLErrorCollector *col = opaque;
    g_autofree char *msg = NULL;

    if (!err || !err->message)
        return;
    if (col->count++ >= VRM_XML_MAX_SCHEMA_ERRORS)
        return;
    msg = g_strstrip(g_strdup(err->message));
    if (col->buf->len)
        g_string_append(col->buf, "; ");
    if (err->line > 0)
        g_string_append_printf(col->buf, _("line %1$d: %2$s"), err->line, msg);
    else
        g_string_append(col->buf, msg);
}

static GMutex schemaLock;   /* guards schemaCache and every validation */
static xmlRelaxNGPtr schemaCache[VRM_XML_SCHEMA_LAST];

static xmlRelaxNGPtr
vrmXMLSchemaLoad(vrmXMLSchema schema)
{
    g_autofree char *dir = vrmXMLSchemaDir();
    g_autofree char *path = NULL;
    vrmXMLErrorCollector col = { g_string_new(NULL), 0 };
    xmlRelaxNGParserCtxtPtr pctxt;
    xmlRelaxNGPtr rng = NULL;

    path = g_build_filename(dir, vrmXMLSchemaTypeToString(schema), NULL);
    if ((pctxt = xmlRelaxNGNewParserCtxt(path))) {
        xmlRelaxNGSetParserStructuredErrors(pctxt, vrmXMLCollectError, &col);
        rng = xmlRelaxNGParse(pctxt);
        xmlRelaxNGFreeParserCtxt(pctxt);
    }
    if (!rng) {
        vrmReportError(VRM_ERR_INTERNAL,
                       _("cannot load the XML schema '%1$s': %2$s"),
                       path, col.buf->len ? col.buf->str : _("unknown error"));
    }
    g_string_free(col.buf, TRUE);
    return rng;
}

int
vrmXMLValidate(xmlDocPtr doc, vrmXMLSchema schema, char **message)
{
    vrmXMLErrorCollector col = { NULL, 0 };
    xmlRelaxNGValidCtxtPtr vctxt;
    int rc;

    if (message)
        *message = NULL;
    if (schema < 0 || schema >= VRM_XML_SCHEMA_LAST) {
        vrmReportError(VRM_ERR_INTERNAL, _("unknown XML schema %1$d"), schema);
        return -1;
    }

    g_mutex_lock(&schemaLock);
    if (!schemaCache[schema] && !(schemaCache[schema] = vrmXMLSchemaLoad(schema))) {
        g_mutex_unlock(&schemaLock);
        return -1;
    }
    if (!(vctxt = xmlRelaxNGNewValidCtxt(schemaCache[schema]))) {
        g_mutex_unlock(&schemaLock);
        vrmReportError(VRM_ERR_INTERNAL,
                       _("out of memory creating an XML schema validator"));
        return -1;
    }
    col.buf = g_string_new(NULL);
    xmlRelaxNGSetValidStructuredErrors(vctxt, vrmXMLCollectError, &col);
    rc = xmlRelaxNGValidateDoc(vctxt, doc);
    xmlRelaxNGFreeValidCtxt(vctxt);
    g_mutex_unlock(&schemaLock);

    if (rc == 0) {
        g_string_free(col.buf, TRUE);
        return 0;
    }
    if (col.buf->len == 0)
        g_string_append(col.buf, _("the document does not match the schema"));
    if (message)
        *message = g_string_free(col.buf, FALSE);
    else
        g_string_free(col.buf, TRUE);
    return 1;
}

void *
vrmXMLParseValidated(xmlDocPtr doc, vrmXMLSchema schema, const char *what,
                     vrmXMLParseRootFunc parse, GDestroyNotify freeFunc)
{
    g_autofree char *schemaMsg = NULL;
    void *obj;
    int rc;

    if ((rc = vrmXMLValidate(doc, schema, &schemaMsg)) < 0)
        return NULL;
    obj = parse(doc, xmlDocGetRootElement(doc));
    if (rc == 0 || !obj)
        return obj;
    freeFunc(obj);
    vrmReportError(VRM_ERR_INTERNAL, _("%1$s does not match the schema '%2$s': %3$s"),
                   what, vrmXMLSchemaTypeToString(schema), schemaMsg);
    return NULL;
}

xmlXPathContextPtr
vrmXMLNewContext(xmlDocPtr doc)
{
    xmlXPathContextPtr ctxt = xmlXPathNewContext(doc);

    if (!ctxt) {
        vrmReportError(VRM_ERR_INTERNAL,
                       _("out of memory creating an XPath context"));
        return NULL;
    }
    ctxt->node = xmlDocGetRootElement(doc);
    xmlXPathRegisterNs(ctxt, BAD_CAST VRM_XML_NS_PREFIX,
                       BAD_CAST VRM_XML_NS_MIGRATION);
    return ctxt;
}


/* ---- structure checks ---- */

bool
vrmXMLIsElement(xmlNodePtr node, const char *nsURI, const char *name)
{
    if (!node || node->type != XML_ELEMENT_NODE)
        return false;
    if (strcmp((const char *)node->name, name) != 0)
        return false;
    if (!nsURI)
        return node->ns == NULL;
    return node->ns && node->ns->href &&
        strcmp((const char *)node->ns->href, nsURI) == 0;
}

/*
 * A child element of ours: in no namespace (hand-written XML) or in the
 * migration namespace (what libvirt stores after `virsh metadata --set`:
 * it moves every child into the namespace of the metadata element).
 */
bool
vrmXMLIsOurChild(xmlNodePtr node, const char *name)
{
    return vrmXMLIsElement(node, NULL, name) ||
        vrmXMLIsElement(node, VRM_XML_NS_MIGRATION, name);
}

xmlNodePtr
vrmXMLChild(xmlNodePtr node, const char *name)
{
    xmlNodePtr cur;

    for (cur = node ? node->children : NULL; cur; cur = cur->next) {
        if (vrmXMLIsOurChild(cur, name))
            return cur;
    }
    return NULL;
}

/*
 * Is @name in @list? An entry written "name*" matches "name" and allows
 * it to repeat (*repeatable is set).
 */
static bool
vrmXMLInList(const char *const *list, const char *name, bool *repeatable)
{
    size_t i;

    if (repeatable)
        *repeatable = false;
    for (i = 0; list && list[i]; i++) {
        size_t len = strlen(list[i]);
        bool star = len > 0 && list[i][len - 1] == '*';

        if (star)
            len--;
        if (strncmp(list[i], name, len) == 0 && name[len] == '\0') {
            if (repeatable)
                *repeatable = star;
            return true;
        }
    }
    return false;
}

int
vrmXMLCheckAttributes(xmlNodePtr node, const char *const *allowed)
{
    xmlAttrPtr attr;

    for (attr = node->properties; attr; attr = attr->next) {
        g_autofree char *elem = NULL;
        g_autofree char *aname = NULL;
        g_autofree char *list = NULL;

        if (!attr->ns && vrmXMLInList(allowed, (const char *)attr->name, NULL))
            continue;

        elem = vrmXMLNodeName(node);
        if (attr->ns && attr->ns->prefix)
            aname = g_strdup_printf("%s:%s", (const char *)attr->ns->prefix,
                                    (const char *)attr->name);
        else
            aname = vrmXMLQuote((const char *)attr->name);
        list = vrmXMLJoinAllowed(allowed);
        vrmReportError(VRM_ERR_XML,
                       _("element '%1$s' has an unknown attribute '%2$s'; allowed attributes: %3$s"),
                       elem, aname, list);
        return -1;
    }
    return 0;
}

static bool
vrmXMLIsBlank(const char *str)
{
    for (; str && *str; str++) {
        if (!g_ascii_isspace(*str))
            return false;
    }
    return true;
}

int
vrmXMLCheckChildren(xmlNodePtr node, const char *const *allowed)
{
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    g_autofree char *elem = vrmXMLNodeName(node);
    xmlNodePtr cur;

    for (cur = node->children; cur; cur = cur->next) {
        g_autofree char *child = NULL;
        bool repeatable = false;

        switch (cur->type) {
        case XML_ELEMENT_NODE:
            child = vrmXMLNodeName(cur);
            if (cur->ns && cur->ns->href &&
                strcmp((const char *)cur->ns->href, VRM_XML_NS_MIGRATION) == 0) {
                g_autofree char *ours = g_strdup_printf("%s:%s", VRM_XML_NS_PREFIX,
                                                        (const char *)cur->name);
                const char *key = ours;

                /* A child in our namespace stands for the same child in
                 * none, unless the parent names the prefixed form. */
                if (!vrmXMLInList(allowed, ours, &repeatable)) {
                    if (!vrmXMLInList(allowed, (const char *)cur->name, &repeatable)) {
                        g_autofree char *list = vrmXMLJoinAllowed(allowed);

                        vrmReportError(VRM_ERR_XML,
                                       _("element '%1$s' is not allowed inside '%2$s'; allowed elements: %3$s"),
                                       child, elem, list);
                        return -1;
                    }
                    key = (const char *)cur->name;
                }
                if (!repeatable && !g_hash_table_add(seen, (gpointer)g_intern_string(key))) {
                    vrmReportError(VRM_ERR_XML,
                                   _("element '%1$s' appears more than once inside '%2$s'"),
                                   child, elem);
                    return -1;
                }
                break;
            }
            if (cur->ns) {
                g_autofree char *uri = vrmXMLQuote((const char *)cur->ns->href);

                vrmReportError(VRM_ERR_XML,
                               _("element '%1$s' inside '%2$s' must be in no namespace or in '%3$s', but it is in namespace %4$s"),
                               child, elem, VRM_XML_NS_MIGRATION, uri);
                return -1;
            }
            if (!vrmXMLInList(allowed, (const char *)cur->name, &repeatable)) {
                g_autofree char *list = vrmXMLJoinAllowed(allowed);

                vrmReportError(VRM_ERR_XML,
                               _("element '%1$s' is not allowed inside '%2$s'; allowed elements: %3$s"),
                               child, elem, list);
                return -1;
            }
            if (!repeatable && !g_hash_table_add(seen, (gpointer)g_intern_string((const char *)cur->name))) {
                vrmReportError(VRM_ERR_XML,
                               _("element '%1$s' appears more than once inside '%2$s'"),
                               child, elem);
                return -1;
            }
            break;

        case XML_TEXT_NODE:
        case XML_CDATA_SECTION_NODE:
            if (!vrmXMLIsBlank((const char *)cur->content)) {
                g_autofree char *raw = g_strdup((const char *)cur->content);
                g_autofree char *text = vrmXMLQuote(g_strstrip(raw));

                vrmReportError(VRM_ERR_XML,
                               _("element '%1$s' contains unexpected text '%2$s'"),
                               elem, text);
                return -1;
            }
            break;

        case XML_COMMENT_NODE:
        case XML_PI_NODE:
            break;

        default:
            vrmReportError(VRM_ERR_XML,
                           _("element '%1$s' contains an unexpected XML node"),
                           elem);
            return -1;
        }
    }
    return 0;
}

int
vrmXMLCheckLeaf(xmlNodePtr node, const char *const *allowedAttrs)
{
    static const char *const none[] = { NULL };

    if (vrmXMLCheckAttributes(node, allowedAttrs) < 0 ||
        vrmXMLCheckChildren(node, none) < 0)
        return -1;
    return 0;
}

xmlNodePtr
vrmXMLRequiredChild(xmlNodePtr node, const char *name)
{
    xmlNodePtr child = vrmXMLChild(node, name);

    if (!child) {
        g_autofree char *elem = vrmXMLNodeName(node);

        vrmReportError(VRM_ERR_XML,
                       _("element '%1$s' is missing its required child element '%2$s'"),
                       elem, name);
    }
    return child;
}

int
vrmXMLTextContent(xmlNodePtr node, char **text)
{
    GString *buf = g_string_new(NULL);
    xmlNodePtr cur;

    for (cur = node->children; cur; cur = cur->next) {
        if (cur->type == XML_TEXT_NODE || cur->type == XML_CDATA_SECTION_NODE) {
            g_string_append(buf, (const char *)cur->content);
        } else if (cur->type != XML_COMMENT_NODE && cur->type != XML_PI_NODE) {
            g_autofree char *elem = vrmXMLNodeName(node);

            vrmReportError(VRM_ERR_XML,
                           _("element '%1$s' must contain text only"), elem);
            g_string_free(buf, TRUE);
            return -1;
        }
    }
    *text = g_string_free(buf, FALSE);
    return 0;
}


/* ---- typed attribute getters ---- */

static char *
vrmXMLGetAttr(xmlNodePtr node, const char *name)
{
    xmlChar *raw = xmlGetNoNsProp(node, BAD_CAST name);
    char *ret;

    if (!raw)
        return NULL;
    ret = g_strdup((const char *)raw);
    xmlFree(raw);
    return ret;
}

static int
vrmXMLMissing(xmlNodePtr node, const char *name, bool required)
{
    g_autofree char *elem = NULL;

    if (!required)
        return 0;
    elem = vrmXMLNodeName(node);
    vrmReportError(VRM_ERR_XML,
                   _("element '%1$s' is missing its required attribute '%2$s'"),
                   elem, name);
    return -1;
}

int
vrmXMLPropString(xmlNodePtr node, const char *name, bool required,
                 char **value)
{
    char *str = vrmXMLGetAttr(node, name);

    if (!str)
        return vrmXMLMissing(node, name, required);
    g_free(*value);
    *value = str;
    return 1;
}

int
vrmXMLPropULLong(xmlNodePtr node, const char *name, bool required,
                 unsigned long long min, unsigned long long max,
                 unsigned long long *value)
{
    g_autofree char *str = vrmXMLGetAttr(node, name);
    unsigned long long v;

    if (!str)
        return vrmXMLMissing(node, name, required);
    if (!vrmParseUInt64(str, &v) || v < min || v > max) {
        g_autofree char *elem = vrmXMLNodeName(node);
        g_autofree char *bad = vrmXMLQuote(str);

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected an integer from %4$llu to %5$llu"),
                       name, elem, bad, min, max);
        return -1;
    }
    *value = v;
    return 1;
}

int
vrmXMLPropUInt(xmlNodePtr node, const char *name, bool required,
               unsigned int min, unsigned int max, unsigned int *value)
{
    unsigned long long v;
    int rc;

    if ((rc = vrmXMLPropULLong(node, name, required, min, max, &v)) <= 0)
        return rc;
    *value = v;
    return 1;
}

int
vrmXMLPropHex32(xmlNodePtr node, const char *name, bool required,
                guint32 *value)
{
    g_autofree char *str = vrmXMLGetAttr(node, name);
    size_t len;
    size_t i;
    guint32 v = 0;

    if (!str)
        return vrmXMLMissing(node, name, required);
    len = strlen(str);
    if (len < 3 || len > 10 || str[0] != '0' || str[1] != 'x')
        goto invalid;
    for (i = 2; i < len; i++) {
        if (!g_ascii_isxdigit(str[i]))
            goto invalid;
        v = (v << 4) | g_ascii_xdigit_value(str[i]);
    }
    *value = v;
    return 1;

 invalid:
    {
        g_autofree char *elem = vrmXMLNodeName(node);
        g_autofree char *bad = vrmXMLQuote(str);

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected '0x' followed by 1 to 8 hexadecimal digits"),
                       name, elem, bad);
    }
    return -1;
}

int
vrmXMLPropEnum(xmlNodePtr node, const char *name, bool required,
               vrmEnumFromStringFunc fromString,
               vrmEnumToStringFunc toString, int last, int *value)
{
    g_autofree char *str = vrmXMLGetAttr(node, name);
    int v;

    if (!str)
        return vrmXMLMissing(node, name, required);
    if ((v = fromString(str)) < 0) {
        g_autofree char *elem = vrmXMLNodeName(node);
        g_autofree char *bad = vrmXMLQuote(str);
        g_autofree char *list = vrmEnumAllowedValues(toString, last);

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; allowed values: %4$s"),
                       name, elem, bad, list);
        return -1;
    }
    *value = v;
    return 1;
}

static const char *const vrmYesNoNames[] = { "no", "yes" };

static const char *
vrmYesNoToString(int v)
{
    return vrmEnumToString(vrmYesNoNames, G_N_ELEMENTS(vrmYesNoNames), v);
}

static int
vrmYesNoFromString(const char *str)
{
    return vrmEnumFromString(vrmYesNoNames, G_N_ELEMENTS(vrmYesNoNames), str);
}

int
vrmXMLPropYesNo(xmlNodePtr node, const char *name, bool required,
                bool *value)
{
    int v;
    int rc;

    rc = vrmXMLPropEnum(node, name, required, vrmYesNoFromString,
                        vrmYesNoToString, G_N_ELEMENTS(vrmYesNoNames), &v);
    if (rc > 0)
        *value = v == 1;
    return rc;
}

/* A string attribute that VALID accepts; EXPECTED (translated) says what
 * it must be */
static int
vrmXMLPropChecked(xmlNodePtr node, const char *name, bool required, char **value,
                  bool (*valid)(const char *str), const char *expected)
{
    g_autofree char *str = vrmXMLGetAttr(node, name);

    if (!str)
        return vrmXMLMissing(node, name, required);
    if (!valid(str)) {
        g_autofree char *elem = vrmXMLNodeName(node);
        g_autofree char *bad = vrmXMLQuote(str);

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected %4$s"),
                       name, elem, bad, expected);
        return -1;
    }
    g_free(*value);
    *value = g_steal_pointer(&str);
    return 1;
}

int
vrmXMLPropName(xmlNodePtr node, const char *name, bool required,
               char **value)
{
    g_autofree char *expected =
        g_strdup_printf(_("1 to %1$d letters, digits, '_', '.' or '-'"), VRM_NAME_MAX);

    return vrmXMLPropChecked(node, name, required, value, vrmValidName, expected);
}

int
vrmXMLPropAddress(xmlNodePtr node, const char *name, bool required,
                  char **value)
{
    return vrmXMLPropChecked(node, name, required, value, vrmValidAddress,
                             _("an IPv4 or IPv6 address"));
}

int
vrmXMLPropErrorCode(xmlNodePtr node, const char *name, int *code)
{
    return vrmXMLPropEnum(node, name, true, vrmErrorCodeTypeFromString,
                          vrmErrorCodeTypeToString, VRM_ERR_LAST, code);
}

int
vrmXMLPropHostName(xmlNodePtr node, const char *name, bool required,
                   char **value)
{
    g_autofree char *expected =
        g_strdup_printf(_("a host name of at most %1$d letters, digits, '-' and dots"),
                        VRM_HOST_NAME_MAX);

    return vrmXMLPropChecked(node, name, required, value, vrmValidHostName, expected);
}

int
vrmXMLPropHexBytes(xmlNodePtr node, const char *name, bool required,
                   guint8 *bytes, size_t n)
{
    g_autofree char *str = vrmXMLGetAttr(node, name);
    size_t i;

    if (!str)
        return vrmXMLMissing(node, name, required);
    if (strlen(str) != 2 * n)
        goto invalid;
    for (i = 0; i < 2 * n; i++) {
        if (!g_ascii_isdigit(str[i]) && !(str[i] >= 'a' && str[i] <= 'f'))
            goto invalid;
    }
    for (i = 0; i < n; i++)
        bytes[i] = (g_ascii_xdigit_value(str[2 * i]) << 4) |
            g_ascii_xdigit_value(str[2 * i + 1]);
    return 1;

 invalid:
    {
        g_autofree char *elem = vrmXMLNodeName(node);
        g_autofree char *bad = vrmXMLQuote(str);

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected %4$zu lowercase hexadecimal characters"),
                       name, elem, bad, 2 * n);
    }
    return -1;
}

int
vrmXMLPropChunkSize(xmlNodePtr node, const char *name, bool required,
                    unsigned int *value)
{
    g_autofree char *str = vrmXMLGetAttr(node, name);
    unsigned long long v = 0;

    if (!str)
        return vrmXMLMissing(node, name, required);
    if (!vrmParseUInt64(str, &v) ||
        v < VRM_CHUNK_SIZE_MIN || v > VRM_CHUNK_SIZE_MAX ||
        (v & (v - 1)) != 0) {
        g_autofree char *elem = vrmXMLNodeName(node);
        g_autofree char *bad = vrmXMLQuote(str);

        vrmReportError(VRM_ERR_XML,
                       _("attribute '%1$s' of element '%2$s' has invalid value '%3$s'; expected a power of two from %4$u to %5$u"),
                       name, elem, bad, VRM_CHUNK_SIZE_MIN, VRM_CHUNK_SIZE_MAX);
        return -1;
    }
    *value = v;
    return 1;
}


/* ---- formatting ---- */

void
vrmXMLIndent(GString *buf, unsigned int level)
{
    unsigned int i;

    for (i = 0; i < level; i++)
        g_string_append(buf, "  ");
}

void
vrmXMLEscapeText(GString *buf, const char *str)
{
    g_autofree char *valid = g_utf8_make_valid(str ? str : "", -1);
    const char *p;

    for (p = valid; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);

        switch (c) {
        case '&': g_string_append(buf, "&amp;"); break;
        case '<': g_string_append(buf, "&lt;"); break;
        case '>': g_string_append(buf, "&gt;"); break;
        case '"': g_string_append(buf, "&quot;"); break;
        case '\t': g_string_append(buf, "&#9;"); break;
        case '\n': g_string_append(buf, "&#10;"); break;
        case '\r': g_string_append(buf, "&#13;"); break;
        default:
            if (c < 0x20 || c == 0xfffe || c == 0xffff)
                g_string_append_unichar(buf, 0xfffd);
            else
                g_string_append_unichar(buf, c);
        }
    }
}

void
vrmXMLAttrStr(GString *buf, const char *name, const char *value)
{
    g_string_append_printf(buf, " %s=\"", name);
    vrmXMLEscapeText(buf, value);
    g_string_append_c(buf, '"');
}

void
vrmXMLAttrUInt(GString *buf, const char *name, unsigned int value)
{
    g_string_append_printf(buf, " %s=\"%u\"", name, value);
}

void
vrmXMLAttrULLong(GString *buf, const char *name, unsigned long long value)
{
    g_string_append_printf(buf, " %s=\"%llu\"", name, value);
}
