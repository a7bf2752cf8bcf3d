/*
 * vrmclijobs.c: virt-rdma jobs [--all] [--json]
 *
 * The RDMA jobs of this host that the caller may see (root and the helper's
 * own user: all; a member of the access group: its own), as virt-rdmad
 * lists them: running ones, and with --all the finished ones it keeps
 * ([history] size). One line each, like `virsh list`; or one JSON object.
 */
#include <config.h>

#include <stdio.h>

#include "vrmcli.h"
#include "vrmclijobfmt.h"
#include "vrmcontrol.h"
#include "vrmerror.h"
#include "vrmhelperclient.h"
#include "vrmi18n.h"
#include "vrmlog.h"

#define VRM_JOBS_HELPER_TIMEOUT_MS 10000

/* The other end: the destination's locator for an outgoing job, the
 * source engine's address for an incoming one; NULL if not known yet */
const char *
vrmCliJobPeer(const vrmJobRecord *rec)
{
    if (!rec->migration)
        return NULL;
    if (rec->role == VRM_JOB_ROLE_SOURCE)
        return rec->migration->locator ? rec->migration->locator->host : NULL;
    return rec->migration->offer ? rec->migration->offer->address : NULL;
}

const char *
vrmCliJobDirection(const vrmJobRecord *rec)
{
    return rec->role == VRM_JOB_ROLE_SOURCE ? "out" : "in";
}

static unsigned long long
vrmJobsBytes(const vrmJobRecord *rec)
{
    if (!rec->hasStats)
        return 0;
    return rec->role == VRM_JOB_ROLE_SOURCE ? rec->stats.bytesSent : rec->stats.bytesReceived;
}

void
vrmCliJobFormatJSON(JsonBuilder *b, const vrmJobRecord *rec)
{
    json_builder_begin_object(b);
    vrmCliJsonUInt(b, "id", rec->id);
    vrmCliJsonString(b, "domain", rec->domainName);
    vrmCliJsonString(b, "uuid", rec->domainUUID);
    vrmCliJsonString(b, "direction", vrmCliJobDirection(rec));
    vrmCliJsonString(b, "peer", vrmCliJobPeer(rec));
    vrmCliJsonString(b, "state", vrmJobStateTypeToString(rec->state));
    vrmCliJsonBool(b, "final", vrmJobStateIsFinal(rec->state));
    if (rec->hasStats) {
        vrmCliJsonUInt(b, "bytes", vrmJobsBytes(rec));
        vrmCliJsonUInt(b, "mbps", rec->stats.mbps);
        vrmCliJsonUInt(b, "channels", rec->stats.channels);
    } else {
        vrmCliJsonNull(b, "bytes");
        vrmCliJsonNull(b, "mbps");
        vrmCliJsonNull(b, "channels");
    }
    vrmCliJsonReason(b, "reason", vrmErrorCodeTypeToString(rec->errorCode), rec->error);
    json_builder_end_object(b);
}

static char *
vrmJobsFormatJSON(GPtrArray *recs)
{
    JsonBuilder *b = vrmCliJsonNew();
    guint i;

    json_builder_set_member_name(b, "jobs");
    json_builder_begin_array(b);
    for (i = 0; i < recs->len; i++)
        vrmCliJobFormatJSON(b, recs->pdata[i]);
    json_builder_end_array(b);
    return vrmCliJsonFinish(b);
}

/* A column of the table: its heading and each row's cell */
typedef struct {
    const char *heading;
    char **cells;
    int width;
} vrmJobsColumn;

