/*
 * vrmcontracttest.c: the helper <-> engine contract: the options table and
 * its argv codec, the token pipe, the stats record's writer and its strict
 * parser
 */
#include <config.h>

#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "vrmenginesettings.h"
#include "vrmenginestats.h"
#include "vrmerror.h"
#include "vrmtestmain.h"

/* Decode a NULL-terminated list of arguments (program name added) */
static int
decode(vrmEngineSettings *s, const char *first, ...)
{
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    const char *a;
    va_list ap;

    g_ptr_array_add(args, (char *)"virt-rdma-engine");
    va_start(ap, first);
    for (a = first; a; a = va_arg(ap, const char *))
        g_ptr_array_add(args, (char *)a);
    va_end(ap);
    g_ptr_array_add(args, NULL);
    return vrmEngineSettingsDecode(args->len - 1, (char **)args->pdata, s);
}

static void
testDecodeSource(void)
{
    g_auto(vrmEngineSettings) s = { 0 };

    g_assert_cmpint(decode(&s, "--role", "source", "--listen", "198.18.0.1",
                           "--qemu-listen-fd=5", "--token-fd", "3",
                           "--channels=9", "--chunk-size", "4M", "--pin-all",
                           "--qemu-uid", "64055", "--qemu-pid", "4242",
                           "--domain-uuid", "7b9c3f2e-1d2a-4c5b-8e9f-0a1b2c3d4e5f",
                           "--max-pinned", "1G", NULL), ==, 0);
    g_assert_cmpint(s.role, ==, VRM_ENGINE_ROLE_SOURCE);
    g_assert_cmpstr(s.address, ==, "198.18.0.1");
    g_assert_cmpuint(s.port, ==, 0);            /* the kernel chooses */
    g_assert_cmpint(s.qemuListenFd, ==, 5);
    g_assert_cmpint(s.tokenFd, ==, 3);
    g_assert_cmpuint(s.channels, ==, 9);
    g_assert_cmpuint(s.chunkSize, ==, 4 << 20);
    /* a capability's switch moves it away from its default only */
    g_assert_cmphex(s.caps, ==, VRM_CAP_PIN_ALL | VRM_CAP_WRITE_IMM);
    g_assert_cmpint(s.qemuUid, ==, 64055);
    g_assert_cmpint(s.qemuPid, ==, 4242);
    g_assert_cmpuint(s.maxPinned, ==, 1ull << 30);
    /* defaults that live only in the contract */
    g_assert_cmpuint(s.deadlineConnect, ==, VRM_ENGINE_DEADLINE_CONNECT_DEFAULT);
    g_assert_cmpuint(s.idleTimeout, ==, VRM_ENGINE_IDLE_TIMEOUT_DEFAULT);
    g_assert_cmpuint(s.ringDepth, ==, VRM_RING_DEPTH_DEFAULT);
    g_assert_cmpint(s.statsFd, ==, -1);
}

static void
testDecodeDestination(void)
{
    g_auto(vrmEngineSettings) s = { 0 };

    g_assert_cmpint(decode(&s, "--role=destination", "--connect", "[fd00::1]:18515",
                           "--qemu-path", "/run/virt-rdma/qemu/x/migrate.sock",
                           "--token-fd", "3", "--stats-fd", "4", "--no-write-imm",
                           "--test-fault", "kill:1M", NULL), ==, 0);
    g_assert_cmpstr(s.address, ==, "fd00::1");
    g_assert_cmpuint(s.port, ==, 18515);
    g_assert_cmphex(s.caps, ==, 0);
    g_assert_cmpint(s.fault, ==, VRM_ENGINE_FAULT_KILL);
    g_assert_cmpuint(s.faultBytes, ==, 1 << 20);
}

typedef struct {
    const char *args[14];
    const char *error;          /* a piece of the message */
} vrmBadArgs;

