/*
 * vrmhelperjob.c: job state machine, engine stats, job records on disk
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vrmhelperjob.h"
#include "vrmhelperengine.h"
#include "vrmhelperpeer.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

void
vrmEngineSnapshotClear(vrmEngineSnapshot *es)
{
    if (!es)
        return;
    g_clear_pointer(&es->error, g_free);
    memset(es, 0, sizeof(*es));
}

vrmHelperJob *
vrmHelperJobNew(unsigned long long id, vrmJobRole role)
{
    vrmHelperJob *job = g_new0(vrmHelperJob, 1);

    job->record = vrmJobRecordNew();
    job->record->id = id;
    job->record->role = role;
    job->record->state = VRM_JOB_STATE_NEGOTIATING;
    job->stderrBuf = g_string_new(NULL);
    job->domainDir.fd = -1;
    job->engineSetupFd = -1;
    job->qemuListenFd = -1;
    job->diskListenFd = -1;
    job->tcpListenFd = -1;
    job->qemuUid = job->qemuPid = -1;
    job->eventState = -1;
    return job;
}

void
vrmHelperJobFree(vrmHelperJob *job)
{
    if (!job)
        return;
    g_clear_handle_id(&job->childWatch, g_source_remove);
    g_clear_handle_id(&job->engineSetupWatch, g_source_remove);
    if (job->engineSetupFd >= 0)
        close(job->engineSetupFd);
    g_free(job->engineSetupError);
    if (job->pid > 0 && !job->adopted)
        g_spawn_close_pid(job->pid);
    g_clear_handle_id(&job->phaseTimer, g_source_remove);
    g_clear_handle_id(&job->outcomeTimer, g_source_remove);
    vrmStatsProbeCancel(job->probe);
    vrmPeerConnFree(job->peer);
    vrmTokenClear(&job->token);
    vrmOfferFree(job->pendingOffer);
    if (job->qemuListenFd >= 0)
        close(job->qemuListenFd);
    if (job->diskListenFd >= 0)
        close(job->diskListenFd);
    if (job->tcpListenFd >= 0)
        close(job->tcpListenFd);
    g_free(job->steerCgroup);
    g_free(job->steerDaemonCgroup);
    g_free(job->unusedWhy);
    vrmDomainDirClear(&job->domainDir);
    vrmJobRecordFree(job->record);
    vrmLocatorFree(job->sourceLocator);
    g_free(job->statsSocket);
    g_free(job->statsFile);
    g_free(job->logFile);
    g_string_free(job->stderrBuf, TRUE);
    g_free(job);
}

bool
vrmJobStateCanChange(vrmJobState from, vrmJobState to)
{
    if (from >= VRM_JOB_STATE_LAST || to >= VRM_JOB_STATE_LAST)
        return false;
    if (vrmJobStateIsFinal(from))
        return false;
    if (vrmJobStateIsFinal(to))
        return true;
    /* negotiating < connected < transferring: forward only */
    return to > from;
}

/* Fixed for good: journalctl MESSAGE_ID=... finds the event on any host */
static const char *const vrmJobLogMessageIds[] = {
    [VRM_JOB_LOG_STARTED] = "e01b2fd7242d4d8bbd2df3a220f67f69",
    [VRM_JOB_LOG_STATE] = "62248edd73f2435c9688d73f38fe07de",
    [VRM_JOB_LOG_ENDED] = "c8b0123f8d954a389bbf1b5553d62d48",
    [VRM_JOB_LOG_OVER_TCP] = "1d618416cef3402c86cd857e692bc584",
};
G_STATIC_ASSERT(G_N_ELEMENTS(vrmJobLogMessageIds) == VRM_JOB_LOG_LAST);

const char *
vrmJobLogMessageId(vrmJobLogEvent event)
{
    return event < VRM_JOB_LOG_LAST ? vrmJobLogMessageIds[event] : NULL;
}

/* The other end, as far as the job knows it: the destination's helper of
 * an outgoing job, the source's helper of an incoming one */
static const char *
vrmHelperJobPeerHost(const vrmHelperJob *job)
{
    if (job->record->role == VRM_JOB_ROLE_DESTINATION)
        return job->sourceLocator ? job->sourceLocator->host : NULL;
    if (job->record->migration && job->record->migration->locator)
        return job->record->migration->locator->host;
    return NULL;
}

