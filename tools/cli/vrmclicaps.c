/*
 * vrmclicaps.c: virt-rdma capabilities [--json]
 *
 * What this host offers for RDMA migration, as virt-rdmad sees it (it is
 * asked: <host-info>): its RDMA devices and ports, its limits, its own
 * locked-memory limit and the budget it has left, the pinned memory of a
 * migration at the real defaults, the engine user, the helpers' channel
 * and its credentials, libvirt; plus what only this command looks at, on
 * this host: the libvirt hook, and whether a QEMU that is not root may
 * receive post-copy migrations (userfaultfd). Then a verdict with every
 * reason it is "no", each with advice that works when typed. "Not allowed
 * to use the helper" and "the helper is not running" are told apart.
 */
#include <config.h>

#include <grp.h>
#include <netdb.h>
#include <stdio.h>
#include <arpa/inet.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vrmcli.h"
#include "vrmclihostcheck.h"
#include "vrmclijobfmt.h"
#include "vrmcapability.h"
#include "vrmenum.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmhelperclient.h"

#define VRM_HOOK_PATH VRM_LIBVIRT_HOOK_DIR "/virt-rdma"
#define VRM_CAPS_HELPER_TIMEOUT_MS 5000
/* above [peers] timeout's default (10 s) and a handshake's 5 s */
#define VRM_CAPS_PEER_TIMEOUT_MS 30000
#define VRM_CAPS_USERFAULTFD_SYSCTL "/proc/sys/vm/unprivileged_userfaultfd"

/* Who may open a userfaultfd, which the destination QEMU of a post-copy
 * migration needs: Debian's default leaves QEMU as libvirt-qemu without
 * it, and libvirt 9.0 does not give QEMU /dev/userfaultfd instead */
typedef enum {
    VRM_CAPS_USERFAULTFD_UNKNOWN,       /* no such sysctl, or unreadable */
    VRM_CAPS_USERFAULTFD_PRIVILEGED,    /* 0: root (CAP_SYS_PTRACE) only */
    VRM_CAPS_USERFAULTFD_ANY_USER,      /* 1 */
} vrmCapsUserfaultfd;

/* Why this host cannot migrate: a stable code for scripts ("code" in
 * --json) beside the translated message with its advice */
typedef enum {
    VRM_CAPS_REASON_HOOK_MISSING,
    VRM_CAPS_REASON_HOOK_NOT_LOADED,
    VRM_CAPS_REASON_APPARMOR,
    VRM_CAPS_REASON_PEER_CHECK,
    VRM_CAPS_REASON_ACCESS_DENIED,
    VRM_CAPS_REASON_HELPER_DOWN,
    VRM_CAPS_REASON_NO_DEVICE,
    VRM_CAPS_REASON_NO_ACTIVE_PORT,
    VRM_CAPS_REASON_PEER_CHANNEL,
    VRM_CAPS_REASON_LIBVIRT,
    VRM_CAPS_REASON_ENGINE,
    VRM_CAPS_REASON_MEMLOCK,
    VRM_CAPS_REASON_PINNED_BUDGET,

    VRM_CAPS_REASON_LAST
} vrmCapsReasonCode;
VRM_ENUM_DECL(vrmCapsReasonCode);
VRM_ENUM_IMPL(vrmCapsReasonCode, VRM_CAPS_REASON_LAST,
              "hook-missing", "hook-not-loaded", "apparmor", "peer-check",
              "access-denied", "helper-down", "no-device", "no-active-port",
              "peer-channel", "libvirt", "engine", "memlock", "pinned-budget");

typedef struct {
    vrmCapsReasonCode code;
    char *message;
} vrmCapsReason;

static void
vrmCapsReasonFree(gpointer opaque)
{
    vrmCapsReason *r = opaque;

    g_free(r->message);
    g_free(r);
}

typedef struct {
    char *socketPath;
    vrmHostInfo *info;              /* NULL: the helper did not answer */
    int errorCode;                  /* why not */
    char *error;
    bool hook;
    vrmHostCheck hookLoaded;        /* did libvirt's daemon start after it? */
    char *hookDetail;
    vrmHostCheck apparmor;          /* does QEMU's profile include our rule? */
    char *apparmorDetail;
    /* --peer HOST: the helpers' channel with that host's helper */
    char *peerHost;
    char *peerAddress;              /* what HOST resolved to, NULL: nothing */
    bool peerOk;
    char *peerError;
    vrmCapsUserfaultfd userfaultfd;
    GPtrArray *reasons;             /* vrmCapsReason: why this host cannot migrate */
} vrmCaps;

