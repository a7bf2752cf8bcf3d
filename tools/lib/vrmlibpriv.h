/*
 * vrmlibpriv.h: internals of the virt-rdma library shared with the CLI
 */
#pragma once

#include <stdbool.h>

#include <libvirt/libvirt.h>

#include "vrmcontrol.h"

typedef struct _vrmMigrateJob vrmMigrateJob;
struct _vrmMigrateJob {
    unsigned long long id;          /* the helper's job id */
    char *helperSocket;             /* where the helper answers */
    vrmJobRecord *record;           /* the helper's record (offer, path, stats) */
    char *uri;                      /* unix://<job path> */
    char *destXML;                  /* domain XML with the offer */
    char *persistXML;               /* persistent XML without it, or NULL */
    bool bandwidthSet;              /* we set libvirt's bandwidth cap */
    virTypedParameterPtr params;    /* what libvirt gets */
    int nparams;
    int maxparams;
};

void vrmMigrateJobFree(vrmMigrateJob *job);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmMigrateJob, vrmMigrateJobFree);

void vrmLibReportLibvirtError(const char *what);
/* Our typed parameters and flags as overrides of the domain's metadata. */
int vrmMigrateOverridesFromParams(virTypedParameterPtr params,
                                  int nparams,
                                  unsigned int flags,
                                  vrmMigrationParams *overrides,
                                  const char **helperSocket);
vrmMigrateJob *vrmMigratePrepare(virDomainPtr domain,
                                 virTypedParameterPtr params,
                                 unsigned int nparams,
                                 unsigned int flags);
void vrmMigrateJobCancel(vrmMigrateJob *job);
int vrmMigrateFinish(vrmMigrateJob *job);
vrmJobRecord *vrmMigrateJobQuery(const char *helperSocket,
                                 unsigned long long id,
                                 const char *domainName);
