/*
 * vrmmigrate.c: vrmDomainMigrate3() and vrmDomainMigrateToURI3()
 *
 * 1. Read the domain's <rdma:migration> metadata (or the one in the
 *    caller's DEST_XML) and the overrides from our typed parameters and
 *    flags.
 * 2. Ask the local virt-rdmad to open an outgoing job: it spawns a source
 *    engine and answers with the per-job UNIX path and the offer.
 * 3. Call libvirt with the offer in DEST_XML, URI=unix://<path>, and a
 *    bandwidth from the link rate unless the caller set one.
 * 4. Whatever libvirt returns, tell the helper: on failure the job is
 *    cancelled (its engine ends); on success wait briefly for the engine's
 *    clean end so that the final stats are recorded.
 */
#include <config.h>

#include <string.h>

#include <libvirt/virterror.h>

#include "virt-rdma.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"
#include "vrmdomainxml.h"
#include "vrmnegotiation.h"
#include "vrmhelperclient.h"
#include "vrmlibpriv.h"

/* How long the helper may take to open a job (it starts an engine). */
#define VRM_MIGRATE_OPEN_TIMEOUT_MS (30 * 1000)
/* After libvirt returns, how long the engine may take to drain and exit. */
#define VRM_MIGRATE_FINISH_TIMEOUT_MS (15 * 1000)
/* libvirt's default number of parallel connections. */
#define VRM_LIBVIRT_DEFAULT_PARALLEL 2

const char *
vrmLastErrorMessage(void)
{
    return vrmGetLastErrorMessage();
}

void
vrmLibReportLibvirtError(const char *what)
{
    const char *msg = virGetLastErrorMessage();

    vrmReportError(VRM_ERR_LIBVIRT, _("%1$s: %2$s"), what, msg);
}

/* Our typed parameters are removed from the list libvirt sees. */
static bool
vrmIsOurParam(const char *field)
{
    return g_str_has_prefix(field, "rdma.");
}

int
vrmMigrateOverridesFromParams(virTypedParameterPtr params,
                       int nparams,
                       unsigned int flags,
                       vrmMigrationParams *overrides,
                       const char **helperSocket)
{
    unsigned long long ull;
    unsigned int ui;
    const char *str;
    int parallel = 0;
    int i;

    for (i = 0; i < nparams; i++) {
        const char *f = params[i].field;

        if (!vrmIsOurParam(f))
            continue;
        if (g_str_equal(f, VRM_MIGRATE_PARAM_CHUNK_SIZE) ||
            g_str_equal(f, VRM_MIGRATE_PARAM_CHANNELS) ||
            g_str_equal(f, VRM_MIGRATE_PARAM_DEVICE) ||
            g_str_equal(f, VRM_MIGRATE_PARAM_DEVICE_PORT) ||
            g_str_equal(f, VRM_MIGRATE_PARAM_ADDRESS) ||
            g_str_equal(f, VRM_MIGRATE_PARAM_RING_DEPTH) ||
            g_str_equal(f, VRM_MIGRATE_PARAM_HELPER_SOCKET))
            continue;
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("unknown migration parameter '%1$s'"), f);
        return -1;
    }

    if (virTypedParamsGetULLong(params, nparams, VRM_MIGRATE_PARAM_CHUNK_SIZE, &ull) == 1) {
        if (ull > G_MAXUINT) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("chunk size %1$llu is too large"), ull);
            return -1;
        }
        overrides->chunkSize = ull;
    }
    if (virTypedParamsGetUInt(params, nparams, VRM_MIGRATE_PARAM_CHANNELS, &ui) == 1)
        overrides->channels = ui;
    if (virTypedParamsGetUInt(params, nparams, VRM_MIGRATE_PARAM_RING_DEPTH, &ui) == 1)
        overrides->ringDepth = ui;
    if (virTypedParamsGetUInt(params, nparams, VRM_MIGRATE_PARAM_DEVICE_PORT, &ui) == 1)
        overrides->devicePort = ui;
    if (virTypedParamsGetString(params, nparams, VRM_MIGRATE_PARAM_DEVICE, &str) == 1)
        overrides->device = g_strdup(str);
    if (virTypedParamsGetString(params, nparams, VRM_MIGRATE_PARAM_ADDRESS, &str) == 1)
        overrides->address = g_strdup(str);
    if (virTypedParamsGetString(params, nparams, VRM_MIGRATE_PARAM_HELPER_SOCKET, &str) == 1)
        *helperSocket = str;

    if (flags & VIR_MIGRATE_RDMA_PIN_ALL)
        overrides->capsOn |= VRM_CAP_PIN_ALL;

    /* QEMU opens one connection per multifd channel plus the main one. */
    if (flags & VIR_MIGRATE_PARALLEL) {
        if (virTypedParamsGetInt(params, nparams,
                                 VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS, &parallel) != 1)
            parallel = VRM_LIBVIRT_DEFAULT_PARALLEL;
        if (parallel < 1) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("parallel connections must be at least 1, not %1$d"),
                           parallel);
            return -1;
        }
        if (overrides->channels && overrides->channels != (unsigned int)parallel + 1) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("%1$u RDMA channels were asked for, but %2$d parallel connections need %3$d (one more for the main stream)"),
                           overrides->channels, parallel, parallel + 1);
            return -1;
        }
        overrides->channels = parallel + 1;
    } else if (overrides->channels > 1) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("%1$u RDMA channels need a parallel migration with %2$u parallel connections"),
                       overrides->channels, overrides->channels - 1);
        return -1;
    }
    return 0;
}

