/*
 * virt-rdma-engine: carry QEMU's UNIX-socket migration streams over RDMA
 *
 * One process per migration and host. See virt-rdma-engine(1) and
 * docs/protocol.rst.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrmtransport.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"
#include "vrmparse.h"

typedef struct {
    char *role;
    char *unix_path;
    char *unix_mode;
    char *listen;
    char *connect;
    char *token;
    gint channels;
    char *chunk_size;
    gint ring_depth;
    gboolean pin_all;
    gboolean no_write_imm;
    char *max_pinned;
    char *stats_socket;
    char *stats_file;
    gint deadline_connect;
    gint idle_timeout;
    char *device;
    gboolean verbose;
    gboolean debug;
    gboolean version;
    char *test_fault;
} vrmEngineOptions;

/* A size in the project's one grammar (util/vrmparse.h) */
static int
vrmEngineParseSize(const char *option, const char *str, guint64 *out)
{
    unsigned long long v;

    if (!vrmParseSize(str, &v)) {
        vrmReportError(VRM_ERR_INVALID_ARG, _("%1$s '%2$s' is not a size: %3$s"),
                       option, str ? str : "", vrmSizeSyntaxHelp());
        return -1;
    }
    *out = v;
    return 0;
}

/* Split "ADDR:PORT" or "[ADDR]:PORT" */
static int
vrmParseAddress(const char *str, char **host, char **port)
{
    const char *colon;

    if (!str || !(colon = strrchr(str, ':')) || colon == str || !colon[1])
        goto bad;
    if (str[0] == '[') {
        if (colon[-1] != ']')
            goto bad;
        *host = g_strndup(str + 1, colon - str - 2);
    } else {
        *host = g_strndup(str, colon - str);
    }
    *port = g_strdup(colon + 1);
    return 0;

 bad:
    vrmReportError(VRM_ERR_INVALID_ARG, _("'%1$s' is not ADDR:PORT."), str ? str : "");
    return -1;
}

static int
vrmOptionsToSettings(const vrmEngineOptions *o, vrmSettings *s)
{
    guint64 v;
    int role;

    if ((role = vrmRoleTypeFromString(o->role)) < 0) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("--role must be 'source' or 'destination'."));
        return -1;
    }
    s->role = role;
    s->unix_path = g_strdup(o->unix_path);
    if (o->unix_mode) {
        char *end = NULL;
        v = g_ascii_strtoull(o->unix_mode, &end, 8);
        if (!*o->unix_mode || *end || v > 0777) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("--unix-mode must be an octal mode such as 0660."));
            return -1;
        }
        s->unix_mode = v;
    }
    if (role == VRM_ROLE_SOURCE) {
        if (o->connect) {
            vrmReportError(VRM_ERR_INVALID_ARG, _("--connect is for the destination role."));
            return -1;
        }
        if (o->listen && vrmParseAddress(o->listen, &s->rdma_host, &s->rdma_port) < 0)
            return -1;
    } else {
        if (o->listen) {
            vrmReportError(VRM_ERR_INVALID_ARG, _("--listen is for the source role."));
            return -1;
        }
        if (o->connect && vrmParseAddress(o->connect, &s->rdma_host, &s->rdma_port) < 0)
            return -1;
    }
    if (o->token) {
        if (!vrmTokenParse(o->token, &s->token)) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("--token takes 32 lowercase hexadecimal characters"));
            return -1;
        }
    } else {
        /* virt-rdmad passes it here: unlike argv, the environment is
         * readable only by this process's user. */
        g_autofree char *env = g_strdup(g_getenv(VRM_ENGINE_TOKEN_ENV));

        if (!env) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("A token is required (--token, or the environment variable %1$s)."),
                           VRM_ENGINE_TOKEN_ENV);
            return -1;
        }
        g_unsetenv(VRM_ENGINE_TOKEN_ENV);
        if (!vrmTokenParse(env, &s->token)) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("the token in %1$s is not 32 lowercase hexadecimal characters"),
                           VRM_ENGINE_TOKEN_ENV);
            return -1;
        }
    }
    if (o->channels < 1 || vrmProtoCheckChannels(o->channels) < 0) {
        vrmProtoCheckChannels(0);
        return -1;
    }
    s->channels = o->channels;
    if (o->chunk_size) {
        if (vrmEngineParseSize("--chunk-size", o->chunk_size, &v) < 0 || vrmProtoCheckChunkSize(v) < 0)
            return -1;
        s->chunk_size = v;
    }
    if (o->ring_depth < 0 || vrmProtoCheckDepth(o->ring_depth) < 0)
        return -1;
    s->ring_depth = o->ring_depth;
    s->pin_all = o->pin_all;
    s->write_imm = !o->no_write_imm;
    if (o->max_pinned && vrmEngineParseSize("--max-pinned", o->max_pinned, &s->max_pinned) < 0)
        return -1;
    s->stats_socket = g_strdup(o->stats_socket);
    if (o->deadline_connect < 1) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("--deadline-connect must be at least 1 second."));
        return -1;
    }
    s->deadline_connect = o->deadline_connect;
    if (o->idle_timeout < 0) {
        vrmReportError(VRM_ERR_INVALID_ARG, _("--idle-timeout cannot be negative."));
        return -1;
    }
    s->idle_timeout = o->idle_timeout;
    s->device = g_strdup(o->device);
    if (o->test_fault) {
        /* NAME or NAME:BYTES */
        g_auto(GStrv) parts = g_strsplit(o->test_fault, ":", 2);
        int f = vrmFaultTypeFromString(parts[0]);

        if (f <= VRM_FAULT_NONE ||
            (parts[1] && vrmEngineParseSize("--test-fault", parts[1], &s->fault_bytes) < 0)) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("Unknown test fault '%1$s'."), o->test_fault);
            return -1;
        }
        s->fault = f;
    }
    return vrmSettingsValidate(s);
}

