/*
 * vrmdomainxmltest.c: surgery on full libvirt domain XMLs
 *
 * For every tests/xml/domaindata/NAME.xml:
 *   NAME.locator.out.xml after vrmDomainXMLSetLocator() (what the hook
 *                        prints: the locator replaced, any offer or answer
 *                        of an old version gone)
 *   NAME.params.out.xml  after vrmDomainXMLSetMigration() with new parameters
 * and always: the element read back equals what was written, the text
 * outside our element is untouched (common prefix and suffix cover it),
 * setting the same locator again changes nothing, and the parameters
 * survive.
 */
#include <config.h>

#include <string.h>

#include "vrmtestutils.h"
#include "vrmdomainxml.h"
#include "vrmerror.h"
#include "vrmtestmain.h"

static vrmLocator *
testLocator(void)
{
    return vrmLocatorNew("dst.example.org", "192.0.2.20", 16530);
}

/*
 * The bytes that differ between @before and @after must all sit inside
 * the element that changed: check that the differing stretch of @after
 * contains no '<' that opens anything but our element's content, i.e. that
 * the common prefix reaches into <metadata> and the common suffix starts
 * at or before </metadata> (or </domain> when metadata was created).
 */
static void
assertLocalChange(const char *before, const char *after)
{
    size_t lb = strlen(before);
    size_t la = strlen(after);
    size_t p = 0;
    size_t s = 0;
    const char *meta;

    if (strcmp(before, after) == 0)
        return;     /* replaced by identical text */
    while (p < lb && p < la && before[p] == after[p])
        p++;
    while (s < lb - p && s < la - p && before[lb - 1 - s] == after[la - 1 - s])
        s++;
    /* everything before the change is the unchanged head of the input */
    g_assert_cmpmem(before, p, after, p);
    g_assert_cmpmem(before + lb - s, s, after + la - s, s);
    /* and the change starts after <metadata> (or where it is created) */
    if ((meta = strstr(before, "<metadata"))) {
        g_assert_cmpuint(p, >, (size_t)(meta - before));
        g_assert_nonnull(strstr(before + lb - s, "</metadata>") ?
                         strstr(before + lb - s, "</metadata>") :
                         strstr(before + lb - s, "</domain>"));
    } else {
        g_assert_nonnull(strstr(before + lb - s, "</domain>"));
    }
}

static void
testDomain(gconstpointer opaque)
{
    const char *path = opaque;
    size_t base = strlen(path) - strlen(".xml");
    g_autofree char *input = vrmTestReadFile(path);
    g_autofree char *locatorPath = g_strdup_printf("%.*s.locator.out.xml", (int)base, path);
    g_autofree char *paramsPath = g_strdup_printf("%.*s.params.out.xml", (int)base, path);
    g_autoptr(vrmLocator) locator = testLocator();
    g_autoptr(vrmMigrationDef) before = NULL;
    g_autoptr(vrmMigrationDef) afterLocator = NULL;
    g_autoptr(vrmMigrationDef) afterParams = NULL;
    g_autoptr(vrmMigrationDef) newDef = vrmMigrationDefNew();
    g_autofree char *withLocator = NULL;
    g_autofree char *again = NULL;
    g_autofree char *withParams = NULL;
    g_autofree char *strippedInput = NULL;
    int found;

    vrmResetLastError();
    found = vrmDomainXMLGetMigration(input, &before);
    if (found < 0)
        g_error("%s: %s", path, vrmGetLastErrorMessage());

    /* locator: what the destination's hook prints */
    withLocator = vrmDomainXMLSetLocator(input, locator);
    if (!withLocator)
        g_error("%s: %s", path, vrmGetLastErrorMessage());
    g_assert_true(vrmTestCompareToFile(withLocator, locatorPath));
    strippedInput = vrmDomainXMLStripNegotiation(input);
    g_assert_nonnull(strippedInput);
    assertLocalChange(strippedInput, withLocator);
    g_assert_cmpint(vrmDomainXMLGetMigration(withLocator, &afterLocator), ==, 1);
    g_assert_true(vrmLocatorEqual(afterLocator->locator, locator));
    g_assert_null(afterLocator->offer);
    g_assert_null(afterLocator->answer);
    if (before) {
        g_autoptr(GString) a = g_string_new(NULL);
        g_autoptr(GString) b = g_string_new(NULL);

        vrmMigrationParamsFormatBuf(a, &before->params, 0);
        vrmMigrationParamsFormatBuf(b, &afterLocator->params, 0);
        g_assert_cmpstr(a->str, ==, b->str);
    }
    if (!before || (!before->offer && !before->answer))
        g_assert_cmpstr(strippedInput, ==, input);
    /* a second time: nothing changes */
    again = vrmDomainXMLSetLocator(withLocator, locator);
    g_assert_cmpstr(again, ==, withLocator);

    /* whole element */
    newDef->params.channels = 8;
    newDef->params.capsOn = 0x1;
    newDef->params.address = g_strdup("2001:db8::1");
    withParams = vrmDomainXMLSetMigration(input, newDef);
    g_assert_nonnull(withParams);
    g_assert_true(vrmTestCompareToFile(withParams, paramsPath));
    assertLocalChange(input, withParams);
    g_assert_cmpint(vrmDomainXMLGetMigration(withParams, &afterParams), ==, 1);
    g_assert_cmpuint(afterParams->params.channels, ==, 8);
    g_assert_null(afterParams->offer);
}

typedef struct {
    const char *name;
    const char *xml;
    const char *error;
} vrmDomainErrorCase;

