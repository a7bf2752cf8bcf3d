/*
 * vrmclijobfmt.c: a migration job's statistics as text and JSON
 *
 * vrmJobLibvirtLines is virsh 9.0's domjobinfo as a table: one row per line
 * it may print, in its order, with the rule that decides whether the line
 * appears. tests/tools/vrmjobfmttest.c holds the table to the real virsh.
 */
#include <config.h>

#include <math.h>
#include <string.h>

#include <glib.h>

#include "virt-rdma.h"
#include "vrmclijobfmt.h"
#include "vrmclijson.h"
#include "vrmcapability.h"
#include "vrmjobstat.h"
#include "vrmi18n.h"
#include "vrmlog.h"

/* How a value is shown (virsh's printf formats). */
typedef enum {
    VRM_SHOW_MS,            /* "%-12llu ms" */
    VRM_SHOW_SIZE,          /* "%.3lf UNIT" */
    VRM_SHOW_RATE,          /* "%.3lf UNIT/s" */
    VRM_SHOW_COUNT,         /* "%-12llu" */
    VRM_SHOW_COUNT_WIDE,    /* "%-13llu" (compression and throttle lines) */
    VRM_SHOW_INT_WIDE,      /* "%-13d" */
    VRM_SHOW_PAGES_RATE,    /* "%-12llu pages/s" */
    VRM_SHOW_BYTES,         /* "%-12llu bytes" */
    VRM_SHOW_STRING,        /* "%-12s" */
} vrmShow;

/* When a line appears. A group is shown when one of its three amounts
 * (processed, remaining, total) is not zero; its amounts then show as 0
 * when absent. */
typedef enum {
    VRM_WHEN_ALWAYS,            /* 0 when absent */
    VRM_WHEN_BOUNDED,           /* only for a bounded job, 0 when absent */
    VRM_WHEN_PRESENT,
    VRM_WHEN_DATA,              /* the data group's amounts */
    VRM_WHEN_MEMORY,            /* the memory group's amounts */
    VRM_WHEN_MEMORY_PRESENT,    /* in the memory group, when present */
    VRM_WHEN_MEMORY_NONZERO,    /* in the memory group, when not zero */
    VRM_WHEN_FILE,              /* the file (disk) group's amounts */
    VRM_WHEN_FILE_NONZERO,
} vrmWhen;

typedef struct {
    const char *field;          /* libvirt's typed parameter */
    const char *label;          /* N_(); NULL: the downtime label by job type */
    vrmShow show;
    vrmWhen when;
} vrmJobLine;