static int
vrmWriteStats(const char *json, const char *file)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *line = g_strconcat(json, "\n", NULL);

    if (!file) {
        fputs(line, stdout);
        fflush(stdout);
        return 0;
    }
    if (!g_file_set_contents(file, line, -1, &err)) {
        vrmReportError(VRM_ERR_SYSTEM, _("Cannot write the stats to %1$s: %2$s"),
                       file, err->message);
        return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    vrmEngineOptions o = {
        .channels = 1,
        .ring_depth = VRM_RING_DEPTH_DEFAULT,
        .deadline_connect = 30,
        .idle_timeout = 120,
    };
    /* The option table: name, default and help of every setting */
    GOptionEntry entries[] = {
        { "role", 0, 0, G_OPTION_ARG_STRING, &o.role,
          N_("'source' (listens for QEMU and for the peer engine) or 'destination'"), "ROLE" },
        { "unix", 0, 0, G_OPTION_ARG_FILENAME, &o.unix_path,
          N_("QEMU's migration socket: the source listens there, the destination connects to it"), "PATH" },
        { "unix-mode", 0, 0, G_OPTION_ARG_STRING, &o.unix_mode,
          N_("mode of the source's listening socket (default 0660)"), "MODE" },
        { "listen", 0, 0, G_OPTION_ARG_STRING, &o.listen,
          N_("source: rdma_cm address and port to listen on"), "ADDR:PORT" },
        { "connect", 0, 0, G_OPTION_ARG_STRING, &o.connect,
          N_("destination: rdma_cm address and port of the source engine"), "ADDR:PORT" },
        { "token", 0, 0, G_OPTION_ARG_STRING, &o.token,
          N_("the job's one-time token, 32 lowercase hexadecimal characters (visible to every local user: prefer the environment variable VRM_ENGINE_TOKEN)"), "HEX32" },
        { "channels", 0, 0, G_OPTION_ARG_INT, &o.channels,
          N_("channels (QPs) of the job, 1..64; QEMU may use fewer (default 1)"), "N" },
        { "chunk-size", 0, 0, G_OPTION_ARG_STRING, &o.chunk_size,
          N_("bytes per ring chunk, a power of two in 64K..64M (default 1M)"), "SIZE" },
        { "ring-depth", 0, 0, G_OPTION_ARG_INT, &o.ring_depth,
          N_("chunks per ring, 2..1024 (default 4)"), "N" },
        { "pin-all", 0, 0, G_OPTION_ARG_NONE, &o.pin_all,
          N_("register every ring up front and send the rkeys with the ring description"), NULL },
        { "no-write-imm", 0, 0, G_OPTION_ARG_NONE, &o.no_write_imm,
          N_("announce data with descriptor SENDs instead of WRITE_WITH_IMM"), NULL },
        { "max-pinned", 0, 0, G_OPTION_ARG_STRING, &o.max_pinned,
          N_("refuse to start if the job could pin more than SIZE bytes"), "SIZE" },
        { "stats-socket", 0, 0, G_OPTION_ARG_FILENAME, &o.stats_socket,
          N_("serve the stats as JSON on this UNIX socket while running"), "PATH" },
        { "stats-file", 0, 0, G_OPTION_ARG_FILENAME, &o.stats_file,
          N_("write the final stats there instead of standard output"), "PATH" },
        { "deadline-connect", 0, 0, G_OPTION_ARG_INT, &o.deadline_connect,
          N_("seconds to connect every channel and QEMU's sockets (default 30)"), "SEC" },
        { "idle-timeout", 0, 0, G_OPTION_ARG_INT, &o.idle_timeout,
          N_("fail after SEC seconds without any progress, 0 for never (default 120)"), "SEC" },
        { "device", 0, 0, G_OPTION_ARG_STRING, &o.device,
          N_("require this RDMA device (default: the one of the address)"), "NAME" },
        { "verbose", 'v', 0, G_OPTION_ARG_NONE, &o.verbose,
          N_("log progress"), NULL },
        { "debug", 0, 0, G_OPTION_ARG_NONE, &o.debug,
          N_("log everything"), NULL },
        { "version", 0, 0, G_OPTION_ARG_NONE, &o.version,
          N_("print the version and exit"), NULL },
        { "test-fault", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_STRING, &o.test_fault,
          "test hook: version | malformed[:BYTES] | kill:BYTES", "FAULT" },
        { NULL },
    };
    g_autoptr(GOptionContext) octx = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(vrmEngine) engine = NULL;
    g_autofree char *json = NULL;
    vrmSettings s;
    int ret;

    vrmI18nInit();
    vrmLogSetProgram("virt-rdma-engine");

    octx = g_option_context_new(NULL);
    g_option_context_set_translation_domain(octx, GETTEXT_PACKAGE);
    g_option_context_set_summary(octx,
        _("Carry QEMU's UNIX-socket migration streams (main and multifd, both\n"
          "directions) over RDMA RC queue pairs, one process per migration and host.\n"
          "Exit status 0 when every channel has ended in both directions; otherwise\n"
          "non-zero with one line on standard error. Stats go to standard output as\n"
          "one JSON object."));
    g_option_context_add_main_entries(octx, entries, GETTEXT_PACKAGE);
    if (!g_option_context_parse(octx, &argc, &argv, &err)) {
        fprintf(stderr, "virt-rdma-engine: %s\n", err->message);
        return 2;
    }
    if (o.version) {
        printf("virt-rdma-engine %s (protocol version %d)\n", PACKAGE_VERSION,
               VRM_PROTOCOL_VERSION);
        return 0;
    }
    if (o.debug)
        vrmLogSetLevel(VRM_LOG_DEBUG);
    else if (o.verbose)
        vrmLogSetLevel(VRM_LOG_INFO);

    vrmSettingsInit(&s);
    if (vrmOptionsToSettings(&o, &s) < 0) {
        fprintf(stderr, "virt-rdma-engine: %s\n", vrmGetLastErrorMessage());
        vrmSettingsClear(&s);
        return 2;
    }
    engine = vrmEngineNew(&s);
    vrmSettingsClear(&s);

    ret = vrmEngineRun(engine);
    json = vrmEngineStatsJSON(engine);
    if (ret < 0) {
        g_autofree char *msg = g_strdup(vrmGetLastErrorMessage());
        vrmWriteStats(json, o.stats_file);
        fprintf(stderr, "virt-rdma-engine: error: %s\n", msg);
        return 1;
    }
    if (vrmWriteStats(json, o.stats_file) < 0) {
        fprintf(stderr, "virt-rdma-engine: error: %s\n", vrmGetLastErrorMessage());
        return 1;
    }
    return 0;
}
