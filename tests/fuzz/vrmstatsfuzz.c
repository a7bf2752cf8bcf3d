/*
 * vrmstatsfuzz.c: libFuzzer target for the engine's stats-record parser
 *
 * The record is peer input for root's virt-rdmad (an engine runs as an
 * unprivileged user). Besides the sanitizers: a record the parser accepts
 * formats to a record that parses again and formats to the same text
 * (a fixed point), and no error is ever VRM_ERR_INTERNAL.
 */
#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrmenginestats.h"
#include "vrmerror.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_auto(vrmEngineStats) st = { 0 };
    g_auto(vrmEngineStats) again = { 0 };
    g_autofree char *first = NULL;
    g_autofree char *second = NULL;

    vrmResetLastError();
    if (vrmEngineStatsParse((const char *)data, size, &st) < 0) {
        if (vrmGetLastErrorCode() != VRM_ERR_PROTOCOL) {
            fprintf(stderr, "vrmstatsfuzz: refused with code %d: %s\n",
                    vrmGetLastErrorCode(), vrmGetLastErrorMessage());
            abort();
        }
        return 0;
    }
    first = vrmEngineStatsFormat(&st);
    if (vrmEngineStatsParse(first, strlen(first), &again) < 0) {
        fprintf(stderr, "vrmstatsfuzz: the formatted record does not parse: %s\n%s\n",
                vrmGetLastErrorMessage(), first);
        abort();
    }
    second = vrmEngineStatsFormat(&again);
    if (strcmp(first, second) != 0) {
        fprintf(stderr, "vrmstatsfuzz: not a fixed point\n%s\n%s\n", first, second);
        abort();
    }
    return 0;
}
