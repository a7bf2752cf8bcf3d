/*
 * vrmenginestats.c: the engine's stats record: table, writer, strict parser
 */
#include <config.h>

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "vrmenginestats.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"
#include "vrmparse.h"

VRM_ENUM_IMPL(vrmEngineState, VRM_ENGINE_STATE_LAST,
              "running",
              "completed",
              "failed",
);

#define OFF(field) offsetof(vrmEngineStats, field)

/* Every key of the record. Adding a stat is adding a row (and a field). */
static const vrmEngineStatKey vrmEngineStatKeys[] = {
    { "role", VRM_ENGINE_STAT_ROLE, OFF(role), true,
      N_("'source' or 'destination'") },
    { "state", VRM_ENGINE_STAT_STATE, OFF(state), true,
      N_("'running', 'completed' or 'failed'") },
    { "error", VRM_ENGINE_STAT_STRING, OFF(error), true,
      N_("why the job failed, one sanitised line; null otherwise") },
    { "error-code", VRM_ENGINE_STAT_ERROR_CODE, OFF(errorCode), true,
      N_("the class of that error (vrmErrorCode name), 'ok' otherwise") },
    { "protocol-version", VRM_ENGINE_STAT_UINT, OFF(protocolVersion), false,
      N_("wire protocol version spoken") },
    { "pin-all", VRM_ENGINE_STAT_BOOL, OFF(pinAll), false,
      N_("pin-all as agreed with the peer") },
    { "write-imm", VRM_ENGINE_STAT_BOOL, OFF(writeImm), false,
      N_("WRITE_WITH_IMM as agreed with the peer") },
    { "capabilities", VRM_ENGINE_STAT_UINT, OFF(capabilities), false,
      N_("every capability bit agreed with the peer on the first channel") },
    { "channels", VRM_ENGINE_STAT_UINT, OFF(channels), true,
      N_("most channels the job may use (agreed with the peer)") },
    { "established", VRM_ENGINE_STAT_UINT, OFF(established), true,
      N_("channels connected and authenticated so far") },
    { "qemu-connections", VRM_ENGINE_STAT_UINT, OFF(qemuConnections), true,
      N_("QEMU connections joined so far") },
    { "disk-connections", VRM_ENGINE_STAT_UINT, OFF(diskConnections), false,
      N_("QEMU's disk (NBD) connections joined so far, --copy-storage-all") },
    { "rdma-port", VRM_ENGINE_STAT_UINT, OFF(rdmaPort), true,
      N_("source: the rdma_cm port it listens on, 0 until it does") },
    { "chunk-size", VRM_ENGINE_STAT_UINT, OFF(chunkSize), false,
      N_("bytes per ring chunk") },
    { "ring-depth", VRM_ENGINE_STAT_UINT, OFF(ringDepth), false,
      N_("chunks per ring") },
    { "pinned-bound", VRM_ENGINE_STAT_UINT, OFF(pinnedBound), false,
      N_("bytes the job would pin with every channel open") },
    { "elapsed-s", VRM_ENGINE_STAT_DOUBLE, OFF(elapsedS), false,
      N_("seconds since the engine started") },
    { "data-s", VRM_ENGINE_STAT_DOUBLE, OFF(dataS), false,
      N_("seconds from the first to the last stream byte") },
    { "cpu-user-s", VRM_ENGINE_STAT_DOUBLE, OFF(cpuUserS), false,
      N_("the engine's user CPU time, all threads") },
    { "cpu-system-s", VRM_ENGINE_STAT_DOUBLE, OFF(cpuSystemS), false,
      N_("the engine's system CPU time, all threads") },
    { "mbps", VRM_ENGINE_STAT_DOUBLE, OFF(mbps), false,
      N_("megabits per second over the last second, both directions") },
    { "mbps-average", VRM_ENGINE_STAT_DOUBLE, OFF(mbpsAverage), false,
      N_("megabits per second over the data phase, both directions") },
    { "bytes-sent", VRM_ENGINE_STAT_UINT, OFF(bytesSent), true,
      N_("bytes read from QEMU and written to the peer") },
    { "bytes-received", VRM_ENGINE_STAT_UINT, OFF(bytesReceived), true,
      N_("bytes received from the peer and written to QEMU") },
    { "bytes-spliced", VRM_ENGINE_STAT_UINT, OFF(bytesSpliced), false,
      N_("of those, bytes QEMU read from the engine's memory without a copy") },
    { "chunks", VRM_ENGINE_STAT_UINT, OFF(chunks), false,
      N_("chunks written into the peer's rings") },
    { "chunks-received", VRM_ENGINE_STAT_UINT, OFF(chunksReceived), false,
      N_("chunks the peer announced") },
    { "registrations", VRM_ENGINE_STAT_UINT, OFF(registrations), false,
      N_("memory registrations made") },
    { "registration-ns", VRM_ENGINE_STAT_UINT, OFF(registrationNs), false,
      N_("time spent registering memory, ours and the peer's on request") },
    { "pinned-bytes", VRM_ENGINE_STAT_UINT, OFF(pinnedBytes), false,
      N_("bytes registered at the peak") },
    { "credit-stalls", VRM_ENGINE_STAT_UINT, OFF(creditStalls), false,
      N_("times a writer had bytes and no credit") },
    { "completions", VRM_ENGINE_STAT_UINT, OFF(completions), false,
      N_("work completions polled") },
    { "cq-polls", VRM_ENGINE_STAT_UINT, OFF(cqPolls), false,
      N_("polls of the completion queues") },
    { "cq-idle-polls", VRM_ENGINE_STAT_UINT, OFF(cqIdlePolls), false,
      N_("polls that found nothing") },
    { "doorbells", VRM_ENGINE_STAT_UINT, OFF(doorbells), false,
      N_("posts to the device (one doorbell each, however many work requests)") },
    { "control-sent", VRM_ENGINE_STAT_UINT, OFF(controlSent), false,
      N_("control messages sent") },
    { "control-received", VRM_ENGINE_STAT_UINT, OFF(controlReceived), false,
      N_("control messages received") },
    { "qemu-gone", VRM_ENGINE_STAT_BOOL, OFF(qemuGone), false,
      N_("the QEMU process had exited when its stream ended") },
};

