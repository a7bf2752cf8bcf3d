/*
 * vrmhelperconf.c: configuration of virt-rdmad
 *
 * One table row per key: group, name, type, where the value goes, range.
 * Loading, checking, error messages and formatting all walk the table.
 */
#include <config.h>

#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include "vrmhelperconf.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmnetwork.h"

VRM_ENUM_IMPL(vrmPeerAuth, VRM_PEER_AUTH_LAST,
              "auto",
              "psk",
              "x509",
              "none",
);

VRM_ENUM_IMPL(vrmFallback, VRM_FALLBACK_LAST,
              "tcp",
              "refuse",
);

#define VRM_HELPER_DEFAULT_MAX_JOBS 4
#define VRM_HELPER_MAX_JOBS 1024
#define VRM_HELPER_DEFAULT_HISTORY 64
#define VRM_HELPER_MAX_HISTORY 100000
#define VRM_HELPER_DEFAULT_RECOVERY_WINDOW 600
#define VRM_HELPER_PATH_MAX 4096
/* The host's pinned-memory budget: every running job's allowance together */
#define VRM_HELPER_DEFAULT_BUDGET (1024ull * 1024 * 1024)
/* The offer's most channels: the main one and eight multifd ones */
#define VRM_HELPER_DEFAULT_MAX_CHANNELS 9
#define VRM_HELPER_DEFAULT_MAX_CLIENTS 64
#define VRM_HELPER_MAX_CLIENTS 4096
#define VRM_HELPER_DEFAULT_MAX_PEERS 16
#define VRM_HELPER_MAX_PEERS 1024
#define VRM_HELPER_DEFAULT_PEER_TIMEOUT 10
#define VRM_HELPER_DEFAULT_HOOK_TIMEOUT 90
#define VRM_HELPER_MAX_TIMEOUT 3600
#define VRM_HELPER_URI_MAX 1024
/* libvirt's PKI (docs/negotiation.rst) */
#define VRM_PKI_CA_CERT "/etc/pki/CA/cacert.pem"
#define VRM_PKI_CA_CRL "/etc/pki/CA/cacrl.pem"
#define VRM_PKI_SERVER_CERT "/etc/pki/libvirt/servercert.pem"
#define VRM_PKI_SERVER_KEY "/etc/pki/libvirt/private/serverkey.pem"
#define VRM_PKI_CLIENT_CERT "/etc/pki/libvirt/clientcert.pem"
#define VRM_PKI_CLIENT_KEY "/etc/pki/libvirt/private/clientkey.pem"

typedef enum {
    VRM_CONF_NAME,          /* device, group or user name */
    VRM_CONF_HOST_NAME,     /* DNS host name */
    VRM_CONF_ADDRESS,       /* IPv4 or IPv6 literal */
    VRM_CONF_UINT,          /* unsigned int in [min, max] */
    VRM_CONF_ULLONG,        /* unsigned long long in [min, max] */
    VRM_CONF_SIZE,          /* bytes in [min, max], with the size grammar */
    VRM_CONF_PATH,          /* absolute path */
    VRM_CONF_PATH_OR_OFF,   /* absolute path, or empty: the feature is off (NULL) */
    VRM_CONF_STRING,        /* one line of text (a libvirt URI) */
    VRM_CONF_ENUM,          /* one of an enum's names: the row's toString/fromString */
    VRM_CONF_CHUNK_SIZES,   /* list of powers of two */
    VRM_CONF_NETWORKS,      /* list of IP networks (vrmnetwork.h), kept as text */
} vrmConfType;

typedef struct {
    const char *group;
    const char *key;
    vrmConfType type;
    size_t offset;
    unsigned long long min;
    unsigned long long max;
    vrmEnumToStringFunc enumToString;   /* VRM_CONF_ENUM: min 0, max its _LAST */
    vrmEnumFromStringFunc enumFromString;
} vrmConfKey;

