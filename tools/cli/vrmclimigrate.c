/*
 * vrmclimigrate.c: virt-rdma migrate DOMAIN DESTURI
 *
 * The options are virsh migrate's that apply, plus the RDMA ones; both
 * come from tables: virsh's flags below, the RDMA parameters from the
 * library's (vrmMigrateParamTable), pin-all from the capability table.
 * The migration runs in a worker thread; the main thread prints progress
 * (--verbose), enforces --timeout (the guest is suspended, as virsh does)
 * and turns Ctrl-C into virDomainAbortJob(), which ends the engines too.
 */
#include <config.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "virt-rdma.h"
#include "vrmcli.h"
#include "vrmcapability.h"
#include "vrmparse.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlibpriv.h"

/* How often --verbose refreshes its line */
#define VRM_CLI_PROGRESS_INTERVAL_MS 500
#define VRM_CLI_MAX_PARAMS 16
#define VRM_CLI_MAX_XML_BYTES (10 * 1024 * 1024)

/* virsh migrate's options that are one flag each */
typedef struct {
    const char *option;
    unsigned int flag;
    const char *help;           /* N_() */
} vrmMigrateFlagOption;

static const vrmMigrateFlagOption vrmMigrateFlagTable[] = {
    { "live", VIR_MIGRATE_LIVE, N_("live migration") },
    { "p2p", VIR_MIGRATE_PEER2PEER, N_("peer-2-peer migration") },
    { "persistent", VIR_MIGRATE_PERSIST_DEST, N_("persist the domain on the destination") },
    { "undefinesource", VIR_MIGRATE_UNDEFINE_SOURCE, N_("undefine the domain on the source") },
    { "suspend", VIR_MIGRATE_PAUSED, N_("do not restart the domain on the destination") },
    { "parallel", VIR_MIGRATE_PARALLEL, N_("migrate with parallel connections (multifd)") },
    { "postcopy", VIR_MIGRATE_POSTCOPY, N_("enable post-copy migration") },
    { "postcopy-resume", VIR_MIGRATE_POSTCOPY_RESUME, N_("resume a failed post-copy migration through the recovery job virt-rdmad set up") },
    { "tls", VIR_MIGRATE_TLS, N_("QEMU's TLS over the RDMA transport (confidentiality of the memory)") },
    { "auto-converge", VIR_MIGRATE_AUTO_CONVERGE, N_("force convergence by throttling the guest's CPUs") },
    { "compressed", VIR_MIGRATE_COMPRESSED, N_("compress the memory (with --parallel: multifd zlib or zstd)") },
    { "abort-on-error", VIR_MIGRATE_ABORT_ON_ERROR, N_("abort on a soft error during the migration") },
    { "unsafe", VIR_MIGRATE_UNSAFE, N_("force the migration even if it may be unsafe") },
    { "copy-storage-all", VIR_MIGRATE_NON_SHARED_DISK, N_("copy the disks that are not shared (through the domain's nbd.sock, over RDMA)") },
    { "copy-storage-inc", VIR_MIGRATE_NON_SHARED_INC, N_("copy the top images of disks whose backing images are shared (through nbd.sock, over RDMA)") },
    { "copy-storage-synchronous-writes", VIR_MIGRATE_NON_SHARED_SYNCHRONOUS_WRITES, N_("the guest's disk writes wait for the copy (the copy converges whatever the guest writes)") },
    { "change-protection", VIR_MIGRATE_CHANGE_PROTECTION, N_("prevent any configuration changes to the domain until the migration ends") },
    { "rdma-pin-all", VIR_MIGRATE_RDMA_PIN_ALL, NULL /* the capability table's */ },
};

/* virsh migrate's options that are one typed parameter each, passed to
 * libvirt as they are (virt-rdma carries QEMU's streams, whatever they hold) */
typedef enum {
    VRM_PASS_PERCENT,           /* an int from 0 to 100 */
    VRM_PASS_INT,               /* an int from the row's min to its max */
    VRM_PASS_SIZE,              /* bytes (an unsigned long long), sizes as 64M */
    VRM_PASS_STRING,
    VRM_PASS_FILE,              /* the parameter is the file's contents */
    VRM_PASS_LIST,              /* comma-separated, one parameter per item */
} vrmMigratePassKind;

typedef struct {
    const char *option;
    const char *param;          /* VIR_MIGRATE_PARAM_* */
    vrmMigratePassKind kind;
    unsigned int needsFlag;     /* 0, or the flag this option needs */
    const char *needsOption;    /* ... named as an option */
    const char *help;           /* N_() */
    const char *argName;        /* N_() */
    int min;                    /* VRM_PASS_INT */
    int max;
} vrmMigratePassOption;

