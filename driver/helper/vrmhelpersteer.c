/*
 * vrmhelpersteer.c: the transparent mode's nftables rules (vrmhelpersteer.h)
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <gio/gio.h>

#include "vrmhelpersteer.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

struct _vrmSteer {
    char *nft;                  /* the program */
    char *problem;              /* why steering is off, NULL: it is on */
};

/* One run of nft: its input, its deadline, who hears how it went */
typedef void (*vrmSteerRunFunc)(int status, const char *out, const char *err,
                                gpointer opaque);

/* How nft is run: its input is always commands on standard input */
typedef enum {
    VRM_STEER_RUN_APPLY,        /* nft -f -: nothing printed */
    VRM_STEER_RUN_ECHO,         /* what it added, with the handles */
    VRM_STEER_RUN_LIST,         /* a listing, with the handles */
} vrmSteerRunMode;

typedef struct {
    GSubprocess *proc;
    guint timer;
    bool timedOut;
    vrmSteerRunFunc cb;
    gpointer opaque;
} vrmSteerRun;

static gboolean
vrmSteerRunExpired(gpointer opaque)
{
    vrmSteerRun *run = opaque;

    run->timer = 0;
    run->timedOut = true;
    g_subprocess_force_exit(run->proc);
    return G_SOURCE_REMOVE;
}

static void
vrmSteerRunDone(GObject *obj, GAsyncResult *res, gpointer opaque)
{
    vrmSteerRun *run = opaque;
    g_autoptr(GError) error = NULL;
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autofree char *why = NULL;
    int status = -1;

    if (run->timer)
        g_source_remove(run->timer);
    if (!g_subprocess_communicate_utf8_finish(G_SUBPROCESS(obj), res, &out, &err, &error))
        why = g_strdup(error->message);
    else if (run->timedOut)
        why = g_strdup_printf(_("nft did not finish within %1$d seconds"),
                              VRM_STEER_NFT_TIMEOUT_S);
    else if (g_subprocess_get_if_exited(run->proc))
        status = g_subprocess_get_exit_status(run->proc);
    run->cb(status, out, why ? why : err, run->opaque);
    g_object_unref(run->proc);
    g_free(run);
}

/* nft -f - with @input; -1: it could not be started (reported) */
static int
vrmSteerRunStart(const char *nft, vrmSteerRunMode mode, const char *input,
                 vrmSteerRunFunc cb, gpointer opaque)
{
    g_autoptr(GError) error = NULL;
    const char *argvEcho[] = { nft, "--echo", "--handle", "-f", "-", NULL };
    const char *argvList[] = { nft, "--handle", "-f", "-", NULL };
    const char *argvApply[] = { nft, "-f", "-", NULL };
    const char * const *argv = mode == VRM_STEER_RUN_ECHO ? argvEcho :
                               mode == VRM_STEER_RUN_LIST ? argvList : argvApply;
    vrmSteerRun *run;
    GSubprocess *proc;

    proc = g_subprocess_newv(argv,
                             G_SUBPROCESS_FLAGS_STDIN_PIPE |
                             G_SUBPROCESS_FLAGS_STDOUT_PIPE |
                             G_SUBPROCESS_FLAGS_STDERR_PIPE, &error);
    if (!proc) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("cannot run %1$s (the transparent mode needs nftables: apt install nftables): %2$s"),
                       nft, error->message);
        return -1;
    }
    run = g_new0(vrmSteerRun, 1);
    run->proc = proc;
    run->cb = cb;
    run->opaque = opaque;
    run->timer = g_timeout_add_seconds(VRM_STEER_NFT_TIMEOUT_S, vrmSteerRunExpired, run);
    g_subprocess_communicate_utf8_async(proc, input, NULL, vrmSteerRunDone, run);
    return 0;
}

/* nft's own words, one line */
static char *
vrmSteerNftWords(const char *err)
{
    g_autofree char *line = g_strstrip(g_strdup(err ? err : ""));
    char *nl = strchr(line, '\n');

    if (nl)
        *nl = '\0';
    return *line ? vrmLogSanitize(line) : g_strdup(_("no message"));
}

vrmSteer *
vrmSteerNew(const char *nft)
{
    vrmSteer *steer = g_new0(vrmSteer, 1);

    steer->nft = g_strdup(nft ? nft : VRM_STEER_NFT);
    steer->problem = g_strdup(_("the transparent mode's table is not made yet"));
    return steer;
}

