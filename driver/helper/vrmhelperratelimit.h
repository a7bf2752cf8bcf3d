/*
 * vrmhelperratelimit.h: log lines a peer can trigger, at a bounded rate
 *
 * A client or a peer helper that keeps failing (a wrong key, a bad
 * request, an impostor probing) must not fill the journal: each such
 * kind of line has a limiter that lets a burst through per window and
 * then counts what it held back, said in one line when the next window
 * opens.
 *
 *   VRM_RATE_LIMIT_INIT(burst, seconds)
 *   vrmRateLimitAllow(rl, now)      true: log this one; the caller first
 *                                   logs vrmRateLimitTakeSuppressed() if > 0
 *   VRM_WARN_LIMITED(rl, fmt, ...)  both, at one level
 *   VRM_INFO_LIMITED(rl, fmt, ...)
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

#include "vrmi18n.h"
#include "vrmlog.h"

typedef struct {
    unsigned int burst;         /* lines per window */
    gint64 window;              /* us */
    gint64 start;               /* monotonic us: the current window */
    unsigned int count;         /* lines let through in it */
    unsigned int suppressed;    /* lines held back since the last report */
} vrmRateLimit;

#define VRM_RATE_LIMIT_INIT(burst, seconds) \
    { (burst), (gint64)(seconds) * G_USEC_PER_SEC, 0, 0, 0 }

bool vrmRateLimitAllow(vrmRateLimit *rl, gint64 now);
unsigned int vrmRateLimitTakeSuppressed(vrmRateLimit *rl);

/* LOG(...) (VRM_WARN or VRM_INFO) through @rl, saying first, at the same
 * level, how many lines it held back */
#define VRM_LOG_LIMITED(rl, LOG, ...) \
    do { \
        if (vrmRateLimitAllow((rl), g_get_monotonic_time())) { \
            unsigned int vrmHeldBack = vrmRateLimitTakeSuppressed(rl); \
            if (vrmHeldBack) \
                LOG(_("%1$u more lines like the next one were left out"), \
                    vrmHeldBack); \
            LOG(__VA_ARGS__); \
        } \
    } while (0)
#define VRM_WARN_LIMITED(rl, ...) VRM_LOG_LIMITED(rl, VRM_WARN, __VA_ARGS__)
#define VRM_INFO_LIMITED(rl, ...) VRM_LOG_LIMITED(rl, VRM_INFO, __VA_ARGS__)