static const vrmDomainErrorCase errorCases[] = {
    { "not-domain", "<network><name>x</name></network>",
      "expected a domain XML with root element 'domain', found 'network'" },
    { "two-elements",
      "<domain><metadata>"
      "<a:migration xmlns:a='http://virt-rdma.org/xmlns/migration/1.0'/>"
      "<b:migration xmlns:b='http://virt-rdma.org/xmlns/migration/1.0'/>"
      "</metadata></domain>",
      "the domain XML has more than one 'migration' element in namespace 'http://virt-rdma.org/xmlns/migration/1.0'" },
    { "bad-element",
      "<domain><metadata>"
      "<rdma:migration xmlns:rdma='http://virt-rdma.org/xmlns/migration/1.0'>"
      "<channels count='99'/></rdma:migration></metadata></domain>",
      "attribute 'count' of element 'channels' has invalid value '99'; expected an integer from 1 to 64" },
    { "entities",
      "<!DOCTYPE domain [<!ENTITY big 'x'>]><domain>&big;</domain>",
      "domain XML must not declare entities in its DOCTYPE" },
    { "not-well-formed", "<domain><metadata></domain>",
      "domain XML is not well-formed at line 1: Opening and ending tag mismatch: metadata line 1 and domain" },
};

static void
testDomainError(gconstpointer opaque)
{
    const vrmDomainErrorCase *c = opaque;
    g_autoptr(vrmMigrationDef) def = NULL;
    g_autoptr(vrmLocator) locator = testLocator();
    g_autofree char *out = NULL;

    vrmResetLastError();
    g_assert_cmpint(vrmDomainXMLGetMigration(c->xml, &def), ==, -1);
    g_assert_null(def);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==, c->error);
    vrmResetLastError();
    out = vrmDomainXMLSetLocator(c->xml, locator);
    g_assert_null(out);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==, c->error);
}

static void
testAnywhereInMetadata(void)
{
    const char *xml =
        "<domain>\n  <metadata>\n    <wrap:box xmlns:wrap='urn:wrap'>\n"
        "      <rdma:migration xmlns:rdma='http://virt-rdma.org/xmlns/migration/1.0'>\n"
        "        <channels count='3'/>\n      </rdma:migration>\n"
        "    </wrap:box>\n  </metadata>\n</domain>\n";
    g_autoptr(vrmMigrationDef) def = NULL;

    g_assert_cmpint(vrmDomainXMLGetMigration(xml, &def), ==, 1);
    g_assert_cmpuint(def->params.channels, ==, 3);
}

static void
testOutsideMetadataIgnored(void)
{
    const char *xml =
        "<domain><description>x</description>"
        "<rdma:migration xmlns:rdma='http://virt-rdma.org/xmlns/migration/1.0'/>"
        "</domain>";
    g_autoptr(vrmMigrationDef) def = NULL;

    g_assert_cmpint(vrmDomainXMLGetMigration(xml, &def), ==, 0);
    g_assert_null(def);
}

/* What --copy-storage-all would copy: one disk channel each */
static void
testCountCopyDisks(void)
{
    const char *xml =
        "<domain type='kvm'><name>d</name><devices>\n"
        "  <disk type='file' device='disk'><source file='/var/lib/a.img'/>"
        "<target dev='vda' bus='virtio'/></disk>\n"
        "  <disk type='block' device='lun'><source dev='/dev/sdb'/></disk>\n"
        "  <disk type='file'><source file='/b.qcow2'/></disk>\n"
        "  <disk type='file' device='cdrom'><source file='/x.iso'/><readonly/></disk>\n"
        "  <disk type='file' device='disk'><source file='/ro.img'/><readonly/></disk>\n"
        "  <disk type='file' device='disk'><source file='/s.img'/><shareable/></disk>\n"
        "  <disk type='file' device='disk'><target dev='vdz'/></disk>\n"
        "  <disk type='file' device='floppy'><source file='/f.img'/></disk>\n"
        "</devices></domain>";
    unsigned int n = 99;

    g_assert_cmpint(vrmDomainXMLCountCopyDisks(xml, &n), ==, 0);
    g_assert_cmpuint(n, ==, 4);
    g_assert_cmpint(vrmDomainXMLCountCopyDisks("<domain><devices/></domain>", &n), ==, 0);
    g_assert_cmpuint(n, ==, 0);
    g_assert_cmpint(vrmDomainXMLCountCopyDisks("<domain>", &n), ==, -1);
    g_assert_cmpuint(n, ==, 0);
}

static const vrmTestFunc testFuncs[] = {
    { "/domainxml/anywhere-in-metadata", testAnywhereInMetadata },
    { "/domainxml/outside-metadata-ignored", testOutsideMetadataIgnored },
    { "/domainxml/count-copy-disks", testCountCopyDisks },
};

/* The tests' set-up, a case a domain XML file, and the error cases */
static void
testInit(int *argc, char ***argv)
{
    static const char *const excludeOut[] = { ".out.xml", NULL };
    g_autofree char *dir = NULL;
    g_autoptr(GPtrArray) files = NULL;
    size_t i;

    vrmTestInit(argc, argv);
    dir = vrmTestDataDir("xml/domaindata");
    files = vrmTestListFiles(dir, ".xml", excludeOut);
    g_assert_cmpuint(files->len, >, 0);
    for (i = 0; i < files->len; i++) {
        g_autofree char *testPath = g_strdup_printf("/domainxml/%s",
                                                    (const char *)g_ptr_array_index(files, i));

        g_test_add_data_func_full(testPath,
                                  g_build_filename(dir, g_ptr_array_index(files, i), NULL),
                                  testDomain, g_free);
    }
    VRM_TEST_ADD_CASES("/domainxml/error/", errorCases, testDomainError);
}

VRM_TEST_MAIN(testInit, testFuncs)
