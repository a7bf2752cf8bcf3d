/*
 * vrmtransport.h: the channel tunnel, public side
 *
 * A vrmEngine is one job on one host: it joins QEMU's UNIX-socket
 * connections (main + multifd) on this host with the peer engine over one RC
 * QP per channel. vrmEngineRun() blocks until every channel has ended in
 * both directions (0) or the job failed (-1, error reported).
 */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "vrmproto.h"

typedef enum {
    VRM_ROLE_SOURCE = 0,
    VRM_ROLE_DESTINATION,

    VRM_ROLE_LAST
} vrmRole;

const char *vrmRoleTypeToString(int role);
int vrmRoleTypeFromString(const char *name);

/* Test hooks, compiled in and documented in virt-rdma-engine(1) */
typedef enum {
    VRM_FAULT_NONE = 0,
    VRM_FAULT_VERSION,          /* destination: connect with version 2 */
    VRM_FAULT_MALFORMED,        /* send a malformed control message */
    VRM_FAULT_KILL,             /* SIGKILL self after `fault_bytes` */

    VRM_FAULT_LAST
} vrmFault;

const char *vrmFaultTypeToString(int fault);
int vrmFaultTypeFromString(const char *name);

typedef struct {
    vrmRole role;
    char *unix_path;            /* source: listen; destination: connect */
    guint32 unix_mode;          /* source socket mode */
    char *rdma_host;            /* source: listen; destination: connect */
    char *rdma_port;
    vrmToken token;
    guint32 channels;
    guint32 chunk_size;
    guint32 ring_depth;
    bool pin_all;
    bool write_imm;
    guint64 max_pinned;         /* 0: no limit of our own */
    char *stats_socket;         /* NULL: none */
    guint32 deadline_connect;   /* seconds */
    guint32 idle_timeout;       /* seconds, 0: none */
    char *device;               /* NULL: any */
    vrmFault fault;
    guint64 fault_bytes;
} vrmSettings;

void vrmSettingsInit(vrmSettings *s);
void vrmSettingsClear(vrmSettings *s);
/* Whole-settings checks (ranges, role-specific options) */
int vrmSettingsValidate(const vrmSettings *s);
/* Worst-case bytes registered by a job with these settings */
guint64 vrmSettingsPinnedBytes(const vrmSettings *s);
/* --max-pinned and RLIMIT_MEMLOCK (unless CAP_IPC_LOCK) */
int vrmSettingsCheckPinned(const vrmSettings *s);

typedef struct _vrmEngine vrmEngine;

vrmEngine *vrmEngineNew(const vrmSettings *settings);
void vrmEngineFree(vrmEngine *engine);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmEngine, vrmEngineFree);

int vrmEngineRun(vrmEngine *engine);
/* Stats of the job as one JSON object (newly allocated) */
char *vrmEngineStatsJSON(vrmEngine *engine);
