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
 *   vrmLogStructured(level, msgid, fields, n, fmt, ...)
 *                              an important event: under systemd, one entry
 *                              of the journal's native protocol with the
 *                              fields (DOMAIN_UUID=..., JOB_ID=...) and
 *                              MESSAGE_ID, so that `journalctl JOB_ID=42`
 *                              finds it; elsewhere the same line as
 *                              vrmLogMessage()
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

/* One field of a journal entry: NAME of [A-Z0-9_], not starting with '_';
 * a NULL value leaves the field out */
typedef struct {
    const char *name;
    const char *value;
} vrmLogField;

void vrmLogStructured(vrmLogLevel level, const char *messageId,
                      const vrmLogField *fields, size_t nfields,
                      const char *fmt, ...)
    G_GNUC_PRINTF(5, 6);
/* Where the journal's native socket is (tests; default
 * /run/systemd/journal/socket) */
void vrmLogSetJournalSocket(const char *path);

#define VRM_ERROR_LOG(...) \
    vrmLogMessage(VRM_LOG_ERROR, __FILE__, __func__, __LINE__, __VA_ARGS__)
#define VRM_WARN(...) \
    vrmLogMessage(VRM_LOG_WARNING, __FILE__, __func__, __LINE__, __VA_ARGS__)
#define VRM_INFO(...) \
    vrmLogMessage(VRM_LOG_INFO, __FILE__, __func__, __LINE__, __VA_ARGS__)
#define VRM_DEBUG(...) \
    vrmLogMessage(VRM_LOG_DEBUG, __FILE__, __func__, __LINE__, __VA_ARGS__)