static void
testDecodeErrors(void)
{
    static const vrmBadArgs cases[] = {
        { { "--role", "source", "--listen", "1.2.3.4", "--qemu-path", "/a", NULL },
          "--token-fd" },
        { { "--role", "middle", NULL }, "--role 'middle'" },
        { { "--role", "source", "--bogus", NULL }, "unknown option --bogus" },
        { { "--role", "source", "--connect", "1.2.3.4:5", NULL }, "not for the source role" },
        { { "--role", "destination", "--listen", "1.2.3.4", NULL }, "not for the destination role" },
        { { "--channels", "65", NULL }, "from 1 to 64" },
        { { "--channels", "08", NULL }, "'08' is not a whole number" },
        { { "--chunk-size", "3M", NULL }, "power of two" },
        { { "--chunk-size", "1Q", NULL }, "is not a size" },
        { { "--ring-depth", "1", NULL }, "from 2 to 1024" },
        { { "--pin-all=yes", NULL }, "takes no value" },
        { { "--channels", NULL }, "needs a value" },
        { { "--channels", "2", "--channels", "3", NULL }, "given twice" },
        { { "--role", "destination", "--connect", "1.2.3.4", NULL }, "ADDR:PORT" },
        { { "--role", "destination", "--connect", "host:80", NULL }, "ADDR:PORT" },
        { { "--role", "destination", "--connect", "1.2.3.4:0", NULL }, "from 1 to 65535" },
        { { "--role", "source", "--listen", "1.2.3.4:70000", NULL }, "from 0 to 65535" },
        { { "--domain-uuid", "not-a-uuid", NULL }, "not a valid UUID" },
        { { "--qemu-path", "relative.sock", NULL }, "not a valid PATH" },
        { { "--device", "rxe 0", NULL }, "not a valid NAME" },
        { { "--test-fault", "boom", NULL }, "FAULT or FAULT:BYTES" },
        { { "plain", NULL }, "unexpected argument 'plain'" },
        { { "--role", "source", "--listen", "1.2.3.4", "--token-fd", "3", NULL },
          "one of --qemu-listen-fd and --qemu-path, or --tcp-listen-fd, or both kinds" },
        { { "--role", "source", "--listen", "1.2.3.4", "--token-fd", "3",
            "--qemu-path", "/a", "--qemu-listen-fd", "5", "--tcp-listen-fd", "8", NULL },
          "or both kinds" },
        { { "--role", "source", "--listen", "1.2.3.4", "--token-fd", "3",
            "--tcp-listen-fd", "8", "--disk-channels", "1", "--disk-path", "/d", NULL },
          "does not carry disk copies" },
        { { "--role", "source", "--listen", "1.2.3.4", "--token-fd", "3",
            "--tcp-listen-fd", "3", NULL }, "different descriptors" },
        { { "--role", "source", "--tcp-port-min", "49152", NULL }, "not for the source" },
        { { "--role", "destination", "--connect", "1.2.3.4:1", "--token-fd", "3",
            "--tcp-port-min", "49152", NULL }, "go together" },
        { { "--role", "destination", "--connect", "1.2.3.4:1", "--token-fd", "3",
            "--tcp-port-min", "49215", "--tcp-port-max", "49152", NULL }, "go together" },
        { { "--role", "destination", "--tcp-port-max", "0", NULL }, "from 1 to 65535" },
        { { "--role", "source", "--listen", "1.2.3.4", "--token-fd", "3",
            "--qemu-path", "/a", "--qemu-listen-fd", "5", NULL },
          "or both kinds" },
        { { "--role", "destination", "--connect", "1.2.3.4:1", "--token-fd", "3", NULL },
          "--qemu-path PATH" },
        { { "--role", "destination", "--connect", "1.2.3.4:1", "--token-fd", "3",
            "--stats-fd", "3", "--qemu-path", "/a", NULL }, "different descriptors" },
        { { "--role", "destination", "--connect", "1.2.3.4:1", "--token-fd", "3",
            "--qemu-path", "/a", "--max-pinned", "1M", NULL }, "one channel needs" },
    };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_auto(vrmEngineSettings) s = { 0 };
        g_autoptr(GPtrArray) args = g_ptr_array_new();
        const char *const *a;

        g_ptr_array_add(args, (char *)"virt-rdma-engine");
        for (a = cases[i].args; *a; a++)
            g_ptr_array_add(args, (char *)*a);
        g_ptr_array_add(args, NULL);
        vrmResetLastError();
        g_assert_cmpint(vrmEngineSettingsDecode(args->len - 1, (char **)args->pdata, &s), ==, -1);
        if (!strstr(vrmGetLastErrorMessage(), cases[i].error))
            g_error("case %zu: '%s' does not say '%s'", i, vrmGetLastErrorMessage(),
                    cases[i].error);
        /* one sentence in libvirt's style: lower case start, no final period */
        g_assert_false(g_ascii_isupper(vrmGetLastErrorMessage()[0]));
        g_assert_false(g_str_has_suffix(vrmGetLastErrorMessage(), "."));
    }
}

