/*
 * vrmenginesettings.c: the options of virt-rdma-engine, one table
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* pipe2 */
#endif

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "vrmenginesettings.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmparse.h"

VRM_ENUM_IMPL(vrmEngineRole, VRM_ENGINE_ROLE_LAST,
              "source",
              "destination",
);

VRM_ENUM_IMPL(vrmEngineFault, VRM_ENGINE_FAULT_LAST,
              "none",
              "version",
              "malformed",
              "kill",
              "impostor",
              "bad-auth",
              "early-register",
              "oversize",
              "fail",
              "vanish",
              "stale-request",
              "whole-writes",
);

#define VRM_ENGINE_UNIX_PATH_MAX (sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1)
#define VRM_ENGINE_ID_MAX 0x7fffffffu       /* uid_t / pid_t range we accept */
#define VRM_ENGINE_FD_MAX 65535

static bool
vrmEngineValidUUID(const char *value)
{
    return g_uuid_string_is_valid(value);
}

static bool
vrmEngineValidSocketPath(const char *value)
{
    return value[0] == '/' && strlen(value) <= VRM_ENGINE_UNIX_PATH_MAX;
}

#define OFF(field) offsetof(vrmEngineSettings, field)

/* Every option of the engine. Order = order of --help and of the man page. */
static const vrmEngineOption vrmEngineOptions[] = {
    { "role", VRM_ENGINE_OPT_ROLE, OFF(role), VRM_ENGINE_FOR_BOTH,
      0, 0, false, NULL, "ROLE",
      N_("'source' (QEMU connects to it, it listens for the peer engine) or 'destination'") },
    { "domain-uuid", VRM_ENGINE_OPT_STRING, OFF(domainUUID), VRM_ENGINE_FOR_BOTH,
      0, 0, false, vrmEngineValidUUID, "UUID",
      N_("the migrating domain; the destination checks that QEMU's listener runs with -uuid UUID") },
    { "qemu-listen-fd", VRM_ENGINE_OPT_FD, OFF(qemuListenFd), VRM_ENGINE_FOR_SOURCE,
      0, VRM_ENGINE_FD_MAX, false, NULL, "FD",
      N_("source: an inherited listening UNIX socket QEMU connects to") },
    { "qemu-path", VRM_ENGINE_OPT_STRING, OFF(qemuPath), VRM_ENGINE_FOR_BOTH,
      0, 0, false, vrmEngineValidSocketPath, "PATH",
      N_("destination: QEMU's listening socket to connect to; source without --qemu-listen-fd: the socket to create (mode 0600)") },
    { "qemu-uid", VRM_ENGINE_OPT_ID, OFF(qemuUid), VRM_ENGINE_FOR_BOTH,
      0, VRM_ENGINE_ID_MAX, false, NULL, "UID",
      N_("the user QEMU runs as; connections of other users (except root) are refused (default: the engine's own user)") },
    { "qemu-pid", VRM_ENGINE_OPT_ID, OFF(qemuPid), VRM_ENGINE_FOR_SOURCE,
      1, VRM_ENGINE_ID_MAX, false, NULL, "PID",
      N_("source: the QEMU process; connections of other processes (except root's) are refused") },
    { "listen", VRM_ENGINE_OPT_ADDRESS, OFF(address), VRM_ENGINE_FOR_SOURCE,
      0, 0, false, NULL, "ADDR[:PORT]",
      N_("source: rdma_cm address to listen on; port 0 or none lets the kernel choose (the stats record names it)") },
    { "connect", VRM_ENGINE_OPT_ADDRESS, OFF(address), VRM_ENGINE_FOR_DESTINATION,
      0, 0, false, NULL, "ADDR:PORT",
      N_("destination: rdma_cm address and port of the source engine") },
    { "channels", VRM_ENGINE_OPT_UINT, OFF(channels), VRM_ENGINE_FOR_BOTH,
      VRM_CHANNELS_MIN, VRM_CHANNELS_MAX, false, NULL, "N",
      N_("most channels QEMU may open (main + multifd); each is connected only when QEMU opens it") },
    { "disk-channels", VRM_ENGINE_OPT_UINT, OFF(diskChannels), VRM_ENGINE_FOR_BOTH,
      0, VRM_DISK_CHANNELS_MAX, false, NULL, "N",
      N_("most disk connections (QEMU's NBD copy of disks that are not shared) the job carries, 0 for none") },
    { "disk-listen-fd", VRM_ENGINE_OPT_FD, OFF(diskListenFd), VRM_ENGINE_FOR_SOURCE,
      0, VRM_ENGINE_FD_MAX, false, NULL, "FD",
      N_("source: an inherited listening UNIX socket QEMU's NBD client connects to") },
    { "disk-path", VRM_ENGINE_OPT_STRING, OFF(diskPath), VRM_ENGINE_FOR_BOTH,
      0, 0, false, vrmEngineValidSocketPath, "PATH",
      N_("destination: QEMU's NBD server socket to connect to; source without --disk-listen-fd: the socket to create (mode 0600)") },
    { "tcp-listen-fd", VRM_ENGINE_OPT_FD, OFF(tcpListenFd), VRM_ENGINE_FOR_SOURCE,
      0, VRM_ENGINE_FD_MAX, false, NULL, "FD",
      N_("source, transparent mode: an inherited listening TCP socket that QEMU's migration connections are steered to; each is carried to the address it was meant for") },
    { "tcp-port-min", VRM_ENGINE_OPT_UINT, OFF(tcpPortMin), VRM_ENGINE_FOR_DESTINATION,
      1, 65535, false, NULL, "PORT",
      N_("destination, transparent mode: the lowest TCP port of QEMU's it may connect to (libvirt's migration_port_min)") },
    { "tcp-port-max", VRM_ENGINE_OPT_UINT, OFF(tcpPortMax), VRM_ENGINE_FOR_DESTINATION,
      1, 65535, false, NULL, "PORT",
      N_("destination, transparent mode: the highest (libvirt's migration_port_max)") },
    { "chunk-size", VRM_ENGINE_OPT_SIZE, OFF(chunkSize), VRM_ENGINE_FOR_BOTH,
      VRM_CHUNK_SIZE_MIN, VRM_CHUNK_SIZE_MAX, true, NULL, "SIZE",
      N_("bytes per ring chunk, a power of two from 64K to 64M") },
    { "ring-depth", VRM_ENGINE_OPT_UINT, OFF(ringDepth), VRM_ENGINE_FOR_BOTH,
      VRM_RING_DEPTH_MIN, VRM_RING_DEPTH_MAX, false, NULL, "N",
      N_("chunks per ring") },
    /* one per row of util/vrmcapability.c: its name, after "no-" if it is
     * on by default (the contract test checks) */
    { "pin-all", VRM_ENGINE_OPT_CAP, OFF(caps), VRM_ENGINE_FOR_BOTH,
      0, 0, false, NULL, NULL,
      N_("register every ring when its channel is set up; used only if both engines ask for it"),
      VRM_CAPABILITY_PIN_ALL },
    { "no-write-imm", VRM_ENGINE_OPT_CAP, OFF(caps), VRM_ENGINE_FOR_BOTH,
      0, 0, false, NULL, NULL,
      N_("announce data with descriptor SENDs instead of RDMA WRITE_WITH_IMM"),
      VRM_CAPABILITY_WRITE_IMM },
    { "max-pinned", VRM_ENGINE_OPT_SIZE, OFF(maxPinned), VRM_ENGINE_FOR_BOTH,
      1, G_MAXUINT64, false, NULL, "SIZE",
      N_("the job's allowance of pinned memory, checked each time a channel is set up") },
    { "device", VRM_ENGINE_OPT_STRING, OFF(device), VRM_ENGINE_FOR_BOTH,
      0, 0, false, vrmValidName, "NAME",
      N_("require this RDMA device (default: the device of the address)") },
    { "token-fd", VRM_ENGINE_OPT_FD, OFF(tokenFd), VRM_ENGINE_FOR_BOTH,
      0, VRM_ENGINE_FD_MAX, false, NULL, "FD",
      N_("read the job's token (32 lowercase hexadecimal characters) from this pipe, then close it") },
    { "stats-socket", VRM_ENGINE_OPT_STRING, OFF(statsSocket), VRM_ENGINE_FOR_BOTH,
      0, 0, false, vrmEngineValidSocketPath, "PATH",
      N_("serve the stats record on this UNIX socket while running") },
    { "stats-fd", VRM_ENGINE_OPT_FD, OFF(statsFd), VRM_ENGINE_FOR_BOTH,
      0, VRM_ENGINE_FD_MAX, false, NULL, "FD",
      N_("write the final stats record there at exit (default: standard output)") },
    { "deadline-connect", VRM_ENGINE_OPT_UINT, OFF(deadlineConnect), VRM_ENGINE_FOR_BOTH,
      1, VRM_ENGINE_DEADLINE_MAX, false, NULL, "SEC",
      N_("seconds to connect a channel, and to connect to QEMU's socket") },
    { "idle-timeout", VRM_ENGINE_OPT_UINT, OFF(idleTimeout), VRM_ENGINE_FOR_BOTH,
      0, VRM_ENGINE_DEADLINE_MAX, false, NULL, "SEC",
      N_("fail after SEC seconds without progress, 0 for never") },
    { "wait-stream", VRM_ENGINE_OPT_UINT, OFF(waitStream), VRM_ENGINE_FOR_BOTH,
      0, VRM_ENGINE_DEADLINE_MAX, false, NULL, "SEC",
      N_("seconds QEMU may take to begin its stream once the engines are connected (a post-copy recovery waits for the operator), 0 for the idle timeout") },
    { "verbose", VRM_ENGINE_OPT_BOOL, OFF(verbose), VRM_ENGINE_FOR_BOTH,
      0, 0, false, NULL, NULL,
      N_("log progress") },
    { "debug", VRM_ENGINE_OPT_BOOL, OFF(debug), VRM_ENGINE_FOR_BOTH,
      0, 0, false, NULL, NULL,
      N_("log everything") },
    { "test-fault", VRM_ENGINE_OPT_FAULT, OFF(fault), VRM_ENGINE_FOR_BOTH,
      0, 0, false, NULL, "FAULT[:BYTES]",
      N_("tests only: inject a fault (see virt-rdma-engine(8))") },
};