#undef OFF

VRM_TABLE_IMPL(vrmEngineStatKey, vrmEngineStatKeys, vrmEngineStatsKeyCount, vrmEngineStatsKeyGet);

void
vrmEngineStatsInit(vrmEngineStats *st)
{
    memset(st, 0, sizeof(*st));
    st->role = VRM_ENGINE_ROLE_SOURCE;
    st->state = VRM_ENGINE_STATE_RUNNING;
    st->errorCode = VRM_ERR_OK;
}

void
vrmEngineStatsClear(vrmEngineStats *st)
{
    g_free(st->error);
    vrmEngineStatsInit(st);
}

/* ---- writer ---------------------------------------------------------- */

/* Text that is valid UTF-8 without control characters stays as it is (so
 * a record read back writes the same); anything else is escaped the way
 * logs are (util/vrmlog.h) */
static char *
vrmEngineStatsSafeText(const char *s)
{
    const char *p;

    if (!g_utf8_validate(s, -1, NULL))
        return vrmLogSanitize(s);
    for (p = s; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);

        if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0))
            return vrmLogSanitize(s);
    }
    return g_strdup(s);
}

static void
vrmJSONAppendString(GString *buf, const char *s)
{
    const unsigned char *p;

    g_string_append_c(buf, '"');
    for (p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            g_string_append_printf(buf, "\\%c", *p);
        else if (*p < 0x20)
            g_string_append_printf(buf, "\\u%04x", *p);
        else
            g_string_append_c(buf, *p);
    }
    g_string_append_c(buf, '"');
}