/* encode -> decode is the identity, for every role and every option */
static void
testRoundTrip(void)
{
    g_auto(vrmEngineSettings) in = { 0 };
    g_auto(vrmEngineSettings) out = { 0 };
    g_auto(GStrv) argv = NULL;
    size_t i;

    vrmEngineSettingsInit(&in);
    in.role = VRM_ENGINE_ROLE_SOURCE;
    in.domainUUID = g_strdup("7b9c3f2e-1d2a-4c5b-8e9f-0a1b2c3d4e5f");
    in.qemuListenFd = 5;
    in.qemuUid = 0;
    in.qemuPid = 77;
    in.address = g_strdup("fe80::1");
    in.port = 0;
    in.channels = 64;
    in.chunkSize = 64 * 1024;
    in.ringDepth = 1024;
    in.caps = VRM_CAP_PIN_ALL;
    in.maxPinned = 123456789012ull;
    in.device = g_strdup("rxe0");
    in.tokenFd = 3;
    in.statsSocket = g_strdup("/run/virt-rdma/engine/job-1.stats");
    in.statsFd = 4;
    in.deadlineConnect = 7;
    in.idleTimeout = 0;
    in.debug = true;
    in.fault = VRM_ENGINE_FAULT_MALFORMED;
    in.faultBytes = 65536;

    argv = vrmEngineSettingsEncode(&in, "/usr/libexec/virt-rdma/virt-rdma-engine");
    /* name and value in two words (a restarted helper finds its engine by
     * its stats socket argument) */
    for (i = 0; argv[i]; i++) {
        if (g_str_equal(argv[i], "--stats-socket"))
            g_assert_cmpstr(argv[i + 1], ==, in.statsSocket);
    }
    g_assert_cmpint(vrmEngineSettingsDecode(g_strv_length(argv), argv, &out), ==, 0);
    g_assert_cmpint(out.role, ==, in.role);
    g_assert_cmpstr(out.domainUUID, ==, in.domainUUID);
    g_assert_cmpint(out.qemuListenFd, ==, 5);
    g_assert_null(out.qemuPath);
    g_assert_cmpint(out.qemuUid, ==, 0);
    g_assert_cmpint(out.qemuPid, ==, 77);
    g_assert_cmpstr(out.address, ==, "fe80::1");
    g_assert_cmpuint(out.port, ==, 0);
    g_assert_cmpuint(out.channels, ==, 64);
    g_assert_cmpuint(out.chunkSize, ==, 65536);
    g_assert_cmpuint(out.ringDepth, ==, 1024);
    g_assert_cmphex(out.caps, ==, VRM_CAP_PIN_ALL);
    g_assert_true(out.debug && !out.verbose);
    g_assert_cmpuint(out.maxPinned, ==, in.maxPinned);
    g_assert_cmpstr(out.device, ==, "rxe0");
    g_assert_cmpint(out.tokenFd, ==, 3);
    g_assert_cmpstr(out.statsSocket, ==, in.statsSocket);
    g_assert_cmpint(out.statsFd, ==, 4);
    g_assert_cmpuint(out.deadlineConnect, ==, 7);
    g_assert_cmpuint(out.idleTimeout, ==, 0);
    g_assert_cmpint(out.fault, ==, VRM_ENGINE_FAULT_MALFORMED);
    g_assert_cmpuint(out.faultBytes, ==, 65536);

    /* the destination, with a port, and defaults left out of argv */
    vrmEngineSettingsClear(&in);
    vrmEngineSettingsClear(&out);
    g_strfreev(g_steal_pointer(&argv));
    in.role = VRM_ENGINE_ROLE_DESTINATION;
    in.address = g_strdup("198.18.0.1");
    in.port = 40000;
    in.qemuPath = g_strdup("/run/x.sock");
    in.tokenFd = 9;
    argv = vrmEngineSettingsEncode(&in, "engine");
    g_assert_cmpuint(g_strv_length(argv), ==, 9);
    g_assert_cmpint(vrmEngineSettingsDecode(g_strv_length(argv), argv, &out), ==, 0);
    g_assert_cmpstr(out.address, ==, "198.18.0.1");
    g_assert_cmpuint(out.port, ==, 40000);
    g_assert_cmpstr(out.qemuPath, ==, "/run/x.sock");
}

