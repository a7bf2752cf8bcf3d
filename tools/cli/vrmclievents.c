/*
 * vrmclievents.c: virt-rdma events [--loop] [--timeout SECONDS] [--json]
 *
 * Job events as they happen, like `virsh event`: the caller subscribes on
 * virt-rdmad's control socket (<job-events/>) and the helper pushes the
 * record of each job the caller may see (root: all; a member of the access
 * group: its own) every time its state changes: negotiating, connected,
 * transferring, then how it ended. Without --loop the first event ends the
 * command, as in virsh; --timeout ends the wait.
 */
#include <config.h>

#include <stdio.h>
#include <unistd.h>

#include "vrmcli.h"
#include "vrmcontrol.h"
#include "vrmerror.h"
#include "vrmhelperclient.h"
#include "vrmi18n.h"
#include "vrmlog.h"

#define VRM_EVENTS_SUBSCRIBE_TIMEOUT_MS 10000
/* --timeout: at most a day, as the deadline arithmetic wants */
#define VRM_EVENTS_TIMEOUT_MAX (24 * 3600)

static void
vrmEventsPrintJSON(const vrmJobRecord *rec)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();
    g_autofree char *when = g_date_time_format_iso8601(now);
    JsonBuilder *b = vrmCliJsonNew();
    g_autofree char *text = NULL;

    vrmCliJsonString(b, "event", "job-state");
    vrmCliJsonString(b, "time", when);
    json_builder_set_member_name(b, "job");
    vrmCliJobFormatJSON(b, rec);
    text = vrmCliJsonFinish(b);
    fputs(text, stdout);
}

static void
vrmEventsPrintText(const vrmJobRecord *rec)
{
    g_autofree char *domain = vrmLogSanitize(rec->domainName ? rec->domainName : "-");
    g_autofree char *peer = vrmLogSanitize(vrmCliJobPeer(rec) ? vrmCliJobPeer(rec) : "-");
    g_autofree char *cause = rec->error ? vrmLogSanitize(rec->error) : NULL;

    /* like virsh: "event 'lifecycle' for domain 'web1': Started Booted" */
    if (cause)
        printf(_("event 'job-state' for domain '%1$s': job %2$llu %3$s (%4$s): %5$s: %6$s\n"),
               domain, rec->id, vrmCliJobDirection(rec), peer,
               vrmJobStateTypeToString(rec->state), cause);
    else
        printf(_("event 'job-state' for domain '%1$s': job %2$llu %3$s (%4$s): %5$s\n"),
               domain, rec->id, vrmCliJobDirection(rec), peer,
               vrmJobStateTypeToString(rec->state));
}

int
vrmCmdEvents(int argc, char **argv)
{
    gboolean loop = FALSE;
    gboolean json = FALSE;
    int timeout = 0;
    GOptionEntry entries[] = {
        { "loop", 'l', 0, G_OPTION_ARG_NONE, &loop,
          N_("go on after the first event, until interrupted"), NULL },
        { "timeout", 't', 0, G_OPTION_ARG_INT, &timeout,
          N_("stop waiting after SECONDS"), N_("SECONDS") },
        { "json", 0, 0, G_OPTION_ARG_NONE, &json,
          N_("print one JSON object per event (keys in virt-rdma(1))"), NULL },
        { NULL, 0, 0, 0, NULL, NULL, NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(_("- print RDMA migration job events as they happen"));
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_EVENTS);
    g_autofree char *path = NULL;
    gint64 deadline = G_MAXINT64;
    unsigned int count = 0;
    int fd;
    int ret = 0;

    g_option_context_add_main_entries(ctx, entries, GETTEXT_PACKAGE);
    /* message-style: exempt-begin: help text (GLib's --help conventions) */
    g_option_context_set_summary(ctx,
        _("Each change of state of a job you may see (root: all; a member of\n"
          "virt-rdmad's access group: its own), as it happens. Without --loop the\n"
          "first event ends the command, as with virsh event."));
    /* message-style: exempt-end */
    if (!vrmCliParseOptions(ctx, NULL, &argc, &argv))
        return 2;
    if (argc != 1) {
        vrmCliError(_("events takes no argument, e.g. 'virt-rdma events --loop'"));
        return 2;
    }
    if (timeout < 0 || timeout > VRM_EVENTS_TIMEOUT_MAX) {
        vrmCliError(_("--timeout takes 1 to %1$d seconds, not %2$d"),
                    VRM_EVENTS_TIMEOUT_MAX, timeout);
        return 2;
    }
    if (timeout)
        deadline = g_get_monotonic_time() + (gint64)timeout * G_USEC_PER_SEC;
    path = vrmHelperSocketPath();
    if ((fd = vrmHelperClientSubscribe(path, req, VRM_EVENTS_SUBSCRIBE_TIMEOUT_MS)) < 0) {
        vrmCliError("%s", vrmGetLastErrorMessage());
        return 1;
    }
    for (;;) {
        g_autoptr(vrmControlMessage) ev = vrmHelperClientNext(fd, deadline);
        guint i;

        if (!ev) {
            if (vrmGetLastErrorCode() == VRM_ERR_TIMEOUT) {
                /* as virsh: not an error (and no line in a JSON stream) */
                if (!json)
                    printf(_("event loop timed out\n"));
            } else {
                vrmCliError(_("the event stream of virt-rdmad ended: %1$s (was the helper stopped?)"),
                            vrmGetLastErrorMessage());
                ret = 1;
            }
            break;
        }
        if (vrmHelperReplyCheck(ev) < 0) {
            vrmCliError("%s", vrmGetLastErrorMessage());
            ret = 1;
            break;
        }
        for (i = 0; i < ev->jobs->len; i++) {
            if (json)
                vrmEventsPrintJSON(ev->jobs->pdata[i]);
            else
                vrmEventsPrintText(ev->jobs->pdata[i]);
            count++;
        }
        fflush(stdout);
        if (!loop && count)
            break;
    }
    close(fd);
    if (!json && loop)
        printf(_("events received: %1$u\n"), count);
    return ret;
}
