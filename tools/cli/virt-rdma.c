/*
 * virt-rdma.c: the command users run: migrate, jobinfo, capabilities, bench
 */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "vrmcli.h"
#include "vrmi18n.h"
#include "vrmlog.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;        /* N_() */
} vrmCliCommand;

static const vrmCliCommand vrmCliCommands[] = {
    { "migrate", vrmCmdMigrate, N_("live-migrate a domain over RDMA") },
    { "jobinfo", vrmCmdJobInfo, N_("show a domain's migration job, with its RDMA transport") },
    { "jobs", vrmCmdJobs, N_("list this host's RDMA migration jobs (running; --all: finished too)") },
    { "events", vrmCmdEvents, N_("print RDMA migration job events as they happen (like virsh event)") },
    { "uri", vrmCmdUri, N_("print the migration URI of a domain's RDMA migration (for virsh migrate --migrateuri)") },
    { "capabilities", vrmCmdCapabilities, N_("show whether this host can migrate over RDMA, as virt-rdmad sees it") },
    { "bench", vrmCmdBench, N_("measure the RDMA transport engine between two hosts") },
};

static void
vrmCliUsage(FILE *out)
{
    size_t i;

    /* message-style: exempt-begin: help text (GLib's --help conventions) */
    fprintf(out, _("Usage: virt-rdma COMMAND [OPTIONS]\n\n"
                   "Live migration of libvirt/QEMU guests over RDMA.\n\n"
                   "Commands:\n"));
    for (i = 0; i < G_N_ELEMENTS(vrmCliCommands); i++)
        fprintf(out, "  %-14s %s\n", vrmCliCommands[i].name,
                _(vrmCliCommands[i].summary));
    fprintf(out, _("\n'virt-rdma COMMAND --help' describes a command's options.\n"));
    /* message-style: exempt-end */
}

/* libvirt would print every error on stderr itself; we report our own. */
static void
vrmCliIgnoreLibvirtError(void *opaque, virErrorPtr err)
{
}

int
main(int argc, char **argv)
{
    size_t i;

    vrmI18nInit();
    vrmLogSetProgram("virt-rdma");
    if (virInitialize() < 0) {
        vrmCliError(_("cannot initialize libvirt"));
        return 1;
    }
    virSetErrorFunc(NULL, vrmCliIgnoreLibvirtError);
    if (argc < 2) {
        vrmCliUsage(stderr);
        return 2;
    }
    if (g_str_equal(argv[1], "--help") || g_str_equal(argv[1], "-h") ||
        g_str_equal(argv[1], "help")) {
        vrmCliUsage(stdout);
        return 0;
    }
    if (g_str_equal(argv[1], "--version")) {
        printf("virt-rdma %s\n", PACKAGE_VERSION);
        return 0;
    }
    for (i = 0; i < G_N_ELEMENTS(vrmCliCommands); i++) {
        if (g_str_equal(argv[1], vrmCliCommands[i].name)) {
            /* GLib's help header: "Usage: virt-rdma migrate [OPTION…]" */
            g_autofree char *prgname = g_strdup_printf("virt-rdma %s", argv[1]);

            g_set_prgname(prgname);
            return vrmCliCommands[i].run(argc - 1, argv + 1);
        }
    }
    vrmCliError(_("unknown command '%1$s'; the commands are migrate, jobinfo, uri, capabilities and bench"),
                argv[1]);
    return 2;
}
