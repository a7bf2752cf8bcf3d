/*
 * vrmhelperjobtest: job state machine, engine stats, records on disk
 */
#include <config.h>

#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "vrmhelperjob.h"
#include "vrmerror.h"
#include "vrmtestmain.h"

#define N VRM_JOB_STATE_NEGOTIATING
#define C VRM_JOB_STATE_CONNECTED
#define T VRM_JOB_STATE_TRANSFERRING
#define OK VRM_JOB_STATE_COMPLETED
#define F VRM_JOB_STATE_FAILED
#define X VRM_JOB_STATE_CANCELLED
#define TCP VRM_JOB_STATE_OVER_TCP
#define U VRM_JOB_STATE_UNKNOWN

/* Every pair of states: may the job go from the row to the column? */
static const bool transitions[VRM_JOB_STATE_LAST][VRM_JOB_STATE_LAST] = {
    /*        N      C      T      OK     F      X      TCP    U */
    [N] = { false, true,  true,  true,  true,  true,  true,  true },
    [C] = { false, false, true,  true,  true,  true,  true,  true },
    [T] = { false, false, false, true,  true,  true,  true,  true },
    [OK] = { false, false, false, false, false, false, false, false },
    [F] = { false, false, false, false, false, false, false, false },
    [X] = { false, false, false, false, false, false, false, false },
    [TCP] = { false, false, false, false, false, false, false, false },
    [U] = { false, false, false, false, false, false, false, false },
};

static void
testStateMachine(void)
{
    int from, to;

    for (from = 0; from < VRM_JOB_STATE_LAST; from++) {
        for (to = 0; to < VRM_JOB_STATE_LAST; to++) {
            g_autoptr(vrmHelperJob) job = vrmHelperJobNew(1, VRM_JOB_ROLE_SOURCE);
            int r;

            g_assert_cmpint(vrmJobStateCanChange(from, to), ==, transitions[from][to]);
            job->record->state = from;
            vrmResetLastError();
            r = vrmHelperJobSetState(job, to, VRM_ERR_PEER, "why");
            if (from == to) {
                g_assert_cmpint(r, ==, 0);
            } else if (transitions[from][to]) {
                g_assert_cmpint(r, ==, 0);
                g_assert_cmpint(job->record->state, ==, to);
            } else {
                g_assert_cmpint(r, ==, -1);
                g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_INTERNAL);
                g_assert_cmpint(job->record->state, ==, from);
                g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "cannot go from state"));
            }
        }
    }
    g_assert_false(vrmJobStateCanChange(VRM_JOB_STATE_LAST, N));
}

static void
testStateError(void)
{
    g_autoptr(vrmHelperJob) job = vrmHelperJobNew(7, VRM_JOB_ROLE_DESTINATION);

    g_assert_cmpint(vrmHelperJobSetState(job, F, VRM_ERR_RDMA, "link down"), ==, 0);
    g_assert_cmpstr(job->record->error, ==, "link down");
    g_assert_cmpint(job->record->errorCode, ==, VRM_ERR_RDMA);
    g_assert_true(vrmJobStateIsFinal(job->record->state));
}

/* A record as the engine writes it (driver/contract/vrmenginestats.h) */
static char *
engineRecord(vrmEngineState state, const char *error)
{
    g_auto(vrmEngineStats) st = { 0 };

    vrmEngineStatsInit(&st);
    st.state = state;
    st.error = g_strdup(error);
    st.errorCode = error ? VRM_ERR_PEER : VRM_ERR_OK;
    st.channels = 4;
    st.established = 4;
    st.bytesSent = 1234567;
    st.bytesReceived = 89;
    st.chunks = 10;
    st.pinnedBytes = 4194304;
    st.registrationNs = 42000;
    st.cpuUserS = 0.25;
    st.cpuSystemS = 1.125;
    st.mbps = 99.6;
    st.mbpsAverage = 50.2;
    st.pinAll = true;
    st.writeImm = true;
    st.capabilities = VRM_CAP_PIN_ALL | VRM_CAP_WRITE_IMM | 0x80000000;
    return vrmEngineStatsFormat(&st);
}