#define OFF(field) offsetof(vrmHelperConfig, field)

static const vrmConfKey vrmConfKeys[] = {
    { "rdma", "device", VRM_CONF_NAME, OFF(device), 0, 0 },
    { "rdma", "port", VRM_CONF_UINT, OFF(devicePort),
      VRM_DEVICE_PORT_MIN, VRM_DEVICE_PORT_MAX },
    { "rdma", "address", VRM_CONF_ADDRESS, OFF(address), 0, 0 },
    { "limits", "max-jobs", VRM_CONF_UINT, OFF(maxJobs),
      1, VRM_HELPER_MAX_JOBS },
    { "limits", "max-pinned-bytes", VRM_CONF_SIZE, OFF(maxPinnedBytes),
      1024 * 1024, G_MAXUINT64 },
    { "limits", "max-channels", VRM_CONF_UINT, OFF(maxChannels),
      VRM_CHANNELS_MIN, VRM_CHANNELS_MAX },
    { "limits", "chunk-sizes", VRM_CONF_CHUNK_SIZES, OFF(chunkSizes),
      VRM_CHUNK_SIZE_MIN, VRM_CHUNK_SIZE_MAX },
    { "limits", "max-ring-depth", VRM_CONF_UINT, OFF(maxRingDepth),
      VRM_RING_DEPTH_MIN, VRM_RING_DEPTH_MAX },
    { "limits", "max-bandwidth", VRM_CONF_UINT, OFF(maxBandwidth),
      0, G_MAXUINT32 },
    { "limits", "max-clients", VRM_CONF_UINT, OFF(maxClients),
      1, VRM_HELPER_MAX_CLIENTS },
    { "limits", "recovery-window", VRM_CONF_UINT, OFF(recoveryWindow),
      0, VRM_HELPER_MAX_RECOVERY_WINDOW },
    { "paths", "run-dir", VRM_CONF_PATH, OFF(runDir), 0, 0 },
    { "paths", "state-dir", VRM_CONF_PATH, OFF(stateDir), 0, 0 },
    { "access", "group", VRM_CONF_NAME, OFF(group), 0, 0 },
    { "access", "libvirt-group", VRM_CONF_NAME, OFF(libvirtGroup), 0, 0 },
    { "history", "size", VRM_CONF_UINT, OFF(historySize),
      0, VRM_HELPER_MAX_HISTORY },
    { "peers", "auth", VRM_CONF_ENUM, OFF(peerAuth), 0, VRM_PEER_AUTH_LAST,
      vrmPeerAuthTypeToString, vrmPeerAuthTypeFromString },
    { "peers", "key-file", VRM_CONF_PATH, OFF(peerKeyFile), 0, 0 },
    { "peers", "ca-cert", VRM_CONF_PATH, OFF(peerCACert), 0, 0 },
    { "peers", "crl", VRM_CONF_PATH, OFF(peerCRL), 0, 0 },
    { "peers", "allowed-dn", VRM_CONF_STRING, OFF(peerAllowedDN), 0, 0 },
    { "peers", "server-cert", VRM_CONF_PATH, OFF(peerServerCert), 0, 0 },
    { "peers", "server-key", VRM_CONF_PATH, OFF(peerServerKey), 0, 0 },
    { "peers", "client-cert", VRM_CONF_PATH, OFF(peerClientCert), 0, 0 },
    { "peers", "client-key", VRM_CONF_PATH, OFF(peerClientKey), 0, 0 },
    { "peers", "host", VRM_CONF_HOST_NAME, OFF(peerHost), 0, 0 },
    { "peers", "address", VRM_CONF_ADDRESS, OFF(peerAddress), 0, 0 },
    { "peers", "listen", VRM_CONF_ADDRESS, OFF(peerListen), 0, 0 },
    { "peers", "allow", VRM_CONF_NETWORKS, OFF(peerAllow), 0, 0 },
    { "peers", "port", VRM_CONF_UINT, OFF(peerPort), 1, 65535 },
    { "peers", "max-peers", VRM_CONF_UINT, OFF(maxPeers),
      1, VRM_HELPER_MAX_PEERS },
    { "peers", "timeout", VRM_CONF_UINT, OFF(peerTimeout),
      1, VRM_HELPER_MAX_TIMEOUT },
    { "engine", "user", VRM_CONF_NAME, OFF(engineUser), 0, 0 },
    { "qemu", "user", VRM_CONF_NAME, OFF(qemuUser), 0, 0 },
    { "libvirt", "uri", VRM_CONF_STRING, OFF(libvirtURI), 0, 0 },
    { "hook", "timeout", VRM_CONF_UINT, OFF(hookTimeout),
      1, VRM_HELPER_MAX_TIMEOUT },
    { "migration", "fallback", VRM_CONF_ENUM, OFF(fallback), 0, VRM_FALLBACK_LAST,
      vrmFallbackTypeToString, vrmFallbackTypeFromString },
    { "migration", "rdma", VRM_CONF_ENUM, OFF(rdmaDefault), 0, VRM_RDMA_DEFAULT_LAST,
      vrmRdmaDefaultTypeToString, vrmRdmaDefaultTypeFromString },
    { "migration", "port-min", VRM_CONF_UINT, OFF(migrationPortMin), 1, 65535 },
    { "migration", "port-max", VRM_CONF_UINT, OFF(migrationPortMax), 1, 65535 },
    { "metrics", "textfile-dir", VRM_CONF_PATH_OR_OFF, OFF(metricsDir), 0, 0 },
};

