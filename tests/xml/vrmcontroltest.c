/*
 * vrmcontroltest.c: control messages built in code, as the helper and the
 * tools do, and what they look like on the socket
 */
#include <config.h>

#include <string.h>

#include "vrmtestutils.h"
#include "vrmcontrol.h"
#include "vrmerror.h"
#include "vrmtestmain.h"

static void
testErrorReply(void)
{
    g_autoptr(vrmControlMessage) msg = NULL;
    g_autoptr(vrmControlMessage) back = NULL;
    g_autofree char *xml = NULL;

    msg = vrmControlReplyNewError(VRM_ERR_POLICY, "too many <channels> & \"jobs\"\n");
    xml = vrmControlMessageFormat(msg);
    g_assert_cmpstr(xml, ==,
                    "<reply status=\"error\">\n"
                    "  <error code=\"policy\">too many &lt;channels&gt; &amp; &quot;jobs&quot;&#10;</error>\n"
                    "</reply>\n");
    back = vrmControlMessageParseString(xml);
    g_assert_nonnull(back);
    g_assert_cmpint(back->type, ==, VRM_CONTROL_REPLY);
    g_assert_cmpint(back->status, ==, VRM_REPLY_ERROR);
    g_assert_cmpint(back->errorCode, ==, VRM_ERR_POLICY);
    g_assert_cmpstr(back->errorMessage, ==, "too many <channels> & \"jobs\"\n");
}

static void
testJobReply(void)
{
    g_autoptr(vrmControlMessage) msg = vrmControlMessageNew(VRM_CONTROL_REPLY);
    g_autoptr(vrmControlMessage) back = NULL;
    vrmJobRecord *job = vrmJobRecordNew();
    g_autofree char *xml = NULL;
    g_autofree char *again = NULL;
    const vrmJobRecord *b;

    job->id = 12;
    job->domainName = g_strdup("web1");
    job->role = VRM_JOB_ROLE_DESTINATION;
    job->state = VRM_JOB_STATE_COMPLETED;
    job->socketPath = g_strdup("/run/virt-rdma/job-12.sock");
    job->hasRecoveryOf = true;
    job->recoveryOf = 11;
    job->hasStats = true;
    job->stats.bytesSent = 1;
    job->stats.bytesReceived = G_MAXUINT64;
    job->stats.mbps = 1000;
    job->stats.chunks = 3;
    job->stats.pinnedBytes = 4;
    job->stats.registrationNs = 5;
    job->stats.channels = 2;
    job->stats.hasCpu = true;
    job->stats.cpuNs = G_MAXUINT64;
    job->migration = vrmMigrationDefNew();
    job->migration->params.channels = 2;
    g_ptr_array_add(msg->jobs, job);

    xml = vrmControlMessageFormat(msg);
    back = vrmControlMessageParseString(xml);
    g_assert_nonnull(back);
    g_assert_cmpuint(back->jobs->len, ==, 1);
    b = g_ptr_array_index(back->jobs, 0);
    g_assert_cmpuint(b->id, ==, 12);
    g_assert_cmpint(b->role, ==, VRM_JOB_ROLE_DESTINATION);
    g_assert_cmpint(b->state, ==, VRM_JOB_STATE_COMPLETED);
    g_assert_cmpstr(b->socketPath, ==, "/run/virt-rdma/job-12.sock");
    g_assert_true(b->hasRecoveryOf);
    g_assert_cmpuint(b->recoveryOf, ==, 11);
    g_assert_false(b->hasIntent);
    g_assert_true(b->hasStats);
    g_assert_cmpuint(b->stats.bytesReceived, ==, G_MAXUINT64);
    g_assert_true(b->stats.hasCpu);
    g_assert_cmpuint(b->stats.cpuNs, ==, G_MAXUINT64);
    g_assert_cmpuint(b->migration->params.channels, ==, 2);
    g_assert_null(b->error);
    again = vrmControlMessageFormat(back);
    g_assert_cmpstr(again, ==, xml);
}

static void
testJobErrorCode(void)
{
    g_autoptr(vrmControlMessage) msg = vrmControlMessageNew(VRM_CONTROL_REPLY);
    g_autoptr(vrmControlMessage) back = NULL;
    g_autoptr(vrmControlMessage) old = NULL;
    g_autoptr(vrmJobRecord) copy = NULL;
    vrmJobRecord *job = vrmJobRecordNew();
    g_autofree char *xml = NULL;
    const vrmJobRecord *b;

    job->id = 3;
    job->domainName = g_strdup("web1");
    job->role = VRM_JOB_ROLE_SOURCE;
    job->state = VRM_JOB_STATE_FAILED;
    job->error = g_strdup("the peer went away");
    job->errorCode = VRM_ERR_PEER;
    g_ptr_array_add(msg->jobs, job);

    xml = vrmControlMessageFormat(msg);
    g_assert_nonnull(strstr(xml, "<error code=\"peer\">the peer went away</error>"));
    back = vrmControlMessageParseString(xml);
    g_assert_nonnull(back);
    b = g_ptr_array_index(back->jobs, 0);
    g_assert_cmpint(b->errorCode, ==, VRM_ERR_PEER);
    g_assert_cmpstr(b->error, ==, "the peer went away");
    copy = vrmJobRecordCopy(b);
    g_assert_cmpint(copy->errorCode, ==, VRM_ERR_PEER);

    /* a record of an older helper: an error without a code */
    old = vrmControlMessageParseString("<reply status=\"ok\">"
                                       "<job id=\"3\" role=\"source\" state=\"failed\">"
                                       "<domain name=\"web1\"/><error>gone</error>"
                                       "</job></reply>");
    g_assert_nonnull(old);
    b = g_ptr_array_index(old->jobs, 0);
    g_assert_cmpint(b->errorCode, ==, VRM_ERR_INTERNAL);
}

