/*
 * vrmmigrate.c: vrmDomainMigrate3() and vrmDomainMigrateToURI3()
 *
 * 1. Our typed parameters and flags become overrides of the domain's
 *    <rdma:migration> metadata (one table, vrmMigrateParamTable).
 * 2. The local virt-rdmad registers them as an intent of the caller's
 *    (<job-prepare>) and names the domain's per-domain path P.
 * 3. libvirt migrates with URI=unix://P; DEST_XML stays the caller's (no
 *    token ever goes there). The destination's hook makes its virt-rdmad
 *    negotiate with ours, which uses the intent.
 * 4. On failure the intent (or its job) is cancelled; on success the job
 *    that used it is waited for briefly, for the final stats.
 *
 * VIR_MIGRATE_POSTCOPY_RESUME registers no intent: when libvirt reports a
 * broken post-copy migration, the destination's virt-rdmad asks ours for
 * a recovery job, whose engines wait for QEMU on the domain's path; libvirt
 * resumes through it, and the job is followed by its id.
 */
#include <config.h>

#include <stddef.h>
#include <string.h>

#include <libvirt/virterror.h>

#include "virt-rdma.h"
#include "vrmdomainxml.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmenum.h"
#include "vrmlog.h"
#include "vrmhelperclient.h"
#include "vrmlibpriv.h"

/* How long the helper may take to answer a request */
#define VRM_MIGRATE_HELPER_TIMEOUT_MS (30 * 1000)
/* After libvirt returns, how long the engine may take to drain and exit */
#define VRM_MIGRATE_FINISH_TIMEOUT_MS (15 * 1000)
/* After libvirt failed: how long the helper may take to record how its
 * job ended (it learns of a dead engine or peer within moments) */
#define VRM_MIGRATE_CAUSE_TIMEOUT_MS (3 * 1000)
/* --postcopy-resume: how long the helpers may take to set up the
 * recovery job (the source's looks again once a second for 20 s while
 * libvirt still reports the migration; then the engines connect) */
#define VRM_MIGRATE_RECOVERY_WAIT_MS (60 * 1000)
/* --postcopy-resume: how long libvirt's "QEMU reports migration is still
 * running" is taken for QEMU not having noticed the break yet (the source
 * QEMU pauses once it sees its stream closed: a sandbox run saw libvirt
 * refuse 3 s after the source engine had closed it) */
#define VRM_MIGRATE_RESUME_RETRY_MS (30 * 1000)
/* libvirt's default number of parallel connections */
#define VRM_LIBVIRT_DEFAULT_PARALLEL 2

#define OFF(field) offsetof(vrmMigrationParams, field)

static const vrmMigrateParamInfo vrmMigrateParamTable[] = {
    { VRM_MIGRATE_PARAM_CHUNK_SIZE, VIR_TYPED_PARAM_ULLONG, VRM_MIGRATE_ARG_SIZE,
      "chunk-size", N_("SIZE"),
      N_("RDMA chunk size (a power of two from 64K to 64M; K, M, KiB, MiB...)"),
      OFF(chunkSize) },
    { VRM_MIGRATE_PARAM_CHANNELS, VIR_TYPED_PARAM_UINT, VRM_MIGRATE_ARG_UINT,
      "channels", N_("N"),
      N_("RDMA channels (1 + parallel connections)"), OFF(channels),
      VRM_CHANNELS_MIN, VRM_CHANNELS_MAX },
    { VRM_MIGRATE_PARAM_RING_DEPTH, VIR_TYPED_PARAM_UINT, VRM_MIGRATE_ARG_UINT,
      "ring-depth", N_("N"),
      N_("chunks per channel and direction"), OFF(ringDepth),
      VRM_RING_DEPTH_MIN, VRM_RING_DEPTH_MAX },
    { VRM_MIGRATE_PARAM_DEVICE, VIR_TYPED_PARAM_STRING, VRM_MIGRATE_ARG_NAME,
      "rdma-device", N_("DEVICE"),
      N_("RDMA device to use, e.g. mlx5_0"), OFF(device) },
    { VRM_MIGRATE_PARAM_DEVICE_PORT, VIR_TYPED_PARAM_UINT, VRM_MIGRATE_ARG_UINT,
      "rdma-port", N_("PORT"),
      N_("port of that RDMA device"), OFF(devicePort),
      VRM_DEVICE_PORT_MIN, VRM_DEVICE_PORT_MAX },
    { VRM_MIGRATE_PARAM_ADDRESS, VIR_TYPED_PARAM_STRING, VRM_MIGRATE_ARG_ADDRESS,
      "rdma-address", N_("ADDRESS"),
      N_("the source engine's RDMA address (IPv4 or IPv6)"), OFF(address) },
    { VRM_MIGRATE_PARAM_HELPER_SOCKET, VIR_TYPED_PARAM_STRING, VRM_MIGRATE_ARG_PATH,
      NULL, NULL, NULL, VRM_MIGRATE_NOT_A_PARAM },
};