static const char *const vrmConfGroups[] = {
    "rdma", "limits", "paths", "access", "history", "peers", "engine",
    "qemu", "libvirt", "hook", "migration", "metrics",
};

#define FIELD(conf, type, row) ((type *)((char *)(conf) + (row)->offset))

/* Does the row's field hold a string of its own (char *, NULL or owned)? */
static bool
vrmConfHoldsString(const vrmConfKey *row)
{
    switch (row->type) {
    case VRM_CONF_NAME:
    case VRM_CONF_HOST_NAME:
    case VRM_CONF_ADDRESS:
    case VRM_CONF_PATH:
    case VRM_CONF_PATH_OR_OFF:
    case VRM_CONF_STRING:
    case VRM_CONF_NETWORKS:
        return true;
    case VRM_CONF_UINT:
    case VRM_CONF_ULLONG:
    case VRM_CONF_SIZE:
    case VRM_CONF_ENUM:
    case VRM_CONF_CHUNK_SIZES:
        break;
    }
    return false;
}

vrmHelperConfig *
vrmHelperConfigNew(void)
{
    vrmHelperConfig *conf = g_new0(vrmHelperConfig, 1);
    vrmHostPolicy policy;

    vrmHostPolicyInit(&policy);
    conf->devicePort = 1;
    conf->maxJobs = VRM_HELPER_DEFAULT_MAX_JOBS;
    conf->maxPinnedBytes = VRM_HELPER_DEFAULT_BUDGET;
    conf->maxChannels = VRM_HELPER_DEFAULT_MAX_CHANNELS;
    conf->chunkSizes = policy.chunkSizes;
    conf->maxRingDepth = policy.maxRingDepth;
    conf->maxBandwidth = policy.maxBandwidth;
    conf->runDir = g_strdup(VRM_RUNSTATEDIR);
    if (g_path_is_absolute(VRM_LOCALSTATEDIR))
        conf->stateDir = g_strdup(VRM_LOCALSTATEDIR);
    else
        conf->stateDir = g_strdup("/" VRM_LOCALSTATEDIR);
    conf->historySize = VRM_HELPER_DEFAULT_HISTORY;
    conf->recoveryWindow = VRM_HELPER_DEFAULT_RECOVERY_WINDOW;
    conf->maxClients = VRM_HELPER_DEFAULT_MAX_CLIENTS;
    conf->group = g_strdup(VRM_HELPER_DEFAULT_GROUP);
    conf->libvirtGroup = g_strdup(VRM_HELPER_DEFAULT_LIBVIRT_GROUP);
    conf->peerAuth = VRM_PEER_AUTH_AUTO;
    conf->fallback = VRM_FALLBACK_TCP;
    conf->rdmaDefault = VRM_RDMA_DEFAULT_TAGGED;
    conf->migrationPortMin = VRM_HELPER_DEFAULT_MIGRATION_PORT_MIN;
    conf->migrationPortMax = VRM_HELPER_DEFAULT_MIGRATION_PORT_MAX;
    conf->peerKeyFile = g_strdup(VRM_SYSCONFDIR "/cluster.key");
    conf->peerCACert = g_strdup(VRM_PKI_CA_CERT);
    conf->peerCRL = g_strdup(VRM_PKI_CA_CRL);
    conf->metricsDir = g_strdup(VRM_HELPER_DEFAULT_METRICS_DIR);
    conf->peerServerCert = g_strdup(VRM_PKI_SERVER_CERT);
    conf->peerServerKey = g_strdup(VRM_PKI_SERVER_KEY);
    conf->peerClientCert = g_strdup(VRM_PKI_CLIENT_CERT);
    conf->peerClientKey = g_strdup(VRM_PKI_CLIENT_KEY);
    conf->peerPort = VRM_HELPER_DEFAULT_PEER_PORT;
    conf->maxPeers = VRM_HELPER_DEFAULT_MAX_PEERS;
    conf->peerTimeout = VRM_HELPER_DEFAULT_PEER_TIMEOUT;
    conf->engineUser = g_strdup(VRM_HELPER_DEFAULT_ENGINE_USER);
    conf->libvirtURI = g_strdup("qemu:///system");
    conf->hookTimeout = VRM_HELPER_DEFAULT_HOOK_TIMEOUT;
    return conf;
}

