/*
 * vrmhelperd.h: the virt-rdmad daemon
 *
 * One GMainLoop; nothing in it blocks: control clients and peer helpers
 * are served through fd watches with per-connection state and deadlines,
 * engines are followed through non-blocking probes of their stats
 * sockets, libvirt is asked from a worker thread (vrmhelpervirt.h).
 * The parts are described in vrmhelperdpriv.h; docs/helper.rst and
 * docs/negotiation.rst tell the whole story.
 *
 * Public API summary
 * ------------------
 *   vrmHelperDaemonNew(conf, &opts)   takes the configuration
 *   vrmHelperDaemonStart(d)           users, directories, the helpers'
 *                                     channel, libvirt, records, socket
 *   vrmHelperDaemonRun(d)             until SIGTERM/SIGINT or Stop()
 *   vrmHelperDaemonStop(d)
 *   vrmHelperDaemonFree(d)            engines keep running: a restarted
 *                                     helper finds them again
 *   vrmHelperDaemonSocketPath(d)
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

#include "vrmhelperconf.h"

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
