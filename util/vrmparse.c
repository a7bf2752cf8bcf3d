/*
 * vrmparse.c: numbers, sizes, names and addresses
 */
#include <config.h>

#include <arpa/inet.h>
#include <string.h>

#include <glib.h>

#include "vrmparse.h"
#include "vrmi18n.h"
#include "vrmlimits.h"

bool
vrmParseUInt64(const char *str, unsigned long long *value)
{
    const char *p;
    unsigned long long v = 0;

    if (!str || !*str || strlen(str) > 20 || (str[0] == '0' && str[1]))
        return false;
    for (p = str; *p; p++) {
        unsigned int d;

        if (!g_ascii_isdigit(*p))
            return false;
        d = *p - '0';
        if (v > (G_MAXUINT64 - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *value = v;
    return true;
}

typedef struct {
    const char *suffix;
    unsigned long long scale;
} vrmSizeSuffix;

/* virsh's scaled integers (virScaleInteger): a bare letter and the IEC
 * name are binary, the SI name is decimal. */
static const vrmSizeSuffix vrmSizeSuffixes[] = {
    { "", 1 }, { "b", 1 },
    { "k", 1ull << 10 }, { "kib", 1ull << 10 }, { "kb", 1000ull },
    { "m", 1ull << 20 }, { "mib", 1ull << 20 }, { "mb", 1000ull * 1000 },
    { "g", 1ull << 30 }, { "gib", 1ull << 30 }, { "gb", 1000ull * 1000 * 1000 },
    { "t", 1ull << 40 }, { "tib", 1ull << 40 }, { "tb", 1000ull * 1000 * 1000 * 1000 },
};

bool
vrmParseSize(const char *str, unsigned long long *value)
{
    g_autofree char *digits = NULL;
    const char *p = str;
    unsigned long long v;
    size_t i;

    if (!str)
        return false;
    while (g_ascii_isdigit(*p))
        p++;
    if (p == str)
        return false;
    digits = g_strndup(str, p - str);
    /* "0064K" is as good as "64K" in a size */
    while (digits[0] == '0' && digits[1])
        memmove(digits, digits + 1, strlen(digits));
    if (!vrmParseUInt64(digits, &v))
        return false;
    for (i = 0; i < G_N_ELEMENTS(vrmSizeSuffixes); i++) {
        const vrmSizeSuffix *s = &vrmSizeSuffixes[i];

        if (g_ascii_strcasecmp(p, s->suffix) != 0)
            continue;
        if (v > G_MAXUINT64 / s->scale)
            return false;
        *value = v * s->scale;
        return true;
    }
    return false;
}

const char *
vrmSizeSyntaxHelp(void)
{
    return _("a size is a number of bytes with an optional suffix: K, M, G, T or KiB, MiB, GiB, TiB (multiples of 1024), KB, MB, GB, TB (multiples of 1000)");
}

bool
vrmValidName(const char *str)
{
    size_t len;
    size_t i;

    if (!str)
        return false;
    len = strlen(str);
    if (len == 0 || len > VRM_NAME_MAX)
        return false;
    for (i = 0; i < len; i++) {
        if (!g_ascii_isalnum(str[i]) && !strchr("_.-", str[i]))
            return false;
    }
    return true;
}

bool
vrmValidAddress(const char *str)
{
    unsigned char buf[sizeof(struct in6_addr)];

    if (!str)
        return false;
    return inet_pton(AF_INET, str, buf) == 1 ||
        inet_pton(AF_INET6, str, buf) == 1;
}

bool
vrmValidHostName(const char *str)
{
    size_t label = 0;
    size_t len;
    const char *p;

    if (!str || !*str || (len = strlen(str)) > VRM_HOST_NAME_MAX)
        return false;
    for (p = str; *p; p++) {
        if (*p == '.') {
            if (label == 0)
                return false;
            label = 0;
            continue;
        }
        if (!g_ascii_isalnum(*p) && !(*p == '-' && label > 0))
            return false;
        if (++label > 63)
            return false;
    }
    return label > 0;
}

guint64
vrmParseProcStartTime(const char *stat)
{
    g_auto(GStrv) fields = NULL;
    const char *paren;

    /* the command may hold spaces and parentheses: it ends at the last ')' */
    if (!stat || !(paren = strrchr(stat, ')')) || !paren[1] || !paren[2])
        return 0;
    /* after "PID (COMM) ": field 3 (state) is the first */
    fields = g_strsplit(paren + 2, " ", 0);
    if (g_strv_length(fields) < 20)
        return 0;
    return g_ascii_strtoull(fields[19], NULL, 10);
}
