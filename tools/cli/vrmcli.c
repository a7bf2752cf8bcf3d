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

static void G_GNUC_PRINTF(2, 0)
vrmCliVPrint(bool warning, const char *fmt, va_list ap)
{
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);

    if (warning)
        fprintf(stderr, _("virt-rdma: warning: %1$s\n"), msg);
    else
        fprintf(stderr, _("virt-rdma: error: %1$s\n"), msg);
}

void
vrmCliError(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vrmCliVPrint(false, fmt, ap);
    va_end(ap);
}

void
vrmCliWarning(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vrmCliVPrint(true, fmt, ap);
    va_end(ap);
}

bool
vrmCliParseOptions(GOptionContext *ctx, const GOptionEntry *entries, int *argc, char ***argv)
{
    g_autoptr(GError) err = NULL;

    if (entries)
        g_option_context_add_main_entries(ctx, entries, GETTEXT_PACKAGE);
    if (!g_option_context_parse(ctx, argc, argv, &err)) {
        vrmCliError("%s", err->message);
        return false;
    }
    return true;
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
