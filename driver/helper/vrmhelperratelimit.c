/*
 * vrmhelperratelimit.c: log lines a peer can trigger, at a bounded rate
 */
#include <config.h>

#include "vrmhelperratelimit.h"

bool
vrmRateLimitAllow(vrmRateLimit *rl, gint64 now)
{
    if (rl->start == 0 || now - rl->start >= rl->window) {
        rl->start = now;
        rl->count = 0;
    }
    if (rl->count < rl->burst) {
        rl->count++;
        return true;
    }
    rl->suppressed++;
    return false;
}

unsigned int
vrmRateLimitTakeSuppressed(vrmRateLimit *rl)
{
    unsigned int n = rl->suppressed;

    rl->suppressed = 0;
    return n;
}