static const vrmMigratePassOption vrmMigratePassTable[] = {
    { "auto-converge-initial", VIR_MIGRATE_PARAM_AUTO_CONVERGE_INITIAL, VRM_PASS_PERCENT,
      VIR_MIGRATE_AUTO_CONVERGE, "--auto-converge",
      N_("initial CPU throttling rate for auto-convergence, in percent"), N_("PERCENT") },
    { "auto-converge-increment", VIR_MIGRATE_PARAM_AUTO_CONVERGE_INCREMENT, VRM_PASS_PERCENT,
      VIR_MIGRATE_AUTO_CONVERGE, "--auto-converge",
      N_("CPU throttling rate increment for auto-convergence, in percent"), N_("PERCENT") },
    { "tls-destination", VIR_MIGRATE_PARAM_TLS_DESTINATION, VRM_PASS_STRING,
      VIR_MIGRATE_TLS, "--tls",
      N_("the name in the destination's TLS certificate (default: the host of DESTURI)"), N_("NAME") },
    { "comp-methods", VIR_MIGRATE_PARAM_COMPRESSION, VRM_PASS_LIST,
      VIR_MIGRATE_COMPRESSED, "--compressed",
      N_("comma-separated list of compression methods"), N_("METHODS") },
    { "dname", VIR_MIGRATE_PARAM_DEST_NAME, VRM_PASS_STRING, 0, NULL,
      N_("rename the domain to NAME during the migration"), N_("NAME") },
    { "xml", VIR_MIGRATE_PARAM_DEST_XML, VRM_PASS_FILE, 0, NULL,
      N_("FILE holds an updated domain XML for the destination"), N_("FILE") },
    { "migrate-disks", VIR_MIGRATE_PARAM_MIGRATE_DISKS, VRM_PASS_LIST,
      VIR_MIGRATE_NON_SHARED_DISK | VIR_MIGRATE_NON_SHARED_INC, "--copy-storage-all or --copy-storage-inc",
      N_("comma-separated list of the disks (targets, e.g. vda) to copy"), N_("DISKS") },
    { "persistent-xml", VIR_MIGRATE_PARAM_PERSIST_XML, VRM_PASS_FILE,
      VIR_MIGRATE_PERSIST_DEST, "--persistent",
      N_("FILE holds the domain XML to persist on the destination"), N_("FILE") },
    { "graphicsuri", VIR_MIGRATE_PARAM_GRAPHICS_URI, VRM_PASS_STRING, 0, NULL,
      N_("graphics URI the clients of the domain's display reconnect to"), N_("URI") },
    { "comp-mt-level", VIR_MIGRATE_PARAM_COMPRESSION_MT_LEVEL, VRM_PASS_INT,
      VIR_MIGRATE_COMPRESSED, "--compressed",
      N_("compression level of the mt method, 0 to 9"), N_("LEVEL"), 0, 9 },
    { "comp-mt-threads", VIR_MIGRATE_PARAM_COMPRESSION_MT_THREADS, VRM_PASS_INT,
      VIR_MIGRATE_COMPRESSED, "--compressed",
      N_("compression threads of the mt method"), N_("N"), 1, 255 },
    { "comp-mt-dthreads", VIR_MIGRATE_PARAM_COMPRESSION_MT_DTHREADS, VRM_PASS_INT,
      VIR_MIGRATE_COMPRESSED, "--compressed",
      N_("decompression threads of the mt method"), N_("N"), 1, 255 },
    { "comp-xbzrle-cache", VIR_MIGRATE_PARAM_COMPRESSION_XBZRLE_CACHE, VRM_PASS_SIZE,
      VIR_MIGRATE_COMPRESSED, "--compressed",
      N_("page cache of the xbzrle method, in bytes (or 64M)"), N_("SIZE") },
};

typedef struct {
    gboolean flags[G_N_ELEMENTS(vrmMigrateFlagTable)];
    char *pass[G_N_ELEMENTS(vrmMigratePassTable)];
    char *rdma[VRM_CLI_MAX_PARAMS];     /* one per row of the library's table */
    int parallelConnections;
    gint64 bandwidth;                   /* MiB/s, 0: libvirt's default */
    int timeout;                        /* s, 0: none */
    gboolean timeoutSuspend;            /* at the timeout: suspend (the default) */
    gboolean timeoutPostcopy;           /* at the timeout: switch to post-copy */
    gboolean verbose;
    char *connectURI;                   /* -c: the source libvirt */
    gboolean postcopyAfterPrecopy;      /* switch after the first pass */
    gint64 postcopyBandwidth;           /* MiB/s, 0: libvirt's default */
    char *refused;                      /* a virsh option this design cannot take */
    char *domain;                       /* --domain, as virsh names it */
    char *desturi;                      /* --desturi */
} vrmMigrateOptions;

typedef struct {
    virTypedParameterPtr params;
    int n;
    int max;
} vrmTypedParams;

