/*
 * vrmcapability.h: the capability flags of a migration, one row each
 *
 * 32-bit flags (bits in vrmlimits.h); the seed's rule: unknown bits are
 * ignored and the agreed set is the intersection of both sides' known bits.
 *
 * Public API summary
 * ------------------
 *   vrmCapabilityTypeToString/FromString   "pin-all", "write-imm", "disks", "tcp"
 *   vrmCapabilityGetInfo(cap)              bit, scope, side, default, CLI option, help
 *   vrmCapabilityKnownMask()               bits this build understands
 *   vrmCapabilityMigrationMask()           ... of them those a migration's
 *                                          parameters name (the domain XML)
 *   vrmCapabilityDefaultMask()             bits on unless switched off
 *   vrmCapabilityIntersect(src, dst)       agreed bits
 *   vrmCapabilityForSide(flags, side)      bits a given side acts on
 *   vrmCapabilityFormat(flags)             "pin-all, write-imm" ("none")
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

#include "vrmenum.h"
#include "vrmlimits.h"

typedef enum {
    VRM_CAPABILITY_PIN_ALL,        /* register whole rings up front (seed: PIN_ALL) */
    VRM_CAPABILITY_WRITE_IMM,      /* data notified by RDMA WRITE_WITH_IMM */
    VRM_CAPABILITY_DISKS,          /* disk channels (QEMU's NBD connections) */
    VRM_CAPABILITY_TCP,            /* channels opened for steered TCP connections */

    VRM_CAPABILITY_LAST
} vrmCapability;
VRM_ENUM_DECL(vrmCapability);

/* Which migrations of libvirt's own TCP transport this host carries over
 * RDMA, as their source: the transparent mode's host-wide default
 * (docs/transparent.rst). Here because the helper's configuration and the
 * control socket's host-info (xml/) both name it. */
typedef enum {
    VRM_RDMA_DEFAULT_TAGGED,    /* those of guests with <rdma:migration> */
    VRM_RDMA_DEFAULT_ALL,       /* every guest's, but those whose metadata
                                 * says enabled="no" */
    VRM_RDMA_DEFAULT_OFF,       /* none: only the per-domain path's */

    VRM_RDMA_DEFAULT_LAST
} vrmRdmaDefault;
VRM_ENUM_DECL(vrmRdmaDefault);

typedef enum {
    VRM_SIDE_SOURCE = 1 << 0,
    VRM_SIDE_DESTINATION = 1 << 1,
    VRM_SIDE_BOTH = VRM_SIDE_SOURCE | VRM_SIDE_DESTINATION,
} vrmSide;

/* Who decides a capability. Both kinds travel in the engines' connect
 * private data and are agreed there by vrmCapabilityIntersect. */
typedef enum {
    VRM_CAPABILITY_SCOPE_MIGRATION, /* the migration's parameters: metadata,
                                     * offer and answer, the engine's options */
    VRM_CAPABILITY_SCOPE_ENGINE,    /* what the engine was started to carry
                                     * (disk channels, steered TCP) */
} vrmCapabilityScope;

typedef struct {
    vrmCapability cap;
    guint32 bit;            /* flag in the offer/answer and connect private data */
    vrmCapabilityScope scope;
    vrmSide side;           /* whose engine acts on it once agreed */
    bool defaultOn;         /* asked for unless switched off */
    const char *option;     /* virt-rdma migrate option that switches it on;
                             * NULL: only the metadata does */
    const char *help;       /* N_() text for --help and docs */
} vrmCapabilityInfo;


const vrmCapabilityInfo *vrmCapabilityGetInfo(vrmCapability cap);
guint32 vrmCapabilityKnownMask(void);
guint32 vrmCapabilityMigrationMask(void);
guint32 vrmCapabilityDefaultMask(void);
guint32 vrmCapabilityIntersect(guint32 source, guint32 destination);
guint32 vrmCapabilityForSide(guint32 flags, vrmSide side);
char *vrmCapabilityFormat(guint32 flags);