void
vrmSteerFree(vrmSteer *steer)
{
    if (!steer)
        return;
    g_free(steer->nft);
    g_free(steer->problem);
    g_free(steer);
}

const char *
vrmSteerProblem(const vrmSteer *steer)
{
    return steer->problem;
}

typedef struct {
    bool done;
    int status;
    char *err;
} vrmSteerSyncResult;

static void
vrmSteerSyncDone(int status, const char *out G_GNUC_UNUSED, const char *err,
                 gpointer opaque)
{
    vrmSteerSyncResult *r = opaque;

    r->done = true;
    r->status = status;
    r->err = g_strdup(err);
}

/* One run of nft outside the helper's loop (at start-up and at the end):
 * its own context, with nft's deadline. 0, or -1 with nft's words in
 * @words (NULL where nft could not be started: reported) */
static int
vrmSteerRunSync(vrmSteer *steer, const char *input, char **words)
{
    g_autoptr(GMainContext) ctx = g_main_context_new();
    vrmSteerSyncResult r = { 0 };
    int ret = -1;

    *words = NULL;
    g_main_context_push_thread_default(ctx);
    if (vrmSteerRunStart(steer->nft, VRM_STEER_RUN_APPLY, input, vrmSteerSyncDone, &r) == 0) {
        while (!r.done)
            g_main_context_iteration(ctx, TRUE);
        if (r.status == 0)
            ret = 0;
        else
            *words = vrmSteerNftWords(r.err);
    }
    g_main_context_pop_thread_default(ctx);
    g_free(r.err);
    return ret;
}

/* The table, empty: "add" makes it if missing, "delete" drops what a
 * helper that crashed left in it, one transaction */
int
vrmSteerReset(vrmSteer *steer)
{
    g_autofree char *words = NULL;
    g_autofree char *input =
        g_strdup_printf("add table inet %1$s\n"
                        "delete table inet %1$s\n"
                        "table inet %1$s {\n"
                        "    chain %2$s {\n"
                        "        type nat hook output priority %3$d; policy accept;\n"
                        "    }\n"
                        "}\n",
                        VRM_STEER_TABLE, VRM_STEER_CHAIN, VRM_STEER_PRIORITY);

    if (vrmSteerRunSync(steer, input, &words) == 0) {
        g_clear_pointer(&steer->problem, g_free);
        return 0;
    }
    if (words)
        vrmReportError(VRM_ERR_CONFIG,
                       _("cannot make the nftables table inet %1$s of the transparent mode: %2$s (does the kernel have nf_tables with NAT, nft_redirect?)"),
                       VRM_STEER_TABLE, words);
    g_free(steer->problem);
    steer->problem = g_strdup(vrmGetLastErrorMessage());
    return -1;
}

/*
 * The table and every rule in it go, when the helper stops cleanly: a
 * connection a rule already took stays with its engine (connection
 * tracking keeps its redirect), and a migration that starts later goes
 * over libvirt's TCP, not to an engine's port that nobody may hold any
 * more. Logged, not fatal: the next start makes the table afresh.
 */
void
vrmSteerDrop(vrmSteer *steer)
{
    g_autofree char *words = NULL;
    g_autofree char *input = g_strdup_printf("delete table inet %s\n", VRM_STEER_TABLE);

    if (steer->problem)
        return;
    if (vrmSteerRunSync(steer, input, &words) == 0) {
        steer->problem = g_strdup(_("the transparent mode's table is deleted"));
        return;
    }
    if (words)
        vrmReportError(VRM_ERR_CONFIG,
                       _("cannot delete the nftables table inet %1$s of the transparent mode: %2$s (delete it with: nft delete table inet %1$s)"),
                       VRM_STEER_TABLE, words);
    VRM_WARN("%s", vrmGetLastErrorMessage());
}

/* A cgroup path nft can take in quotes */
static bool
vrmSteerCgroupPathOK(const char *path)
{
    const char *p;

    for (p = path; *p; p++) {
        if (*p == '"' || *p == '\n' || (unsigned char)*p < 0x20)
            return false;
    }
    return *path != '\0';
}

/*
 * The cgroup (v2) libvirt made for this domain, which no other process
 * of another domain shares: its scope under machine.slice
 * ("machine-qemu\x2dN\x2dNAME.scope", systemd) or libvirt's own
 * ("qemu-N-NAME.libvirt-qemu"), the emulator's and vCPUs' cgroups below it.
 * NULL where QEMU has none (libvirt without cgroups: it shares its
 * daemon's): then only the uid tells QEMU's sockets apart.
 */
