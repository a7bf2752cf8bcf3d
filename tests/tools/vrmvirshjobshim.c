/*
 * vrmvirshjobshim.c: makes the real virsh print given job statistics
 *
 * Loaded with LD_PRELOAD into `virsh -c test:///default domjobinfo test`,
 * it answers virDomainGetJobStats() with the parameters of the file named by
 * $VRM_JOBSTATS_FILE (vrmjobstatsfile.h), so that tests/tools/vrmjobfmttest
 * can compare virt-rdma's formatter with virsh's own output for the same
 * parameters. A test tool, not part of virt-rdma.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include <glib.h>

#include "vrmjobstatsfile.h"

int virDomainGetJobStats(virDomainPtr domain, int *type,
                         virTypedParameterPtr *params, int *nparams,
                         unsigned int flags);

int
virDomainGetJobStats(virDomainPtr domain G_GNUC_UNUSED, int *type,
                     virTypedParameterPtr *params, int *nparams,
                     unsigned int flags G_GNUC_UNUSED)
{
    const char *path = getenv("VRM_JOBSTATS_FILE");
    g_autofree char *text = NULL;
    vrmJobStatsFile f;

    if (!path || !g_file_get_contents(path, &text, NULL, NULL) ||
        vrmJobStatsFileParse(text, &f) < 0) {
        fprintf(stderr, "vrmvirshjobshim: cannot read $VRM_JOBSTATS_FILE\n");
        return -1;
    }
    *type = f.type;
    *params = f.params;
    *nparams = f.nparams;
    return 0;
}