#undef OFF

VRM_TABLE_IMPL(vrmEngineOption, vrmEngineOptions, vrmEngineOptionCount, vrmEngineOptionGet);

void
vrmEngineSettingsInit(vrmEngineSettings *s)
{
    memset(s, 0, sizeof(*s));
    s->role = VRM_ENGINE_ROLE_LAST;
    s->qemuListenFd = -1;
    s->diskListenFd = -1;
    s->tcpListenFd = -1;
    s->qemuUid = -1;
    s->qemuPid = -1;
    s->channels = VRM_CHANNELS_DEFAULT;
    s->chunkSize = VRM_CHUNK_SIZE_DEFAULT;
    s->ringDepth = VRM_RING_DEPTH_DEFAULT;
    s->tokenFd = -1;
    s->statsFd = -1;
    s->deadlineConnect = VRM_ENGINE_DEADLINE_CONNECT_DEFAULT;
    s->idleTimeout = VRM_ENGINE_IDLE_TIMEOUT_DEFAULT;
    s->fault = VRM_ENGINE_FAULT_NONE;
    s->caps = vrmCapabilityDefaultMask();
}

/* The rows whose field is a string the settings own (two rows may share
 * one: --listen and --connect are both the address) */
static char **
vrmEngineOptionString(const vrmEngineOption *o, vrmEngineSettings *s)
{
    if (o->type != VRM_ENGINE_OPT_STRING && o->type != VRM_ENGINE_OPT_ADDRESS)
        return NULL;
    return (char **)((char *)s + o->offset);
}