static void
vrmCapsClear(vrmCaps *c)
{
    g_free(c->socketPath);
    vrmHostInfoFree(c->info);
    g_free(c->error);
    g_free(c->hookDetail);
    g_free(c->apparmorDetail);
    g_free(c->peerHost);
    g_free(c->peerAddress);
    g_free(c->peerError);
    if (c->reasons)
        g_ptr_array_unref(c->reasons);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(vrmCaps, vrmCapsClear);

static void
vrmCapsAsk(vrmCaps *c)
{
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_HOST_INFO);
    g_autoptr(vrmControlMessage) reply = NULL;

    c->socketPath = vrmHelperSocketPath();
    if ((reply = vrmHelperClientCall(c->socketPath, req, VRM_CAPS_HELPER_TIMEOUT_MS)) &&
        vrmHelperReplyCheck(reply) == 0 && reply->hostInfo) {
        c->info = g_steal_pointer(&reply->hostInfo);
        return;
    }
    c->errorCode = vrmGetLastErrorCode();
    c->error = g_strdup(vrmGetLastErrorMessage());
}

/* --peer: @c->peerHost's address, then the helper checks the channel */
static void
vrmCapsCheckPeer(vrmCaps *c)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
    struct addrinfo *ai = NULL;
    char addr[INET6_ADDRSTRLEN];
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_PEER_CHECK);
    g_autoptr(vrmControlMessage) reply = NULL;
    int rc;

    if ((rc = getaddrinfo(c->peerHost, NULL, &hints, &ai)) != 0) {
        c->peerError = g_strdup_printf(_("cannot resolve %1$s: %2$s"), c->peerHost,
                                       gai_strerror(rc));
        return;
    }
    rc = getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, sizeof(addr), NULL, 0, NI_NUMERICHOST);
    freeaddrinfo(ai);
    if (rc != 0) {
        c->peerError = g_strdup_printf(_("cannot resolve %1$s: %2$s"), c->peerHost,
                                       gai_strerror(rc));
        return;
    }
    c->peerAddress = g_strdup(addr);
    req->peerHost = g_strdup(c->peerHost);
    req->peerAddress = g_strdup(addr);
    /* the helper's handshake has its own deadline ([peers] timeout) */
    if (!(reply = vrmHelperClientCall(c->socketPath, req, VRM_CAPS_PEER_TIMEOUT_MS)) ||
        vrmHelperReplyCheck(reply) < 0) {
        c->peerError = g_strdup(vrmGetLastErrorMessage());
        return;
    }
    c->peerOk = true;
}

static void
vrmCapsAddReason(vrmCaps *c, vrmCapsReasonCode code, char *message)
{
    vrmCapsReason *r = g_new0(vrmCapsReason, 1);

    r->code = code;
    r->message = message;
    g_ptr_array_add(c->reasons, r);
}

/* Every reason this host cannot migrate, with what to type */
/* The access group: the control socket's group (what the kernel checks),
 * else the default */
static const char *
vrmCapsAccessGroup(const vrmCaps *c)
{
    struct stat st;
    struct group *gr;

    if (stat(c->socketPath, &st) == 0 && st.st_gid != 0 && (gr = getgrgid(st.st_gid)))
        return gr->gr_name;
    return VRM_HELPER_DEFAULT_GROUP;
}

static vrmCapsUserfaultfd
vrmCapsReadUserfaultfd(void)
{
    g_autofree char *value = NULL;

    if (!g_file_get_contents(VRM_CAPS_USERFAULTFD_SYSCTL, &value, NULL, NULL))
        return VRM_CAPS_USERFAULTFD_UNKNOWN;
    g_strstrip(value);
    if (g_str_equal(value, "0"))
        return VRM_CAPS_USERFAULTFD_PRIVILEGED;
    if (g_str_equal(value, "1"))
        return VRM_CAPS_USERFAULTFD_ANY_USER;
    return VRM_CAPS_USERFAULTFD_UNKNOWN;
}