char *
vrmEngineStatsFormat(const vrmEngineStats *st)
{
    GString *buf = g_string_new("{");
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmEngineStatKeys); i++) {
        const vrmEngineStatKey *k = &vrmEngineStatKeys[i];
        const char *field = (const char *)st + k->offset;

        if (i)
            g_string_append(buf, ", ");
        g_string_append_printf(buf, "\"%s\": ", k->key);
        switch (k->type) {
        case VRM_ENGINE_STAT_STRING: {
            const char *s = *(char *const *)field;

            if (s) {
                /* one line, no escape sequence, valid UTF-8, bounded */
                g_autofree char *safe = vrmEngineStatsSafeText(s);

                if (strlen(safe) > VRM_ENGINE_STATS_STRING_MAX) {
                    const char *end = g_utf8_find_prev_char(safe, safe + VRM_ENGINE_STATS_STRING_MAX + 1);
                    safe[end ? end - safe : 0] = '\0';
                }
                vrmJSONAppendString(buf, safe);
            } else {
                g_string_append(buf, "null");
            }
            break;
        }
        case VRM_ENGINE_STAT_UINT:
            g_string_append_printf(buf, "%" G_GUINT64_FORMAT, *(const guint64 *)field);
            break;
        case VRM_ENGINE_STAT_DOUBLE: {
            double d = *(const double *)field;

            if (!isfinite(d) || d < 0)
                d = 0;
            g_string_append_printf(buf, "%.3f", d);
            break;
        }
        case VRM_ENGINE_STAT_BOOL:
            g_string_append(buf, *(const bool *)field ? "true" : "false");
            break;
        case VRM_ENGINE_STAT_ROLE:
            vrmJSONAppendString(buf, vrmEngineRoleTypeToString(*(const vrmEngineRole *)field));
            break;
        case VRM_ENGINE_STAT_STATE:
            vrmJSONAppendString(buf, vrmEngineStateTypeToString(*(const vrmEngineState *)field));
            break;
        case VRM_ENGINE_STAT_ERROR_CODE: {
            const char *name = vrmErrorCodeTypeToString(*(const int *)field);

            vrmJSONAppendString(buf, name ? name : "internal");
            break;
        }
        case VRM_ENGINE_STAT_LAST:
            g_assert_not_reached();
        }
    }
    g_string_append_c(buf, '}');
    return g_string_free(buf, FALSE);
}

/* ---- strict parser --------------------------------------------------- */

typedef struct {
    const char *p;
    const char *end;
} vrmJSONCursor;