static int
vrmTypedParamCopy(virTypedParameterPtr *params, int *nparams, int *maxparams,
                  const virTypedParameter *p)
{
    switch (p->type) {
    case VIR_TYPED_PARAM_INT:
        return virTypedParamsAddInt(params, nparams, maxparams, p->field, p->value.i);
    case VIR_TYPED_PARAM_UINT:
        return virTypedParamsAddUInt(params, nparams, maxparams, p->field, p->value.ui);
    case VIR_TYPED_PARAM_LLONG:
        return virTypedParamsAddLLong(params, nparams, maxparams, p->field, p->value.l);
    case VIR_TYPED_PARAM_ULLONG:
        return virTypedParamsAddULLong(params, nparams, maxparams, p->field, p->value.ul);
    case VIR_TYPED_PARAM_DOUBLE:
        return virTypedParamsAddDouble(params, nparams, maxparams, p->field, p->value.d);
    case VIR_TYPED_PARAM_BOOLEAN:
        return virTypedParamsAddBoolean(params, nparams, maxparams, p->field, p->value.b);
    case VIR_TYPED_PARAM_STRING:
        return virTypedParamsAddString(params, nparams, maxparams, p->field, p->value.s);
    }
    vrmReportError(VRM_ERR_INVALID_ARG,
                   _("migration parameter '%1$s' has an unknown type %2$d"),
                   p->field, p->type);
    return -1;
}

void
vrmMigrateJobFree(vrmMigrateJob *job)
{
    if (!job)
        return;
    g_free(job->helperSocket);
    g_free(job->uri);
    g_free(job->destXML);
    g_free(job->persistXML);
    if (job->params)
        virTypedParamsFree(job->params, job->nparams);
    vrmJobRecordFree(job->record);
    g_free(job);
}

