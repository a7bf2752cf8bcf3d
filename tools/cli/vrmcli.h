/*
 * vrmcli.h: the virt-rdma command's subcommands (one file each) and the
 * helpers they share (vrmcli.c)
 */
#pragma once

#include <glib.h>

#include <libvirt/libvirt.h>

#include "vrmclijson.h"
#include "vrmcontrol.h"

/* Each returns the process exit status: 0 success, 1 failure, 2 usage. */
int vrmCmdMigrate(int argc, char **argv);
int vrmCmdJobInfo(int argc, char **argv);
int vrmCmdJobs(int argc, char **argv);
int vrmCmdEvents(int argc, char **argv);
int vrmCmdUri(int argc, char **argv);
int vrmCmdCapabilities(int argc, char **argv);
int vrmCmdBench(int argc, char **argv);

/* One job as `jobs` and `events` show it (vrmclijobs.c): the other end
 * (NULL if not known yet), "out" or "in", and its JSON object (the "job"
 * of docs/virt-rdma.schema.json), added as the next value of @b */
const char *vrmCliJobPeer(const vrmJobRecord *rec);
const char *vrmCliJobDirection(const vrmJobRecord *rec);
void vrmCliJobFormatJSON(JsonBuilder *b, const vrmJobRecord *rec);

/* "123.456 MiB" like virsh's pretty capacities. */
char *vrmCliPrettySize(unsigned long long bytes);
/* Print "virt-rdma: error: <msg>" on stderr. */
void vrmCliError(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
/* Print "virt-rdma: warning: <msg>" on stderr. */
void vrmCliWarning(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
/* A command's options: @entries (NULL: those already added) into @ctx,
 * then parsed; false with the error printed (the command exits 2) */
bool vrmCliParseOptions(GOptionContext *ctx, const GOptionEntry *entries, int *argc,
                        char ***argv);

/*
 * The domain named by @name as virsh finds it: an ID (a number >= 0), then
 * a UUID, then a name. NULL with "virt-rdma: error: ..." printed.
 */
virDomainPtr vrmCliLookupDomain(virConnectPtr conn, const char *name);
