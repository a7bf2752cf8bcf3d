/*
 * vrmclicaps.c: virt-rdma capabilities
 *
 * What this host offers for RDMA migration: devices and ports with state
 * and link rate, the memlock limit, whether virt-rdmad answers and the
 * libvirt hook is installed; then a verdict with every reason it is "no".
 */
#include <config.h>

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vrmcli.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmhelperclient.h"
#include "vrmnegotiation.h"

#define VRM_HOOK_PATH VRM_LIBVIRT_HOOK_DIR "/virt-rdma"
#define VRM_CAPS_HELPER_TIMEOUT_MS 3000

/* Gbit/s of one lane for ibv_port_attr.active_speed. */
static double
vrmLaneGbps(uint8_t speed)
{
    switch (speed) {
    case 1: return 2.5;     /* SDR */
    case 2: return 5.0;     /* DDR */
    case 4: return 10.0;    /* QDR, FDR10 */
    case 8: return 10.3125; /* FDR10 */
    case 16: return 14.0625;/* FDR */
    case 32: return 25.78125; /* EDR */
    case 64: return 53.125; /* HDR */
    case 128: return 106.25;/* NDR */
    }
    return 0;
}

static unsigned int
vrmWidthLanes(uint8_t width)
{
    switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    }
    return 0;
}

static const char *
vrmPortStateName(enum ibv_port_state s)
{
    switch (s) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    }
    return "?";
}

/* Print devices; returns the number of ACTIVE ports. */
static int
vrmCapsDevices(GPtrArray *reasons)
{
    struct ibv_device **list;
    int n = 0, i, active = 0;

    fputs(_("RDMA devices:\n"), stdout);
    if (!(list = ibv_get_device_list(&n)) || n == 0) {
        fputs(_("  none\n"), stdout);
        g_ptr_array_add(reasons, g_strdup(_("no RDMA device: load the driver of the adapter (for Soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IFACE)")));
        if (list)
            ibv_free_device_list(list);
        return 0;
    }
    for (i = 0; i < n; i++) {
        struct ibv_context *ctx = ibv_open_device(list[i]);
        const char *name = ibv_get_device_name(list[i]);
        struct ibv_device_attr dattr;
        uint8_t p;

        if (!name)
            name = "?";
        if (!ctx || ibv_query_device(ctx, &dattr) != 0) {
            /* TRANSLATORS: after an RDMA device name */
            printf("  %s: %s\n", name, _("cannot be opened"));
            if (ctx)
                ibv_close_device(ctx);
            continue;
        }
        printf("  %s (%s)\n", name,
               ibv_node_type_str(list[i]->node_type));
        for (p = 1; p <= dattr.phys_port_cnt; p++) {
            struct ibv_port_attr pattr;
            double gbps;

            if (ibv_query_port(ctx, p, &pattr) != 0)
                continue;
            gbps = vrmLaneGbps(pattr.active_speed) * vrmWidthLanes(pattr.active_width);
            printf(_("    port %1$u: %2$s, %3$s, link %4$.1f Gbit/s, MTU %5$d\n"),
                   p, vrmPortStateName(pattr.state),
                   pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : "InfiniBand",
                   gbps, 128 << pattr.active_mtu);
            if (pattr.state == IBV_PORT_ACTIVE)
                active++;
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    if (!active)
        g_ptr_array_add(reasons, g_strdup(_("no RDMA port is ACTIVE: check the cable, the subnet manager (InfiniBand) or the network interface (RoCE)")));
    return active;
}

static void
vrmCapsMemlock(GPtrArray *reasons)
{
    struct rlimit rl;
    unsigned long long need = vrmPinnedBytes(VRM_CHANNELS_DEFAULT, VRM_RING_DEPTH_DEFAULT, VRM_CHUNK_SIZE_DEFAULT);

    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
        return;
    if (rl.rlim_cur == RLIM_INFINITY) {
        printf(_("Memlock limit:    unlimited\n"));
        return;
    }
    {
        g_autofree char *have = vrmCliPrettySize(rl.rlim_cur);
        g_autofree char *want = vrmCliPrettySize(need);

        printf(_("Memlock limit:    %1$s (one channel at the defaults pins %2$s)\n"), have, want);
        if (rl.rlim_cur < need && geteuid() != 0)
            g_ptr_array_add(reasons, g_strdup_printf(_("the memlock limit %1$s is below the %2$s one channel pins: raise it (ulimit -l, LimitMEMLOCK= in the unit)"),
                                                     have, want));
    }
}

static void
vrmCapsHelper(GPtrArray *reasons)
{
    g_autoptr(vrmControlMessage) req = vrmControlMessageNew(VRM_CONTROL_JOB_LIST);
    g_autoptr(vrmControlMessage) reply = NULL;
    const char *path = vrmHelperSocketPath();

    reply = vrmHelperClientCall(path, req, VRM_CAPS_HELPER_TIMEOUT_MS);
    if (reply && vrmHelperReplyCheck(reply) == 0) {
        printf(_("virt-rdmad:       running (%1$s, %2$u job(s) known)\n"), path,
               reply->jobs ? reply->jobs->len : 0);
        return;
    }
    printf(_("virt-rdmad:       not answering at %1$s: %2$s\n"), path,
           vrmGetLastErrorMessage());
    g_ptr_array_add(reasons, g_strdup(_("virt-rdmad is not running: start it (systemctl start virt-rdmad, or virt-rdmad --foreground)")));
}

static void
vrmCapsHook(GPtrArray *reasons)
{
    if (access(VRM_HOOK_PATH, X_OK) == 0) {
        printf(_("libvirt hook:     installed (%1$s)\n"), VRM_HOOK_PATH);
        return;
    }
    printf(_("libvirt hook:     not installed at %1$s\n"), VRM_HOOK_PATH);
    g_ptr_array_add(reasons, g_strdup_printf(_("the libvirt hook is not installed at %1$s: this host cannot be a destination until it is (then restart libvirtd)"),
                                             VRM_HOOK_PATH));
}

int
vrmCmdCapabilities(int argc, char **argv)
{
    GOptionEntry entries[] = { { NULL, 0, 0, 0, NULL, NULL, NULL } };
    g_autoptr(GOptionContext) ctx = g_option_context_new(_("- show this host's RDMA migration capabilities"));
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) reasons = g_ptr_array_new_with_free_func(g_free);
    size_t i;

    g_option_context_add_main_entries(ctx, entries, GETTEXT_PACKAGE);
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        vrmCliError("%s", err->message);
        return 2;
    }
    vrmCapsDevices(reasons);
    vrmCapsMemlock(reasons);
    vrmCapsHelper(reasons);
    vrmCapsHook(reasons);
    {
        g_autofree char *caps = vrmCapabilityFormat(vrmCapabilityKnownMask());
        printf(_("Protocol:         version %1$d, capabilities %2$s\n"), 1, caps);
    }

    if (reasons->len == 0) {
        printf(_("\nThis host can migrate over RDMA.\n"));
        return 0;
    }
    printf(_("\nThis host cannot migrate over RDMA:\n"));
    for (i = 0; i < reasons->len; i++)
        printf("  - %s\n", (char *)g_ptr_array_index(reasons, i));
    return 1;
}
