/*
 * vrmclijobinfo.c: virt-rdma jobinfo DOMAIN [--completed]
 *
 * virsh domjobinfo's labels and values, then the RDMA transport's.
 */
#include <config.h>

#include <stdio.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "virt-rdma.h"
#include "vrmcli.h"
#include "vrmi18n.h"

typedef enum {
    VRM_FIELD_MS,       /* "<n> ms" */
    VRM_FIELD_SIZE,     /* pretty bytes */
    VRM_FIELD_RATE,     /* pretty bytes + "/s" */
    VRM_FIELD_COUNT,    /* plain number */
} vrmFieldKind;

typedef struct {
    const char *field;      /* libvirt's typed parameter */
    const char *label;      /* virsh domjobinfo's label, N_() */
    vrmFieldKind kind;
} vrmJobField;

/* The order and labels of virsh domjobinfo. */
static const vrmJobField vrmLibvirtFields[] = {
    { VIR_DOMAIN_JOB_TIME_ELAPSED, N_("Time elapsed:"), VRM_FIELD_MS },
    { VIR_DOMAIN_JOB_TIME_ELAPSED_NET, N_("Time elapsed w/o network:"), VRM_FIELD_MS },
    { VIR_DOMAIN_JOB_TIME_REMAINING, N_("Time remaining:"), VRM_FIELD_MS },
    { VIR_DOMAIN_JOB_DATA_PROCESSED, N_("Data processed:"), VRM_FIELD_SIZE },
    { VIR_DOMAIN_JOB_DATA_REMAINING, N_("Data remaining:"), VRM_FIELD_SIZE },
    { VIR_DOMAIN_JOB_DATA_TOTAL, N_("Data total:"), VRM_FIELD_SIZE },
    { VIR_DOMAIN_JOB_MEMORY_PROCESSED, N_("Memory processed:"), VRM_FIELD_SIZE },
    { VIR_DOMAIN_JOB_MEMORY_REMAINING, N_("Memory remaining:"), VRM_FIELD_SIZE },
    { VIR_DOMAIN_JOB_MEMORY_TOTAL, N_("Memory total:"), VRM_FIELD_SIZE },
    { VIR_DOMAIN_JOB_MEMORY_BPS, N_("Memory bandwidth:"), VRM_FIELD_RATE },
    { VIR_DOMAIN_JOB_MEMORY_DIRTY_RATE, N_("Dirty rate:"), VRM_FIELD_COUNT },
    { VIR_DOMAIN_JOB_MEMORY_PAGE_SIZE, N_("Page size:"), VRM_FIELD_COUNT },
    { VIR_DOMAIN_JOB_MEMORY_ITERATION, N_("Iteration:"), VRM_FIELD_COUNT },
    { VIR_DOMAIN_JOB_MEMORY_POSTCOPY_REQS, N_("Postcopy requests:"), VRM_FIELD_COUNT },
    { VIR_DOMAIN_JOB_MEMORY_CONSTANT, N_("Constant pages:"), VRM_FIELD_COUNT },
    { VIR_DOMAIN_JOB_MEMORY_NORMAL, N_("Normal pages:"), VRM_FIELD_COUNT },
    { VIR_DOMAIN_JOB_MEMORY_NORMAL_BYTES, N_("Normal data:"), VRM_FIELD_SIZE },
    { VIR_DOMAIN_JOB_DOWNTIME, N_("Total downtime:"), VRM_FIELD_MS },
    { VIR_DOMAIN_JOB_DOWNTIME_NET, N_("Downtime w/o network:"), VRM_FIELD_MS },
    { VIR_DOMAIN_JOB_SETUP_TIME, N_("Setup time:"), VRM_FIELD_MS },
};

static const char *
vrmJobTypeName(int type)
{
    switch (type) {
    case VIR_DOMAIN_JOB_NONE: return _("None");
    case VIR_DOMAIN_JOB_BOUNDED: return _("Bounded");
    case VIR_DOMAIN_JOB_UNBOUNDED: return _("Unbounded");
    case VIR_DOMAIN_JOB_COMPLETED: return _("Completed");
    case VIR_DOMAIN_JOB_FAILED: return _("Failed");
    case VIR_DOMAIN_JOB_CANCELLED: return _("Cancelled");
    }
    return _("Unknown");
}

static void
vrmPrintField(const char *label, vrmFieldKind kind, unsigned long long v)
{
    g_autofree char *s = NULL;

    switch (kind) {
    case VRM_FIELD_MS:
        printf("%-17s %-12llu ms\n", label, v);
        break;
    case VRM_FIELD_SIZE:
        s = vrmCliPrettySize(v);
        printf("%-17s %s\n", label, s);
        break;
    case VRM_FIELD_RATE:
        s = vrmCliPrettySize(v);
        printf("%-17s %s/s\n", label, s);
        break;
    case VRM_FIELD_COUNT:
        printf("%-17s %-12llu\n", label, v);
        break;
    }
}

