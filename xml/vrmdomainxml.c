/*
 * vrmdomainxml.c: read and edit our element inside a full libvirt domain XML
 */
#include <config.h>

#include <string.h>

#include "vrmdomainxml.h"
#include "vrmerror.h"
#include "vrmi18n.h"

#define VRM_SPAN_NONE ((size_t)-1)

/* Byte range of one element in the raw text. */
typedef struct {
    size_t start;       /* '<' of the start tag */
    size_t startEnd;    /* just past the '>' of the start tag */
    size_t endStart;    /* '<' of the end tag; startEnd for <x/> */
    size_t end;         /* just past the whole element */
    size_t nameLen;     /* qualified name, at start + 1 */
    bool empty;         /* written <x/> */
} vrmXMLSpan;

/* A parsed domain XML and the byte ranges of all its elements. */
typedef struct {
    const char *text;
    size_t len;
    xmlDocPtr doc;
    GArray *spans;          /* vrmXMLSpan, in document (preorder) order */
    xmlNodePtr root;        /* <domain> */
    xmlNodePtr metadata;    /* <metadata>, or NULL */
    xmlNodePtr migration;   /* our element, or NULL */
} vrmDomainXML;

static void
vrmDomainXMLFree(vrmDomainXML *dom)
{
    if (!dom)
        return;
    if (dom->spans)
        g_array_free(dom->spans, TRUE);
    xmlFreeDoc(dom->doc);
    g_free(dom);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmDomainXML, vrmDomainXMLFree);


/* ---- raw text scanner ---- */

static bool
vrmHasPrefix(const char *text, size_t len, size_t pos, const char *prefix)
{
    size_t n = strlen(prefix);

    return pos + n <= len && memcmp(text + pos, prefix, n) == 0;
}

/* Offset of @needle at or after @pos, or VRM_SPAN_NONE. */
static size_t
vrmFind(const char *text, size_t len, size_t pos, const char *needle)
{
    size_t n = strlen(needle);

    for (; pos + n <= len; pos++) {
        if (memcmp(text + pos, needle, n) == 0)
            return pos;
    }
    return VRM_SPAN_NONE;
}

static bool
vrmIsNameEnd(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
        c == '/' || c == '>';
}

/* Skip a DOCTYPE at @pos ("<!"), honouring quotes, [] and comments. */
static size_t
vrmScanDoctype(const char *text, size_t len, size_t pos)
{
    int depth = 0;
    char quote = 0;

    for (pos += 2; pos < len; pos++) {
        char c = text[pos];

        if (quote) {
            if (c == quote)
                quote = 0;
        } else if (c == '"' || c == '\'') {
            quote = c;
        } else if (vrmHasPrefix(text, len, pos, "<!--")) {
            size_t e = vrmFind(text, len, pos + 4, "-->");

            if (e == VRM_SPAN_NONE)
                return VRM_SPAN_NONE;
            pos = e + 2;
        } else if (c == '[') {
            depth++;
        } else if (c == ']') {
            depth--;
        } else if (c == '>' && depth <= 0) {
            return pos + 1;
        }
    }
    return VRM_SPAN_NONE;
}

/*
 * Find every element of @text in document order. The text has already
 * been parsed by libxml2, so it is well-formed; the scanner still checks
 * every bound and the nesting of names.
 */