char *
vrmSteerQemuCgroup(pid_t pid, unsigned int *level)
{
    g_autofree char *file = g_strdup_printf("/proc/%d/cgroup", (int)pid);
    g_autofree char *text = NULL;

    if (pid <= 0 || !g_file_get_contents(file, &text, NULL, NULL))
        return NULL;
    return vrmSteerCgroupParse(text, level);
}

/* The same from the text of /proc/PID/cgroup */
char *
vrmSteerCgroupParse(const char *text, unsigned int *level)
{
    g_auto(GStrv) lines = NULL;
    g_auto(GStrv) parts = NULL;
    GString *path;
    size_t i;

    lines = g_strsplit(text, "\n", -1);
    for (i = 0; lines[i]; i++) {
        if (g_str_has_prefix(lines[i], "0::/"))
            break;
    }
    if (!lines[i])
        return NULL;
    parts = g_strsplit(lines[i] + 4, "/", -1);
    path = g_string_new(NULL);
    for (i = 0; parts[i] && *parts[i]; i++) {
        if (path->len)
            g_string_append_c(path, '/');
        g_string_append(path, parts[i]);
        if ((g_str_has_prefix(parts[i], "machine-qemu") &&
             g_str_has_suffix(parts[i], ".scope")) ||
            g_str_has_suffix(parts[i], ".libvirt-qemu")) {
            if (!vrmSteerCgroupPathOK(path->str))
                break;
            *level = i + 1;
            return g_string_free(path, FALSE);
        }
    }
    g_string_free(path, TRUE);
    return NULL;
}

char *
vrmSteerRuleText(const vrmSteerMatch *m, unsigned int port, unsigned long long jobId)
{
    GString *rule = g_string_new(NULL);

    g_string_append_printf(rule, "add rule inet %s %s meta nfproto ipv4 meta skuid %u",
                           VRM_STEER_TABLE, VRM_STEER_CHAIN, (unsigned int)m->qemuUid);
    if (m->cgroup)
        g_string_append_printf(rule, " socket cgroupv2 level %u \"%s\"",
                               m->cgroupLevel, m->cgroup);
    /* never a connection to this host (the engine's own port, a
     * destination engine's to its QEMU); only a connection's first SYN:
     * the redirect turns connection tracking on, which then picks up
     * connections already open as new on their next packet (the helpers'
     * own, whose peer's port may lie in libvirt's range: seen with QEMU
     * as root in the sandbox) */
    g_string_append_printf(rule, " fib daddr type != local tcp dport %u-%u"
                           " tcp flags & (fin | syn | rst | ack) == syn"
                           " redirect to :%u comment \"" VRM_STEER_COMMENT "\"\n",
                           m->portMin, m->portMax, port, jobId);
    return g_string_free(rule, FALSE);
}

guint64
vrmSteerParseHandle(const char *output)
{
    const char *p;
    const char *last = NULL;
    guint64 handle = 0;
    char *end;

    for (p = output; p && (p = strstr(p, "# handle ")); p++)
        last = p;
    if (!last)
        return 0;
    errno = 0;
    handle = g_ascii_strtoull(last + strlen("# handle "), &end, 10);
    if (errno || end == last + strlen("# handle ") ||
        (*end && *end != '\n' && *end != ' '))
        return 0;
    return handle;
}

guint64
vrmSteerParseJobHandle(const char *listing, unsigned long long jobId)
{
    g_autofree char *needle = g_strdup_printf("comment \"" VRM_STEER_COMMENT "\"", jobId);
    const char *p = listing ? strstr(listing, needle) : NULL;
    const char *end;
    g_autofree char *line = NULL;

    if (!p)
        return 0;
    end = strchr(p, '\n');
    line = end ? g_strndup(p, end - p) : g_strdup(p);
    return vrmSteerParseHandle(line);
}

static void
vrmSteerRemoveDone(int status, const char *out G_GNUC_UNUSED, const char *err,
                   gpointer opaque)
{
    guint64 handle = GPOINTER_TO_SIZE(opaque);

    if (status != 0) {
        g_autofree char *words = vrmSteerNftWords(err);

        VRM_WARN(_("cannot delete the steering rule %1$llu from the nftables table inet %2$s: %3$s; it goes when virt-rdmad restarts"),
                 (unsigned long long)handle, VRM_STEER_TABLE, words);
    }
}

