/*
 * vrmhelperjob.c: job state machine, engine stats, job records on disk
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vrmhelperjob.h"
#include "vrmhelperengine.h"
#include "vrmhelperpeer.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

VRM_ENUM_IMPL(vrmEngineState, VRM_ENGINE_STATE_LAST,
              "running",
              "completed",
              "failed",
);

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
    job->qemuUid = job->qemuPid = -1;
    return job;
}

void
vrmHelperJobFree(vrmHelperJob *job)
{
    if (!job)
        return;
    if (job->childWatch)
        g_source_remove(job->childWatch);
    if (job->pid > 0 && !job->adopted)
        g_spawn_close_pid(job->pid);
    if (job->phaseTimer)
        g_source_remove(job->phaseTimer);
    if (job->outcomeTimer)
        g_source_remove(job->outcomeTimer);
    vrmStatsProbeCancel(job->probe);
    vrmPeerConnFree(job->peer);
    vrmTokenClear(&job->token);
    vrmDomainDirClear(&job->domainDir);
    vrmJobRecordFree(job->record);
    g_free(job->statsSocket);
    g_free(job->statsFile);
    g_free(job->logFile);
    g_string_free(job->stderrBuf, TRUE);
    g_free(job);
}

bool
vrmJobStateIsFinal(vrmJobState state)
{
    return state == VRM_JOB_STATE_COMPLETED ||
        state == VRM_JOB_STATE_FAILED ||
        state == VRM_JOB_STATE_CANCELLED;
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

int
vrmHelperJobSetState(vrmHelperJob *job, vrmJobState state, const char *error)
{
    vrmJobRecord *r = job->record;

    if (r->state == state)
        return 0;
    if (!vrmJobStateCanChange(r->state, state)) {
        vrmReportError(VRM_ERR_INTERNAL,
                       _("Job %1$llu cannot go from state '%2$s' to '%3$s'."),
                       r->id, vrmJobStateTypeToString(r->state),
                       vrmJobStateTypeToString(state));
        return -1;
    }
    VRM_INFO("job %llu: %s -> %s%s%s", r->id,
             vrmJobStateTypeToString(r->state), vrmJobStateTypeToString(state),
             error ? ": " : "", error ? error : "");
    r->state = state;
    if (state == VRM_JOB_STATE_FAILED || state == VRM_JOB_STATE_CANCELLED) {
        g_free(r->error);
        r->error = g_strdup(error);
    }
    return 0;
}

/* ---- the engine's stats JSON ---------------------------------------- */

/*
 * A deliberately small reader for the one flat-ish object the engine
 * writes: find `"key":` between @start and @end and read the value after
 * it. Keys are looked up at the level the caller points to: the top-level
 * keys come before "per_channel", the totals inside "total".
 */
static const char *
vrmJSONFindKey(const char *start, const char *end, const char *key)
{
    g_autofree char *pat = g_strdup_printf("\"%s\"", key);
    size_t plen = strlen(pat);
    const char *p = start;

    while (p && p + plen <= end) {
        const char *hit = g_strstr_len(p, end - p, pat);

        if (!hit)
            return NULL;
        p = hit + plen;
        while (p < end && g_ascii_isspace(*p))
            p++;
        if (p < end && *p == ':') {
            p++;
            while (p < end && g_ascii_isspace(*p))
                p++;
            return p;
        }
    }
    return NULL;
}

static int
vrmJSONGetNumber(const char *start, const char *end, const char *key,
                 double *out)
{
    const char *v = vrmJSONFindKey(start, end, key);
    char *stop = NULL;

    if (!v)
        return -1;
    *out = g_ascii_strtod(v, &stop);
    if (stop == v || *out < 0)
        return -1;
    return 0;
}

static int
vrmJSONGetULL(const char *start, const char *end, const char *key,
              unsigned long long *out)
{
    const char *v = vrmJSONFindKey(start, end, key);
    char *stop = NULL;

    if (!v || !g_ascii_isdigit(*v))
        return -1;
    *out = g_ascii_strtoull(v, &stop, 10);
    return 0;
}

/* A JSON string value, unescaped; *out NULL for null */
static int
vrmJSONGetString(const char *start, const char *end, const char *key,
                 char **out)
{
    const char *v = vrmJSONFindKey(start, end, key);
    g_autoptr(GString) s = NULL;

    *out = NULL;
    if (!v)
        return -1;
    if (v + 4 <= end && strncmp(v, "null", 4) == 0)
        return 0;
    if (*v != '"')
        return -1;
    s = g_string_new(NULL);
    for (v++; v < end && *v != '"'; v++) {
        if (*v == '\\' && v + 1 < end) {
            v++;
            switch (*v) {
            case 'n': g_string_append_c(s, '\n'); break;
            case 't': g_string_append_c(s, '\t'); break;
            case 'r': g_string_append_c(s, '\r'); break;
            case 'u':
                /* control characters only: keep a placeholder */
                g_string_append_c(s, '?');
                v += MIN(4, end - v - 1);
                break;
            default: g_string_append_c(s, *v); break;
            }
        } else {
            g_string_append_c(s, *v);
        }
    }
    if (v >= end)
        return -1;
    *out = g_string_free(g_steal_pointer(&s), FALSE);
    return 0;
}

