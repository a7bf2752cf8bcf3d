/*
 * vrmhelperpolicy.c: access control and host checks of virt-rdmad
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* SO_PEERCRED, struct ucred, accept4 */
#endif

#include <errno.h>
#include <grp.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <net/if.h>
#include <pwd.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vrmhelperpolicy.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

bool
vrmHelperPeerAllowed(const vrmHelperPeer *peer, uid_t self,
                     gid_t allowedGid, bool haveGroup)
{
    size_t i;

    if (peer->uid == 0 || peer->uid == self)
        return true;
    if (!haveGroup)
        return false;
    if (peer->gid == allowedGid)
        return true;
    for (i = 0; i < peer->ngroups; i++) {
        if (peer->groups[i] == allowedGid)
            return true;
    }
    return false;
}

int
vrmHelperPeerCheck(int fd, const char *group)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    vrmHelperPeer peer = { 0 };
    gid_t allowed = 0;
    bool haveGroup = false;
    g_autofree gid_t *groups = NULL;

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        vrmReportSystemError(errno, _("cannot read the credentials of a control socket client"));
        return -1;
    }
    peer.uid = cred.uid;
    peer.gid = cred.gid;

    if (group) {
        struct group *gr = getgrnam(group);

        if (gr) {
            allowed = gr->gr_gid;
            haveGroup = true;
        } else {
            VRM_WARN("the access group '%s' does not exist; only root may use the helper",
                     group);
        }
    }
    if (haveGroup && cred.uid != 0) {
        struct passwd *pw = getpwuid(cred.uid);
        int n = 64;

        if (pw) {
            groups = g_new0(gid_t, n);
            if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) < 0) {
                g_free(groups);
                groups = g_new0(gid_t, n);
                if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) < 0)
                    n = 0;
            }
            peer.groups = groups;
            peer.ngroups = n;
        }
    }
    if (!vrmHelperPeerAllowed(&peer, geteuid(), allowed, haveGroup)) {
        if (group)
            vrmReportError(VRM_ERR_AUTH,
                           _("user %1$u is not allowed to use virt-rdmad: only root and members of the group '%2$s' are"),
                           (unsigned int)cred.uid, group);
        else
            vrmReportError(VRM_ERR_AUTH,
                           _("user %1$u is not allowed to use virt-rdmad: only root is"),
                           (unsigned int)cred.uid);
        return -1;
    }
    return 0;
}

const char *
vrmHelperSysfsRoot(void)
{
    const char *env = g_getenv("VRM_SYSFS_ROOT");

    return env && *env ? env : "/sys";
}

/* g_ptr_array_sort passes pointers to the elements, not the elements */
static gint
vrmHelperDeviceNameCompare(gconstpointer a, gconstpointer b)
{
    return g_ascii_strcasecmp(*(const char *const *)a, *(const char *const *)b);
}

GPtrArray *
vrmHelperDeviceNames(void)
{
    g_autofree char *dir = g_strdup_printf("%s/class/infiniband", vrmHelperSysfsRoot());
    g_autoptr(GDir) devs = g_dir_open(dir, 0, NULL);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    const char *name;

    while (devs && (name = g_dir_read_name(devs)))
        g_ptr_array_add(names, g_strdup(name));
    /* the first active one by name, whatever order the directory lists */
    g_ptr_array_sort(names, vrmHelperDeviceNameCompare);
    return names;
}

static bool
vrmHelperPortActive(const char *device, unsigned int port)
{
    g_autofree char *path =
        g_strdup_printf("%s/class/infiniband/%s/ports/%u/state",
                        vrmHelperSysfsRoot(), device, port);
    g_autofree char *state = NULL;

    if (!g_file_get_contents(path, &state, NULL, NULL))
        return false;
    /* "4: ACTIVE" */
    return strstr(state, "ACTIVE") != NULL;
}

