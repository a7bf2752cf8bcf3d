/*
 * vrmhelperjob.h: one migration job of virt-rdmad and its lifecycle
 *
 * A job is one engine process on this host. Its public side is a
 * vrmJobRecord (xml/vrmcontrol.h): that is what clients see and what is
 * persisted as <state-dir>/job-<id>.xml. While the engine runs, a second
 * file, <state-dir>/job-<id>.run (a key file: pid, stats socket, stats
 * file, rdma_cm port), lets a restarted helper find the engine again.
 *
 * State machine (vrmJobState), forward only:
 *
 *   negotiating -> connected -> transferring -> completed
 *        \             \             \-------> failed | cancelled
 *         \             \--------------------> completed | failed | cancelled
 *          \---------------------------------> completed | failed | cancelled
 *
 * completed, failed and cancelled are final: nothing leaves them.
 *
 * Public API summary
 * ------------------
 *   vrmHelperJobNew(id, role) / Free
 *   vrmJobStateIsFinal(state)
 *   vrmJobStateCanChange(from, to)
 *   vrmHelperJobSetState(job, state, error)   checked transition, -1 if refused
 *   vrmHelperEngineStatsParse(json, &es)      the engine's stats record
 *   vrmHelperJobApplyStats(job, &es)          stats + state from a snapshot
 *   vrmHelperJobReadLog(job)                  the end of the engine's log
 *   vrmHelperJobKey(token)                    name of a job's UNIX socket,
 *                                             the same on both hosts
 *   vrmHelperJobSave(job, dir)                job-<id>.xml (+ .run if live)
 *   vrmHelperJobRemoveFiles(dir, id)
 *   vrmHelperJobLoadDir(dir)                  every job-*.xml, oldest first
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

#include "vrmcontrol.h"
#include "vrmenginestats.h"

/* What the engine's stats record says (driver/contract/vrmenginestats.h) */
typedef struct {
    vrmEngineState state;
    char *error;                    /* failed: the engine's reason */
    unsigned int channels;          /* channels of the job */
    unsigned int established;       /* channels whose QP is connected */
    unsigned int qemuConnections;   /* QEMU sockets joined so far */
    vrmJobStats stats;
} vrmEngineSnapshot;

void vrmEngineSnapshotClear(vrmEngineSnapshot *es);

typedef struct _vrmHelperJob vrmHelperJob;
struct _vrmHelperJob {
    vrmJobRecord *record;           /* public side, persisted */
    GPid pid;                       /* engine process, 0 if none or ended */
    bool adopted;                   /* found after a restart: not our child */
    unsigned int cmPort;            /* source: rdma_cm port held, 0: none */
    char *statsSocket;              /* engine's --stats-socket */
    char *statsFile;                /* engine's --stats-file (final stats) */
    char *logFile;                  /* engine's stderr: <state-dir>/job-<id>.log */
    guint childWatch;               /* GChildWatch of pid (children only) */
    GString *stderrBuf;             /* the end of that log, read at the end */
    gint64 connectDeadline;         /* monotonic us: engines must connect by then */
    bool cancelRequested;           /* the job was cancelled: the outcome is cancelled */
    gpointer waiter;                /* daemon: a client waiting for the connect */
};

vrmHelperJob *vrmHelperJobNew(unsigned long long id, vrmJobRole role);
void vrmHelperJobFree(vrmHelperJob *job);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmHelperJob, vrmHelperJobFree);

bool vrmJobStateIsFinal(vrmJobState state);
bool vrmJobStateCanChange(vrmJobState from, vrmJobState to);
int vrmHelperJobSetState(vrmHelperJob *job, vrmJobState state,
                         const char *error);

int vrmHelperEngineStatsParse(const char *json, vrmEngineSnapshot *es);
/* Take the stats of @es, and move the state forward if it tells so. */
void vrmHelperJobApplyStats(vrmHelperJob *job, const vrmEngineSnapshot *es);
/* Load the last 16 KiB of the engine's log into stderrBuf */
void vrmHelperJobReadLog(vrmHelperJob *job);
/* The engine's "error:" line in stderrBuf, or NULL */
char *vrmHelperJobEngineError(const vrmHelperJob *job);

char *vrmHelperJobKey(const vrmToken *token);

int vrmHelperJobSave(const vrmHelperJob *job, const char *dir);
void vrmHelperJobRemoveFiles(const char *dir, unsigned long long id);
GPtrArray *vrmHelperJobLoadDir(const char *dir);