static void
vrmTypedParamsClear(vrmTypedParams *p)
{
    virTypedParamsFree(p->params, p->n);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(vrmTypedParams, vrmTypedParamsClear);

static void
vrmMigrateOptionsClear(vrmMigrateOptions *o)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(o->rdma); i++)
        g_free(o->rdma[i]);
    for (i = 0; i < G_N_ELEMENTS(o->pass); i++)
        g_free(o->pass[i]);
    g_free(o->connectURI);
    g_free(o->domain);
    g_free(o->desturi);
    g_free(o->refused);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(vrmMigrateOptions, vrmMigrateOptionsClear);

typedef struct {
    virDomainPtr dom;
    virConnectPtr dconn;        /* NULL with --p2p */
    const char *desturi;
    virTypedParameterPtr params;
    int nparams;
    unsigned int flags;
    int result;                 /* 0 ok, -1 failed */
    char *error;
    gint done;                  /* set by the worker (atomic) */
} vrmMigrateRun;

static volatile sig_atomic_t vrmInterrupted;

static void
vrmOnSigint(int sig)
{
    vrmInterrupted = 1;
}


/* ---- options ------------------------------------------------------------- */

static const char *
vrmMigrateFlagHelp(const vrmMigrateFlagOption *row)
{
    if (row->help)
        return row->help;
    return vrmCapabilityGetInfo(VRM_CAPABILITY_PIN_ALL)->help;
}

/* virsh migrate's options that cannot work when virt-rdma carries the
 * streams, and what to do instead */
typedef struct {
    const char *option;
    bool takesValue;
    const char *why;            /* N_() */
} vrmMigrateRefusedOption;

#define VRM_DISK_URI_WHY \
    N_("virt-rdma sets the disks URI to the domain's own socket (nbd.sock next to its migration socket); for plain virsh use --disks-uri with the path 'virt-rdma uri --disks DOMAIN' prints")

static const vrmMigrateRefusedOption vrmMigrateRefusedTable[] = {
    { "tunnelled", false, N_("a tunnelled migration goes through libvirtd's own connection, not through QEMU's sockets that virt-rdma carries; leave it out") },
    { "direct", false, N_("a direct migration is a hypervisor-native transport, not QEMU's sockets that virt-rdma carries; leave it out") },
    { "migrateuri", true, N_("virt-rdma sets the migration URI to the domain's own socket; for plain virsh use --migrateuri \"$(virt-rdma uri DOMAIN)\"") },
    { "listen-address", true, N_("the destination QEMU listens on the domain's socket, not on an address; the RDMA address is virt-rdmad's ([rdma] address) or --rdma-address") },
    { "disks-uri", true, VRM_DISK_URI_WHY },
    { "disks-port", true, VRM_DISK_URI_WHY },
    { "offline", false, N_("an offline migration moves the definition only, no memory: nothing for RDMA to carry; use virsh migrate --offline") },
};

static const vrmMigrateRefusedOption *
vrmMigrateRefusedFind(const char *name)
{
    size_t i;

    while (*name == '-')
        name++;
    for (i = 0; i < G_N_ELEMENTS(vrmMigrateRefusedTable); i++) {
        if (g_str_equal(vrmMigrateRefusedTable[i].option, name))
            return &vrmMigrateRefusedTable[i];
    }
    return NULL;
}

/* GOption callback of the refused options: remember the first one */
static gboolean
vrmMigrateRefuse(const char *name, const char *value, gpointer data, GError **error)
{
    vrmMigrateOptions *o = data;

    if (!o->refused)
        o->refused = g_strdup(name);
    return TRUE;
}

