/*
 * vrmschematest.c: every valid fixture matches its RNG schema, every
 * invalid one is refused (by the well-formedness check or the schema)
 */
#include <config.h>

#include <string.h>

#include "vrmtestutils.h"
#include "vrmcontrol.h"
#include "vrmpeer.h"
#include "vrmerror.h"
#include "vrmmigrationdef.h"
#include "vrmxmlutil.h"
#include "vrmtestmain.h"

/* parses and validates a document, NULL on error (vrmerror.h) */
typedef void *(*vrmParseFunc)(const char *xml);

typedef struct {
    vrmXMLSchema schema;
    bool valid;
    vrmParseFunc parse;         /* for the child-order test of valid fixtures */
    GDestroyNotify free;        /* frees what parse returned */
    char *path;
} vrmSchemaCase;

static void
vrmSchemaCaseFree(gpointer opaque)
{
    vrmSchemaCase *c = opaque;

    g_free(c->path);
    g_free(c);
}

static void
testFixture(gconstpointer opaque)
{
    const vrmSchemaCase *c = opaque;
    g_autoptr(xmlDoc) doc = NULL;
    g_autofree char *message = NULL;
    int rc;

    vrmResetLastError();
    if (!(doc = vrmXMLParseFile(c->path, "fixture"))) {
        if (c->valid) {
            g_test_message("%s: %s", c->path, vrmGetLastErrorMessage());
            g_test_fail();
        }
        return;
    }
    rc = vrmXMLValidate(doc, c->schema, &message);
    g_assert_cmpint(rc, >=, 0);
    if (c->valid && rc != 0) {
        g_test_message("%s does not match %s: %s", c->path,
                       vrmXMLSchemaTypeToString(c->schema), message);
        g_test_fail();
    } else if (!c->valid && rc == 0) {
        g_test_message("%s matches %s although it is invalid", c->path,
                       vrmXMLSchemaTypeToString(c->schema));
        g_test_fail();
    }
}

static void
testSchemasLoad(void)
{
    g_autoptr(xmlDoc) doc = NULL;
    int i;

    doc = vrmXMLParseMemory("<job-list/>", 11, "test", false);
    g_assert_nonnull(doc);
    for (i = 0; i < VRM_XML_SCHEMA_LAST; i++) {
        g_autofree char *message = NULL;

        /* 1 (invalid) for migration.rng, 0 for control.rng: never -1 */
        g_assert_cmpint(vrmXMLValidate(doc, i, &message), >=, 0);
    }
    g_assert_cmpint(vrmXMLValidate(doc, VRM_XML_SCHEMA_CONTROL, NULL), ==, 0);
    g_assert_cmpint(vrmXMLValidate(doc, VRM_XML_SCHEMA_MIGRATION, NULL), ==, 1);
}

static void
testMissingSchemaDir(void)
{
    /* run in a subprocess: the schema cache is per process */
    if (g_test_subprocess()) {
        g_autoptr(xmlDoc) doc = vrmXMLParseMemory("<job-list/>", 11, "test", false);

        g_setenv("VRM_SCHEMA_DIR", "/nonexistent", TRUE);
        g_assert_cmpint(vrmXMLValidate(doc, VRM_XML_SCHEMA_CONTROL, NULL), ==, -1);
        g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_INTERNAL);
        g_print("%s\n", vrmGetLastErrorMessage());
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    g_test_trap_assert_stdout("*cannot load the XML schema '/nonexistent/control.rng'*");
}

/*
 * The schema's address patterns and the parser (inet_pton) must accept
 * the same strings; otherwise the parser's own check is bypassed or users
 * get libxml2's terse schema message for an address the parser takes.
 * The XML fuzzer found "::ffbf:192.0.2.1" that way. Enumerate the shapes
 * of an IPv6 address: n groups, optionally "::" and m more groups,
 * optionally a dotted quad, and compare the two answers for each.
 */
static bool
schemaAcceptsAddress(const char *address)
{
    g_autofree char *xml = g_strdup_printf(
        "<rdma:migration xmlns:rdma='%s'><transport address='%s'/></rdma:migration>",
        "http://virt-rdma.org/xmlns/migration/1.0", address);
    g_autoptr(xmlDoc) doc = vrmXMLParseMemory(xml, strlen(xml), "test", false);
    int rc;

    g_assert_nonnull(doc);
    rc = vrmXMLValidate(doc, VRM_XML_SCHEMA_MIGRATION, NULL);
    g_assert_cmpint(rc, >=, 0);
    return rc == 0;
}