void
vrmEngineSettingsClear(vrmEngineSettings *s)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmEngineOptions); i++) {
        char **field = vrmEngineOptionString(&vrmEngineOptions[i], s);

        if (field)
            g_clear_pointer(field, g_free);
    }
    vrmEngineSettingsInit(s);
}

void
vrmEngineSettingsCopy(vrmEngineSettings *dst, const vrmEngineSettings *src)
{
    size_t i;

    *dst = *src;
    for (i = 0; i < G_N_ELEMENTS(vrmEngineOptions); i++) {
        char **field = vrmEngineOptionString(&vrmEngineOptions[i], dst);
        char *const *from = (char *const *)((const char *)src + vrmEngineOptions[i].offset);

        /* a field two rows share is copied once */
        if (field && *field == *from)
            *field = g_strdup(*from);
    }
}

char *
vrmEngineFormatAddress(const char *address, unsigned int port)
{
    if (address && strchr(address, ':'))
        return g_strdup_printf("[%s]:%u", address, port);
    return g_strdup_printf("%s:%u", address ? address : "", port);
}

/* ADDR, ADDR:PORT or [ADDR]:PORT; the port is required unless @portOptional */
static int
vrmEngineParseAddress(const char *opt, const char *str, bool portOptional,
                      char **address, unsigned int *port)
{
    g_autofree char *host = NULL;
    const char *colon;
    unsigned long long p = 0;

    if (portOptional && vrmValidAddress(str)) {
        *address = g_strdup(str);
        *port = 0;
        return 0;
    }
    if ((colon = strrchr(str, ':')) && colon != str) {
        if (str[0] == '[' && colon[-1] == ']')
            host = g_strndup(str + 1, colon - str - 2);
        else if (str[0] != '[' && !memchr(str, ':', colon - str))
            host = g_strndup(str, colon - str);
    }
    if (!host || !vrmValidAddress(host) || !vrmParseUInt64(colon + 1, &p) ||
        p > VRM_CM_PORT_MAX || (!portOptional && p == 0)) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       portOptional ?
                       _("--%1$s '%2$s' is not an IP address, ADDR:PORT or [IPV6]:PORT with a port from 0 to 65535") :
                       _("--%1$s '%2$s' is not ADDR:PORT or [IPV6]:PORT with a port from 1 to 65535"),
                       opt, str);
        return -1;
    }
    *address = g_steal_pointer(&host);
    *port = p;
    return 0;
}