static char *
vrmJobsFormatText(GPtrArray *recs)
{
    enum { ID, DOMAIN, DIRECTION, PEER, STATE, BYTES, RATE, CAUSE, NCOLS };
    /* message-style: exempt-begin: column headings, as virsh list has them */
    vrmJobsColumn cols[NCOLS] = {
        [ID] = { N_("Id"), NULL, 0 },
        [DOMAIN] = { N_("Domain"), NULL, 0 },
        [DIRECTION] = { N_("Direction"), NULL, 0 },
        [PEER] = { N_("Peer"), NULL, 0 },
        [STATE] = { N_("State"), NULL, 0 },
        [BYTES] = { N_("Bytes"), NULL, 0 },
        [RATE] = { N_("Mbit/s"), NULL, 0 },
        [CAUSE] = { N_("Cause"), NULL, 0 },
    };
    /* message-style: exempt-end */
    GString *out = g_string_new(NULL);
    int total = 0;
    guint i;
    int c;

    for (c = 0; c < NCOLS; c++) {
        cols[c].cells = g_new0(char *, recs->len + 1);
        cols[c].width = g_utf8_strlen(_(cols[c].heading), -1);
    }
    for (i = 0; i < recs->len; i++) {
        const vrmJobRecord *rec = recs->pdata[i];
        const char *peer = vrmCliJobPeer(rec);

        cols[ID].cells[i] = g_strdup_printf("%llu", rec->id);
        cols[DOMAIN].cells[i] = vrmLogSanitize(rec->domainName ? rec->domainName : "-");
        cols[DIRECTION].cells[i] = g_strdup(vrmCliJobDirection(rec));
        cols[PEER].cells[i] = vrmLogSanitize(peer ? peer : "-");
        cols[STATE].cells[i] = g_strdup(vrmJobStateTypeToString(rec->state));
        cols[BYTES].cells[i] = rec->hasStats ? vrmCliPrettySize(vrmJobsBytes(rec)) : g_strdup("-");
        cols[RATE].cells[i] = rec->hasStats ? g_strdup_printf("%u", rec->stats.mbps) : g_strdup("-");
        cols[CAUSE].cells[i] = vrmLogSanitize(rec->error ? rec->error : "");
        for (c = 0; c < NCOLS; c++)
            cols[c].width = MAX(cols[c].width, (int)g_utf8_strlen(cols[c].cells[i], -1));
    }
    /* like virsh list: a space, the columns three apart, a rule */
    for (c = 0; c < NCOLS; c++) {
        const char *h = _(cols[c].heading);

        g_string_append_printf(out, " %s%*s", h,
                               c == NCOLS - 1 ? 0 : cols[c].width - (int)g_utf8_strlen(h, -1) + 2, "");
        /* the rule ends with the last heading, not with the longest cause */
        total += c == NCOLS - 1 ? (int)g_utf8_strlen(h, -1) + 1 : cols[c].width + 3;
    }
    g_string_append_c(out, '\n');
    for (c = 0; c < total; c++)
        g_string_append_c(out, '-');
    g_string_append_c(out, '\n');
    for (i = 0; i < recs->len; i++) {
        for (c = 0; c < NCOLS; c++) {
            const char *cell = cols[c].cells[i];

            g_string_append_printf(out, " %s%*s", cell,
                                   c == NCOLS - 1 ? 0 : cols[c].width - (int)g_utf8_strlen(cell, -1) + 2, "");
        }
        /* no trailing blanks when the cause is empty */
        while (out->len && out->str[out->len - 1] == ' ')
            g_string_truncate(out, out->len - 1);
        g_string_append_c(out, '\n');
    }
    for (c = 0; c < NCOLS; c++)
        g_strfreev(cols[c].cells);
    return g_string_free(out, FALSE);
}

int
vrmCmdJobs(int argc, char **argv)
{
    gboolean all = FALSE;
    gboolean json = FALSE;
    GOptionEntry entries[] = {
        { "all", 'a', 0, G_OPTION_ARG_NONE, &all,
          N_("also the finished jobs virt-rdmad keeps ([history] size)"), NULL },
        { "json", 0, 0, G_OPTION_ARG_NONE, &json,
          N_("print one JSON object (keys in virt-rdma(1))"), NULL },
        { NULL, 0, 0, 0, NULL, NULL, NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(_("- list the RDMA migration jobs of this host"));
    g_autoptr(vrmControlMessage) reply = NULL;
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_LIST);
    g_autoptr(GPtrArray) shown = g_ptr_array_new();
    g_autofree char *path = NULL;
    g_autofree char *text = NULL;
    guint i;

    g_option_context_add_main_entries(ctx, entries, GETTEXT_PACKAGE);
    /* message-style: exempt-begin: help text (GLib's --help conventions) */
    g_option_context_set_summary(ctx,
        _("The jobs you may see (root: all; a member of virt-rdmad's access group: its\n"
          "own), oldest first: running ones, and with --all the finished ones too."));
    /* message-style: exempt-end */
    if (!vrmCliParseOptions(ctx, NULL, &argc, &argv))
        return 2;
    if (argc != 1) {
        vrmCliError(_("jobs takes no argument, e.g. 'virt-rdma jobs --all'"));
        return 2;
    }
    path = vrmHelperSocketPath();
    if (!(reply = vrmHelperClientCall(path, req, VRM_JOBS_HELPER_TIMEOUT_MS)) ||
        vrmHelperReplyCheck(reply) < 0) {
        vrmCliError("%s", vrmGetLastErrorMessage());
        return 1;
    }
    for (i = 0; i < reply->jobs->len; i++) {
        vrmJobRecord *rec = reply->jobs->pdata[i];

        if (all || !vrmJobStateIsFinal(rec->state))
            g_ptr_array_add(shown, rec);
    }
    text = json ? vrmJobsFormatJSON(shown) : vrmJobsFormatText(shown);
    fputs(text, stdout);
    return 0;
}
