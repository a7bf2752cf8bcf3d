/*
 * vrmenginestats.h: the engine's stats record, one table
 *
 * An engine tells how its job goes in one flat JSON object, the stats
 * record: served on its --stats-socket while it runs and written to its
 * --stats-fd at exit (also after a failure: the record carries the reason).
 * The writer (the engine) and every reader (virt-rdmad, `virt-rdma bench`,
 * the tests) share the table below: one row per key, with its type and
 * meaning. virt-rdmad takes an engine's error from the record, never from
 * its log.
 *
 * The parser reads peer input for root's helper: it is strict (the JSON
 * grammar exactly, one flat object, no duplicate key, no control character
 * in a string, at most VRM_ENGINE_STATS_MAX bytes) and does not depend on
 * the order of the keys. Keys it does not know are skipped (a newer engine
 * may add some); the keys marked required must be there.
 *
 * Why not json-glib, which writes virt-rdma's --json output: Debian 12's
 * json-glib 1.6.6 reads 18446744073709551615 as -1, and accepts single
 * quotes, comments, leading zeros, "1.", a NUL escape that cuts the string
 * and text after the closing brace; its integers stop at 2^63-1, and the
 * counters here are guint64. The invalid records of vrmcontracttest are
 * these cases. The writer and this reader stay one codec over one table.
 *
 * Public API summary
 * ------------------
 *   vrmEngineStatsInit(&st) / Clear(&st)
 *   vrmEngineStatsFormat(&st)                 one line, no newline
 *   vrmEngineStatsParse(text, len, &st)       -1 with the error reported
 *   vrmEngineStatsKeyCount() / KeyGet(i)      the table (tests, docs)
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <glib.h>

#include "vrmenum.h"
#include "vrmenginesettings.h"

#define VRM_ENGINE_STATS_MAX 65536
#define VRM_ENGINE_STATS_STRING_MAX 4096

typedef enum {
    VRM_ENGINE_STATE_RUNNING,
    VRM_ENGINE_STATE_COMPLETED,
    VRM_ENGINE_STATE_FAILED,

    VRM_ENGINE_STATE_LAST
} vrmEngineState;
VRM_ENUM_DECL(vrmEngineState);

typedef struct {
    vrmEngineRole role;
    vrmEngineState state;
    char *error;                        /* sanitised one-line reason, or NULL */
    int errorCode;                      /* vrmErrorCode, VRM_ERR_OK if none */
    guint64 protocolVersion;
    bool pinAll;                        /* as agreed on channel 0 */
    bool writeImm;
    guint64 capabilities;               /* all the bits agreed on channel 0 */
    guint64 channels;                   /* the agreed maximum */
    guint64 established;                /* channels connected and authenticated */
    guint64 qemuConnections;            /* QEMU sockets joined */
    guint64 diskConnections;            /* ... of them QEMU's disk copy (NBD) */
    guint64 rdmaPort;                   /* source: rdma_cm port listened on */
    guint64 chunkSize;
    guint64 ringDepth;
    guint64 pinnedBound;                /* worst case with `channels` open */
    double elapsedS;
    double dataS;
    double cpuUserS;
    double cpuSystemS;
    double mbps;                        /* last second */
    double mbpsAverage;                 /* over the data phase */
    guint64 bytesSent;
    guint64 bytesReceived;
    guint64 bytesSpliced;               /* of bytesReceived: not copied */
    guint64 chunks;                     /* chunks written */
    guint64 chunksReceived;
    guint64 registrations;
    guint64 registrationNs;
    guint64 pinnedBytes;                /* peak */
    guint64 creditStalls;
    guint64 completions;
    guint64 cqPolls;
    guint64 cqIdlePolls;
    guint64 doorbells;
    guint64 controlSent;
    guint64 controlReceived;
    bool qemuGone;                      /* QEMU had exited when its stream ended */
} vrmEngineStats;

typedef enum {
    VRM_ENGINE_STAT_STRING,             /* char *, null allowed */
    VRM_ENGINE_STAT_UINT,               /* guint64 */
    VRM_ENGINE_STAT_DOUBLE,             /* finite, not negative */
    VRM_ENGINE_STAT_BOOL,
    VRM_ENGINE_STAT_ROLE,               /* vrmEngineRole as its name */
    VRM_ENGINE_STAT_STATE,              /* vrmEngineState as its name */
    VRM_ENGINE_STAT_ERROR_CODE,         /* vrmErrorCode as its name */

    VRM_ENGINE_STAT_LAST
} vrmEngineStatType;

typedef struct {
    const char *key;
    vrmEngineStatType type;
    size_t offset;                      /* of the field in vrmEngineStats */
    bool required;
    const char *meaning;                /* N_() */
} vrmEngineStatKey;

void vrmEngineStatsInit(vrmEngineStats *st);
void vrmEngineStatsClear(vrmEngineStats *st);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(vrmEngineStats, vrmEngineStatsClear);
char *vrmEngineStatsFormat(const vrmEngineStats *st);
int vrmEngineStatsParse(const char *text, size_t len, vrmEngineStats *st);

size_t vrmEngineStatsKeyCount(void);
const vrmEngineStatKey *vrmEngineStatsKeyGet(size_t i);