/* Open the RDMA job and build the parameters libvirt gets. */
vrmMigrateJob *
vrmMigratePrepare(virDomainPtr domain,
                  virTypedParameterPtr params,
                  unsigned int nparams,
                  unsigned int flags)
{
    g_autoptr(vrmMigrateJob) job = g_new0(vrmMigrateJob, 1);
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_OPEN);
    g_autoptr(vrmControlMessage) reply = NULL;
    g_autoptr(vrmMigrationParams) overrides = g_new0(vrmMigrationParams, 1);
    g_autofree char *xml = NULL;
    const char *callerXML = NULL;
    const char *helperSocket = NULL;
    char uuid[VIR_UUID_STRING_BUFLEN];
    vrmMigrationDef *def = NULL;
    const vrmOffer *offer;
    unsigned long long bw;
    unsigned int i;
    int found;

    if (vrmMigrateOverridesFromParams(params, nparams, flags, overrides, &helperSocket) < 0)
        return NULL;
    job->helperSocket = g_strdup(helperSocket ? helperSocket : vrmHelperSocketPath());

    if (virTypedParamsGetString(params, nparams, VIR_MIGRATE_PARAM_DEST_XML, &callerXML) == 1) {
        xml = g_strdup(callerXML);
    } else if (!(xml = virDomainGetXMLDesc(domain, VIR_DOMAIN_XML_SECURE |
                                                   VIR_DOMAIN_XML_MIGRATABLE))) {
        vrmLibReportLibvirtError(_("cannot read the domain XML"));
        return NULL;
    }
    /* An offer left over from an earlier attempt must not travel again. */
    {
        g_autofree char *clean = vrmDomainXMLStripNegotiation(xml);
        if (!clean)
            return NULL;
        g_free(xml);
        xml = g_steal_pointer(&clean);
    }
    if ((found = vrmDomainXMLGetMigration(xml, &def)) < 0)
        return NULL;

    req->domainName = g_strdup(virDomainGetName(domain));
    if (virDomainGetUUIDString(domain, uuid) == 0)
        req->domainUUID = g_strdup(uuid);
    req->migration = found ? def : NULL;
    if (!found)
        def = NULL;
    req->overrides = g_steal_pointer(&overrides);

    if (!(reply = vrmHelperClientCall(job->helperSocket, req,
                                      VRM_MIGRATE_OPEN_TIMEOUT_MS)))
        return NULL;
    if (vrmHelperReplyCheck(reply) < 0)
        return NULL;
    if (!reply->jobs || reply->jobs->len != 1) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("virt-rdmad answered the job request without a job"));
        return NULL;
    }
    job->record = g_steal_pointer(&g_ptr_array_index(reply->jobs, 0));
    if (!job->record->socketPath || !job->record->migration ||
        !(offer = job->record->migration->offer)) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("virt-rdmad opened job %1$llu without a socket path or an offer"),
                       job->record->id);
        return NULL;
    }
    job->id = job->record->id;

    if (!(job->destXML = vrmDomainXMLSetOffer(xml, offer)))
        goto cancel;
    job->uri = g_strdup_printf("unix://%s", job->record->socketPath);

    /* libvirt's parameters: the caller's minus ours, plus ours for libvirt. */
    for (i = 0; i < nparams; i++) {
        const char *f = params[i].field;

        if (vrmIsOurParam(f) ||
            g_str_equal(f, VIR_MIGRATE_PARAM_URI) ||
            g_str_equal(f, VIR_MIGRATE_PARAM_DEST_XML))
            continue;
        if (vrmTypedParamCopy(&job->params, &job->nparams, &job->maxparams,
                              &params[i]) < 0)
            goto libvirt_error;
    }
    if (virTypedParamsAddString(&job->params, &job->nparams, &job->maxparams,
                                VIR_MIGRATE_PARAM_URI, job->uri) < 0 ||
        virTypedParamsAddString(&job->params, &job->nparams, &job->maxparams,
                                VIR_MIGRATE_PARAM_DEST_XML, job->destXML) < 0)
        goto libvirt_error;

    /* The link rate as libvirt's bandwidth cap (MiB/s), unless given. */
    if (virTypedParamsGetULLong(params, nparams, VIR_MIGRATE_PARAM_BANDWIDTH, &bw) != 1 &&
        offer->bandwidth > 0) {
        bw = MAX(1, (unsigned long long)offer->bandwidth * 1000000ULL / 8 / (1024 * 1024));
        if (virTypedParamsAddULLong(&job->params, &job->nparams, &job->maxparams,
                                    VIR_MIGRATE_PARAM_BANDWIDTH, bw) < 0)
            goto libvirt_error;
        job->bandwidthSet = true;
    }

    /* The persistent definition on the destination carries no offer. */
    if ((flags & VIR_MIGRATE_PERSIST_DEST) &&
        virTypedParamsGet(params, nparams, VIR_MIGRATE_PARAM_PERSIST_XML) == NULL &&
        virDomainIsPersistent(domain) == 1) {
        g_autofree char *inactive = virDomainGetXMLDesc(domain,
                                                        VIR_DOMAIN_XML_INACTIVE |
                                                        VIR_DOMAIN_XML_SECURE |
                                                        VIR_DOMAIN_XML_MIGRATABLE);
        if (!inactive)
            goto libvirt_error;
        if (!(job->persistXML = vrmDomainXMLStripNegotiation(inactive)))
            goto cancel;
        if (virTypedParamsAddString(&job->params, &job->nparams, &job->maxparams,
                                    VIR_MIGRATE_PARAM_PERSIST_XML, job->persistXML) < 0)
            goto libvirt_error;
    }

    VRM_INFO("RDMA job %llu: %s, %u channel(s), chunk %u bytes, caps 0x%x",
             job->id, job->uri, offer->channels, offer->chunkSize,
             offer->capabilities);
    return g_steal_pointer(&job);

 libvirt_error:
    vrmLibReportLibvirtError(_("cannot build the migration parameters"));
 cancel:
    vrmMigrateJobCancel(job);
    return NULL;
}

/* Cancel the helper's job, keeping the error that led here. */
void
vrmMigrateJobCancel(vrmMigrateJob *job)
{
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_CANCEL);
    g_autoptr(vrmControlMessage) reply = NULL;
    g_autofree char *saved = g_strdup(vrmGetLastErrorMessage());
    int code = vrmGetLastErrorCode();

    req->hasId = true;
    req->id = job->id;
    reply = vrmHelperClientCall(job->helperSocket, req, VRM_MIGRATE_OPEN_TIMEOUT_MS);
    if (!reply || vrmHelperReplyCheck(reply) < 0)
        VRM_WARN(_("cannot cancel RDMA job %1$llu: %2$s"), job->id,
                 vrmGetLastErrorMessage());
    vrmSetLastError(code, saved);
}

