/*
 * vrmmigrateparamstest.c: typed parameters and flags of vrmDomainMigrate3()
 * become the right RDMA overrides, and bad combinations are refused with
 * a sentence that says what to change. No libvirt daemon is involved.
 */
#include <config.h>

#include <stdlib.h>

#include "virt-rdma.h"
#include "vrmerror.h"
#include "vrmlibpriv.h"
#include "vrmnegotiation.h"
#include "vrmtestmain.h"

typedef struct {
    virTypedParameterPtr params;
    int n;
    int max;
} testParams;

static void
testParamsClear(testParams *p)
{
    virTypedParamsFree(p->params, p->n);
    memset(p, 0, sizeof(*p));
}

static void
testOursAndFlags(void)
{
    testParams p = { 0 };
    vrmMigrationParams o = { 0 };
    const char *sock = NULL;

    g_assert_cmpint(virTypedParamsAddULLong(&p.params, &p.n, &p.max,
                                            VRM_MIGRATE_PARAM_CHUNK_SIZE, 4 << 20), ==, 0);
    g_assert_cmpint(virTypedParamsAddString(&p.params, &p.n, &p.max,
                                            VRM_MIGRATE_PARAM_DEVICE, "mlx5_0"), ==, 0);
    g_assert_cmpint(virTypedParamsAddUInt(&p.params, &p.n, &p.max,
                                          VRM_MIGRATE_PARAM_RING_DEPTH, 32), ==, 0);
    g_assert_cmpint(virTypedParamsAddString(&p.params, &p.n, &p.max,
                                            VRM_MIGRATE_PARAM_HELPER_SOCKET, "/tmp/x.sock"), ==, 0);
    g_assert_cmpint(virTypedParamsAddInt(&p.params, &p.n, &p.max,
                                         VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS, 4), ==, 0);
    g_assert_cmpint(vrmMigrateOverridesFromParams(p.params, p.n,
                                                  VIR_MIGRATE_RDMA_PIN_ALL | VIR_MIGRATE_PARALLEL,
                                                  &o, &sock), ==, 0);
    g_assert_cmpuint(o.chunkSize, ==, 4 << 20);
    g_assert_cmpstr(o.device, ==, "mlx5_0");
    g_assert_cmpuint(o.ringDepth, ==, 32);
    g_assert_cmpuint(o.channels, ==, 5);     /* main + 4 multifd */
    g_assert_true(o.capsOn & VRM_CAP_PIN_ALL);
    g_assert_cmpstr(sock, ==, "/tmp/x.sock");
    vrmMigrationParamsClear(&o);
    testParamsClear(&p);
}

static void
testParallelDefault(void)
{
    vrmMigrationParams o = { 0 };
    const char *sock = NULL;

    g_assert_cmpint(vrmMigrateOverridesFromParams(NULL, 0, VIR_MIGRATE_PARALLEL,
                                                  &o, &sock), ==, 0);
    g_assert_cmpuint(o.channels, ==, 3);     /* libvirt's default: 2 connections */
    g_assert_false(o.capsOn & VRM_CAP_PIN_ALL);
    vrmMigrationParamsClear(&o);
}

static void
testRefused(const char *field, unsigned int value, unsigned int flags,
            const char *want)
{
    testParams p = { 0 };
    vrmMigrationParams o = { 0 };
    const char *sock = NULL;

    g_assert_cmpint(virTypedParamsAddUInt(&p.params, &p.n, &p.max, field, value), ==, 0);
    vrmResetLastError();
    g_assert_cmpint(vrmMigrateOverridesFromParams(p.params, p.n, flags, &o, &sock), ==, -1);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==, want);
    vrmMigrationParamsClear(&o);
    testParamsClear(&p);
}

static void
testUnknownParam(void)
{
    testRefused("rdma.chunksize", 1, 0, "unknown migration parameter 'rdma.chunksize'");
}

static void
testChannelsWithoutParallel(void)
{
    testRefused(VRM_MIGRATE_PARAM_CHANNELS, 4, 0,
                "4 RDMA channels need a parallel migration with 3 parallel connections");
}

static void
testChannelsMismatch(void)
{
    testRefused(VRM_MIGRATE_PARAM_CHANNELS, 4, VIR_MIGRATE_PARALLEL,
                "4 RDMA channels were asked for, but 2 parallel connections need 3 (one more for the main stream)");
}

/* A management app's typed parameters are checked as the XML's ranges */
static void
testOutOfRange(void)
{
    testRefused(VRM_MIGRATE_PARAM_CHANNELS, 0, VIR_MIGRATE_PARALLEL,
                "migration parameter 'rdma.channels' is 0; it takes 1 to 64");
    testRefused(VRM_MIGRATE_PARAM_RING_DEPTH, 1, 0,
                "migration parameter 'rdma.ring-depth' is 1; it takes 2 to 1024");
    testRefused(VRM_MIGRATE_PARAM_DEVICE_PORT, 256, 0,
                "migration parameter 'rdma.device-port' is 256; it takes 1 to 255");
}

static const vrmTestFunc testFuncs[] = {
    { "/migrate-params/ours-and-flags", testOursAndFlags },
    { "/migrate-params/parallel-default", testParallelDefault },
    { "/migrate-params/unknown", testUnknownParam },
    { "/migrate-params/channels-without-parallel", testChannelsWithoutParallel },
    { "/migrate-params/channels-mismatch", testChannelsMismatch },
    { "/migrate-params/out-of-range", testOutOfRange },
};

/* GLib's test framework, and libvirt's library set up */
static void
testInit(int *argc, char ***argv)
{
    g_test_init(argc, argv, NULL);
    if (virInitialize() < 0)
        exit(1);
}

VRM_TEST_MAIN(testInit, testFuncs)