static void
testTable(void)
{
    g_autofree char *help = vrmEngineSettingsHelp();
    guint32 caps = 0;
    size_t i;

    for (i = 0; i < vrmEngineOptionCount(); i++) {
        const vrmEngineOption *o = vrmEngineOptionGet(i);
        g_autofree char *flag = g_strdup_printf("--%s", o->name);

        g_assert_nonnull(strstr(help, flag));
        g_assert_true(o->help && *o->help);
        g_assert_true(o->roles != 0);
        if (o->type == VRM_ENGINE_OPT_CAP) {
            const vrmCapabilityInfo *info = vrmCapabilityGetInfo(o->cap);
            g_autofree char *name = g_strdup_printf("%s%s", info->defaultOn ? "no-" : "",
                                                    vrmCapabilityTypeToString(o->cap));

            g_assert_cmpstr(o->name, ==, name);
            g_assert_true(o->offset == offsetof(vrmEngineSettings, caps));
            caps |= info->bit;
        }
    }
    g_assert_null(vrmEngineOptionGet(vrmEngineOptionCount()));
    /* every capability of a migration has its switch */
    g_assert_cmphex(caps, ==, vrmCapabilityMigrationMask());
}

static void
testTokenPipe(void)
{
    vrmToken t, back;
    int fds[2];
    int fd;

    g_assert_cmpint(vrmTokenGenerate(&t), ==, 0);
    g_assert_cmpint((fd = vrmEngineTokenPipe(&t)), >=, 0);
    g_assert_cmpint(vrmEngineTokenRead(fd, &back), ==, 0);
    g_assert_true(vrmTokenEqual(&t, &back));
    /* read closes it */
    g_assert_cmpint(close(fd), ==, -1);

    /* a trailing newline is fine (printf in a shell), anything else is not */
    g_assert_cmpint(pipe(fds), ==, 0);
    g_assert_cmpint(write(fds[1], "00112233445566778899aabbccddeeff\n", 33), ==, 33);
    close(fds[1]);
    g_assert_cmpint(vrmEngineTokenRead(fds[0], &back), ==, 0);

    g_assert_cmpint(pipe(fds), ==, 0);
    g_assert_cmpint(write(fds[1], "00112233445566778899aabbccddeeff00", 34), ==, 34);
    close(fds[1]);
    g_assert_cmpint(vrmEngineTokenRead(fds[0], &back), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "does not hold a token"));

    g_assert_cmpint(pipe(fds), ==, 0);
    g_assert_cmpint(write(fds[1], "00112233445566778899AABBCCDDEEFF", 32), ==, 32);
    close(fds[1]);
    g_assert_cmpint(vrmEngineTokenRead(fds[0], &back), ==, -1);

    g_assert_cmpint(pipe(fds), ==, 0);
    close(fds[1]);
    g_assert_cmpint(vrmEngineTokenRead(fds[0], &back), ==, -1);
}

