/*
 * vrmhostchecktest.c: the install checks of `virt-rdma capabilities`
 * (issue 35 item 5) on trees made here: every file they read (pid files,
 * /proc/PID/{comm,stat}, /proc/stat, AppArmor's) under a temporary root.
 *   - the hook installed after libvirt's daemon started: restart it;
 *     installed before: fine; a stale pid file or no daemon: fine;
 *   - AppArmor off, libvirt without its profile: nothing to check; the
 *     include missing, commented out, in local/, in libvirt-qemu.d/.
 */
#include <config.h>

#include <string.h>
#include <sys/stat.h>
#include <utime.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "vrmtestutils.h"
#include "vrmclihostcheck.h"

#define HOOK "/etc/libvirt/hooks/qemu.d/virt-rdma"
#define BOOT 1700000000LL

static void
put(const char *root, const char *path, const char *text)
{
    g_autofree char *full = g_strconcat(root, path, NULL);
    g_autofree char *dir = g_path_get_dirname(full);

    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    g_assert_true(g_file_set_contents(full, text, -1, NULL));
}

static char *
makeRoot(void)
{
    char *root = g_dir_make_tmp("vrmhostcheck-XXXXXX", NULL);

    g_assert_nonnull(root);
    return root;
}

static void
removeRoot(char *root)
{
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", root);

    g_assert_true(g_spawn_command_line_sync(cmd, NULL, NULL, NULL, NULL));
    g_free(root);
}

/* libvirtd as pid 4242, started @after seconds after boot; the hook
 * written at @hookTime (seconds since the epoch) */
static void
daemonAndHook(const char *root, const char *name, gint64 started, gint64 hookTime)
{
    long hz = sysconf(_SC_CLK_TCK);
    g_autofree char *stat = g_strdup_printf("4242 (%s) S 1 4242 4242 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 3 0 %lld 1000 100",
                                            name, (long long)((started - BOOT) * hz));
    g_autofree char *btime = g_strdup_printf("cpu  1 2 3 4\nintr 5\nbtime %lld\nprocesses 9\n", BOOT);
    g_autofree char *hook = g_strconcat(root, HOOK, NULL);
    struct utimbuf t = { .actime = hookTime, .modtime = hookTime };

    put(root, g_str_equal(name, "libvirtd") ? "/run/libvirtd.pid" : "/run/libvirt/virtqemud.pid",
        "4242\n");
    put(root, "/proc/4242/comm", name);
    put(root, "/proc/4242/stat", stat);
    put(root, "/proc/stat", btime);
    put(root, HOOK, "#!/bin/sh\n");
    g_assert_cmpint(utime(hook, &t), ==, 0);
}

static void
testHookLoaded(void)
{
    char *root = makeRoot();
    g_autofree char *detail = NULL;
    struct stat st;
    g_autofree char *hook = g_strconcat(root, HOOK, NULL);

    /* no hook: the missing hook is another reason */
    g_assert_cmpint(vrmHostCheckHookLoaded(root, HOOK, &detail), ==,
                    VRM_HOST_CHECK_NOT_APPLICABLE);
    /* the hook now (its ctime cannot be set back), libvirtd an hour ago */
    daemonAndHook(root, "libvirtd", g_get_real_time() / G_USEC_PER_SEC - 3600, 0);
    g_assert_cmpint(stat(hook, &st), ==, 0);
    g_assert_cmpint(vrmHostCheckHookLoaded(root, HOOK, &detail), ==, VRM_HOST_CHECK_PROBLEM);
    g_test_message("%s", detail);
    g_assert_nonnull(strstr(detail, "libvirtd (pid 4242) started before the hook was installed"));
    g_assert_nonnull(strstr(detail, "systemctl restart libvirtd"));
    g_clear_pointer(&detail, g_free);

    /* libvirtd restarted after it: fine */
    daemonAndHook(root, "libvirtd", g_get_real_time() / G_USEC_PER_SEC + 5, 0);
    g_assert_cmpint(vrmHostCheckHookLoaded(root, HOOK, &detail), ==, VRM_HOST_CHECK_OK);
    g_assert_nonnull(strstr(detail, "started after the hook was installed"));
    g_clear_pointer(&detail, g_free);

    /* a stale pid file (another program has the pid now): no daemon */
    put(root, "/proc/4242/comm", "bash\n");
    g_assert_cmpint(vrmHostCheckHookLoaded(root, HOOK, &detail), ==, VRM_HOST_CHECK_OK);
    g_assert_nonnull(strstr(detail, "is not running"));
    g_clear_pointer(&detail, g_free);

    /* the modular daemon counts the same */
    {
        g_autofree char *pidFile = g_strconcat(root, "/run/libvirtd.pid", NULL);

        g_assert_cmpint(g_unlink(pidFile), ==, 0);
    }
    daemonAndHook(root, "virtqemud", g_get_real_time() / G_USEC_PER_SEC - 60, 0);
    g_assert_cmpint(vrmHostCheckHookLoaded(root, HOOK, &detail), ==, VRM_HOST_CHECK_PROBLEM);
    g_assert_nonnull(strstr(detail, "systemctl restart virtqemud"));
    g_clear_pointer(&detail, g_free);

    /* a stat it cannot read: unknown, not a verdict */
    put(root, "/proc/4242/stat", "garbage");
    g_assert_cmpint(vrmHostCheckHookLoaded(root, HOOK, &detail), ==, VRM_HOST_CHECK_UNKNOWN);
    g_clear_pointer(&detail, g_free);
    removeRoot(root);
}