/* The option entries, from the tables (the array owns nothing) */
static GOptionEntry *
vrmMigrateEntries(vrmMigrateOptions *o)
{
    GArray *entries = g_array_new(TRUE, TRUE, sizeof(GOptionEntry));
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmMigrateFlagTable); i++) {
        GOptionEntry e = { vrmMigrateFlagTable[i].option, 0, 0, G_OPTION_ARG_NONE,
                           &o->flags[i], vrmMigrateFlagHelp(&vrmMigrateFlagTable[i]),
                           NULL };

        g_array_append_val(entries, e);
    }
    for (i = 0; i < G_N_ELEMENTS(vrmMigratePassTable); i++) {
        GOptionEntry e = { vrmMigratePassTable[i].option, 0, 0, G_OPTION_ARG_STRING,
                           &o->pass[i], vrmMigratePassTable[i].help,
                           vrmMigratePassTable[i].argName };

        g_array_append_val(entries, e);
    }
    for (i = 0; i < vrmMigrateParamCount() && i < VRM_CLI_MAX_PARAMS; i++) {
        const vrmMigrateParamInfo *row = vrmMigrateParamGet(i);
        GOptionEntry e = { row->option, 0, 0, G_OPTION_ARG_STRING, &o->rdma[i],
                           row->help, row->argName };

        if (row->option)
            g_array_append_val(entries, e);
    }
    {
        GOptionEntry rest[] = {
            { "parallel-connections", 0, 0, G_OPTION_ARG_INT, &o->parallelConnections,
              N_("number of parallel connections (each its own RDMA channel)"), N_("N") },
            { "bandwidth", 0, 0, G_OPTION_ARG_INT64, &o->bandwidth,
              N_("migration bandwidth limit in MiB/s"), N_("MIB") },
            { "timeout", 0, 0, G_OPTION_ARG_INT, &o->timeout,
              N_("suspend the guest if live migration exceeds SECONDS"), N_("SECONDS") },
            { "timeout-suspend", 0, 0, G_OPTION_ARG_NONE, &o->timeoutSuspend,
              N_("suspend the guest at the --timeout (the default)"), NULL },
            { "timeout-postcopy", 0, 0, G_OPTION_ARG_NONE, &o->timeoutPostcopy,
              N_("switch to post-copy at the --timeout instead of suspending"), NULL },
            { "verbose", 0, 0, G_OPTION_ARG_NONE, &o->verbose,
              N_("display the progress of migration"), NULL },
            { "connect", 'c', 0, G_OPTION_ARG_STRING, &o->connectURI,
              N_("libvirt URI of the source (default: libvirt's)"), N_("URI") },
            { "postcopy-after-precopy", 0, 0, G_OPTION_ARG_NONE, &o->postcopyAfterPrecopy,
              N_("switch to post-copy after the first pass of pre-copy"), NULL },
            { "postcopy-bandwidth", 0, 0, G_OPTION_ARG_INT64, &o->postcopyBandwidth,
              N_("post-copy bandwidth limit in MiB/s"), N_("MIB") },
            { "domain", 0, 0, G_OPTION_ARG_STRING, &o->domain,
              N_("domain name, id or uuid (or the first argument)"), N_("DOMAIN") },
            { "desturi", 0, 0, G_OPTION_ARG_STRING, &o->desturi,
              N_("connection URI of the destination host (or the second argument)"), N_("URI") },
        };

        g_array_append_vals(entries, rest, G_N_ELEMENTS(rest));
    }
    for (i = 0; i < G_N_ELEMENTS(vrmMigrateRefusedTable); i++) {
        GOptionEntry e = { vrmMigrateRefusedTable[i].option, 0,
                           G_OPTION_FLAG_HIDDEN |
                           (vrmMigrateRefusedTable[i].takesValue ? 0 : G_OPTION_FLAG_NO_ARG),
                           G_OPTION_ARG_CALLBACK, (gpointer)vrmMigrateRefuse, NULL, NULL };

        g_array_append_val(entries, e);
    }
    return (GOptionEntry *)g_array_free(entries, FALSE);
}

/* An RDMA option's text as the typed parameter of its row, checked as the
 * library checks it, so that a wrong value is named before any connection */
static int
vrmMigrateAddRdma(const vrmMigrateParamInfo *row, const char *text,
                  vrmTypedParams *p)
{
    unsigned long long v;

    switch (row->kind) {
    case VRM_MIGRATE_ARG_SIZE:
        if (!vrmParseSize(text, &v)) {
            vrmCliError(_("--%1$s '%2$s' is not a size: %3$s"), row->option, text,
                        vrmSizeSyntaxHelp());
            return -1;
        }
        if (v < VRM_CHUNK_SIZE_MIN || v > VRM_CHUNK_SIZE_MAX || (v & (v - 1))) {
            vrmCliError(_("--%1$s takes a power of two from 64K to 64M, not '%2$s'"),
                        row->option, text);
            return -1;
        }
        return virTypedParamsAddULLong(&p->params, &p->n, &p->max, row->param, v);
    case VRM_MIGRATE_ARG_UINT:
        if (!vrmParseUInt64(text, &v) || v < row->min || v > row->max) {
            vrmCliError(_("--%1$s takes a number from %2$u to %3$u, not '%4$s'"),
                        row->option, row->min, row->max, text);
            return -1;
        }
        return virTypedParamsAddUInt(&p->params, &p->n, &p->max, row->param, v);
    case VRM_MIGRATE_ARG_NAME:
        if (!vrmValidName(text)) {
            vrmCliError(_("--%1$s '%2$s' is not an RDMA device name (1 to %3$d letters, digits, '_', '.' or '-')"),
                        row->option, text, VRM_NAME_MAX);
            return -1;
        }
        return virTypedParamsAddString(&p->params, &p->n, &p->max, row->param, text);
    case VRM_MIGRATE_ARG_ADDRESS:
        if (!vrmValidAddress(text)) {
            vrmCliError(_("--%1$s '%2$s' is not an IPv4 or IPv6 address"), row->option, text);
            return -1;
        }
        return virTypedParamsAddString(&p->params, &p->n, &p->max, row->param, text);
    case VRM_MIGRATE_ARG_PATH:
        return virTypedParamsAddString(&p->params, &p->n, &p->max, row->param, text);
    }
    return -1;
}

/* A pass-through option's text as its typed parameter(s), checked here so
 * that a wrong value is named before any connection; 2 on a usage error */
