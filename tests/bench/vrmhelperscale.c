/*
 * vrmhelperscale: virt-rdmad at a fleet's scale, by simulation on loopback
 * (issue 34 item 4; a benchmark: it shows, it asserts nothing but errors)
 *
 * One real virt-rdmad is the destination host. This program plays the rest
 * of the fleet in its own main loop: 200 FAKE source helpers, each its own
 * vrmPeerServer on 127.0.0.1 on the helpers' real TLS-PSK channel
 * (tests/helper/vrmhelperfixture.h), and libvirt's side of 1,000 incoming
 * migrations, each of its own domain UUID, whose locator names one of the
 * 200 peers (round robin), 16 in flight at once. No RDMA: the daemon
 * starts the FAKE engine (tests/helper/vrmfakeengine.c) in the mode
 * complete:MS, so every job connects, runs a moment and ends, and jobs
 * come and go as in a fleet.
 *
 * Three phases, each measured separately:
 *   hook     1,000 migrations through the hook as libvirt runs it (a fork
 *            and exec per migration, the real path): the negotiation's
 *            latency is the hook's wall time, from its spawn to its exit
 *   daemon   1,000 more, the hook's own request (<job-incoming/>) sent on
 *            the control socket by 16 threads: the latency is the daemon's
 *            part alone, from the request to its reply
 *   soak     10,000 negotiations as in "daemon", in 10 rounds of 1,000;
 *            after each round, once no job is left running, the daemon's
 *            RSS (/proc/PID/status VmRSS) and open descriptors (/proc/PID/fd)
 * The daemon's RSS and descriptors are also sampled every 10 ms throughout
 * (the peak), before the first migration (idle) and after the last one has
 * ended (after). One plain table at the end, with the ratios to the targets
 * (p99 under 50 ms, RSS under 64 MiB at the peak, back within 1 % of idle).
 *
 * Exit status: 0, or 1 when a negotiation failed or a phase missed its
 * deadline (the count and the first error are printed). Targets missed are
 * printed, not failed: this is a benchmark.
 *
 * Run as root, on the host, no sandbox: ninja -C build bench-helper-scale
 */
#include <config.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "vrmhelperfixture.h"
#include "vrmdomainxml.h"
#include "vrmerror.h"

#define SCALE_PEERS 200
#define SCALE_MIGRATIONS 1000
#define SCALE_SOAK 10000
#define SCALE_SOAK_ROUND 1000
#define SCALE_CONCURRENCY 16
/* The fake engine connects at once and ends this long after its start: past
 * the negotiation's tail (an engine that ends before the answer fails it) */
#define SCALE_ENGINE_MODE "complete:3000"
#define SCALE_SAMPLE_MS 10
/* Deadlines: a phase of 1,000, the soak's round of 1,000, one call, idle */
#define SCALE_PHASE_DEADLINE_S 180
#define SCALE_CALL_TIMEOUT_MS 20000
#define SCALE_IDLE_DEADLINE_S 30
/* After the last job ended, before "after" is read */
#define SCALE_SETTLE_S 2

#define SCALE_TARGET_P99_MS 50.0
#define SCALE_TARGET_RSS_KIB (64.0 * 1024)
#define SCALE_TARGET_BACK_PCT 1.0

/*
 * The daemon's configuration beyond the fixture's (the settings that a
 * fleet host has too, or why the benchmark needs them):
 *   [limits] max-jobs = 1024 (the most it takes)
 *       the default 4 refuses the fifth migration at once. Here 16
 *       negotiate at once and every one that negotiated keeps its (fake)
 *       engine for SCALE_ENGINE_MODE's 3 s, as a real engine lives on for
 *       its whole migration: some 16 + 3 s of throughput are live. A real
 *       host would not receive that many at once (RAM, the link): the
 *       benchmark loads the helper, not a host.
 *   [limits] max-pinned-bytes = 64G
 *       every job reserves its allowance (9 channels, depth 2, 64 KiB
 *       chunks: the fake source's offer); hundreds of them need more than
 *       the default 1 GiB. Nothing is pinned: the engines are fakes.
 * Left at their defaults, as on a fleet host: [limits] max-clients (64,
 * above the 16 clients at once), [history] size (64 finished jobs kept:
 * what bounds the daemon's memory across 12,000 jobs), [peers] max-peers
 * (16: it caps connections *to* this helper, and this one only connects
 * out). The log lines a peer can trigger are rate limited
 * (vrmhelperratelimit.c), but no request is: nothing to raise. The
 * fixture's [hook] timeout (20 s) and [peers] timeout (3 s) stay: the
 * latencies are far below them. The daemon runs without --debug.
 */
