/*
 * vrmclihostcheck.c: the manual steps of an install that capabilities
 * checks (vrmclihostcheck.h)
 */
#include <config.h>

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vrmclihostcheck.h"
#include "vrmi18n.h"
#include "vrmparse.h"

/* The daemons that run libvirt's QEMU hooks, and their pid files */
static const struct {
    const char *name;
    const char *pidFile;
} vrmHostCheckDaemons[] = {
    { "virtqemud", "/run/libvirt/virtqemud.pid" },
    { "libvirtd", "/run/libvirtd.pid" },
};

#define VRM_APPARMOR_ENABLED "/sys/module/apparmor/parameters/enabled"
#define VRM_APPARMOR_LIBVIRT "/etc/apparmor.d/abstractions/libvirt-qemu"
#define VRM_APPARMOR_LIBVIRT_DIR "/etc/apparmor.d/abstractions/libvirt-qemu.d"
#define VRM_APPARMOR_LOCAL "/etc/apparmor.d/local/abstractions/libvirt-qemu"
#define VRM_APPARMOR_OURS "/etc/apparmor.d/abstractions/virt-rdma-qemu"
#define VRM_APPARMOR_RULE "abstractions/virt-rdma-qemu"

const char *
vrmHostCheckName(vrmHostCheck check)
{
    switch (check) {
    case VRM_HOST_CHECK_OK:
        return "ok";
    case VRM_HOST_CHECK_PROBLEM:
        return "problem";
    case VRM_HOST_CHECK_UNKNOWN:
        return "unknown";
    case VRM_HOST_CHECK_NOT_APPLICABLE:
        break;
    }
    return "not-applicable";
}

static char *
vrmHostCheckRead(const char *root, const char *path)
{
    g_autofree char *full = g_strconcat(root, path, NULL);
    char *data = NULL;

    if (!g_file_get_contents(full, &data, NULL, NULL))
        return NULL;
    return data;
}

/* When @pid started, in seconds since the epoch; 0 if unknown */
static gint64
vrmHostCheckProcStart(const char *root, long long pid)
{
    g_autofree char *statPath = g_strdup_printf("/proc/%lld/stat", pid);
    g_autofree char *stat = vrmHostCheckRead(root, statPath);
    g_autofree char *boot = vrmHostCheckRead(root, "/proc/stat");
    const char *btime;
    guint64 ticks;
    long hz = sysconf(_SC_CLK_TCK);

    if (!stat || !boot || hz <= 0 || !(ticks = vrmParseProcStartTime(stat)))
        return 0;
    if (g_str_has_prefix(boot, "btime "))
        btime = boot;
    else if (!(btime = strstr(boot, "\nbtime ")))
        return 0;
    else
        btime++;
    return g_ascii_strtoll(btime + strlen("btime "), NULL, 10) + (gint64)(ticks / hz);
}

vrmHostCheck
vrmHostCheckHookLoaded(const char *root, const char *hook, char **detail)
{
    g_autofree char *hookPath = g_strconcat(root, hook, NULL);
    struct stat st;
    gint64 installed;
    size_t i;

    *detail = NULL;
    if (stat(hookPath, &st) < 0)
        return VRM_HOST_CHECK_NOT_APPLICABLE;
    installed = MAX(st.st_mtime, st.st_ctime);
    for (i = 0; i < G_N_ELEMENTS(vrmHostCheckDaemons); i++) {
        const char *name = vrmHostCheckDaemons[i].name;
        g_autofree char *pidText = vrmHostCheckRead(root, vrmHostCheckDaemons[i].pidFile);
        g_autofree char *commPath = NULL;
        g_autofree char *comm = NULL;
        unsigned long long pid;
        gint64 started;

        if (!pidText || !vrmParseUInt64(g_strstrip(pidText), &pid) || pid == 0 ||
            pid > G_MAXINT32)
            continue;
        commPath = g_strdup_printf("/proc/%llu/comm", pid);
        /* a stale pid file: another process, or none */
        if (!(comm = vrmHostCheckRead(root, commPath)) ||
            !g_str_equal(g_strstrip(comm), name))
            continue;
        if (!(started = vrmHostCheckProcStart(root, (long long)pid))) {
            *detail = g_strdup_printf(_("cannot tell when %1$s (pid %2$llu) started"),
                                      name, pid);
            return VRM_HOST_CHECK_UNKNOWN;
        }
        /* the clock's second: a hook written in the second the daemon
         * started counts as there */
        if (installed > started + 1) {
            *detail = g_strdup_printf(_("%1$s (pid %2$llu) started before the hook was installed and runs it only once restarted: systemctl restart %3$s"),
                                      name, pid, name);
            return VRM_HOST_CHECK_PROBLEM;
        }
        *detail = g_strdup_printf(_("%1$s (pid %2$llu) started after the hook was installed: it runs it"),
                                  name, pid);
        return VRM_HOST_CHECK_OK;
    }
    *detail = g_strdup(_("libvirt's daemon is not running: it runs the hook once it starts"));
    return VRM_HOST_CHECK_OK;
}