static int
vrmEngineParseFault(const char *str, vrmEngineSettings *s)
{
    g_auto(GStrv) parts = g_strsplit(str, ":", 2);
    int f = vrmEngineFaultTypeFromString(parts[0]);
    unsigned long long bytes = 0;

    if (f <= VRM_ENGINE_FAULT_NONE ||
        (parts[1] && !vrmParseSize(parts[1], &bytes))) {
        g_autofree char *names = vrmEnumAllowedValues(vrmEngineFaultTypeToString,
                                                      VRM_ENGINE_FAULT_LAST);
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("--test-fault '%1$s' is not FAULT or FAULT:BYTES with FAULT one of %2$s"),
                       str, names);
        return -1;
    }
    s->fault = f;
    s->faultBytes = bytes;
    return 0;
}

/* Store @value (NULL for a flag) of option @o into @s */
static int
vrmEngineOptionSet(const vrmEngineOption *o, const char *value,
                   vrmEngineSettings *s)
{
    char *field = (char *)s + o->offset;
    unsigned long long v = 0;
    int role;

    switch (o->type) {
    case VRM_ENGINE_OPT_BOOL:
        *(bool *)field = true;
        return 0;
    case VRM_ENGINE_OPT_CAP: {
        guint32 bit = vrmCapabilityGetInfo(o->cap)->bit;

        /* the switch names the way away from the default */
        if (vrmCapabilityDefaultMask() & bit)
            *(guint32 *)field &= ~bit;
        else
            *(guint32 *)field |= bit;
        return 0;
    }
    case VRM_ENGINE_OPT_UINT:
    case VRM_ENGINE_OPT_ID:
    case VRM_ENGINE_OPT_FD:
        if (!vrmParseUInt64(value, &v) || v < o->min || v > o->max) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("--%1$s '%2$s' is not a whole number from %3$llu to %4$llu"),
                           o->name, value, o->min, o->max);
            return -1;
        }
        if (o->type == VRM_ENGINE_OPT_UINT)
            *(unsigned int *)field = v;
        else if (o->type == VRM_ENGINE_OPT_ID)
            *(gint64 *)field = v;
        else
            *(int *)field = v;
        return 0;
    case VRM_ENGINE_OPT_SIZE:
        if (!vrmParseSize(value, &v)) {
            vrmReportError(VRM_ERR_INVALID_ARG, _("--%1$s '%2$s' is not a size: %3$s"),
                           o->name, value, vrmSizeSyntaxHelp());
            return -1;
        }
        if (v < o->min || v > o->max || (o->powerOfTwo && (v & (v - 1)))) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           o->powerOfTwo ?
                           _("--%1$s %2$s is not a power of two from %3$llu to %4$llu bytes") :
                           _("--%1$s %2$s is not from %3$llu to %4$llu bytes"),
                           o->name, value, o->min, o->max);
            return -1;
        }
        if (o->max <= G_MAXUINT)
            *(unsigned int *)field = v;
        else
            *(unsigned long long *)field = v;
        return 0;
    case VRM_ENGINE_OPT_STRING:
        if (!*value || (o->valid && !o->valid(value))) {
            vrmReportError(VRM_ERR_INVALID_ARG, _("--%1$s '%2$s' is not a valid %3$s"),
                           o->name, value, o->metavar);
            return -1;
        }
        *(char **)field = g_strdup(value);
        return 0;
    case VRM_ENGINE_OPT_ADDRESS:
        return vrmEngineParseAddress(o->name, value,
                                     o->roles == VRM_ENGINE_FOR_SOURCE,
                                     &s->address, &s->port);
    case VRM_ENGINE_OPT_ROLE:
        if ((role = vrmEngineRoleTypeFromString(value)) < 0) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("--role '%1$s' is not 'source' or 'destination'"), value);
            return -1;
        }
        s->role = role;
        return 0;
    case VRM_ENGINE_OPT_FAULT:
        return vrmEngineParseFault(value, s);
    case VRM_ENGINE_OPT_LAST:
        break;
    }
    vrmReportError(VRM_ERR_INTERNAL, _("option --%1$s has no type"), o->name);
    return -1;
}