#define SCALE_EXTRA_CONF \
    "[limits]\nmax-jobs = 1024\nmax-pinned-bytes = 64G\n"

typedef struct {
    guint64 rssKiB;
    unsigned int fds;
} ScaleSample;

typedef struct {
    Helper *h;
    vrmFakeSource *peers[SCALE_PEERS];
    unsigned int next;              /* the next migration's number, all phases */
    ScaleSample peak;
    guint sampler;
} Scale;

/* One phase's negotiations */
typedef struct {
    Scale *sc;
    const char *name;
    unsigned int total;
    unsigned int first;             /* the number of its first migration */
    vrmControlMessage **requests;   /* daemon phases: prepared in advance */
    double *latencyMs;              /* per negotiation */
    gint next;                      /* atomic: the next to start */
    gint done;                      /* atomic: ended, well or not */
    gint errors;                    /* atomic */
    gint stop;                      /* atomic: the deadline passed */
    GMutex lock;
    char *firstError;               /* under lock */
    gint64 wallUs;
} ScalePhase;

typedef struct {
    ScalePhase *ph;
    unsigned int index;
    gint64 start;
    int out;
    int err;
} ScaleHookRun;


/* ---- the daemon, seen from /proc ---------------------------------------- */

static bool
scaleSampleRead(GPid pid, ScaleSample *s)
{
    g_autofree char *statusPath = g_strdup_printf("/proc/%d/status", (int)pid);
    g_autofree char *fdPath = g_strdup_printf("/proc/%d/fd", (int)pid);
    g_autofree char *status = NULL;
    g_autoptr(GDir) d = NULL;
    const char *rss;

    if (!g_file_get_contents(statusPath, &status, NULL, NULL) ||
        !(rss = strstr(status, "\nVmRSS:")) ||
        !(d = g_dir_open(fdPath, 0, NULL)))
        return false;
    s->rssKiB = g_ascii_strtoull(rss + strlen("\nVmRSS:"), NULL, 10);
    s->fds = 0;
    while (g_dir_read_name(d))
        s->fds++;
    return true;
}

static ScaleSample
scaleSampleNow(Scale *sc)
{
    ScaleSample s = { 0, 0 };

    if (!scaleSampleRead(sc->h->pid, &s))
        g_error("cannot read /proc of virt-rdmad (pid %d)", (int)sc->h->pid);
    sc->peak.rssKiB = MAX(sc->peak.rssKiB, s.rssKiB);
    sc->peak.fds = MAX(sc->peak.fds, s.fds);
    return s;
}

static gboolean
scaleSamplerTick(gpointer opaque)
{
    scaleSampleNow(opaque);
    return G_SOURCE_CONTINUE;
}

/* Entries of a directory (0 if it is not there) */
static unsigned int
scaleDirCount(const char *path)
{
    g_autoptr(GDir) d = g_dir_open(path, 0, NULL);
    unsigned int n = 0;

    while (d && g_dir_read_name(d))
        n++;
    return n;
}