void
vrmHelperJobLog(const vrmHelperJob *job, vrmLogLevel level, vrmJobLogEvent event,
                const char *fmt, ...)
{
    const vrmJobRecord *r = job->record;
    g_autofree char *id = g_strdup_printf("%llu", r->id);
    g_autofree char *msg = NULL;
    vrmLogField fields[] = {
        { "JOB_ID", id },
        { "JOB_ROLE", vrmJobRoleTypeToString(r->role) },
        { "DOMAIN", r->domainName },
        { "DOMAIN_UUID", r->domainUUID },
        { "PEER", vrmHelperJobPeerHost(job) },
    };
    va_list ap;

    if (level > vrmLogGetLevel())
        return;
    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    vrmLogStructured(level, vrmJobLogMessageId(event), fields, G_N_ELEMENTS(fields),
                     "%s", msg);
}

int
vrmHelperJobSetState(vrmHelperJob *job, vrmJobState state, int code,
                     const char *error)
{
    vrmJobRecord *r = job->record;

    if (r->state == state)
        return 0;
    if (!vrmJobStateCanChange(r->state, state)) {
        vrmReportError(VRM_ERR_INTERNAL,
                       _("job %1$llu cannot go from state '%2$s' to '%3$s'"),
                       r->id, vrmJobStateTypeToString(r->state),
                       vrmJobStateTypeToString(state));
        return -1;
    }
    vrmHelperJobLog(job, VRM_LOG_INFO,
                    vrmJobStateIsFinal(state) ? VRM_JOB_LOG_ENDED : VRM_JOB_LOG_STATE,
                    "job %llu: %s -> %s%s%s", r->id,
                    vrmJobStateTypeToString(r->state), vrmJobStateTypeToString(state),
                    error ? ": " : "", error ? error : "");
    r->state = state;
    if (state == VRM_JOB_STATE_FAILED || state == VRM_JOB_STATE_CANCELLED ||
        state == VRM_JOB_STATE_OVER_TCP || state == VRM_JOB_STATE_UNKNOWN) {
        g_free(r->error);
        r->error = g_strdup(error);
        /* an error always names a cause, none is "ok" */
        if (!error)
            code = VRM_ERR_OK;
        else if (code <= VRM_ERR_OK || code >= VRM_ERR_LAST)
            code = VRM_ERR_INTERNAL;
        r->errorCode = code;
    }
    return 0;
}

/* ---- the engine's stats record ------------------------------------- */

int
vrmHelperEngineStatsParse(const char *json, vrmEngineSnapshot *es)
{
    g_auto(vrmEngineStats) st = { 0 };

    memset(es, 0, sizeof(*es));
    if (!json || vrmEngineStatsParse(json, strlen(json), &st) < 0)
        return -1;
    es->state = st.state;
    es->error = g_steal_pointer(&st.error);
    es->channels = st.channels;
    es->established = st.established;
    es->qemuConnections = st.qemuConnections;
    es->rdmaPort = st.rdmaPort <= 65535 ? st.rdmaPort : 0;
    es->qemuGone = st.qemuGone;
    es->stats.bytesSent = st.bytesSent;
    es->stats.bytesReceived = st.bytesReceived;
    es->stats.chunks = st.chunks;
    es->stats.pinnedBytes = st.pinnedBytes;
    es->stats.registrationNs = st.registrationNs;
    es->stats.mbps = (unsigned int)MIN((st.state == VRM_ENGINE_STATE_RUNNING ?
                                        st.mbps : st.mbpsAverage) + 0.5,
                                       (double)G_MAXUINT);
    es->stats.channels = es->qemuConnections;
    es->stats.cpuNs = (unsigned long long)((st.cpuUserS + st.cpuSystemS) * 1e9 + 0.5);
    es->stats.hasCpu = true;
    /* the record's flags are channel 0's agreement: none before it */
    if (st.established > 0) {
        es->stats.capabilities = st.capabilities & vrmCapabilityKnownMask();
        es->stats.hasCapabilities = true;
    }
    return 0;
}

void
vrmHelperJobApplyStats(vrmHelperJob *job, const vrmEngineSnapshot *es)
{
    vrmJobRecord *r = job->record;
    unsigned long long peak = r->hasStats ? r->stats.pinnedBytes : 0;

    r->stats = es->stats;
    /* the record keeps the peak, the engine reports what is pinned now */
    r->stats.pinnedBytes = MAX(peak, es->stats.pinnedBytes);
    r->hasStats = true;
    job->established = es->established;
    if (es->rdmaPort)
        job->rdmaPort = es->rdmaPort;

    if (vrmJobStateIsFinal(r->state))
        return;
    if (es->qemuConnections > 0)
        vrmHelperJobSetState(job, VRM_JOB_STATE_TRANSFERRING, VRM_ERR_OK, NULL);
    else if (es->established >= 1)
        /* engines connect channels as QEMU opens them (protocol version
         * 2): channel 0 connected and authenticated is the job connected */
        vrmHelperJobSetState(job, VRM_JOB_STATE_CONNECTED, VRM_ERR_OK, NULL);
}

