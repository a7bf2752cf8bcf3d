/*
 * vrmerror.c: the one error facility of virt-rdma
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

typedef struct {
    int code;
    char *message;
} vrmLastError;

static void
vrmLastErrorFree(gpointer opaque)
{
    vrmLastError *e = opaque;

    if (!e)
        return;
    g_free(e->message);
    g_free(e);
}

static GPrivate lastErrorKey = G_PRIVATE_INIT(vrmLastErrorFree);

static vrmLastError *
vrmLastErrorGet(void)
{
    vrmLastError *e = g_private_get(&lastErrorKey);

    if (!e) {
        e = g_new0(vrmLastError, 1);
        g_private_set(&lastErrorKey, e);
    }
    return e;
}

static const char *const vrmErrorCodeNames[] = {
    "ok", "internal", "system", "invalid-arg", "config", "xml", "protocol",
    "version", "auth", "rdma", "no-device", "resource", "timeout", "peer",
    "policy", "cancelled", "libvirt",
};
G_STATIC_ASSERT(G_N_ELEMENTS(vrmErrorCodeNames) == VRM_ERR_LAST);

const char *
vrmErrorCodeTypeToString(int code)
{
    if (code < 0 || code >= VRM_ERR_LAST)
        return NULL;
    return vrmErrorCodeNames[code];
}

int
vrmErrorCodeTypeFromString(const char *str)
{
    int i;

    for (i = 0; str && i < VRM_ERR_LAST; i++) {
        if (g_str_equal(str, vrmErrorCodeNames[i]))
            return i;
    }
    return -1;
}

void
vrmReportErrorFull(int code, int errnum,
                   const char *file, const char *func, int line,
                   const char *fmt, ...)
{
    int saved = errno;
    vrmLastError *e = vrmLastErrorGet();
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);

    g_free(e->message);
    if (errnum)
        e->message = g_strdup_printf("%s: %s", msg, g_strerror(errnum));
    else
        e->message = g_steal_pointer(&msg);
    e->code = code;

    vrmLogMessage(VRM_LOG_DEBUG, file, func, line, "error %s: %s",
                  vrmErrorCodeTypeToString(code), e->message);
    errno = saved;
}

const char *
vrmGetLastErrorMessage(void)
{
    vrmLastError *e = g_private_get(&lastErrorKey);

    if (!e || !e->message)
        return _("an error occurred, but the cause is unknown");
    return e->message;
}

int
vrmGetLastErrorCode(void)
{
    vrmLastError *e = g_private_get(&lastErrorKey);

    return e ? e->code : VRM_ERR_OK;
}

void
vrmResetLastError(void)
{
    vrmLastError *e = g_private_get(&lastErrorKey);

    if (!e)
        return;
    g_clear_pointer(&e->message, g_free);
    e->code = VRM_ERR_OK;
}

void
vrmSetLastError(int code, const char *message)
{
    vrmLastError *e = vrmLastErrorGet();

    g_free(e->message);
    e->message = g_strdup(message);
    e->code = code;
}

GQuark
vrmErrorQuark(void)
{
    return g_quark_from_static_string("vrm-error-quark");
}

void
vrmLastErrorToGError(GError **err)
{
    g_set_error_literal(err, VRM_ERROR, vrmGetLastErrorCode(),
                        vrmGetLastErrorMessage());
}