/* message-style: exempt-begin: virsh's job labels and names, identical to virsh 9.0's */
static const vrmJobLine vrmJobLibvirtLines[] = {
    { VIR_DOMAIN_JOB_TIME_ELAPSED, N_("Time elapsed:"), VRM_SHOW_MS, VRM_WHEN_ALWAYS },
    { VIR_DOMAIN_JOB_TIME_ELAPSED_NET, N_("Time elapsed w/o network:"), VRM_SHOW_MS, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_TIME_REMAINING, N_("Time remaining:"), VRM_SHOW_MS, VRM_WHEN_BOUNDED },
    { VIR_DOMAIN_JOB_DATA_PROCESSED, N_("Data processed:"), VRM_SHOW_SIZE, VRM_WHEN_DATA },
    { VIR_DOMAIN_JOB_DATA_REMAINING, N_("Data remaining:"), VRM_SHOW_SIZE, VRM_WHEN_DATA },
    { VIR_DOMAIN_JOB_DATA_TOTAL, N_("Data total:"), VRM_SHOW_SIZE, VRM_WHEN_DATA },
    { VIR_DOMAIN_JOB_MEMORY_PROCESSED, N_("Memory processed:"), VRM_SHOW_SIZE, VRM_WHEN_MEMORY },
    { VIR_DOMAIN_JOB_MEMORY_REMAINING, N_("Memory remaining:"), VRM_SHOW_SIZE, VRM_WHEN_MEMORY },
    { VIR_DOMAIN_JOB_MEMORY_TOTAL, N_("Memory total:"), VRM_SHOW_SIZE, VRM_WHEN_MEMORY },
    { VIR_DOMAIN_JOB_MEMORY_BPS, N_("Memory bandwidth:"), VRM_SHOW_RATE, VRM_WHEN_MEMORY_NONZERO },
    { VIR_DOMAIN_JOB_MEMORY_DIRTY_RATE, N_("Dirty rate:"), VRM_SHOW_PAGES_RATE, VRM_WHEN_MEMORY_PRESENT },
    { VIR_DOMAIN_JOB_MEMORY_PAGE_SIZE, N_("Page size:"), VRM_SHOW_BYTES, VRM_WHEN_MEMORY_PRESENT },
    { VIR_DOMAIN_JOB_MEMORY_ITERATION, N_("Iteration:"), VRM_SHOW_COUNT, VRM_WHEN_MEMORY_PRESENT },
    { VIR_DOMAIN_JOB_MEMORY_POSTCOPY_REQS, N_("Postcopy requests:"), VRM_SHOW_COUNT, VRM_WHEN_MEMORY_PRESENT },
    { VIR_DOMAIN_JOB_DISK_PROCESSED, N_("File processed:"), VRM_SHOW_SIZE, VRM_WHEN_FILE },
    { VIR_DOMAIN_JOB_DISK_REMAINING, N_("File remaining:"), VRM_SHOW_SIZE, VRM_WHEN_FILE },
    { VIR_DOMAIN_JOB_DISK_TOTAL, N_("File total:"), VRM_SHOW_SIZE, VRM_WHEN_FILE },
    { VIR_DOMAIN_JOB_DISK_BPS, N_("File bandwidth:"), VRM_SHOW_RATE, VRM_WHEN_FILE_NONZERO },
    { VIR_DOMAIN_JOB_MEMORY_CONSTANT, N_("Constant pages:"), VRM_SHOW_COUNT, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_MEMORY_NORMAL, N_("Normal pages:"), VRM_SHOW_COUNT, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_MEMORY_NORMAL_BYTES, N_("Normal data:"), VRM_SHOW_SIZE, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_DOWNTIME, NULL, VRM_SHOW_MS, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_DOWNTIME_NET, N_("Downtime w/o network:"), VRM_SHOW_MS, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_SETUP_TIME, N_("Setup time:"), VRM_SHOW_MS, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_COMPRESSION_CACHE, N_("Compression cache:"), VRM_SHOW_SIZE, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_COMPRESSION_BYTES, N_("Compressed data:"), VRM_SHOW_SIZE, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_COMPRESSION_PAGES, N_("Compressed pages:"), VRM_SHOW_COUNT_WIDE, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_COMPRESSION_CACHE_MISSES, N_("Compression cache misses:"), VRM_SHOW_COUNT_WIDE, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_COMPRESSION_OVERFLOW, N_("Compression overflows:"), VRM_SHOW_COUNT_WIDE, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_AUTO_CONVERGE_THROTTLE, N_("Auto converge throttle:"), VRM_SHOW_INT_WIDE, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_DISK_TEMP_USED, N_("Temporary disk space use:"), VRM_SHOW_SIZE, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_DISK_TEMP_TOTAL, N_("Temporary disk space total:"), VRM_SHOW_SIZE, VRM_WHEN_PRESENT },
    { VIR_DOMAIN_JOB_ERRMSG, N_("Error message:"), VRM_SHOW_STRING, VRM_WHEN_PRESENT },
};

/* virsh's names of job types and operations (its translations' msgids) */
static const char *const vrmJobTypeNames[] = {
    N_("None"), N_("Bounded"), N_("Unbounded"), N_("Completed"),
    N_("Failed"), N_("Cancelled"),
};
G_STATIC_ASSERT(G_N_ELEMENTS(vrmJobTypeNames) == VIR_DOMAIN_JOB_CANCELLED + 1);