#define VRM_HELPER_LOG_TAIL 16384

void
vrmHelperJobReadLog(vrmHelperJob *job)
{
    g_autofree char *data = NULL;
    gsize len = 0;

    g_string_truncate(job->stderrBuf, 0);
    if (!job->logFile || !g_file_get_contents(job->logFile, &data, &len, NULL))
        return;
    if (len > VRM_HELPER_LOG_TAIL)
        g_string_append_len(job->stderrBuf, data + len - VRM_HELPER_LOG_TAIL,
                            VRM_HELPER_LOG_TAIL);
    else
        g_string_append_len(job->stderrBuf, data, len);
}

char *
vrmHelperJobKey(const vrmToken *token)
{
    g_autofree char *sum =
        g_compute_checksum_for_data(G_CHECKSUM_SHA256, token->bytes,
                                    sizeof(token->bytes));

    /* 64 bits of a hash of the token: the same name on both hosts, and
     * the token itself never appears in the file system */
    return g_strndup(sum, 16);
}

/* ---- records on disk ------------------------------------------------- */

static char *
vrmHelperJobPath(const char *dir, unsigned long long id, const char *ext)
{
    return g_strdup_printf("%s/job-%llu.%s", dir, id, ext);
}

int
vrmHelperJobSave(const vrmHelperJob *job, const char *dir)
{
    g_autoptr(GString) buf = g_string_new(NULL);
    g_autofree char *xmlPath = vrmHelperJobPath(dir, job->record->id, "xml");
    g_autofree char *runPath = vrmHelperJobPath(dir, job->record->id, "run");
    g_autoptr(GError) err = NULL;

    vrmJobRecordFormatBuf(buf, job->record, 0);
    if (!g_file_set_contents_full(xmlPath, buf->str, buf->len,
                                  G_FILE_SET_CONTENTS_CONSISTENT, 0600, &err)) {
        vrmReportError(VRM_ERR_SYSTEM,
                       _("cannot write the job record %1$s: %2$s (virt-rdmad needs its state directory writable and not full)"),
                       xmlPath, err->message);
        return -1;
    }
    if (job->pid > 0 && !vrmJobStateIsFinal(job->record->state)) {
        g_autoptr(GKeyFile) kf = g_key_file_new();
        g_autofree char *data = NULL;
        gsize len;

        g_key_file_set_int64(kf, "engine", "pid", job->pid);
        g_key_file_set_uint64(kf, "engine", "cm-port", job->cmPort);
        if (job->statsSocket)
            g_key_file_set_string(kf, "engine", "stats-socket", job->statsSocket);
        if (job->statsFile)
            g_key_file_set_string(kf, "engine", "stats-file", job->statsFile);
        if (job->logFile)
            g_key_file_set_string(kf, "engine", "log-file", job->logFile);
        g_key_file_set_uint64(kf, "engine", "uid", job->engineUid);
        g_key_file_set_uint64(kf, "engine", "start-time", job->startTime);
        g_key_file_set_uint64(kf, "engine", "allowance", job->allowance);
        if (job->domainDir.uuid)
            g_key_file_set_string(kf, "engine", "domain-dir", job->domainDir.uuid);
        /* a destination helper restarted while its engine runs can still
         * ask the source's helper for a post-copy recovery */
        if (job->sourceLocator && job->sourceLocator->host && job->sourceLocator->address) {
            g_key_file_set_string(kf, "source", "host", job->sourceLocator->host);
            g_key_file_set_string(kf, "source", "address", job->sourceLocator->address);
            g_key_file_set_uint64(kf, "source", "port", job->sourceLocator->port);
        }
        data = g_key_file_to_data(kf, &len, NULL);
        if (!g_file_set_contents_full(runPath, data, len,
                                      G_FILE_SET_CONTENTS_CONSISTENT, 0600, &err)) {
            vrmReportError(VRM_ERR_SYSTEM,
                           _("cannot write the job record %1$s: %2$s (virt-rdmad needs its state directory writable and not full)"),
                           runPath, err->message);
            return -1;
        }
    } else {
        unlink(runPath);
    }
    return 0;
}

