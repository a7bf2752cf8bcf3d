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

/* @out, a formatted control message, parses and formats to itself */
static inline void
vrmFuzzControlFixedPoint(const char *out)
{
    g_autoptr(vrmControlMessage) again = NULL;
    g_autofree char *out2 = NULL;

    if (!(again = vrmControlMessageParseString(out)))
        vrmFuzzFail("formatted control message does not parse", out,
                    vrmGetLastErrorMessage());
    out2 = vrmControlMessageFormat(again);
    if (strcmp(out, out2) != 0)
        vrmFuzzFail("control message is not a fixed point", out, out2);
}

/* @out, a formatted peer message, parses and formats to itself */
static inline void
vrmFuzzPeerFixedPoint(const char *out)
{
    g_autoptr(vrmPeerMessage) again = NULL;
    g_autofree char *out2 = NULL;

    if (!(again = vrmPeerMessageParseString(out)))
        vrmFuzzFail("formatted peer message does not parse", out,
                    vrmGetLastErrorMessage());
    out2 = vrmPeerMessageFormat(again);
    if (strcmp(out, out2) != 0)
        vrmFuzzFail("peer message is not a fixed point", out, out2);
}
