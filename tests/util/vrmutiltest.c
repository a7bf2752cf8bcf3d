/*
 * vrmutiltest.c: the ground floor: the one grammar for numbers and sizes,
 * names and addresses, the token codec, the pinned-memory formula, and the
 * log's escaping and journal format
 */
#include <config.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "vrmlimits.h"
#include "vrmlog.h"
#include "vrmnetwork.h"
#include "vrmparse.h"
#include "vrmtoken.h"
#include "vrmtestmain.h"

static void
testUInt64(void)
{
    /* out of range, not canonical, or not a number at all */
    static const char *const bad[] = {
        "18446744073709551616", "012", "-1", "+1", " 1", "1 ", "", NULL,
    };
    unsigned long long v = 0;
    size_t i;

    g_assert_true(vrmParseUInt64("0", &v));
    g_assert_cmpuint(v, ==, 0);
    g_assert_true(vrmParseUInt64("18446744073709551615", &v));
    g_assert_cmpuint(v, ==, G_MAXUINT64);
    for (i = 0; i < G_N_ELEMENTS(bad); i++) {
        if (vrmParseUInt64(bad[i], &v))
            g_error("'%s' parsed as %llu", bad[i] ? bad[i] : "(null)", v);
    }
}

static void
testSizes(void)
{
    static const struct {
        const char *text;
        unsigned long long value;
    } good[] = {
        { "4096", 4096 }, { "0", 0 }, { "7B", 7 }, { "7b", 7 },
        { "64K", 64ull << 10 }, { "64k", 64ull << 10 }, { "64KiB", 64ull << 10 },
        { "64kib", 64ull << 10 }, { "64KB", 64000 },
        { "1M", 1ull << 20 }, { "1MiB", 1ull << 20 }, { "1MB", 1000000 },
        { "2G", 2ull << 30 }, { "2GiB", 2ull << 30 }, { "2GB", 2000000000ull },
        { "1T", 1ull << 40 }, { "1TiB", 1ull << 40 }, { "1TB", 1000000000000ull },
        { "0064K", 64ull << 10 },
        { "16777215T", 16777215ull << 40 },
    };
    static const char *const bad[] = {
        "", "K", "1.5M", "-1M", "1 M", "1M ", "1Mi", "1MIBS", "1X", "0x10",
        "16777216T", "18446744073709551616", NULL,
    };
    unsigned long long v;
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(good); i++) {
        v = 0;
        if (!vrmParseSize(good[i].text, &v) || v != good[i].value)
            g_error("'%s' should read as %llu, got %llu", good[i].text,
                    good[i].value, v);
    }
    for (i = 0; i < G_N_ELEMENTS(bad); i++) {
        if (vrmParseSize(bad[i], &v))
            g_error("'%s' should not read as a size (got %llu)",
                    bad[i] ? bad[i] : "(null)", v);
    }
    g_assert_nonnull(strstr(vrmSizeSyntaxHelp(), "KiB"));
}

static void
testNamesAddresses(void)
{
    g_autofree char *longest = g_strnfill(VRM_NAME_MAX, 'a');
    g_autofree char *tooLong = g_strnfill(VRM_NAME_MAX + 1, 'a');

    g_assert_true(vrmValidName("mlx5_0"));
    g_assert_true(vrmValidName("rxe0.1-a"));
    g_assert_true(vrmValidName(longest));
    g_assert_false(vrmValidName(tooLong));
    g_assert_false(vrmValidName(""));
    g_assert_false(vrmValidName("a b"));
    g_assert_false(vrmValidName("a/b"));
    g_assert_false(vrmValidName(NULL));
    g_assert_true(vrmValidAddress("192.0.2.1"));
    g_assert_true(vrmValidAddress("fe80::1"));
    g_assert_true(vrmValidAddress("::ffff:192.0.2.1"));
    g_assert_false(vrmValidAddress("192.0.2"));
    g_assert_false(vrmValidAddress("host.example"));
    g_assert_false(vrmValidAddress(NULL));
}

