/*
 * vrmhelperconf.h: configuration of virt-rdmad (/etc/virt-rdma/virt-rdmad.conf)
 *
 * A GKeyFile, validated as strictly as the XML documents: unknown groups
 * and keys are refused with the allowed list, every value is checked
 * against its type and range, and the message names the file, the group,
 * the key, the bad value and what is allowed. docs/xml.rst lists the keys.
 *
 *   [rdma]      device, port, address, cm-port-min, cm-port-max
 *   [limits]    max-jobs, max-pinned-bytes, max-channels, chunk-sizes,
 *               max-ring-depth, max-bandwidth
 *   [paths]     run-dir, state-dir
 *   [access]    group
 *   [history]   size
 *
 * Public API summary
 * ------------------
 *   vrmHelperConfigNew()                       defaults of this build
 *   vrmHelperConfigFree(conf)
 *   vrmHelperConfigLoadFile(path)              NULL + VRM_ERR_CONFIG on error
 *   vrmHelperConfigLoadData(data, len, name)   same from memory
 *   vrmHelperConfigFormat(conf)                canonical key file text
 *   vrmHelperConfigToPolicy(conf, &policy)     the negotiation limits
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

#include "vrmnegotiation.h"

#define VRM_HELPER_CONFIG_FILE "virt-rdmad.conf"

typedef struct _vrmHelperConfig vrmHelperConfig;
struct _vrmHelperConfig {
    /* [rdma] */
    char *device;                   /* NULL: the first active device */
    unsigned int devicePort;        /* 1..255 */
    char *address;                  /* NULL: the device's first address */
    unsigned int cmPortMin;         /* rdma_cm ports of source engines */
    unsigned int cmPortMax;
    /* [limits] */
    unsigned int maxJobs;           /* concurrent migrations */
    unsigned long long maxPinnedBytes; /* per migration, 0: no limit */
    unsigned int maxChannels;
    guint32 chunkSizes;             /* bit n: 2^n bytes allowed */
    unsigned int maxRingDepth;
    unsigned int maxBandwidth;      /* Mbit/s, 0: no cap */
    /* [paths] */
    char *runDir;
    char *stateDir;
    /* [access] */
    char *group;                    /* may use the control socket; NULL: root only */
    /* [history] */
    unsigned int historySize;       /* finished jobs kept */
};

vrmHelperConfig *vrmHelperConfigNew(void);
void vrmHelperConfigFree(vrmHelperConfig *conf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmHelperConfig, vrmHelperConfigFree);

vrmHelperConfig *vrmHelperConfigLoadFile(const char *path);
vrmHelperConfig *vrmHelperConfigLoadData(const char *data, size_t len,
                                         const char *name);
char *vrmHelperConfigFormat(const vrmHelperConfig *conf);
void vrmHelperConfigToPolicy(const vrmHelperConfig *conf,
                             vrmHostPolicy *policy);
