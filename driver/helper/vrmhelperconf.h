/*
 * vrmhelperconf.h: configuration of virt-rdmad (/etc/virt-rdma/virt-rdmad.conf)
 *
 * A GKeyFile, validated as strictly as the XML documents: unknown groups
 * and keys are refused with the allowed list, every value is checked
 * against its type and range, and the message names the file, the group,
 * the key, the bad value and what is allowed. docs/xml.rst lists the keys.
 *
 *   [rdma]      device, port, address
 *   [limits]    max-jobs, max-pinned-bytes (the host's budget), max-channels,
 *               chunk-sizes, max-ring-depth, max-bandwidth, max-clients
 *   [paths]     run-dir, state-dir
 *   [access]    group, libvirt-group
 *   [history]   size
 *   [peers]     auth, key-file, ca-cert, crl, allowed-dn, server-cert,
 *               server-key, client-cert, client-key, host, address, listen,
 *               allow, port, max-peers, timeout
 *   [engine]    user
 *   [qemu]      user
 *   [libvirt]   uri
 *   [hook]      timeout
 *   [migration] fallback, rdma, port-min, port-max
 *   [metrics]   textfile-dir
 *
 * The same file tells the clients (the hook, the CLI, the library) where
 * the control socket is and how long the hook waits: libvirt runs hooks
 * with an empty environment, and the socket's path is a setting of the
 * helper, not of each client.
 *
 * Public API summary
 * ------------------
 *   vrmHelperConfigNew()                       defaults of this build
 *   vrmHelperConfigFree(conf)
 *   vrmHelperConfigLoadFile(path)              NULL + VRM_ERR_CONFIG on error
 *   vrmHelperConfigLoadData(data, len, name)   same from memory
 *   vrmHelperConfigFormat(conf)                canonical key file text
 *   vrmHelperConfigToPolicy(conf, &policy)     the negotiation limits
 *   vrmHelperConfigLoadDefault()               the installed file, or
 *                                              $VRM_HELPER_CONFIG (tests), or
 *                                              the defaults if neither exists
 *   vrmHelperConfigDefaultPath()
 *   vrmHelperConfigCheckSystem(conf)           the names it refers to exist:
 *                                              access group, engine user, QEMU
 *                                              user; -1 + VRM_ERR_CONFIG
 *   vrmHelperConfigSocketPath(conf)            the control socket
 *   vrmHelperConfigDomainDir(conf, uuid)       <run-dir>/qemu/<uuid>
 *   vrmHelperConfigDomainSocket(conf, uuid)    .../migrate.sock: the URI
 *   vrmHelperConfigDomainDiskSocket(conf, uuid)  .../nbd.sock: the disks URI
 *                                              unix://PATH of a domain
 */
#pragma once

#include <stdbool.h>

#include <glib.h>

#include "vrmnegotiation.h"

#define VRM_HELPER_CONFIG_FILE "virt-rdmad.conf"
/* Tests only: another configuration file for the hook and the tools. */
#define VRM_HELPER_CONFIG_ENV "VRM_HELPER_CONFIG"
#define VRM_HELPER_SOCKET_NAME "virt-rdmad.sock"
#define VRM_HELPER_DOMAIN_DIR "qemu"
#define VRM_HELPER_DOMAIN_SOCKET "migrate.sock"
#define VRM_HELPER_DOMAIN_DISK_SOCKET "nbd.sock"  /* --copy-storage-all's disks URI */
#define VRM_HELPER_ENGINE_DIR "engine"
#define VRM_HELPER_DEFAULT_PEER_PORT 16530
#define VRM_HELPER_DEFAULT_GROUP "virt-rdma"
/* Debian's libvirt gives this group full access (its socket's group and
 * its polkit rule) */
#define VRM_HELPER_DEFAULT_LIBVIRT_GROUP "libvirt"
#define VRM_HELPER_DEFAULT_ENGINE_USER "virt-rdma-engine"
/* Debian's prometheus-node-exporter reads *.prom files here */
#define VRM_HELPER_DEFAULT_METRICS_DIR "/var/lib/prometheus/node-exporter"

/* How the helpers' channel authenticates (docs/negotiation.rst). */
typedef enum {
    VRM_PEER_AUTH_AUTO,     /* x509 if libvirt's PKI is there, else psk if the key is */
    VRM_PEER_AUTH_PSK,      /* the cluster key file */
    VRM_PEER_AUTH_X509,     /* libvirt's PKI: both sides present certificates */
    VRM_PEER_AUTH_NONE,     /* the channel is off: every RDMA migration is refused */

    VRM_PEER_AUTH_LAST
} vrmPeerAuth;
VRM_ENUM_DECL(vrmPeerAuth);