VRM_TABLE_IMPL(vrmMigrateParamInfo, vrmMigrateParamTable, vrmMigrateParamCount, vrmMigrateParamGet);

/* The public codes are the internal ones, frozen */
G_STATIC_ASSERT(VRM_ERROR_NONE == (int)VRM_ERR_OK);
G_STATIC_ASSERT(VRM_ERROR_INVALID_ARG == (int)VRM_ERR_INVALID_ARG);
G_STATIC_ASSERT(VRM_ERROR_NO_DEVICE == (int)VRM_ERR_NO_DEVICE);
G_STATIC_ASSERT(VRM_ERROR_PEER == (int)VRM_ERR_PEER);
G_STATIC_ASSERT(VRM_ERROR_POLICY == (int)VRM_ERR_POLICY);
G_STATIC_ASSERT(VRM_ERROR_LIBVIRT == (int)VRM_ERR_LIBVIRT);
G_STATIC_ASSERT(VRM_ERROR_LIBVIRT + 1 == (int)VRM_ERR_LAST);

/* Which part an error comes from, by its code */
static int
vrmErrorDomainOf(int code)
{
    switch ((vrmErrorCode)code) {
    case VRM_ERR_OK:
        return VRM_FROM_NONE;
    case VRM_ERR_LIBVIRT:
        return VRM_FROM_LIBVIRT;
    case VRM_ERR_INTERNAL:
    case VRM_ERR_SYSTEM:
    case VRM_ERR_INVALID_ARG:
    case VRM_ERR_XML:
        return VRM_FROM_LIBRARY;
    case VRM_ERR_CONFIG:
    case VRM_ERR_PROTOCOL:
    case VRM_ERR_VERSION:
    case VRM_ERR_AUTH:
    case VRM_ERR_RDMA:
    case VRM_ERR_NO_DEVICE:
    case VRM_ERR_RESOURCE:
    case VRM_ERR_TIMEOUT:
    case VRM_ERR_PEER:
    case VRM_ERR_POLICY:
    case VRM_ERR_CANCELLED:
    case VRM_ERR_LAST:
        break;
    }
    return VRM_FROM_HELPER;
}

const vrmError *
vrmLastError(void)
{
    static _Thread_local vrmError last;

    last.code = vrmGetLastErrorCode();
    last.domain = vrmErrorDomainOf(last.code);
    last.message = last.code == VRM_ERR_OK ? NULL : vrmGetLastErrorMessage();
    return &last;
}

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

/*
 * The domain has our metadata element (live; its definition when it does
 * not run): RDMA-enabled. Otherwise a migration to its per-domain path
 * would meet a socket nobody serves, and QEMU's error would not say why.
 */
int
vrmLibDomainCheckRDMAEnabled(virDomainPtr domain)
{
    g_autofree char *xml = NULL;
    g_autoptr(vrmMigrationDef) def = NULL;
    const char *name = virDomainGetName(domain);
    int r;

    /* the XML rather than virDomainGetMetadata(): its "not present" would
     * go to the application's libvirt error handler (stderr by default) */
    if (!(xml = virDomainGetXMLDesc(domain, virDomainIsActive(domain) == 1 ? 0 :
                                    VIR_DOMAIN_XML_INACTIVE))) {
        vrmLibReportLibvirtError(_("cannot read the domain's XML"));
        return -1;
    }
    if ((r = vrmDomainXMLGetMigration(xml, &def)) < 0)
        return -1;
    if (r == 0) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("the domain '%1$s' is not RDMA-enabled (no <rdma:migration> element in its metadata): enable it with virsh metadata %2$s --uri %3$s --key rdma --set '<migration/>' --live --config"),
                       name, name, VRM_XML_NS_MIGRATION);
        return -1;
    }
    return 0;
}

void
vrmConnectFree(virConnectPtr conn)
{
    if (conn)
        virConnectClose(conn);
}

void
vrmDomainFree(virDomainPtr dom)
{
    if (dom)
        virDomainFree(dom);
}