static void
fillStats(vrmEngineStats *st)
{
    vrmEngineStatsInit(st);
    st->role = VRM_ENGINE_ROLE_DESTINATION;
    st->state = VRM_ENGINE_STATE_FAILED;
    st->error = g_strdup("the peer said \"no\"\n\x1b[31mred\\ é");
    /* (a clean text would be written as it is, backslash included) */
    st->errorCode = VRM_ERR_AUTH;
    st->protocolVersion = 2;
    st->writeImm = true;
    st->channels = 9;
    st->established = 3;
    st->qemuConnections = 2;
    st->rdmaPort = 51234;
    st->chunkSize = 1 << 20;
    st->ringDepth = 4;
    st->pinnedBound = 123456;
    st->elapsedS = 2.5;
    st->dataS = 1.25;
    st->cpuUserS = 0.125;
    st->cpuSystemS = 0.5;
    st->mbps = 99.5;
    st->mbpsAverage = 50.25;
    st->bytesSent = G_MAXUINT64;
    st->bytesReceived = 89;
    st->bytesSpliced = 88;
    st->chunks = 7;
    st->registrationNs = 1000;
    st->pinnedBytes = 65536;
    st->doorbells = 42;
    st->qemuGone = true;
}

static void
testStatsRoundTrip(void)
{
    g_auto(vrmEngineStats) in = { 0 };
    g_auto(vrmEngineStats) out = { 0 };
    g_autofree char *json = NULL;
    size_t i;

    fillStats(&in);
    json = vrmEngineStatsFormat(&in);
    /* one line: the error is sanitised on the way out */
    g_assert_null(strchr(json, '\n'));
    g_assert_null(strchr(json, '\x1b'));
    for (i = 0; i < vrmEngineStatsKeyCount(); i++) {
        g_autofree char *key = g_strdup_printf("\"%s\": ", vrmEngineStatsKeyGet(i)->key);
        g_assert_nonnull(strstr(json, key));
    }
    g_assert_cmpint(vrmEngineStatsParse(json, strlen(json), &out), ==, 0);
    g_assert_cmpint(out.role, ==, VRM_ENGINE_ROLE_DESTINATION);
    g_assert_cmpint(out.state, ==, VRM_ENGINE_STATE_FAILED);
    g_assert_cmpstr(out.error, ==, "the peer said \"no\"\\x0a\\x1b[31mred\\\\ é");
    g_assert_cmpint(out.errorCode, ==, VRM_ERR_AUTH);
    g_assert_cmpuint(out.channels, ==, 9);
    g_assert_cmpuint(out.established, ==, 3);
    g_assert_cmpuint(out.qemuConnections, ==, 2);
    g_assert_cmpuint(out.rdmaPort, ==, 51234);
    g_assert_cmpuint(out.bytesSent, ==, G_MAXUINT64);
    g_assert_cmpuint(out.doorbells, ==, 42);
    g_assert_cmpuint(out.bytesSpliced, ==, 88);
    g_assert_cmpfloat_with_epsilon(out.mbps, 99.5, 1e-9);
    g_assert_cmpfloat_with_epsilon(out.cpuSystemS, 0.5, 1e-9);
    g_assert_true(out.writeImm && !out.pinAll && out.qemuGone);

    /* clean text is written as it is: reading a record back and writing
     * it again gives the same record */
    {
        g_auto(vrmEngineStats) clean = { 0 };
        g_auto(vrmEngineStats) back = { 0 };
        g_autofree char *text = NULL;

        vrmEngineStatsInit(&clean);
        clean.error = g_strdup("a\\b \\x41 é");
        text = vrmEngineStatsFormat(&clean);
        g_assert_cmpint(vrmEngineStatsParse(text, strlen(text), &back), ==, 0);
        g_assert_cmpstr(back.error, ==, clean.error);
    }

    /* the order of the keys does not matter; unknown keys are skipped */
    {
        const char *nested =
            " {\"qemu-connections\":1,\"future-key\":[],\"x\":1}";
        const char *reordered =
            "{\"bytes-received\": 5, \"bytes-sent\": 6, \"rdma-port\": 0,"
            " \"qemu-connections\": 1, \"established\": 1, \"channels\": 2,"
            " \"error-code\": \"ok\", \"error\": null, \"state\": \"running\","
            " \"role\": \"source\", \"a-newer-key\": \"x\\u00e9\", \"b\": 1.5e3,"
            " \"c\": true, \"d\": null}\n";
        g_auto(vrmEngineStats) st = { 0 };

        g_assert_cmpint(vrmEngineStatsParse(reordered, strlen(reordered), &st), ==, 0);
        g_assert_cmpuint(st.bytesSent, ==, 6);
        g_assert_null(st.error);
        g_assert_cmpint(st.errorCode, ==, VRM_ERR_OK);
        /* nested values are not a flat record */
        g_assert_cmpint(vrmEngineStatsParse(nested, strlen(nested), &st), ==, -1);
    }
}

