/*
 * virt-rdma.h: live migration of libvirt/QEMU guests over RDMA, for
 * management applications
 *
 * The calls mirror libvirt's: vrmDomainMigrate3() is virDomainMigrate3(),
 * vrmDomainMigrateToURI3() is virDomainMigrateToURI3() (peer to peer), and
 * vrmDomainGetJobStats() is virDomainGetJobStats(). They take libvirt's
 * typed parameters and flags plus the VRM_MIGRATE_PARAM_* ones below, and
 * keep libvirt's semantics: the same return values (NULL or -1 on
 * failure) and an abort with virDomainAbortJob() ends the RDMA transport
 * too. On failure vrmLastError() tells why with a code, the part that
 * failed and a message, whether libvirt or virt-rdma failed (libvirt's own
 * error stays in virGetLastError() too). Reference: man 3 vrmDomainMigrate3;
 * an example: tools/lib/examples/migrate-app.c.
 *
 * What they add: the local virt-rdmad registers the caller's RDMA
 * overrides as an intent, and the migration URI becomes the domain's
 * per-domain path unix:///run/virt-rdma/qemu/<uuid>/migrate.sock; the
 * destination's virt-rdmad then negotiates with ours over their own
 * authenticated channel (the same as for a plain `virsh migrate` with that
 * URI). DEST_XML stays the caller's: no token or offer goes into it. The
 * intent makes the job the caller's: it shows in vrmDomainGetJobStats().
 *
 * Flags: VIR_MIGRATE_RDMA_PIN_ALL asks for pin-all (every ring registered
 * up front); VIR_MIGRATE_PARALLEL with VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS
 * N gives 1 + N RDMA channels; VIR_MIGRATE_POSTCOPY_RESUME resumes a broken
 * post-copy migration through the recovery job the helpers set up (no
 * intent, no RDMA parameter; it waits up to 60 s for that job).
 *
 * Include it as <virt-rdma/virt-rdma.h>; build with
 * `pkg-config --cflags --libs virt-rdma`.
 */
#pragma once

#include <libvirt/libvirt.h>

/*
 * The release of virt-rdma this header belongs to, for compile-time checks
 * as with libvirt's LIBVIR_CHECK_VERSION():
 *     #if VIRT_RDMA_CHECK_VERSION(0, 2, 0)
 * is true when building against 0.2.0 or later.
 */
#define VIRT_RDMA_VERSION_MAJOR 0
#define VIRT_RDMA_VERSION_MINOR 1
#define VIRT_RDMA_VERSION_MICRO 0
#define VIRT_RDMA_VERSION_NUMBER \
    (VIRT_RDMA_VERSION_MAJOR * 1000000 + VIRT_RDMA_VERSION_MINOR * 1000 + \
     VIRT_RDMA_VERSION_MICRO)
#define VIRT_RDMA_CHECK_VERSION(major, minor, micro) \
    ((major) * 1000000 + (minor) * 1000 + (micro) <= VIRT_RDMA_VERSION_NUMBER)

