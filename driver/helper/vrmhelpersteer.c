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

    g_clear_handle_id(&run->timer, g_source_remove);
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

/*
 * The libvirt daemon's cgroup (v2), in full: libvirtd.service or
 * virtqemud.service under systemd. NULL where it has none of its own
 * (the root cgroup): then its uid alone tells its sockets apart.
 */
char *
vrmSteerDaemonCgroupParse(const char *text, unsigned int *level)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_auto(GStrv) parts = NULL;
    const char *path = NULL;
    size_t i;

    for (i = 0; lines[i] && !path; i++) {
        if (g_str_has_prefix(lines[i], "0::/"))
            path = lines[i] + 4;
    }
    if (!path || !*path || !vrmSteerCgroupPathOK(path))
        return NULL;
    parts = g_strsplit(path, "/", -1);
    for (i = 0; parts[i]; i++) {
        if (!*parts[i])
            return NULL;
    }
    *level = i;
    return g_strdup(path);
}

/* The libvirt daemon running QEMU's domains: its pid file in @runDir
 * (libvirtd's, or virtqemud's of the modular daemons), alive and named
 * so. -1: neither. */
pid_t
vrmSteerLibvirtDaemon(const char *runDir)
{
    static const char *const names[] = { "libvirtd", "virtqemud" };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(names); i++) {
        g_autofree char *file = g_strdup_printf("%s/%s.pid", runDir, names[i]);
        g_autofree char *text = NULL;
        g_autofree char *commFile = NULL;
        g_autofree char *comm = NULL;
        gint64 pid;

        if (!g_file_get_contents(file, &text, NULL, NULL))
            continue;
        pid = g_ascii_strtoll(text, NULL, 10);
        if (pid <= 0 || pid > G_MAXINT)
            continue;
        commFile = g_strdup_printf("/proc/%d/comm", (int)pid);
        if (g_file_get_contents(commFile, &comm, NULL, NULL) &&
            g_strcmp0(g_strstrip(comm), names[i]) == 0)
            return (pid_t)pid;
    }
    return -1;
}

/* One rule: connections of @uid's sockets (in @cgroup if not NULL) */
static void
vrmSteerRuleAppend(GString *rule, const vrmSteerMatch *m, uid_t uid, const char *cgroup,
                   unsigned int level, unsigned int port, unsigned long long jobId)
{
    g_string_append_printf(rule, "add rule inet %s %s meta nfproto ipv4 meta skuid %u",
                           VRM_STEER_TABLE, VRM_STEER_CHAIN, (unsigned int)uid);
    if (cgroup)
        g_string_append_printf(rule, " socket cgroupv2 level %u \"%s\"", level, cgroup);
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
}

/* The daemon's rule is QEMU's when both are one uid without cgroups */
static guint
vrmSteerRuleCount(const vrmSteerMatch *m)
{
    return m->daemonUid != m->qemuUid || m->cgroup || m->daemonCgroup ? 2 : 1;
}

/*
 * QEMU's own connections (multifd, post-copy's preempt channel, every
 * connection of a parallel migration) and, unless it is the same rule,
 * the daemon's: libvirt connects the main stream of a migration that is
 * not parallel itself and hands QEMU the socket.
 */