static const vrmMigrateParamInfo *
vrmMigrateParamFind(const char *field)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmMigrateParamTable); i++) {
        if (g_str_equal(vrmMigrateParamTable[i].param, field))
            return &vrmMigrateParamTable[i];
    }
    return NULL;
}

/* One typed parameter of ours into the overrides, checked as the XML
 * layer checks the same value in the metadata */
static int
vrmMigrateParamApply(const vrmMigrateParamInfo *info, const virTypedParameter *p,
                     vrmMigrationParams *o, const char **helperSocket)
{
    char *base = (char *)o;

    if (p->type != info->type) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("migration parameter '%1$s' has the wrong type"), p->field);
        return -1;
    }
    switch (info->kind) {
    case VRM_MIGRATE_ARG_SIZE:
        if (p->value.ul < VRM_CHUNK_SIZE_MIN || p->value.ul > VRM_CHUNK_SIZE_MAX ||
            (p->value.ul & (p->value.ul - 1))) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("chunk size %1$llu is not a power of two from %2$u to %3$u"),
                           p->value.ul, VRM_CHUNK_SIZE_MIN, VRM_CHUNK_SIZE_MAX);
            return -1;
        }
        *(unsigned int *)(base + info->offset) = p->value.ul;
        return 0;
    case VRM_MIGRATE_ARG_UINT:
        if (p->value.ui < info->min || p->value.ui > info->max) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("migration parameter '%1$s' is %2$u; it takes %3$u to %4$u"),
                           p->field, p->value.ui, info->min, info->max);
            return -1;
        }
        *(unsigned int *)(base + info->offset) = p->value.ui;
        return 0;
    case VRM_MIGRATE_ARG_NAME:
    case VRM_MIGRATE_ARG_ADDRESS:
        if (info->kind == VRM_MIGRATE_ARG_NAME ? !vrmValidName(p->value.s) :
            !vrmValidAddress(p->value.s)) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("migration parameter '%1$s' has an invalid value '%2$s'"),
                           p->field, p->value.s);
            return -1;
        }
        g_free(*(char **)(base + info->offset));
        *(char **)(base + info->offset) = g_strdup(p->value.s);
        return 0;
    case VRM_MIGRATE_ARG_PATH:
        *helperSocket = p->value.s;
        return 0;
    }
    return -1;
}

/* QEMU opens one connection per multifd channel plus the main one */
static int
vrmMigrateChannels(virTypedParameterPtr params, int nparams, unsigned int flags,
                   vrmMigrationParams *o)
{
    int parallel = 0;

    if (!(flags & VIR_MIGRATE_PARALLEL)) {
        if (o->channels > 1) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("%1$u RDMA channels need a parallel migration with %2$u parallel connections"),
                           o->channels, o->channels - 1);
            return -1;
        }
        return 0;
    }
    if (virTypedParamsGetInt(params, nparams,
                             VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS, &parallel) != 1)
        parallel = VRM_LIBVIRT_DEFAULT_PARALLEL;
    if (parallel < 1) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("parallel connections must be at least 1, not %1$d"), parallel);
        return -1;
    }
    if (o->channels && o->channels != (unsigned int)parallel + 1) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("%1$u RDMA channels were asked for, but %2$d parallel connections need %3$d (one more for the main stream)"),
                       o->channels, parallel, parallel + 1);
        return -1;
    }
    o->channels = parallel + 1;
    return 0;
}

/* Disks that are not shared (--copy-storage-all, --copy-storage-inc):
 * libvirt copies them over NBD, which virt-rdma carries through the
 * domain's nbd.sock next to its migration socket; -1 if this migration
 * cannot copy disks that way */
static int
vrmMigrateCheckDiskCopy(virTypedParameterPtr params, unsigned int nparams,
                        unsigned int flags)
{
    if (!(flags & (VIR_MIGRATE_NON_SHARED_DISK | VIR_MIGRATE_NON_SHARED_INC)))
        return 0;
    if (virTypedParamsGet(params, nparams, VIR_MIGRATE_PARAM_DISKS_URI) ||
        virTypedParamsGet(params, nparams, VIR_MIGRATE_PARAM_DISKS_PORT)) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("virt-rdma sets the disks URI to the domain's own socket (nbd.sock next to its migration socket); leave the disks URI and port out"));
        return -1;
    }
    if (flags & VIR_MIGRATE_TLS) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("libvirt cannot encrypt the copy of disks over a UNIX socket (\"NBD migration with TLS is not supported over UNIX socket\"): migrate without TLS over a network you trust, or use shared storage"));
        return -1;
    }
    return 0;
}