static const vrmEngineOption *
vrmEngineOptionFind(const char *name, size_t len)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmEngineOptions); i++) {
        const vrmEngineOption *o = &vrmEngineOptions[i];

        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    }
    return NULL;
}

int
vrmEngineSettingsDecode(int argc, char **argv, vrmEngineSettings *s)
{
    bool seen[G_N_ELEMENTS(vrmEngineOptions)] = { false };
    int i;
    size_t k;

    vrmEngineSettingsInit(s);
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *eq;
        const char *value = NULL;
        const vrmEngineOption *o;
        size_t len;

        if (!g_str_has_prefix(arg, "--") || !arg[2]) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("unexpected argument '%1$s'; options start with --"), arg);
            return -1;
        }
        arg += 2;
        eq = strchr(arg, '=');
        len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (!(o = vrmEngineOptionFind(arg, len))) {
            g_autofree char *name = g_strndup(arg, len);
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("unknown option --%1$s; see --help"), name);
            return -1;
        }
        k = o - vrmEngineOptions;
        if (seen[k] || (o->offset == offsetof(vrmEngineSettings, address) &&
                        s->address)) {
            vrmReportError(VRM_ERR_INVALID_ARG, _("option --%1$s is given twice"),
                           o->name);
            return -1;
        }
        seen[k] = true;
        if (o->type == VRM_ENGINE_OPT_BOOL || o->type == VRM_ENGINE_OPT_CAP) {
            if (eq) {
                vrmReportError(VRM_ERR_INVALID_ARG, _("option --%1$s takes no value"),
                               o->name);
                return -1;
            }
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            vrmReportError(VRM_ERR_INVALID_ARG, _("option --%1$s needs a value (%2$s)"),
                           o->name, o->metavar);
            return -1;
        }
        if (vrmEngineOptionSet(o, value, s) < 0)
            return -1;
    }
    /* roles are checked once every option is known (--role may come last) */
    for (k = 0; k < G_N_ELEMENTS(vrmEngineOptions); k++) {
        const vrmEngineOption *o = &vrmEngineOptions[k];

        if (seen[k] && s->role < VRM_ENGINE_ROLE_LAST &&
            !(o->roles & (1u << s->role))) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("option --%1$s is not for the %2$s role"),
                           o->name, vrmEngineRoleTypeToString(s->role));
            return -1;
        }
    }
    return vrmEngineSettingsValidate(s);
}