static void
vrmCapsVerdict(vrmCaps *c)
{
    const vrmHostInfo *i = c->info;
    unsigned int active = 0;
    size_t k;

    c->hook = access(VRM_HOOK_PATH, X_OK) == 0;
    /* not a reason: only post-copy needs it, and QEMU may run as root */
    c->userfaultfd = vrmCapsReadUserfaultfd();
    if (!c->hook)
        vrmCapsAddReason(c, VRM_CAPS_REASON_HOOK_MISSING,
                         g_strdup_printf(_("the libvirt hook is not installed at %1$s: this host cannot receive migrations until it is (then restart libvirtd)"),
                                         VRM_HOOK_PATH));
    /* the two manual steps an install needs besides the hook itself */
    c->hookLoaded = vrmHostCheckHookLoaded("", VRM_HOOK_PATH, &c->hookDetail);
    if (c->hookLoaded == VRM_HOST_CHECK_PROBLEM)
        vrmCapsAddReason(c, VRM_CAPS_REASON_HOOK_NOT_LOADED,
                         g_strdup_printf(_("libvirt does not run the hook yet: %1$s"),
                                         c->hookDetail));
    c->apparmor = vrmHostCheckAppArmor("", &c->apparmorDetail);
    if (c->apparmor == VRM_HOST_CHECK_PROBLEM)
        vrmCapsAddReason(c, VRM_CAPS_REASON_APPARMOR,
                         g_strdup(c->apparmorDetail));
    if (c->peerHost && i) {
        vrmCapsCheckPeer(c);
        if (!c->peerOk)
            vrmCapsAddReason(c, VRM_CAPS_REASON_PEER_CHECK,
                             g_strdup_printf(_("the helpers' channel with %1$s does not work: %2$s"),
                                             c->peerHost, c->peerError));
    }
    if (!i) {
        if (c->errorCode == VRM_ERR_AUTH)
            vrmCapsAddReason(c, VRM_CAPS_REASON_ACCESS_DENIED,
                             g_strdup_printf(_("you may not use virt-rdmad: add yourself to its access group (adduser %1$s %2$s), then log in again; or run this as root"),
                                             g_get_user_name(), vrmCapsAccessGroup(c)));
        else
            vrmCapsAddReason(c, VRM_CAPS_REASON_HELPER_DOWN,
                             g_strdup(_("virt-rdmad is not running on this host: start it with 'systemctl start virt-rdmad.socket virt-rdmad' (or 'virt-rdmad -v' in a terminal)")));
        return;
    }
    for (k = 0; k < i->devices->len; k++) {
        const vrmHostInfoDevice *dev = g_ptr_array_index(i->devices, k);

        if (g_str_equal(dev->state, "ACTIVE"))
            active++;
    }
    if (i->devices->len == 0)
        vrmCapsAddReason(c, VRM_CAPS_REASON_NO_DEVICE,
                         g_strdup(_("no RDMA device: load the driver of the adapter (for Soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IFACE)")));
    else if (!active)
        vrmCapsAddReason(c, VRM_CAPS_REASON_NO_ACTIVE_PORT,
                         g_strdup(_("no RDMA port is ACTIVE: check the cable, the subnet manager (InfiniBand) or the network interface (RoCE)")));
    if (i->peerStatus != VRM_HOST_INFO_STATUS_OK)
        vrmCapsAddReason(c, VRM_CAPS_REASON_PEER_CHANNEL,
                         g_strdup_printf(_("the helpers' channel does not work: %1$s; for a cluster key: virt-rdmad --generate-key %2$s on one host, copy the file (mode 0600) to every host, then systemctl restart virt-rdmad"),
                                         i->peerMessage ? i->peerMessage : "",
                                         VRM_SYSCONFDIR "/cluster.key"));
    if (i->libvirtStatus != VRM_HOST_INFO_STATUS_OK)
        vrmCapsAddReason(c, VRM_CAPS_REASON_LIBVIRT,
                         g_strdup_printf(_("virt-rdmad cannot reach libvirt at %1$s: %2$s; start libvirtd, or set [libvirt] uri"),
                                         i->libvirtURI, i->libvirtMessage ? i->libvirtMessage : ""));
    if (i->engineStatus != VRM_HOST_INFO_STATUS_OK)
        vrmCapsAddReason(c, VRM_CAPS_REASON_ENGINE,
                         g_strdup(i->engineMessage ? i->engineMessage : ""));
    if (!i->memlockUnlimited && !i->memlockCanRaise &&
        i->memlockLimit < i->pinnedOneChannel)
        vrmCapsAddReason(c, VRM_CAPS_REASON_MEMLOCK,
                         g_strdup_printf(_("virt-rdmad's locked-memory limit (%1$llu bytes) is below the %2$llu one channel pins: set LimitMEMLOCK=infinity in its unit"),
                                         i->memlockLimit, i->pinnedOneChannel));
    if (i->budget < i->pinnedOneChannel)
        vrmCapsAddReason(c, VRM_CAPS_REASON_PINNED_BUDGET,
                         g_strdup_printf(_("the pinned-memory budget ([limits] max-pinned-bytes = %1$llu) is below the %2$llu bytes one channel pins: raise it in %3$s"),
                                         i->budget, i->pinnedOneChannel,
                                         vrmHelperConfigDefaultPath()));
}