int
vrmMigrateOverridesFromParams(virTypedParameterPtr params, int nparams,
                              unsigned int flags, vrmMigrationParams *o,
                              const char **helperSocket)
{
    int i;

    for (i = 0; i < nparams; i++) {
        const vrmMigrateParamInfo *info;

        if (!g_str_has_prefix(params[i].field, VRM_PARAM_PREFIX))
            continue;
        if (!(info = vrmMigrateParamFind(params[i].field))) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("unknown migration parameter '%1$s'"), params[i].field);
            return -1;
        }
        if ((flags & VIR_MIGRATE_POSTCOPY_RESUME) && info->offset != VRM_MIGRATE_NOT_A_PARAM) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("a post-copy recovery takes no RDMA parameter ('%1$s'): the helpers set up its job with the broken migration's"),
                           params[i].field);
            return -1;
        }
        if (vrmMigrateParamApply(info, &params[i], o, helperSocket) < 0)
            return -1;
    }
    /* libvirt's own flag for pin-all, as `virsh migrate --rdma-pin-all` */
    if (flags & VIR_MIGRATE_RDMA_PIN_ALL)
        o->capsOn |= VRM_CAP_PIN_ALL;
    if (vrmMigrateCheckDiskCopy(params, nparams, flags) < 0)
        return -1;
    return vrmMigrateChannels(params, nparams, flags, o);
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
    return -1;
}

void
vrmMigrateJobFree(vrmMigrateJob *job)
{
    if (!job)
        return;
    g_free(job->helperSocket);
    g_free(job->uri);
    if (job->params)
        virTypedParamsFree(job->params, job->nparams);
    vrmJobRecordFree(job->record);
    g_free(job);
}

/* The intent: the helper answers with the per-domain path */
static int
vrmMigrateRegister(vrmMigrateJob *job, virDomainPtr domain,
                   vrmMigrationParams *overrides)
{
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_PREPARE);
    g_autoptr(vrmControlMessage) reply = NULL;
    char uuid[VIR_UUID_STRING_BUFLEN];

    if (virDomainGetUUIDString(domain, uuid) < 0) {
        vrmLibReportLibvirtError(_("cannot read the domain's UUID"));
        return -1;
    }
    req->domainName = g_strdup(virDomainGetName(domain));
    req->domainUUID = g_strdup(uuid);
    if (!vrmMigrationParamsIsEmpty(overrides)) {
        req->overrides = g_new0(vrmMigrationParams, 1);
        vrmMigrationParamsCopy(req->overrides, overrides);
    }
    if (!(reply = vrmHelperClientCall(job->helperSocket, req,
                                      VRM_MIGRATE_HELPER_TIMEOUT_MS)) ||
        vrmHelperReplyCheck(reply) < 0)
        return -1;
    if (!reply->intentRecord || !reply->intentRecord->socketPath) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("virt-rdmad answered the intent without a per-domain path"));
        return -1;
    }
    job->intent = reply->intentRecord->id;
    job->uri = g_strdup_printf("unix://%s", reply->intentRecord->socketPath);
    return 0;
}

/* --postcopy-resume: the recovery job of the domain, once its engines
 * wait for QEMU (connected); the broken job's newest record until the
 * helpers made it. Its owner is the broken job's. */
static int
vrmMigrateAttachRecovery(vrmMigrateJob *job, virDomainPtr domain)
{
    const char *name = virDomainGetName(domain);
    gint64 deadline = g_get_monotonic_time() +
                      (gint64)VRM_MIGRATE_RECOVERY_WAIT_MS * 1000;
    g_autoptr(vrmJobRecord) rec = NULL;

    for (;;) {
        vrmJobRecordFree(rec);
        rec = vrmMigrateJobQuery(job->helperSocket, 0, name);
        if (!rec && vrmGetLastErrorCode() != VRM_ERR_INVALID_ARG)
            return -1;          /* no helper to ask, rather than no job yet */
        if (rec && rec->role == VRM_JOB_ROLE_SOURCE && rec->socketPath &&
            rec->state == VRM_JOB_STATE_CONNECTED)
            break;
        if (g_get_monotonic_time() >= deadline) {
            g_autofree char *newest = NULL;

            if (rec)
                newest = g_strdup_printf(_("its newest RDMA job here, %1$llu, is %2$s"),
                                         rec->id, vrmJobStateTypeToString(rec->state));
            else
                newest = g_strdup(vrmGetLastErrorMessage());
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("no recovery of the post-copy migration of '%1$s' waits for QEMU on this host after %2$d s (%3$s): the destination's virt-rdmad asks for one when libvirt reports the broken migration, unless either helper has [limits] recovery-window = 0 or the destination's restarted after the broken job had ended; resume over TCP instead: virsh migrate --postcopy --postcopy-resume --migrateuri tcp://DESTINATION:PORT"),
                           name, VRM_MIGRATE_RECOVERY_WAIT_MS / 1000, newest);
            return -1;
        }
        g_usleep(500 * 1000);
    }
    job->recovery = true;
    job->id = rec->id;
    job->uri = g_strdup_printf("unix://%s", rec->socketPath);
    return 0;
}