/* The value of @o in @s as text, or NULL when it is the default */
static char *
vrmEngineOptionFormat(const vrmEngineOption *o, const vrmEngineSettings *s)
{
    const char *field = (const char *)s + o->offset;
    vrmEngineSettings def;

    vrmEngineSettingsInit(&def);
    switch (o->type) {
    case VRM_ENGINE_OPT_BOOL:
        return *(const bool *)field ? g_strdup("") : NULL;
    case VRM_ENGINE_OPT_CAP:
        return (*(const guint32 *)field ^ def.caps) & vrmCapabilityGetInfo(o->cap)->bit ?
               g_strdup("") : NULL;
    case VRM_ENGINE_OPT_UINT:
        if (*(const unsigned int *)field == *(const unsigned int *)((const char *)&def + o->offset))
            return NULL;
        return g_strdup_printf("%u", *(const unsigned int *)field);
    case VRM_ENGINE_OPT_SIZE:
        if (o->max <= G_MAXUINT) {
            if (*(const unsigned int *)field == *(const unsigned int *)((const char *)&def + o->offset))
                return NULL;
            return g_strdup_printf("%u", *(const unsigned int *)field);
        }
        if (*(const unsigned long long *)field == 0)
            return NULL;
        return g_strdup_printf("%llu", *(const unsigned long long *)field);
    case VRM_ENGINE_OPT_ID:
        if (*(const gint64 *)field < 0)
            return NULL;
        return g_strdup_printf("%" G_GINT64_FORMAT, *(const gint64 *)field);
    case VRM_ENGINE_OPT_FD:
        if (*(const int *)field < 0)
            return NULL;
        return g_strdup_printf("%d", *(const int *)field);
    case VRM_ENGINE_OPT_STRING:
        return g_strdup(*(char *const *)field);
    case VRM_ENGINE_OPT_ADDRESS:
        if (!s->address || !(o->roles & (1u << s->role)))
            return NULL;
        return vrmEngineFormatAddress(s->address, s->port);
    case VRM_ENGINE_OPT_ROLE:
        return g_strdup(vrmEngineRoleTypeToString(s->role));
    case VRM_ENGINE_OPT_FAULT:
        if (s->fault == VRM_ENGINE_FAULT_NONE)
            return NULL;
        if (s->faultBytes)
            return g_strdup_printf("%s:%llu", vrmEngineFaultTypeToString(s->fault),
                                   s->faultBytes);
        return g_strdup(vrmEngineFaultTypeToString(s->fault));
    case VRM_ENGINE_OPT_LAST:
        break;
    }
    return NULL;
}