static int
vrmMigrateAddPass(const vrmMigratePassOption *row, const char *text,
                  unsigned int flags, vrmTypedParams *p)
{
    unsigned long long v;

    if (row->needsFlag && !(flags & row->needsFlag)) {
        vrmCliError(_("--%1$s needs %2$s"), row->option, row->needsOption);
        return 2;
    }
    switch (row->kind) {
    case VRM_PASS_PERCENT:
        if (!vrmParseUInt64(text, &v) || v > 100) {
            vrmCliError(_("--%1$s takes a percentage from 0 to 100, not '%2$s'"),
                        row->option, text);
            return 2;
        }
        return virTypedParamsAddInt(&p->params, &p->n, &p->max, row->param, (int)v) < 0;
    case VRM_PASS_INT:
        if (!vrmParseUInt64(text, &v) || v < (unsigned long long)row->min ||
            v > (unsigned long long)row->max) {
            vrmCliError(_("--%1$s takes a number from %2$d to %3$d, not '%4$s'"),
                        row->option, row->min, row->max, text);
            return 2;
        }
        return virTypedParamsAddInt(&p->params, &p->n, &p->max, row->param, (int)v) < 0;
    case VRM_PASS_SIZE:
        if (!vrmParseSize(text, &v) || v == 0) {
            vrmCliError(_("--%1$s '%2$s' is not a size: %3$s"), row->option, text,
                        vrmSizeSyntaxHelp());
            return 2;
        }
        return virTypedParamsAddULLong(&p->params, &p->n, &p->max, row->param, v) < 0;
    case VRM_PASS_STRING:
        if (!*text) {
            vrmCliError(_("--%1$s takes a non-empty value"), row->option);
            return 2;
        }
        return virTypedParamsAddString(&p->params, &p->n, &p->max, row->param, text) < 0;
    case VRM_PASS_FILE: {
        g_autofree char *xml = NULL;
        g_autoptr(GError) err = NULL;
        gsize len = 0;

        if (!g_file_get_contents(text, &xml, &len, &err)) {
            vrmCliError(_("--%1$s: %2$s"), row->option, err->message);
            return 2;
        }
        if (len == 0 || len > VRM_CLI_MAX_XML_BYTES || strlen(xml) != len) {
            vrmCliError(_("--%1$s: '%2$s' is not a domain XML file (empty, larger than 10 MiB or binary)"),
                        row->option, text);
            return 2;
        }
        return virTypedParamsAddString(&p->params, &p->n, &p->max, row->param, xml) < 0;
    }
    case VRM_PASS_LIST: {
        g_auto(GStrv) items = g_strsplit(text, ",", -1);
        size_t i;

        for (i = 0; items[i]; i++) {
            if (!*items[i]) {
                vrmCliError(_("--%1$s '%2$s' has an empty item"), row->option, text);
                return 2;
            }
            if (virTypedParamsAddString(&p->params, &p->n, &p->max, row->param, items[i]) < 0)
                return 1;
        }
        return 0;
    }
    }
    return 1;
}

/* With --tls: the name QEMU checks the destination's certificate against.
 * Over TCP libvirt takes the destination's host name; over the domain's
 * UNIX socket there is none, so libvirt needs one: the host of DESTURI,
 * as libvirt would use, unless --tls-destination names it. */
static int
vrmMigrateTLSDestination(const vrmMigrateOptions *o, vrmTypedParams *p)
{
    g_autoptr(GUri) uri = NULL;
    const char *host;

    if (virTypedParamsGet(p->params, p->n, VIR_MIGRATE_PARAM_TLS_DESTINATION))
        return 0;
    uri = g_uri_parse(o->desturi, G_URI_FLAGS_NONE, NULL);
    host = uri ? g_uri_get_host(uri) : NULL;
    if (!host || !*host) {
        vrmCliError(_("--tls needs --tls-destination: the destination URI '%1$s' names no host for QEMU to check the destination's certificate against"),
                    o->desturi);
        return 2;
    }
    return virTypedParamsAddString(&p->params, &p->n, &p->max,
                                   VIR_MIGRATE_PARAM_TLS_DESTINATION, host) < 0;
}