/* What an RDMA-enabled domain's migration does when RDMA cannot carry it
 * (docs/transparent.rst) */
typedef enum {
    VRM_FALLBACK_TCP,       /* it goes on over libvirt's TCP, with one warning */
    VRM_FALLBACK_REFUSE,    /* it fails before the destination QEMU starts */

    VRM_FALLBACK_LAST
} vrmFallback;
VRM_ENUM_DECL(vrmFallback);

/* libvirt's migration_port_min/max defaults (qemu.conf) */
#define VRM_HELPER_DEFAULT_MIGRATION_PORT_MIN 49152
#define VRM_HELPER_DEFAULT_MIGRATION_PORT_MAX 49215

/* [limits] recovery-window at most: the engines' --wait-stream maximum
 * (checked in vrmhelperengine.c) */
#define VRM_HELPER_MAX_RECOVERY_WINDOW 3600

typedef struct _vrmHelperConfig vrmHelperConfig;
/* Every string here is a key's: vrmHelperConfigFree frees them by the
 * table of keys */
struct _vrmHelperConfig {
    /* [rdma] */
    char *device;                   /* NULL: the first active device */
    unsigned int devicePort;        /* 1..255 */
    char *address;                  /* NULL: the device's first address */
    /* [limits] */
    unsigned int maxJobs;           /* concurrent migrations */
    unsigned long long maxPinnedBytes; /* the host's budget: every running job's
                                        * allowance together */
    unsigned int maxChannels;
    guint32 chunkSizes;             /* bit n: 2^n bytes allowed */
    unsigned int maxRingDepth;
    unsigned int maxBandwidth;      /* Mbit/s, 0: no cap */
    unsigned int maxClients;        /* control-socket clients at once */
    unsigned int recoveryWindow;    /* s: a post-copy recovery's engines wait
                                     * this long for --postcopy-resume; 0:
                                     * no recovery over RDMA */
    /* [paths] */
    char *runDir;
    char *stateDir;
    /* [access] */
    char *group;                    /* may use the control socket; NULL: root only */
    char *libvirtGroup;             /* of those, may prepare intents (migrate
                                     * through libvirt); NULL: root only */
    /* [history] */
    unsigned int historySize;       /* finished jobs kept */
    /* [peers] */
    int peerAuth;                   /* vrmPeerAuth */
    char *peerKeyFile;              /* cluster key (psk) */
    char *peerCACert;               /* x509: libvirt's CA */
    char *peerCRL;                  /* x509: its revocation list, if the file exists */
    char *peerAllowedDN;            /* x509: ';'-separated subject patterns, NULL: any */
    char *peerServerCert;
    char *peerServerKey;
    char *peerClientCert;
    char *peerClientKey;
    char *peerHost;                 /* locator: host name; NULL: this host's */
    char *peerAddress;              /* locator: address; NULL: [rdma] address or the device's */
    char *peerListen;               /* listen address; NULL: the locator's */
    char *peerAllow;                /* networks peers may be in, canonical
                                     * (vrmnetwork.h); NULL: any */
    unsigned int peerPort;          /* TCP port of the channel */
    unsigned int maxPeers;          /* peer connections at once */
    unsigned int peerTimeout;       /* s: a handshake, a message */
    /* [engine] */
    char *engineUser;               /* engines run as this user */
    /* [qemu] */
    char *qemuUser;                 /* the destination QEMU's user; NULL: libvirt's */
    /* [libvirt] */
    char *libvirtURI;
    /* [hook] */
    unsigned int hookTimeout;       /* s: the hook waits this long for the helper */
    /* [migration] */
    int fallback;                   /* vrmFallback */
    int rdmaDefault;                /* vrmRdmaDefault */
    unsigned int migrationPortMin;  /* libvirt's migration_port_min/max, */
    unsigned int migrationPortMax;  /* the same on every host of a cluster */
    /* [metrics] */
    char *metricsDir;               /* node-exporter's textfile directory;
                                     * NULL: no metrics */
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

const char *vrmHelperConfigDefaultPath(void);
vrmHelperConfig *vrmHelperConfigLoadDefault(void);
int vrmHelperConfigCheckSystem(const vrmHelperConfig *conf);
char *vrmHelperConfigSocketPath(const vrmHelperConfig *conf);
char *vrmHelperConfigDomainDir(const vrmHelperConfig *conf, const char *uuid);
char *vrmHelperConfigDomainDiskSocket(const vrmHelperConfig *conf, const char *uuid);
char *vrmHelperConfigDomainSocket(const vrmHelperConfig *conf,
                                  const char *uuid);
