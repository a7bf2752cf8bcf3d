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
    if (virTypedParamsAddULLong(params, nparams, maxparams, VRM_JOB_STATS_ID, rec->id) < 0 ||
        virTypedParamsAddString(params, nparams, maxparams, VRM_JOB_STATS_STATE,
                                vrmJobStateTypeToString(rec->state)) < 0)
        return -1;
    if (rec->hasRecoveryOf &&
        virTypedParamsAddULLong(params, nparams, maxparams, VRM_JOB_STATS_RECOVERY_OF,
                                rec->recoveryOf) < 0)
        return -1;
    if (rec->hasStats) {
        const vrmJobStats *s = &rec->stats;

        if (virTypedParamsAddULLong(params, nparams, maxparams,
                                    VRM_JOB_STATS_BYTES_SENT, s->bytesSent) < 0 ||
            virTypedParamsAddULLong(params, nparams, maxparams,
                                    VRM_JOB_STATS_BYTES_RECEIVED, s->bytesReceived) < 0 ||
            virTypedParamsAddUInt(params, nparams, maxparams,
                                  VRM_JOB_STATS_MBPS, s->mbps) < 0 ||
            virTypedParamsAddULLong(params, nparams, maxparams,
                                    VRM_JOB_STATS_CHUNKS, s->chunks) < 0 ||
            virTypedParamsAddULLong(params, nparams, maxparams,
                                    VRM_JOB_STATS_PINNED_BYTES, s->pinnedBytes) < 0 ||
            virTypedParamsAddULLong(params, nparams, maxparams,
                                    VRM_JOB_STATS_REGISTRATION_NS, s->registrationNs) < 0 ||
            virTypedParamsAddUInt(params, nparams, maxparams,
                                  VRM_JOB_STATS_CHANNELS, s->channels) < 0)
            return -1;
        if (s->hasCpu &&
            virTypedParamsAddULLong(params, nparams, maxparams,
                                    VRM_JOB_STATS_CPU_NS, s->cpuNs) < 0)
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