static const char *const vrmJobOperationNames[] = {
    N_("Unknown"), N_("Start"), N_("Save"), N_("Restore"),
    N_("Incoming migration"), N_("Outgoing migration"), N_("Snapshot"),
    N_("Snapshot revert"), N_("Dump"), N_("Backup"), N_("Snapshot delete"),
};
/* message-style: exempt-end */

double
vrmJobFormatPrettySize(unsigned long long bytes, const char **unit)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    double v = bytes;
    size_t u = 0;

    while (u + 1 < G_N_ELEMENTS(units) && bytes >= (1ull << (10 * (u + 1)))) {
        v /= 1024;
        u++;
    }
    *unit = units[u];
    return v;
}

static bool
vrmJobGetULLong(virTypedParameterPtr params, int nparams, const char *field,
                unsigned long long *value)
{
    *value = 0;
    return virTypedParamsGetULLong(params, nparams, field, value) == 1;
}

static void
vrmJobAppendLine(GString *out, const vrmJobLine *line, const char *label,
                 virTypedParameterPtr params, int nparams)
{
    unsigned long long v = 0;
    const char *unit;
    const char *str = NULL;
    int i = 0;
    double d;

    switch (line->show) {
    case VRM_SHOW_STRING:
        virTypedParamsGetString(params, nparams, line->field, &str);
        g_string_append_printf(out, "%-17s %-12s\n", label, str ? str : "");
        return;
    case VRM_SHOW_INT_WIDE:
        virTypedParamsGetInt(params, nparams, line->field, &i);
        g_string_append_printf(out, "%-17s %-13d\n", label, i);
        return;
    case VRM_SHOW_MS:
    case VRM_SHOW_SIZE:
    case VRM_SHOW_RATE:
    case VRM_SHOW_COUNT:
    case VRM_SHOW_COUNT_WIDE:
    case VRM_SHOW_PAGES_RATE:
    case VRM_SHOW_BYTES:
        break;
    }
    vrmJobGetULLong(params, nparams, line->field, &v);
    switch (line->show) {
    case VRM_SHOW_MS:
        g_string_append_printf(out, "%-17s %-12llu ms\n", label, v);
        break;
    case VRM_SHOW_SIZE:
        d = vrmJobFormatPrettySize(v, &unit);
        g_string_append_printf(out, "%-17s %-.3lf %s\n", label, d, unit);
        break;
    case VRM_SHOW_RATE:
        d = vrmJobFormatPrettySize(v, &unit);
        g_string_append_printf(out, "%-17s %-.3lf %s/s\n", label, d, unit);
        break;
    case VRM_SHOW_COUNT:
        g_string_append_printf(out, "%-17s %-12llu\n", label, v);
        break;
    case VRM_SHOW_COUNT_WIDE:
        g_string_append_printf(out, "%-17s %-13llu\n", label, v);
        break;
    case VRM_SHOW_PAGES_RATE:
        g_string_append_printf(out, "%-17s %-12llu pages/s\n", label, v);
        break;
    case VRM_SHOW_BYTES:
        g_string_append_printf(out, "%-17s %-12llu bytes\n", label, v);
        break;
    case VRM_SHOW_STRING:
    case VRM_SHOW_INT_WIDE:
        break;
    }
}

/* Is one of the group's processed/remaining/total amounts not zero? */
static bool
vrmJobGroupShown(virTypedParameterPtr params, int nparams,
                 const char *processed, const char *remaining, const char *total)
{
    unsigned long long a, b, c;

    vrmJobGetULLong(params, nparams, processed, &a);
    vrmJobGetULLong(params, nparams, remaining, &b);
    vrmJobGetULLong(params, nparams, total, &c);
    return a || b || c;
}