#ifdef __cplusplus
extern "C" {
#endif

/* The prefix of every typed parameter of ours: libvirt's names never
 * start with it. */
#define VRM_PARAM_PREFIX "rdma."

/* Typed parameters of ours, accepted beside libvirt's. */
#define VRM_MIGRATE_PARAM_CHUNK_SIZE VRM_PARAM_PREFIX "chunk-size" /* ullong, bytes */
#define VRM_MIGRATE_PARAM_CHANNELS VRM_PARAM_PREFIX "channels" /* uint, 1..64 */
#define VRM_MIGRATE_PARAM_DEVICE VRM_PARAM_PREFIX "device" /* string, e.g. mlx5_0 */
#define VRM_MIGRATE_PARAM_DEVICE_PORT VRM_PARAM_PREFIX "device-port" /* uint, 1..255 */
#define VRM_MIGRATE_PARAM_ADDRESS VRM_PARAM_PREFIX "address" /* string, IP literal */
#define VRM_MIGRATE_PARAM_RING_DEPTH VRM_PARAM_PREFIX "ring-depth" /* uint, 2..1024 */
#define VRM_MIGRATE_PARAM_HELPER_SOCKET VRM_PARAM_PREFIX "helper-socket" /* string */

/* Job statistics of ours, added to libvirt's by vrmDomainGetJobStats(). */
#define VRM_JOB_STATS_ID VRM_PARAM_PREFIX "job-id" /* ullong */
#define VRM_JOB_STATS_STATE VRM_PARAM_PREFIX "state" /* string */
#define VRM_JOB_STATS_BYTES_SENT VRM_PARAM_PREFIX "bytes-sent" /* ullong */
#define VRM_JOB_STATS_BYTES_RECEIVED VRM_PARAM_PREFIX "bytes-received" /* ullong */
#define VRM_JOB_STATS_MBPS VRM_PARAM_PREFIX "mbps" /* uint, Mbit/s */
#define VRM_JOB_STATS_CHUNKS VRM_PARAM_PREFIX "chunks" /* ullong */
#define VRM_JOB_STATS_PINNED_BYTES VRM_PARAM_PREFIX "pinned-bytes" /* ullong */
#define VRM_JOB_STATS_REGISTRATION_NS VRM_PARAM_PREFIX "registration-ns" /* ullong */
#define VRM_JOB_STATS_CHANNELS VRM_PARAM_PREFIX "channels" /* uint */
#define VRM_JOB_STATS_CPU_NS VRM_PARAM_PREFIX "cpu-ns" /* ullong, the engine's user+system time */
/* uint, the capability bits the engines agreed (docs/protocol.rst) */
#define VRM_JOB_STATS_CAPABILITIES VRM_PARAM_PREFIX "capabilities"
#define VRM_JOB_STATS_ERROR VRM_PARAM_PREFIX "error" /* string */
/* ullong, the job whose broken post-copy migration it recovers */
#define VRM_JOB_STATS_RECOVERY_OF VRM_PARAM_PREFIX "recovery-of"

virDomainPtr vrmDomainMigrate3(virDomainPtr domain,
                               virConnectPtr dconn,
                               virTypedParameterPtr params,
                               unsigned int nparams,
                               unsigned int flags);

int vrmDomainMigrateToURI3(virDomainPtr domain,
                           const char *dconnuri,
                           virTypedParameterPtr params,
                           unsigned int nparams,
                           unsigned int flags);

/*
 * libvirt's job stats of @domain (VIR_DOMAIN_JOB_STATS_COMPLETED for the
 * last completed job) merged with the RDMA job's, as typed parameters that
 * the caller frees with virTypedParamsFree(). The RDMA ones are missing
 * when the local virt-rdmad has no job for the domain.
 */
int vrmDomainGetJobStats(virDomainPtr domain,
                         int *type,
                         virTypedParameterPtr *params,
                         int *nparams,
                         unsigned int flags);

/*
 * Why the last call of this thread failed, as libvirt's virGetLastError()
 * tells it: a code for programs, the part that refused, and the
 * translated sentence for people. The codes are stable: new ones are only
 * ever added at the end.
 */
typedef enum {
    VRM_ERROR_NONE = 0,         /* the last call succeeded */
    VRM_ERROR_INTERNAL = 1,     /* a bug in virt-rdma */
    VRM_ERROR_SYSTEM = 2,       /* a system call failed */
    VRM_ERROR_INVALID_ARG = 3,  /* the caller passed a bad value */
    VRM_ERROR_CONFIG = 4,       /* a host's virt-rdmad.conf */
    VRM_ERROR_XML = 5,          /* malformed or invalid XML (metadata) */
    VRM_ERROR_PROTOCOL = 6,     /* a peer broke the protocol */
    VRM_ERROR_VERSION = 7,      /* no protocol version in common */
    VRM_ERROR_AUTH = 8,         /* credentials refused (socket owner, key) */
    VRM_ERROR_RDMA = 9,         /* an RDMA operation failed */
    VRM_ERROR_NO_DEVICE = 10,   /* the RDMA device or port is missing or down */
    VRM_ERROR_RESOURCE = 11,    /* a limit: locked memory, pinned bytes, jobs */
    VRM_ERROR_TIMEOUT = 12,     /* a deadline passed */
    VRM_ERROR_PEER = 13,        /* virt-rdmad (here or on the peer) is not
                                 * reachable, or a peer went away */
    VRM_ERROR_POLICY = 14,      /* a host's policy refuses the migration */
    VRM_ERROR_CANCELLED = 15,   /* the job was aborted */
    VRM_ERROR_LIBVIRT = 16,     /* libvirt failed: virGetLastError() has its error */
} vrmErrorNumber;

typedef enum {
    VRM_FROM_NONE = 0,
    VRM_FROM_LIBRARY = 1,       /* this library's own checks */
    VRM_FROM_HELPER = 2,        /* virt-rdmad, its engines or its peer */
    VRM_FROM_LIBVIRT = 3,       /* libvirt */
} vrmErrorDomain;

typedef struct {
    int code;                   /* vrmErrorNumber */
    int domain;                 /* vrmErrorDomain */
    const char *message;        /* translated; valid until the next call */
} vrmError;

/* This thread's last error; code VRM_ERROR_NONE when there was none. */
const vrmError *vrmLastError(void);

/* Its message alone: one translated sentence. */
const char *vrmLastErrorMessage(void);

#ifdef __cplusplus
}
#endif