void
vrmHelperConfigFree(vrmHelperConfig *conf)
{
    const vrmConfKey *row;

    if (!conf)
        return;
    /* every string of the configuration is a key's */
    for (row = vrmConfKeys; row < vrmConfKeys + G_N_ELEMENTS(vrmConfKeys); row++) {
        if (vrmConfHoldsString(row))
            g_free(*FIELD(conf, char *, row));
    }
    g_free(conf);
}

static char *
vrmConfAllowedGroups(void)
{
    GString *buf = g_string_new(NULL);
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmConfGroups); i++)
        g_string_append_printf(buf, "%s'[%s]'", i ? ", " : "", vrmConfGroups[i]);
    return g_string_free(buf, FALSE);
}

static char *
vrmConfAllowedKeys(const char *group)
{
    GString *buf = g_string_new(NULL);
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmConfKeys); i++) {
        if (strcmp(vrmConfKeys[i].group, group) != 0)
            continue;
        g_string_append_printf(buf, "%s'%s'", buf->len ? ", " : "",
                               vrmConfKeys[i].key);
    }
    return g_string_free(buf, FALSE);
}

static const vrmConfKey *
vrmConfFindKey(const char *group, const char *key)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmConfKeys); i++) {
        if (strcmp(vrmConfKeys[i].group, group) == 0 &&
            strcmp(vrmConfKeys[i].key, key) == 0)
            return &vrmConfKeys[i];
    }
    return NULL;
}

static int
vrmConfInvalid(const char *name, const vrmConfKey *row, const char *value,
               const char *expected)
{
    g_autofree char *bad = vrmXMLQuote(value);

    vrmReportError(VRM_ERR_CONFIG,
                   _("%1$s: key '%2$s' in group '[%3$s]' has invalid value '%4$s'; expected %5$s"),
                   name, row->key, row->group, bad, expected);
    return -1;
}