static bool
vrmJobLineShown(const vrmJobLine *line, int type, bool dataShown,
                bool memoryShown, bool fileShown,
                virTypedParameterPtr params, int nparams)
{
    bool present = virTypedParamsGet(params, nparams, line->field) != NULL;
    unsigned long long v = 0;

    switch (line->when) {
    case VRM_WHEN_ALWAYS:
        return true;
    case VRM_WHEN_BOUNDED:
        return type == VIR_DOMAIN_JOB_BOUNDED;
    case VRM_WHEN_PRESENT:
        return present;
    case VRM_WHEN_DATA:
        return dataShown;
    case VRM_WHEN_MEMORY:
        return memoryShown;
    case VRM_WHEN_MEMORY_PRESENT:
        return memoryShown && present;
    case VRM_WHEN_MEMORY_NONZERO:
        return memoryShown && vrmJobGetULLong(params, nparams, line->field, &v) && v;
    case VRM_WHEN_FILE:
        return fileShown;
    case VRM_WHEN_FILE_NONZERO:
        return fileShown && vrmJobGetULLong(params, nparams, line->field, &v) && v;
    }
    return false;
}

char *
vrmJobFormatLibvirt(int type, virTypedParameterPtr params, int nparams,
                    bool completed, bool anystats)
{
    GString *out = g_string_new(NULL);
    const char *name = type >= 0 && (size_t)type < G_N_ELEMENTS(vrmJobTypeNames) ?
        _(vrmJobTypeNames[type]) : _("unknown");
    int op = 0;
    bool dataShown, memoryShown, fileShown;
    size_t i;

    /* message-style: exempt-begin: virsh's labels */
    g_string_append_printf(out, "%-17s %-12s\n", _("Job type:"), name);
    if (type == VIR_DOMAIN_JOB_NONE)
        return g_string_free(out, FALSE);

    virTypedParamsGetInt(params, nparams, VIR_DOMAIN_JOB_OPERATION, &op);
    g_string_append_printf(out, "%-17s %-12s\n", _("Operation:"),
                           op >= 0 && (size_t)op < G_N_ELEMENTS(vrmJobOperationNames) ?
                           _(vrmJobOperationNames[op]) : _("unknown"));
    /* message-style: exempt-end */

    /* virsh shows the statistics of a running job, of a completed one when
     * asked for completed jobs, and of any other with --anystats */
    if (!anystats && type != VIR_DOMAIN_JOB_BOUNDED &&
        type != VIR_DOMAIN_JOB_UNBOUNDED &&
        !(completed && type == VIR_DOMAIN_JOB_COMPLETED))
        return g_string_free(out, FALSE);

    dataShown = vrmJobGroupShown(params, nparams, VIR_DOMAIN_JOB_DATA_PROCESSED,
                                 VIR_DOMAIN_JOB_DATA_REMAINING, VIR_DOMAIN_JOB_DATA_TOTAL);
    memoryShown = vrmJobGroupShown(params, nparams, VIR_DOMAIN_JOB_MEMORY_PROCESSED,
                                   VIR_DOMAIN_JOB_MEMORY_REMAINING, VIR_DOMAIN_JOB_MEMORY_TOTAL);
    fileShown = vrmJobGroupShown(params, nparams, VIR_DOMAIN_JOB_DISK_PROCESSED,
                                 VIR_DOMAIN_JOB_DISK_REMAINING, VIR_DOMAIN_JOB_DISK_TOTAL);
    for (i = 0; i < G_N_ELEMENTS(vrmJobLibvirtLines); i++) {
        const vrmJobLine *line = &vrmJobLibvirtLines[i];
        const char *label;

        if (!vrmJobLineShown(line, type, dataShown, memoryShown, fileShown,
                             params, nparams))
            continue;
        /* message-style: exempt-begin: virsh's labels */
        if (line->label)
            label = _(line->label);
        else if (type == VIR_DOMAIN_JOB_COMPLETED)
            label = _("Total downtime:");
        else
            label = _("Expected downtime:");
        /* message-style: exempt-end */
        vrmJobAppendLine(out, line, label, params, nparams);
    }
    return g_string_free(out, FALSE);
}