int
vrmHelperEngineStatsParse(const char *json, vrmEngineSnapshot *es)
{
    const char *end, *top_end, *total;
    g_autofree char *state = NULL;
    unsigned long long v;
    double d, user, sys;
    int st;

    memset(es, 0, sizeof(*es));
    if (!json || *json != '{')
        goto bad;
    end = json + strlen(json);
    if (!(top_end = strstr(json, "\"per_channel\"")))
        top_end = end;
    if (!(total = strstr(json, "\"total\"")))
        goto bad;

    if (vrmJSONGetString(json, top_end, "state", &state) < 0 || !state ||
        (st = vrmEngineStateTypeFromString(state)) < 0)
        goto bad;
    es->state = st;
    if (vrmJSONGetString(json, top_end, "error", &es->error) < 0)
        goto bad;
    if (vrmJSONGetULL(json, top_end, "channels", &v) < 0)
        goto bad;
    es->channels = v;
    if (vrmJSONGetULL(json, top_end, "channels_established", &v) < 0)
        goto bad;
    es->established = v;
    if (vrmJSONGetULL(json, top_end, "qemu_connections", &v) < 0)
        goto bad;
    es->qemuConnections = v;

    if (vrmJSONGetULL(total, end, "bytes_sent", &es->stats.bytesSent) < 0 ||
        vrmJSONGetULL(total, end, "bytes_received", &es->stats.bytesReceived) < 0 ||
        vrmJSONGetULL(total, end, "chunks_written", &es->stats.chunks) < 0 ||
        vrmJSONGetULL(total, end, "pinned_bytes", &es->stats.pinnedBytes) < 0 ||
        vrmJSONGetULL(total, end, "registration_us", &v) < 0)
        goto bad;
    es->stats.registrationNs = v * 1000;
    if (es->state == VRM_ENGINE_STATE_RUNNING) {
        if (vrmJSONGetNumber(total, end, "mbps_current", &d) < 0)
            goto bad;
    } else if (vrmJSONGetNumber(total, end, "mbps_average", &d) < 0) {
        goto bad;
    }
    es->stats.mbps = (unsigned int)MIN(d + 0.5, (double)G_MAXUINT);
    es->stats.channels = es->qemuConnections;
    /* the engine's own CPU time (optional: older engines do not write
     * it); a value no process reaches (or NaN) is dropped, not converted */
    if (vrmJSONGetNumber(json, top_end, "cpu_user_s", &user) == 0 &&
        vrmJSONGetNumber(json, top_end, "cpu_system_s", &sys) == 0 &&
        user + sys < 1e9) {
        es->stats.cpuNs = (unsigned long long)((user + sys) * 1e9 + 0.5);
        es->stats.hasCpu = true;
    }
    return 0;

 bad:
    vrmEngineSnapshotClear(es);
    vrmReportError(VRM_ERR_PROTOCOL,
                   _("The engine's stats are not in the expected JSON form."));
    return -1;
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

    if (vrmJobStateIsFinal(r->state))
        return;
    if (es->qemuConnections > 0)
        vrmHelperJobSetState(job, VRM_JOB_STATE_TRANSFERRING, NULL);
    else if (es->channels > 0 && es->established >= es->channels)
        vrmHelperJobSetState(job, VRM_JOB_STATE_CONNECTED, NULL);
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
vrmHelperJobEngineError(const vrmHelperJob *job)
{
    g_auto(GStrv) lines = g_strsplit(job->stderrBuf->str, "\n", -1);
    ssize_t i;

    /* the engine's one error line: "virt-rdma-engine: error: REASON";
     * its log lines (info, debug) are not reasons */
    for (i = (ssize_t)g_strv_length(lines) - 1; i >= 0; i--) {
        const char *err = strstr(lines[i], "error: ");

        if (!err || !strstr(lines[i], "virt-rdma-engine"))
            continue;
        err += strlen("error: ");
        if (*err)
            return g_strstrip(g_strdup(err));
    }
    return NULL;
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
        vrmReportError(VRM_ERR_SYSTEM, _("Cannot write the job record %1$s: %2$s"),
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
        data = g_key_file_to_data(kf, &len, NULL);
        if (!g_file_set_contents_full(runPath, data, len,
                                      G_FILE_SET_CONTENTS_CONSISTENT, 0600, &err)) {
            vrmReportError(VRM_ERR_SYSTEM, _("Cannot write the job record %1$s: %2$s"),
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
        job->adopted = true;
    }
    return g_steal_pointer(&job);
}

static gint
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
        vrmReportError(VRM_ERR_SYSTEM, _("Cannot read the state directory %1$s: %2$s"),
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
