/*
 * vrmhelperdpriv.h: the state of virt-rdmad, shared by its parts
 *
 * The daemon is split along its seams, each part calling only the parts
 * below it (tests/layering checks that no two files call each other):
 *
 *   vrmhelperd.c       life cycle, the control socket's requests, intents,
 *                      host information
 *   vrmhelpersource.c  a peer asks for a domain migrating out of this host
 *   vrmhelperdest.c    the hook says a domain migrates in: ask its source
 *   vrmhelperjobs.c    the job table: budget, records, engines (spawn,
 *                      stats, exit, adoption after a restart), the end of
 *                      a job
 *   below:             vrmhelperconn (clients), vrmhelperpeer (TLS),
 *                      vrmhelpervirt (libvirt), vrmhelperengine,
 *                      vrmhelperrundir, vrmhelperjob, vrmhelperpolicy
 *
 * Calls that go up (an engine answered, ended) go through the function
 * pointers of vrmHelperRoleOps, which the flows register.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

#include "vrmhelperd.h"
#include "vrmhelperconn.h"
#include "vrmhelperjob.h"
#include "vrmhelpermetrics.h"
#include "vrmhelperpeer.h"
#include "vrmhelperratelimit.h"
#include "vrmhelperrundir.h"
#include "vrmhelpersteer.h"
#include "vrmhelpervirt.h"
#include "vrmnegotiation.h"

/* Where a job's flow is (vrmHelperJob.phase); vrmHelperPhaseExpects()
 * says which peer message each one waits for */
typedef enum {
    VRM_PHASE_NONE,             /* none yet (a record loaded, not adopted) */
    /* source */
    VRM_PHASE_SRC_STARTING,     /* engine spawned, not yet listening */
    VRM_PHASE_SRC_OFFERED,      /* offer sent, waiting for the answer */
    VRM_PHASE_SRC_RUNNING,      /* result ok sent: QEMU's turn */
    VRM_PHASE_SRC_OUTCOME,      /* engine ended: asking libvirt how it went */
    VRM_PHASE_SRC_UNUSED,       /* engine ended with no stream of QEMU's:
                                 * did libvirt migrate over its own TCP? */
    /* destination */
    VRM_PHASE_DST_CONNECTING,   /* reaching the source's helper */
    VRM_PHASE_DST_REQUESTED,    /* request sent, waiting for the offer */
    VRM_PHASE_DST_STARTING,     /* engine spawned, not yet connected */
    VRM_PHASE_DST_ANSWERED,     /* answer sent, waiting for the result */
    VRM_PHASE_DST_RUNNING,      /* the hook has its reply: QEMU's turn */
    VRM_PHASE_DST_UNUSED,       /* engine ended with no stream of QEMU's:
                                 * does the domain run here (libvirt's TCP)? */

    VRM_PHASE_LAST
} vrmHelperPhase;
VRM_ENUM_DECL(vrmHelperPhase);

/* The peer message @phase waits for, VRM_PEER_LAST for none: anything else
 * from the peer but a refusal (a result with an error) is out of turn */
vrmPeerType vrmHelperPhaseExpects(vrmHelperPhase phase);

/* A job's engine is polled this often, and this often while a job
 * negotiates (its wait lies on the migration's critical path) */
#define VRM_HELPER_POLL_MS 200
#define VRM_HELPER_WAIT_POLL_MS 20
/* and each newly negotiating job's engine first after this, then after
 * twice as long each time while that is at most half VRM_HELPER_WAIT_POLL_MS
 * (2, 6, 14 ms):
 * an engine is ready within a few ms, and half a poll's wait was most of
 * a negotiation once the peers' channel stopped waiting for Nagle */
#define VRM_HELPER_WAIT_FIRST_MS 2
/* A peer check waits for the other helper's handshake back this much
 * longer than [peers] timeout */
#define VRM_HELPER_REACH_MARGIN_S 5
/* A live engine must answer a probe within this */
#define VRM_HELPER_PROBE_TIMEOUT_MS 1000
/* After a restart, how long an engine may take to answer */
#define VRM_HELPER_ADOPT_TIMEOUT_S 10
/* A record that could not be written (state directory full) is tried
 * again this often */
#define VRM_HELPER_SAVE_RETRY_S 10
/* While jobs run, the metrics file is written this often (and whenever
 * a job starts or ends) */
#define VRM_HELPER_METRICS_INTERVAL_S 5
/* How long libvirt may take to finish after the source engine ended */
#define VRM_HELPER_OUTCOME_TIMEOUT_S 30
#define VRM_HELPER_OUTCOME_POLL_MS 250
/* An intent is used by a migration within this, or forgotten */
#define VRM_HELPER_INTENT_TTL_S 120
#define VRM_HELPER_INTENTS_MAX 1024
#define VRM_HELPER_INTENTS_PER_OWNER 32
/* A post-copy recovery is asked once the broken job has ended on both
 * hosts (its engines see the break within seconds): each side looks this
 * often, this many times */
