/*
 * vrmhelperpolicytest: who may use virt-rdmad, device checks, ports, limits
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "vrmhelperpolicy.h"
#include "vrmerror.h"
#include "vrmtestmain.h"

typedef struct {
    const char *name;
    uid_t uid;
    gid_t gid;
    gid_t groups[3];
    size_t ngroups;
    bool haveGroup;
    bool allowed;
} PeerCase;

#define SELF 1000
#define KVM 64

static const PeerCase peerCases[] = {
    { "root", 0, 0, { 0 }, 0, false, true },
    { "root-with-group", 0, 0, { 0 }, 0, true, true },
    { "self", SELF, 100, { 0 }, 0, false, true },
    { "stranger-no-group", 2000, 2000, { KVM }, 1, false, false },
    { "primary-group", 2000, KVM, { 0 }, 0, true, true },
    { "supplementary-group", 2000, 2000, { 5, KVM }, 2, true, true },
    { "other-groups", 2000, 2000, { 5, 6, 7 }, 3, true, false },
};

static void
testPeer(gconstpointer opaque)
{
    const PeerCase *c = opaque;
    vrmHelperPeer peer = { c->uid, c->gid, c->groups, c->ngroups };

    g_assert_cmpint(vrmHelperPeerAllowed(&peer, SELF, KVM, c->haveGroup), ==, c->allowed);
}

static void
testPeerCheckSocket(void)
{
    int sv[2];

    /* our own uid over a socketpair: allowed */
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    g_assert_cmpint(vrmHelperPeerCheck(sv[0], NULL), ==, 0);
    g_assert_cmpint(vrmHelperPeerCheck(sv[0], "no-such-group-vrm"), ==, 0);
    close(sv[0]);
    close(sv[1]);
    /* not a socket */
    {
        int fds[2];

        g_assert_cmpint(pipe(fds), ==, 0);
        vrmResetLastError();
        g_assert_cmpint(vrmHelperPeerCheck(fds[0], NULL), ==, -1);
        g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_SYSTEM);
        close(fds[0]);
        close(fds[1]);
    }
}

static char *sysfs;

static void
makePort(const char *dev, int port, const char *state)
{
    g_autofree char *dir = g_strdup_printf("%s/class/infiniband/%s/ports/%d", sysfs, dev, port);
    g_autofree char *file = g_build_filename(dir, "state", NULL);

    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    g_assert_true(g_file_set_contents(file, state, -1, NULL));
}