static int G_GNUC_PRINTF(4, 5)
vrmConfInvalidf(const char *name, const vrmConfKey *row, const char *value,
                const char *fmt, ...)
{
    g_autofree char *expected = NULL;
    va_list ap;

    va_start(ap, fmt);
    expected = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return vrmConfInvalid(name, row, value, expected);
}

static int
vrmConfParseChunkSizes(const char *name, const vrmConfKey *row,
                       const char *value, guint32 *mask)
{
    g_auto(GStrv) items = g_strsplit_set(value, ";, ", -1);
    vrmHostPolicy policy = { 0 };
    size_t i;

    for (i = 0; items[i]; i++) {
        unsigned long long v;

        if (!*items[i])
            continue;
        if (!vrmParseUInt64(items[i], &v) || v < VRM_CHUNK_SIZE_MIN ||
            v > VRM_CHUNK_SIZE_MAX || (v & (v - 1)) != 0) {
            return vrmConfInvalidf(name, row, items[i],
                                   _("a list of powers of two from %1$u to %2$u, separated by ';'"),
                                   VRM_CHUNK_SIZE_MIN, VRM_CHUNK_SIZE_MAX);
        }
        if (vrmHostPolicyAllowChunkSize(&policy, v) < 0)
            return -1;
    }
    if (!policy.chunkSizes) {
        return vrmConfInvalid(name, row, value,
                              _("at least one chunk size"));
    }
    *mask = policy.chunkSizes;
    return 0;
}

/* A string key's value replaces the default; 0 */
static int
vrmConfSetString(vrmHelperConfig *conf, const vrmConfKey *row, const char *value)
{
    g_free(*FIELD(conf, char *, row));
    *FIELD(conf, char *, row) = g_strdup(value);
    return 0;
}

static int
vrmConfParseValue(vrmHelperConfig *conf, const char *name,
                  const vrmConfKey *row, const char *value)
{
    unsigned long long v;

    switch (row->type) {
    case VRM_CONF_NAME:
        if (!vrmValidName(value)) {
            return vrmConfInvalidf(name, row, value,
                                   _("1 to %1$d letters, digits, '_', '.' or '-'"),
                                   VRM_NAME_MAX);
        }
        return vrmConfSetString(conf, row, value);

    case VRM_CONF_HOST_NAME:
        if (!vrmValidHostName(value)) {
            return vrmConfInvalidf(name, row, value,
                                   _("a host name of at most %1$d letters, digits, '-' and dots"),
                                   VRM_HOST_NAME_MAX);
        }
        return vrmConfSetString(conf, row, value);

    case VRM_CONF_STRING:
        if (!*value || strchr(value, '\n') || strlen(value) >= VRM_HELPER_URI_MAX ||
            !g_utf8_validate(value, -1, NULL))
            return vrmConfInvalid(name, row, value, _("one line of text"));
        return vrmConfSetString(conf, row, value);

    case VRM_CONF_ENUM: {
        int e = row->enumFromString(value);

        if (e < 0) {
            g_autofree char *expected = vrmEnumAllowedValues(row->enumToString, row->max);

            return vrmConfInvalid(name, row, value, expected);
        }
        *FIELD(conf, int, row) = e;
        return 0;
    }

    case VRM_CONF_SIZE:
        if (!vrmParseSize(value, &v) || v < row->min || v > row->max) {
            return vrmConfInvalidf(name, row, value,
                                   _("a size from %1$llu to %2$llu bytes (%3$s)"),
                                   row->min, row->max, vrmSizeSyntaxHelp());
        }
        *FIELD(conf, unsigned long long, row) = v;
        return 0;

    case VRM_CONF_ADDRESS:
        if (!vrmValidAddress(value))
            return vrmConfInvalid(name, row, value,
                                  _("an IPv4 or IPv6 address"));
        return vrmConfSetString(conf, row, value);

    case VRM_CONF_NETWORKS: {
        g_autofree char *bad = NULL;
        g_autoptr(GArray) nets = vrmNetworkListParse(value, &bad);

        if (!nets) {
            return vrmConfInvalidf(name, row, value,
                                   _("networks such as 10.0.0.0/8;fd00::/8;192.0.2.7 ('%1$s' is not one)"),
                                   bad);
        }
        g_free(*FIELD(conf, char *, row));
        *FIELD(conf, char *, row) = vrmNetworkListFormat(nets);
        return 0;
    }

    case VRM_CONF_PATH:
    case VRM_CONF_PATH_OR_OFF:
        if (row->type == VRM_CONF_PATH_OR_OFF && !*value) {
            g_clear_pointer(FIELD(conf, char *, row), g_free);
            return 0;
        }
        if (!g_path_is_absolute(value) || strchr(value, '\n') ||
            strlen(value) >= VRM_HELPER_PATH_MAX)
            return vrmConfInvalid(name, row, value,
                                  row->type == VRM_CONF_PATH ? _("an absolute path") :
                                  _("an absolute path, or nothing to turn it off"));
        return vrmConfSetString(conf, row, value);

    case VRM_CONF_UINT:
    case VRM_CONF_ULLONG:
        if (!vrmParseUInt64(value, &v) || v < row->min || v > row->max) {
            return vrmConfInvalidf(name, row, value,
                                   _("an integer from %1$llu to %2$llu"),
                                   row->min, row->max);
        }
        if (row->type == VRM_CONF_UINT)
            *FIELD(conf, unsigned int, row) = v;
        else
            *FIELD(conf, unsigned long long, row) = v;
        return 0;

    case VRM_CONF_CHUNK_SIZES:
        return vrmConfParseChunkSizes(name, row, value,
                                      FIELD(conf, guint32, row));
    }
    return -1;
}