static void
testStatsStrict(void)
{
    static const char *const bad[] = {
        "",
        "[]",
        "{",
        "{}",                                              /* required keys */
        "{\"state\": \"running\"}",
        "{\"state\": \"running\",}",
        "{\"state\" \"running\"}",
        "{'state': 'running'}",
        "{\"state\": \"sleeping\"}",
        "{\"state\": \"running\", \"state\": \"failed\"}",
        "{\"bytes-sent\": -1}",
        "{\"bytes-sent\": 1.0}",
        "{\"bytes-sent\": 18446744073709551616}",
        "{\"bytes-sent\": 01}",
        "{\"mbps\": NaN}",
        "{\"mbps\": 1e999}",
        "{\"mbps\": -0.5}",
        "{\"error\": \"a\nb\"}",
        "{\"error\": \"a\\nb\"}",
        "{\"error\": \"\\u001b[31m\"}",
        "{\"error\": \"\\u0000\"}",
        "{\"error\": \"\\ud800\"}",
        "{\"error\": \"\\x41\"}",
        "{\"error\": \"\xc3\x28\"}",
        "{\"qemu-gone\": 1}",
        "{\"error-code\": \"fatal\"}",
        "{} trailing",
        "{}{}",
    };
    g_autofree char *huge = NULL;
    g_autofree char *longstr = NULL;
    g_auto(vrmEngineStats) st = { 0 };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(bad); i++) {
        vrmResetLastError();
        if (vrmEngineStatsParse(bad[i], strlen(bad[i]), &st) != -1)
            g_error("case %zu (%s) was accepted", i, bad[i]);
        g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_PROTOCOL);
        g_assert_null(st.error);
    }
    /* a NUL inside */
    g_assert_cmpint(vrmEngineStatsParse("{\0}", 3, &st), ==, -1);
    /* a record longer than 64 KiB */
    huge = g_strnfill(VRM_ENGINE_STATS_MAX + 1, ' ');
    huge[0] = '{';
    g_assert_cmpint(vrmEngineStatsParse(huge, strlen(huge), &st), ==, -1);
    /* a string longer than 4 KiB */
    longstr = g_strdup_printf("{\"error\": \"%0*d\"}", VRM_ENGINE_STATS_STRING_MAX + 1, 0);
    g_assert_cmpint(vrmEngineStatsParse(longstr, strlen(longstr), &st), ==, -1);
}

static const vrmTestFunc testFuncs[] = {
    { "/contract/settings/source", testDecodeSource },
    { "/contract/settings/destination", testDecodeDestination },
    { "/contract/settings/errors", testDecodeErrors },
    { "/contract/settings/round-trip", testRoundTrip },
    { "/contract/settings/table", testTable },
    { "/contract/token-pipe", testTokenPipe },
    { "/contract/stats/round-trip", testStatsRoundTrip },
    { "/contract/stats/strict", testStatsStrict },
};

VRM_TEST_MAIN(NULL, testFuncs)