char *
vrmSteerRuleText(const vrmSteerMatch *m, unsigned int port, unsigned long long jobId)
{
    GString *rule = g_string_new(NULL);

    vrmSteerRuleAppend(rule, m, m->qemuUid, m->cgroup, m->cgroupLevel, port, jobId);
    if (vrmSteerRuleCount(m) == 2)
        vrmSteerRuleAppend(rule, m, m->daemonUid, m->daemonCgroup, m->daemonCgroupLevel,
                           port, jobId);
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

guint
vrmSteerParseHandles(const char *output, vrmSteerRules *rules)
{
    g_auto(GStrv) lines = g_strsplit(output ? output : "", "\n", -1);
    size_t i;

    rules->n = 0;
    for (i = 0; lines[i] && rules->n < VRM_STEER_RULES_MAX; i++) {
        guint64 handle = vrmSteerParseHandle(lines[i]);

        if (handle)
            rules->handle[rules->n++] = handle;
    }
    return rules->n;
}

guint
vrmSteerParseJobHandles(const char *listing, unsigned long long jobId, vrmSteerRules *rules)
{
    g_autofree char *needle = g_strdup_printf("comment \"" VRM_STEER_COMMENT "\"", jobId);
    g_auto(GStrv) lines = g_strsplit(listing ? listing : "", "\n", -1);
    size_t i;

    rules->n = 0;
    for (i = 0; lines[i] && rules->n < VRM_STEER_RULES_MAX; i++) {
        const char *p = strstr(lines[i], needle);
        guint64 handle = p ? vrmSteerParseHandle(p) : 0;

        if (handle)
            rules->handle[rules->n++] = handle;
    }
    return rules->n;
}

static void
vrmSteerRemoveDone(int status, const char *out G_GNUC_UNUSED, const char *err,
                   gpointer opaque)
{
    g_autofree char *handles = opaque;

    if (status != 0) {
        g_autofree char *words = vrmSteerNftWords(err);

        VRM_WARN(_("cannot delete the steering rules %1$s from the nftables table inet %2$s: %3$s; they go when virt-rdmad restarts"),
                 handles, VRM_STEER_TABLE, words);
    }
}

/* The rules' handles, "12 13": for the log */
char *
vrmSteerRulesFormat(const vrmSteerRules *rules)
{
    GString *out = g_string_new(NULL);
    guint i;

    for (i = 0; i < rules->n; i++)
        g_string_append_printf(out, "%s%llu", i ? " " : "",
                               (unsigned long long)rules->handle[i]);
    return g_string_free(out, FALSE);
}

static void
vrmSteerRemoveWith(const char *nft, const vrmSteerRules *rules)
{
    g_autoptr(GString) input = g_string_new(NULL);
    guint i;

    if (!rules->n)
        return;
    for (i = 0; i < rules->n; i++)
        g_string_append_printf(input, "delete rule inet %s %s handle %llu\n", VRM_STEER_TABLE,
                               VRM_STEER_CHAIN, (unsigned long long)rules->handle[i]);
    if (vrmSteerRunStart(nft, VRM_STEER_RUN_APPLY, input->str, vrmSteerRemoveDone,
                         vrmSteerRulesFormat(rules)) < 0)
        VRM_WARN("%s", vrmGetLastErrorMessage());
}

void
vrmSteerRemove(vrmSteer *steer, const vrmSteerRules *rules)
{
    vrmSteerRemoveWith(steer->nft, rules);
}

/* One add in flight: the job's id finds its rules again if nft made them
 * without telling their handles */
typedef struct {
    char *nft;
    unsigned long long jobId;
    guint expected;             /* rules in the text */
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
    vrmSteerRules rules;

    if (status != 0) {
        g_autofree char *words = vrmSteerNftWords(err);

        VRM_WARN(_("job %1$llu: cannot look for its steering rule in the nftables table inet %2$s: %3$s; if nft made it, it goes when virt-rdmad stops or restarts"),
                 call->jobId, VRM_STEER_TABLE, words);
        return;
    }
    if (vrmSteerParseJobHandles(out, call->jobId, &rules)) {
        g_autofree char *handles = vrmSteerRulesFormat(&rules);

        VRM_INFO("job %llu: deleting its steering rules (handles %s), which nft made without telling their handles",
                 call->jobId, handles);
        vrmSteerRemoveWith(call->nft, &rules);
    }
}

/*
 * An add that ended without its handles may still have made the rules:
 * nft killed at its deadline after its transaction committed, or an
 * answer that did not say them. Such a rule would steer the next
 * connections to a port nobody holds, so the table is listed and the
 * job's rules, found by their comment, deleted. An nft that refused made
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
    vrmSteerRules rules = { 0 };
    g_autofree char *words = NULL;
    g_autofree char *why = NULL;

    if (status == 0)
        vrmSteerParseHandles(out, &rules);
    if (rules.n != call->expected) {
        words = vrmSteerNftWords(status == 0 ? _("nft did not say the rule's handle") : err);
        why = g_strdup_printf(_("cannot add the steering rule to the nftables table inet %1$s: %2$s"),
                              VRM_STEER_TABLE, words);
        rules.n = 0;
    }
    call->cb(&rules, why, call->opaque);
    if (rules.n)
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
    call->expected = vrmSteerRuleCount(match);
    call->cb = cb;
    call->opaque = opaque;
    if (vrmSteerRunStart(steer->nft, VRM_STEER_RUN_ECHO, rule, vrmSteerAddDone, call) < 0) {
        vrmSteerAddCallFree(call);
        return -1;
    }
    return 0;
}