static void
vrmCapsPrintText(const vrmCaps *c)
{
    const vrmHostInfo *i = c->info;
    g_autofree char *budget = NULL;
    g_autofree char *used = NULL;
    g_autofree char *one = NULL;
    g_autofree char *largest = NULL;
    g_autofree char *caps = vrmCapabilityFormat(vrmCapabilityMigrationMask());
    size_t k;

    /* message-style: exempt-begin: a report in virsh's "Label:   value" form */
    if (!i) {
        printf(_("virt-rdmad:        no answer at %1$s: %2$s\n"), c->socketPath, c->error);
    } else {
        budget = vrmCliPrettySize(i->budget);
        used = vrmCliPrettySize(i->pinnedUsed);
        one = vrmCliPrettySize(i->pinnedOneChannel);
        largest = vrmCliPrettySize(i->pinnedLargestOffer);
        printf(_("virt-rdmad:        %1$s (version %2$s, uid %3$u), %4$u of %5$u jobs running\n"),
               c->socketPath, i->version, i->uid, i->runningJobs, i->maxJobs);
        printf(_("RDMA devices:\n"));
        if (i->devices->len == 0)
            printf(_("  none\n"));
        for (k = 0; k < i->devices->len; k++) {
            const vrmHostInfoDevice *dev = g_ptr_array_index(i->devices, k);

            printf(_("  %1$s port %2$u: %3$s, address %4$s\n"), dev->name, dev->port,
                   dev->state, dev->address ? dev->address : _("none"));
        }
        printf(_("Pinned memory:     budget %1$s, %2$s in use; one channel at the defaults pins %3$s, the largest offer (%4$u channels) %5$s\n"),
               budget, used, one, i->maxChannels, largest);
        if (i->memlockUnlimited)
            printf(_("Memlock limit:     unlimited (virt-rdmad's; each engine gets exactly its job's)\n"));
        else
            printf(_("Memlock limit:     %1$llu bytes (virt-rdmad's%2$s; each engine gets exactly its job's)\n"),
                   i->memlockLimit, i->memlockCanRaise ? _(", it may raise it") : "");
        printf(_("Engine user:       %1$s: %2$s\n"), i->engineUser,
               i->engineMessage ? i->engineMessage : vrmHostInfoStatusTypeToString(i->engineStatus));
        /* the helper's message names the method itself */
        if (i->peerMessage)
            printf(_("Helpers' channel:  %1$s\n"), i->peerMessage);
        else
            printf(_("Helpers' channel:  %1$s: %2$s\n"), i->peerAuth,
                   vrmHostInfoStatusTypeToString(i->peerStatus));
        if (i->locator)
            printf(_("Locator:           %1$s %2$s port %3$u\n"), i->locator->host,
                   i->locator->address, i->locator->port);
        printf(_("libvirt:           %1$s: %2$s\n"), i->libvirtURI,
               i->libvirtStatus == VRM_HOST_INFO_STATUS_OK ? _("connected") :
               (i->libvirtMessage ? i->libvirtMessage : _("not connected")));
        if (i->transparentMode)
            printf(_("Transparent mode:  %1$s: %2$s\n"), i->transparentMode,
                   i->transparentStatus == VRM_HOST_INFO_STATUS_OK ?
                   _("on (libvirt's TCP migrations of these domains go over RDMA)") :
                   i->transparentStatus == VRM_HOST_INFO_STATUS_OFF ?
                   _("off (only migrations to the per-domain path go over RDMA)") :
                   i->transparentMessage ? i->transparentMessage : _("not working"));
    }
    printf(_("libvirt hook:      %1$s %2$s\n"), VRM_HOOK_PATH,
           c->hook ? _("installed") : _("missing"));
    if (c->hookDetail)
        printf("                   %s\n", c->hookDetail);
    printf(_("AppArmor:          %1$s\n"), c->apparmorDetail);
    if (c->peerOk)
        printf(_("Peer %1$s:  %2$s port reached both ways, TLS handshakes done (the same cluster key or CA)\n"),
               c->peerHost, c->peerAddress);
    else if (c->peerHost)
        printf(_("Peer %1$s:  %2$s\n"), c->peerHost,
               c->peerError ? c->peerError : _("not checked: virt-rdmad did not answer"));
    switch (c->userfaultfd) {
    case VRM_CAPS_USERFAULTFD_ANY_USER:
        printf(_("Post-copy:         may be received (vm.unprivileged_userfaultfd = 1: QEMU opens a userfaultfd as any user)\n"));
        break;
    case VRM_CAPS_USERFAULTFD_PRIVILEGED:
        printf(_("Post-copy:         only by a QEMU that runs as root (vm.unprivileged_userfaultfd = 0; libvirt 9.0 does not give QEMU /dev/userfaultfd); to receive post-copy migrations: sysctl -w vm.unprivileged_userfaultfd=1\n"));
        break;
    case VRM_CAPS_USERFAULTFD_UNKNOWN:
        printf(_("Post-copy:         unknown (%1$s cannot be read)\n"), VRM_CAPS_USERFAULTFD_SYSCTL);
        break;
    }
    printf(_("Protocol:          version %1$d, capabilities %2$s\n"),
           VRM_PROTOCOL_VERSION, caps);
    if (c->reasons->len == 0) {
        printf(_("\nThis host can migrate over RDMA.\n"));
        return;
    }
    printf(_("\nThis host cannot migrate over RDMA:\n"));
    /* message-style: exempt-end */
    for (k = 0; k < c->reasons->len; k++)
        printf("  - %s\n", ((vrmCapsReason *)g_ptr_array_index(c->reasons, k))->message);
}