static void
testRequests(void)
{
    g_autoptr(vrmControlMessage) open = vrmControlMessageNew(VRM_CONTROL_JOB_PREPARE);
    g_autoptr(vrmControlMessage) query = vrmControlMessageNew(VRM_CONTROL_JOB_QUERY);
    g_autoptr(vrmControlMessage) back = NULL;
    g_autofree char *xml = NULL;
    g_autofree char *qxml = NULL;

    open->domainName = g_strdup("web1");
    open->domainUUID = g_strdup("7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b");
    open->overrides = g_new0(vrmMigrationParams, 1);
    open->overrides->capsOn = 0x1;
    open->overrides->hasBandwidth = true;
    open->overrides->bandwidth = 0;
    xml = vrmControlMessageFormat(open);
    g_assert_cmpstr(xml, ==,
                    "<job-prepare>\n"
                    "  <domain name=\"web1\" uuid=\"7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b\"/>\n"
                    "  <overrides>\n"
                    "    <pin-all/>\n"
                    "    <bandwidth max=\"0\"/>\n"
                    "  </overrides>\n"
                    "</job-prepare>\n");
    back = vrmControlMessageParseString(xml);
    g_assert_nonnull(back);
    g_assert_nonnull(back->overrides);
    g_assert_true(back->overrides->hasBandwidth);
    g_assert_null(back->migration);

    query->domainName = g_strdup("web 1");
    qxml = vrmControlMessageFormat(query);
    g_assert_cmpstr(qxml, ==, "<job-query domain=\"web 1\"/>\n");
}

static void
testOverridesMerge(void)
{
    vrmMigrationParams base = { 0 };
    vrmMigrationParams over = { 0 };

    base.channels = 2;
    base.capsOn = 0x1;
    base.device = g_strdup("mlx5_0");
    over.capsOff = 0x1;
    over.channels = 8;
    over.hasBandwidth = true;
    over.bandwidth = 500;
    vrmMigrationParamsMerge(&base, &over);
    g_assert_cmpuint(base.channels, ==, 8);
    g_assert_cmpuint(base.capsOn, ==, 0);
    g_assert_cmpuint(base.capsOff, ==, 0x1);
    g_assert_cmpstr(base.device, ==, "mlx5_0");
    g_assert_true(base.hasBandwidth);
    vrmMigrationParamsClear(&base);
    g_assert_true(vrmMigrationParamsIsEmpty(&base));
}

static void
testParseXMLUnknownRoot(void)
{
    g_autoptr(xmlDoc) doc = vrmXMLParseMemory("<job-delete/>", 13, "test", false);
    g_autoptr(xmlXPathContext) ctxt = vrmXMLNewContext(doc);

    vrmResetLastError();
    g_assert_null(vrmControlMessageParseXML(ctxt));
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "unknown control message 'job-delete'; allowed messages: "
                    "'job-incoming', 'job-prepare', 'host-info', 'job-query', 'job-cancel', 'job-list', 'job-events', 'peer-check', 'reply'");
}

static gpointer
parseInThread(gpointer opaque)
{
    const char *xml = opaque;
    size_t i;

    for (i = 0; i < 200; i++) {
        g_autoptr(vrmControlMessage) msg = vrmControlMessageParseString(xml);

        if (!msg)
            return GINT_TO_POINTER(0);
    }
    return GINT_TO_POINTER(1);
}

/* The schema cache and the error reports are safe across threads. */
static void
testThreads(void)
{
    const char *xml = "<reply status=\"ok\"><job id=\"1\" role=\"source\" state=\"connected\">"
                      "<domain name=\"a\"/></job></reply>";
    GThread *threads[4];
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(threads); i++)
        threads[i] = g_thread_new("parse", parseInThread, (gpointer)xml);
    for (i = 0; i < G_N_ELEMENTS(threads); i++)
        g_assert_cmpint(GPOINTER_TO_INT(g_thread_join(threads[i])), ==, 1);
}

static const vrmTestFunc testFuncs[] = {
    { "/control/error-reply", testErrorReply },
    { "/control/job-reply", testJobReply },
    { "/control/job-error-code", testJobErrorCode },
    { "/control/requests", testRequests },
    { "/control/overrides-merge", testOverridesMerge },
    { "/control/parse-xml-unknown-root", testParseXMLUnknownRoot },
    { "/control/threads", testThreads },
};

VRM_TEST_MAIN(vrmTestInit, testFuncs)