/* Flags and typed parameters from the options; 2 on a usage error */
static int
vrmMigrateBuild(const vrmMigrateOptions *o, unsigned int *flags, vrmTypedParams *p)
{
    size_t i;
    int rc;

    for (i = 0; i < G_N_ELEMENTS(vrmMigrateFlagTable); i++) {
        if (o->flags[i])
            *flags |= vrmMigrateFlagTable[i].flag;
    }
    if ((*flags & VIR_MIGRATE_POSTCOPY_RESUME) && !(*flags & VIR_MIGRATE_POSTCOPY)) {
        vrmCliError(_("%1$s needs --postcopy"), "--postcopy-resume");
        return 2;
    }
    if ((o->postcopyAfterPrecopy || o->postcopyBandwidth) && !(*flags & VIR_MIGRATE_POSTCOPY)) {
        vrmCliError(_("%1$s needs --postcopy"),
                    o->postcopyAfterPrecopy ? "--postcopy-after-precopy" : "--postcopy-bandwidth");
        return 2;
    }
    if (o->postcopyBandwidth < 0) {
        vrmCliError(_("--postcopy-bandwidth takes a positive number of MiB/s, not %1$lld"),
                    (long long)o->postcopyBandwidth);
        return 2;
    }
    if (o->postcopyBandwidth &&
        virTypedParamsAddULLong(&p->params, &p->n, &p->max,
                                VIR_MIGRATE_PARAM_BANDWIDTH_POSTCOPY, o->postcopyBandwidth) < 0)
        return 1;
    if (o->parallelConnections && !(*flags & VIR_MIGRATE_PARALLEL)) {
        vrmCliError(_("--parallel-connections needs --parallel"));
        return 2;
    }
    if (o->parallelConnections < 0 || o->parallelConnections >= VRM_CHANNELS_MAX) {
        vrmCliError(_("--parallel-connections takes a number from 1 to %1$d, not %2$d"),
                    VRM_CHANNELS_MAX - 1, o->parallelConnections);
        return 2;
    }
    if (o->bandwidth < 0) {
        vrmCliError(_("--bandwidth takes a positive number of MiB/s, not %1$lld"),
                    (long long)o->bandwidth);
        return 2;
    }
    if (o->timeout < 0) {
        vrmCliError(_("--timeout takes a positive number of seconds, not %1$d"), o->timeout);
        return 2;
    }
    if ((o->timeoutSuspend || o->timeoutPostcopy) && !o->timeout) {
        vrmCliError(_("%1$s needs --timeout"),
                    o->timeoutSuspend ? "--timeout-suspend" : "--timeout-postcopy");
        return 2;
    }
    if (o->timeoutSuspend && o->timeoutPostcopy) {
        vrmCliError(_("--timeout-suspend and --timeout-postcopy exclude each other: the guest is either suspended or switched to post-copy at the timeout"));
        return 2;
    }
    if (o->timeoutPostcopy && !(*flags & VIR_MIGRATE_POSTCOPY)) {
        vrmCliError(_("%1$s needs --postcopy"), "--timeout-postcopy");
        return 2;
    }
    if ((o->parallelConnections &&
         virTypedParamsAddInt(&p->params, &p->n, &p->max,
                              VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS,
                              o->parallelConnections) < 0) ||
        (o->bandwidth &&
         virTypedParamsAddULLong(&p->params, &p->n, &p->max,
                                 VIR_MIGRATE_PARAM_BANDWIDTH, o->bandwidth) < 0))
        return 1;
    for (i = 0; i < G_N_ELEMENTS(vrmMigratePassTable); i++) {
        if (o->pass[i] &&
            (rc = vrmMigrateAddPass(&vrmMigratePassTable[i], o->pass[i], *flags, p)) != 0)
            return rc;
    }
    if ((*flags & VIR_MIGRATE_TLS) && (rc = vrmMigrateTLSDestination(o, p)) != 0)
        return rc;
    for (i = 0; i < vrmMigrateParamCount() && i < VRM_CLI_MAX_PARAMS; i++) {
        if (o->rdma[i] && vrmMigrateAddRdma(vrmMigrateParamGet(i), o->rdma[i], p) < 0)
            return 2;
    }
    /* what the library will check (channels against parallel connections),
     * before libvirt or the helper is contacted */
    {
        vrmMigrationParams scratch = { 0 };
        const char *sock = NULL;
        int checked = vrmMigrateOverridesFromParams(p->params, p->n, *flags, &scratch, &sock);

        vrmMigrationParamsClear(&scratch);
        if (checked < 0) {
            vrmCliError("%s", vrmLastErrorMessage());
            return 2;
        }
    }
    return 0;
}

/* DOMAIN and DESTURI as arguments or virsh's named forms; 2 on a usage
 * error, a refused virsh option included */
static int
vrmMigrateTargets(vrmMigrateOptions *o, int argc, char **argv)
{
    int next = 1;

    if (o->refused) {
        const vrmMigrateRefusedOption *r = vrmMigrateRefusedFind(o->refused);

        vrmCliError(_("%1$s cannot be used with virt-rdma: %2$s"), o->refused,
                    r ? _(r->why) : "");
        return 2;
    }

    if (!o->domain && next < argc)
        o->domain = g_strdup(argv[next++]);
    if (!o->desturi && next < argc)
        o->desturi = g_strdup(argv[next++]);
    if (next < argc) {
        vrmCliError(_("unexpected argument '%1$s'"), argv[next]);
        return 2;
    }
    if (!o->domain || !o->desturi) {
        vrmCliError(_("migrate takes a domain and a destination URI, e.g. 'virt-rdma migrate --live --p2p web1 qemu+ssh://dst/system'"));
        return 2;
    }
    return 0;
}


/* ---- running it ---------------------------------------------------------- */

