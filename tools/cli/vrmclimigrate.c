/*
 * vrmclimigrate.c: virt-rdma migrate DOMAIN DESTURI
 *
 * The options are virsh migrate's that apply, plus the RDMA ones. The
 * migration runs in a worker thread; the main thread prints progress
 * (--verbose), enforces --timeout (the guest is suspended, as virsh does)
 * and turns Ctrl-C into virDomainAbortJob(), which ends the engines too.
 */
#include <config.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "virt-rdma.h"
#include "vrmcli.h"
#include "vrmparse.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlibpriv.h"
#include "vrmhelperclient.h"

/* How often --verbose refreshes its line. */
#define VRM_CLI_PROGRESS_INTERVAL_MS 500

typedef struct {
    /* virsh migrate's */
    gboolean live;
    gboolean p2p;
    gboolean persistent;
    gboolean undefineSource;
    gboolean suspend;
    gboolean parallel;
    int parallelConnections;
    gboolean postcopy;
    gint64 bandwidth;           /* MiB/s, 0: from the RDMA link */
    int timeout;                /* s, 0: none */
    gboolean verbose;
    gboolean pinAll;
    char *connectURI;           /* -c: the source libvirt */
    /* ours */
    char *chunkSize;            /* bytes, with an optional K/M suffix */
    char *device;
    int channels;
    int ringDepth;
} vrmMigrateOptions;

typedef struct {
    virDomainPtr dom;
    virConnectPtr dconn;        /* NULL with --p2p */
    const char *desturi;
    virTypedParameterPtr params;
    int nparams;
    unsigned int flags;
    int result;                 /* 0 ok, -1 failed */
    char *error;
    gint done;                  /* set by the worker (atomic) */
} vrmMigrateRun;

static volatile sig_atomic_t vrmInterrupted;

static void
vrmOnSigint(int sig)
{
    vrmInterrupted = 1;
}

static gpointer
vrmMigrateWorker(gpointer opaque)
{
    vrmMigrateRun *run = opaque;

    if (run->dconn) {
        virDomainPtr ddom = vrmDomainMigrate3(run->dom, run->dconn, run->params,
                                              run->nparams, run->flags);
        run->result = ddom ? 0 : -1;
        if (ddom)
            virDomainFree(ddom);
    } else {
        run->result = vrmDomainMigrateToURI3(run->dom, run->desturi, run->params,
                                             run->nparams, run->flags);
    }
    if (run->result < 0)
        run->error = g_strdup(vrmLastErrorMessage());
    g_atomic_int_set(&run->done, 1);
    return NULL;
}

/* One line like virsh's, with the transport's pace and time left. */
static void
vrmPrintProgress(virDomainPtr dom, const char *helperSocket, bool final)
{
    virTypedParameterPtr params = NULL;
    int nparams = 0, type = 0;
    unsigned long long total = 0, remaining = 0;
    unsigned int mbps = 0;
    unsigned int pct = final ? 100 : 0;
    g_autofree char *left = NULL;

    if (!final) {
        if (vrmDomainGetJobStats(dom, &type, &params, &nparams, 0) < 0)
            return;
        if (type == VIR_DOMAIN_JOB_NONE) {
            virTypedParamsFree(params, nparams);
            return;
        }
        virTypedParamsGetULLong(params, nparams, VIR_DOMAIN_JOB_DATA_TOTAL, &total);
        virTypedParamsGetULLong(params, nparams, VIR_DOMAIN_JOB_DATA_REMAINING, &remaining);
        virTypedParamsGetUInt(params, nparams, VRM_JOB_STATS_MBPS, &mbps);
        virTypedParamsFree(params, nparams);
        if (total)
            pct = 100 - (unsigned int)(remaining * 100 / total);
        if (pct == 100 && remaining)
            pct = 99;
    }
    if (mbps && !final)
        left = g_strdup_printf(_(", %1$llu s left"),
                               (unsigned long long)(remaining * 8 / ((unsigned long long)mbps * 1000000) + 1));
    fputc('\r', stderr);
    if (mbps)
        fprintf(stderr, _("Migration: [%1$3u %%] %2$u Mbit/s over RDMA%3$s   "),
                pct, mbps, left ? left : "");
    else
        fprintf(stderr, _("Migration: [%1$3u %%]   "), pct);
    if (final)
        fprintf(stderr, "\n");
    fflush(stderr);
    (void)helperSocket;
}

static void
vrmPrintFinalJob(virDomainPtr dom)
{
    virTypedParameterPtr params = NULL;
    int nparams = 0, type = 0;
    unsigned long long id = 0, sent = 0;
    unsigned int mbps = 0, channels = 0;
    g_autofree char *sentStr = NULL;

    /* Keep libvirt's completed stats for a later domjobinfo --completed. */
    if (vrmDomainGetJobStats(dom, &type, &params, &nparams,
                             VIR_DOMAIN_JOB_STATS_COMPLETED |
                             VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED) < 0)
        return;
    if (virTypedParamsGetULLong(params, nparams, VRM_JOB_STATS_ID, &id) == 1) {
        virTypedParamsGetULLong(params, nparams, VRM_JOB_STATS_BYTES_SENT, &sent);
        virTypedParamsGetUInt(params, nparams, VRM_JOB_STATS_MBPS, &mbps);
        virTypedParamsGetUInt(params, nparams, VRM_JOB_STATS_CHANNELS, &channels);
        sentStr = vrmCliPrettySize(sent);
        printf(_("RDMA job %1$llu: %2$s sent over %3$u channel(s), %4$u Mbit/s\n"),
               id, sentStr, channels, mbps);
    }
    virTypedParamsFree(params, nparams);
}

