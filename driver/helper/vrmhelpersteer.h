/*
 * vrmhelpersteer.h: the transparent mode's steering on a source host
 *
 * A migration that libvirt sends over its own TCP transport (an
 * orchestrator's tcp://HOST URI, or none) is carried over RDMA when the
 * source helper steers that QEMU's connections (and those libvirt's daemon
 * makes for it) into the job's engine: one or two nftables rules per job,
 * one job at a time, in a table of our own (docs/transparent.rst):
 *
 *   table inet virt_rdma {
 *       chain output { type nat hook output priority -110; policy accept; }
 *   }
 *
 * The table is made afresh when the helper starts (nothing a crash left
 * survives a restart); each rule is added and deleted by its handle with
 * nft(8), asynchronously: the helper's loop never waits for it, and every
 * run has a deadline.
 *
 * Public API summary
 * ------------------
 *   vrmSteerNew(nft)                    the table's handle; @nft the program
 *                                       (NULL: VRM_STEER_NFT)
 *   vrmSteerFree(steer)
 *   vrmSteerReset(steer)                at start-up: the empty table; -1 +
 *                                       VRM_ERR_CONFIG (nft missing, no NAT)
 *   vrmSteerDrop(steer)                 at a clean stop: the table goes
 *                                       (logged if nft fails)
 *   vrmSteerProblem(steer)              why steering is off, or NULL
 *   vrmSteerRuleText(match, port, job)  the rules of a job (unit-tested)
 *   vrmSteerQemuCgroup(pid, &level)     the cgroup (v2) of a domain's QEMU
 *                                       that no other domain shares, or NULL
 *   vrmSteerCgroupParse(text, &level)   the same from /proc/PID/cgroup's text
 *   vrmSteerLibvirtDaemon(runDir)       the pid of libvirt's daemon, or -1
 *   vrmSteerDaemonCgroupParse(text, &level)
 *                                       its cgroup, in full, or NULL (none)
 *   vrmSteerAdd(steer, match, port, job, cb, data)
 *                                       async: cb(rules, error, data) later;
 *                                       -1 (reported, no cb) if nft cannot run;
 *                                       an add without its handles deletes
 *                                       the rules if nft made them after all
 *   vrmSteerRemove(steer, rules)        async, best effort (logged)
 *   vrmSteerRulesFormat(rules)          "12 13", for the log
 *   vrmSteerParseHandle(line)           "# handle N" of nft --echo --handle
 *   vrmSteerParseHandles(output, &rules) every line's
 *   vrmSteerParseJobHandles(list, job, &rules)
 *                                       the handles of a job's rules in a
 *                                       listing (nft --handle list chain)
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

#define VRM_STEER_TABLE "virt_rdma"
/* Debian's nftables: an absolute path, never PATH, for a program root runs */
#define VRM_STEER_NFT "/usr/sbin/nft"
#define VRM_STEER_CHAIN "output"
/* before a host firewall's NAT (srcnat 100, dstnat -100 in output) */
#define VRM_STEER_PRIORITY -110
/* a job's rule says whose it is (%llu: the job's id) */
#define VRM_STEER_COMMENT "virt-rdma job %llu"
/* where libvirt's daemon writes its pid file (libvirtd.pid, virtqemud.pid) */
#define VRM_STEER_LIBVIRT_RUN_DIR "/run"
/* s: one run of nft */
#define VRM_STEER_NFT_TIMEOUT_S 10

/* Which of a source host's connections are the job's QEMU's migration:
 * QEMU's own and those libvirt's daemon makes for it (the main stream of
 * a migration that is not parallel: libvirt connects, then hands QEMU the
 * socket) */
typedef struct {
    uid_t qemuUid;              /* the socket's owner */
    const char *cgroup;         /* its QEMU's own cgroup (v2), NULL: none */
    unsigned int cgroupLevel;   /* that path's depth */
    uid_t daemonUid;            /* libvirt's daemon */
    const char *daemonCgroup;   /* its cgroup (v2), NULL: none of its own */
    unsigned int daemonCgroupLevel;
    unsigned int portMin;       /* libvirt's migration ports on the */
    unsigned int portMax;       /* destination (migration_port_min/max) */
} vrmSteerMatch;

typedef struct _vrmSteer vrmSteer;

/* A job's rules in the table: QEMU's and the daemon's */
#define VRM_STEER_RULES_MAX 2
typedef struct {
    guint64 handle[VRM_STEER_RULES_MAX];
    guint n;                    /* 0: none */
} vrmSteerRules;

/* @rules: what was added (none on failure); @error: why, NULL on success */
typedef void (*vrmSteerAddedFunc)(const vrmSteerRules *rules, const char *error,
                                  gpointer opaque);

vrmSteer *vrmSteerNew(const char *nft);
void vrmSteerFree(vrmSteer *steer);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmSteer, vrmSteerFree);

int vrmSteerReset(vrmSteer *steer);
void vrmSteerDrop(vrmSteer *steer);
const char *vrmSteerProblem(const vrmSteer *steer);
char *vrmSteerRuleText(const vrmSteerMatch *match, unsigned int port,
                       unsigned long long jobId);
char *vrmSteerQemuCgroup(pid_t pid, unsigned int *level);
char *vrmSteerCgroupParse(const char *text, unsigned int *level);
pid_t vrmSteerLibvirtDaemon(const char *runDir);
char *vrmSteerDaemonCgroupParse(const char *text, unsigned int *level);
int vrmSteerAdd(vrmSteer *steer, const vrmSteerMatch *match, unsigned int port,
                unsigned long long jobId, vrmSteerAddedFunc cb, gpointer opaque);
void vrmSteerRemove(vrmSteer *steer, const vrmSteerRules *rules);
char *vrmSteerRulesFormat(const vrmSteerRules *rules);
guint64 vrmSteerParseHandle(const char *output);
guint vrmSteerParseHandles(const char *output, vrmSteerRules *rules);
guint vrmSteerParseJobHandles(const char *listing, unsigned long long jobId,
                              vrmSteerRules *rules);