static void
testStatsParse(void)
{
    g_autofree char *json = engineRecord(VRM_ENGINE_STATE_RUNNING, NULL);
    vrmEngineSnapshot es;

    g_assert_cmpint(vrmHelperEngineStatsParse(json, &es), ==, 0);
    g_assert_cmpint(es.state, ==, VRM_ENGINE_STATE_RUNNING);
    g_assert_null(es.error);
    g_assert_cmpuint(es.channels, ==, 4);
    g_assert_cmpuint(es.established, ==, 4);
    g_assert_cmpuint(es.qemuConnections, ==, 0);
    g_assert_cmpuint(es.stats.bytesSent, ==, 1234567);
    g_assert_cmpuint(es.stats.bytesReceived, ==, 89);
    g_assert_cmpuint(es.stats.chunks, ==, 10);
    g_assert_cmpuint(es.stats.pinnedBytes, ==, 4194304);
    g_assert_cmpuint(es.stats.registrationNs, ==, 42000);
    g_assert_true(es.stats.hasCpu);
    g_assert_cmpuint(es.stats.cpuNs, ==, 1375000000);
    g_assert_cmpuint(es.stats.mbps, ==, 100);   /* current while running */
    /* what channel 0 agreed reaches jobinfo (issue 38: pin-all was lost),
     * bits this build does not know left out */
    g_assert_true(es.stats.hasCapabilities);
    g_assert_cmphex(es.stats.capabilities, ==, VRM_CAP_PIN_ALL | VRM_CAP_WRITE_IMM);
    vrmEngineSnapshotClear(&es);
}

static void
testStatsParseFinal(void)
{
    g_autofree char *json = engineRecord(VRM_ENGINE_STATE_COMPLETED, NULL);
    g_autofree char *failed = engineRecord(VRM_ENGINE_STATE_FAILED, "peer sent \"ERROR\"\n");
    vrmEngineSnapshot es;

    g_assert_cmpint(vrmHelperEngineStatsParse(json, &es), ==, 0);
    g_assert_cmpint(es.state, ==, VRM_ENGINE_STATE_COMPLETED);
    g_assert_cmpuint(es.stats.mbps, ==, 50);    /* the average once ended */
    vrmEngineSnapshotClear(&es);

    g_assert_cmpint(vrmHelperEngineStatsParse(failed, &es), ==, 0);
    g_assert_cmpint(es.state, ==, VRM_ENGINE_STATE_FAILED);
    /* sanitised by the writer: one line, nothing a terminal interprets */
    g_assert_cmpstr(es.error, ==, "peer sent \"ERROR\"\\x0a");
    vrmEngineSnapshotClear(&es);
}

static void
testStatsParseBad(void)
{
    const char *bad[] = {
        "",
        "not json",
        "{\"state\": \"running\"}",
        "{\"role\": \"source\", \"state\": \"dancing\", \"error\": null, "
        "\"error-code\": \"ok\", \"channels\": 1, \"established\": 0, "
        "\"qemu-connections\": 0, \"rdma-port\": 0, \"bytes-sent\": 0, "
        "\"bytes-received\": 0}",
        "{\"role\": \"source\", \"state\": \"running\", \"error\": null, "
        "\"error-code\": \"ok\", \"channels\": 1, \"established\": 0, "
        "\"qemu-connections\": 0, \"rdma-port\": 0, \"bytes-sent\": -1, "
        "\"bytes-received\": 0}",
        "{\"state\": \"running\", \"error\": \"unterminated",
    };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(bad); i++) {
        vrmEngineSnapshot es;

        vrmResetLastError();
        g_assert_cmpint(vrmHelperEngineStatsParse(bad[i], &es), ==, -1);
        g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_PROTOCOL);
        g_assert_null(es.error);
    }
    g_assert_cmpint(vrmHelperEngineStatsParse(NULL, &(vrmEngineSnapshot){ 0 }), ==, -1);
}

static void
testApplyStats(void)
{
    g_autoptr(vrmHelperJob) job = vrmHelperJobNew(3, VRM_JOB_ROLE_SOURCE);
    vrmEngineSnapshot es = { .state = VRM_ENGINE_STATE_RUNNING, .channels = 2 };

    es.stats.pinnedBytes = 1000;
    vrmHelperJobApplyStats(job, &es);
    g_assert_cmpint(job->record->state, ==, N);
    g_assert_true(job->record->hasStats);

    /* channel 0 connected and authenticated: the others come lazily */
    es.established = 1;
    es.stats.pinnedBytes = 10;
    vrmHelperJobApplyStats(job, &es);
    g_assert_cmpint(job->record->state, ==, C);
    g_assert_cmpuint(job->record->stats.pinnedBytes, ==, 1000);    /* the peak */

    es.qemuConnections = 2;
    vrmHelperJobApplyStats(job, &es);
    g_assert_cmpint(job->record->state, ==, T);
    g_assert_cmpuint(job->record->stats.channels, ==, 0);

    /* stats never move a job backwards nor out of a final state */
    es.qemuConnections = 0;
    vrmHelperJobApplyStats(job, &es);
    g_assert_cmpint(job->record->state, ==, T);
    vrmHelperJobSetState(job, F, VRM_ERR_INTERNAL, "x");
    es.qemuConnections = 3;
    vrmHelperJobApplyStats(job, &es);
    g_assert_cmpint(job->record->state, ==, F);
}