/* libvirt's parameters: the caller's minus ours, with URI=unix://P and,
 * when disks are copied, DISKS_URI=unix://DIR/nbd.sock */
static int
vrmMigrateLibvirtParams(vrmMigrateJob *job, virTypedParameterPtr params,
                        unsigned int nparams, unsigned int flags)
{
    unsigned int i;

    for (i = 0; i < nparams; i++) {
        const char *f = params[i].field;

        if (g_str_has_prefix(f, VRM_PARAM_PREFIX) || g_str_equal(f, VIR_MIGRATE_PARAM_URI))
            continue;
        if (vrmTypedParamCopy(&job->params, &job->nparams, &job->maxparams,
                              &params[i]) < 0)
            goto error;
    }
    if (virTypedParamsAddString(&job->params, &job->nparams, &job->maxparams,
                                VIR_MIGRATE_PARAM_URI, job->uri) < 0)
        goto error;
    if (flags & (VIR_MIGRATE_NON_SHARED_DISK | VIR_MIGRATE_NON_SHARED_INC)) {
        g_autofree char *dir = g_path_get_dirname(job->uri);
        g_autofree char *disks = g_strconcat(dir, "/" VRM_HELPER_DOMAIN_DISK_SOCKET, NULL);

        if (virTypedParamsAddString(&job->params, &job->nparams, &job->maxparams,
                                    VIR_MIGRATE_PARAM_DISKS_URI, disks) < 0)
            goto error;
    }
    return 0;

 error:
    vrmLibReportLibvirtError(_("cannot build the migration parameters"));
    return -1;
}

vrmMigrateJob *
vrmMigratePrepare(virDomainPtr domain, virTypedParameterPtr params,
                  unsigned int nparams, unsigned int flags)
{
    g_autoptr(vrmMigrateJob) job = g_new0(vrmMigrateJob, 1);
    g_autoptr(vrmMigrationParams) overrides = g_new0(vrmMigrationParams, 1);
    const char *helperSocket = NULL;

    if (vrmMigrateOverridesFromParams(params, nparams, flags, overrides,
                                      &helperSocket) < 0)
        return NULL;
    job->helperSocket = helperSocket ? g_strdup(helperSocket) : vrmHelperSocketPath();
    if (flags & VIR_MIGRATE_POSTCOPY_RESUME) {
        if (vrmMigrateAttachRecovery(job, domain) < 0 ||
            vrmMigrateLibvirtParams(job, params, nparams, flags) < 0)
            return NULL;
        VRM_INFO("RDMA job %llu: the recovery, %s", job->id, job->uri);
        return g_steal_pointer(&job);
    }
    if (vrmLibDomainCheckRDMAEnabled(domain) < 0 ||
        vrmMigrateRegister(job, domain, overrides) < 0)
        return NULL;
    if (vrmMigrateLibvirtParams(job, params, nparams, flags) < 0) {
        vrmMigrateJobCancel(job);
        return NULL;
    }
    VRM_INFO("RDMA intent %llu: %s", job->intent, job->uri);
    return g_steal_pointer(&job);
}

/* A request about the job: by its intent, or a recovery's by its id */
static vrmControlMessage *
vrmMigrateJobRequest(const vrmMigrateJob *job, vrmControlType type)
{
    vrmControlMessage *req = vrmControlMessageNew(type);

    if (job->recovery) {
        req->hasId = true;
        req->id = job->id;
    } else {
        req->hasIntent = true;
        req->intent = job->intent;
    }
    return req;
}

/* Withdraw the intent, or cancel the job that used it; the error that
 * led here stays the one reported. A recovery job stays: libvirt may
 * have refused before QEMU connected, and the operator may try again
 * within the recovery window. */
