/*
 * vrmcli.h: the virt-rdma command's subcommands (one file each) and the
 * helpers they share (vrmcli.c)
 */
#pragma once

#include <glib.h>

#include <libvirt/libvirt.h>

/* Each returns the process exit status: 0 success, 1 failure, 2 usage. */
int vrmCmdMigrate(int argc, char **argv);
int vrmCmdJobInfo(int argc, char **argv);
int vrmCmdJobs(int argc, char **argv);
int vrmCmdUri(int argc, char **argv);
int vrmCmdCapabilities(int argc, char **argv);
int vrmCmdBench(int argc, char **argv);

/* "123.456 MiB" like virsh's pretty capacities. */
char *vrmCliPrettySize(unsigned long long bytes);
/* Print "virt-rdma: error: <msg>" on stderr. */
void vrmCliError(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

/*
 * The domain named by @name as virsh finds it: an ID (a number >= 0), then
 * a UUID, then a name. NULL with "virt-rdma: error: ..." printed.
 */
virDomainPtr vrmCliLookupDomain(virConnectPtr conn, const char *name);