void
vrmHelperJobRemoveFiles(const char *dir, unsigned long long id)
{
    g_autofree char *xmlPath = vrmHelperJobPath(dir, id, "xml");
    g_autofree char *runPath = vrmHelperJobPath(dir, id, "run");
    g_autofree char *statsPath = vrmHelperJobPath(dir, id, "stats.json");
    g_autofree char *logPath = vrmHelperJobPath(dir, id, "log");

    unlink(xmlPath);
    unlink(runPath);
    unlink(statsPath);
    unlink(logPath);
}

/* The [source] group of a .run file: where the source's helper answers */
static vrmLocator *
vrmHelperJobLoadSource(GKeyFile *kf)
{
    g_autofree char *host = g_key_file_get_string(kf, "source", "host", NULL);
    g_autofree char *address = g_key_file_get_string(kf, "source", "address", NULL);
    guint64 port = g_key_file_get_uint64(kf, "source", "port", NULL);

    if (!host || !*host || !address || !*address || port == 0 || port > 65535)
        return NULL;
    return vrmLocatorNew(host, address, port);
}

static vrmHelperJob *
vrmHelperJobLoad(const char *dir, const char *name)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(xmlDoc) doc = NULL;
    g_autoptr(vrmHelperJob) job = NULL;
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autofree char *runPath = NULL;
    vrmJobRecord *rec;
    xmlNodePtr root;

    if (!(doc = vrmXMLParseFile(path, _("job record"))))
        return NULL;
    root = xmlDocGetRootElement(doc);
    if (!(rec = vrmJobRecordParseNode(root)))
        return NULL;
    job = vrmHelperJobNew(rec->id, rec->role);
    vrmJobRecordFree(job->record);
    job->record = rec;

    runPath = vrmHelperJobPath(dir, rec->id, "run");
    if (g_key_file_load_from_file(kf, runPath, G_KEY_FILE_NONE, NULL)) {
        job->pid = g_key_file_get_int64(kf, "engine", "pid", NULL);
        job->cmPort = g_key_file_get_uint64(kf, "engine", "cm-port", NULL);
        job->statsSocket = g_key_file_get_string(kf, "engine", "stats-socket", NULL);
        job->statsFile = g_key_file_get_string(kf, "engine", "stats-file", NULL);
        job->logFile = g_key_file_get_string(kf, "engine", "log-file", NULL);
        job->engineUid = g_key_file_get_uint64(kf, "engine", "uid", NULL);
        job->startTime = g_key_file_get_uint64(kf, "engine", "start-time", NULL);
        job->allowance = g_key_file_get_uint64(kf, "engine", "allowance", NULL);
        job->domainDir.uuid = g_key_file_get_string(kf, "engine", "domain-dir", NULL);
        job->sourceLocator = vrmHelperJobLoadSource(kf);
        job->adopted = true;
    }
    return g_steal_pointer(&job);
}

gint
vrmHelperJobCompareId(gconstpointer a, gconstpointer b)
{
    const vrmHelperJob *ja = *(vrmHelperJob *const *)a;
    const vrmHelperJob *jb = *(vrmHelperJob *const *)b;

    return ja->record->id < jb->record->id ? -1 : ja->record->id > jb->record->id;
}

GPtrArray *
vrmHelperJobLoadDir(const char *dir)
{
    g_autoptr(GPtrArray) jobs = g_ptr_array_new_with_free_func((GDestroyNotify)vrmHelperJobFree);
    g_autoptr(GDir) d = NULL;
    g_autoptr(GError) err = NULL;
    const char *name;

    if (!(d = g_dir_open(dir, 0, &err))) {
        vrmReportError(VRM_ERR_SYSTEM, _("cannot read the state directory %1$s: %2$s"),
                       dir, err->message);
        return NULL;
    }
    while ((name = g_dir_read_name(d))) {
        vrmHelperJob *job;

        if (!g_str_has_prefix(name, "job-") || !g_str_has_suffix(name, ".xml"))
            continue;
        if (!(job = vrmHelperJobLoad(dir, name))) {
            /* one bad record must not stop the helper: log it and go on */
            VRM_WARN("ignoring the job record %s/%s: %s", dir, name,
                     vrmGetLastErrorMessage());
            continue;
        }
        g_ptr_array_add(jobs, job);
    }
    g_ptr_array_sort(jobs, vrmHelperJobCompareId);
    return g_steal_pointer(&jobs);
}