/* Query the helper's record of the job. */
vrmJobRecord *
vrmMigrateJobQuery(const char *helperSocket, unsigned long long id,
                   const char *domainName)
{
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_QUERY);
    g_autoptr(vrmControlMessage) reply = NULL;

    if (domainName) {
        req->domainName = g_strdup(domainName);
    } else {
        req->hasId = true;
        req->id = id;
    }
    if (!(reply = vrmHelperClientCall(helperSocket, req, VRM_MIGRATE_OPEN_TIMEOUT_MS)))
        return NULL;
    if (vrmHelperReplyCheck(reply) < 0)
        return NULL;
    if (!reply->jobs || reply->jobs->len == 0) {
        vrmReportError(VRM_ERR_INVALID_ARG, _("virt-rdmad has no such job"));
        return NULL;
    }
    /* The newest job is the last. */
    return g_steal_pointer(&g_ptr_array_index(reply->jobs, reply->jobs->len - 1));
}

/* After libvirt succeeded: wait until the engine ended and say how. */
int
vrmMigrateFinish(vrmMigrateJob *job)
{
    gint64 deadline = g_get_monotonic_time() +
                      (gint64)VRM_MIGRATE_FINISH_TIMEOUT_MS * 1000;

    for (;;) {
        g_autoptr(vrmJobRecord) rec = vrmMigrateJobQuery(job->helperSocket,
                                                         job->id, NULL);
        if (!rec)
            return -1;
        switch (rec->state) {
        case VRM_JOB_STATE_COMPLETED:
            vrmJobRecordFree(job->record);
            job->record = g_steal_pointer(&rec);
            return 0;
        case VRM_JOB_STATE_FAILED:
        case VRM_JOB_STATE_CANCELLED:
            /* libvirt says the guest arrived: the transport's failure came
             * after the last byte (e.g. at teardown). Report, don't fail. */
            VRM_WARN(_("libvirt completed the migration, but RDMA job %1$llu ended %2$s: %3$s"),
                     job->id, vrmJobStateTypeToString(rec->state),
                     rec->error ? rec->error : "");
            vrmJobRecordFree(job->record);
            job->record = g_steal_pointer(&rec);
            return 0;
        case VRM_JOB_STATE_NEGOTIATING:
        case VRM_JOB_STATE_CONNECTED:
        case VRM_JOB_STATE_TRANSFERRING:
        case VRM_JOB_STATE_LAST:
            break;
        }
        if (g_get_monotonic_time() >= deadline) {
            VRM_WARN(_("RDMA job %1$llu did not end within %2$d s after the migration"),
                     job->id, VRM_MIGRATE_FINISH_TIMEOUT_MS / 1000);
            return 0;
        }
        /* on the command's critical path: the engines end within moments */
        g_usleep(50 * 1000);
    }
}

virDomainPtr
vrmDomainMigrate3(virDomainPtr domain,
                  virConnectPtr dconn,
                  virTypedParameterPtr params,
                  unsigned int nparams,
                  unsigned int flags)
{
    g_autoptr(vrmMigrateJob) job = NULL;
    virDomainPtr ddom;

    vrmResetLastError();
    if (flags & VIR_MIGRATE_PEER2PEER) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("a peer-to-peer migration takes a destination URI: use vrmDomainMigrateToURI3()"));
        return NULL;
    }
    if (!(job = vrmMigratePrepare(domain, params, nparams, flags)))
        return NULL;
    if (!(ddom = virDomainMigrate3(domain, dconn, job->params, job->nparams, flags))) {
        vrmLibReportLibvirtError(_("migration failed"));
        vrmMigrateJobCancel(job);
        return NULL;
    }
    vrmMigrateFinish(job);
    return ddom;
}

int
vrmDomainMigrateToURI3(virDomainPtr domain,
                       const char *dconnuri,
                       virTypedParameterPtr params,
                       unsigned int nparams,
                       unsigned int flags)
{
    g_autoptr(vrmMigrateJob) job = NULL;

    vrmResetLastError();
    if (!(job = vrmMigratePrepare(domain, params, nparams, flags)))
        return -1;
    if (virDomainMigrateToURI3(domain, dconnuri, job->params, job->nparams, flags) < 0) {
        vrmLibReportLibvirtError(_("migration failed"));
        vrmMigrateJobCancel(job);
        return -1;
    }
    vrmMigrateFinish(job);
    return 0;
}