static void
checkAddress(const char *address, unsigned int *accepted)
{
    bool schema = schemaAcceptsAddress(address);
    bool parser = vrmValidAddress(address);

    if (schema != parser) {
        g_test_message("'%s': schema %s it, inet_pton %s it", address,
                       schema ? "accepts" : "refuses",
                       parser ? "accepts" : "refuses");
        g_test_fail();
    }
    if (parser)
        (*accepted)++;
}

static void
appendGroups(GString *s, unsigned int count, unsigned int first,
             bool wideGroup)
{
    /* widths 1 to 4 in turn; one group of 5 digits if asked */
    static const char *const groups[] = { "0", "ab", "1f2", "FFfe" };
    unsigned int i;

    for (i = 0; i < count; i++) {
        if (i > 0)
            g_string_append_c(s, ':');
        if (wideGroup && i == 0)
            g_string_append(s, "12345");
        else
            g_string_append(s, groups[(first + i) % G_N_ELEMENTS(groups)]);
    }
}

static void
testAddresses(void)
{
    static const char *const tails[] = { NULL, "192.0.2.1", "0.0.0.0",
                                         "255.255.255.255", "192.0.2.01",
                                         "256.0.0.1", "1.2.3" };
    static const char *const odd[] = {
        "", ":", ":::", "1:::2", ":1::", "1::2::3", "::ffbf:192.0.2.1",
        "64:ff9b::192.0.2.1", "::ffff:192.0.2.1", "1.2.3.4", "01.2.3.4",
        "::1.2.3.4:5", "fe80::1%eth0", " ::1", "::1 ", "g::", "::G",
        "1:2:3:4:5:6:7:8:9", "::1:2:3:4:5:6:7:8", "1.2.3.4::",
    };
    unsigned int accepted = 0;
    unsigned int total = 0;
    size_t before, after, tail, i;
    int compress, wide;

    for (before = 0; before <= 8; before++) {
        for (after = 0; after <= 8; after++) {
            for (compress = 0; compress <= 1; compress++) {
                if (!compress && after > 0)
                    continue;
                for (tail = 0; tail < G_N_ELEMENTS(tails); tail++) {
                    for (wide = 0; wide <= 1; wide++) {
                        g_autoptr(GString) s = g_string_new(NULL);

                        if (wide && before == 0)
                            continue;
                        appendGroups(s, before, 0, wide);
                        if (compress)
                            g_string_append(s, "::");
                        appendGroups(s, after, before, false);
                        if (tails[tail]) {
                            if (s->len > 0 && s->str[s->len - 1] != ':')
                                g_string_append_c(s, ':');
                            g_string_append(s, tails[tail]);
                        }
                        checkAddress(s->str, &accepted);
                        total++;
                    }
                }
            }
        }
    }
    for (i = 0; i < G_N_ELEMENTS(odd); i++, total++)
        checkAddress(odd[i], &accepted);
    g_test_message("%u of %u addresses valid", accepted, total);
    /* the enumeration must reach both answers often */
    g_assert_cmpuint(accepted, >, 100);
    g_assert_cmpuint(total - accepted, >, 100);
}

/*
 * Our parsers take child elements in any order (as libvirt's do), so the
 * schemas must too. libxml2's RELAX NG validator does not implement every
 * interleave (it refused a <limit> between the size elements of an
 * answer, found by the fuzzer), so check the property directly: in every
 * valid fixture, move each child element of each element to every other
 * position among its siblings, and require that the parser, which
 * validates against the schema first, still accepts the document.
 */
static void *
parseMigration(const char *xml)
{
    return vrmMigrationDefParseString(xml);
}

static void *
parseControl(const char *xml)
{
    return vrmControlMessageParseString(xml);
}

static void *
parsePeer(const char *xml)
{
    return vrmPeerMessageParseString(xml);
}

/*
 * The locator's host name: the schema's pattern and vrmValidHostName()
 * must agree, as for addresses.
 */