/* virTypedParameterToString's forms, as virsh --rawstats shows them */
static char *
vrmJobParamToString(const virTypedParameter *p)
{
    switch (p->type) {
    case VIR_TYPED_PARAM_INT:
        return g_strdup_printf("%d", p->value.i);
    case VIR_TYPED_PARAM_UINT:
        return g_strdup_printf("%u", p->value.ui);
    case VIR_TYPED_PARAM_LLONG:
        return g_strdup_printf("%lld", p->value.l);
    case VIR_TYPED_PARAM_ULLONG:
        return g_strdup_printf("%llu", p->value.ul);
    case VIR_TYPED_PARAM_DOUBLE:
        return g_strdup_printf("%g", p->value.d);
    case VIR_TYPED_PARAM_BOOLEAN:
        return g_strdup_printf("%d", p->value.b);
    case VIR_TYPED_PARAM_STRING:
        return g_strdup(p->value.s);
    default:
        break;
    }
    return g_strdup("");
}

char *
vrmJobFormatRaw(int type, virTypedParameterPtr params, int nparams)
{
    GString *out = g_string_new(NULL);
    int i;

    /* message-style: exempt-begin: virsh's label */
    g_string_append_printf(out, "%s %d\n\n", _("Job type:"), type);
    /* message-style: exempt-end */
    for (i = 0; i < nparams; i++) {
        g_autofree char *value = vrmJobParamToString(&params[i]);

        g_string_append_printf(out, "%s: %s\n", params[i].field, value);
    }
    return g_string_free(out, FALSE);
}

/* A number whatever its integer type */
static bool
vrmJobParamNumber(virTypedParameterPtr params, int nparams, const char *field,
                  unsigned long long *value)
{
    virTypedParameterPtr p = virTypedParamsGet(params, nparams, field);

    if (!p)
        return false;
    switch (p->type) {
    case VIR_TYPED_PARAM_UINT:
        *value = p->value.ui;
        return true;
    case VIR_TYPED_PARAM_ULLONG:
        *value = p->value.ul;
        return true;
    default:
        break;
    }
    return false;
}

/* One line of a number, as its kind says; the unit is named in every line */
static void
vrmJobFormatRDMANumber(GString *out, const char *label, vrmJobStatKind kind,
                       unsigned long long v)
{
    g_autofree char *names = NULL;
    const char *unit;
    double d;

    switch (kind) {
    case VRM_JOB_STAT_SIZE:
        d = vrmJobFormatPrettySize(v, &unit);
        g_string_append_printf(out, "%-17s %-.3lf %s\n", label, d, unit);
        return;
    case VRM_JOB_STAT_COUNT:
    case VRM_JOB_STAT_CHANNELS:
        g_string_append_printf(out, "%-17s %-12llu\n", label, v);
        return;
    case VRM_JOB_STAT_MBPS:
        g_string_append_printf(out, "%-17s %-12llu Mbit/s\n", label, v);
        return;
    case VRM_JOB_STAT_NS:
        g_string_append_printf(out, "%-17s %-12llu ms\n", label, v / 1000000);
        return;
    case VRM_JOB_STAT_CAPS:
        names = vrmCapabilityFormat((guint32)v);
        g_string_append_printf(out, "%-17s %s\n", label, names);
        return;
    case VRM_JOB_STAT_KIND_LAST:
        break;
    }
}

/* Our lines: the job, the one it recovers, each statistic of the table
 * (xml/vrmjobstat.c) the helper sent, the error */
char *
vrmJobFormatRDMA(virTypedParameterPtr params, int nparams)
{
    GString *out = g_string_new(NULL);
    unsigned long long id;
    unsigned long long v;
    const char *state = NULL;
    const char *text;
    size_t i;

    if (!vrmJobParamNumber(params, nparams, VRM_JOB_STATS_ID, &id)) {
        g_string_append_printf(out, "%-17s %s\n", _("RDMA:"),
                               _("no job of this domain is known to virt-rdmad"));
        return g_string_free(out, FALSE);
    }
    virTypedParamsGetString(params, nparams, VRM_JOB_STATS_STATE, &state);
    g_string_append_printf(out, "%-17s %llu (%s)\n", _("RDMA job:"), id,
                           state ? state : "?");
    if (vrmJobParamNumber(params, nparams, VRM_JOB_STATS_RECOVERY_OF, &v))
        vrmJobFormatRDMANumber(out, _("RDMA recovers job:"), VRM_JOB_STAT_COUNT, v);
    for (i = 0; i < vrmJobStatCount(); i++) {
        const vrmJobStatInfo *row = vrmJobStatGet(i);
        g_autofree char *field = g_strconcat(VRM_PARAM_PREFIX, row->name, NULL);

        if (vrmJobParamNumber(params, nparams, field, &v))
            vrmJobFormatRDMANumber(out, _(row->label), row->kind, v);
    }
    if (virTypedParamsGetString(params, nparams, VRM_JOB_STATS_ERROR, &text) == 1) {
        g_autofree char *safe = vrmLogSanitize(text);

        g_string_append_printf(out, "%-17s %s\n", _("RDMA error:"), safe);
    }
    return g_string_free(out, FALSE);
}

