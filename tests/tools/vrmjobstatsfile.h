/*
 * vrmjobstatsfile.h: job statistics written down for tests
 *
 * A fixture (tests/tools/jobinfodata/NAME.stats) is a job type, virsh
 * domjobinfo's flags and typed parameters, one per line:
 *
 *   # comment
 *   type 3
 *   flags completed anystats
 *   memory_total ullong 142745600
 *   errmsg string any text up to the end of the line
 *
 * Types: int uint llong ullong double bool string. Read by the formatter's
 * test and by the shim that makes the real virsh print the same parameters.
 */
#pragma once

#include <stdbool.h>

#include <libvirt/libvirt.h>

typedef struct {
    int type;
    bool completed;
    bool anystats;
    virTypedParameterPtr params;
    int nparams;
    int maxparams;
} vrmJobStatsFile;

/* 0, or -1 with a message on stderr */
int vrmJobStatsFileParse(const char *text, vrmJobStatsFile *out);
void vrmJobStatsFileClear(vrmJobStatsFile *f);