int
vrmCmdMigrate(int argc, char **argv)
{
    vrmMigrateOptions o = { .parallelConnections = 0 };
    GOptionEntry entries[] = {
        { "live", 0, 0, G_OPTION_ARG_NONE, &o.live, N_("live migration"), NULL },
        { "p2p", 0, 0, G_OPTION_ARG_NONE, &o.p2p, N_("peer-2-peer migration"), NULL },
        { "persistent", 0, 0, G_OPTION_ARG_NONE, &o.persistent, N_("persist the domain on the destination"), NULL },
        { "undefinesource", 0, 0, G_OPTION_ARG_NONE, &o.undefineSource, N_("undefine the domain on the source"), NULL },
        { "suspend", 0, 0, G_OPTION_ARG_NONE, &o.suspend, N_("do not restart the domain on the destination"), NULL },
        { "parallel", 0, 0, G_OPTION_ARG_NONE, &o.parallel, N_("migrate with parallel connections (multifd)"), NULL },
        { "parallel-connections", 0, 0, G_OPTION_ARG_INT, &o.parallelConnections, N_("number of parallel connections (each its own RDMA channel)"), N_("N") },
        { "postcopy", 0, 0, G_OPTION_ARG_NONE, &o.postcopy, N_("enable post-copy migration"), NULL },
        { "bandwidth", 0, 0, G_OPTION_ARG_INT64, &o.bandwidth, N_("migration bandwidth limit in MiB/s (default: the RDMA link rate)"), N_("MIB") },
        { "timeout", 0, 0, G_OPTION_ARG_INT, &o.timeout, N_("suspend the guest if live migration exceeds SECONDS"), N_("SECONDS") },
        { "verbose", 0, 0, G_OPTION_ARG_NONE, &o.verbose, N_("display the progress of migration"), NULL },
        { "rdma-pin-all", 0, 0, G_OPTION_ARG_NONE, &o.pinAll, N_("register every RDMA ring up front (pin-all)"), NULL },
        { "chunk-size", 0, 0, G_OPTION_ARG_STRING, &o.chunkSize, N_("RDMA chunk size in bytes (K and M suffixes allowed)"), N_("SIZE") },
        { "rdma-device", 0, 0, G_OPTION_ARG_STRING, &o.device, N_("RDMA device to use, e.g. mlx5_0"), N_("DEVICE") },
        { "channels", 0, 0, G_OPTION_ARG_INT, &o.channels, N_("RDMA channels (1 + parallel connections)"), N_("N") },
        { "ring-depth", 0, 0, G_OPTION_ARG_INT, &o.ringDepth, N_("chunks per channel and direction"), N_("N") },
        { "connect", 'c', 0, G_OPTION_ARG_STRING, &o.connectURI, N_("libvirt URI of the source (default: libvirt's)"), N_("URI") },
        { NULL, 0, 0, 0, NULL, NULL, NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(_("DOMAIN DESTURI - live-migrate a domain over RDMA"));
    g_autoptr(GError) err = NULL;
    virConnectPtr conn = NULL;
    virConnectPtr dconn = NULL;
    virDomainPtr dom = NULL;
    virTypedParameterPtr params = NULL;
    int nparams = 0, maxparams = 0;
    unsigned int flags = 0;
    vrmMigrateRun run = { 0 };
    GThread *worker = NULL;
    gint64 start;
    bool suspended = false;
    int ret = 1;

    g_option_context_add_main_entries(ctx, entries, GETTEXT_PACKAGE);
    g_option_context_set_summary(ctx,
        _("Like virsh migrate, with the migration stream carried over RDMA by virt-rdmad's engines.\n"
          "The RDMA parameters come from the domain's <rdma:migration> metadata; options override them."));
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        vrmCliError("%s", err->message);
        return 2;
    }
    if (argc != 3) {
        vrmCliError(_("migrate takes a domain and a destination URI, e.g. 'virt-rdma migrate --live web1 qemu+ssh://dst/system'"));
        return 2;
    }

    if (o.live)
        flags |= VIR_MIGRATE_LIVE;
    if (o.p2p)
        flags |= VIR_MIGRATE_PEER2PEER;
    if (o.persistent)
        flags |= VIR_MIGRATE_PERSIST_DEST;
    if (o.undefineSource)
        flags |= VIR_MIGRATE_UNDEFINE_SOURCE;
    if (o.suspend)
        flags |= VIR_MIGRATE_PAUSED;
    if (o.postcopy)
        flags |= VIR_MIGRATE_POSTCOPY;
    if (o.pinAll)
        flags |= VIR_MIGRATE_RDMA_PIN_ALL;
    if (o.parallelConnections && !o.parallel) {
        vrmCliError(_("--parallel-connections needs --parallel"));
        return 2;
    }
    if (o.parallel) {
        flags |= VIR_MIGRATE_PARALLEL;
        if (o.parallelConnections &&
            virTypedParamsAddInt(&params, &nparams, &maxparams,
                                 VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS,
                                 o.parallelConnections) < 0)
            goto libvirt_error;
    }
    if (o.bandwidth < 0 || o.timeout < 0 || o.channels < 0 || o.ringDepth < 0 ||
        o.parallelConnections < 0) {
        vrmCliError(_("--bandwidth, --timeout, --channels, --ring-depth and --parallel-connections take positive numbers"));
        return 2;
    }
    if (o.bandwidth &&
        virTypedParamsAddULLong(&params, &nparams, &maxparams,
                                VIR_MIGRATE_PARAM_BANDWIDTH, o.bandwidth) < 0)
        goto libvirt_error;
    if (o.chunkSize) {
        unsigned long long size;
        if (!vrmParseSize(o.chunkSize, &size)) {
            vrmCliError(_("--chunk-size '%1$s' is not a size: %2$s"),
                        o.chunkSize, vrmSizeSyntaxHelp());
            return 2;
        }
        if (virTypedParamsAddULLong(&params, &nparams, &maxparams,
                                    VRM_MIGRATE_PARAM_CHUNK_SIZE, size) < 0)
            goto libvirt_error;
    }
    if (o.device &&
        virTypedParamsAddString(&params, &nparams, &maxparams,
                                VRM_MIGRATE_PARAM_DEVICE, o.device) < 0)
        goto libvirt_error;
    if (o.channels &&
        virTypedParamsAddUInt(&params, &nparams, &maxparams,
                              VRM_MIGRATE_PARAM_CHANNELS, o.channels) < 0)
        goto libvirt_error;
    if (o.ringDepth &&
        virTypedParamsAddUInt(&params, &nparams, &maxparams,
                              VRM_MIGRATE_PARAM_RING_DEPTH, o.ringDepth) < 0)
        goto libvirt_error;

    if (!(conn = virConnectOpen(o.connectURI)))
        goto libvirt_error;
    if (!(dom = virDomainLookupByName(conn, argv[1]))) {
        vrmCliError(_("domain '%1$s' not found: %2$s"), argv[1], virGetLastErrorMessage());
        goto cleanup;
    }
    if (!o.p2p && !(dconn = virConnectOpen(argv[2]))) {
        vrmCliError(_("cannot connect to the destination '%1$s': %2$s"),
                    argv[2], virGetLastErrorMessage());
        goto cleanup;
    }

    run.dom = dom;
    run.dconn = dconn;
    run.desturi = argv[2];
    run.params = params;
    run.nparams = nparams;
    run.flags = flags;
    signal(SIGINT, vrmOnSigint);
    start = g_get_monotonic_time();
    worker = g_thread_new("migrate", vrmMigrateWorker, &run);

    while (!g_atomic_int_get(&run.done)) {
        g_usleep(VRM_CLI_PROGRESS_INTERVAL_MS * 1000);
        if (vrmInterrupted) {
            vrmInterrupted = 0;
            fprintf(stderr, _("\nvirt-rdma: aborting the migration\n"));
            if (virDomainAbortJob(dom) < 0)
                vrmCliError(_("cannot abort the migration: %1$s"), virGetLastErrorMessage());
        }
        if (o.timeout && !suspended &&
            g_get_monotonic_time() - start >= (gint64)o.timeout * G_USEC_PER_SEC) {
            suspended = true;
            if (o.verbose)
                fprintf(stderr, _("\nvirt-rdma: migration exceeded %1$d s, suspending the guest\n"),
                        o.timeout);
            if (virDomainSuspend(dom) < 0)
                vrmCliError(_("cannot suspend the guest: %1$s"), virGetLastErrorMessage());
        }
        if (o.verbose && !g_atomic_int_get(&run.done))
            vrmPrintProgress(dom, vrmHelperSocketPath(), false);
    }
    g_thread_join(worker);
    signal(SIGINT, SIG_DFL);

    if (run.result < 0) {
        if (o.verbose)
            fprintf(stderr, "\n");
        vrmCliError("%s", run.error);
        goto cleanup;
    }
    if (o.verbose) {
        vrmPrintProgress(dom, NULL, true);
        vrmPrintFinalJob(dom);
    }
    ret = 0;
    goto cleanup;

 libvirt_error:
    vrmCliError("%s", virGetLastErrorMessage());
 cleanup:
    g_free(run.error);
    virTypedParamsFree(params, nparams);
    if (dom)
        virDomainFree(dom);
    if (dconn)
        virConnectClose(dconn);
    if (conn)
        virConnectClose(conn);
    g_free(o.connectURI);
    g_free(o.chunkSize);
    g_free(o.device);
    return ret;
}