/* Does @text include our abstraction (a line that is not a comment)? */
static bool
vrmHostCheckIncludes(const char *text)
{
    g_auto(GStrv) lines = NULL;
    size_t i;

    if (!text)
        return false;
    lines = g_strsplit(text, "\n", -1);
    for (i = 0; lines[i]; i++) {
        const char *l = g_strstrip(lines[i]);

        if (*l != '#' && strstr(l, "include") && strstr(l, VRM_APPARMOR_RULE))
            return true;
    }
    return false;
}

vrmHostCheck
vrmHostCheckAppArmor(const char *root, char **detail)
{
    g_autofree char *enabled = vrmHostCheckRead(root, VRM_APPARMOR_ENABLED);
    g_autofree char *libvirt = vrmHostCheckRead(root, VRM_APPARMOR_LIBVIRT);
    g_autofree char *local = vrmHostCheckRead(root, VRM_APPARMOR_LOCAL);
    g_autofree char *oursPath = g_strconcat(root, VRM_APPARMOR_OURS, NULL);
    g_autofree char *dirPath = g_strconcat(root, VRM_APPARMOR_LIBVIRT_DIR, NULL);
    g_autoptr(GDir) dir = NULL;
    bool included = vrmHostCheckIncludes(local);
    const char *name;

    *detail = NULL;
    if (!enabled || !g_str_has_prefix(enabled, "Y")) {
        *detail = g_strdup(_("the kernel does not run AppArmor"));
        return VRM_HOST_CHECK_NOT_APPLICABLE;
    }
    if (!libvirt) {
        *detail = g_strdup(_("libvirt does not confine QEMU with AppArmor on this host"));
        return VRM_HOST_CHECK_NOT_APPLICABLE;
    }
    if (!g_file_test(oursPath, G_FILE_TEST_EXISTS)) {
        *detail = g_strdup_printf(_("virt-rdma's AppArmor rule %1$s is missing: reinstall the virt-rdmad package"),
                                  VRM_APPARMOR_OURS);
        return VRM_HOST_CHECK_PROBLEM;
    }
    /* the drop-in directory counts where libvirt's abstraction reads it
     * (libvirt 10 and later: Debian 13, not Debian 12's 9.0) */
    if (!included && strstr(libvirt, "abstractions/libvirt-qemu.d") &&
        (dir = g_dir_open(dirPath, 0, NULL))) {
        while (!included && (name = g_dir_read_name(dir))) {
            g_autofree char *path = g_strconcat(VRM_APPARMOR_LIBVIRT_DIR "/", name, NULL);
            g_autofree char *text = vrmHostCheckRead(root, path);

            included = vrmHostCheckIncludes(text);
        }
    }
    if (!included) {
        *detail = g_strdup_printf(_("libvirt's QEMU profile does not include virt-rdma's AppArmor rule, so QEMU cannot reach its migration sockets: echo 'include if exists <%1$s>' >> %2$s (guests get it when they next start)"),
                                  VRM_APPARMOR_RULE, VRM_APPARMOR_LOCAL);
        return VRM_HOST_CHECK_PROBLEM;
    }
    *detail = g_strdup(_("libvirt's QEMU profile includes virt-rdma's rule"));
    return VRM_HOST_CHECK_OK;
}
