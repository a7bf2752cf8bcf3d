/*
 * vrmlog.h: leveled logging to stderr
 *
 * The level comes from VRM_LOG_LEVEL (error, warning, info, debug) or from
 * vrmLogSetLevel(); programs map their --verbose/--debug options onto it.
 * Lines carry their own time stamp, program and pid, except when stderr is
 * systemd's journal, which adds those itself: then "<PRIORITY>MESSAGE".
 * Control characters, backslashes and invalid UTF-8 in a message are shown
 * as escapes (\xNN, \\): a peer's text can neither forge a log line nor
 * reach a terminal as an escape sequence.
 *
 *   vrmLogSanitize(text)       that escaping, for text shown anywhere else
 *   vrmLogStderrIsJournal()    what the format decision is based on
 */
#pragma once

#include <stdbool.h>

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

bool vrmLogStderrIsJournal(void);
/* Forget the answer above (tests that redirect stderr). */
void vrmLogResetJournal(void);
char *vrmLogSanitize(const char *text);

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