static int
vrmXMLScan(const char *text, size_t len, GArray *spans)
{
    g_autoptr(GArray) stack = g_array_new(FALSE, FALSE, sizeof(size_t));
    size_t pos = 0;

    while (pos < len) {
        size_t e;

        if (text[pos] != '<') {
            pos++;
            continue;
        }

        if (vrmHasPrefix(text, len, pos, "<!--")) {
            if ((e = vrmFind(text, len, pos + 4, "-->")) == VRM_SPAN_NONE)
                return -1;
            pos = e + 3;
        } else if (vrmHasPrefix(text, len, pos, "<![CDATA[")) {
            if ((e = vrmFind(text, len, pos + 9, "]]>")) == VRM_SPAN_NONE)
                return -1;
            pos = e + 3;
        } else if (vrmHasPrefix(text, len, pos, "<?")) {
            if ((e = vrmFind(text, len, pos + 2, "?>")) == VRM_SPAN_NONE)
                return -1;
            pos = e + 2;
        } else if (vrmHasPrefix(text, len, pos, "<!")) {
            if ((pos = vrmScanDoctype(text, len, pos)) == VRM_SPAN_NONE)
                return -1;
        } else if (vrmHasPrefix(text, len, pos, "</")) {
            vrmXMLSpan *span;
            size_t name = pos + 2;
            size_t nameEnd = name;

            while (nameEnd < len && !vrmIsNameEnd(text[nameEnd]))
                nameEnd++;
            if ((e = vrmFind(text, len, nameEnd, ">")) == VRM_SPAN_NONE ||
                stack->len == 0)
                return -1;
            span = &g_array_index(spans, vrmXMLSpan,
                                  g_array_index(stack, size_t, stack->len - 1));
            if (span->nameLen != nameEnd - name ||
                memcmp(text + span->start + 1, text + name, span->nameLen) != 0)
                return -1;
            span->endStart = pos;
            span->end = e + 1;
            g_array_set_size(stack, stack->len - 1);
            pos = e + 1;
        } else {
            vrmXMLSpan span = { .start = pos };
            char quote = 0;
            size_t p;

            p = pos + 1;
            while (p < len && !vrmIsNameEnd(text[p]))
                p++;
            span.nameLen = p - pos - 1;
            if (span.nameLen == 0)
                return -1;
            for (; p < len; p++) {
                if (quote) {
                    if (text[p] == quote)
                        quote = 0;
                } else if (text[p] == '"' || text[p] == '\'') {
                    quote = text[p];
                } else if (text[p] == '>') {
                    break;
                }
            }
            if (p >= len)
                return -1;
            span.startEnd = p + 1;
            span.empty = text[p - 1] == '/';
            if (span.empty) {
                span.endStart = span.startEnd;
                span.end = span.startEnd;
            }
            g_array_append_val(spans, span);
            if (!span.empty) {
                size_t idx = spans->len - 1;

                g_array_append_val(stack, idx);
            }
            pos = span.startEnd;
        }
    }
    return stack->len == 0 ? 0 : -1;
}


/* ---- tree <-> text ---- */

/* Next element after @node in preorder, staying inside @top. */
static xmlNodePtr
vrmNextElement(xmlNodePtr node, xmlNodePtr top)
{
    xmlNodePtr cur = node;

    if (cur->type == XML_ELEMENT_NODE && cur->children) {
        for (cur = cur->children; cur; cur = cur->next) {
            if (cur->type == XML_ELEMENT_NODE)
                return cur;
        }
        cur = node;
    }
    while (cur && cur != top) {
        xmlNodePtr sib;

        for (sib = cur->next; sib; sib = sib->next) {
            if (sib->type == XML_ELEMENT_NODE)
                return sib;
        }
        cur = cur->parent;
    }
    return NULL;
}

static const vrmXMLSpan *
vrmDomainXMLSpan(vrmDomainXML *dom, xmlNodePtr node)
{
    g_autofree char *qname = NULL;
    const vrmXMLSpan *span;
    xmlNodePtr cur = dom->root;
    size_t idx = 0;

    while (cur && cur != node) {
        cur = vrmNextElement(cur, dom->root);
        idx++;
    }
    if (!cur || idx >= dom->spans->len)
        goto error;
    span = &g_array_index(dom->spans, vrmXMLSpan, idx);
    if (node->ns && node->ns->prefix)
        qname = g_strdup_printf("%s:%s", (const char *)node->ns->prefix,
                                (const char *)node->name);
    else
        qname = g_strdup((const char *)node->name);
    if (strlen(qname) != span->nameLen ||
        memcmp(qname, dom->text + span->start + 1, span->nameLen) != 0)
        goto error;
    return span;

 error:
    vrmReportError(VRM_ERR_INTERNAL,
                   _("cannot locate element '%1$s' in the text of the domain XML"),
                   (const char *)node->name);
    return NULL;
}