char **
vrmEngineSettingsEncode(const vrmEngineSettings *s, const char *program)
{
    GPtrArray *argv = g_ptr_array_new();
    size_t i;

    g_ptr_array_add(argv, g_strdup(program));
    for (i = 0; i < G_N_ELEMENTS(vrmEngineOptions); i++) {
        const vrmEngineOption *o = &vrmEngineOptions[i];
        g_autofree char *value = vrmEngineOptionFormat(o, s);

        if (!value)
            continue;
        /* name and value as two words: a restarted virt-rdmad recognises
         * its engine by its --stats-socket argument */
        g_ptr_array_add(argv, g_strdup_printf("--%s", o->name));
        if (o->type != VRM_ENGINE_OPT_BOOL && o->type != VRM_ENGINE_OPT_CAP)
            g_ptr_array_add(argv, g_steal_pointer(&value));
    }
    g_ptr_array_add(argv, NULL);
    return (char **)g_ptr_array_free(argv, FALSE);
}

int
vrmEngineSettingsValidate(const vrmEngineSettings *s)
{
    if (s->role != VRM_ENGINE_ROLE_SOURCE && s->role != VRM_ENGINE_ROLE_DESTINATION) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("--role source or --role destination is required"));
        return -1;
    }
    if (!s->address) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       s->role == VRM_ENGINE_ROLE_SOURCE ?
                       _("the source needs an RDMA address to listen on (--listen ADDR[:PORT])") :
                       _("the destination needs the source engine's RDMA address (--connect ADDR:PORT)"));
        return -1;
    }
    if (s->role == VRM_ENGINE_ROLE_SOURCE) {
        if ((s->qemuListenFd >= 0) + (s->qemuPath != NULL) > 1 ||
            (s->qemuListenFd < 0 && !s->qemuPath && s->tcpListenFd < 0)) {
            vrmReportError(VRM_ERR_INVALID_ARG,
                           _("the source needs one of --qemu-listen-fd and --qemu-path, or --tcp-listen-fd, or both kinds"));
            return -1;
        }
    } else if (!s->qemuPath && !s->tcpPortMin && !s->tcpPortMax) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("the destination needs QEMU's socket (--qemu-path PATH) or, in the transparent mode, QEMU's TCP ports (--tcp-port-min and --tcp-port-max)"));
        return -1;
    }
    if ((s->tcpPortMin != 0) != (s->tcpPortMax != 0) || s->tcpPortMin > s->tcpPortMax) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("--tcp-port-min and --tcp-port-max go together, the first not above the second (libvirt's default range is 49152 to 49215)"));
        return -1;
    }
    if (s->tcpListenFd >= 0 && s->diskChannels > 0) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("the transparent mode (--tcp-listen-fd) does not carry disk copies (--disk-channels) yet"));
        return -1;
    }
    if (s->diskChannels == 0 && (s->diskListenFd >= 0 || s->diskPath)) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("--disk-listen-fd and --disk-path need --disk-channels N (N > 0)"));
        return -1;
    }
    if (s->diskChannels > 0 && s->role == VRM_ENGINE_ROLE_SOURCE &&
        (s->diskListenFd >= 0) == (s->diskPath != NULL)) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("a source with disk channels needs exactly one of --disk-listen-fd and --disk-path"));
        return -1;
    }
    if (s->diskChannels > 0 && s->role == VRM_ENGINE_ROLE_DESTINATION && !s->diskPath) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("a destination with disk channels needs QEMU's NBD socket (--disk-path PATH)"));
        return -1;
    }
    if (s->tokenFd < 0) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("the job's token is required: pass it through a pipe with --token-fd FD"));
        return -1;
    }
    if (s->tokenFd == s->statsFd ||
        (s->qemuListenFd >= 0 && (s->qemuListenFd == s->tokenFd ||
                                  s->qemuListenFd == s->statsFd)) ||
        (s->diskListenFd >= 0 && (s->diskListenFd == s->tokenFd ||
                                  s->diskListenFd == s->statsFd ||
                                  s->diskListenFd == s->qemuListenFd)) ||
        (s->tcpListenFd >= 0 && (s->tcpListenFd == s->tokenFd ||
                                 s->tcpListenFd == s->statsFd))) {
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("--token-fd, --stats-fd, --qemu-listen-fd, --disk-listen-fd and --tcp-listen-fd must be different descriptors"));
        return -1;
    }
    if (s->maxPinned && vrmPinnedBytes(1, s->ringDepth, s->chunkSize) > s->maxPinned) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("one channel needs %1$llu bytes of pinned memory, more than --max-pinned %2$llu; lower --ring-depth or --chunk-size"),
                       vrmPinnedBytes(1, s->ringDepth, s->chunkSize), s->maxPinned);
        return -1;
    }
    return 0;
}

