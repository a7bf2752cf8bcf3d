/*
 * vrmhelpervirttest.c: virt-rdmad's libvirt link against libvirt's own
 * test driver (test:///default, one instance per process, a running
 * domain called "test")
 *
 * The outcome table; the facts of a domain (found, active, no job, its
 * metadata); the locator set into the live metadata of an RDMA-enabled
 * domain at start and again when a user replaces the metadata (the
 * METADATA_CHANGE event), and left alone in a domain without our
 * element; and the main loop served while the worker talks to libvirt.
 */
#include <config.h>

#include <signal.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vrmtestutils.h"
#include "vrmerror.h"
#include "vrmhelpervirt.h"
#include "vrmtestmain.h"

#define TEST_URI "test:///default"
#define TEST_UUID "6695eb01-f6a4-8304-79aa-97f2502e193f"

static void
quiet(void *opaque, virErrorPtr err)
{
}

/* The outcome of a migration by what libvirt says of the domain after it */
static const struct {
    bool found;                 /* libvirt knows the domain */
    int state;
    int reason;
    int job;
    vrmOutcome want;
} outcomeCases[] = {
    /* gone: a transient domain that left */
    { false, 0, 0, 0, VRM_OUTCOME_SUCCEEDED },
    { true, VIR_DOMAIN_SHUTOFF, VIR_DOMAIN_SHUTOFF_MIGRATED, VIR_DOMAIN_JOB_NONE, VRM_OUTCOME_SUCCEEDED },
    { true, VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_MIGRATION, VIR_DOMAIN_JOB_NONE, VRM_OUTCOME_PENDING },
    { true, VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_MIGRATION_CANCELED, VIR_DOMAIN_JOB_UNBOUNDED, VRM_OUTCOME_PENDING },
    { true, VIR_DOMAIN_RUNNING, VIR_DOMAIN_RUNNING_MIGRATION_CANCELED, VIR_DOMAIN_JOB_NONE, VRM_OUTCOME_FAILED },
    { true, VIR_DOMAIN_SHUTOFF, VIR_DOMAIN_SHUTOFF_CRASHED, VIR_DOMAIN_JOB_NONE, VRM_OUTCOME_FAILED },
    /* a resumed post-copy that completed: libvirt reported the domain
     * paused with no job before it shut it off (CI, fault row 13) */
    { true, VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_POSTCOPY_FAILED, VIR_DOMAIN_JOB_NONE, VRM_OUTCOME_PENDING },
    { true, VIR_DOMAIN_PAUSED, VIR_DOMAIN_PAUSED_POSTCOPY, VIR_DOMAIN_JOB_NONE, VRM_OUTCOME_PENDING },
};

static void
testOutcomeTable(void)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(outcomeCases); i++) {
        /* which row, should one fail */
        g_test_message("outcome row %zu", i);
        g_assert_cmpint(vrmMigrationOutcome(outcomeCases[i].found, outcomeCases[i].state,
                                            outcomeCases[i].reason, outcomeCases[i].job),
                        ==, outcomeCases[i].want);
    }
    /* and the job's state for each: libvirt not asked is never "completed"
     * (issue 33 item 8) */
    g_assert_cmpint(vrmOutcomeJobState(VRM_OUTCOME_SUCCEEDED), ==, VRM_JOB_STATE_COMPLETED);
    g_assert_cmpint(vrmOutcomeJobState(VRM_OUTCOME_FAILED), ==, VRM_JOB_STATE_FAILED);
    g_assert_cmpint(vrmOutcomeJobState(VRM_OUTCOME_UNKNOWN), ==, VRM_JOB_STATE_UNKNOWN);
    g_assert_cmpint(vrmOutcomeJobState(VRM_OUTCOME_PENDING), ==, VRM_JOB_STATE_LAST);
}

static void
factsDone(vrmDomainFacts *facts, gpointer opaque)
{
    vrmDomainFacts **out = opaque;

    *out = facts;
}