/* Until no job of the daemon runs, serving the fake peers meanwhile */
static bool
scaleWaitIdle(Scale *sc)
{
    gint64 deadline = g_get_monotonic_time() + SCALE_IDLE_DEADLINE_S * G_USEC_PER_SEC;

    while (g_get_monotonic_time() < deadline) {
        g_autoptr(vrmControlMessage) list =
            helperCall(sc->h, vrmControlMessageNew(VRM_CONTROL_JOB_LIST));
        unsigned int live = 0;
        size_t i;

        for (i = 0; i < list->jobs->len; i++) {
            const vrmJobRecord *job = g_ptr_array_index(list->jobs, i);

            live += !vrmJobStateIsFinal(job->state);
        }
        if (!live)
            return true;
        while (g_main_context_iteration(NULL, FALSE))
            ;
        g_usleep(20000);
    }
    return false;
}

static gboolean
scaleQuit(gpointer opaque)
{
    g_main_loop_quit(opaque);
    return G_SOURCE_REMOVE;
}

/* Serve the main loop for @seconds */
static void
scaleServe(unsigned int seconds)
{
    g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);

    g_timeout_add_seconds(seconds, scaleQuit, loop);
    g_main_loop_run(loop);
}


/* ---- one phase ------------------------------------------------------------ */

static ScalePhase *
scalePhaseNew(Scale *sc, const char *name, unsigned int total)
{
    ScalePhase *ph = g_new0(ScalePhase, 1);

    ph->sc = sc;
    ph->name = name;
    ph->total = total;
    ph->first = sc->next;
    sc->next += total;
    ph->latencyMs = g_new0(double, total);
    g_mutex_init(&ph->lock);
    return ph;
}

static void
scalePhaseFree(ScalePhase *ph)
{
    unsigned int i;

    if (ph->requests) {
        for (i = 0; i < ph->total; i++)
            vrmControlMessageFree(ph->requests[i]);
        g_free(ph->requests);
    }
    g_free(ph->latencyMs);
    g_free(ph->firstError);
    g_mutex_clear(&ph->lock);
    g_free(ph);
}

static void
scalePhaseFailed(ScalePhase *ph, unsigned int index, const char *why)
{
    g_atomic_int_inc(&ph->errors);
    g_mutex_lock(&ph->lock);
    if (!ph->firstError)
        ph->firstError = g_strdup_printf("migration %u: %s", ph->first + index, why);
    g_mutex_unlock(&ph->lock);
}

/* Migration @n's domain XML: its own UUID (in @uuid), peer n mod 200's
 * locator */
static char *
scaleDomainXML(Scale *sc, unsigned int n, char **uuid)
{
    *uuid = g_uuid_string_random();
    return domainXML(*uuid, sc->peers[n % SCALE_PEERS]->port, NULL);
}

/* Serve the fake peers until every negotiation of @ph ended or the deadline */
static bool
scalePhaseWait(ScalePhase *ph, gint64 deadline)
{
    while ((unsigned int)g_atomic_int_get(&ph->done) < ph->total) {
        if (g_get_monotonic_time() >= deadline) {
            g_atomic_int_set(&ph->stop, 1);
            return false;
        }
        g_main_context_iteration(NULL, TRUE);
    }
    return true;
}


/* ---- through the hook, as libvirt: asynchronous in this main loop ---------- */

static void scaleHookStart(ScalePhase *ph);

static void
scaleHookEnded(GPid pid, gint status, gpointer opaque)
{
    ScaleHookRun *run = opaque;
    ScalePhase *ph = run->ph;
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;

    ph->latencyMs[run->index] = (g_get_monotonic_time() - run->start) / 1000.0;
    /* what it printed fits in the pipes: it is all there once it ended */
    out = readAll(run->out);
    err = readAll(run->err);
    g_spawn_close_pid(pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !strstr(out, "<locator")) {
        g_autofree char *why = g_strdup_printf("the hook exited with status %d: %s",
                                               status, g_strstrip(err));

        scalePhaseFailed(ph, run->index, why);
    }
    g_free(run);
    g_atomic_int_inc(&ph->done);
    if (!g_atomic_int_get(&ph->stop))
        scaleHookStart(ph);
}