/* The helper's own view, as "helper" (docs/json.rst) */
static void
vrmCapsPrintJSONHelper(JsonBuilder *b, const vrmHostInfo *i)
{
    size_t k;

    json_builder_begin_object(b);
    vrmCliJsonString(b, "version", i->version);
    vrmCliJsonUInt(b, "uid", i->uid);
    vrmCliJsonUInt(b, "jobs-running", i->runningJobs);
    vrmCliJsonUInt(b, "jobs-max", i->maxJobs);
    vrmCliJsonUInt(b, "max-channels", i->maxChannels);
    vrmCliJsonUInt(b, "max-ring-depth", i->maxRingDepth);
    vrmCliJsonUInt(b, "pinned-budget", i->budget);
    vrmCliJsonUInt(b, "pinned-used", i->pinnedUsed);
    vrmCliJsonUInt(b, "pinned-one-channel", i->pinnedOneChannel);
    vrmCliJsonUInt(b, "pinned-largest-offer", i->pinnedLargestOffer);
    if (i->memlockUnlimited)
        vrmCliJsonNull(b, "memlock-limit");
    else
        vrmCliJsonUInt(b, "memlock-limit", i->memlockLimit);
    vrmCliJsonString(b, "engine-user", i->engineUser);
    vrmCliJsonString(b, "engine-status", vrmHostInfoStatusTypeToString(i->engineStatus));
    vrmCliJsonString(b, "peer-auth", i->peerAuth);
    vrmCliJsonString(b, "peer-status", vrmHostInfoStatusTypeToString(i->peerStatus));
    vrmCliJsonString(b, "peer-message", i->peerMessage);
    vrmCliJsonString(b, "locator-host", i->locator ? i->locator->host : NULL);
    vrmCliJsonString(b, "locator-address", i->locator ? i->locator->address : NULL);
    vrmCliJsonUInt(b, "locator-port", i->locator ? i->locator->port : 0);
    vrmCliJsonString(b, "libvirt-uri", i->libvirtURI);
    vrmCliJsonString(b, "libvirt-status", vrmHostInfoStatusTypeToString(i->libvirtStatus));
    vrmCliJsonString(b, "transparent-mode", i->transparentMode);
    vrmCliJsonString(b, "transparent-status", i->transparentMode ?
                     vrmHostInfoStatusTypeToString(i->transparentStatus) : NULL);
    vrmCliJsonString(b, "transparent-message", i->transparentMessage);
    json_builder_set_member_name(b, "devices");
    json_builder_begin_array(b);
    for (k = 0; k < i->devices->len; k++) {
        const vrmHostInfoDevice *dev = g_ptr_array_index(i->devices, k);

        json_builder_begin_object(b);
        vrmCliJsonString(b, "name", dev->name);
        vrmCliJsonUInt(b, "port", dev->port);
        vrmCliJsonString(b, "state", dev->state);
        vrmCliJsonString(b, "address", dev->address);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

static void
vrmCapsPrintJSON(const vrmCaps *c)
{
    JsonBuilder *b = vrmCliJsonNew();
    g_autofree char *text = NULL;
    size_t k;

    vrmCliJsonBool(b, "can-migrate", c->reasons->len == 0);
    vrmCliJsonString(b, "helper-socket", c->socketPath);
    vrmCliJsonString(b, "helper-error", c->info ? NULL : c->error);
    vrmCliJsonBool(b, "helper-denied", !c->info && c->errorCode == VRM_ERR_AUTH);
    vrmCliJsonBool(b, "hook-installed", c->hook);
    vrmCliJsonUInt(b, "protocol-version", VRM_PROTOCOL_VERSION);
    vrmCliJsonString(b, "hook-loaded", vrmHostCheckName(c->hookLoaded));
    vrmCliJsonString(b, "hook-detail", c->hookDetail);
    vrmCliJsonString(b, "apparmor-rule", vrmHostCheckName(c->apparmor));
    vrmCliJsonString(b, "apparmor-detail", c->apparmorDetail);
    if (c->peerHost) {
        json_builder_set_member_name(b, "peer");
        json_builder_begin_object(b);
        vrmCliJsonString(b, "host", c->peerHost);
        vrmCliJsonString(b, "address", c->peerAddress);
        vrmCliJsonBool(b, "ok", c->peerOk);
        vrmCliJsonString(b, "error", c->peerError);
        json_builder_end_object(b);
    }
    /* the sysctl's value, null when unknown */
    if (c->userfaultfd == VRM_CAPS_USERFAULTFD_UNKNOWN)
        vrmCliJsonNull(b, "unprivileged-userfaultfd");
    else
        vrmCliJsonUInt(b, "unprivileged-userfaultfd",
                       c->userfaultfd == VRM_CAPS_USERFAULTFD_ANY_USER);
    json_builder_set_member_name(b, "helper");
    if (c->info)
        vrmCapsPrintJSONHelper(b, c->info);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "reasons");
    json_builder_begin_array(b);
    for (k = 0; k < c->reasons->len; k++) {
        const vrmCapsReason *r = g_ptr_array_index(c->reasons, k);

        vrmCliJsonReason(b, NULL, vrmCapsReasonCodeTypeToString(r->code), r->message);
    }
    json_builder_end_array(b);
    text = vrmCliJsonFinish(b);
    fputs(text, stdout);
}

int
vrmCmdCapabilities(int argc, char **argv)
{
    gboolean json = FALSE;
    g_autofree char *peer = NULL;
    GOptionEntry entries[] = {
        { "json", 0, 0, G_OPTION_ARG_NONE, &json, N_("one JSON object on standard output"), NULL },
        { "peer", 0, 0, G_OPTION_ARG_STRING, &peer,
          N_("also check the helpers' channel with HOST's virt-rdmad (root)"), N_("HOST") },
        { NULL, 0, 0, 0, NULL, NULL, NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(_("- show whether this host can migrate over RDMA, as virt-rdmad sees it"));
    g_auto(vrmCaps) c = { 0 };

    if (!vrmCliParseOptions(ctx, entries, &argc, &argv))
        return 2;
    c.reasons = g_ptr_array_new_with_free_func(vrmCapsReasonFree);
    c.peerHost = g_steal_pointer(&peer);
    vrmCapsAsk(&c);
    vrmCapsVerdict(&c);
    if (json)
        vrmCapsPrintJSON(&c);
    else
        vrmCapsPrintText(&c);
    return c.reasons->len ? 1 : 0;
}