static vrmDomainFacts *
queryFacts(vrmHelperVirt *v, const char *uuid)
{
    vrmDomainFacts *facts = NULL;
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

    vrmHelperVirtQueryDomain(v, uuid, factsDone, &facts);
    while (!facts && g_get_monotonic_time() < deadline)
        g_main_context_iteration(NULL, TRUE);
    g_assert_nonnull(facts);
    return facts;
}

static char *
waitLocator(virDomainPtr dom, const char *want)
{
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

    while (g_get_monotonic_time() < deadline) {
        char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT,
                                         VRM_XML_NS_MIGRATION,
                                         VIR_DOMAIN_AFFECT_LIVE);

        if (xml && (!want || strstr(xml, want)))
            return xml;
        free(xml);
        g_main_context_iteration(NULL, FALSE);
        g_usleep(20 * 1000);
    }
    return NULL;
}

static void
testLocatorAndFacts(void)
{
    g_autoptr(vrmLocator) loc = vrmLocatorNew("sandbox-a", "198.18.0.1", 16530);
    g_autoptr(vrmHelperVirt) v = NULL;
    g_autoptr(vrmDomainFacts) facts = NULL;
    g_autoptr(vrmDomainFacts) missing = NULL;
    virConnectPtr conn;
    virDomainPtr dom;
    char *xml;
    char *msg = NULL;
    GPid impostor = 0;

    virSetErrorFunc(NULL, quiet);
    conn = virConnectOpen(TEST_URI);
    g_assert_nonnull(conn);
    dom = virDomainLookupByUUIDString(conn, TEST_UUID);
    g_assert_nonnull(dom);
    /* RDMA-enabled before the helper starts: the locator arrives at start */
    g_assert_cmpint(virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT,
                                         "<migration><pin-all/></migration>",
                                         "rdma", VRM_XML_NS_MIGRATION,
                                         VIR_DOMAIN_AFFECT_LIVE), ==, 0);
    v = vrmHelperVirtNew(TEST_URI, loc, false);
    xml = waitLocator(dom, "198.18.0.1");
    g_assert_nonnull(xml);
    g_test_message("metadata after start: %s", xml);
    g_assert_nonnull(strstr(xml, "pin-all"));
    g_assert_nonnull(strstr(xml, "host=\"sandbox-a\""));
    free(xml);

    /* a user replaces the element: the locator comes back */
    g_assert_cmpint(virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT,
                                         "<migration><channels count='3'/></migration>",
                                         "rdma", VRM_XML_NS_MIGRATION,
                                         VIR_DOMAIN_AFFECT_LIVE), ==, 0);
    xml = waitLocator(dom, "count=\"3\"");
    g_assert_nonnull(xml);
    free(xml);
    xml = waitLocator(dom, "198.18.0.1");
    g_assert_nonnull(xml);
    g_assert_nonnull(strstr(xml, "count=\"3\""));
    free(xml);

    /* a process that says it is the domain's QEMU ("-uuid UUID" in its
     * arguments) is not taken for it: only libvirt's pid file counts, and
     * the test driver's domain has none (issue 33 item 5) */
    {
        const char *argv[] = { "sh", "-c", "sleep 30", "-uuid", TEST_UUID, NULL };
        g_autoptr(GError) err = NULL;

        g_assert_true(g_spawn_async(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH,
                                    NULL, NULL, &impostor, &err));
    }
    facts = queryFacts(v, TEST_UUID);
    kill(impostor, SIGKILL);
    g_spawn_close_pid(impostor);
    g_test_message("QEMU of the test domain: pid %lld, uid %lld", facts->qemuPid, facts->qemuUid);
    g_assert_cmpint(facts->qemuPid, ==, -1);
    g_assert_cmpint(facts->qemuUid, ==, -1);
    g_assert_null(facts->error);
    g_assert_true(facts->found);
    g_assert_true(facts->active);
    g_assert_cmpstr(facts->name, ==, "test");
    g_assert_false(facts->migratingOut);
    g_assert_true(facts->rdmaEnabled);
    g_assert_nonnull(facts->def);
    g_assert_cmpuint(facts->def->params.channels, ==, 3);
    g_assert_true(vrmLocatorEqual(facts->def->locator, loc));
    g_assert_true(vrmHelperVirtStatus(v, &msg));
    g_free(msg);

    missing = queryFacts(v, "00000000-0000-0000-0000-000000000001");
    g_assert_null(missing->error);
    g_assert_false(missing->found);

    /* a domain without our element is left alone */
    g_assert_cmpint(virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, NULL,
                                         NULL, VRM_XML_NS_MIGRATION,
                                         VIR_DOMAIN_AFFECT_LIVE), ==, 0);
    g_usleep(300 * 1000);
    g_main_context_iteration(NULL, FALSE);
    g_assert_null(virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT,
                                       VRM_XML_NS_MIGRATION, VIR_DOMAIN_AFFECT_LIVE));
    virDomainFree(dom);
    virConnectClose(conn);
}

