/*
 * vrmdomainxmltest.c: surgery on full libvirt domain XMLs
 *
 * For every tests/xml/domaindata/NAME.xml:
 *   NAME.offer.out.xml   after vrmDomainXMLSetOffer()
 *   NAME.answer.out.xml  after vrmDomainXMLSetAnswer() on that
 *   NAME.params.out.xml  after vrmDomainXMLSetMigration() with new parameters
 * and always: the element read back equals what was written, the text
 * outside our element is untouched (common prefix and suffix cover it),
 * and stripping the offer and answer gives back the input.
 */
#include <config.h>

#include <string.h>

#include "vrmtestutils.h"
#include "vrmdomainxml.h"
#include "vrmerror.h"

static vrmOffer *
testOffer(void)
{
    vrmOffer *offer = vrmOfferNew();

    offer->version = 1;
    offer->capabilities = 0x3;
    g_assert_true(vrmTokenParse("0123456789abcdef0123456789abcdef", &offer->token));
    offer->address = g_strdup("192.0.2.10");
    offer->port = 18515;
    offer->device = g_strdup("mlx5_0");
    offer->devicePort = 1;
    offer->channels = 4;
    offer->chunkSize = 1048576;
    offer->ringDepth = 16;
    offer->bandwidth = 0;
    return offer;
}

static vrmAnswer *
testAnswer(void)
{
    vrmAnswer *answer = vrmAnswerNew(VRM_ANSWER_ACCEPTED);

    answer->version = 1;
    answer->capabilities = 0x1;
    answer->channels = 4;
    answer->chunkSize = 1048576;
    answer->ringDepth = 16;
    answer->bandwidth = 25000;
    vrmAnswerAddLimit(answer, VRM_LIMIT_BANDWIDTH, 0, 25000, NULL);
    return answer;
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
    g_autofree char *offerPath = g_strdup_printf("%.*s.offer.out.xml", (int)base, path);
    g_autofree char *answerPath = g_strdup_printf("%.*s.answer.out.xml", (int)base, path);
    g_autofree char *paramsPath = g_strdup_printf("%.*s.params.out.xml", (int)base, path);
    g_autoptr(vrmOffer) offer = testOffer();
    g_autoptr(vrmAnswer) answer = testAnswer();
    g_autoptr(vrmMigrationDef) before = NULL;
    g_autoptr(vrmMigrationDef) afterOffer = NULL;
    g_autoptr(vrmMigrationDef) afterAnswer = NULL;
    g_autoptr(vrmMigrationDef) afterParams = NULL;
    g_autoptr(vrmMigrationDef) newDef = vrmMigrationDefNew();
    g_autofree char *withOffer = NULL;
    g_autofree char *withAnswer = NULL;
    g_autofree char *withParams = NULL;
    g_autofree char *stripped = NULL;
    g_autofree char *strippedInput = NULL;
    g_autofree char *want = NULL;
    g_autofree char *got = NULL;
    int found;

    vrmResetLastError();
    found = vrmDomainXMLGetMigration(input, &before);
    if (found < 0)
        g_error("%s: %s", path, vrmGetLastErrorMessage());

    /* offer */
    withOffer = vrmDomainXMLSetOffer(input, offer);
    if (!withOffer)
        g_error("%s: %s", path, vrmGetLastErrorMessage());
    g_assert_true(vrmTestCompareToFile(withOffer, offerPath));
    assertLocalChange(input, withOffer);
    g_assert_cmpint(vrmDomainXMLGetMigration(withOffer, &afterOffer), ==, 1);
    g_assert_nonnull(afterOffer->offer);
    want = vrmOfferFormat(offer);
    got = vrmOfferFormat(afterOffer->offer);
    g_assert_cmpstr(got, ==, want);
    g_clear_pointer(&want, g_free);
    g_clear_pointer(&got, g_free);

    /* answer on top */
    withAnswer = vrmDomainXMLSetAnswer(withOffer, answer);
    g_assert_nonnull(withAnswer);
    g_assert_true(vrmTestCompareToFile(withAnswer, answerPath));
    assertLocalChange(withOffer, withAnswer);
    g_assert_cmpint(vrmDomainXMLGetMigration(withAnswer, &afterAnswer), ==, 1);
    g_assert_nonnull(afterAnswer->offer);
    g_assert_nonnull(afterAnswer->answer);
    want = vrmAnswerFormat(answer);
    got = vrmAnswerFormat(afterAnswer->answer);
    g_assert_cmpstr(got, ==, want);

    /* strip: back to the input without its own offer/answer */
    stripped = vrmDomainXMLStripNegotiation(withAnswer);
    strippedInput = vrmDomainXMLStripNegotiation(input);
    g_assert_nonnull(stripped);
    g_assert_nonnull(strippedInput);
    g_assert_cmpstr(stripped, ==, strippedInput);
    if (!before || (!before->offer && !before->answer))
        g_assert_cmpstr(strippedInput, ==, input);

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
    g_autoptr(vrmOffer) offer = testOffer();
    g_autofree char *out = NULL;

    vrmResetLastError();
    g_assert_cmpint(vrmDomainXMLGetMigration(c->xml, &def), ==, -1);
    g_assert_null(def);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==, c->error);
    vrmResetLastError();
    out = vrmDomainXMLSetOffer(c->xml, offer);
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

int
main(int argc, char **argv)
{
    static const char *const excludeOut[] = { ".out.xml", NULL };
    g_autofree char *dir = NULL;
    g_autoptr(GPtrArray) files = NULL;
    size_t i;

    vrmTestInit(&argc, &argv);
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
    for (i = 0; i < G_N_ELEMENTS(errorCases); i++) {
        g_autofree char *testPath = g_strdup_printf("/domainxml/error/%s",
                                                    errorCases[i].name);

        g_test_add_data_func(testPath, &errorCases[i], testDomainError);
    }
    g_test_add_func("/domainxml/anywhere-in-metadata", testAnywhereInMetadata);
    g_test_add_func("/domainxml/outside-metadata-ignored", testOutsideMetadataIgnored);
    return g_test_run();
}