/* GKeyFile hides "key[locale]=" entries from g_key_file_get_keys(). */
static int
vrmConfCheckLocaleKeys(const char *data, size_t len, const char *name)
{
    g_autofree char *copy = g_strndup(data, len);
    g_auto(GStrv) lines = g_strsplit(copy, "\n", -1);
    size_t i;

    for (i = 0; lines[i]; i++) {
        const char *line = lines[i];
        const char *eq = strchr(line, '=');
        const char *bracket = strchr(line, '[');

        while (*line == ' ' || *line == '\t')
            line++;
        if (*line == '#' || *line == '[' || !eq || !bracket || bracket > eq)
            continue;
        {
            g_autofree char *key = g_strstrip(g_strndup(line, eq - line));
            g_autofree char *bad = vrmXMLQuote(key);

            vrmReportError(VRM_ERR_CONFIG,
                           _("%1$s: line %2$zu: localized key '%3$s' is not allowed"),
                           name, i + 1, bad);
        }
        return -1;
    }
    return 0;
}

vrmHelperConfig *
vrmHelperConfigLoadData(const char *data, size_t len, const char *name)
{
    g_autoptr(vrmHelperConfig) conf = vrmHelperConfigNew();
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) gerr = NULL;
    g_auto(GStrv) groups = NULL;
    size_t i;

    if (!g_key_file_load_from_data(kf, data, len, G_KEY_FILE_NONE, &gerr)) {
        vrmReportError(VRM_ERR_CONFIG, _("cannot parse %1$s: %2$s"),
                       name, gerr->message);
        return NULL;
    }

    if (vrmConfCheckLocaleKeys(data, len, name) < 0)
        return NULL;

    groups = g_key_file_get_groups(kf, NULL);
    for (i = 0; groups[i]; i++) {
        g_auto(GStrv) keys = NULL;
        size_t j;

        if (!g_strv_contains(vrmConfGroups, groups[i])) {
            g_autofree char *bad = vrmXMLQuote(groups[i]);
            g_autofree char *list = vrmConfAllowedGroups();

            vrmReportError(VRM_ERR_CONFIG,
                           _("%1$s: unknown group '[%2$s]'; allowed groups: %3$s"),
                           name, bad, list);
            return NULL;
        }
        if (!(keys = g_key_file_get_keys(kf, groups[i], NULL, NULL)))
            continue;
        for (j = 0; keys[j]; j++) {
            const vrmConfKey *row = vrmConfFindKey(groups[i], keys[j]);
            g_autofree char *value = NULL;

            if (!row) {
                g_autofree char *bad = vrmXMLQuote(keys[j]);
                g_autofree char *list = vrmConfAllowedKeys(groups[i]);

                vrmReportError(VRM_ERR_CONFIG,
                               _("%1$s: unknown key '%2$s' in group '[%3$s]'; allowed keys: %4$s"),
                               name, bad, groups[i], list);
                return NULL;
            }
            value = g_key_file_get_value(kf, groups[i], keys[j], NULL);
            if (!value || vrmConfParseValue(conf, name, row, g_strstrip(value)) < 0) {
                if (!value)
                    vrmReportError(VRM_ERR_CONFIG,
                                   _("%1$s: cannot read key '%2$s' in group '[%3$s]'"),
                                   name, row->key, row->group);
                return NULL;
            }
        }
    }
    if (conf->migrationPortMin > conf->migrationPortMax) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("%1$s: [migration] port-min %2$u is above port-max %3$u; set them to libvirt's migration_port_min and migration_port_max (qemu.conf; 49152 and 49215 by default)"),
                       name, conf->migrationPortMin, conf->migrationPortMax);
        return NULL;
    }

    return g_steal_pointer(&conf);
}