/* [migration] rdma = all: a domain without our element gets one with the
 * locator; one whose element says enabled="no" never does */
static void
testTagAll(void)
{
    g_autoptr(vrmLocator) loc = vrmLocatorNew("sandbox-a", "198.18.0.1", 16530);
    g_autoptr(vrmHelperVirt) v = NULL;
    g_autoptr(vrmDomainFacts) facts = NULL;
    virConnectPtr conn;
    virDomainPtr dom;
    char *xml;

    virSetErrorFunc(NULL, quiet);
    conn = virConnectOpen(TEST_URI);
    g_assert_nonnull(conn);
    dom = virDomainLookupByUUIDString(conn, TEST_UUID);
    g_assert_nonnull(dom);
    virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, NULL, NULL,
                         VRM_XML_NS_MIGRATION, VIR_DOMAIN_AFFECT_LIVE);
    v = vrmHelperVirtNew(TEST_URI, loc, true);
    xml = waitLocator(dom, "198.18.0.1");
    g_assert_nonnull(xml);
    g_test_message("metadata of a domain that had none: %s", xml);
    g_assert_null(strstr(xml, "enabled"));
    free(xml);
    facts = queryFacts(v, TEST_UUID);
    g_assert_true(facts->rdmaEnabled);
    g_assert_nonnull(facts->def);
    g_assert_false(facts->def->disabled);

    /* opted out: the element stays as the user wrote it */
    g_assert_cmpint(virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT,
                                         "<migration enabled='no'/>",
                                         "rdma", VRM_XML_NS_MIGRATION,
                                         VIR_DOMAIN_AFFECT_LIVE), ==, 0);
    g_usleep(500 * 1000);
    g_main_context_iteration(NULL, FALSE);
    xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT,
                               VRM_XML_NS_MIGRATION, VIR_DOMAIN_AFFECT_LIVE);
    g_assert_nonnull(xml);
    g_test_message("metadata of a domain that opted out: %s", xml);
    g_assert_null(strstr(xml, "locator"));
    free(xml);
    g_clear_pointer(&facts, vrmDomainFactsFree);
    facts = queryFacts(v, TEST_UUID);
    g_assert_true(facts->def->disabled);

    virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, NULL, NULL,
                         VRM_XML_NS_MIGRATION, VIR_DOMAIN_AFFECT_LIVE);
    virDomainFree(dom);
    virConnectClose(conn);
}

static void
testNoLibvirt(void)
{
    g_autoptr(vrmHelperVirt) v = vrmHelperVirtNew("qemu+unix:///system?socket=/nonexistent/sock",
                                                  NULL, false);
    g_autoptr(vrmDomainFacts) facts = queryFacts(v, TEST_UUID);
    g_autofree char *msg = NULL;

    g_assert_nonnull(facts->error);
    g_test_message("%s", facts->error);
    g_assert_nonnull(strstr(facts->error, "cannot connect to libvirt"));
    g_assert_false(vrmHelperVirtStatus(v, &msg));
    g_assert_nonnull(msg);
}

static const vrmTestFunc testFuncs[] = {
    { "/virt/outcome-table", testOutcomeTable },
    { "/virt/locator-and-facts", testLocatorAndFacts },
    { "/virt/tag-all", testTagAll },
    { "/virt/no-libvirt", testNoLibvirt },
};

VRM_TEST_MAIN(vrmTestInit, testFuncs)
