/*
 * virt-rdma.c: the command users run: migrate, jobinfo, capabilities, bench
 */
#include <config.h>

#include <stdbool.h>
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
    bool libvirt;               /* takes -c/--connect URI */
    const char *summary;        /* N_() */
} vrmCliCommand;

static const vrmCliCommand vrmCliCommands[] = {
    { "migrate", vrmCmdMigrate, true, N_("live-migrate a domain over RDMA") },
    { "jobinfo", vrmCmdJobInfo, true, N_("show a domain's migration job, with its RDMA transport") },
    { "jobs", vrmCmdJobs, false, N_("list this host's RDMA migration jobs (running; --all: finished too)") },
    { "events", vrmCmdEvents, false, N_("print RDMA migration job events as they happen (like virsh event)") },
    { "uri", vrmCmdUri, true, N_("print the migration URI of a domain's RDMA migration (for virsh migrate --migrateuri)") },
    { "capabilities", vrmCmdCapabilities, false, N_("show whether this host can migrate over RDMA, as virt-rdmad sees it") },
    { "bench", vrmCmdBench, false, N_("measure the RDMA transport engine between two hosts") },
};

static const vrmCliCommand *
vrmCliFindCommand(const char *name)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmCliCommands); i++) {
        if (g_str_equal(name, vrmCliCommands[i].name))
            return &vrmCliCommands[i];
    }
    return NULL;
}

/* "migrate, jobinfo, ... and bench", from the table */
static char *
vrmCliCommandList(bool libvirtOnly)
{
    g_autoptr(GPtrArray) names = g_ptr_array_new();
    GString *out = g_string_new(NULL);
    guint i;

    for (i = 0; i < G_N_ELEMENTS(vrmCliCommands); i++) {
        if (!libvirtOnly || vrmCliCommands[i].libvirt)
            g_ptr_array_add(names, (gpointer)vrmCliCommands[i].name);
    }
    for (i = 0; i < names->len; i++) {
        if (i && i == names->len - 1)
            /* TRANSLATORS: the last of a list of command names */
            g_string_append(out, _(" and "));
        else if (i)
            g_string_append(out, ", ");
        g_string_append(out, names->pdata[i]);
    }
    return g_string_free(out, FALSE);
}

static int
vrmCliRun(const vrmCliCommand *cmd, int argc, char **argv)
{
    /* GLib's help header: "Usage: virt-rdma migrate [OPTION…]" */
    g_autofree char *prgname = g_strdup_printf("virt-rdma %s", cmd->name);

    g_set_prgname(prgname);
    return cmd->run(argc, argv);
}

static char *vrmCliCommandList(bool libvirtOnly);

static void
vrmCliUsage(FILE *out)
{
    g_autofree char *libvirtCommands = vrmCliCommandList(true);
    size_t i;

    /* message-style: exempt-begin: help text (GLib's --help conventions) */
    fprintf(out, _("Usage: virt-rdma COMMAND [OPTIONS]\n\n"
                   "Live migration of libvirt/QEMU guests over RDMA.\n\n"
                   "Commands:\n"));
    for (i = 0; i < G_N_ELEMENTS(vrmCliCommands); i++)
        fprintf(out, "  %-14s %s\n", vrmCliCommands[i].name,
                _(vrmCliCommands[i].summary));
    fprintf(out, _("\n'virt-rdma help COMMAND' (or 'virt-rdma COMMAND --help') describes a command's options;\n"
                   "'virt-rdma -c URI COMMAND' gives %1$s a libvirt URI, as virsh -c does.\n"),
            libvirtCommands);
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
    const vrmCliCommand *cmd;
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
    /* virsh's habit: a libvirt URI before the command */
    if (g_str_equal(argv[1], "-c") || g_str_equal(argv[1], "--connect") ||
        g_str_has_prefix(argv[1], "--connect=")) {
        const char *uri = g_str_has_prefix(argv[1], "--connect=") ?
            argv[1] + strlen("--connect=") : argc > 2 ? argv[2] : NULL;
        int skip = g_str_has_prefix(argv[1], "--connect=") ? 1 : 2;
        g_autoptr(GPtrArray) args = g_ptr_array_new();
        g_autofree char *list = vrmCliCommandList(true);

        if (!uri || !*uri || argc <= skip + 1) {
            vrmCliError(_("-c takes a libvirt URI and a command, e.g. 'virt-rdma -c qemu:///system migrate web1 qemu+tls://dst/system'"));
            return 2;
        }
        if (!(cmd = vrmCliFindCommand(argv[skip + 1])) || !cmd->libvirt) {
            vrmCliError(_("'%1$s' does not use libvirt: -c goes with %2$s"),
                        argv[skip + 1], list);
            return 2;
        }
        /* COMMAND --connect URI ARGS... */
        g_ptr_array_add(args, argv[skip + 1]);
        g_ptr_array_add(args, (gpointer)"--connect");
        g_ptr_array_add(args, (gpointer)uri);
        for (i = skip + 2; i < (size_t)argc; i++)
            g_ptr_array_add(args, argv[i]);
        g_ptr_array_add(args, NULL);
        return vrmCliRun(cmd, args->len - 1, (char **)args->pdata);
    }
    /* "virt-rdma help COMMAND", as "virsh help COMMAND" */
    if (g_str_equal(argv[1], "help") && argc == 3) {
        char *helpArgv[] = { argv[2], (char *)"--help", NULL };
        g_autofree char *list = vrmCliCommandList(false);

        if (!(cmd = vrmCliFindCommand(argv[2]))) {
            vrmCliError(_("unknown command '%1$s'; the commands are %2$s"), argv[2], list);
            return 2;
        }
        return vrmCliRun(cmd, 2, helpArgv);
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
    if ((cmd = vrmCliFindCommand(argv[1])))
        return vrmCliRun(cmd, argc - 1, argv + 1);
    {
        g_autofree char *list = vrmCliCommandList(false);

        vrmCliError(_("unknown command '%1$s'; the commands are %2$s"), argv[1], list);
    }
    return 2;
}