static void
vrmPrintRDMA(virTypedParameterPtr params, int nparams)
{
    unsigned long long id, v;
    unsigned int u;
    const char *state = NULL, *error = NULL;

    if (virTypedParamsGetULLong(params, nparams, VRM_JOB_STATS_ID, &id) != 1) {
        printf(_("RDMA:             no job of this domain is known to virt-rdmad\n"));
        return;
    }
    virTypedParamsGetString(params, nparams, VRM_JOB_STATS_STATE, &state);
    printf("%-17s %llu (%s)\n", _("RDMA job:"), id, state ? state : "?");
    if (virTypedParamsGetULLong(params, nparams, VRM_JOB_STATS_BYTES_SENT, &v) == 1)
        vrmPrintField(_("RDMA bytes sent:"), VRM_FIELD_SIZE, v);
    if (virTypedParamsGetULLong(params, nparams, VRM_JOB_STATS_BYTES_RECEIVED, &v) == 1)
        vrmPrintField(_("RDMA bytes received:"), VRM_FIELD_SIZE, v);
    if (virTypedParamsGetUInt(params, nparams, VRM_JOB_STATS_MBPS, &u) == 1)
        printf("%-17s %u Mbit/s\n", _("RDMA rate:"), u);
    if (virTypedParamsGetULLong(params, nparams, VRM_JOB_STATS_CHUNKS, &v) == 1)
        vrmPrintField(_("RDMA chunks:"), VRM_FIELD_COUNT, v);
    if (virTypedParamsGetULLong(params, nparams, VRM_JOB_STATS_PINNED_BYTES, &v) == 1)
        vrmPrintField(_("RDMA pinned:"), VRM_FIELD_SIZE, v);
    if (virTypedParamsGetULLong(params, nparams, VRM_JOB_STATS_REGISTRATION_NS, &v) == 1)
        vrmPrintField(_("RDMA registration:"), VRM_FIELD_MS, v / 1000000);
    if (virTypedParamsGetUInt(params, nparams, VRM_JOB_STATS_CHANNELS, &u) == 1)
        vrmPrintField(_("RDMA channels:"), VRM_FIELD_COUNT, u);
    if (virTypedParamsGetULLong(params, nparams, VRM_JOB_STATS_CPU_NS, &v) == 1)
        vrmPrintField(_("RDMA engine CPU:"), VRM_FIELD_MS, v / 1000000);
    if (virTypedParamsGetString(params, nparams, VRM_JOB_STATS_ERROR, &error) == 1)
        printf("%-17s %s\n", _("RDMA error:"), error);
}

int
vrmCmdJobInfo(int argc, char **argv)
{
    gboolean completed = FALSE;
    gboolean keepCompleted = FALSE;
    char *connectURI = NULL;
    GOptionEntry entries[] = {
        { "completed", 0, 0, G_OPTION_ARG_NONE, &completed, N_("show the last completed job"), NULL },
        { "keep-completed", 0, 0, G_OPTION_ARG_NONE, &keepCompleted, N_("do not let libvirt forget the completed job once shown"), NULL },
        { "connect", 'c', 0, G_OPTION_ARG_STRING, &connectURI, N_("libvirt URI (default: libvirt's)"), N_("URI") },
        { NULL, 0, 0, 0, NULL, NULL, NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(_("DOMAIN - show a domain's migration job and its RDMA transport"));
    g_autoptr(GError) err = NULL;
    virConnectPtr conn = NULL;
    virDomainPtr dom = NULL;
    virTypedParameterPtr params = NULL;
    int nparams = 0, type = 0, ret = 1;
    size_t i;

    g_option_context_add_main_entries(ctx, entries, GETTEXT_PACKAGE);
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        vrmCliError("%s", err->message);
        return 2;
    }
    if (argc != 2) {
        vrmCliError(_("jobinfo takes one domain, e.g. 'virt-rdma jobinfo --completed web1'"));
        return 2;
    }
    if (!(conn = virConnectOpen(connectURI))) {
        vrmCliError("%s", virGetLastErrorMessage());
        goto cleanup;
    }
    if (!(dom = virDomainLookupByName(conn, argv[1]))) {
        vrmCliError(_("domain '%1$s' not found: %2$s"), argv[1], virGetLastErrorMessage());
        goto cleanup;
    }
    if (keepCompleted && !completed) {
        vrmCliError(_("--keep-completed needs --completed"));
        goto cleanup;
    }
    if (vrmDomainGetJobStats(dom, &type, &params, &nparams,
                             (completed ? VIR_DOMAIN_JOB_STATS_COMPLETED : 0) |
                             (keepCompleted ? VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED : 0)) < 0) {
        vrmCliError("%s", vrmLastErrorMessage());
        goto cleanup;
    }

    printf("%-17s %-12s\n", _("Job type:"), vrmJobTypeName(type));
    for (i = 0; i < G_N_ELEMENTS(vrmLibvirtFields); i++) {
        unsigned long long v;

        if (virTypedParamsGetULLong(params, nparams, vrmLibvirtFields[i].field, &v) == 1)
            vrmPrintField(_(vrmLibvirtFields[i].label), vrmLibvirtFields[i].kind, v);
    }
    printf("\n");
    vrmPrintRDMA(params, nparams);
    ret = 0;

 cleanup:
    virTypedParamsFree(params, nparams);
    if (dom)
        virDomainFree(dom);
    if (conn)
        virConnectClose(conn);
    g_free(connectURI);
    return ret;
}
