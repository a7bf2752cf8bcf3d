/*
 * vrmcli.c: what every subcommand of virt-rdma shares: sizes and errors
 * as virsh prints them
 */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <libvirt/virterror.h>

#include "vrmcli.h"
#include "vrmi18n.h"

char *
vrmCliPrettySize(unsigned long long bytes)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = bytes;
    size_t u = 0;

    if (bytes < 1024)
        return g_strdup_printf("%llu B", bytes);
    while (v >= 1024 && u + 1 < G_N_ELEMENTS(units)) {
        v /= 1024;
        u++;
    }
    return g_strdup_printf("%.3f %s", v, units[u]);
}

void
vrmCliError(const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, _("virt-rdma: error: %1$s\n"), msg);
}

void
vrmCliWarning(const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, _("virt-rdma: warning: %1$s\n"), msg);
}

virDomainPtr
vrmCliLookupDomain(virConnectPtr conn, const char *name)
{
    virDomainPtr dom = NULL;
    unsigned long long id;
    char *end = NULL;

    if (g_ascii_isdigit(name[0]) &&
        (id = g_ascii_strtoull(name, &end, 10), *end == '\0') && id <= G_MAXINT)
        dom = virDomainLookupByID(conn, (int)id);
    if (!dom && strlen(name) == VIR_UUID_STRING_BUFLEN - 1)
        dom = virDomainLookupByUUIDString(conn, name);
    if (!dom)
        dom = virDomainLookupByName(conn, name);
    if (!dom)
        vrmCliError(_("failed to get domain '%1$s'"), name);
    return dom;
}