static gpointer
vrmMigrateWorker(gpointer opaque)
{
    vrmMigrateRun *run = opaque;

    if (run->dconn) {
        virDomainPtr ddom = vrmDomainMigrate3(run->dom, run->dconn, run->params,
                                              run->nparams, run->flags);
        run->result = ddom ? 0 : -1;
        if (ddom)
            virDomainFree(ddom);
    } else {
        run->result = vrmDomainMigrateToURI3(run->dom, run->desturi, run->params,
                                             run->nparams, run->flags);
    }
    if (run->result < 0)
        run->error = g_strdup(vrmLastErrorMessage());
    g_atomic_int_set(&run->done, 1);
    return NULL;
}

/* One line like virsh's, with the transport's pace and time left */
static void
vrmPrintProgress(virDomainPtr dom, bool final)
{
    virTypedParameterPtr params = NULL;
    int nparams = 0, type = 0;
    unsigned long long total = 0, remaining = 0;
    unsigned int mbps = 0;
    unsigned int pct = final ? 100 : 0;
    g_autofree char *left = NULL;

    if (!final) {
        if (vrmDomainGetJobStats(dom, &type, &params, &nparams, 0) < 0)
            return;
        if (type == VIR_DOMAIN_JOB_NONE) {
            virTypedParamsFree(params, nparams);
            return;
        }
        virTypedParamsGetULLong(params, nparams, VIR_DOMAIN_JOB_DATA_TOTAL, &total);
        virTypedParamsGetULLong(params, nparams, VIR_DOMAIN_JOB_DATA_REMAINING, &remaining);
        virTypedParamsGetUInt(params, nparams, VRM_JOB_STATS_MBPS, &mbps);
        virTypedParamsFree(params, nparams);
        if (total)
            pct = 100 - (unsigned int)(remaining * 100 / total);
        if (pct == 100 && remaining)
            pct = 99;
    }
    if (mbps && !final)
        left = g_strdup_printf(_(", %1$llu s left"),
                               (unsigned long long)(remaining * 8 / ((unsigned long long)mbps * 1000000) + 1));
    fputc('\r', stderr);
    /* message-style: exempt-begin: virsh migrate --verbose's progress line */
    if (mbps)
        fprintf(stderr, _("Migration: [%1$3u %%] %2$u Mbit/s over RDMA%3$s   "),
                pct, mbps, left ? left : "");
    else
        fprintf(stderr, _("Migration: [%1$3u %%]   "), pct);
    /* message-style: exempt-end */
    if (final)
        fprintf(stderr, "\n");
    fflush(stderr);
}

static void
vrmPrintFinalJob(virDomainPtr dom)
{
    virTypedParameterPtr params = NULL;
    int nparams = 0, type = 0;
    unsigned long long id = 0, sent = 0;
    unsigned int mbps = 0, channels = 0;
    g_autofree char *sentStr = NULL;

    /* Keep libvirt's completed stats for a later domjobinfo --completed. */
    if (vrmDomainGetJobStats(dom, &type, &params, &nparams,
                             VIR_DOMAIN_JOB_STATS_COMPLETED |
                             VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED) < 0)
        return;
    if (virTypedParamsGetULLong(params, nparams, VRM_JOB_STATS_ID, &id) == 1) {
        virTypedParamsGetULLong(params, nparams, VRM_JOB_STATS_BYTES_SENT, &sent);
        virTypedParamsGetUInt(params, nparams, VRM_JOB_STATS_MBPS, &mbps);
        virTypedParamsGetUInt(params, nparams, VRM_JOB_STATS_CHANNELS, &channels);
        sentStr = vrmCliPrettySize(sent);
        printf(_("RDMA job %1$llu: %2$s sent over %3$u channel(s), %4$u Mbit/s\n"),
               id, sentStr, channels, mbps);
    }
    virTypedParamsFree(params, nparams);
}

/* Has pre-copy finished its first pass over memory (iteration 2 begun)? */
static bool
vrmMigrateFirstPassDone(virDomainPtr dom)
{
    virTypedParameterPtr params = NULL;
    int nparams = 0, type = 0;
    unsigned long long iteration = 0;

    if (virDomainGetJobStats(dom, &type, &params, &nparams, 0) < 0)
        return false;
    virTypedParamsGetULLong(params, nparams, VIR_DOMAIN_JOB_MEMORY_ITERATION, &iteration);
    virTypedParamsFree(params, nparams);
    return type == VIR_DOMAIN_JOB_UNBOUNDED && iteration >= 2;
}