static void
testToken(void)
{
    static const vrmToken want = { {
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
        0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
    } };
    /* upper case, a digit short or too many, a space, not hex, none */
    static const char *const bad[] = {
        "00112233445566778899AABBCCDDEEFF", "00112233445566778899aabbccddeef",
        "00112233445566778899aabbccddeeff0", "0011223344556677 899aabbccddeeff",
        "g0112233445566778899aabbccddeeff", NULL,
    };
    vrmToken tok, other;
    char hex[VRM_TOKEN_HEX_LEN + 1];
    size_t i;

    g_assert_true(vrmTokenParse("00112233445566778899aabbccddeeff", &tok));
    g_assert_true(vrmTokenEqual(&tok, &want));
    vrmTokenFormat(&tok, hex);
    g_assert_cmpstr(hex, ==, "00112233445566778899aabbccddeeff");
    other = tok;
    other.bytes[15] ^= 1;
    g_assert_false(vrmTokenEqual(&tok, &other));
    for (i = 0; i < G_N_ELEMENTS(bad); i++) {
        if (vrmTokenParse(bad[i], &tok))
            g_error("'%s' parsed as a token", bad[i] ? bad[i] : "(null)");
    }

    g_assert_cmpint(vrmTokenGenerate(&tok), ==, 0);
    g_assert_cmpint(vrmTokenGenerate(&other), ==, 0);
    g_assert_false(vrmTokenEqual(&tok, &other));
    vrmTokenClear(&tok);
    memset(&other, 0, sizeof(other));
    g_assert_true(vrmTokenEqual(&tok, &other));
}

static void
testPinned(void)
{
    /* one channel at the defaults: two rings of 4 x 1 MiB and the control
     * buffers of a 40-slot send queue and a 48-slot receive queue */
    g_assert_cmpuint(vrmPinnedBytes(1, 4, 1 << 20), ==,
                     2ull * 4 * (1 << 20) + (40 + 48) * 4096ull);
    g_assert_cmpuint(vrmPinnedBytes(5, 4, 1 << 20), ==,
                     5 * vrmPinnedBytes(1, 4, 1 << 20));
    g_assert_cmpuint(vrmPinnedBytes(0, 4, 1 << 20), ==, 0);
    /* no overflow at the largest values */
    g_assert_cmpuint(vrmPinnedBytes(VRM_CHANNELS_MAX, VRM_RING_DEPTH_MAX,
                                    VRM_CHUNK_SIZE_MAX), >, 1ull << 42);
    /* the kernel's count: one page more per region (8 chunks, 2 control
     * buffers per channel) */
    g_assert_cmpuint(vrmMemlockBytes(5, 4, 1 << 20, 4096), ==,
                     vrmPinnedBytes(5, 4, 1 << 20) + 5 * 10 * 4096ull);
}

static void
testSanitize(void)
{
    static const struct {
        const char *in;
        const char *out;
    } cases[] = {
        { "plain text", "plain text" },
        { "two\nlines", "two\\x0alines" },
        { "carriage\rreturn", "carriage\\x0dreturn" },
        { "\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m" },
        { "back\\slash", "back\\\\slash" },
        { "bad \xff byte", "bad \\xff byte" },
        { "C1 \xc2\x9b control", "C1 \\x9b control" },
        { "caf\xc3\xa9", "caf\xc3\xa9" },
        { "", "" },
    };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *got = vrmLogSanitize(cases[i].in);

        g_assert_cmpstr(got, ==, cases[i].out);
    }
}

static void
logOneWarning(void)
{
    VRM_WARN("peer said: %s", "evil\nwarning: forged");
}

static void
logOneEvent(void)
{
    const vrmLogField fields[] = {
        { "DOMAIN_UUID", "7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b" },
        { "JOB_ID", "42" },
        { "PEER", "evil\nPRIORITY=0" },
        { "_PID", "1" },              /* trusted fields are the journal's own */
        { "bad name", "x" },
        { "UNSET", NULL },
    };

    vrmLogStructured(VRM_LOG_WARNING, "0123456789abcdef0123456789abcdef",
                     fields, G_N_ELEMENTS(fields), "job %d: %s", 42, "over TCP");
}

/* Log one warning (or what @emit logs) with stderr on a file and return
 * what was written */
