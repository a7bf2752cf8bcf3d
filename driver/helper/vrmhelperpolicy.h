/*
 * vrmhelperpolicy.h: what virt-rdmad allows, and the host facts it checks
 *
 * Public API summary
 * ------------------
 *   vrmHelperPeerAllowed(peer, self, allowedGid)   pure decision
 *   vrmHelperPeerCheck(fd, group)                  SO_PEERCRED of a client,
 *                                                  -1 + VRM_ERR_AUTH if refused
 *   vrmHelperSysfsRoot()                           $VRM_SYSFS_ROOT or "/sys"
 *   vrmHelperDeviceNames()                         the RDMA devices in sysfs
 *   vrmHelperDeviceCheck(device, port, &name)      device present, port ACTIVE;
 *                                                  NULL device: the first active
 *   vrmHelperDeviceAddress(device, port)           an IP address of its netdev
 *   vrmHelperPortPick(min, max, inUse, last)       a free rdma_cm port
 *   vrmHelperCheckJobLimit(running, max)           -1 + VRM_ERR_RESOURCE when full
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

typedef struct {
    uid_t uid;
    gid_t gid;
    const gid_t *groups;            /* supplementary groups of uid */
    size_t ngroups;
} vrmHelperPeer;

bool vrmHelperPeerAllowed(const vrmHelperPeer *peer, uid_t self,
                          gid_t allowedGid, bool haveGroup);
int vrmHelperPeerCheck(int fd, const char *group);

const char *vrmHelperSysfsRoot(void);
/* The names of the host's RDMA devices, in the order the first active one
 * is picked (an empty array if sysfs has none) */
GPtrArray *vrmHelperDeviceNames(void);
int vrmHelperDeviceCheck(const char *device, unsigned int port, char **name);
char *vrmHelperDeviceAddress(const char *device, unsigned int port);

/* @inUse: a set of GUINT_TO_POINTER(port); @last: last port given, to rotate */
unsigned int vrmHelperPortPick(unsigned int min, unsigned int max,
                               GHashTable *inUse, unsigned int last);
int vrmHelperCheckJobLimit(unsigned int running, unsigned int max);
