/*
 * vrmhelperd.h: the virt-rdmad daemon: control socket, job table, engines
 *
 * Everything runs in one thread, in one GMainLoop: the control socket,
 * the engines' exits (GChildWatch), their stderr, and a timer that reads
 * the stats socket of every live engine. A request that needs an engine
 * to reach a point (source: listening; destination: connected to the
 * source) is answered when it does, when it fails, or at its deadline.
 *
 * Public API summary
 * ------------------
 *   vrmHelperDaemonNew(conf, &opts)   takes the configuration
 *   vrmHelperDaemonStart(d)           directories, records, socket
 *   vrmHelperDaemonRun(d)             until SIGTERM/SIGINT or Stop()
 *   vrmHelperDaemonStop(d)
 *   vrmHelperDaemonFree(d)            engines keep running: a restarted
 *                                     helper finds them again
 *   vrmHelperDaemonSocketPath(d)
 *
 * Replies are written from the loop with a 5 s deadline (local socket,
 * small documents); a client has 10 s to send its request.
 */
#pragma once

#include <glib.h>

#include "vrmhelperconf.h"
#include "vrmhelperjob.h"

typedef struct {
    const char *socketPath;         /* NULL: <run-dir>/virt-rdmad.sock */
    const char *enginePath;         /* NULL: the installed virt-rdma-engine */
    unsigned int connectTimeout;    /* s: engines must connect (default 30) */
    unsigned int idleTimeout;       /* s: engine --idle-timeout (default 120) */
    bool engineDebug;               /* pass --debug to engines */
} vrmHelperOptions;

typedef struct _vrmHelperDaemon vrmHelperDaemon;

vrmHelperDaemon *vrmHelperDaemonNew(vrmHelperConfig *conf,
                                    const vrmHelperOptions *opts);
void vrmHelperDaemonFree(vrmHelperDaemon *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmHelperDaemon, vrmHelperDaemonFree);

int vrmHelperDaemonStart(vrmHelperDaemon *d);
int vrmHelperDaemonRun(vrmHelperDaemon *d);
void vrmHelperDaemonStop(vrmHelperDaemon *d);
const char *vrmHelperDaemonSocketPath(vrmHelperDaemon *d);