void
vrmMigrateJobCancel(vrmMigrateJob *job)
{
    g_autoptr(vrmControlMessage) req = NULL;
    g_autoptr(vrmControlMessage) reply = NULL;
    g_autofree char *saved = g_strdup(vrmGetLastErrorMessage());
    int code = vrmGetLastErrorCode();

    if (job->recovery)
        return;
    req = vrmMigrateJobRequest(job, VRM_CONTROL_JOB_CANCEL);
    reply = vrmHelperClientCall(job->helperSocket, req, VRM_MIGRATE_HELPER_TIMEOUT_MS);
    if (!reply || vrmHelperReplyCheck(reply) < 0)
        VRM_DEBUG("RDMA intent %llu: %s", job->intent, vrmGetLastErrorMessage());
    vrmSetLastError(code, saved);
}

static vrmJobRecord *
vrmMigrateQuery(const char *helperSocket, vrmControlMessage *req)
{
    g_autoptr(vrmControlMessage) reply = NULL;

    if (!(reply = vrmHelperClientCall(helperSocket, req, VRM_MIGRATE_HELPER_TIMEOUT_MS)) ||
        vrmHelperReplyCheck(reply) < 0)
        return NULL;
    if (!reply->jobs || reply->jobs->len == 0) {
        vrmReportError(VRM_ERR_INVALID_ARG, _("virt-rdmad has no such job"));
        return NULL;
    }
    /* the newest job is the last */
    return g_steal_pointer(&g_ptr_array_index(reply->jobs, reply->jobs->len - 1));
}

vrmJobRecord *
vrmMigrateJobQuery(const char *helperSocket, unsigned long long id,
                   const char *domainName)
{
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_QUERY);

    if (domainName) {
        req->domainName = g_strdup(domainName);
    } else {
        req->hasId = true;
        req->id = id;
    }
    return vrmMigrateQuery(helperSocket, req);
}

/* After libvirt succeeded: the job that used the intent, once it ended */
int
vrmMigrateFinish(vrmMigrateJob *job)
{
    gint64 deadline = g_get_monotonic_time() +
                      (gint64)VRM_MIGRATE_FINISH_TIMEOUT_MS * 1000;

    for (;;) {
        g_autoptr(vrmControlMessage) req = vrmMigrateJobRequest(job, VRM_CONTROL_JOB_QUERY);
        g_autoptr(vrmJobRecord) rec = NULL;

        if (!(rec = vrmMigrateQuery(job->helperSocket, req))) {
            /* libvirt migrated, but not through our path (another URI?) */
            if (job->recovery)
                VRM_WARN(_("libvirt completed the recovery, but virt-rdmad no longer knows RDMA job %1$llu: %2$s"),
                         job->id, vrmGetLastErrorMessage());
            else
                VRM_WARN(_("libvirt completed the migration, but no RDMA job used intent %1$llu: %2$s"),
                         job->intent, vrmGetLastErrorMessage());
            return 0;
        }
        if (vrmJobStateIsFinal(rec->state)) {
            if (rec->state != VRM_JOB_STATE_COMPLETED)
                VRM_WARN(_("libvirt completed the migration, but RDMA job %1$llu ended %2$s: %3$s"),
                         rec->id, vrmJobStateTypeToString(rec->state),
                         rec->error ? rec->error : "");
            vrmJobRecordFree(job->record);
            job->record = g_steal_pointer(&rec);
            return 0;
        }
        if (g_get_monotonic_time() >= deadline) {
            VRM_WARN(_("RDMA job %1$llu did not end within %2$d s after the migration"),
                     rec->id, VRM_MIGRATE_FINISH_TIMEOUT_MS / 1000);
            return 0;
        }
        /* on the command's critical path: the engines end within moments */
        g_usleep(50 * 1000);
    }
}

/* After libvirt failed: the job's record once it has ended, or as it is
 * at VRM_MIGRATE_CAUSE_TIMEOUT_MS (NULL when the helper has none) */
static vrmJobRecord *
vrmMigrateEndedRecord(vrmMigrateJob *job)
{
    gint64 deadline = g_get_monotonic_time() +
                      (gint64)VRM_MIGRATE_CAUSE_TIMEOUT_MS * 1000;
    vrmJobRecord *rec = NULL;

    for (;;) {
        g_autoptr(vrmControlMessage) req = vrmMigrateJobRequest(job, VRM_CONTROL_JOB_QUERY);

        vrmJobRecordFree(rec);
        rec = vrmMigrateQuery(job->helperSocket, req);
        if (!rec || vrmJobStateIsFinal(rec->state) || g_get_monotonic_time() >= deadline)
            return rec;
        g_usleep(100 * 1000);
    }
}