static vrmDomainXML *
vrmDomainXMLOpen(const char *xml)
{
    g_autoptr(vrmDomainXML) dom = g_new0(vrmDomainXML, 1);
    const char *what = _("domain XML");
    xmlNodePtr cur;

    dom->text = xml;
    dom->len = xml ? strlen(xml) : 0;
    if (!(dom->doc = vrmXMLParseMemory(xml, dom->len, what, true)))
        return NULL;
    dom->root = xmlDocGetRootElement(dom->doc);
    if (!vrmXMLIsElement(dom->root, NULL, "domain")) {
        g_autofree char *name = vrmXMLNodeName(dom->root);

        vrmReportError(VRM_ERR_XML,
                       _("expected a domain XML with root element 'domain', found '%1$s'"),
                       name);
        return NULL;
    }

    dom->spans = g_array_new(FALSE, FALSE, sizeof(vrmXMLSpan));
    /* the root is the first element in the text */
    if (vrmXMLScan(dom->text, dom->len, dom->spans) < 0) {
        vrmReportError(VRM_ERR_INTERNAL,
                       _("cannot find the element boundaries in the domain XML"));
        return NULL;
    }

    for (cur = dom->root->children; cur; cur = cur->next) {
        if (vrmXMLIsElement(cur, NULL, "metadata")) {
            dom->metadata = cur;
            break;
        }
    }
    if (!dom->metadata)
        return g_steal_pointer(&dom);

    for (cur = vrmNextElement(dom->metadata, dom->metadata); cur;
         cur = vrmNextElement(cur, dom->metadata)) {
        if (!vrmXMLIsElement(cur, VRM_XML_NS_MIGRATION, "migration"))
            continue;
        if (dom->migration) {
            vrmReportError(VRM_ERR_XML,
                           _("the domain XML has more than one 'migration' element in namespace '%1$s'"),
                           VRM_XML_NS_MIGRATION);
            return NULL;
        }
        dom->migration = cur;
    }
    return g_steal_pointer(&dom);
}


/* ---- splicing ---- */

/* Layout of the line an element starts on. */
typedef struct {
    char *indent;       /* whitespace before the element on its line */
    const char *eol;    /* "\n" or "\r\n" */
    const char *unit;   /* one level of indentation: "\t" or two spaces */
    bool pretty;        /* the element starts its own line */
} vrmLayout;