static void
scaleHookStart(ScalePhase *ph)
{
    ScaleHookRun *run;
    unsigned int index = g_atomic_int_add(&ph->next, 1);
    g_autofree char *xml = NULL;
    g_autofree char *uuid = NULL;
    GPid pid;

    if (index >= ph->total)
        return;
    xml = scaleDomainXML(ph->sc, ph->first + index, &uuid);
    run = g_new0(ScaleHookRun, 1);
    run->ph = ph;
    run->index = index;
    run->start = g_get_monotonic_time();
    pid = hookSpawn(ph->sc->h->conf, xml, NULL, &run->out, &run->err);
    g_child_watch_add(pid, scaleHookEnded, run);
}

static bool
scaleRunHooks(ScalePhase *ph)
{
    gint64 start = g_get_monotonic_time();
    unsigned int i;
    bool ok;

    for (i = 0; i < SCALE_CONCURRENCY; i++)
        scaleHookStart(ph);
    ok = scalePhaseWait(ph, start + SCALE_PHASE_DEADLINE_S * G_USEC_PER_SEC);
    ph->wallUs = g_get_monotonic_time() - start;
    return ok;
}


/* ---- on the control socket: the daemon's part, from 16 threads ------------- */

/* The request the hook sends for migration @n, as the hook makes it */
static vrmControlMessage *
scaleIncomingRequest(Scale *sc, unsigned int n)
{
    g_autofree char *uuid = NULL;
    g_autofree char *xml = scaleDomainXML(sc, n, &uuid);
    g_autoptr(vrmMigrationDef) def = NULL;
    vrmControlMessage *req = vrmControlMessageNew(VRM_CONTROL_JOB_INCOMING);

    g_assert_cmpint(vrmDomainXMLGetMigration(xml, &def), ==, 1);
    req->domainName = g_strdup("web1");
    req->domainUUID = g_steal_pointer(&uuid);
    req->migration = g_steal_pointer(&def);
    return req;
}

static gpointer
scaleWorker(gpointer opaque)
{
    ScalePhase *ph = opaque;
    unsigned int index;

    while (!g_atomic_int_get(&ph->stop) &&
           (index = g_atomic_int_add(&ph->next, 1)) < ph->total) {
        g_autoptr(vrmControlMessage) reply = NULL;
        gint64 t0 = g_get_monotonic_time();
        const vrmJobRecord *job;

        reply = vrmHelperClientCall(ph->sc->h->sock, ph->requests[index],
                                    SCALE_CALL_TIMEOUT_MS);
        ph->latencyMs[index] = (g_get_monotonic_time() - t0) / 1000.0;
        if (!reply || vrmHelperReplyCheck(reply) < 0)
            scalePhaseFailed(ph, index, vrmGetLastErrorMessage());
        else if (reply->jobs->len != 1 ||
                 (job = g_ptr_array_index(reply->jobs, 0))->state == VRM_JOB_STATE_OVER_TCP ||
                 !job->migration || !job->migration->locator)
            scalePhaseFailed(ph, index, "the reply names no locator (not over RDMA)");
        g_atomic_int_inc(&ph->done);
    }
    return NULL;
}

static bool
scaleRunDirect(ScalePhase *ph)
{
    GThread *threads[SCALE_CONCURRENCY];
    gint64 start;
    unsigned int i;
    bool ok;

    /* made here, not timed: the hook's parsing is not the daemon's part */
    ph->requests = g_new0(vrmControlMessage *, ph->total);
    for (i = 0; i < ph->total; i++)
        ph->requests[i] = scaleIncomingRequest(ph->sc, ph->first + i);
    start = g_get_monotonic_time();
    for (i = 0; i < SCALE_CONCURRENCY; i++)
        threads[i] = g_thread_new("scale-client", scaleWorker, ph);
    ok = scalePhaseWait(ph, start + SCALE_PHASE_DEADLINE_S * G_USEC_PER_SEC);
    /* past the deadline, a thread still in a call ends by the call's
     * timeout: the peers serve it meanwhile */
    while (!ok && (unsigned int)g_atomic_int_get(&ph->done) <
           MIN((unsigned int)g_atomic_int_get(&ph->next), ph->total))
        g_main_context_iteration(NULL, TRUE);
    for (i = 0; i < SCALE_CONCURRENCY; i++)
        g_thread_join(threads[i]);
    ph->wallUs = g_get_monotonic_time() - start;
    return ok;
}


