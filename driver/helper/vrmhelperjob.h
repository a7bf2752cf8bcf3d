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
 *   vrmJobStateCanChange(from, to)
 *   vrmHelperJobSetState(job, state, code, error)
 *                                             checked transition, -1 if refused;
 *                                             a final state keeps error and its
 *                                             vrmErrorCode
 *   vrmHelperEngineStatsParse(json, &es)      the engine's stats record
 *   vrmHelperJobApplyStats(job, &es)          stats + state from a snapshot
 *   vrmHelperJobReadLog(job)                  the end of the engine's log
 *   vrmHelperJobKey(token)                    name of a job's UNIX socket,
 *                                             the same on both hosts
 *   vrmHelperJobSave(job, dir)                job-<id>.xml (+ .run if live)
 *   vrmHelperJobRemoveFiles(dir, id)
 *   vrmHelperJobLoadDir(dir)                  every job-*.xml, oldest first
 *   vrmHelperJobCompareId(a, b)               oldest first, for g_ptr_array_sort
 *   vrmHelperJobLog(job, level, event, fmt, ...)
 *                                             a job's important event, with
 *                                             its journal fields (vrmlog.h):
 *                                             JOB_ID, DOMAIN, DOMAIN_UUID,
 *                                             JOB_ROLE, PEER, MESSAGE_ID
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

#include "vrmcontrol.h"
#include "vrmlog.h"
#include "vrmhelperrundir.h"
#include "vrmenginestats.h"
#include "vrmhelpersteer.h"

/* What the engine's stats record says (driver/contract/vrmenginestats.h) */
typedef struct {
    vrmEngineState state;
    char *error;                    /* failed: the engine's reason */
    unsigned int channels;          /* channels of the job */
    unsigned int established;       /* channels whose QP is connected */
    unsigned int qemuConnections;   /* QEMU sockets joined so far */
    unsigned int rdmaPort;          /* source: the rdma_cm port it listens on */
    bool qemuGone;                  /* QEMU had exited when its stream ended */
    vrmJobStats stats;
} vrmEngineSnapshot;

void vrmEngineSnapshotClear(vrmEngineSnapshot *es);