vrmHelperConfig *
vrmHelperConfigLoadFile(const char *path)
{
    g_autofree char *data = NULL;
    g_autoptr(GError) gerr = NULL;
    gsize len = 0;

    if (!g_file_get_contents(path, &data, &len, &gerr)) {
        vrmReportError(VRM_ERR_CONFIG, _("cannot read '%1$s': %2$s"),
                       path, gerr->message);
        return NULL;
    }
    return vrmHelperConfigLoadData(data, len, path);
}

char *
vrmHelperConfigFormat(const vrmHelperConfig *conf)
{
    GString *buf = g_string_new(NULL);
    const char *group = NULL;
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmConfKeys); i++) {
        const vrmConfKey *row = &vrmConfKeys[i];
        const char *str;

        if (!group || strcmp(group, row->group) != 0) {
            g_string_append_printf(buf, "%s[%s]\n", group ? "\n" : "",
                                   row->group);
            group = row->group;
        }
        switch (row->type) {
        case VRM_CONF_NAME:
        case VRM_CONF_HOST_NAME:
        case VRM_CONF_ADDRESS:
        case VRM_CONF_PATH:
        case VRM_CONF_STRING:
        case VRM_CONF_NETWORKS:
            if ((str = *FIELD(conf, char *const, row)))
                g_string_append_printf(buf, "%s=%s\n", row->key, str);
            break;
        case VRM_CONF_PATH_OR_OFF:
            /* off is written: left out, the key would mean its default */
            str = *FIELD(conf, char *const, row);
            g_string_append_printf(buf, "%s=%s\n", row->key, str ? str : "");
            break;
        case VRM_CONF_ENUM:
            g_string_append_printf(buf, "%s=%s\n", row->key,
                                   row->enumToString(*FIELD(conf, const int, row)));
            break;
        case VRM_CONF_UINT:
            g_string_append_printf(buf, "%s=%u\n", row->key,
                                   *FIELD(conf, const unsigned int, row));
            break;
        case VRM_CONF_ULLONG:
        case VRM_CONF_SIZE:
            g_string_append_printf(buf, "%s=%llu\n", row->key,
                                   *FIELD(conf, const unsigned long long, row));
            break;
        case VRM_CONF_CHUNK_SIZES: {
            vrmHostPolicy policy = { .chunkSizes = conf->chunkSizes };
            g_autofree char *list = vrmHostPolicyFormatChunkSizes(&policy);

            g_strdelimit(list, " ", ';');
            g_string_append_printf(buf, "%s=%s\n", row->key, list);
            break;
        }
        }
    }
    return g_string_free(buf, FALSE);
}