static void
vrmLayoutClear(vrmLayout *layout)
{
    g_free(layout->indent);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(vrmLayout, vrmLayoutClear);

static void
vrmLayoutOf(vrmDomainXML *dom, size_t start, vrmLayout *layout)
{
    size_t p = start;

    while (p > 0 && (dom->text[p - 1] == ' ' || dom->text[p - 1] == '\t'))
        p--;
    layout->pretty = p > 0 && dom->text[p - 1] == '\n';
    layout->eol = (p > 1 && dom->text[p - 2] == '\r') ? "\r\n" : "\n";
    layout->indent = layout->pretty ? g_strndup(dom->text + p, start - p) :
        g_strdup("");
    layout->unit = layout->indent[0] == '\t' ? "\t" : "  ";
}

/*
 * Lay out @formatted (our formatter's output: two spaces per level, one
 * element per line, no literal newline in any value) for insertion at
 * @indent. The first line gets no indentation: the caller places it.
 */
static void
vrmReindent(GString *out, const char *formatted, const vrmLayout *layout,
            const char *indent)
{
    g_auto(GStrv) lines = g_strsplit(formatted, "\n", -1);
    bool first = true;
    size_t i;

    for (i = 0; lines[i]; i++) {
        const char *line = lines[i];
        size_t spaces = strspn(line, " ");
        size_t level;

        if (!*line)
            continue;
        line += spaces;
        if (layout->pretty && !first) {
            g_string_append(out, layout->eol);
            g_string_append(out, indent);
        }
        /* our formatter indents by two spaces per level */
        for (level = 0; layout->pretty && level < spaces / 2; level++)
            g_string_append(out, layout->unit);
        g_string_append(out, line);
        first = false;
    }
}

static char *
vrmDomainXMLReplaceSpan(vrmDomainXML *dom, size_t from, size_t to, const char *insert)
{
    GString *out = g_string_sized_new(dom->len + strlen(insert));

    g_string_append_len(out, dom->text, from);
    g_string_append(out, insert);
    g_string_append_len(out, dom->text + to, dom->len - to);
    return g_string_free(out, FALSE);
}

/* Replace @node (and only its bytes) with @formatted. */
static char *
vrmDomainXMLReplace(vrmDomainXML *dom, xmlNodePtr node, const char *formatted)
{
    const vrmXMLSpan *span = vrmDomainXMLSpan(dom, node);
    g_auto(vrmLayout) layout = { 0 };
    g_autoptr(GString) text = g_string_new(NULL);

    if (!span)
        return NULL;
    vrmLayoutOf(dom, span->start, &layout);
    vrmReindent(text, formatted, &layout, layout.indent);
    return vrmDomainXMLReplaceSpan(dom, span->start, span->end, text->str);
}

/* Append @formatted as the last child element of @parent. */
static char *
vrmDomainXMLAppendChild(vrmDomainXML *dom, xmlNodePtr parent,
                        const char *formatted)
{
    const vrmXMLSpan *pspan = vrmDomainXMLSpan(dom, parent);
    const vrmXMLSpan *first = NULL;
    const vrmXMLSpan *last = NULL;
    g_auto(vrmLayout) layout = { 0 };
    g_autoptr(GString) text = g_string_new(NULL);
    g_autofree char *childIndent = NULL;
    g_autofree char *qname = NULL;
    xmlNodePtr cur;

    if (!pspan)
        return NULL;
    for (cur = parent->children; cur; cur = cur->next) {
        if (cur->type != XML_ELEMENT_NODE)
            continue;
        if (!(last = vrmDomainXMLSpan(dom, cur)))
            return NULL;
        if (!first)
            first = last;
    }

    vrmLayoutOf(dom, pspan->start, &layout);
    if (!layout.pretty && dom->root == parent)
        layout.pretty = true;   /* <domain> opens the document */
    childIndent = g_strdup_printf("%s%s", layout.indent, layout.unit);
    if (first) {
        g_auto(vrmLayout) childLayout = { 0 };

        vrmLayoutOf(dom, first->start, &childLayout);
        layout.eol = childLayout.eol;
        if (childLayout.pretty) {
            g_free(childIndent);
            childIndent = g_steal_pointer(&childLayout.indent);
        } else {
            layout.pretty = false;
        }
    }

    if (pspan->empty) {
        /* <parent .../> becomes <parent ...>child</parent> */
        qname = g_strndup(dom->text + pspan->start + 1, pspan->nameLen);
        g_string_append_len(text, dom->text + pspan->start,
                            pspan->startEnd - 2 - pspan->start);
        g_string_append_c(text, '>');
        if (layout.pretty) {
            g_string_append(text, layout.eol);
            g_string_append(text, childIndent);
        }
        vrmReindent(text, formatted, &layout, childIndent);
        if (layout.pretty) {
            g_string_append(text, layout.eol);
            g_string_append(text, layout.indent);
        }
        g_string_append_printf(text, "</%s>", qname);
        return vrmDomainXMLReplaceSpan(dom, pspan->start, pspan->end, text->str);
    }

    if (layout.pretty) {
        g_string_append(text, layout.eol);
        g_string_append(text, childIndent);
    }
    vrmReindent(text, formatted, &layout, childIndent);
    if (!last) {
        /* no child yet: keep the closing tag on its own line */
        bool newline = memchr(dom->text + pspan->startEnd, '\n',
                              pspan->endStart - pspan->startEnd) != NULL;

        if (layout.pretty && !newline) {
            g_string_append(text, layout.eol);
            g_string_append(text, layout.indent);
        }
        return vrmDomainXMLReplaceSpan(dom, pspan->startEnd, pspan->startEnd, text->str);
    }
    return vrmDomainXMLReplaceSpan(dom, last->end, last->end, text->str);
}

/* Remove @node with the whitespace that precedes it on its line. */
static char *
vrmDomainXMLRemove(vrmDomainXML *dom, xmlNodePtr node)
{
    const vrmXMLSpan *span = vrmDomainXMLSpan(dom, node);
    size_t from;

    if (!span)
        return NULL;
    from = span->start;
    while (from > 0 && (dom->text[from - 1] == ' ' || dom->text[from - 1] == '\t'))
        from--;
    if (from > 0 && dom->text[from - 1] == '\n') {
        from--;
        if (from > 0 && dom->text[from - 1] == '\r')
            from--;
    }
    return vrmDomainXMLReplaceSpan(dom, from, span->end, "");
}

/* Element children, comments and PIs: what removal must not drop. */
static bool
vrmHasContent(xmlNodePtr node)
{
    xmlNodePtr cur;

    for (cur = node->children; cur; cur = cur->next) {
        if (cur->type == XML_ELEMENT_NODE || cur->type == XML_COMMENT_NODE ||
            cur->type == XML_PI_NODE)
            return true;
        if ((cur->type == XML_TEXT_NODE || cur->type == XML_CDATA_SECTION_NODE) &&
            cur->content) {
            const char *p;

            for (p = (const char *)cur->content; *p; p++) {
                if (!g_ascii_isspace(*p))
                    return true;
            }
        }
    }
    return false;
}


/* ---- public API ---- */

int
vrmDomainXMLGetMigration(const char *xml, vrmMigrationDef **def)
{
    g_autoptr(vrmDomainXML) dom = NULL;

    *def = NULL;
    if (!(dom = vrmDomainXMLOpen(xml)))
        return -1;
    if (!dom->migration)
        return 0;
    if (!(*def = vrmMigrationDefParseElement(dom->migration)))
        return -1;
    return 1;
}

int
vrmDomainXMLCountCopyDisks(const char *xml, unsigned int *disks)
{
    g_autoptr(vrmDomainXML) dom = NULL;
    xmlNodePtr devices = NULL, cur, child;

    *disks = 0;
    if (!(dom = vrmDomainXMLOpen(xml)))
        return -1;
    for (cur = dom->root->children; cur; cur = cur->next) {
        if (vrmXMLIsElement(cur, NULL, "devices"))
            devices = cur;
    }
    for (cur = devices ? devices->children : NULL; cur; cur = cur->next) {
        bool source = false, skip = false;

        if (!vrmXMLIsElement(cur, NULL, "disk"))
            continue;
        /* what libvirt may mirror (an upper bound: --migrate-disks can
         * name fewer): a disk with a source that is neither read-only nor
         * shared between hosts, whatever its device (a CD-ROM is
         * read-only) */
        for (child = cur->children; child; child = child->next) {
            if (vrmXMLIsElement(child, NULL, "source"))
                source = true;
            if (vrmXMLIsElement(child, NULL, "readonly") ||
                vrmXMLIsElement(child, NULL, "shareable") ||
                vrmXMLIsElement(child, NULL, "transient"))
                skip = true;
        }
        if (source && !skip)
            (*disks)++;
    }
    return 0;
}

/*
 * Put @childText (a child of our element, formatted at level 0) into the
 * domain XML, replacing the existing child called @childName.
 */
static char *
vrmDomainXMLSetChild(const char *xml, const char *childName,
                     const char *childText)
{
    g_autoptr(vrmDomainXML) dom = NULL;
    g_autoptr(vrmMigrationDef) def = NULL;
    g_autoptr(GString) text = g_string_new(NULL);
    xmlNodePtr existing;

    if (!(dom = vrmDomainXMLOpen(xml)))
        return NULL;

    if (dom->migration) {
        /* the result must stay valid: check what is there first */
        if (!(def = vrmMigrationDefParseElement(dom->migration)))
            return NULL;
        if (!dom->migration->ns->prefix) {
            /* default namespace: the child must leave it */
            g_string_append_printf(text, "<%s xmlns=\"\"%s", childName,
                                   childText + strlen(childName) + 1);
            childText = text->str;
        }
        if ((existing = vrmXMLChild(dom->migration, childName)))
            return vrmDomainXMLReplace(dom, existing, childText);
        return vrmDomainXMLAppendChild(dom, dom->migration, childText);
    }

    /* no element yet: build <rdma:migration> (and <metadata>) around it */
    g_string_append_printf(text, "<%s:migration xmlns:%s=\"%s\">\n",
                           VRM_XML_NS_PREFIX, VRM_XML_NS_PREFIX,
                           VRM_XML_NS_MIGRATION);
    {
        g_auto(GStrv) lines = g_strsplit(childText, "\n", -1);
        size_t i;

        for (i = 0; lines[i]; i++) {
            if (*lines[i])
                g_string_append_printf(text, "  %s\n", lines[i]);
        }
    }
    g_string_append_printf(text, "</%s:migration>\n", VRM_XML_NS_PREFIX);

    if (dom->metadata)
        return vrmDomainXMLAppendChild(dom, dom->metadata, text->str);

    {
        g_autoptr(GString) meta = g_string_new("<metadata>\n");
        g_auto(GStrv) lines = g_strsplit(text->str, "\n", -1);
        size_t i;

        for (i = 0; lines[i]; i++) {
            if (*lines[i])
                g_string_append_printf(meta, "  %s\n", lines[i]);
        }
        g_string_append(meta, "</metadata>\n");
        return vrmDomainXMLAppendChild(dom, dom->root, meta->str);
    }
}

char *
vrmDomainXMLSetMigration(const char *xml, const vrmMigrationDef *def)
{
    g_autoptr(vrmDomainXML) dom = NULL;
    g_autoptr(GString) buf = g_string_new(NULL);

    if (!(dom = vrmDomainXMLOpen(xml)))
        return NULL;

    if (dom->migration) {
        const char *prefix = (const char *)dom->migration->ns->prefix;

        vrmMigrationDefFormatBuf(buf, def, prefix, 0);
        return vrmDomainXMLReplace(dom, dom->migration, buf->str);
    }

    vrmMigrationDefFormatBuf(buf, def, NULL, dom->metadata ? 0 : 1);
    if (dom->metadata)
        return vrmDomainXMLAppendChild(dom, dom->metadata, buf->str);
    g_string_prepend(buf, "<metadata>\n");
    g_string_append(buf, "</metadata>\n");
    return vrmDomainXMLAppendChild(dom, dom->root, buf->str);
}

/* The start tag of an element as the surgery creates it. */
static bool
vrmDomainXMLIsOurStartTag(vrmDomainXML *dom, const vrmXMLSpan *span,
                          const char *tag)
{
    size_t len = strlen(tag);

    return span->startEnd - span->start == len &&
        memcmp(dom->text + span->start, tag, len) == 0;
}

/*
 * After the offer and answer are gone, tidy what they leave empty: an
 * element (or <metadata>) the surgery created goes; another emptied
 * element of ours gets its self-closing form back (libvirt writes empty
 * metadata elements that way).
 */
static char *
vrmDomainXMLTidy(char *cur)
{
    g_autofree char *ourTag = g_strdup_printf("<%s:migration xmlns:%s=\"%s\">",
                                              VRM_XML_NS_PREFIX, VRM_XML_NS_PREFIX,
                                              VRM_XML_NS_MIGRATION);
    g_autoptr(vrmDomainXML) dom = NULL;
    const vrmXMLSpan *span;
    g_autofree char *collapsed = NULL;
    char *next;

    if (!(dom = vrmDomainXMLOpen(cur)) || !dom->migration)
        goto done;
    if (vrmHasContent(dom->migration) ||
        !(span = vrmDomainXMLSpan(dom, dom->migration)) || span->empty)
        goto done;

    if (!vrmDomainXMLIsOurStartTag(dom, span, ourTag)) {
        collapsed = g_strdup_printf("%.*s/>", (int)(span->startEnd - 1 - span->start),
                                    dom->text + span->start);
        next = vrmDomainXMLReplaceSpan(dom, span->start, span->end, collapsed);
        g_free(cur);
        return next;
    }

    if (!(next = vrmDomainXMLRemove(dom, dom->migration)))
        goto done;
    g_free(cur);
    cur = next;

    g_clear_pointer(&dom, vrmDomainXMLFree);
    if (!(dom = vrmDomainXMLOpen(cur)) || !dom->metadata ||
        vrmHasContent(dom->metadata) ||
        !(span = vrmDomainXMLSpan(dom, dom->metadata)) ||
        !vrmDomainXMLIsOurStartTag(dom, span, "<metadata>"))
        goto done;
    if ((next = vrmDomainXMLRemove(dom, dom->metadata))) {
        g_free(cur);
        cur = next;
    }

 done:
    vrmResetLastError();
    return cur;
}

char *
vrmDomainXMLStripNegotiation(const char *xml)
{
    static const char *const children[] = { "offer", "answer" };
    g_autofree char *cur = g_strdup(xml);
    bool removed = false;
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(children); i++) {
        g_autoptr(vrmDomainXML) dom = NULL;
        xmlNodePtr node;
        char *next;

        if (!(dom = vrmDomainXMLOpen(cur)))
            return NULL;
        if (!dom->migration ||
            !(node = vrmXMLChild(dom->migration, children[i])))
            continue;
        if (!(next = vrmDomainXMLRemove(dom, node)))
            return NULL;
        g_free(cur);
        cur = next;
        removed = true;
    }
    if (removed)
        cur = vrmDomainXMLTidy(g_steal_pointer(&cur));
    return g_steal_pointer(&cur);
}

char *
vrmDomainXMLSetLocator(const char *xml, const vrmLocator *locator)
{
    g_autofree char *clean = vrmDomainXMLStripNegotiation(xml);
    g_autoptr(GString) buf = g_string_new(NULL);

    if (!clean)
        return NULL;
    vrmLocatorFormatBuf(buf, locator, 0);
    return vrmDomainXMLSetChild(clean, "locator", buf->str);
}