static char *
logToFileWith(void (*emit)(void), const char *journalEnv, bool matchStderr)
{
    g_autofree char *path = g_build_filename(g_get_tmp_dir(), "vrmutiltest-log-XXXXXX", NULL);
    int fd = g_mkstemp(path);
    int saved = dup(STDERR_FILENO);
    char *data = NULL;
    struct stat st;

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(fstat(fd, &st), ==, 0);
    dup2(fd, STDERR_FILENO);
    if (matchStderr) {
        g_autofree char *env = g_strdup_printf("%llu:%llu",
                                               (unsigned long long)st.st_dev,
                                               (unsigned long long)st.st_ino);
        g_setenv("JOURNAL_STREAM", env, TRUE);
    } else if (journalEnv) {
        g_setenv("JOURNAL_STREAM", journalEnv, TRUE);
    } else {
        g_unsetenv("JOURNAL_STREAM");
    }
    vrmLogResetJournal();
    emit();
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    g_assert_true(g_file_get_contents(path, &data, NULL, NULL));
    unlink(path);
    g_unsetenv("JOURNAL_STREAM");
    vrmLogResetJournal();
    return data;
}

static char *
logToFile(const char *journalEnv, bool matchStderr)
{
    return logToFileWith(logOneWarning, journalEnv, matchStderr);
}

/*
 * Important events under systemd: one entry of the journal's native
 * protocol with MESSAGE_ID and the job's fields (issue 35 item 4), none
 * of a value able to start a field of its own; with no journal listening,
 * or stderr not the journal, the same line as ever.
 */
static void
testJournalFields(void)
{
    g_autofree char *dir = g_dir_make_tmp("vrmutiltest-journal-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "socket", NULL);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    g_autofree char *onStderr = NULL;
    g_autofree char *fallback = NULL;
    g_autofree char *plain = NULL;
    char entry[4096];
    ssize_t n;

    g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
    g_assert_cmpint(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), ==, 0);
    vrmLogSetProgram("vrmutiltest");
    vrmLogSetJournalSocket(path);
    onStderr = logToFileWith(logOneEvent, NULL, true);
    g_assert_cmpstr(onStderr, ==, "");
    n = recv(fd, entry, sizeof(entry) - 1, MSG_DONTWAIT);
    g_assert_cmpint(n, >, 0);
    entry[n] = '\0';
    g_test_message("entry:\n%s", entry);
    g_assert_cmpstr(entry, ==,
                    "MESSAGE=warning: job 42: over TCP\n"
                    "PRIORITY=4\n"
                    "SYSLOG_IDENTIFIER=vrmutiltest\n"
                    "MESSAGE_ID=0123456789abcdef0123456789abcdef\n"
                    "DOMAIN_UUID=7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b\n"
                    "JOB_ID=42\n"
                    "PEER=evil\\x0aPRIORITY=0\n");

    /* nobody listens: the line goes to stderr as before */
    close(fd);
    unlink(path);
    fallback = logToFileWith(logOneEvent, NULL, true);
    g_assert_cmpstr(fallback, ==, "<4>warning: job 42: over TCP\n");
    /* not under systemd: a plain line */
    plain = logToFileWith(logOneEvent, NULL, false);
    g_assert_nonnull(strstr(plain, "] warning: job 42: over TCP\n"));
    vrmLogSetJournalSocket(NULL);
    rmdir(dir);
}

static void
testJournal(void)
{
    g_autofree char *journal = NULL;
    g_autofree char *file = NULL;
    g_autofree char *stale = NULL;

    vrmLogSetProgram("vrmutiltest");
    journal = logToFile(NULL, true);
    g_assert_cmpstr(journal, ==, "<4>warning: peer said: evil\\x0awarning: forged\n");
    file = logToFile(NULL, false);
    g_assert_nonnull(strstr(file, " vrmutiltest["));
    g_assert_nonnull(strstr(file, "] warning: peer said: evil\\x0awarning: forged\n"));
    g_assert_cmpint(file[0], !=, '<');
    /* inherited from a parent whose stderr was the journal: not ours */
    stale = logToFile("1:1", false);
    g_assert_cmpint(stale[0], !=, '<');
}

/* [peers] allow: networks parsed, formatted, matched (IPv4-mapped IPv6
 * as IPv4); items that are not networks named */