int
vrmHelperDeviceCheck(const char *device, unsigned int port, char **name)
{
    g_autofree char *dir = g_strdup_printf("%s/class/infiniband", vrmHelperSysfsRoot());
    g_autofree char *devdir = NULL;

    if (port == 0)
        port = 1;
    if (!device) {
        g_autoptr(GPtrArray) names = vrmHelperDeviceNames();
        guint i;

        for (i = 0; i < names->len; i++) {
            if (vrmHelperPortActive(names->pdata[i], port)) {
                *name = g_strdup(names->pdata[i]);
                return 0;
            }
        }
        vrmReportError(VRM_ERR_NO_DEVICE,
                       _("no RDMA device of this host has an active port %1$u"), port);
        return -1;
    }
    devdir = g_build_filename(dir, device, NULL);
    if (!g_file_test(devdir, G_FILE_TEST_IS_DIR)) {
        vrmReportError(VRM_ERR_NO_DEVICE,
                       _("the RDMA device '%1$s' does not exist on this host"), device);
        return -1;
    }
    if (!vrmHelperPortActive(device, port)) {
        vrmReportError(VRM_ERR_NO_DEVICE,
                       _("port %1$u of the RDMA device '%2$s' is not active"),
                       port, device);
        return -1;
    }
    *name = g_strdup(device);
    return 0;
}

/* The network interface under an RDMA port (RoCE): gid_attrs, else parent */
static char *
vrmHelperDeviceNetdev(const char *device, unsigned int port)
{
    g_autofree char *ndev =
        g_strdup_printf("%s/class/infiniband/%s/ports/%u/gid_attrs/ndevs/0",
                        vrmHelperSysfsRoot(), device, port);
    g_autofree char *parent =
        g_strdup_printf("%s/class/infiniband/%s/parent", vrmHelperSysfsRoot(), device);
    char *data = NULL;

    if (g_file_get_contents(ndev, &data, NULL, NULL) ||
        g_file_get_contents(parent, &data, NULL, NULL))
        return g_strstrip(data);
    return NULL;
}

char *
vrmHelperDeviceAddress(const char *device, unsigned int port)
{
    g_autofree char *netdev = vrmHelperDeviceNetdev(device, port ? port : 1);
    struct ifaddrs *ifa = NULL, *i;
    char *found = NULL;
    char *found6 = NULL;

    if (!netdev) {
        vrmReportError(VRM_ERR_NO_DEVICE,
                       _("cannot find the network interface of the RDMA device '%1$s'; set 'address' in the [rdma] group of the configuration"),
                       device);
        return NULL;
    }
    if (getifaddrs(&ifa) < 0) {
        vrmReportSystemError(errno, _("cannot list the addresses of this host"));
        return NULL;
    }
    for (i = ifa; i; i = i->ifa_next) {
        char host[NI_MAXHOST];

        if (!i->ifa_addr || g_strcmp0(i->ifa_name, netdev) != 0)
            continue;
        if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)
            continue;
        if (getnameinfo(i->ifa_addr,
                        i->ifa_addr->sa_family == AF_INET ?
                        sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6),
                        host, sizeof(host), NULL, 0, NI_NUMERICHOST) != 0)
            continue;
        if (i->ifa_addr->sa_family == AF_INET && !found)
            found = g_strdup(host);
        else if (i->ifa_addr->sa_family == AF_INET6 && !found6 && !strchr(host, '%'))
            found6 = g_strdup(host);
    }
    freeifaddrs(ifa);
    if (!found)
        found = g_steal_pointer(&found6);
    g_free(found6);
    if (!found)
        vrmReportError(VRM_ERR_NO_DEVICE,
                       _("the network interface %1$s of the RDMA device '%2$s' has no usable address; set 'address' in the [rdma] group of the configuration"),
                       netdev, device);
    return found;
}

unsigned int
vrmHelperPortPick(unsigned int min, unsigned int max,
                  GHashTable *inUse, unsigned int last)
{
    unsigned int n = max - min + 1;
    unsigned int i;

    if (min == 0 || max < min)
        return 0;
    /* rotate through the range so that a late packet of an old job never
     * meets a new one on the same port */
    for (i = 1; i <= n; i++) {
        unsigned int p = last >= min && last <= max ?
            min + (last - min + i) % n : min + (i - 1);

        if (!g_hash_table_contains(inUse, GUINT_TO_POINTER(p)))
            return p;
    }
    return 0;
}

int
vrmHelperCheckJobLimit(unsigned int running, unsigned int max)
{
    if (running >= max) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("this host already runs %1$u migration jobs, the most its virt-rdmad configuration allows (max-jobs = %2$u)"),
                       running, max);
        return -1;
    }
    return 0;
}