/* After libvirt failed (@libvirtMsg, its error): libvirt reports what
 * QEMU saw (a closed stream, a destination that "unexpectedly closed the
 * monitor"), several lines of it. When the RDMA job (@rec) failed, its
 * error is the cause: report it first, with libvirt's first line after it. */
static void
vrmMigrateReportFailure(const vrmJobRecord *rec, const char *libvirtMsg)
{
    g_autofree char *firstLine = g_strndup(libvirtMsg, strcspn(libvirtMsg, "\n"));

    if (rec && rec->state == VRM_JOB_STATE_FAILED && rec->error) {
        vrmReportError(VRM_ERR_RDMA,
                       _("migration failed: RDMA job %1$llu failed: %2$s (libvirt: %3$s)"),
                       rec->id, rec->error, firstLine);
        return;
    }
    vrmReportError(VRM_ERR_LIBVIRT, _("%1$s: %2$s"), _("migration failed"), libvirtMsg);
}

/* A resume that libvirt reported failed, though it went through: libvirt
 * 9.0's destination can check QEMU's state before QEMU has left
 * "postcopy-paused" for the recovery and report "job 'migration in'
 * failed in post-copy phase", while the source's libvirt completes the
 * migration (fault matrix row 14, one run in several). It went through
 * when the recovery's RDMA job carried the stream to its end (completed),
 * the source's libvirt stopped the domain as migrated, and it is active
 * on the destination and not in a failed post-copy: then the destination's
 * domain, else NULL. */
static virDomainPtr
vrmMigrateRecoveredAnyway(const vrmMigrateJob *job, const vrmJobRecord *rec,
                          virDomainPtr domain, virConnectPtr dconn,
                          const char *libvirtMsg)
{
    unsigned char uuid[VIR_UUID_BUFLEN];
    int state, reason;
    virDomainPtr ddom;

    if (!job->recovery || !rec || rec->state != VRM_JOB_STATE_COMPLETED)
        return NULL;
    if (virDomainGetState(domain, &state, &reason, 0) < 0 ||
        state != VIR_DOMAIN_SHUTOFF || reason != VIR_DOMAIN_SHUTOFF_MIGRATED)
        return NULL;
    if (virDomainGetUUID(domain, uuid) < 0 ||
        !(ddom = virDomainLookupByUUID(dconn, uuid)))
        return NULL;
    if (virDomainGetState(ddom, &state, &reason, 0) < 0 ||
        (state != VIR_DOMAIN_RUNNING && state != VIR_DOMAIN_PAUSED) ||
        (state == VIR_DOMAIN_RUNNING && reason == VIR_DOMAIN_RUNNING_POSTCOPY_FAILED) ||
        (state == VIR_DOMAIN_PAUSED && reason == VIR_DOMAIN_PAUSED_POSTCOPY_FAILED)) {
        virDomainFree(ddom);
        return NULL;
    }
    VRM_WARN(_("libvirt reported that the resume of '%1$s' failed (%2$s), but it went through: RDMA job %3$llu carried the whole stream, this host's libvirt stopped the domain as migrated, and it runs on the destination"),
             virDomainGetName(domain), libvirtMsg, rec->id);
    return ddom;
}

/* libvirt refused a resume as invalid: QEMU still reports the broken
 * migration running. A source QEMU that has sent its last pages notices
 * a closed stream only on its next write, which may never come (CI: more
 * than 30 s): as `virsh domjobabort --postcopy` would, libvirt is asked
 * once to pause it (QEMU's migrate-pause); the recovery job exists only
 * because both helpers saw the stream break. True when the call should
 * be made again (a recovery within VRM_MIGRATE_RESUME_RETRY_MS). */
static bool
vrmMigrateResumeAgain(const vrmMigrateJob *job, virDomainPtr domain,
                      gint64 start, bool *paused)
{
    if (!job->recovery || virGetLastErrorCode() != VIR_ERR_OPERATION_INVALID ||
        g_get_monotonic_time() - start >= (gint64)VRM_MIGRATE_RESUME_RETRY_MS * 1000)
        return false;
    VRM_INFO("RDMA job %llu: libvirt cannot resume yet (%s); trying again",
             job->id, virGetLastErrorMessage());
    if (!*paused) {
        *paused = true;
        if (virDomainAbortJobFlags(domain, VIR_DOMAIN_ABORT_JOB_POSTCOPY) < 0)
            VRM_INFO("RDMA job %llu: pausing the broken post-copy migration: %s",
                     job->id, virGetLastErrorMessage());
        else
            VRM_INFO("RDMA job %llu: the broken post-copy migration is paused", job->id);
    }
    g_usleep(G_USEC_PER_SEC);
    return true;
}

