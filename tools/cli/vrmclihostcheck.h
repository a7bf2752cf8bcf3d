/*
 * vrmclihostcheck.h: the manual steps of an install, as `virt-rdma
 * capabilities` checks them on this host
 *
 *   vrmHostCheckHookLoaded(root, hook, &detail)
 *       libvirt runs the hooks that existed when its daemon started: one
 *       installed later runs only once the daemon restarts (libvirtd, or
 *       virtqemud with the modular daemons)
 *   vrmHostCheckAppArmor(root, &detail)
 *       with AppArmor on and libvirt confining QEMU, virt-rdma's rule
 *       (abstractions/virt-rdma-qemu) reaches the guests' profiles only
 *       through an include in local/abstractions/libvirt-qemu, or a file of
 *       abstractions/libvirt-qemu.d where libvirt reads that directory
 *       (the package's drop-in: libvirt 10 and later)
 * Every path is read under @root: "" on a host, a test's tree in tests.
 * @detail: one translated sentence saying what was found (and, for a
 * problem, what to type).
 */
#pragma once

#include <glib.h>

typedef enum {
    VRM_HOST_CHECK_OK,
    VRM_HOST_CHECK_PROBLEM,         /* a step is missing: @detail says which */
    VRM_HOST_CHECK_UNKNOWN,         /* cannot be told from here */
    VRM_HOST_CHECK_NOT_APPLICABLE,  /* nothing to check on this host */
} vrmHostCheck;

const char *vrmHostCheckName(vrmHostCheck check);
vrmHostCheck vrmHostCheckHookLoaded(const char *root, const char *hook, char **detail);
vrmHostCheck vrmHostCheckAppArmor(const char *root, char **detail);