static void
testDevice(void)
{
    g_autofree char *name = NULL;
    g_autofree char *cmd = NULL;

    sysfs = g_dir_make_tmp("vrmpolicytest-XXXXXX", NULL);
    g_setenv("VRM_SYSFS_ROOT", sysfs, TRUE);
    g_assert_cmpstr(vrmHelperSysfsRoot(), ==, sysfs);

    /* nothing at all */
    vrmResetLastError();
    g_assert_cmpint(vrmHelperDeviceCheck(NULL, 1, &name), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_NO_DEVICE);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "no RDMA device of this host has an active port 1");

    makePort("mlx5_0", 1, "1: DOWN\n");
    makePort("rxe0", 1, "4: ACTIVE\n");
    makePort("rxe0", 2, "1: DOWN\n");

    g_assert_cmpint(vrmHelperDeviceCheck(NULL, 1, &name), ==, 0);
    g_assert_cmpstr(name, ==, "rxe0");      /* the first ACTIVE one */
    g_clear_pointer(&name, g_free);
    g_assert_cmpint(vrmHelperDeviceCheck("rxe0", 0, &name), ==, 0);
    g_clear_pointer(&name, g_free);

    vrmResetLastError();
    g_assert_cmpint(vrmHelperDeviceCheck("mlx5_0", 1, &name), ==, -1);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "port 1 of the RDMA device 'mlx5_0' is not active");
    g_assert_cmpint(vrmHelperDeviceCheck("rxe0", 2, &name), ==, -1);
    g_assert_cmpint(vrmHelperDeviceCheck("rxe0", 3, &name), ==, -1);
    vrmResetLastError();
    g_assert_cmpint(vrmHelperDeviceCheck("rxe7", 1, &name), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_NO_DEVICE);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "the RDMA device 'rxe7' does not exist on this host");

    /* several active: the first by name, not by where the directory or
     * the heap put it (the sort once compared the pointers' bytes) */
    {
        static const char *const active[] = { "zz9", "rxe9", "qib0", "mlx5_1", "hfi1_0",
                                              "bnxt_re0", "ionic_0", "efa_0" };
        size_t i;

        for (i = 0; i < G_N_ELEMENTS(active); i++)
            makePort(active[i], 1, "4: ACTIVE\n");
        g_assert_cmpint(vrmHelperDeviceCheck(NULL, 1, &name), ==, 0);
        g_assert_cmpstr(name, ==, "bnxt_re0");
        g_clear_pointer(&name, g_free);
    }

    /* no netdev known: the message says what to configure */
    vrmResetLastError();
    g_assert_null(vrmHelperDeviceAddress("rxe0", 1));
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "set 'address' in the [rdma] group"));
    {
        g_autofree char *parent = g_strdup_printf("%s/class/infiniband/rxe0/parent", sysfs);
        g_autofree char *addr = NULL;

        g_assert_true(g_file_set_contents(parent, "lo\n", -1, NULL));
        addr = vrmHelperDeviceAddress("rxe0", 1);
        g_assert_cmpstr(addr, ==, "127.0.0.1");
    }

    cmd = g_strdup_printf("rm -rf '%s'", sysfs);
    g_assert_cmpint(system(cmd), ==, 0);
    g_unsetenv("VRM_SYSFS_ROOT");
    g_free(sysfs);
}

static void
testPortPick(void)
{
    g_autoptr(GHashTable) used = g_hash_table_new(NULL, NULL);

    g_assert_cmpuint(vrmHelperPortPick(100, 102, used, 0), ==, 100);
    g_assert_cmpuint(vrmHelperPortPick(100, 102, used, 100), ==, 101);
    /* rotates past the last one given */
    g_assert_cmpuint(vrmHelperPortPick(100, 102, used, 102), ==, 100);
    g_hash_table_add(used, GUINT_TO_POINTER(101));
    g_assert_cmpuint(vrmHelperPortPick(100, 102, used, 100), ==, 102);
    g_hash_table_add(used, GUINT_TO_POINTER(100));
    g_hash_table_add(used, GUINT_TO_POINTER(102));
    g_assert_cmpuint(vrmHelperPortPick(100, 102, used, 100), ==, 0);
    g_assert_cmpuint(vrmHelperPortPick(0, 10, used, 0), ==, 0);
    g_assert_cmpuint(vrmHelperPortPick(10, 9, used, 0), ==, 0);
    g_assert_cmpuint(vrmHelperPortPick(65535, 65535, used, 0), ==, 65535);
}

static void
testJobLimit(void)
{
    g_assert_cmpint(vrmHelperCheckJobLimit(0, 1), ==, 0);
    g_assert_cmpint(vrmHelperCheckJobLimit(3, 4), ==, 0);
    vrmResetLastError();
    g_assert_cmpint(vrmHelperCheckJobLimit(4, 4), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_RESOURCE);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "this host already runs 4 migration jobs, the most its virt-rdmad configuration allows (max-jobs = 4)");
}

static const vrmTestFunc testFuncs[] = {
    { "/helper/policy/peer-socket", testPeerCheckSocket },
    { "/helper/policy/device", testDevice },
    { "/helper/policy/port-pick", testPortPick },
    { "/helper/policy/job-limit", testJobLimit },
};

/* GLib's test framework, and a case a peer of peerCases */
static void
testInit(int *argc, char ***argv)
{
    g_test_init(argc, argv, NULL);
    VRM_TEST_ADD_CASES("/helper/policy/peer/", peerCases, testPeer);
}

VRM_TEST_MAIN(testInit, testFuncs)
