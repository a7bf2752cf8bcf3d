/*
 * virt-rdmad: the hypervisor-side helper of virt-rdma
 *
 * See virt-rdmad(8) (docs/man/virt-rdmad.rst) and docs/helper.rst.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>

#include "vrmhelperd.h"
#include "vrmhelperpeer.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

/* --check-config: the helpers' channel as the daemon would start it. A
 * channel that would be off is an error (the daemon would run, and refuse
 * every RDMA migration), unless [peers] auth = none says so. */
static int
vrmCheckPeers(const vrmHelperConfig *conf)
{
    g_autoptr(vrmPeerCreds) creds = NULL;

    if (vrmPeerCredsLoad(conf, &creds) < 0)
        return -1;
    if (!creds && conf->peerAuth != VRM_PEER_AUTH_NONE) {
        g_autofree char *why = vrmPeerChannelOffReason(conf);

        vrmReportError(VRM_ERR_CONFIG, "%s", why);
        return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    g_autofree char *configPath = NULL;
    g_autofree char *socketPath = NULL;
    g_autofree char *enginePath = NULL;
    g_autofree char *generateKey = NULL;
    gint connectTimeout = 30;
    gint idleTimeout = 120;
    gboolean verbose = FALSE, debug = FALSE, engineDebug = FALSE;
    gboolean version = FALSE, checkConfig = FALSE;
    g_autofree char *configHelp = NULL;
    g_autofree char *engineHelp = NULL;
    /* The descriptions of --config and --engine name this build's paths:
     * filled in below, once gettext is set up (a path glued into an N_()
     * literal would not be the msgid xgettext extracts). */
    GOptionEntry entries[] = {
        { "config", 'c', 0, G_OPTION_ARG_FILENAME, &configPath,
          NULL, "PATH" },
        { "socket", 's', 0, G_OPTION_ARG_FILENAME, &socketPath,
          N_("control socket (default: virt-rdmad.sock in the run directory)"), "PATH" },
        { "engine", 0, 0, G_OPTION_ARG_FILENAME, &enginePath,
          NULL, "PATH" },
        { "connect-timeout", 0, 0, G_OPTION_ARG_INT, &connectTimeout,
          N_("seconds the engines have to connect to each other and to QEMU (default 30)"), "SEC" },
        { "idle-timeout", 0, 0, G_OPTION_ARG_INT, &idleTimeout,
          N_("an engine without progress for SEC seconds fails its job (default 120)"), "SEC" },
        { "check-config", 0, 0, G_OPTION_ARG_NONE, &checkConfig,
          N_("check the configuration, print it in canonical form and exit"), NULL },
        { "generate-key", 0, 0, G_OPTION_ARG_FILENAME, &generateKey,
          N_("write a new cluster key for the helpers' channel to FILE (mode 0600, never over an existing file) and exit; copy it to every host"), "FILE" },
        { "verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, N_("log jobs"), NULL },
        { "debug", 0, 0, G_OPTION_ARG_NONE, &debug, N_("log everything"), NULL },
        { "engine-debug", 0, 0, G_OPTION_ARG_NONE, &engineDebug,
          N_("run the engines with --debug"), NULL },
        { "version", 0, 0, G_OPTION_ARG_NONE, &version,
          N_("print the version and exit"), NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) octx = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(vrmHelperConfig) conf = NULL;
    g_autoptr(vrmHelperDaemon) d = NULL;
    vrmHelperOptions opts = { 0 };

    vrmI18nInit();
    vrmLogSetProgram("virt-rdmad");
    /* TRANSLATORS: %1$s is the path of the configuration file */
    configHelp = g_strdup_printf(_("configuration file (default %1$s)"),
                                 VRM_SYSCONFDIR "/" VRM_HELPER_CONFIG_FILE);
    /* TRANSLATORS: %1$s is the path of the installed engine program */
    engineHelp = g_strdup_printf(_("transport engine program (default: $VRM_ENGINE, else %1$s)"),
                                 VRM_ENGINE_PATH);
    entries[0].description = configHelp;
    entries[2].description = engineHelp;

    octx = g_option_context_new(NULL);
    g_option_context_set_translation_domain(octx, GETTEXT_PACKAGE);
    g_option_context_set_summary(octx,
        _("The virt-rdma helper of a hypervisor host: negotiates each RDMA\n"
          "migration with the other host's helper over an authenticated channel,\n"
          "runs one transport engine per migration within this host's policy\n"
          "and keeps what happened to each job. Runs in the foreground."));
    g_option_context_add_main_entries(octx, entries, GETTEXT_PACKAGE);
    if (!g_option_context_parse(octx, &argc, &argv, &err)) {
        fprintf(stderr, "virt-rdmad: %s\n", err->message);
        return 2;
    }
    if (version) {
        printf("virt-rdmad %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (generateKey) {
        if (vrmPeerKeyGenerate(generateKey) < 0) {
            fprintf(stderr, "virt-rdmad: %s\n", vrmGetLastErrorMessage());
            return 1;
        }
        return 0;
    }
    if (connectTimeout < 1 || idleTimeout < 0) {
        fprintf(stderr, "virt-rdmad: %s\n",
                _("--connect-timeout must be at least 1 and --idle-timeout at least 0"));
        return 2;
    }
    if (debug)
        vrmLogSetLevel(VRM_LOG_DEBUG);
    else if (verbose)
        vrmLogSetLevel(VRM_LOG_INFO);

    conf = configPath ? vrmHelperConfigLoadFile(configPath) : vrmHelperConfigLoadDefault();
    if (!conf) {
        fprintf(stderr, "virt-rdmad: %s\n", vrmGetLastErrorMessage());
        return 1;
    }
    if (checkConfig) {
        g_autofree char *text = NULL;

        if (vrmHelperConfigCheckSystem(conf) < 0 || vrmCheckPeers(conf) < 0) {
            fprintf(stderr, "virt-rdmad: %s\n", vrmGetLastErrorMessage());
            return 1;
        }
        text = vrmHelperConfigFormat(conf);
        fputs(text, stdout);
        return 0;
    }

    opts.socketPath = socketPath;
    opts.enginePath = enginePath;
    opts.connectTimeout = connectTimeout;
    opts.idleTimeout = idleTimeout;
    opts.engineDebug = engineDebug;
    d = vrmHelperDaemonNew(g_steal_pointer(&conf), &opts);
    if (vrmHelperDaemonStart(d) < 0) {
        fprintf(stderr, "virt-rdmad: %s\n", vrmGetLastErrorMessage());
        return 1;
    }
    vrmHelperDaemonRun(d);
    return 0;
}