#define VRM_HELPER_RECOVERY_POLL_MS 1000
#define VRM_HELPER_RECOVERY_TRIES 20   /* within the 15 s + [peers] timeout a
                                         * request waits for its offer */

/* A job by its id: timers and callbacks carry this, never the job */
typedef struct {
    vrmHelperDaemon *d;
    unsigned long long id;
} vrmHelperJobRef;

vrmHelperJobRef *vrmHelperJobRefNew(vrmHelperDaemon *d, vrmHelperJob *job);

typedef struct _vrmHelperIntent vrmHelperIntent;
struct _vrmHelperIntent {
    vrmIntentRecord *record;        /* what its owner sees */
    uid_t owner;
    vrmMigrationParams *overrides;  /* NULL: none */
    gint64 expires;                 /* monotonic us */
};

typedef struct {
    /* the engine answered a probe: the job's stats are fresh */
    void (*stats)(vrmHelperDaemon *d, vrmHelperJob *job);
    /* the engine ended (exit or, adopted, gone) with @state and @reason,
     * before the job is finished: the flow may finish it differently */
    void (*ended)(vrmHelperDaemon *d, vrmHelperJob *job, vrmJobState state,
                  const char *reason);
    /* the job is being finished: give up a negotiation or a waiter */
    void (*finishing)(vrmHelperDaemon *d, vrmHelperJob *job);
    /* after a restart: the job's engine had ended while nobody watched,
     * and the job is now finished */
    void (*endedUnwatched)(vrmHelperDaemon *d, vrmHelperJob *job);
} vrmHelperRoleOps;

struct _vrmHelperDaemon {
    vrmHelperConfig *conf;
    vrmHostPolicy policy;
    char *socketPath;
    char *enginePath;
    unsigned int connectTimeout;
    unsigned int idleTimeout;
    bool engineDebug;
    GMainLoop *loop;
    vrmRunDir *runDir;
    int listenFd;
    bool ownSocket;                 /* we bound it: remove it at the end */
    vrmHelperServer *server;
    /* the helpers' channel */
    vrmPeerCreds *peerCreds;        /* NULL: off */
    char *peerProblem;              /* why it is off or broken, NULL: fine */
    vrmPeerServer *peerServer;
    vrmLocator *locator;            /* ours, NULL if the channel is off */
    vrmHelperVirt *virt;
    vrmSteer *steer;                /* the transparent mode's rules, NULL: off */
    /* users */
    bool haveGroup;
    gid_t accessGid;
    bool haveLibvirtGroup;          /* [access] libvirt-group exists */
    gid_t libvirtGid;
    bool engineUserOk;
    char *engineProblem;            /* why engines cannot run */
    uid_t engineUid;
    gid_t engineGid;
    uid_t qemuUid;                  /* the destination QEMU's user */
    /* sources */
    guint pollTimer;
    guint waitTimer;                /* runs while some job negotiates */
    guint intentTimer;
    guint sigterm;
    guint sigint;
    GHashTable *jobs;               /* id -> vrmHelperJob */
    unsigned int unsavedJobs;       /* jobs whose record is not on disk */
    gint64 saveRetryAt;             /* monotonic us: when to try them again */
    GHashTable *intents;            /* id -> vrmHelperIntent */
    unsigned long long nextId;
    unsigned long long nextIntent;
    unsigned int lastPort;
    const vrmHelperRoleOps *ops[VRM_JOB_ROLE_LAST];
    vrmRateLimit peerLog;           /* refused peer requests */
    vrmRateLimit clientLog;         /* refused clients */
    /* metrics for node-exporter (vrmhelpermetrics.h) */
    char *metricsDir;               /* [metrics] textfile-dir if it exists,
                                     * NULL: off */
    vrmHelperMetrics metrics;       /* the counters; the gauges are taken
                                     * from the job table when written */
    gint64 metricsWrittenAt;        /* monotonic us */
    bool metricsFailing;            /* the last write failed */
    vrmRateLimit metricsLog;        /* failed writes */
};

/* ---- vrmhelperjobs.c ---- */
vrmHelperJob *vrmHelperJobsCreate(vrmHelperDaemon *d, vrmJobRole role,
                                  const char *name, const char *uuid);
vrmHelperJob *vrmHelperJobsGet(vrmHelperDaemon *d, unsigned long long id);
GPtrArray *vrmHelperJobsSorted(vrmHelperDaemon *d);
vrmHelperJob *vrmHelperJobsLiveOfDomain(vrmHelperDaemon *d, const char *uuid);
/* The newest job of @role for the domain, finished or not, or NULL */
vrmHelperJob *vrmHelperJobsLastOfDomain(vrmHelperDaemon *d, const char *uuid,
                                        vrmJobRole role);
unsigned int vrmHelperJobsLive(vrmHelperDaemon *d, GHashTable *ports);
unsigned long long vrmHelperJobsPinned(vrmHelperDaemon *d);
int vrmHelperJobsReserve(vrmHelperDaemon *d, vrmHelperJob *job,
                         unsigned long long allowance);
