/*
 * vrmhelperengine.h: virt-rdmad's engines: started with least privilege,
 * followed without blocking, found again only if they are ours
 *
 * Start: the engine program with the job's values, in its own process
 * group; as root, it runs as the engine user and group (no supplementary
 * groups, no capabilities, PR_SET_NO_NEW_PRIVS) with RLIMIT_MEMLOCK set
 * to exactly the job's allowance as the kernel counts it (whole pages per
 * registered region: vrmMemlockBytes()) before the switch; a failure of any of
 * these ends the child before exec, and the job fails with the reason,
 * which comes back on a set-up pipe that the caller watches and reads
 * without blocking (vrmHelperEngineSetupRead), never waits for.
 * The token goes through a pipe, never argv or the environment.
 *
 * Follow: vrmStatsProbe connects to the engine's stats socket without
 * blocking, checks that the process that listens there is the engine
 * (SO_PEERCRED pid), reads its record with a deadline and a size limit,
 * and calls back; a stalled or impostor listener only costs its own probe.
 *
 * Find again after a restart: vrmProcIsOurEngine() holds a recorded pid
 * to the uid, the executable and the start time (field 22 of
 * /proc/PID/stat) recorded at spawn.
 *
 * Public API summary
 * ------------------
 *   vrmHelperEngineSpawn(&launch, &pid, &startTime, &setupFd)
 *   vrmHelperEngineSetupRead(setupFd, memlock)
 *   vrmStatsProbeStart(path, pid, timeoutMs, done, opaque, destroy)  vrmStatsProbeCancel(p)
 *   vrmProcStartTime(pid)  vrmProcIsOurEngine(pid, uid, exe, start)  vrmProcGone(pid)
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

#include "vrmtoken.h"

/* Everything an engine is started with */
typedef struct {
    const char *program;
    bool source;
    const char *domainUUID;
    const char *qemuPath;           /* the per-domain socket */
    int qemuListenFd;               /* source: bound by the helper, -1: none */
    unsigned int diskChannels;      /* QEMU's NBD connections, 0: none */
    const char *diskPath;           /* destination: QEMU's NBD server */
    int diskListenFd;               /* source: bound by the helper, -1: none */
    int tcpListenFd;                /* source, transparent mode: the TCP
                                     * listener QEMU is steered to, -1: none */
    unsigned int tcpPortMin;        /* destination: libvirt's migration ports */
    unsigned int tcpPortMax;        /* (the transparent mode), 0: none */
    long long qemuUid;              /* expected QEMU uid, -1 unknown */
    long long qemuPid;              /* source: expected QEMU pid, -1 unknown */
    const char *address;            /* rdma_cm: source listens, destination connects */
    unsigned int port;
    unsigned int channels;
    unsigned int chunkSize;
    unsigned int ringDepth;
    guint32 caps;                   /* agreed, util/vrmcapability.h bits */
    unsigned long long allowance;   /* RLIMIT_MEMLOCK and --max-pinned */
    const char *device;
    const vrmToken *token;
    const char *statsSocket;
    const char *statsFile;          /* final record (opened here, passed as a fd) */
    const char *logFile;            /* standard error: for people, never parsed */
    unsigned int connectTimeout;
    unsigned int idleTimeout;
    unsigned int waitStream;        /* engine --wait-stream, 0: none */
    bool debug;
    bool dropPrivileges;            /* as root: become uid:gid below */
    uid_t uid;
    gid_t gid;
} vrmEngineLaunch;

/* @setupFd: the set-up pipe's read end (non-blocking), the caller's to
 * watch and close */
int vrmHelperEngineSpawn(const vrmEngineLaunch *launch, GPid *pid,
                         guint64 *startTime, int *setupFd);
/* What the child said on the set-up pipe @fd, without waiting: 0 nothing
 * yet, 1 it is the engine now (exec closed the pipe: close it), -1 its
 * set-up failed, reported (@memlock: the limit it had to set) */
int vrmHelperEngineSetupRead(int fd, unsigned long long memlock);
/* The engine's RLIMIT_MEMLOCK: its allowance as the kernel counts it */
unsigned long long vrmHelperEngineMemlock(const vrmEngineLaunch *launch);

typedef struct _vrmStatsProbe vrmStatsProbe;
/* @text: the record, or NULL if the engine did not answer in time; the
 * callback owns @opaque */
typedef void (*vrmStatsProbeFunc)(const char *text, gpointer opaque);

/* @destroy frees @opaque when the probe is cancelled before it ends */
vrmStatsProbe *vrmStatsProbeStart(const char *path, pid_t pid,
                                  unsigned int timeoutMs,
                                  vrmStatsProbeFunc done, gpointer opaque,
                                  GDestroyNotify destroy);
void vrmStatsProbeCancel(vrmStatsProbe *probe);

guint64 vrmProcStartTime(pid_t pid);
bool vrmProcIsOurEngine(pid_t pid, uid_t uid, const char *exe,
                        guint64 startTime);
bool vrmProcGone(pid_t pid);
