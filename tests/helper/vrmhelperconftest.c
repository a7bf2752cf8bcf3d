/*
 * vrmhelperconftest.c: the helper's key file, valid and invalid fixtures
 *
 * tests/helper/confdata/NAME.conf          loads; its canonical form must
 *                                       equal NAME.out.conf
 * tests/helper/confdata-invalid/NAME.conf  refused with the text of NAME.err
 */
#include <config.h>

#include <string.h>

#include "vrmtestutils.h"
#include "vrmerror.h"
#include "vrmhelperconf.h"
#include "vrmtestmain.h"

static void
testValid(gconstpointer opaque)
{
    const char *path = opaque;
    size_t base = strlen(path) - strlen(".conf");
    g_autofree char *outPath = g_strdup_printf("%.*s.out.conf", (int)base, path);
    g_autoptr(vrmHelperConfig) conf = NULL;
    g_autoptr(vrmHelperConfig) again = NULL;
    g_autofree char *text = NULL;
    g_autofree char *text2 = NULL;

    vrmResetLastError();
    if (!(conf = vrmHelperConfigLoadFile(path)))
        g_error("%s", vrmGetLastErrorMessage());
    {
        /* the default state directory follows the build's prefix */
        g_autoptr(vrmHelperConfig) defaults = vrmHelperConfigNew();

        if (g_strcmp0(conf->stateDir, defaults->stateDir) == 0) {
            g_free(conf->stateDir);
            conf->stateDir = g_strdup("/BUILD-DEFAULT");
        }
        if (g_strcmp0(conf->peerKeyFile, defaults->peerKeyFile) == 0) {
            g_free(conf->peerKeyFile);
            conf->peerKeyFile = g_strdup("/BUILD-DEFAULT/cluster.key");
        }
    }
    text = vrmHelperConfigFormat(conf);
    g_assert_true(vrmTestCompareToFile(text, outPath));
    /* the canonical form loads to the same configuration */
    again = vrmHelperConfigLoadData(text, strlen(text), "canonical");
    g_assert_nonnull(again);
    text2 = vrmHelperConfigFormat(again);
    g_assert_cmpstr(text2, ==, text);
}

static void
testInvalid(gconstpointer opaque)
{
    const char *path = opaque;
    g_autofree char *errPath = vrmTestErrPath(path, ".conf");
    g_autofree char *data = vrmTestReadFile(path);
    g_autofree char *name = g_path_get_basename(path);
    g_autoptr(vrmHelperConfig) conf = NULL;
    g_autofree char *message = NULL;

    vrmResetLastError();
    conf = vrmHelperConfigLoadData(data, strlen(data), name);
    g_assert_null(conf);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_CONFIG);
    message = g_strdup_printf("%s\n", vrmGetLastErrorMessage());
    g_assert_true(vrmTestCompareToFile(message, errPath));
}

static void
testPolicy(void)
{
    const char *data = "[limits]\nmax-channels=8\nmax-pinned-bytes=1073741824\n"
                       "chunk-sizes=65536;1048576\nmax-ring-depth=32\nmax-bandwidth=10000\n";
    g_autoptr(vrmHelperConfig) conf = vrmHelperConfigLoadData(data, strlen(data), "t");
    vrmHostPolicy policy;
    g_autofree char *sizes = NULL;

    g_assert_nonnull(conf);
    vrmHelperConfigToPolicy(conf, &policy);
    g_assert_cmpuint(policy.maxChannels, ==, 8);
    g_assert_cmpuint(policy.maxPinnedBytes, ==, 1073741824);
    g_assert_cmpuint(policy.maxRingDepth, ==, 32);
    g_assert_cmpuint(policy.maxBandwidth, ==, 10000);
    g_assert_cmpuint(policy.minVersion, ==, VRM_PROTOCOL_VERSION_MIN);
    g_assert_cmpuint(policy.capabilities, ==, vrmCapabilityMigrationMask());
    sizes = vrmHostPolicyFormatChunkSizes(&policy);
    g_assert_cmpstr(sizes, ==, "65536 1048576");
}

/* --check-config refuses names that do not exist (issue 12 item 3) */
static void
testCheckSystem(void)
{
    g_autoptr(vrmHelperConfig) conf = vrmHelperConfigNew();

    g_free(conf->group);
    conf->group = g_strdup("vrm-no-such-group");
    vrmResetLastError();
    g_assert_cmpint(vrmHelperConfigCheckSystem(conf), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_CONFIG);
    g_assert_cmpstr(vrmGetLastErrorMessage(), ==,
                    "the access group 'vrm-no-such-group' ([access] group) does not exist: create it (addgroup --system vrm-no-such-group) or name an existing group");

    g_free(conf->group);
    conf->group = g_strdup("root");
    g_free(conf->engineUser);
    conf->engineUser = g_strdup("vrm-no-such-user");
    g_assert_cmpint(vrmHelperConfigCheckSystem(conf), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "'vrm-no-such-user' ([engine] user) does not exist"));

    g_free(conf->engineUser);
    conf->engineUser = g_strdup("root");
    g_assert_cmpint(vrmHelperConfigCheckSystem(conf), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "engines must run as an unprivileged user"));

    g_free(conf->engineUser);
    conf->engineUser = g_strdup("nobody");
    conf->qemuUser = g_strdup("vrm-no-such-qemu");
    g_assert_cmpint(vrmHelperConfigCheckSystem(conf), ==, -1);
    g_clear_pointer(&conf->qemuUser, g_free);
    g_assert_cmpint(vrmHelperConfigCheckSystem(conf), ==, 0);
}

/* The per-domain path: the same string on both hosts, from the UUID */
static void
testDomainPath(void)
{
    g_autoptr(vrmHelperConfig) conf = vrmHelperConfigNew();
    g_autofree char *dir = vrmHelperConfigDomainDir(conf, "7B9C1A2E-3F4D-4E5F-8A6B-0C1D2E3F4A5B");
    g_autofree char *sock = vrmHelperConfigDomainSocket(conf, "7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b");
    g_autofree char *control = vrmHelperConfigSocketPath(conf);

    g_assert_cmpstr(dir, ==, "/run/virt-rdma/qemu/7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b");
    g_assert_cmpstr(sock, ==, "/run/virt-rdma/qemu/7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b/migrate.sock");
    g_assert_cmpstr(control, ==, "/run/virt-rdma/virt-rdmad.sock");
}

static void
addDir(const char *sub, GTestDataFunc func)
{
    static const char *const excludeOut[] = { ".out.conf", NULL };
    g_autofree char *dir = vrmTestDataDir(sub);
    g_autoptr(GPtrArray) files = vrmTestListFiles(dir, ".conf", excludeOut);
    size_t i;

    g_assert_cmpuint(files->len, >, 0);
    for (i = 0; i < files->len; i++) {
        g_autofree char *testPath = g_strdup_printf("/helperconf/%s/%s", sub,
                                                    (const char *)g_ptr_array_index(files, i));

        g_test_add_data_func_full(testPath,
                                  g_build_filename(dir, g_ptr_array_index(files, i), NULL),
                                  func, g_free);
    }
}

static const vrmTestFunc testFuncs[] = {
    { "/helperconf/policy", testPolicy },
    { "/helperconf/check-system", testCheckSystem },
    { "/helperconf/domain-path", testDomainPath },
};

/* The tests' set-up, and a case a configuration file */
static void
testInit(int *argc, char ***argv)
{
    vrmTestInit(argc, argv);
    addDir("helper/confdata", testValid);
    addDir("helper/confdata-invalid", testInvalid);
}

VRM_TEST_MAIN(testInit, testFuncs)