/* One typed parameter as a member of the object being built */
static void
vrmJSONParam(JsonBuilder *b, const char *key, const virTypedParameter *p)
{
    switch (p->type) {
    case VIR_TYPED_PARAM_INT:
        vrmCliJsonInt(b, key, p->value.i);
        return;
    case VIR_TYPED_PARAM_UINT:
        vrmCliJsonUInt(b, key, p->value.ui);
        return;
    case VIR_TYPED_PARAM_LLONG:
        vrmCliJsonInt(b, key, p->value.l);
        return;
    case VIR_TYPED_PARAM_ULLONG:
        vrmCliJsonUInt(b, key, p->value.ul);
        return;
    case VIR_TYPED_PARAM_DOUBLE:
        /* JSON has no NaN or infinity */
        json_builder_set_member_name(b, key);
        if (isfinite(p->value.d))
            json_builder_add_double_value(b, p->value.d);
        else
            json_builder_add_null_value(b);
        return;
    case VIR_TYPED_PARAM_BOOLEAN:
        vrmCliJsonBool(b, key, p->value.b);
        return;
    case VIR_TYPED_PARAM_STRING:
        vrmCliJsonString(b, key, p->value.s);
        return;
    default:
        break;
    }
    vrmCliJsonNull(b, key);
}

/*
 * {"format-version": 1, "type": "completed", "operation": "outgoing-migration",
 *  "libvirt": {libvirt's typed parameters by field name},
 *  "rdma": {ours, without the VRM_PARAM_PREFIX}}
 * Names are stable (not translated); values keep their types.
 */
char *
vrmJobFormatJSON(int type, virTypedParameterPtr params, int nparams)
{
    static const char *const types[] = {
        "none", "bounded", "unbounded", "completed", "failed", "cancelled",
    };
    static const char *const operations[] = {
        "unknown", "start", "save", "restore", "incoming-migration",
        "outgoing-migration", "snapshot", "snapshot-revert", "dump",
        "backup", "snapshot-delete",
    };
    JsonBuilder *b = vrmCliJsonNew();
    int op = 0;
    int pass, i;

    vrmCliJsonString(b, "type", type >= 0 && (size_t)type < G_N_ELEMENTS(types) ?
                     types[type] : "unknown");
    virTypedParamsGetInt(params, nparams, VIR_DOMAIN_JOB_OPERATION, &op);
    vrmCliJsonString(b, "operation", op >= 0 && (size_t)op < G_N_ELEMENTS(operations) ?
                     operations[op] : "unknown");
    for (pass = 0; pass < 2; pass++) {
        json_builder_set_member_name(b, pass == 0 ? "libvirt" : "rdma");
        json_builder_begin_object(b);
        for (i = 0; i < nparams; i++) {
            const char *field = params[i].field;
            bool ours = g_str_has_prefix(field, VRM_PARAM_PREFIX);

            if (ours != (pass == 1) || g_str_equal(field, VIR_DOMAIN_JOB_OPERATION))
                continue;
            vrmJSONParam(b, ours ? field + strlen(VRM_PARAM_PREFIX) : field, &params[i]);
        }
        json_builder_end_object(b);
    }
    return vrmCliJsonFinish(b);
}
