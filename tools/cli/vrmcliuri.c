/*
 * vrmcliuri.c: virt-rdma uri DOMAIN
 *
 * The migration URI of a domain's RDMA migration, to give to any libvirt
 * client: `virsh migrate --migrateuri "$(virt-rdma uri web1)" ...`. It is
 * the per-domain path under the helper's run directory, from the domain's
 * UUID (every domain name libvirt accepts works, the length is fixed), the
 * same string on every host with the same [paths] run-dir. With --disks:
 * the disks URI next to it, for --copy-storage-all (libvirt's NBD copy).
 * The domain as virsh takes it: an argument or --domain. Given as a UUID
 * it needs no libvirt: where libvirt cannot be asked, the path is printed
 * with a warning that the domain was not checked.
 */
#include <config.h>

#include <stdio.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vrmcli.h"
#include "vrmerror.h"
#include "vrmhelperconf.h"
#include "vrmi18n.h"
#include "vrmlibpriv.h"

int
vrmCmdUri(int argc, char **argv)
{
    g_autofree char *connectURI = NULL;
    g_autofree char *domainOpt = NULL;
    gboolean disks = FALSE;
    GOptionEntry entries[] = {
        { "domain", 0, 0, G_OPTION_ARG_STRING, &domainOpt,
          N_("the domain (name, ID or UUID), as virsh takes it"), N_("DOMAIN") },
        { "connect", 'c', 0, G_OPTION_ARG_STRING, &connectURI,
          N_("libvirt URI (default: libvirt's)"), N_("URI") },
        { "disks", 0, 0, G_OPTION_ARG_NONE, &disks,
          N_("print the disks URI (virsh migrate --copy-storage-all --disks-uri) instead"), NULL },
        { NULL, 0, 0, 0, NULL, NULL, NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(_("DOMAIN - print the migration URI of a domain's RDMA migration"));
    g_autoptr(vrmHelperConfig) conf = NULL;
    g_autoptr(virConnect) conn = NULL;
    g_autoptr(virDomain) dom = NULL;
    g_autofree char *path = NULL;
    const char *name;
    char uuid[VIR_UUID_STRING_BUFLEN];

    g_option_context_add_main_entries(ctx, entries, GETTEXT_PACKAGE);
    g_option_context_set_summary(ctx,
        _("Prints unix://PATH, PATH being the domain's per-domain socket under virt-rdmad's\n"
          "run directory. Give it to any libvirt client as the migration URI:\n"
          "  virsh migrate --live --p2p --migrateuri \"$(virt-rdma uri web1)\" web1 qemu+tls://dst/system\n"
          "With --disks, the URI of its disks' socket, for disks that are not shared:\n"
          "  virsh migrate ... --copy-storage-all --disks-uri \"$(virt-rdma uri --disks web1)\" ..."));
    if (!vrmCliParseOptions(ctx, NULL, &argc, &argv))
        return 2;
    if ((domainOpt ? argc != 1 : argc != 2)) {
        vrmCliError(_("uri takes one domain (name, ID or UUID), e.g. 'virt-rdma uri web1'"));
        return 2;
    }
    name = domainOpt ? domainOpt : argv[1];
    if (!(conf = vrmHelperConfigLoadDefault())) {
        vrmCliError("%s", vrmGetLastErrorMessage());
        return 1;
    }
    if (!(conn = virConnectOpenReadOnly(connectURI))) {
        if (!g_uuid_string_is_valid(name)) {
            vrmCliError("%s", virGetLastErrorMessage());
            return 1;
        }
        /* the path needs only the UUID; say what could not be checked */
        vrmCliWarning(_("cannot ask libvirt (%1$s): the path of %2$s, unchecked whether that domain exists here and is RDMA-enabled"),
                      virGetLastErrorMessage(), name);
        path = disks ? vrmHelperConfigDomainDiskSocket(conf, name) :
            vrmHelperConfigDomainSocket(conf, name);
        printf("unix://%s\n", path);
        return 0;
    }
    if (!(dom = vrmCliLookupDomain(conn, name)))
        return 1;
    if (vrmLibDomainCheckRDMAEnabled(dom) < 0) {
        vrmCliError("%s", vrmGetLastErrorMessage());
        return 1;
    }
    if (virDomainGetUUIDString(dom, uuid) < 0) {
        vrmCliError("%s", virGetLastErrorMessage());
        return 1;
    }
    path = disks ? vrmHelperConfigDomainDiskSocket(conf, uuid) :
        vrmHelperConfigDomainSocket(conf, uuid);
    printf("unix://%s\n", path);
    return 0;
}