/* A source job's steering rule (the transparent mode, vrmhelpersteer.h) */
typedef enum {
    VRM_JOB_STEER_NONE,         /* none: QEMU's TCP is not steered to it */
    VRM_JOB_STEER_ADDING,       /* nft runs; the offer waits for it */
    VRM_JOB_STEER_ACTIVE,       /* the rules are in the table (steerRules) */
} vrmJobSteer;

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
    int engineSetupFd;              /* its set-up pipe until the child's word
                                     * is in (exec closes it), -1: none */
    guint engineSetupWatch;         /* that pipe's watch in the main loop */
    unsigned long long engineMemlock; /* the limit its set-up had to set */
    char *engineSetupError;         /* why its set-up failed before exec,
                                     * NULL: it did not */
    int engineSetupCode;            /* that error's code (vrmerror.h) */
    GString *stderrBuf;             /* the end of that log, read at the end */
    gint64 connectDeadline;         /* monotonic us: engines must connect by then */
    bool cancelRequested;           /* the job was cancelled: the outcome is cancelled */
    gpointer waiter;                /* daemon: a client waiting for the connect */
    /* ---- kept by virt-rdmad (the engine's identity also in job-ID.run) */
    unsigned long long allowance;   /* pinned bytes it holds in the host's budget */
    int phase;                      /* vrmHelperPhase: where its role's flow
                                     * is (vrmhelperdpriv.h) */
    gpointer peer;                  /* vrmPeerConn of the negotiation, or NULL */
    bool hasToken;                  /* the token, until the engine has it */
    vrmToken token;
    vrmOffer *pendingOffer;         /* source: the offer (with its token) until
                                     * its engine listens and it is sent */
    int qemuListenFd;               /* source: QEMU's socket, until the engine has it */
    int diskListenFd;               /* source: its disks' socket (NBD), likewise */
    int tcpListenFd;                /* source: the TCP listener QEMU's connections
                                     * are steered to, likewise; -1: none */
    vrmJobSteer steer;              /* source: its rule */
    vrmSteerRules steerRules;       /* ... their handles in the table */
    char *steerCgroup;              /* ... the QEMU cgroup they match, NULL:
                                     * only QEMU's uid */
    char *steerDaemonCgroup;        /* ... libvirt's daemon's, likewise */
    unsigned int diskChannels;      /* disk channels of its engine, 0: none */
    guint phaseTimer;               /* the deadline of the phase */
    gpointer probe;                 /* vrmStatsProbe in flight, or NULL */
    bool statsSeen;                 /* the engine answered at least once */
    unsigned int rdmaPort;          /* source: the port its engine listens on */
    unsigned int established;       /* channels its engine has connected */
    uid_t engineUid;                /* who the engine runs as */
    guint64 startTime;              /* field 22 of /proc/PID/stat at spawn */
    vrmDomainDir domainDir;         /* the per-domain directory it made */
    long long qemuUid;              /* the QEMU peer the engine must accept */
    long long qemuPid;
    gint64 adoptDeadline;           /* found after a restart: must answer by then */
    gint64 outcomeDeadline;         /* source: libvirt must tell by then */
    char *unusedWhy;                /* phase unused: the engine's reason,
                                     * if libvirt says the migration failed */
    guint outcomeTimer;
    bool unsaved;                   /* its last record did not reach the disk */
    int eventState;                 /* vrmJobState subscribers last heard, -1: none */
    /* post-copy recovery (issue 17) */
    vrmLocator *sourceLocator;      /* destination: the source's helper (also
                                     * in the .run file while the engine runs) */
    unsigned long long recoveryOf;  /* the broken job this one recovers
                                     * (the destination's id), 0: none */
    unsigned int waitStream;        /* s its engine waits for QEMU, 0: none */
};

/* The events a fleet's log search asks for, each with its MESSAGE_ID
 * (docs/helper.rst lists them) */
typedef enum {
    VRM_JOB_LOG_STARTED,        /* a job began: migrates in or out */
    VRM_JOB_LOG_STATE,          /* connected, transferring */
    VRM_JOB_LOG_ENDED,          /* a final state, with its cause */
    VRM_JOB_LOG_OVER_TCP,       /* RDMA gave way to libvirt's TCP */

    VRM_JOB_LOG_LAST
} vrmJobLogEvent;

const char *vrmJobLogMessageId(vrmJobLogEvent event);

vrmHelperJob *vrmHelperJobNew(unsigned long long id, vrmJobRole role);
void vrmHelperJobFree(vrmHelperJob *job);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmHelperJob, vrmHelperJobFree);

bool vrmJobStateCanChange(vrmJobState from, vrmJobState to);
void vrmHelperJobLog(const vrmHelperJob *job, vrmLogLevel level,
                     vrmJobLogEvent event, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
int vrmHelperJobSetState(vrmHelperJob *job, vrmJobState state, int code,
                         const char *error);

int vrmHelperEngineStatsParse(const char *json, vrmEngineSnapshot *es);
/* Take the stats of @es, and move the state forward if it tells so. */
void vrmHelperJobApplyStats(vrmHelperJob *job, const vrmEngineSnapshot *es);
/* Load the last 16 KiB of the engine's log into stderrBuf */
void vrmHelperJobReadLog(vrmHelperJob *job);
/* The engine's "error:" line in stderrBuf, or NULL */

char *vrmHelperJobKey(const vrmToken *token);

int vrmHelperJobSave(const vrmHelperJob *job, const char *dir);
void vrmHelperJobRemoveFiles(const char *dir, unsigned long long id);
GPtrArray *vrmHelperJobLoadDir(const char *dir);
/* GCompareFunc of g_ptr_array_sort on vrmHelperJob *: by id, oldest first */
gint vrmHelperJobCompareId(gconstpointer a, gconstpointer b);