void
vrmHelperConfigToPolicy(const vrmHelperConfig *conf, vrmHostPolicy *policy)
{
    vrmHostPolicyInit(policy);
    policy->maxChannels = conf->maxChannels;
    policy->maxPinnedBytes = conf->maxPinnedBytes;
    policy->chunkSizes = conf->chunkSizes;
    policy->maxRingDepth = conf->maxRingDepth;
    policy->maxBandwidth = conf->maxBandwidth;
}

const char *
vrmHelperConfigDefaultPath(void)
{
    const char *env = g_getenv(VRM_HELPER_CONFIG_ENV);

    if (env && *env)
        return env;
    return VRM_SYSCONFDIR "/" VRM_HELPER_CONFIG_FILE;
}

vrmHelperConfig *
vrmHelperConfigLoadDefault(void)
{
    const char *path = vrmHelperConfigDefaultPath();

    if (!g_file_test(path, G_FILE_TEST_EXISTS))
        return vrmHelperConfigNew();
    return vrmHelperConfigLoadFile(path);
}

int
vrmHelperConfigCheckSystem(const vrmHelperConfig *conf)
{
    struct passwd *pw;

    if (conf->group && !getgrnam(conf->group)) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("the access group '%1$s' ([access] group) does not exist: create it (addgroup --system %2$s) or name an existing group"),
                       conf->group, conf->group);
        return -1;
    }
    if (conf->engineUser) {
        if (!(pw = getpwnam(conf->engineUser))) {
            vrmReportError(VRM_ERR_CONFIG,
                           _("the engine user '%1$s' ([engine] user) does not exist: create it (adduser --system --group --no-create-home %2$s) or name an existing user"),
                           conf->engineUser, conf->engineUser);
            return -1;
        }
        if (pw->pw_uid == 0) {
            vrmReportError(VRM_ERR_CONFIG,
                           _("the engine user '%1$s' ([engine] user) is root: engines must run as an unprivileged user"),
                           conf->engineUser);
            return -1;
        }
    }
    if (conf->qemuUser && !getpwnam(conf->qemuUser)) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("the QEMU user '%1$s' ([qemu] user) does not exist"),
                       conf->qemuUser);
        return -1;
    }
    return 0;
}

char *
vrmHelperConfigSocketPath(const vrmHelperConfig *conf)
{
    return g_build_filename(conf->runDir, VRM_HELPER_SOCKET_NAME, NULL);
}

char *
vrmHelperConfigDomainDir(const vrmHelperConfig *conf, const char *uuid)
{
    g_autofree char *lower = g_ascii_strdown(uuid, -1);

    return g_build_filename(conf->runDir, VRM_HELPER_DOMAIN_DIR, lower, NULL);
}

char *
vrmHelperConfigDomainSocket(const vrmHelperConfig *conf, const char *uuid)
{
    g_autofree char *dir = vrmHelperConfigDomainDir(conf, uuid);

    return g_build_filename(dir, VRM_HELPER_DOMAIN_SOCKET, NULL);
}

char *
vrmHelperConfigDomainDiskSocket(const vrmHelperConfig *conf, const char *uuid)
{
    g_autofree char *dir = vrmHelperConfigDomainDir(conf, uuid);

    return g_build_filename(dir, VRM_HELPER_DOMAIN_DISK_SOCKET, NULL);
}
