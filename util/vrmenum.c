/*
 * vrmenum.c: enums with string tables
 */
#include <config.h>

#include <string.h>

#include "vrmenum.h"

const char *
vrmEnumToString(const char *const *names, size_t n, int type)
{
    if (type < 0 || (size_t)type >= n)
        return NULL;
    return names[type];
}

int
vrmEnumFromString(const char *const *names, size_t n, const char *str)
{
    size_t i;

    if (!str)
        return -1;
    for (i = 0; i < n; i++) {
        if (names[i] && strcmp(names[i], str) == 0)
            return i;
    }
    return -1;
}

char *
vrmEnumAllowedValues(vrmEnumToStringFunc toString, int last)
{
    GString *buf = g_string_new(NULL);
    int i;

    for (i = 0; i < last; i++) {
        if (i > 0)
            g_string_append(buf, ", ");
        g_string_append_printf(buf, "'%s'", toString(i));
    }
    return g_string_free(buf, FALSE);
}
