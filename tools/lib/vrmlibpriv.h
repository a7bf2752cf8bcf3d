/*
 * vrmlibpriv.h: internals of the virt-rdma library shared with the CLI
 *
 * The RDMA options are one table (vrmMigrateParamTable): each row is a
 * typed parameter of vrmDomainMigrate3(), the option of `virt-rdma
 * migrate` that sets it, how the option is read, its help, and where it
 * goes among the overrides of the domain's metadata. The CLI builds its
 * options from the rows, the library reads the parameters with them;
 * capabilities come from util/vrmcapability.h's table.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include <libvirt/libvirt.h>

#include "vrmcontrol.h"

typedef enum {
    VRM_MIGRATE_ARG_SIZE,       /* ullong bytes; the CLI takes "4M", "1MiB" */
    VRM_MIGRATE_ARG_UINT,       /* uint */
    VRM_MIGRATE_ARG_NAME,       /* string: an RDMA device */
    VRM_MIGRATE_ARG_ADDRESS,    /* string: an IP literal */
    VRM_MIGRATE_ARG_PATH,       /* string: the helper's socket */
} vrmMigrateArgKind;

typedef struct {
    const char *param;          /* VRM_MIGRATE_PARAM_* */
    int type;                   /* VIR_TYPED_PARAM_* */
    vrmMigrateArgKind kind;
    const char *option;         /* virt-rdma migrate's --OPTION, NULL: none */
    const char *argName;        /* N_() */
    const char *help;           /* N_() */
    size_t offset;              /* in vrmMigrationParams; VRM_MIGRATE_NOT_A_PARAM */
    unsigned int min, max;      /* VRM_MIGRATE_ARG_UINT: the range (vrmlimits.h) */
} vrmMigrateParamInfo;

#define VRM_MIGRATE_NOT_A_PARAM ((size_t)-1)

size_t vrmMigrateParamCount(void);
const vrmMigrateParamInfo *vrmMigrateParamGet(size_t i);

typedef struct _vrmMigrateJob vrmMigrateJob;
struct _vrmMigrateJob {
    bool recovery;                  /* --postcopy-resume: no intent; the
                                     * helpers' recovery job, by id */
    unsigned long long id;          /* recovery: that job */
    unsigned long long intent;      /* otherwise: the helper's intent id */
    char *helperSocket;             /* where the helper answers */
    char *uri;                      /* unix://<per-domain path> */
    vrmJobRecord *record;           /* the job that used the intent, at the end */
    virTypedParameterPtr params;    /* what libvirt gets */
    int nparams;
    int maxparams;
};

void vrmMigrateJobFree(vrmMigrateJob *job);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmMigrateJob, vrmMigrateJobFree);

/* libvirt objects in g_autoptr */
void vrmConnectFree(virConnectPtr conn);
void vrmDomainFree(virDomainPtr dom);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(virConnect, vrmConnectFree);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(virDomain, vrmDomainFree);

void vrmLibReportLibvirtError(const char *what);
/* 0 if @domain has our metadata element, else -1 with the reason (how to
 * enable it) */
int vrmLibDomainCheckRDMAEnabled(virDomainPtr domain);
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