static void
testJobKey(void)
{
    vrmToken a = { { 0 } }, b = { { 0 } };
    g_autofree char *ka = NULL;
    g_autofree char *ka2 = NULL;
    g_autofree char *kb = NULL;
    char hex[VRM_TOKEN_HEX_LEN + 1];

    b.bytes[15] = 1;
    ka = vrmHelperJobKey(&a);
    ka2 = vrmHelperJobKey(&a);
    kb = vrmHelperJobKey(&b);
    g_assert_cmpuint(strlen(ka), ==, 16);
    g_assert_cmpstr(ka, ==, ka2);
    g_assert_cmpstr(ka, !=, kb);
    /* the token does not show in the name */
    vrmTokenFormat(&b, hex);
    g_assert_null(strstr(hex, kb));
}

static vrmHelperJob *
makeJob(unsigned long long id, vrmJobState state)
{
    vrmHelperJob *job = vrmHelperJobNew(id, VRM_JOB_ROLE_SOURCE);

    job->record->domainName = g_strdup("web1");
    job->record->socketPath = g_strdup("/run/virt-rdma/job-0123456789abcdef.sock");
    job->record->state = state;
    job->record->hasStats = true;
    job->record->stats.bytesSent = 1ull << 33;
    job->record->stats.mbps = 117;
    job->record->migration = vrmMigrationDefNew();
    job->record->migration->offer = vrmOfferNew();
    job->record->migration->offer->version = 1;
    job->record->migration->offer->address = g_strdup("198.18.0.1");
    job->record->migration->offer->port = 18515;
    job->record->migration->offer->channels = 2;
    job->record->migration->offer->chunkSize = 65536;
    job->record->migration->offer->ringDepth = 8;
    if (state == F)
        job->record->error = g_strdup("the peer engine went away");
    return job;
}

static void
testSaveLoad(void)
{
    g_autofree char *dir = g_dir_make_tmp("vrmhelperjobtest-XXXXXX", NULL);
    g_autoptr(vrmHelperJob) done = makeJob(12, F);
    g_autoptr(vrmHelperJob) live = makeJob(3, T);
    g_autoptr(GPtrArray) jobs = NULL;
    g_autofree char *run3 = g_build_filename(dir, "job-3.run", NULL);
    g_autofree char *junk = g_build_filename(dir, "job-99.xml", NULL);
    vrmHelperJob *j;

    live->pid = 4242;
    live->cmPort = 18516;
    live->statsSocket = g_strdup("/run/virt-rdma/job-3.stats");
    live->statsFile = g_strdup("/var/lib/virt-rdma/job-3.stats.json");
    live->sourceLocator = vrmLocatorNew("hv-17.example.org", "192.0.2.17", 16510);
    g_assert_cmpint(vrmHelperJobSave(done, dir), ==, 0);
    g_assert_cmpint(vrmHelperJobSave(live, dir), ==, 0);
    g_assert_true(g_file_test(run3, G_FILE_TEST_EXISTS));
    /* a damaged record is skipped, not fatal */
    g_assert_true(g_file_set_contents(junk, "<job id=", -1, NULL));

    jobs = vrmHelperJobLoadDir(dir);
    g_assert_nonnull(jobs);
    g_assert_cmpuint(jobs->len, ==, 2);
    j = jobs->pdata[0];     /* oldest first */
    g_assert_cmpuint(j->record->id, ==, 3);
    g_assert_cmpint(j->record->state, ==, T);
    g_assert_true(j->adopted);
    g_assert_cmpint(j->pid, ==, 4242);
    g_assert_cmpuint(j->cmPort, ==, 18516);
    g_assert_cmpstr(j->statsSocket, ==, live->statsSocket);
    g_assert_cmpuint(j->record->stats.bytesSent, ==, 1ull << 33);
    g_assert_cmpuint(j->record->migration->offer->port, ==, 18515);
    /* a restarted helper can still ask the source for a recovery */
    g_assert_nonnull(j->sourceLocator);
    g_assert_true(vrmLocatorEqual(j->sourceLocator, live->sourceLocator));
    j = jobs->pdata[1];
    g_assert_cmpuint(j->record->id, ==, 12);
    g_assert_cmpint(j->record->state, ==, F);
    g_assert_false(j->adopted);
    g_assert_null(j->sourceLocator);
    g_assert_cmpstr(j->record->error, ==, "the peer engine went away");
    g_assert_cmpstr(j->record->domainName, ==, "web1");

    /* once final, the .run file goes */
    vrmHelperJobSetState(live, OK, VRM_ERR_OK, NULL);
    g_assert_cmpint(vrmHelperJobSave(live, dir), ==, 0);
    g_assert_false(g_file_test(run3, G_FILE_TEST_EXISTS));
    live->pid = 0;

    vrmHelperJobRemoveFiles(dir, 3);
    vrmHelperJobRemoveFiles(dir, 12);
    g_unlink(junk);
    g_assert_cmpint(g_rmdir(dir), ==, 0);
}

