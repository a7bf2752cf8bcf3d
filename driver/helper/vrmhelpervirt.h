/*
 * vrmhelpervirt.h: virt-rdmad's own connection to libvirt
 *
 * libvirt calls block (a migrating domain's state lock can hold
 * virDomainSetMetadata() for 30 s), so none of them runs in the main
 * loop: a worker thread owns the connection and runs the calls one after
 * the other; results come back to the main loop (the default
 * GMainContext) through callbacks; libvirt's events arrive in the main
 * loop too (libvirt's default event implementation is that context) and
 * become work for the worker. The connection is opened when first needed and again after it
 * breaks (libvirtd restarted).
 *
 * What the helper asks libvirt:
 *   - the facts of a domain (by UUID) when a peer helper asks for its
 *     migration: does it exist, is it active, does it have an outgoing
 *     migration job right now (virDomainGetJobStats: operation
 *     MIGRATION_OUT), its <rdma:migration> metadata, the flags of that job
 *     (libvirt's status XML: VIR_MIGRATE_RDMA_PIN_ALL), its QEMU process;
 *   - after a source engine ended: how the migration ended for libvirt
 *     (vrmMigrationOutcome());
 * and what it tells: a domain whose incoming post-copy migration broke
 * (libvirt's event RESUMED / POSTCOPY_FAILED, libvirt >= 8.5), so that the
 * helper can ask for a recovery;
 * and what it keeps up to date: the locator in the live metadata of every
 * running RDMA-enabled domain (at start, on STARTED, RESUMED and on a
 * change of our metadata; set only when different, never while the
 * domain has a job).
 *
 * Public API summary
 * ------------------
 *   vrmHelperVirtNew(uri, locator, tagAll)  vrmHelperVirtFree(v)
 *   vrmHelperVirtStatus(v, &message)      connected? (host-info)
 *   vrmHelperVirtQueryDomain(v, uuid, done, opaque)
 *   vrmHelperVirtQueryOutcome(v, uuid, done, opaque)
 *   vrmHelperVirtOnPostcopyFailed(v, func, opaque)  the incoming one broke
 *   vrmMigrationOutcome(found, state, reason, jobType)   pure decision
 *   vrmDomainFactsSettled(facts)   runs here, no job of libvirt's
 *   vrmOutcomeJobState(outcome)                          the job's state for it
 *   vrmDomainFactsFree(facts)
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

#include "vrmcontrol.h"
#include "vrmmigrationdef.h"

typedef struct _vrmHelperVirt vrmHelperVirt;

typedef struct {
    char *uuid;
    char *error;                /* libvirt could not be asked: why */
    bool found;                 /* a domain of that UUID exists here */
    bool active;
    char *name;
    int jobType;                /* virDomainJobType */
    int operation;              /* VIR_DOMAIN_JOB_OPERATION_*, -1 unknown */
    bool migratingOut;          /* an outgoing migration job right now */
    bool postcopyFailed;        /* paused: its outgoing post-copy broke */
    bool incomingPostcopyFailed; /* running: its incoming post-copy broke */
    bool rdmaEnabled;           /* <rdma:migration> in its live metadata */
    vrmMigrationDef *def;       /* that element, parsed */
    char *defError;             /* present but invalid: why */
    bool knowFlags;             /* the job's flags were readable */
    bool pinAllFlag;            /* VIR_MIGRATE_RDMA_PIN_ALL among them */
    long long qemuPid;          /* -1 unknown */
    long long qemuUid;          /* -1 unknown */
    unsigned int disks;         /* disks --copy-storage-all could copy */
} vrmDomainFacts;

void vrmDomainFactsFree(vrmDomainFacts *facts);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmDomainFacts, vrmDomainFactsFree);

typedef enum {
    VRM_OUTCOME_PENDING,        /* libvirt has not finished yet: ask again */
    VRM_OUTCOME_SUCCEEDED,      /* the domain left this host */
    VRM_OUTCOME_FAILED,         /* it is still here, running, no job */
    VRM_OUTCOME_UNKNOWN,        /* libvirt cannot be asked */
} vrmOutcome;

/* @done takes the facts (free them) */
typedef void (*vrmDomainFactsFunc)(vrmDomainFacts *facts, gpointer opaque);
typedef void (*vrmOutcomeFunc)(vrmOutcome outcome, const char *detail,
                               gpointer opaque);

/* In the main loop: the incoming post-copy migration of @uuid broke */
typedef void (*vrmPostcopyFailedFunc)(const char *uuid, gpointer opaque);

/* @tagAll: [migration] rdma = all (every running domain gets the locator) */
vrmHelperVirt *vrmHelperVirtNew(const char *uri, const vrmLocator *locator, bool tagAll);
void vrmHelperVirtOnPostcopyFailed(vrmHelperVirt *v, vrmPostcopyFailedFunc func,
                                   gpointer opaque);
void vrmHelperVirtFree(vrmHelperVirt *v);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmHelperVirt, vrmHelperVirtFree);

bool vrmHelperVirtStatus(vrmHelperVirt *v, char **message);
void vrmHelperVirtQueryDomain(vrmHelperVirt *v, const char *uuid,
                              vrmDomainFactsFunc done, gpointer opaque);
void vrmHelperVirtQueryOutcome(vrmHelperVirt *v, const char *uuid,
                               vrmOutcomeFunc done, gpointer opaque);

/*
 * How an outgoing migration ended for libvirt, from what the source sees
 * of the domain: gone (a transient domain that left) or shut off because
 * it migrated = succeeded; running with no job = failed; anything else
 * (paused at the end of the migration or in post-copy, a job still
 * there) = pending.
 */
vrmOutcome vrmMigrationOutcome(bool found, int state, int reason, int jobType);
/* The domain runs on this host and libvirt has no job of it (an incoming
 * migration has finished) */
bool vrmDomainFactsSettled(const vrmDomainFacts *f);
/* The source job's final state for @outcome; VRM_JOB_STATE_LAST: pending */
vrmJobState vrmOutcomeJobState(vrmOutcome outcome);