virDomainPtr
vrmDomainMigrate3(virDomainPtr domain, virConnectPtr dconn,
                  virTypedParameterPtr params, unsigned int nparams,
                  unsigned int flags)
{
    g_autoptr(vrmMigrateJob) job = NULL;
    virDomainPtr ddom;
    bool paused = false;
    gint64 start;

    vrmResetLastError();
    if (flags & VIR_MIGRATE_PEER2PEER) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("a peer-to-peer migration takes a destination URI: use vrmDomainMigrateToURI3()"));
        return NULL;
    }
    if (!(job = vrmMigratePrepare(domain, params, nparams, flags)))
        return NULL;
    start = g_get_monotonic_time();
    while (!(ddom = virDomainMigrate3(domain, dconn, job->params, job->nparams, flags)) &&
           vrmMigrateResumeAgain(job, domain, start, &paused))
        ;
    if (!ddom) {
        g_autofree char *libvirtMsg = g_strdup(virGetLastErrorMessage());
        g_autoptr(vrmJobRecord) rec = vrmMigrateEndedRecord(job);

        if ((ddom = vrmMigrateRecoveredAnyway(job, rec, domain, dconn, libvirtMsg))) {
            vrmMigrateFinish(job);
            return ddom;
        }
        vrmMigrateReportFailure(rec, libvirtMsg);
        vrmMigrateJobCancel(job);
        return NULL;
    }
    vrmMigrateFinish(job);
    return ddom;
}

/*
 * A post-copy resume asked peer to peer is made from this client instead,
 * with its own connection to the destination. libvirt's peer-to-peer
 * resume registers the source domain's close callback for the source
 * daemon's connection to the destination and no Confirm step removes it;
 * that connection is freed, and a client connection allocated later at
 * the same address and closed while the domain's next outgoing migration
 * is in its Begin phase aborts that job under the thread that runs it:
 * libvirtd 9.0 dies (fault matrix, rows 13 and 14 in turn: "The
 * connection which controls migration of domain g1 was closed", then a
 * segfault in the perform thread; its core). Resumed from a client, the
 * callback belongs to the client's connection, which Confirm removes.
 * Without a connection to the destination from here, the resume stays
 * peer to peer, with a warning.
 */
static int
vrmMigrateResumeFromClient(virDomainPtr domain, const char *dconnuri,
                           virTypedParameterPtr params, unsigned int nparams,
                           unsigned int flags)
{
    g_autoptr(virConnect) dconn = NULL;
    virDomainPtr ddom;

    if (!(dconn = virConnectOpen(dconnuri))) {
        VRM_WARN(_("cannot connect to %1$s from this client (%2$s): the post-copy resume of '%3$s' goes peer to peer; libvirt may then abort the domain's next migration from this host, or its daemon crash: restart libvirtd here before it"),
                 dconnuri, virGetLastErrorMessage(), virDomainGetName(domain));
        return 1;
    }
    if (!(ddom = vrmDomainMigrate3(domain, dconn, params, nparams,
                                   flags & ~VIR_MIGRATE_PEER2PEER)))
        return -1;
    virDomainFree(ddom);
    return 0;
}

int
vrmDomainMigrateToURI3(virDomainPtr domain, const char *dconnuri,
                       virTypedParameterPtr params, unsigned int nparams,
                       unsigned int flags)
{
    g_autoptr(vrmMigrateJob) job = NULL;
    bool paused = false;
    gint64 start;
    int rc;

    vrmResetLastError();
    if ((flags & VIR_MIGRATE_POSTCOPY_RESUME) && (flags & VIR_MIGRATE_PEER2PEER) &&
        (rc = vrmMigrateResumeFromClient(domain, dconnuri, params, nparams, flags)) <= 0)
        return rc;
    if (!(job = vrmMigratePrepare(domain, params, nparams, flags)))
        return -1;
    start = g_get_monotonic_time();
    while ((rc = virDomainMigrateToURI3(domain, dconnuri, job->params, job->nparams,
                                        flags)) < 0 &&
           vrmMigrateResumeAgain(job, domain, start, &paused))
        ;
    if (rc < 0) {
        g_autofree char *libvirtMsg = g_strdup(virGetLastErrorMessage());
        g_autoptr(vrmJobRecord) rec = vrmMigrateEndedRecord(job);

        vrmMigrateReportFailure(rec, libvirtMsg);
        vrmMigrateJobCancel(job);
        return -1;
    }
    vrmMigrateFinish(job);
    return 0;
}