static void
testNetworks(void)
{
    static const struct {
        const char *text;
        const char *bad;        /* NULL: parses */
        const char *canonical;
    } lists[] = {
        { "10.0.0.0/8", NULL, "10.0.0.0/8" },
        { "10.0.0.0/8; 192.0.2.7, fd00::/8", NULL, "10.0.0.0/8;192.0.2.7/32;fd00::/8" },
        { "::1", NULL, "::1/128" },
        { "0.0.0.0/0", NULL, "0.0.0.0/0" },
        { "10.0.0.1/8", "10.0.0.1/8", NULL },           /* host bits set */
        { "10.0.0.0/33", "10.0.0.0/33", NULL },
        { "10.0.0.0/", "10.0.0.0/", NULL },
        { "hv-17.example.org", "hv-17.example.org", NULL },
        { "10.0.0.0/8;x", "x", NULL },
        { "", "", NULL },
        { " ; ", " ; ", NULL },
    };
    g_autoptr(GArray) nets = NULL;
    struct sockaddr_in in4 = { .sin_family = AF_INET };
    struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(lists); i++) {
        g_autofree char *bad = NULL;
        g_autoptr(GArray) l = vrmNetworkListParse(lists[i].text, &bad);

        g_assert_cmpstr(bad, ==, lists[i].bad);
        if (l) {
            g_autofree char *text = vrmNetworkListFormat(l);

            g_assert_cmpstr(text, ==, lists[i].canonical);
        }
        g_assert_true((l == NULL) == (lists[i].bad != NULL));
    }
    {
        g_autofree char *bad = NULL;

        nets = vrmNetworkListParse("198.18.0.0/15;192.0.2.7;fd00:1::/32", &bad);
    }
    g_assert_nonnull(nets);
    g_assert_true(vrmNetworkListHasAddress(nets, "198.18.0.2"));
    g_assert_true(vrmNetworkListHasAddress(nets, "198.19.255.255"));
    g_assert_false(vrmNetworkListHasAddress(nets, "198.20.0.1"));
    g_assert_true(vrmNetworkListHasAddress(nets, "192.0.2.7"));
    g_assert_false(vrmNetworkListHasAddress(nets, "192.0.2.8"));
    g_assert_true(vrmNetworkListHasAddress(nets, "fd00:1:ffff::1"));
    g_assert_false(vrmNetworkListHasAddress(nets, "fd00:2::1"));
    g_assert_false(vrmNetworkListHasAddress(nets, "not an address"));
    g_assert_false(vrmNetworkListHasAddress(nets, NULL));
    g_assert_true(vrmNetworkListHasAddress(NULL, "203.0.113.1"));   /* no list: all */
    inet_pton(AF_INET, "198.18.0.1", &in4.sin_addr);
    g_assert_true(vrmNetworkListHasSockaddr(nets, (struct sockaddr *)&in4));
    inet_pton(AF_INET, "127.0.0.1", &in4.sin_addr);
    g_assert_false(vrmNetworkListHasSockaddr(nets, (struct sockaddr *)&in4));
    inet_pton(AF_INET6, "::ffff:198.18.0.9", &in6.sin6_addr);
    g_assert_true(vrmNetworkListHasSockaddr(nets, (struct sockaddr *)&in6));
    inet_pton(AF_INET6, "::ffff:10.0.0.9", &in6.sin6_addr);
    g_assert_false(vrmNetworkListHasSockaddr(nets, (struct sockaddr *)&in6));

    /* one host, however written; a network or a name is no address */
    g_assert_true(vrmNetworkAddressEqual("198.18.0.2", "198.18.0.2"));
    g_assert_true(vrmNetworkAddressEqual("198.18.0.2", "::ffff:198.18.0.2"));
    g_assert_true(vrmNetworkAddressEqual("fd00::1", "fd00:0::0:1"));
    g_assert_false(vrmNetworkAddressEqual("198.18.0.2", "198.18.0.1"));
    g_assert_false(vrmNetworkAddressEqual("198.18.0.0/16", "198.18.0.2"));
    g_assert_false(vrmNetworkAddressEqual("localhost", "127.0.0.1"));
    g_assert_false(vrmNetworkAddressEqual(NULL, "127.0.0.1"));
    g_assert_false(vrmNetworkAddressEqual("::", "0.0.0.0"));
}

static const vrmTestFunc testFuncs[] = {
    { "/util/parse/uint64", testUInt64 },
    { "/util/parse/sizes", testSizes },
    { "/util/parse/names-addresses", testNamesAddresses },
    { "/util/token", testToken },
    { "/util/networks", testNetworks },
    { "/util/limits/pinned", testPinned },
    { "/util/log/sanitize", testSanitize },
    { "/util/log/journal", testJournal },
    { "/util/log/journal-fields", testJournalFields },
};

VRM_TEST_MAIN(NULL, testFuncs)