static void
testHostNames(void)
{
    g_autofree char *label63 = g_strnfill(63, 'a');
    g_autofree char *label64 = g_strnfill(64, 'b');
    g_autofree char *long253 = NULL;
    g_autofree char *long255 = NULL;
    g_autofree char *with63 = g_strdup_printf("x.%s.y", label63);
    g_autofree char *with64 = g_strdup_printf("x.%s.y", label64);
    const char *names[] = {
        "a", "sandbox-a", "hv-17.rack3.example.org", "A1", "1a", "a-",
        "a--b", "xn--bcher-kva.example", "", "-a", "a.", ".a", "a..b",
        "a_b", "a b", "a;b", "é", "a.-b", "a/b", NULL, NULL, NULL, NULL, NULL,
    };
    size_t n = 19;
    size_t i;

    {
        g_autofree char *label61 = g_strnfill(61, 'c');

        /* three labels of 63, one of 61: 253 characters with the dots */
        long253 = g_strdup_printf("%s.%s.%s.%s", label63, label63, label63, label61);
        long255 = g_strdup_printf("%s.z", long253);
    }
    g_assert_cmpuint(strlen(long253), ==, 253);
    names[n++] = label63;
    names[n++] = label64;
    names[n++] = with63;
    names[n++] = with64;
    names[n++] = long255;
    for (i = 0; i < n; i++) {
        g_autofree char *xml = g_strdup_printf(
            "<rdma:migration xmlns:rdma='%s'><locator host='%s' address='192.0.2.1' port='1'/></rdma:migration>",
            "http://virt-rdma.org/xmlns/migration/1.0", names[i]);
        g_autoptr(xmlDoc) doc = vrmXMLParseMemory(xml, strlen(xml), "test", false);
        bool schema;
        bool parser = vrmValidHostName(names[i]);

        g_assert_nonnull(doc);
        schema = vrmXMLValidate(doc, VRM_XML_SCHEMA_MIGRATION, NULL) == 0;
        if (schema != parser) {
            g_test_message("'%s': schema %s it, vrmValidHostName %s it", names[i],
                           schema ? "accepts" : "refuses",
                           parser ? "accepts" : "refuses");
            g_test_fail();
        }
    }
    g_assert_true(vrmValidHostName(long253));
    g_assert_false(vrmValidHostName(long255));
    g_assert_true(vrmValidHostName(label63));
    g_assert_false(vrmValidHostName(label64));
}

static xmlNodePtr
nthElementChild(xmlNodePtr parent, size_t n)
{
    xmlNodePtr cur;

    for (cur = parent->children; cur; cur = cur->next) {
        if (cur->type == XML_ELEMENT_NODE && n-- == 0)
            return cur;
    }
    return NULL;
}

static size_t
countElementChildren(xmlNodePtr parent)
{
    xmlNodePtr cur;
    size_t n = 0;

    for (cur = parent->children; cur; cur = cur->next)
        n += cur->type == XML_ELEMENT_NODE;
    return n;
}

/* elements with two or more element children, in document order */
static void
collectParents(xmlNodePtr node, GPtrArray *out)
{
    xmlNodePtr cur;

    if (countElementChildren(node) >= 2)
        g_ptr_array_add(out, node);
    for (cur = node->children; cur; cur = cur->next) {
        if (cur->type == XML_ELEMENT_NODE)
            collectParents(cur, out);
    }
}