static void
vrmJSONSkipSpace(vrmJSONCursor *c)
{
    while (c->p < c->end &&
           (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool
vrmJSONHex4(vrmJSONCursor *c, gunichar *out)
{
    gunichar v = 0;
    int i;

    if (c->end - c->p < 4)
        return false;
    for (i = 0; i < 4; i++) {
        int d = g_ascii_xdigit_value(c->p[i]);

        if (d < 0)
            return false;
        v = (v << 4) | d;
    }
    c->p += 4;
    *out = v;
    return true;
}

/* A JSON string (the cursor is on its opening quote), decoded. NULL when
 * it breaks the grammar, holds a control character or NUL, is not UTF-8
 * or is longer than VRM_ENGINE_STATS_STRING_MAX bytes. */
static char *
vrmJSONString(vrmJSONCursor *c)
{
    g_autoptr(GString) s = g_string_new(NULL);

    if (c->p >= c->end || *c->p != '"')
        return NULL;
    c->p++;
    for (;;) {
        unsigned char ch;

        if (c->p >= c->end || s->len > VRM_ENGINE_STATS_STRING_MAX)
            return NULL;
        ch = *c->p++;
        if (ch == '"')
            break;
        if (ch < 0x20)
            return NULL;
        if (ch != '\\') {
            g_string_append_c(s, ch);
            continue;
        }
        if (c->p >= c->end)
            return NULL;
        switch (*c->p++) {
        case '"': g_string_append_c(s, '"'); break;
        case '\\': g_string_append_c(s, '\\'); break;
        case '/': g_string_append_c(s, '/'); break;
        case 'b': case 'f': case 'n': case 'r': case 't':
            return NULL;    /* control characters have no place in a stat */
        case 'u': {
            gunichar u, lo;

            if (!vrmJSONHex4(c, &u))
                return NULL;
            if (u >= 0xd800 && u < 0xdc00) {
                if (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u')
                    return NULL;
                c->p += 2;
                if (!vrmJSONHex4(c, &lo) || lo < 0xdc00 || lo >= 0xe000)
                    return NULL;
                u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
            } else if (u >= 0xdc00 && u < 0xe000) {
                return NULL;
            }
            if (u < 0x20 || u == 0x7f || (u >= 0x80 && u < 0xa0))
                return NULL;
            g_string_append_unichar(s, u);
            break;
        }
        default:
            return NULL;
        }
    }
    if (s->len > VRM_ENGINE_STATS_STRING_MAX || !g_utf8_validate(s->str, s->len, NULL))
        return NULL;
    return g_string_free(g_steal_pointer(&s), FALSE);
}

/* The text of a JSON number, checked against the grammar; NULL if not */
static char *
vrmJSONNumber(vrmJSONCursor *c)
{
    const char *start = c->p;
    const char *p = c->p;

    if (p < c->end && *p == '-')
        p++;
    if (p >= c->end || !g_ascii_isdigit(*p))
        return NULL;
    if (*p == '0')
        p++;
    else
        while (p < c->end && g_ascii_isdigit(*p))
            p++;
    if (p < c->end && *p == '.') {
        p++;
        if (p >= c->end || !g_ascii_isdigit(*p))
            return NULL;
        while (p < c->end && g_ascii_isdigit(*p))
            p++;
    }
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < c->end && (*p == '+' || *p == '-'))
            p++;
        if (p >= c->end || !g_ascii_isdigit(*p))
            return NULL;
        while (p < c->end && g_ascii_isdigit(*p))
            p++;
    }
    if (p - start > 64)
        return NULL;
    c->p = p;
    return g_strndup(start, p - start);
}

static bool
vrmJSONLiteral(vrmJSONCursor *c, const char *word)
{
    size_t n = strlen(word);

    if ((size_t)(c->end - c->p) < n || strncmp(c->p, word, n) != 0)
        return false;
    c->p += n;
    return true;
}

/* Skip a value of a key we do not know: a scalar (flat record only) */
static bool
vrmJSONSkipValue(vrmJSONCursor *c)
{
    g_autofree char *tmp = NULL;

    if (c->p >= c->end)
        return false;
    if (*c->p == '"')
        return (tmp = vrmJSONString(c)) != NULL;
    if (vrmJSONLiteral(c, "true") || vrmJSONLiteral(c, "false") ||
        vrmJSONLiteral(c, "null"))
        return true;
    return (tmp = vrmJSONNumber(c)) != NULL;
}

static int
vrmEngineStatsBad(const char *key, const char *what)
{
    if (key)
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the engine's stats record is invalid at key '%1$s': %2$s"),
                       key, what);
    else
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the engine's stats record is invalid: %1$s"), what);
    return -1;
}

/* Read the value of row @k at the cursor into @st */
static int
vrmEngineStatsReadValue(vrmJSONCursor *c, const vrmEngineStatKey *k,
                        vrmEngineStats *st)
{
    char *field = (char *)st + k->offset;
    g_autofree char *text = NULL;
    unsigned long long u;
    int v;

    switch (k->type) {
    case VRM_ENGINE_STAT_STRING:
        if (vrmJSONLiteral(c, "null"))
            return 0;
        if (!(*(char **)field = vrmJSONString(c)))
            return vrmEngineStatsBad(k->key, _("not a valid string"));
        return 0;
    case VRM_ENGINE_STAT_UINT:
        if (!(text = vrmJSONNumber(c)) || !vrmParseUInt64(text, &u))
            return vrmEngineStatsBad(k->key, _("not a whole number from 0 to 2^64-1"));
        *(guint64 *)field = u;
        return 0;
    case VRM_ENGINE_STAT_DOUBLE: {
        double d;
        char *stop = NULL;

        if (!(text = vrmJSONNumber(c)))
            return vrmEngineStatsBad(k->key, _("not a number"));
        d = g_ascii_strtod(text, &stop);
        if (*stop || !isfinite(d) || d < 0 || d > 1e15)
            return vrmEngineStatsBad(k->key, _("not a number from 0 to 10^15"));
        *(double *)field = d;
        return 0;
    }
    case VRM_ENGINE_STAT_BOOL:
        if (vrmJSONLiteral(c, "true"))
            *(bool *)field = true;
        else if (vrmJSONLiteral(c, "false"))
            *(bool *)field = false;
        else
            return vrmEngineStatsBad(k->key, _("not true or false"));
        return 0;
    case VRM_ENGINE_STAT_ROLE:
    case VRM_ENGINE_STAT_STATE:
    case VRM_ENGINE_STAT_ERROR_CODE:
        if (!(text = vrmJSONString(c)))
            return vrmEngineStatsBad(k->key, _("not a valid string"));
        if (k->type == VRM_ENGINE_STAT_ROLE)
            v = vrmEngineRoleTypeFromString(text);
        else if (k->type == VRM_ENGINE_STAT_STATE)
            v = vrmEngineStateTypeFromString(text);
        else
            v = vrmErrorCodeTypeFromString(text);
        if (v < 0)
            return vrmEngineStatsBad(k->key, _("not one of the known names"));
        *(int *)field = v;
        return 0;
    case VRM_ENGINE_STAT_LAST:
        break;
    }
    return vrmEngineStatsBad(k->key, _("no type"));
}

int
vrmEngineStatsParse(const char *text, size_t len, vrmEngineStats *st)
{
    bool seen[G_N_ELEMENTS(vrmEngineStatKeys)] = { false };
    vrmJSONCursor c = { text, text + len };
    size_t i;

    vrmEngineStatsInit(st);
    if (!text || len > VRM_ENGINE_STATS_MAX) {
        vrmEngineStatsBad(NULL, _("empty or longer than 64 KiB"));
        goto error;
    }
    if (memchr(text, '\0', len)) {
        vrmEngineStatsBad(NULL, _("it contains a NUL byte"));
        goto error;
    }
    vrmJSONSkipSpace(&c);
    if (c.p >= c.end || *c.p++ != '{') {
        vrmEngineStatsBad(NULL, _("it does not start with '{'"));
        goto error;
    }
    vrmJSONSkipSpace(&c);
    if (c.p < c.end && *c.p == '}') {
        c.p++;
    } else {
        for (;;) {
            g_autofree char *key = NULL;
            const vrmEngineStatKey *k = NULL;

            vrmJSONSkipSpace(&c);
            if (!(key = vrmJSONString(&c))) {
                vrmEngineStatsBad(NULL, _("a key is not a valid string"));
                goto error;
            }
            vrmJSONSkipSpace(&c);
            if (c.p >= c.end || *c.p++ != ':') {
                vrmEngineStatsBad(key, _("':' expected after the key"));
                goto error;
            }
            vrmJSONSkipSpace(&c);
            for (i = 0; i < G_N_ELEMENTS(vrmEngineStatKeys); i++) {
                if (g_str_equal(key, vrmEngineStatKeys[i].key)) {
                    k = &vrmEngineStatKeys[i];
                    break;
                }
            }
            if (k) {
                if (seen[i]) {
                    vrmEngineStatsBad(key, _("the key appears twice"));
                    goto error;
                }
                seen[i] = true;
                if (vrmEngineStatsReadValue(&c, k, st) < 0)
                    goto error;
            } else if (!vrmJSONSkipValue(&c)) {
                vrmEngineStatsBad(key, _("not a string, number, true, false or null"));
                goto error;
            }
            vrmJSONSkipSpace(&c);
            if (c.p < c.end && *c.p == ',') {
                c.p++;
                continue;
            }
            if (c.p < c.end && *c.p == '}') {
                c.p++;
                break;
            }
            vrmEngineStatsBad(key, _("',' or '}' expected after the value"));
            goto error;
        }
    }
    vrmJSONSkipSpace(&c);
    if (c.p != c.end) {
        vrmEngineStatsBad(NULL, _("there is text after the closing '}'"));
        goto error;
    }
    for (i = 0; i < G_N_ELEMENTS(vrmEngineStatKeys); i++) {
        if (vrmEngineStatKeys[i].required && !seen[i]) {
            vrmEngineStatsBad(vrmEngineStatKeys[i].key, _("the key is missing"));
            goto error;
        }
    }
    return 0;

 error:
    vrmEngineStatsClear(st);
    return -1;
}