static void
testAppArmor(void)
{
    char *root = makeRoot();
    g_autofree char *detail = NULL;

    g_assert_cmpint(vrmHostCheckAppArmor(root, &detail), ==, VRM_HOST_CHECK_NOT_APPLICABLE);
    g_assert_cmpstr(detail, ==, "the kernel does not run AppArmor");
    g_clear_pointer(&detail, g_free);
    put(root, "/sys/module/apparmor/parameters/enabled", "N\n");
    g_assert_cmpint(vrmHostCheckAppArmor(root, &detail), ==, VRM_HOST_CHECK_NOT_APPLICABLE);
    g_clear_pointer(&detail, g_free);

    put(root, "/sys/module/apparmor/parameters/enabled", "Y\n");
    g_assert_cmpint(vrmHostCheckAppArmor(root, &detail), ==, VRM_HOST_CHECK_NOT_APPLICABLE);
    g_assert_nonnull(strstr(detail, "libvirt does not confine QEMU"));
    g_clear_pointer(&detail, g_free);

    put(root, "/etc/apparmor.d/abstractions/libvirt-qemu",
        "  include if exists <local/abstractions/libvirt-qemu>\n");
    g_assert_cmpint(vrmHostCheckAppArmor(root, &detail), ==, VRM_HOST_CHECK_PROBLEM);
    g_assert_nonnull(strstr(detail, "reinstall the virt-rdmad package"));
    g_clear_pointer(&detail, g_free);

    put(root, "/etc/apparmor.d/abstractions/virt-rdma-qemu", "# ours\n");
    g_assert_cmpint(vrmHostCheckAppArmor(root, &detail), ==, VRM_HOST_CHECK_PROBLEM);
    g_test_message("%s", detail);
    g_assert_nonnull(strstr(detail, "echo 'include if exists <abstractions/virt-rdma-qemu>' >> /etc/apparmor.d/local/abstractions/libvirt-qemu"));
    g_clear_pointer(&detail, g_free);

    /* commented out: still missing */
    put(root, "/etc/apparmor.d/local/abstractions/libvirt-qemu",
        "# include if exists <abstractions/virt-rdma-qemu>\n");
    g_assert_cmpint(vrmHostCheckAppArmor(root, &detail), ==, VRM_HOST_CHECK_PROBLEM);
    g_clear_pointer(&detail, g_free);

    put(root, "/etc/apparmor.d/local/abstractions/libvirt-qemu",
        "/srv/img/** rwk,\ninclude if exists <abstractions/virt-rdma-qemu>\n");
    g_assert_cmpint(vrmHostCheckAppArmor(root, &detail), ==, VRM_HOST_CHECK_OK);
    g_clear_pointer(&detail, g_free);

    /* or the package's drop-in of libvirt-qemu.d, where libvirt reads the
     * directory (Debian 13), and not where it does not (Debian 12) */
    put(root, "/etc/apparmor.d/local/abstractions/libvirt-qemu", "");
    put(root, "/etc/apparmor.d/abstractions/libvirt-qemu.d/virt-rdma",
        "include <abstractions/virt-rdma-qemu>\n");
    g_assert_cmpint(vrmHostCheckAppArmor(root, &detail), ==, VRM_HOST_CHECK_PROBLEM);
    g_clear_pointer(&detail, g_free);
    put(root, "/etc/apparmor.d/abstractions/libvirt-qemu",
        "  include if exists <abstractions/libvirt-qemu.d>\n"
        "  include if exists <local/abstractions/libvirt-qemu>\n");
    g_assert_cmpint(vrmHostCheckAppArmor(root, &detail), ==, VRM_HOST_CHECK_OK);
    g_clear_pointer(&detail, g_free);
    removeRoot(root);
}

int
main(int argc, char **argv)
{
    vrmTestInit(&argc, &argv);
    g_test_add_func("/hostcheck/hook-loaded", testHookLoaded);
    g_test_add_func("/hostcheck/apparmor", testAppArmor);
    return g_test_run();
}