void vrmHelperJobsSave(vrmHelperDaemon *d, vrmHelperJob *job);
/* A phase's time ran out, and @job is still there */
typedef void (*vrmHelperPhaseExpiredFunc)(vrmHelperDaemon *d, vrmHelperJob *job);
void vrmHelperJobsSetPhase(vrmHelperDaemon *d, vrmHelperJob *job, vrmHelperPhase phase,
                           unsigned int timeoutS, vrmHelperPhaseExpiredFunc expired);
vrmHelperJob *vrmHelperJobsOfPeer(vrmHelperDaemon *d, vrmPeerConn *pc);
int vrmHelperJobsSpawn(vrmHelperDaemon *d, vrmHelperJob *job,
                       const vrmOffer *offer, const vrmAnswer *answer,
                       const char *device);
void vrmHelperJobsKill(vrmHelperJob *job, int sig);
/* The negotiation failed: tell the peer helper why (if it still listens)
 * and end the engine; the flow ends the job */
void vrmHelperJobsAbort(vrmHelperJob *job, int code, const char *why);
/* How a flow fails a job (vrmSourceFail, vrmDestFail) */
typedef void (*vrmHelperJobFailFunc)(vrmHelperDaemon *d, vrmHelperJob *job,
                                     int code, const char *why);
/* @fail with this thread's last error */
void vrmHelperJobsFailLast(vrmHelperDaemon *d, vrmHelperJob *job,
                           vrmHelperJobFailFunc fail);
/* The vrmErrorCode of the engine's end: its set-up's, else the peer's */
int vrmHelperJobsEndedCode(const vrmHelperJob *job);
/* The engine ended during the negotiation: @fail with its @reason, or
 * @otherwise if it gave none */
void vrmHelperJobsFailEnded(vrmHelperDaemon *d, vrmHelperJob *job,
                            vrmHelperJobFailFunc fail, const char *reason,
                            const char *otherwise);
/* The engine has exited and its end was heard: no watch, no pid; the job
 * goes on (libvirt is asked how the migration went) */
void vrmHelperJobsEngineGone(vrmHelperJob *job);
/* End @job in @state; @code: the vrmErrorCode of @error (VRM_ERR_OK with
 * no error); a job whose cancel was asked for ends cancelled */
void vrmHelperJobsFinish(vrmHelperDaemon *d, vrmHelperJob *job,
                         vrmJobState state, int code, const char *error);
void vrmHelperJobsWatchWaiters(vrmHelperDaemon *d, vrmHelperJob *job);
void vrmHelperJobsStartPolling(vrmHelperDaemon *d);
void vrmHelperJobsRecover(vrmHelperDaemon *d);
void vrmHelperJobsDropToken(vrmHelperJob *job);
/* [metrics] textfile-dir: on if it exists, and the file written at once */
void vrmHelperJobsMetricsStart(vrmHelperDaemon *d);
void vrmHelperJobsMetricsWrite(vrmHelperDaemon *d);

vrmHelperIntent *vrmHelperIntentsTake(vrmHelperDaemon *d, const char *uuid,
                                      unsigned long long jobId);
void vrmHelperIntentsExpire(vrmHelperDaemon *d);
void vrmHelperIntentsDropEnded(vrmHelperDaemon *d);
void vrmHelperIntentFree(vrmHelperIntent *intent);

/* ---- vrmhelperevents.c ---- */
/* root and the helper's own user see every job; others those they opened */
bool vrmHelperCredSees(const vrmHelperCred *cred, const vrmJobRecord *rec);
/* <job-events/>: keep @c as a subscriber, or refuse it (caps) */
void vrmHelperEventsSubscribe(vrmHelperDaemon *d, vrmHelperConn *c);
/* @job changed state: tell the subscribers that may see it */
void vrmHelperEventsJobChanged(vrmHelperDaemon *d, vrmHelperJob *job);
/* ---- vrmhelperd.c ---- */
/* An intent's overrides against the host's limits; -1 reported (pure,
 * fuzzed by tests/fuzz/vrmcontrolfuzz.c) */
int vrmHelperPrepareCheck(const vrmHelperConfig *conf, const vrmHostPolicy *policy,
                          const vrmMigrationParams *overrides);

/* ---- vrmhelpersource.c ---- */
extern const vrmHelperRoleOps vrmHelperSourceOps;
void vrmHelperSourceAccept(vrmPeerConn *pc, gpointer opaque);
/* A peer's first message: a request of our version whose requester's
 * address is @from (the connection's); -1 reported otherwise. Pure
 * (fuzzed by tests/fuzz/vrmpeerfuzz.c) */
int vrmHelperSourceCheckRequest(const vrmPeerMessage *msg, const char *from);

/* ---- vrmhelperdest.c ---- */
extern const vrmHelperRoleOps vrmHelperDestOps;
void vrmHelperDestIncoming(vrmHelperDaemon *d, vrmControlMessage *msg,
                           vrmHelperConn *c);
/* vrmPostcopyFailedFunc (opaque: the daemon) */
void vrmHelperDestPostcopyFailed(const char *uuid, gpointer opaque);
