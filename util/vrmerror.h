/*
 * vrmerror.h: the one error facility of virt-rdma
 *
 * Functions that fail return -1 or NULL and report once, at the point of
 * failure, with vrmReportError() or vrmReportSystemError(). The report is
 * kept per thread until the caller reads it with vrmGetLastErrorMessage().
 * Messages are whole translatable sentences: _("…") at the call site.
 */
#pragma once

#include <glib.h>

typedef enum {
    VRM_ERR_OK = 0,
    VRM_ERR_INTERNAL,       /* a bug or an impossible state */
    VRM_ERR_SYSTEM,         /* a system call failed; errno is kept */
    VRM_ERR_INVALID_ARG,    /* a caller passed a bad value */
    VRM_ERR_CONFIG,         /* configuration file or setting */
    VRM_ERR_XML,            /* malformed or invalid XML */
    VRM_ERR_PROTOCOL,       /* a peer broke the wire protocol */
    VRM_ERR_VERSION,        /* no common protocol version */
    VRM_ERR_AUTH,           /* wrong token or peer not allowed */
    VRM_ERR_RDMA,           /* a verbs or rdma_cm operation failed */
    VRM_ERR_NO_DEVICE,      /* RDMA device or port missing or down */
    VRM_ERR_RESOURCE,       /* a limit: memlock, pinned bytes, jobs */
    VRM_ERR_TIMEOUT,        /* a deadline passed */
    VRM_ERR_PEER,           /* the peer reported an error or went away */
    VRM_ERR_POLICY,         /* host policy refuses the request */
    VRM_ERR_CANCELLED,      /* the job was cancelled */
    VRM_ERR_LIBVIRT,        /* libvirt returned an error */

    VRM_ERR_LAST
} vrmErrorCode;

const char *vrmErrorCodeTypeToString(int code);
/* the code of a name vrmErrorCodeTypeToString() gives; -1 if none */
int vrmErrorCodeTypeFromString(const char *str);

void vrmReportErrorFull(int code, int errnum,
                        const char *file, const char *func, int line,
                        const char *fmt, ...)
    G_GNUC_PRINTF(6, 7);

#define vrmReportError(code, ...) \
    vrmReportErrorFull(code, 0, __FILE__, __func__, __LINE__, __VA_ARGS__)

#define vrmReportSystemError(errnum, ...) \
    vrmReportErrorFull(VRM_ERR_SYSTEM, errnum, \
                       __FILE__, __func__, __LINE__, __VA_ARGS__)

/* Message of this thread's last error, or a generic sentence if none. */
const char *vrmGetLastErrorMessage(void);
/* Code of this thread's last error, VRM_ERR_OK if none. */
int vrmGetLastErrorCode(void);
void vrmResetLastError(void);

/* Copy this thread's last error into a GError (for GLib-based callers). */
void vrmLastErrorToGError(GError **err);

/* Set this thread's error from a message (e.g. one a peer or child sent). */
void vrmSetLastError(int code, const char *message);

GQuark vrmErrorQuark(void);
#define VRM_ERROR vrmErrorQuark()
