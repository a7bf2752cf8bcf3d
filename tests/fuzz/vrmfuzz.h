/*
 * vrmfuzz.h: the checks the XML fuzz targets share
 *
 * Each target defines VRM_FUZZ_NAME (its name, in front of a finding)
 * before it includes this file.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrmcontrol.h"
#include "vrmerror.h"
#include "vrmpeer.h"

static inline void G_GNUC_NORETURN
vrmFuzzFail(const char *what, const char *a, const char *b)
{
    fprintf(stderr, VRM_FUZZ_NAME ": %s\n--- first\n%s\n--- second\n%s\n",
            what, a ? a : "(null)", b ? b : "(null)");
    abort();
}

/*
 * Parsers report bad input as such (VRM_ERR_XML, VRM_ERR_CONFIG...).
 * INTERNAL means a bug: the parser accepted what the schema refused, or
 * the text scanner lost track of an element libxml2 parsed.
 */
static inline void
vrmFuzzCheckInternal(const char *str)
{
    if (vrmGetLastErrorCode() == VRM_ERR_INTERNAL)
        vrmFuzzFail("internal error (parser and schema disagree?)", str,
                    vrmGetLastErrorMessage());
}

/* What @xml parses to, formatted: NULL if it does not parse */
typedef char *(*vrmFuzzReformatFunc)(const char *xml);

static inline char *
vrmFuzzControlReformat(const char *xml)
{
    g_autoptr(vrmControlMessage) msg = vrmControlMessageParseString(xml);

    return msg ? vrmControlMessageFormat(msg) : NULL;
}

static inline char *
vrmFuzzPeerReformat(const char *xml)
{
    g_autoptr(vrmPeerMessage) msg = vrmPeerMessageParseString(xml);

    return msg ? vrmPeerMessageFormat(msg) : NULL;
}

/* @out, a formatted @what ("control message"), parses and formats to
 * itself */
static inline void
vrmFuzzFixedPoint(const char *what, const char *out, vrmFuzzReformatFunc reformat)
{
    g_autofree char *out2 = reformat(out);
    g_autofree char *why = NULL;

    if (!out2) {
        why = g_strdup_printf("formatted %s does not parse", what);
        vrmFuzzFail(why, out, vrmGetLastErrorMessage());
    }
    if (strcmp(out, out2) != 0) {
        why = g_strdup_printf("%s is not a fixed point", what);
        vrmFuzzFail(why, out, out2);
    }
}