static void
testChildOrder(gconstpointer opaque)
{
    const vrmSchemaCase *c = opaque;
    g_autoptr(xmlDoc) doc = vrmXMLParseFile(c->path, "fixture");
    g_autoptr(GPtrArray) parents = g_ptr_array_new();
    g_autofree char *input = vrmTestReadFile(c->path);
    unsigned int variants = 0;
    size_t p, i, j;
    void *obj;

    g_assert_nonnull(doc);
    if (!(obj = c->parse(input))) {
        g_test_message("%s: %s", c->path, vrmGetLastErrorMessage());
        g_test_fail();
        return;
    }
    c->free(obj);
    collectParents(xmlDocGetRootElement(doc), parents);

    for (p = 0; p < parents->len; p++) {
        size_t n = countElementChildren(g_ptr_array_index(parents, p));

        for (i = 0; i < n; i++) {
            for (j = 0; j < n; j++) {
                g_autoptr(xmlDoc) copy = NULL;
                g_autoptr(GPtrArray) copyParents = g_ptr_array_new();
                xmlNodePtr parent, moved, before;
                xmlChar *text = NULL;
                int len = 0;

                if (i == j)
                    continue;
                copy = xmlCopyDoc(doc, 1);
                collectParents(xmlDocGetRootElement(copy), copyParents);
                parent = g_ptr_array_index(copyParents, p);
                moved = nthElementChild(parent, i);
                xmlUnlinkNode(moved);
                /* j-th among the n-1 left; past the last means at the end */
                if ((before = nthElementChild(parent, j)))
                    xmlAddPrevSibling(before, moved);
                else
                    xmlAddChild(parent, moved);

                xmlDocDumpMemory(copy, &text, &len);
                g_assert_nonnull(text);
                vrmResetLastError();
                if (!(obj = c->parse((const char *)text))) {
                    g_test_message("%s, element <%s>: child %zu moved to %zu is refused: %s\n%s",
                                   c->path, (const char *)parent->name, i, j,
                                   vrmGetLastErrorMessage(), (const char *)text);
                    g_test_fail();
                } else {
                    c->free(obj);
                }
                xmlFree(text);
                variants++;
            }
        }
    }
    g_test_message("%s: %u orders", c->path, variants);
}

static vrmSchemaCase *
vrmSchemaCaseNew(vrmXMLSchema schema, vrmParseFunc parse,
                 GDestroyNotify freeFunc, const char *dir, const char *name)
{
    vrmSchemaCase *c = g_new0(vrmSchemaCase, 1);

    c->schema = schema;
    c->valid = parse != NULL;
    c->parse = parse;
    c->free = freeFunc;
    c->path = g_build_filename(dir, name, NULL);
    return c;
}

/*
 * Every fixture of @sub against @schema; with @parse (valid fixtures
 * only), also the child-order test of each input (not of *.out.xml).
 */
static void
addDir(const char *sub, vrmXMLSchema schema, vrmParseFunc parse,
       GDestroyNotify freeFunc)
{
    g_autofree char *dir = vrmTestDataDir(sub);
    g_autoptr(GPtrArray) files = vrmTestListFiles(dir, ".xml", NULL);
    size_t i;

    for (i = 0; i < files->len; i++) {
        const char *name = g_ptr_array_index(files, i);
        g_autofree char *testPath = g_strdup_printf("/schema/%s/%s", sub, name);
        g_autofree char *orderPath = NULL;

        g_test_add_data_func_full(testPath,
                                  vrmSchemaCaseNew(schema, parse, freeFunc, dir, name),
                                  testFixture, vrmSchemaCaseFree);
        if (!parse || g_str_has_suffix(name, ".out.xml"))
            continue;
        orderPath = g_strdup_printf("/schema/child-order/%s/%s", sub, name);
        g_test_add_data_func_full(orderPath,
                                  vrmSchemaCaseNew(schema, parse, freeFunc, dir, name),
                                  testChildOrder, vrmSchemaCaseFree);
    }
    g_assert_cmpuint(files->len, >, 0);
}

static const vrmTestFunc testFuncs[] = {
    { "/schema/load", testSchemasLoad },
    { "/schema/missing-dir", testMissingSchemaDir },
    { "/schema/addresses", testAddresses },
    { "/schema/host-names", testHostNames },
};

/* The tests' set-up, and a case a fixture of each schema */
static void
testInit(int *argc, char ***argv)
{
    vrmTestInit(argc, argv);
    addDir("xml/migrationdata", VRM_XML_SCHEMA_MIGRATION, parseMigration,
           (GDestroyNotify)vrmMigrationDefFree);
    addDir("xml/migrationdata-invalid", VRM_XML_SCHEMA_MIGRATION, NULL, NULL);
    addDir("xml/controldata", VRM_XML_SCHEMA_CONTROL, parseControl,
           (GDestroyNotify)vrmControlMessageFree);
    addDir("xml/controldata-invalid", VRM_XML_SCHEMA_CONTROL, NULL, NULL);
    addDir("xml/peerdata", VRM_XML_SCHEMA_PEER, parsePeer,
           (GDestroyNotify)vrmPeerMessageFree);
    addDir("xml/peerdata-invalid", VRM_XML_SCHEMA_PEER, NULL, NULL);
}

VRM_TEST_MAIN(testInit, testFuncs)