static void
vrmSteerRemoveWith(const char *nft, guint64 handle)
{
    g_autofree char *input =
        g_strdup_printf("delete rule inet %s %s handle %llu\n", VRM_STEER_TABLE,
                        VRM_STEER_CHAIN, (unsigned long long)handle);

    if (vrmSteerRunStart(nft, VRM_STEER_RUN_APPLY, input, vrmSteerRemoveDone,
                         GSIZE_TO_POINTER(handle)) < 0)
        VRM_WARN("%s", vrmGetLastErrorMessage());
}

void
vrmSteerRemove(vrmSteer *steer, guint64 handle)
{
    vrmSteerRemoveWith(steer->nft, handle);
}

/* One add in flight: the job's id finds its rule again if nft made it
 * without telling its handle */
typedef struct {
    char *nft;
    unsigned long long jobId;
    vrmSteerAddedFunc cb;
    gpointer opaque;
} vrmSteerAddCall;

static void
vrmSteerAddCallFree(vrmSteerAddCall *call)
{
    g_free(call->nft);
    g_free(call);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmSteerAddCall, vrmSteerAddCallFree);

static void
vrmSteerSweepDone(int status, const char *out, const char *err, gpointer opaque)
{
    g_autoptr(vrmSteerAddCall) call = opaque;
    guint64 handle;

    if (status != 0) {
        g_autofree char *words = vrmSteerNftWords(err);

        VRM_WARN(_("job %1$llu: cannot look for its steering rule in the nftables table inet %2$s: %3$s; if nft made it, it goes when virt-rdmad stops or restarts"),
                 call->jobId, VRM_STEER_TABLE, words);
        return;
    }
    if ((handle = vrmSteerParseJobHandle(out, call->jobId))) {
        VRM_INFO("job %llu: deleting its steering rule (handle %llu), which nft made without telling its handle",
                 call->jobId, (unsigned long long)handle);
        vrmSteerRemoveWith(call->nft, handle);
    }
}

/*
 * An add that ended without a handle may still have made the rule: nft
 * killed at its deadline after its transaction committed, or an answer
 * that did not say the handle. Such a rule would steer the QEMU's next
 * connections to a port nobody holds, so the table is listed and the
 * job's rule, found by its comment, deleted. An nft that refused made
 * nothing (a transaction), and the listing then finds nothing.
 */
static void
vrmSteerSweep(vrmSteerAddCall *call)
{
    g_autofree char *input = g_strdup_printf("list chain inet %s %s\n", VRM_STEER_TABLE,
                                             VRM_STEER_CHAIN);

    if (vrmSteerRunStart(call->nft, VRM_STEER_RUN_LIST, input, vrmSteerSweepDone, call) < 0) {
        VRM_WARN("%s", vrmGetLastErrorMessage());
        vrmSteerAddCallFree(call);
    }
}

static void
vrmSteerAddDone(int status, const char *out, const char *err, gpointer opaque)
{
    vrmSteerAddCall *call = opaque;
    guint64 handle = status == 0 ? vrmSteerParseHandle(out) : 0;
    g_autofree char *words = NULL;
    g_autofree char *why = NULL;

    if (!handle) {
        words = vrmSteerNftWords(status == 0 ? _("nft did not say the rule's handle") : err);
        why = g_strdup_printf(_("cannot add the steering rule to the nftables table inet %1$s: %2$s"),
                              VRM_STEER_TABLE, words);
    }
    call->cb(handle, why, call->opaque);
    if (handle)
        vrmSteerAddCallFree(call);
    else
        vrmSteerSweep(call);
}

int
vrmSteerAdd(vrmSteer *steer, const vrmSteerMatch *match, unsigned int port,
            unsigned long long jobId, vrmSteerAddedFunc cb, gpointer opaque)
{
    g_autofree char *rule = NULL;
    vrmSteerAddCall *call;

    if (steer->problem) {
        vrmReportError(VRM_ERR_CONFIG, "%s", steer->problem);
        return -1;
    }
    rule = vrmSteerRuleText(match, port, jobId);
    call = g_new0(vrmSteerAddCall, 1);
    call->nft = g_strdup(steer->nft);
    call->jobId = jobId;
    call->cb = cb;
    call->opaque = opaque;
    if (vrmSteerRunStart(steer->nft, VRM_STEER_RUN_ECHO, rule, vrmSteerAddDone, call) < 0) {
        vrmSteerAddCallFree(call);
        return -1;
    }
    return 0;
}
