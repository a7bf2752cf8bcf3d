/*
 * vrmlog.c: leveled logging to stderr
 *
 * Two line formats: on a terminal or into a file, "TIME PROGRAM[PID] LEVEL:
 * MESSAGE"; when stderr is systemd's journal (JOURNAL_STREAM names our
 * stderr), "<PRIORITY>MESSAGE", because the journal stamps time, program and
 * pid itself and reads the priority from that prefix (sd-daemon(3)).
 * Every message is made safe first: it may quote what a peer sent.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "vrmlog.h"
#include "vrmsocket.h"

static gint logLevel = -1;            /* -1: not yet read from the environment */
static char *logProgram;
static GMutex logLock;                /* one line at a time on stderr */
static gint logJournal = -1;          /* -1: not yet looked at */
static char *logJournalSocket;        /* NULL: systemd's */

#define VRM_LOG_JOURNAL_SOCKET "/run/systemd/journal/socket"

/* syslog priorities of the levels, for the journal's "<N>" prefix */
static const int vrmLogJournalPriority[] = { 3, 4, 6, 7 };
G_STATIC_ASSERT(G_N_ELEMENTS(vrmLogJournalPriority) == VRM_LOG_LAST);

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

bool
vrmLogStderrIsJournal(void)
{
    int journal = g_atomic_int_get(&logJournal);
    const char *env;
    struct stat st;
    unsigned long long dev, ino;

    if (journal >= 0)
        return journal;
    journal = 0;
    /* JOURNAL_STREAM=DEVICE:INODE of the stream systemd connected; it is
     * inherited, so it counts only if it is still our stderr */
    if ((env = g_getenv("JOURNAL_STREAM")) &&
        sscanf(env, "%llu:%llu", &dev, &ino) == 2 &&
        fstat(STDERR_FILENO, &st) == 0 &&
        (unsigned long long)st.st_dev == dev &&
        (unsigned long long)st.st_ino == ino)
        journal = 1;
    g_atomic_int_set(&logJournal, journal);
    return journal;
}

void
vrmLogResetJournal(void)
{
    g_atomic_int_set(&logJournal, -1);
}

char *
vrmLogSanitize(const char *text)
{
    GString *out;
    const char *p;

    if (!text)
        return g_strdup("");
    out = g_string_sized_new(strlen(text));
    for (p = text; *p; ) {
        gunichar c = g_utf8_get_char_validated(p, -1);

        if (c == (gunichar)-1 || c == (gunichar)-2) {
            /* not UTF-8: show the byte, move on by one */
            g_string_append_printf(out, "\\x%02x", (unsigned char)*p);
            p++;
            continue;
        }
        if (c == '\\')
            g_string_append(out, "\\\\");
        else if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0))
            g_string_append_printf(out, "\\x%02x", c);
        else
            g_string_append_unichar(out, c);
        p = g_utf8_next_char(p);
    }
    return g_string_free(out, FALSE);
}

/* The message, made safe */
static char *vrmLogFormat(const char *fmt, va_list ap) G_GNUC_PRINTF(1, 0);

static char *
vrmLogFormat(const char *fmt, va_list ap)
{
    g_autofree char *raw = g_strdup_vprintf(fmt, ap);

    return vrmLogSanitize(raw);
}

/* One line on stderr, in the format vrmLogStderrIsJournal() chose */
static void
vrmLogWriteLine(vrmLogLevel level, const char *func, int line, const char *msg)
{
    g_autoptr(GDateTime) now = NULL;
    g_autofree char *stamp = NULL;

    if (vrmLogStderrIsJournal()) {
        g_mutex_lock(&logLock);
        if (level == VRM_LOG_DEBUG)
            fprintf(stderr, "<%d>%s: %s (%s:%d)\n", vrmLogJournalPriority[level],
                    vrmLogLevelNames[level], msg, func, line);
        else
            fprintf(stderr, "<%d>%s: %s\n", vrmLogJournalPriority[level],
                    vrmLogLevelNames[level], msg);
        g_mutex_unlock(&logLock);
        return;
    }

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
}

void
vrmLogMessage(vrmLogLevel level,
              const char *file, const char *func, int line,
              const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    if (level > vrmLogGetLevel())
        return;

    va_start(ap, fmt);
    msg = vrmLogFormat(fmt, ap);
    va_end(ap);
    vrmLogWriteLine(level, func, line, msg);
    (void)file;
}

void
vrmLogSetJournalSocket(const char *path)
{
    g_mutex_lock(&logLock);
    g_free(logJournalSocket);
    logJournalSocket = g_strdup(path);
    g_mutex_unlock(&logLock);
}

static bool
vrmLogFieldNameValid(const char *name)
{
    const char *p;

    if (!name || !*name || *name == '_' || strlen(name) > 64)
        return false;
    for (p = name; *p; p++) {
        if (!g_ascii_isupper(*p) && !g_ascii_isdigit(*p) && *p != '_')
            return false;
    }
    return true;
}

/* The entry as the journal's native protocol has it (systemd.journal-fields(7),
 * "KEY=VALUE\n" each, values made safe so no newline is left in them);
 * false if the journal did not take it */
static bool
vrmLogJournalSend(vrmLogLevel level, const char *messageId,
                  const vrmLogField *fields, size_t nfields, const char *msg)
{
    g_autoptr(GString) entry = g_string_new(NULL);
    struct sockaddr_un sa;
    bool sent;
    size_t i;
    int fd;

    g_string_append_printf(entry, "MESSAGE=%s: %s\nPRIORITY=%d\nSYSLOG_IDENTIFIER=%s\n",
                           vrmLogLevelNames[level], msg, vrmLogJournalPriority[level],
                           logProgram ? logProgram : "virt-rdma");
    if (messageId)
        g_string_append_printf(entry, "MESSAGE_ID=%s\n", messageId);
    for (i = 0; i < nfields; i++) {
        g_autofree char *value = NULL;

        if (!fields[i].value || !vrmLogFieldNameValid(fields[i].name))
            continue;
        value = vrmLogSanitize(fields[i].value);
        g_string_append_printf(entry, "%s=%s\n", fields[i].name, value);
    }
    g_mutex_lock(&logLock);
    sent = vrmUnixAddressFill(logJournalSocket ? logJournalSocket : VRM_LOG_JOURNAL_SOCKET, &sa);
    g_mutex_unlock(&logLock);
    if (!sent || (fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
        return false;
    /* a full journal does not hold us: the line goes to stderr instead */
    sent = sendto(fd, entry->str, entry->len, MSG_NOSIGNAL,
                  (struct sockaddr *)&sa, sizeof(sa)) == (ssize_t)entry->len;
    close(fd);
    return sent;
}

void
vrmLogStructured(vrmLogLevel level, const char *messageId,
                 const vrmLogField *fields, size_t nfields,
                 const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    if (level > vrmLogGetLevel())
        return;

    va_start(ap, fmt);
    msg = vrmLogFormat(fmt, ap);
    va_end(ap);
    if (vrmLogStderrIsJournal() &&
        vrmLogJournalSend(level, messageId, fields, nfields, msg))
        return;
    vrmLogWriteLine(level, "", 0, msg);
}