/* ---- the report ------------------------------------------------------------ */

static int
scaleCompareDouble(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Nearest rank */
static double
scalePercentile(const double *sorted, unsigned int n, double p)
{
    unsigned int rank = (unsigned int)((p / 100.0) * n + 0.999999);

    if (!n)
        return 0;
    return sorted[MIN(MAX(rank, 1u), n) - 1];
}

typedef struct {
    double p50;
    double p99;
    double max;
} ScaleLatency;

static ScaleLatency
scaleLatencyOf(ScalePhase *ph)
{
    unsigned int n = MIN((unsigned int)g_atomic_int_get(&ph->done), ph->total);
    g_autofree double *sorted = g_memdup2(ph->latencyMs, sizeof(double) * ph->total);
    ScaleLatency l;

    qsort(sorted, n, sizeof(double), scaleCompareDouble);
    l.p50 = scalePercentile(sorted, n, 50);
    l.p99 = scalePercentile(sorted, n, 99);
    l.max = n ? sorted[n - 1] : 0;
    return l;
}

static void
scalePrintPhase(ScalePhase *ph)
{
    ScaleLatency l = scaleLatencyOf(ph);

    printf("%-28s %12u %11d %6d %8.1f %8.1f %8.1f %7.1f\n", ph->name,
           (unsigned int)g_atomic_int_get(&ph->done), SCALE_CONCURRENCY,
           g_atomic_int_get(&ph->errors), l.p50, l.p99, l.max,
           ph->wallUs ? ph->done * 1e6 / ph->wallUs : 0.0);
}

static double
scalePercentOver(guint64 value, guint64 base)
{
    return base ? 100.0 * ((double)value - (double)base) / (double)base : 0;
}

int
main(int argc, char **argv)
{
    Scale sc = { 0 };
    g_autofree char *key = NULL;
    g_autofree char *qemuDir = NULL;
    ScalePhase *hook;
    ScalePhase *direct;
    ScalePhase *soak[SCALE_SOAK / SCALE_SOAK_ROUND];
    ScaleSample idle, after, rounds[SCALE_SOAK / SCALE_SOAK_ROUND];
    unsigned int idleDirs, afterDirs, idleRecords, afterRecords, roundRecords[G_N_ELEMENTS(rounds)];
    unsigned int errors = 0;
    ScaleLatency hl;
    bool ok = true;
    bool rssGrew, fdsGrew;
    size_t i;

    (void)argc;
    (void)argv;
    g_setenv("VRM_SCHEMA_DIR", VRM_SOURCE_SCHEMA_DIR, FALSE);
    signal(SIGPIPE, SIG_IGN);
    if (geteuid() != 0) {
        fprintf(stderr, "vrmhelperscale: run it as root (the daemon starts its engines as nobody)\n");
        return 1;
    }

    sc.h = helperNew(NULL, SCALE_EXTRA_CONF);
    sc.h->quiet = true;
    g_free(sc.h->mode);
    sc.h->mode = g_strdup(SCALE_ENGINE_MODE);
    key = g_build_filename(sc.h->dir, "cluster.key", NULL);
    qemuDir = g_build_filename(sc.h->run, "qemu", NULL);
    for (i = 0; i < SCALE_PEERS; i++)
        sc.peers[i] = vrmFakeSourceNewFor(sc.h, key, FAKE_SOURCE_OFFER);
    helperStart(sc.h);
    scaleServe(SCALE_SETTLE_S);
    idle = scaleSampleNow(&sc);
    idleDirs = scaleDirCount(qemuDir);
    idleRecords = scaleDirCount(sc.h->state);
    sc.sampler = g_timeout_add(SCALE_SAMPLE_MS, scaleSamplerTick, &sc);
    printf("virt-rdmad (pid %d) against %u fake source helpers on 127.0.0.1, FAKE engines %s;\n"
           "idle: RSS %" G_GUINT64_FORMAT " KiB, %u descriptors\n",
           (int)sc.h->pid, SCALE_PEERS, SCALE_ENGINE_MODE, idle.rssKiB, idle.fds);
    fflush(stdout);

    hook = scalePhaseNew(&sc, "hook (libvirt's path)", SCALE_MIGRATIONS);
    ok &= scaleRunHooks(hook);
    ok &= scaleWaitIdle(&sc);
    direct = scalePhaseNew(&sc, "daemon (control socket)", SCALE_MIGRATIONS);
    ok &= scaleRunDirect(direct);
    ok &= scaleWaitIdle(&sc);
    printf("hook and daemon phases done; soak: %u negotiations in rounds of %u\n",
           SCALE_SOAK, SCALE_SOAK_ROUND);
    fflush(stdout);
    for (i = 0; i < G_N_ELEMENTS(soak); i++) {
        soak[i] = scalePhaseNew(&sc, "soak", SCALE_SOAK_ROUND);
        ok &= scaleRunDirect(soak[i]);
        ok &= scaleWaitIdle(&sc);
        rounds[i] = scaleSampleNow(&sc);
        roundRecords[i] = scaleDirCount(sc.h->state);
        printf("  after %5zu: RSS %6" G_GUINT64_FORMAT " KiB, %3u descriptors, %u files in the state directory\n",
               (i + 1) * SCALE_SOAK_ROUND, rounds[i].rssKiB, rounds[i].fds, roundRecords[i]);
        fflush(stdout);
    }
    g_source_remove(sc.sampler);
    scaleServe(SCALE_SETTLE_S);
    after = scaleSampleNow(&sc);
    afterDirs = scaleDirCount(qemuDir);
    afterRecords = scaleDirCount(sc.h->state);

    /* the soak's whole latency, its rounds together */
    {
        ScalePhase *all = g_new0(ScalePhase, 1);
        unsigned int n = 0;

        all->name = "soak (control socket)";
        all->total = SCALE_SOAK;
        all->latencyMs = g_new0(double, SCALE_SOAK);
        for (i = 0; i < G_N_ELEMENTS(soak); i++) {
            unsigned int done = MIN((unsigned int)soak[i]->done, soak[i]->total);

            memcpy(all->latencyMs + n, soak[i]->latencyMs, done * sizeof(double));
            n += done;
            all->errors += soak[i]->errors;
            all->wallUs += soak[i]->wallUs;
            if (!all->firstError && soak[i]->firstError)
                all->firstError = g_strdup(soak[i]->firstError);
        }
        all->done = n;
        g_mutex_init(&all->lock);

        printf("\n%-28s %12s %11s %6s %8s %8s %8s %7s\n", "negotiations", "count",
               "concurrency", "errors", "p50 ms", "p99 ms", "max ms", "per s");
        scalePrintPhase(hook);
        scalePrintPhase(direct);
        scalePrintPhase(all);
        printf("\n%-28s %12s %11s %11s\n", "virt-rdmad", "idle", "peak", "after");
        printf("%-28s %12" G_GUINT64_FORMAT " %11" G_GUINT64_FORMAT " %11" G_GUINT64_FORMAT "\n",
               "RSS KiB", idle.rssKiB, sc.peak.rssKiB, after.rssKiB);
        printf("%-28s %12u %11u %11u\n", "open descriptors", idle.fds, sc.peak.fds, after.fds);
        printf("%-28s %12u %11s %11u\n", "per-domain directories", idleDirs, "", afterDirs);
        printf("%-28s %12u %11s %11u\n", "state directory files", idleRecords, "", afterRecords);

        hl = scaleLatencyOf(hook);
        printf("\n%-28s %12s %11s %11s\n", "target", "measured", "target", "ratio");
        printf("%-28s %9.1f ms %8.1f ms %11.2f\n", "p99, hook", hl.p99,
               SCALE_TARGET_P99_MS, hl.p99 / SCALE_TARGET_P99_MS);
        {
            ScaleLatency dl = scaleLatencyOf(direct);
            ScaleLatency sl = scaleLatencyOf(all);

            printf("%-28s %9.1f ms %8.1f ms %11.2f\n", "p99, daemon", dl.p99,
                   SCALE_TARGET_P99_MS, dl.p99 / SCALE_TARGET_P99_MS);
            printf("%-28s %9.1f ms %8.1f ms %11.2f\n", "p99, soak", sl.p99,
                   SCALE_TARGET_P99_MS, sl.p99 / SCALE_TARGET_P99_MS);
        }
        printf("%-28s %8.1f MiB %7.1f MiB %11.2f\n", "RSS at the peak",
               sc.peak.rssKiB / 1024.0, SCALE_TARGET_RSS_KIB / 1024,
               sc.peak.rssKiB / SCALE_TARGET_RSS_KIB);
        printf("%-28s %+10.2f %% %8.1f %% %11.2f\n", "RSS after vs idle",
               scalePercentOver(after.rssKiB, idle.rssKiB), SCALE_TARGET_BACK_PCT,
               scalePercentOver(after.rssKiB, idle.rssKiB) / SCALE_TARGET_BACK_PCT);
        printf("%-28s %+10.2f %% %8.1f %% %11.2f\n", "RSS after vs soak's 1st",
               scalePercentOver(after.rssKiB, rounds[0].rssKiB), SCALE_TARGET_BACK_PCT,
               scalePercentOver(after.rssKiB, rounds[0].rssKiB) / SCALE_TARGET_BACK_PCT);

        /* grows: past the first round's sample by more than the target's 1 %
         * (RSS), by any descriptor, by any record past the history */
        rssGrew = scalePercentOver(rounds[G_N_ELEMENTS(rounds) - 1].rssKiB, rounds[0].rssKiB) >
            SCALE_TARGET_BACK_PCT;
        fdsGrew = rounds[G_N_ELEMENTS(rounds) - 1].fds > rounds[0].fds || after.fds > idle.fds;
        printf("\nacross the soak's %u negotiations: RSS %s (%+.2f %% from round 1 to %zu), "
               "descriptors %s (%u -> %u, idle %u, after %u), per-domain directories %s, "
               "state files %s (%u -> %u)\n",
               SCALE_SOAK, rssGrew ? "GREW" : "flat",
               scalePercentOver(rounds[G_N_ELEMENTS(rounds) - 1].rssKiB, rounds[0].rssKiB),
               G_N_ELEMENTS(rounds), fdsGrew ? "GREW" : "flat",
               rounds[0].fds, rounds[G_N_ELEMENTS(rounds) - 1].fds, idle.fds, after.fds,
               afterDirs > idleDirs ? "GREW" : "flat",
               roundRecords[G_N_ELEMENTS(rounds) - 1] > roundRecords[0] ? "GREW" : "flat",
               roundRecords[0], roundRecords[G_N_ELEMENTS(rounds) - 1]);

        errors = hook->errors + direct->errors + all->errors;
        if (errors) {
            printf("\n%u negotiations failed; the first of each phase:\n", errors);
            if (hook->firstError)
                printf("  hook: %s\n", hook->firstError);
            if (direct->firstError)
                printf("  daemon: %s\n", direct->firstError);
            if (all->firstError)
                printf("  soak: %s\n", all->firstError);
        }
        if (!ok)
            printf("\na phase or a wait for the daemon's jobs to end missed its deadline\n");
        scalePhaseFree(all);
    }

    scalePhaseFree(hook);
    scalePhaseFree(direct);
    for (i = 0; i < G_N_ELEMENTS(soak); i++)
        scalePhaseFree(soak[i]);
    for (i = 0; i < SCALE_PEERS; i++)
        vrmFakeSourceFree(sc.peers[i]);
    helperFree(sc.h);
    return errors || !ok ? 1 : 0;
}