unsigned long long
vrmEngineSettingsPinnedBytes(const vrmEngineSettings *s)
{
    return vrmPinnedBytes(s->channels + s->diskChannels, s->ringDepth, s->chunkSize);
}

char *
vrmEngineSettingsHelp(void)
{
    GString *buf = g_string_new(NULL);
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmEngineOptions); i++) {
        const vrmEngineOption *o = &vrmEngineOptions[i];
        g_autofree char *left = o->metavar ?
            g_strdup_printf("--%s %s", o->name, o->metavar) :
            g_strdup_printf("--%s", o->name);

        g_string_append_printf(buf, "  %-28s %s\n", left, _(o->help));
    }
    return g_string_free(buf, FALSE);
}

int
vrmEngineTokenPipe(const vrmToken *token)
{
    char hex[VRM_TOKEN_HEX_LEN + 1];
    int fds[2];
    ssize_t w;

    if (pipe2(fds, O_CLOEXEC) < 0) {
        vrmReportSystemError(errno, "%s", _("cannot create a pipe for the job's token"));
        return -1;
    }
    vrmTokenFormat(token, hex);
    /* 32 bytes always fit into an empty pipe: one write, no blocking */
    w = write(fds[1], hex, VRM_TOKEN_HEX_LEN);
    explicit_bzero(hex, sizeof(hex));
    close(fds[1]);
    if (w != VRM_TOKEN_HEX_LEN) {
        vrmReportSystemError(errno, "%s", _("cannot write the job's token into its pipe"));
        close(fds[0]);
        return -1;
    }
    return fds[0];
}

int
vrmEngineTokenRead(int fd, vrmToken *token)
{
    char buf[VRM_TOKEN_HEX_LEN + 2];
    size_t got = 0;
    int ret = -1;

    /* the token and at most a newline; anything more is not a token */
    while (got < sizeof(buf)) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - got);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            vrmReportSystemError(errno, _("cannot read the job's token from descriptor %1$d"), fd);
            goto cleanup;
        }
        if (r == 0)
            break;
        got += r;
    }
    if (got == VRM_TOKEN_HEX_LEN + 1 && buf[VRM_TOKEN_HEX_LEN] == '\n')
        got--;
    if (got == VRM_TOKEN_HEX_LEN) {
        buf[VRM_TOKEN_HEX_LEN] = '\0';
        if (vrmTokenParse(buf, token))
            ret = 0;
    }
    if (ret < 0)
        vrmReportError(VRM_ERR_INVALID_ARG,
                       _("descriptor %1$d does not hold a token: 32 lowercase hexadecimal characters and an optional newline are expected"),
                       fd);

 cleanup:
    explicit_bzero(buf, sizeof(buf));
    close(fd);
    return ret;
}
