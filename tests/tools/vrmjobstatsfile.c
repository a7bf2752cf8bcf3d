/*
 * vrmjobstatsfile.c: job statistics written down for tests
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrmjobstatsfile.h"

static int
vrmJobStatsFileLine(vrmJobStatsFile *f, char *line)
{
    char *field = line, *kind, *value, *end = NULL;

    if (strcmp(line, "flags") == 0)
        return 0;
    if (!(kind = strchr(field, ' ')))
        return -1;
    *kind++ = '\0';
    if (strcmp(field, "type") == 0) {
        f->type = strtol(kind, &end, 10);
        return *end ? -1 : 0;
    }
    if (strcmp(field, "flags") == 0) {
        f->completed = strstr(kind, "completed") != NULL;
        f->anystats = strstr(kind, "anystats") != NULL;
        return 0;
    }
    if (!(value = strchr(kind, ' ')))
        return -1;
    *value++ = '\0';
    if (strcmp(kind, "string") == 0)
        return virTypedParamsAddString(&f->params, &f->nparams, &f->maxparams,
                                       field, value);
    if (strcmp(kind, "int") == 0)
        return virTypedParamsAddInt(&f->params, &f->nparams, &f->maxparams,
                                    field, strtol(value, NULL, 10));
    if (strcmp(kind, "uint") == 0)
        return virTypedParamsAddUInt(&f->params, &f->nparams, &f->maxparams,
                                     field, strtoul(value, NULL, 10));
    if (strcmp(kind, "llong") == 0)
        return virTypedParamsAddLLong(&f->params, &f->nparams, &f->maxparams,
                                      field, strtoll(value, NULL, 10));
    if (strcmp(kind, "ullong") == 0)
        return virTypedParamsAddULLong(&f->params, &f->nparams, &f->maxparams,
                                       field, strtoull(value, NULL, 10));
    if (strcmp(kind, "double") == 0)
        return virTypedParamsAddDouble(&f->params, &f->nparams, &f->maxparams,
                                       field, strtod(value, NULL));
    if (strcmp(kind, "bool") == 0)
        return virTypedParamsAddBoolean(&f->params, &f->nparams, &f->maxparams,
                                        field, strtol(value, NULL, 10) != 0);
    return -1;
}

int
vrmJobStatsFileParse(const char *text, vrmJobStatsFile *out)
{
    char *copy = strdup(text);
    char *save = NULL, *line;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (vrmJobStatsFileLine(out, line) < 0) {
            fprintf(stderr, "vrmjobstatsfile: cannot read the line '%s'\n", line);
            rc = -1;
            break;
        }
    }
    free(copy);
    return rc;
}

void
vrmJobStatsFileClear(vrmJobStatsFile *f)
{
    virTypedParamsFree(f->params, f->nparams);
    memset(f, 0, sizeof(*f));
}
