/*
 * vrmlog.c: leveled logging to stderr
 */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vrmlog.h"

static gint logLevel = -1;            /* -1: not yet read from the environment */
static char *logProgram;
static GMutex logLock;                /* one line at a time on stderr */

static const char *const vrmLogLevelNames[] = {
    "error", "warning", "info", "debug",
};
G_STATIC_ASSERT(G_N_ELEMENTS(vrmLogLevelNames) == VRM_LOG_LAST);

void
vrmLogSetLevel(vrmLogLevel level)
{
    g_atomic_int_set(&logLevel, level);
}

vrmLogLevel
vrmLogGetLevel(void)
{
    int level = g_atomic_int_get(&logLevel);
    const char *env;
    size_t i;

    if (level >= 0)
        return level;

    level = VRM_LOG_WARNING;
    if ((env = g_getenv("VRM_LOG_LEVEL"))) {
        for (i = 0; i < G_N_ELEMENTS(vrmLogLevelNames); i++) {
            if (g_str_equal(env, vrmLogLevelNames[i]))
                level = i;
        }
    }
    g_atomic_int_set(&logLevel, level);
    return level;
}

void
vrmLogSetProgram(const char *name)
{
    g_mutex_lock(&logLock);
    g_free(logProgram);
    logProgram = g_strdup(name);
    g_mutex_unlock(&logLock);
}

void
vrmLogMessage(vrmLogLevel level,
              const char *file, const char *func, int line,
              const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    g_autoptr(GDateTime) now = NULL;
    g_autofree char *stamp = NULL;
    va_list ap;

    if (level > vrmLogGetLevel())
        return;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);

    now = g_date_time_new_now_utc();
    stamp = g_date_time_format(now, "%H:%M:%S.%f");

    g_mutex_lock(&logLock);
    if (level == VRM_LOG_DEBUG)
        fprintf(stderr, "%s %s[%d] %s: %s (%s:%d)\n", stamp,
                logProgram ? logProgram : "virt-rdma", (int)getpid(),
                vrmLogLevelNames[level], msg, func, line);
    else
        fprintf(stderr, "%s %s[%d] %s: %s\n", stamp,
                logProgram ? logProgram : "virt-rdma", (int)getpid(),
                vrmLogLevelNames[level], msg);
    g_mutex_unlock(&logLock);
    (void)file;
}
