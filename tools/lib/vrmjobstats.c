/*
 * vrmjobstats.c: libvirt's job stats merged with the RDMA job's
 */
#include <config.h>

#include "virt-rdma.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmhelperclient.h"
#include "vrmlibpriv.h"

static int
vrmJobStatsAddRecord(virTypedParameterPtr *params, int *nparams, int *maxparams,
                     const vrmJobRecord *rec)
{
    size_t i;

    if (virTypedParamsAddULLong(params, nparams, maxparams, VRM_JOB_STATS_ID, rec->id) < 0 ||
        virTypedParamsAddString(params, nparams, maxparams, VRM_JOB_STATS_STATE,
                                vrmJobStateTypeToString(rec->state)) < 0)
        return -1;
    if (rec->hasRecoveryOf &&
        virTypedParamsAddULLong(params, nparams, maxparams, VRM_JOB_STATS_RECOVERY_OF,
                                rec->recoveryOf) < 0)
        return -1;
    for (i = 0; rec->hasStats && i < vrmJobStatCount(); i++) {
        const vrmJobStatInfo *row = vrmJobStatGet(i);
        g_autofree char *field = g_strconcat(VRM_PARAM_PREFIX, row->name, NULL);
        unsigned long long v;
        int rc;

        if (!vrmJobStatGetValue(&rec->stats, row, &v))
            continue;
        /* virTypedParamsAdd* copies the name */
        if (vrmJobStatIsUInt(row))
            rc = virTypedParamsAddUInt(params, nparams, maxparams, field, (unsigned int)v);
        else
            rc = virTypedParamsAddULLong(params, nparams, maxparams, field, v);
        if (rc < 0)
            return -1;
    }
    if (rec->error &&
        virTypedParamsAddString(params, nparams, maxparams, VRM_JOB_STATS_ERROR,
                                rec->error) < 0)
        return -1;
    return 0;
}

int
vrmDomainGetJobStats(virDomainPtr domain,
                     int *type,
                     virTypedParameterPtr *params,
                     int *nparams,
                     unsigned int flags)
{
    g_autoptr(vrmJobRecord) rec = NULL;
    g_autofree char *helperSocket = vrmHelperSocketPath();
    int maxparams;

    vrmResetLastError();
    if (virDomainGetJobStats(domain, type, params, nparams, flags) < 0) {
        vrmLibReportLibvirtError(_("cannot read the job statistics"));
        return -1;
    }
    maxparams = *nparams;

    /* No helper, or no job of this domain: libvirt's stats alone. */
    if (!(rec = vrmMigrateJobQuery(helperSocket, 0,
                                   virDomainGetName(domain)))) {
        vrmResetLastError();
        return 0;
    }
    if (vrmJobStatsAddRecord(params, nparams, &maxparams, rec) < 0) {
        vrmLibReportLibvirtError(_("cannot add the RDMA statistics"));
        virTypedParamsFree(*params, *nparams);
        *params = NULL;
        *nparams = 0;
        return -1;
    }
    return 0;
}
