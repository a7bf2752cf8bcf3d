/*
 * vrmlog.h: leveled logging to stderr
 *
 * The level comes from VRM_LOG_LEVEL (error, warning, info, debug) or from
 * vrmLogSetLevel(); programs map their --verbose/--debug options onto it.
 */
#pragma once

#include <glib.h>

typedef enum {
    VRM_LOG_ERROR = 0,
    VRM_LOG_WARNING,
    VRM_LOG_INFO,
    VRM_LOG_DEBUG,

    VRM_LOG_LAST
} vrmLogLevel;

void vrmLogSetLevel(vrmLogLevel level);
vrmLogLevel vrmLogGetLevel(void);
/* Prefix every line with this program name (default: "virt-rdma"). */
void vrmLogSetProgram(const char *name);

void vrmLogMessage(vrmLogLevel level,
                   const char *file, const char *func, int line,
                   const char *fmt, ...)
    G_GNUC_PRINTF(5, 6);

#define VRM_ERROR_LOG(...) \
    vrmLogMessage(VRM_LOG_ERROR, __FILE__, __func__, __LINE__, __VA_ARGS__)
#define VRM_WARN(...) \
    vrmLogMessage(VRM_LOG_WARNING, __FILE__, __func__, __LINE__, __VA_ARGS__)
#define VRM_INFO(...) \
    vrmLogMessage(VRM_LOG_INFO, __FILE__, __func__, __LINE__, __VA_ARGS__)
#define VRM_DEBUG(...) \
    vrmLogMessage(VRM_LOG_DEBUG, __FILE__, __func__, __LINE__, __VA_ARGS__)
