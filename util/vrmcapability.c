/*
 * vrmcapability.c: the capability table
 *
 * One row per capability bit, in the manner of libvirt's
 * qemu_migration_params.c: adding a capability is adding a row.
 */
#include <config.h>

#include <string.h>

#include "vrmcapability.h"
#include "vrmi18n.h"

VRM_ENUM_IMPL(vrmCapability, VRM_CAPABILITY_LAST,
              "pin-all",
              "write-imm",
              "disks",
              "tcp",
);

VRM_ENUM_IMPL(vrmRdmaDefault, VRM_RDMA_DEFAULT_LAST,
              "tagged",
              "all",
              "off",
);

static const vrmCapabilityInfo vrmCapabilityTable[] = {
    {
        .cap = VRM_CAPABILITY_PIN_ALL,
        .bit = VRM_CAP_PIN_ALL,
        .scope = VRM_CAPABILITY_SCOPE_MIGRATION,
        .side = VRM_SIDE_BOTH,
        .defaultOn = false,
        .option = "--rdma-pin-all",
        .help = N_("register every chunk of the rings when the connection is set up, instead of on first use"),
    },
    {
        .cap = VRM_CAPABILITY_WRITE_IMM,
        .bit = VRM_CAP_WRITE_IMM,
        .scope = VRM_CAPABILITY_SCOPE_MIGRATION,
        .side = VRM_SIDE_BOTH,
        .defaultOn = true,
        /* on unless the metadata says <write-imm enabled="no"/>: no
         * option of virt-rdma migrate (there was none behind the name) */
        .option = NULL,
        .help = N_("announce data with RDMA WRITE_WITH_IMM instead of a descriptor SEND"),
    },
    {
        .cap = VRM_CAPABILITY_DISKS,
        .bit = VRM_CAP_DISKS,
        .scope = VRM_CAPABILITY_SCOPE_ENGINE,
        .side = VRM_SIDE_BOTH,
        .defaultOn = false,
        .option = NULL,
        .help = N_("carry QEMU's disk copy (NBD) on channels of its own"),
    },
    {
        .cap = VRM_CAPABILITY_TCP,
        .bit = VRM_CAP_TCP,
        .scope = VRM_CAPABILITY_SCOPE_ENGINE,
        .side = VRM_SIDE_BOTH,
        .defaultOn = false,
        .option = NULL,
        .help = N_("carry QEMU's TCP connections that the source host steered into the engine"),
    },
};
G_STATIC_ASSERT(G_N_ELEMENTS(vrmCapabilityTable) == VRM_CAPABILITY_LAST);

const vrmCapabilityInfo *
vrmCapabilityGetInfo(vrmCapability cap)
{
    if (cap < 0 || cap >= VRM_CAPABILITY_LAST)
        return NULL;
    return &vrmCapabilityTable[cap];
}

/* The bits of the rows that WANT picks */
static guint32
vrmCapabilityMaskOf(bool (*want)(const vrmCapabilityInfo *info, int arg), int arg)
{
    guint32 mask = 0;
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmCapabilityTable); i++) {
        if (want(&vrmCapabilityTable[i], arg))
            mask |= vrmCapabilityTable[i].bit;
    }
    return mask;
}

static bool
vrmCapabilityAny(const vrmCapabilityInfo *info G_GNUC_UNUSED, int arg G_GNUC_UNUSED)
{
    return true;
}

static bool
vrmCapabilityInScope(const vrmCapabilityInfo *info, int scope)
{
    return info->scope == (vrmCapabilityScope)scope;
}

static bool
vrmCapabilityOnByDefault(const vrmCapabilityInfo *info, int arg G_GNUC_UNUSED)
{
    return info->defaultOn;
}

static bool
vrmCapabilityActsOn(const vrmCapabilityInfo *info, int side)
{
    return (info->side & side) != 0;
}

guint32
vrmCapabilityKnownMask(void)
{
    return vrmCapabilityMaskOf(vrmCapabilityAny, 0);
}

guint32
vrmCapabilityMigrationMask(void)
{
    return vrmCapabilityMaskOf(vrmCapabilityInScope, VRM_CAPABILITY_SCOPE_MIGRATION);
}

guint32
vrmCapabilityDefaultMask(void)
{
    return vrmCapabilityMaskOf(vrmCapabilityOnByDefault, 0);
}

guint32
vrmCapabilityIntersect(guint32 source, guint32 destination)
{
    return source & destination & vrmCapabilityKnownMask();
}

guint32
vrmCapabilityForSide(guint32 flags, vrmSide side)
{
    return flags & vrmCapabilityMaskOf(vrmCapabilityActsOn, side);
}

char *
vrmCapabilityFormat(guint32 flags)
{
    GString *buf = g_string_new(NULL);
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(vrmCapabilityTable); i++) {
        if (!(flags & vrmCapabilityTable[i].bit))
            continue;
        if (buf->len)
            g_string_append(buf, ", ");
        g_string_append(buf, vrmCapabilityTypeToString(i));
    }
    if (buf->len == 0)
        g_string_append(buf, _("none"));
    return g_string_free(buf, FALSE);
}