static void
testLoadMissingDir(void)
{
    vrmResetLastError();
    g_assert_null(vrmHelperJobLoadDir("/nonexistent/virt-rdma-state"));
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "/nonexistent/virt-rdma-state"));
}

/* Under systemd a job's end reaches the journal with its fields: `journalctl
 * JOB_ID=7` or `MESSAGE_ID=<ended>` finds it (issue 35 item 4) */
static void
testJournalFields(void)
{
    g_autofree char *dir = g_dir_make_tmp("vrmjobtest-journal-XXXXXX", NULL);
    g_autofree char *sockPath = g_build_filename(dir, "socket", NULL);
    g_autofree char *errPath = g_build_filename(dir, "stderr", NULL);
    g_autofree char *env = NULL;
    g_autofree char *msgid = g_strdup_printf("MESSAGE_ID=%s\n",
                                             vrmJobLogMessageId(VRM_JOB_LOG_ENDED));
    g_autoptr(vrmHelperJob) job = vrmHelperJobNew(7, VRM_JOB_ROLE_DESTINATION);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int errFd = open(errPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int saved = dup(STDERR_FILENO);
    char entry[4096];
    struct stat st;
    ssize_t n;

    g_strlcpy(sa.sun_path, sockPath, sizeof(sa.sun_path));
    g_assert_cmpint(bind(sock, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    g_assert_cmpint(fstat(errFd, &st), ==, 0);
    env = g_strdup_printf("%llu:%llu", (unsigned long long)st.st_dev,
                          (unsigned long long)st.st_ino);
    dup2(errFd, STDERR_FILENO);
    g_setenv("JOURNAL_STREAM", env, TRUE);
    vrmLogResetJournal();
    vrmLogSetJournalSocket(sockPath);
    vrmLogSetLevel(VRM_LOG_INFO);

    job->record->domainName = g_strdup("web1");
    job->record->domainUUID = g_strdup("7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b");
    job->sourceLocator = vrmLocatorNew("hv-1.example.org", "192.0.2.1", 16530);
    g_assert_cmpint(vrmHelperJobSetState(job, VRM_JOB_STATE_FAILED, VRM_ERR_INTERNAL, "boom"), ==, 0);

    dup2(saved, STDERR_FILENO);
    close(saved);
    close(errFd);
    g_unsetenv("JOURNAL_STREAM");
    vrmLogResetJournal();
    vrmLogSetJournalSocket(NULL);
    n = recv(sock, entry, sizeof(entry) - 1, MSG_DONTWAIT);
    g_assert_cmpint(n, >, 0);
    entry[n] = '\0';
    g_test_message("entry:\n%s", entry);
    g_assert_nonnull(strstr(entry, "MESSAGE=info: job 7: negotiating -> failed: boom\n"));
    g_assert_nonnull(strstr(entry, msgid));
    g_assert_nonnull(strstr(entry, "JOB_ID=7\nJOB_ROLE=destination\nDOMAIN=web1\n"
                            "DOMAIN_UUID=7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b\n"
                            "PEER=hv-1.example.org\n"));
    close(sock);
    unlink(sockPath);
    unlink(errPath);
    rmdir(dir);
}

static const vrmTestFunc testFuncs[] = {
    { "/helper/job/state-machine", testStateMachine },
    { "/helper/job/state-error", testStateError },
    { "/helper/job/stats-parse", testStatsParse },
    { "/helper/job/stats-parse-final", testStatsParseFinal },
    { "/helper/job/stats-parse-bad", testStatsParseBad },
    { "/helper/job/apply-stats", testApplyStats },
    { "/helper/job/key", testJobKey },
    { "/helper/job/save-load", testSaveLoad },
    { "/helper/job/load-missing-dir", testLoadMissingDir },
    { "/helper/job/journal-fields", testJournalFields },
};

VRM_TEST_MAIN(NULL, testFuncs)
