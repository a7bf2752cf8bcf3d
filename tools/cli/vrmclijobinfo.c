/*
 * vrmclijobinfo.c: virt-rdma jobinfo DOMAIN [--completed] [--keep-completed]
 *                  [--anystats] [--rawstats | --json]
 *
 * What virsh domjobinfo prints (vrmclijobfmt.c), then the RDMA transport's
 * lines; or the raw typed parameters; or one JSON object.
 */
#include <config.h>

#include <stdio.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "virt-rdma.h"
#include "vrmcli.h"
#include "vrmclijobfmt.h"
#include "vrmi18n.h"

int
vrmCmdJobInfo(int argc, char **argv)
{
    gboolean completed = FALSE;
    gboolean keepCompleted = FALSE;
    gboolean anystats = FALSE;
    gboolean rawstats = FALSE;
    gboolean json = FALSE;
    char *connectURI = NULL;
    GOptionEntry entries[] = {
        { "completed", 0, 0, G_OPTION_ARG_NONE, &completed, N_("show the last completed job"), NULL },
        { "keep-completed", 0, 0, G_OPTION_ARG_NONE, &keepCompleted, N_("do not let libvirt forget the completed job once shown"), NULL },
        { "anystats", 0, 0, G_OPTION_ARG_NONE, &anystats, N_("print statistics for any kind of job (even failed ones)"), NULL },
        { "rawstats", 0, 0, G_OPTION_ARG_NONE, &rawstats, N_("print the raw typed parameters, libvirt's and the RDMA ones"), NULL },
        { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_("print one JSON object (keys in virt-rdma(1))"), NULL },
        { "connect", 'c', 0, G_OPTION_ARG_STRING, &connectURI, N_("libvirt URI (default: libvirt's)"), N_("URI") },
        { NULL, 0, 0, 0, NULL, NULL, NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(_("DOMAIN - show a domain's migration job and its RDMA transport"));
    virConnectPtr conn = NULL;
    virDomainPtr dom = NULL;
    virTypedParameterPtr params = NULL;
    int nparams = 0, type = 0, ret = 1;
    g_autofree char *text = NULL;

    if (!vrmCliParseOptions(ctx, entries, &argc, &argv))
        return 2;
    if (argc != 2) {
        vrmCliError(_("jobinfo takes one domain, e.g. 'virt-rdma jobinfo --completed web1'"));
        return 2;
    }
    if (keepCompleted && !completed) {
        vrmCliError(_("--keep-completed needs --completed"));
        return 2;
    }
    if (rawstats && json) {
        vrmCliError(_("--rawstats and --json exclude each other"));
        return 2;
    }
    if (!(conn = virConnectOpen(connectURI))) {
        vrmCliError("%s", virGetLastErrorMessage());
        goto cleanup;
    }
    if (!(dom = vrmCliLookupDomain(conn, argv[1])))
        goto cleanup;
    if (vrmDomainGetJobStats(dom, &type, &params, &nparams,
                             (completed ? VIR_DOMAIN_JOB_STATS_COMPLETED : 0) |
                             (keepCompleted ? VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED : 0)) < 0) {
        vrmCliError("%s", vrmLastErrorMessage());
        goto cleanup;
    }

    if (rawstats) {
        text = vrmJobFormatRaw(type, params, nparams);
    } else if (json) {
        text = vrmJobFormatJSON(type, params, nparams);
    } else {
        g_autofree char *lv = vrmJobFormatLibvirt(type, params, nparams,
                                                  completed, anystats);
        g_autofree char *rdma = vrmJobFormatRDMA(params, nparams);

        text = g_strdup_printf("%s\n%s", lv, rdma);
    }
    fputs(text, stdout);
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