/* While the worker migrates: Ctrl-C, --timeout, --verbose */
static void
vrmMigrateMonitor(vrmMigrateRun *run, const vrmMigrateOptions *o)
{
    gint64 start = g_get_monotonic_time();
    bool timedOut = false;
    bool switched = false;

    while (!g_atomic_int_get(&run->done)) {
        g_usleep(VRM_CLI_PROGRESS_INTERVAL_MS * 1000);
        if (o->postcopyAfterPrecopy && !switched && vrmMigrateFirstPassDone(run->dom)) {
            /* as virsh does on the second iteration event */
            switched = true;
            if (virDomainMigrateStartPostCopy(run->dom, 0) < 0)
                vrmCliError(_("cannot switch to post-copy: %1$s"), virGetLastErrorMessage());
            else if (o->verbose)
                fprintf(stderr, _("\nvirt-rdma: switching to post-copy\n"));
        }
        if (vrmInterrupted) {
            vrmInterrupted = 0;
            fprintf(stderr, _("\nvirt-rdma: aborting the migration\n"));
            if (virDomainAbortJob(run->dom) < 0)
                vrmCliError(_("cannot abort the migration: %1$s"), virGetLastErrorMessage());
        }
        if (o->timeout && !timedOut &&
            g_get_monotonic_time() - start >= (gint64)o->timeout * G_USEC_PER_SEC) {
            timedOut = true;
            if (o->timeoutPostcopy && !switched) {
                switched = true;
                if (o->verbose)
                    fprintf(stderr, _("\nvirt-rdma: migration exceeded %1$d s, switching to post-copy\n"),
                            o->timeout);
                if (virDomainMigrateStartPostCopy(run->dom, 0) < 0)
                    vrmCliError(_("cannot switch to post-copy: %1$s"), virGetLastErrorMessage());
            } else if (!o->timeoutPostcopy) {
                if (o->verbose)
                    fprintf(stderr, _("\nvirt-rdma: migration exceeded %1$d s, suspending the guest\n"),
                            o->timeout);
                if (virDomainSuspend(run->dom) < 0)
                    vrmCliError(_("cannot suspend the guest: %1$s"), virGetLastErrorMessage());
            }
        }
        if (o->verbose && !g_atomic_int_get(&run->done))
            vrmPrintProgress(run->dom, false);
    }
}

static int
vrmMigrateRunIt(vrmMigrateRun *run, const vrmMigrateOptions *o)
{
    GThread *worker;

    signal(SIGINT, vrmOnSigint);
    worker = g_thread_new("migrate", vrmMigrateWorker, run);
    vrmMigrateMonitor(run, o);
    g_thread_join(worker);
    signal(SIGINT, SIG_DFL);
    if (run->result < 0) {
        if (o->verbose)
            fprintf(stderr, "\n");
        vrmCliError("%s", run->error);
        g_free(run->error);
        return 1;
    }
    if (o->verbose) {
        vrmPrintProgress(run->dom, true);
        vrmPrintFinalJob(run->dom);
    }
    return 0;
}

int
vrmCmdMigrate(int argc, char **argv)
{
    g_auto(vrmMigrateOptions) o = { .parallelConnections = 0 };
    g_autofree GOptionEntry *entries = vrmMigrateEntries(&o);
    g_autoptr(GOptionContext) ctx = g_option_context_new(_("DOMAIN DESTURI - live-migrate a domain over RDMA"));
    g_auto(vrmTypedParams) params = { 0 };
    g_autoptr(virConnect) conn = NULL;
    g_autoptr(virConnect) dconn = NULL;
    g_autoptr(virDomain) dom = NULL;
    vrmMigrateRun run = { 0 };
    GOptionGroup *main;
    unsigned int flags = 0;
    int rc;

    /* a main group of our own: its data reaches the refused options' callback */
    main = g_option_group_new(NULL, NULL, NULL, &o, NULL);
    g_option_group_add_entries(main, entries);
    g_option_group_set_translation_domain(main, GETTEXT_PACKAGE);
    g_option_context_set_main_group(ctx, main);
    g_option_context_set_summary(ctx,
        _("Like virsh migrate, with the migration stream carried over RDMA by virt-rdmad's engines.\n"
          "The RDMA parameters come from the domain's <rdma:migration> metadata; options override them.\n"
          "The same migration with plain virsh: virsh migrate --migrateuri \"$(virt-rdma uri DOMAIN)\" ..."));
    if (!vrmCliParseOptions(ctx, NULL, &argc, &argv))
        return 2;
    if ((rc = vrmMigrateTargets(&o, argc, argv)) != 0 ||
        (rc = vrmMigrateBuild(&o, &flags, &params)) != 0)
        return rc;
    if (!(conn = virConnectOpen(o.connectURI))) {
        vrmCliError("%s", virGetLastErrorMessage());
        return 1;
    }
    if (!(dom = vrmCliLookupDomain(conn, o.domain)))
        return 1;
    if (!(flags & VIR_MIGRATE_PEER2PEER) && !(dconn = virConnectOpen(o.desturi))) {
        vrmCliError(_("cannot connect to the destination '%1$s': %2$s"),
                    o.desturi, virGetLastErrorMessage());
        return 1;
    }
    run.dom = dom;
    run.dconn = dconn;
    run.desturi = o.desturi;
    run.params = params.params;
    run.nparams = params.n;
    run.flags = flags;
    return vrmMigrateRunIt(&run, &o);
}
