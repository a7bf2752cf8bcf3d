/*
 * vrmhelpersteertest.c: the transparent mode's rules (vrmhelpersteer.h):
 * their text, the cgroup of a domain's QEMU, nft's answer, and the
 * asynchronous runs against a FAKE nft (a shell script that prints what
 * nft --echo --handle prints, or fails as nft does). The real nft and the
 * kernel's NAT are tested in the sandbox (tests/e2e/negotiation.sh).
 */
#include <config.h>

#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vrmtestutils.h"
#include "vrmerror.h"
#include "vrmhelpersteer.h"
#include "vrmtestmain.h"

static void
testRuleText(void)
{
    vrmSteerMatch m = {
        .qemuUid = 64055, .daemonUid = 64055, .portMin = 49152, .portMax = 49215,
    };
    g_autofree char *plain = vrmSteerRuleText(&m, 40123, 7);
    g_autofree char *scoped = NULL;

    /* QEMU as the daemon's user, neither with a cgroup: one rule */
    g_assert_cmpstr(plain, ==,
                    "add rule inet virt_rdma output meta nfproto ipv4 meta skuid 64055"
                    " fib daddr type != local tcp dport 49152-49215"
                    " tcp flags & (fin | syn | rst | ack) == syn"
                    " redirect to :40123 comment \"virt-rdma job 7\"\n");
    /* a stock host: QEMU's scope, and libvirt's daemon (root, its
     * service's cgroup), which connects a migration's main stream */
    m.cgroup = "machine.slice/machine-qemu\\x2d1\\x2dg1.scope";
    m.cgroupLevel = 2;
    m.daemonUid = 0;
    m.daemonCgroup = "system.slice/libvirtd.service";
    m.daemonCgroupLevel = 2;
    scoped = vrmSteerRuleText(&m, 40123, 8);
    g_assert_cmpstr(scoped, ==,
                    "add rule inet virt_rdma output meta nfproto ipv4 meta skuid 64055"
                    " socket cgroupv2 level 2 \"machine.slice/machine-qemu\\x2d1\\x2dg1.scope\""
                    " fib daddr type != local tcp dport 49152-49215"
                    " tcp flags & (fin | syn | rst | ack) == syn"
                    " redirect to :40123 comment \"virt-rdma job 8\"\n"
                    "add rule inet virt_rdma output meta nfproto ipv4 meta skuid 0"
                    " socket cgroupv2 level 2 \"system.slice/libvirtd.service\""
                    " fib daddr type != local tcp dport 49152-49215"
                    " tcp flags & (fin | syn | rst | ack) == syn"
                    " redirect to :40123 comment \"virt-rdma job 8\"\n");
}

static void
testDaemon(void)
{
    g_autofree char *dir = g_dir_make_tmp("vrmsteer-XXXXXX", NULL);
    g_autofree char *prog = g_build_filename(dir, "libvirtd", NULL);
    g_autofree char *pidFile = g_build_filename(dir, "libvirtd.pid", NULL);
    g_autofree char *pidText = NULL;
    g_autofree char *cg = NULL;
    g_autofree char *sleepText = NULL;
    gsize sleepLen = 0;
    unsigned int level = 0;
    pid_t pid;

    /* its cgroup, in full */
    cg = vrmSteerDaemonCgroupParse("0::/system.slice/virtqemud.service\n", &level);
    g_assert_cmpstr(cg, ==, "system.slice/virtqemud.service");
    g_assert_cmpuint(level, ==, 2);
    g_assert_null(vrmSteerDaemonCgroupParse("0::/\n", &level));
    g_assert_null(vrmSteerDaemonCgroupParse("12:pids:/\n", &level));
    g_assert_null(vrmSteerDaemonCgroupParse("0::/a//b\n", &level));
    g_assert_null(vrmSteerDaemonCgroupParse("0::/a\"b\n", &level));

    /* no pid file, a dead pid, a live process of another name */
    g_assert_cmpint(vrmSteerLibvirtDaemon(dir), ==, -1);
    g_assert_true(g_file_set_contents(pidFile, "999999999\n", -1, NULL));
    g_assert_cmpint(vrmSteerLibvirtDaemon(dir), ==, -1);
    pidText = g_strdup_printf("%d\n", (int)getpid());
    g_assert_true(g_file_set_contents(pidFile, pidText, -1, NULL));
    g_assert_cmpint(vrmSteerLibvirtDaemon(dir), ==, -1);

    /* a process named libvirtd (a copy of sleep(1)) */
    g_assert_true(g_file_get_contents("/bin/sleep", &sleepText, &sleepLen, NULL));
    g_assert_true(g_file_set_contents(prog, sleepText, sleepLen, NULL));
    g_assert_cmpint(chmod(prog, 0755), ==, 0);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        execl(prog, "libvirtd", "30", (char *)NULL);
        _exit(127);
    }
    g_clear_pointer(&pidText, g_free);
    pidText = g_strdup_printf("%d\n", (int)pid);
    g_assert_true(g_file_set_contents(pidFile, pidText, -1, NULL));
    for (int i = 0; i < 200 && vrmSteerLibvirtDaemon(dir) != pid; i++)
        g_usleep(10000);
    g_assert_cmpint(vrmSteerLibvirtDaemon(dir), ==, pid);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);

    unlink(prog);
    unlink(pidFile);
    g_assert_cmpint(rmdir(dir), ==, 0);
}

static void
testCgroup(void)
{
    unsigned int level = 0;
    g_autofree char *systemd =
        vrmSteerCgroupParse("0::/machine.slice/machine-qemu\\x2d3\\x2dweb1.scope/libvirt/emulator\n",
                            &level);
    g_autofree char *plain = NULL;
    char *none;

    /* the domain's scope, not the emulator's cgroup under it: multifd
     * sockets may come from other threads of QEMU */
    g_assert_cmpstr(systemd, ==, "machine.slice/machine-qemu\\x2d3\\x2dweb1.scope");
    g_assert_cmpuint(level, ==, 2);
    plain = vrmSteerCgroupParse("0::/machine/qemu-1-g1.libvirt-qemu/emulator\n", &level);
    g_assert_cmpstr(plain, ==, "machine/qemu-1-g1.libvirt-qemu");
    g_assert_cmpuint(level, ==, 2);
    /* libvirt without cgroups: QEMU in its daemon's, shared with others */
    none = vrmSteerCgroupParse("0::/system.slice/libvirtd.service\n", &level);
    g_assert_null(none);
    none = vrmSteerCgroupParse("0::/\n", &level);
    g_assert_null(none);
    /* cgroup v1 only */
    none = vrmSteerCgroupParse("12:pids:/machine.slice\n1:name=systemd:/\n", &level);
    g_assert_null(none);
    /* nothing nft could not take in quotes */
    none = vrmSteerCgroupParse("0::/machine.slice/machine-qemu\"x.scope\n", &level);
    g_assert_null(none);
    none = vrmSteerCgroupParse("", &level);
    g_assert_null(none);
}

static void
testHandle(void)
{
    vrmSteerRules rules;
    g_autofree char *text = NULL;

    g_assert_cmpuint(vrmSteerParseHandle("add rule inet virt_rdma output meta skuid 64055 redirect to :4 comment \"virt-rdma job 7\" # handle 12\n"),
                     ==, 12);
    /* the last one: a comment could say "# handle 3" itself */
    g_assert_cmpuint(vrmSteerParseHandle("add rule ... comment \"# handle 3\" # handle 44\n"), ==, 44);
    g_assert_cmpuint(vrmSteerParseHandle("add rule ... # handle 44"), ==, 44);
    g_assert_cmpuint(vrmSteerParseHandle(""), ==, 0);
    g_assert_cmpuint(vrmSteerParseHandle(NULL), ==, 0);
    g_assert_cmpuint(vrmSteerParseHandle("# handle "), ==, 0);
    g_assert_cmpuint(vrmSteerParseHandle("# handle 12x\n"), ==, 0);
    g_assert_cmpuint(vrmSteerParseHandle("# handle 99999999999999999999999\n"), ==, 0);

    /* nft --echo of two rules: a handle each */
    g_assert_cmpuint(vrmSteerParseHandles("add rule ... # handle 12\n"
                                          "add rule ... # handle 13\n"
                                          "# new generation 3 by process 7 (nft)\n", &rules), ==, 2);
    g_assert_cmpuint(rules.handle[0], ==, 12);
    g_assert_cmpuint(rules.handle[1], ==, 13);
    g_assert_cmpuint(vrmSteerParseHandles("", &rules), ==, 0);
    g_assert_cmpuint(vrmSteerParseHandles(NULL, &rules), ==, 0);
    text = vrmSteerRulesFormat(&(vrmSteerRules) { { 12, 13 }, 2 });
    g_assert_cmpstr(text, ==, "12 13");

    /* a job's rules in the table's listing (nft --handle list chain) */
    g_assert_cmpuint(vrmSteerParseJobHandles("table inet virt_rdma {\n"
                                             "  chain output { # handle 1\n"
                                             "    redirect to :6 comment \"virt-rdma job 70\" # handle 3\n"
                                             "    redirect to :5 comment \"virt-rdma job 7\" # handle 4\n"
                                             "    redirect to :5 comment \"virt-rdma job 7\" # handle 5\n"
                                             "  }\n}\n", 7, &rules), ==, 2);
    g_assert_cmpuint(rules.handle[0], ==, 4);
    g_assert_cmpuint(rules.handle[1], ==, 5);
    g_assert_cmpuint(vrmSteerParseJobHandles("redirect to :6 comment \"virt-rdma job 70\" # handle 3\n", 7, &rules), ==, 0);
    g_assert_cmpuint(vrmSteerParseJobHandles("comment \"virt-rdma job 7\" # handle 5", 7, &rules), ==, 1);
    g_assert_cmpuint(rules.handle[0], ==, 5);
    g_assert_cmpuint(vrmSteerParseJobHandles("comment \"virt-rdma job 7\"\n# handle 5\n", 7, &rules), ==, 0);
    g_assert_cmpuint(vrmSteerParseJobHandles(NULL, 7, &rules), ==, 0);
}

/* A FAKE nft: @body runs with nft's arguments; its input is the rules */
static char *
testFakeNft(const char *dir, const char *body)
{
    g_autofree char *text = g_strdup_printf("#!/bin/sh\ninput=$(cat)\n%s\n", body);
    char *path = g_build_filename(dir, "nft", NULL);

    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    g_assert_cmpint(chmod(path, 0755), ==, 0);
    return path;
}

typedef struct {
    bool done;
    vrmSteerRules rules;
    char *error;
} testAdded;

static void
testAddedCb(const vrmSteerRules *rules, const char *error, gpointer opaque)
{
    testAdded *a = opaque;

    a->done = true;
    a->rules = *rules;
    a->error = g_strdup(error);
}

/* QEMU and libvirt's daemon of uid 1 (one rule), job 7; with QEMU of
 * uid 2, two rules */
static const vrmSteerMatch testMatch = {
    .qemuUid = 1, .daemonUid = 1, .portMin = 49152, .portMax = 49215,
};
static const vrmSteerMatch testMatch2 = {
    .qemuUid = 2, .daemonUid = 1, .portMin = 49152, .portMax = 49215,
};

static void
testAddWaitMatch(vrmSteer *steer, const vrmSteerMatch *match, testAdded *a)
{
    gint64 deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;

    memset(a, 0, sizeof(*a));
    g_assert_cmpint(vrmSteerAdd(steer, match, 5, 7, testAddedCb, a), ==, 0);
    while (!a->done && g_get_monotonic_time() < deadline)
        g_main_context_iteration(NULL, TRUE);
    g_assert_true(a->done);
}

static void
testAddWait(vrmSteer *steer, testAdded *a)
{
    testAddWaitMatch(steer, &testMatch, a);
}

/* The loop runs until @log holds @text (a run that is not waited for) */
static char *
testLogWait(const char *log, const char *text)
{
    char *seen = NULL;

    for (int i = 0; i < 1500; i++) {
        g_clear_pointer(&seen, g_free);
        g_file_get_contents(log, &seen, NULL, NULL);
        if (seen && strstr(seen, text))
            break;
        g_main_context_iteration(NULL, FALSE);
        g_usleep(10000);
    }
    g_assert_nonnull(seen);
    return seen;
}

/* An add through a FAKE nft running @body fails with @why in its reason */
static void
testAddFails(const char *dir, const char *body, const char *why)
{
    g_autofree char *nft = testFakeNft(dir, body);
    g_autoptr(vrmSteer) steer = vrmSteerNew(nft);
    testAdded a;

    g_assert_cmpint(vrmSteerReset(steer), ==, 0);
    testAddWait(steer, &a);
    g_assert_cmpuint(a.rules.n, ==, 0);
    g_assert_nonnull(strstr(a.error, why));
    g_free(a.error);
}

static void
testRuns(void)
{
    g_autofree char *dir = g_dir_make_tmp("vrmsteer-XXXXXX", NULL);
    g_autofree char *log = g_build_filename(dir, "log", NULL);
    g_autofree char *ok = NULL;
    g_autofree char *body = NULL;
    g_autofree char *seen = NULL;
    g_autoptr(vrmSteer) steer = NULL;
    g_autoptr(vrmSteer) broken = NULL;
    g_autoptr(vrmSteer) missing = NULL;
    testAdded a;

    /* before the table is made, nothing is added */
    steer = vrmSteerNew("/nonexistent/nft");
    g_assert_cmpint(vrmSteerAdd(steer, &testMatch, 5, 7, testAddedCb, &a), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "not made yet"));

    body = g_strdup_printf("printf '%%s\\n' \"$*\" \"$input\" >> %s\n"
                           "case \"$*\" in *--echo*) printf '%%s # handle 42\\n' \"$input\";; esac",
                           log);
    ok = testFakeNft(dir, body);
    g_clear_pointer(&steer, vrmSteerFree);
    steer = vrmSteerNew(ok);
    g_assert_cmpint(vrmSteerReset(steer), ==, 0);
    g_assert_null(vrmSteerProblem(steer));
    testAddWait(steer, &a);
    g_assert_cmpuint(a.rules.n, ==, 1);
    g_assert_cmpuint(a.rules.handle[0], ==, 42);
    g_assert_null(a.error);
    vrmSteerRemove(steer, &a.rules);
    seen = testLogWait(log, "delete rule inet virt_rdma output handle 42");
    g_assert_nonnull(strstr(seen, "add table inet virt_rdma\ndelete table inet virt_rdma\n"
                                  "table inet virt_rdma {\n    chain output {\n"
                                  "        type nat hook output priority -110; policy accept;"));
    g_assert_nonnull(strstr(seen, "--echo --handle -f -\nadd rule inet virt_rdma output meta nfproto ipv4 meta skuid 1 "));
    g_assert_nonnull(strstr(seen, "delete rule inet virt_rdma output handle 42"));

    /* a clean stop drops the table, once */
    vrmSteerDrop(steer);
    g_clear_pointer(&seen, g_free);
    g_assert_true(g_file_get_contents(log, &seen, NULL, NULL));
    g_assert_true(g_str_has_suffix(seen, "-f -\ndelete table inet virt_rdma\n"));
    g_assert_nonnull(vrmSteerProblem(steer));
    unlink(log);
    vrmSteerDrop(steer);
    g_assert_false(g_file_test(log, G_FILE_TEST_EXISTS));

    /* nft refuses: its own words, on one line, in the reason */
    g_free(ok);
    ok = testFakeNft(dir, "echo 'Error: Could not process rule: No such file or directory' >&2\n"
                          "echo 'add rule inet ...' >&2\nexit 1");
    broken = vrmSteerNew(ok);
    g_assert_cmpint(vrmSteerReset(broken), ==, -1);
    g_assert_nonnull(strstr(vrmSteerProblem(broken),
                            "cannot make the nftables table inet virt_rdma of the transparent mode: Error: Could not process rule: No such file or directory (does the kernel"));
    g_assert_cmpint(vrmSteerAdd(broken, &testMatch, 5, 7, testAddedCb, &a), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "cannot make the nftables table"));

    /* nft that fails to drop the table: logged (with the way to do it by
     * hand), and the table still counts as there */
    g_free(ok);
    ok = testFakeNft(dir, "case \"$input\" in 'delete table'*)\n"
                          "    echo 'Error: Could not process rule: Device or resource busy' >&2; exit 1;;\n"
                          "esac");
    g_clear_pointer(&steer, vrmSteerFree);
    steer = vrmSteerNew(ok);
    g_assert_cmpint(vrmSteerReset(steer), ==, 0);
    vrmSteerDrop(steer);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(),
                            "cannot delete the nftables table inet virt_rdma of the transparent mode: Error: Could not process rule: Device or resource busy (delete it with: nft delete table inet virt_rdma)"));
    g_assert_null(vrmSteerProblem(steer));

    /* nft that hangs: killed at its deadline, the reason says so */
    testAddFails(dir, "case \"$*\" in *--echo*) exec sleep 60;; esac",
                 "nft did not finish within 10 seconds");

    /* nft missing: the package to install */
    missing = vrmSteerNew("/nonexistent/nft");
    g_assert_cmpint(vrmSteerReset(missing), ==, -1);
    g_assert_nonnull(strstr(vrmSteerProblem(missing),
                            "cannot run /nonexistent/nft (the transparent mode needs nftables: apt install nftables)"));

    /* an answer without a handle is a failure, not handle 0 taken as one */
    testAddFails(dir, "exit 0", "nft did not say the rule's handle");

    /* nft that made the rule without saying its handle (here: committed,
     * then hung until killed): the job's rule is found by its comment in
     * the table's listing and deleted, no other job's */
    unlink(log);
    g_free(body);
    body = g_strdup_printf("printf '%%s\\n' \"$*\" \"$input\" >> %1$s\n"
                           "case \"$*\" in\n"
                           "  *--echo*) exec sleep 60;;\n"
                           "  *--handle*) printf '%%s\\n' 'table inet virt_rdma {' "
                           "'  chain output { # handle 1' "
                           "'    meta skuid 1 redirect to :6 comment \"virt-rdma job 70\" # handle 3' "
                           "'    meta skuid 1 redirect to :5 comment \"virt-rdma job 7\" # handle 4' "
                           "'    meta skuid 0 redirect to :5 comment \"virt-rdma job 7\" # handle 5' "
                           "'  }' '}';;\n"
                           "esac", log);
    testAddFails(dir, body, "nft did not finish within 10 seconds");
    g_free(seen);
    seen = testLogWait(log, "delete rule inet virt_rdma output handle");
    g_assert_nonnull(strstr(seen, "--handle -f -\nlist chain inet virt_rdma output\n"));
    g_assert_nonnull(strstr(seen, "delete rule inet virt_rdma output handle 4\n"
                                  "delete rule inet virt_rdma output handle 5\n"));
    g_assert_null(strstr(seen, "handle 3\n"));

    /* two rules, QEMU's and the daemon's: a handle each, both deleted in
     * one run */
    unlink(log);
    g_free(body);
    body = g_strdup_printf("printf '%%s\\n' \"$*\" \"$input\" >> %1$s\n"
                           "case \"$*\" in *--echo*)\n"
                           "  n=41; printf '%%s\\n' \"$input\" | while read -r l; do\n"
                           "    n=$((n + 1)); echo \"$l # handle $n\"; done;;\n"
                           "esac", log);
    g_free(ok);
    ok = testFakeNft(dir, body);
    g_clear_pointer(&steer, vrmSteerFree);
    steer = vrmSteerNew(ok);
    g_assert_cmpint(vrmSteerReset(steer), ==, 0);
    testAddWaitMatch(steer, &testMatch2, &a);
    g_assert_null(a.error);
    g_assert_cmpuint(a.rules.n, ==, 2);
    g_assert_cmpuint(a.rules.handle[0], ==, 42);
    g_assert_cmpuint(a.rules.handle[1], ==, 43);
    vrmSteerRemove(steer, &a.rules);
    g_free(seen);
    seen = testLogWait(log, "delete rule inet virt_rdma output handle 42\n"
                            "delete rule inet virt_rdma output handle 43\n");
    g_assert_nonnull(strstr(seen, "delete rule inet virt_rdma output handle 42\n"
                                  "delete rule inet virt_rdma output handle 43\n"));
    g_assert_nonnull(strstr(seen, " meta skuid 2 "));
    g_assert_nonnull(strstr(seen, " meta skuid 1 "));

    /* ... and an answer with one handle of the two is a failure */
    g_free(ok);
    ok = testFakeNft(dir, "case \"$*\" in *--echo*) echo 'add rule x # handle 9';; esac");
    g_clear_pointer(&steer, vrmSteerFree);
    steer = vrmSteerNew(ok);
    g_assert_cmpint(vrmSteerReset(steer), ==, 0);
    testAddWaitMatch(steer, &testMatch2, &a);
    g_assert_cmpuint(a.rules.n, ==, 0);
    g_assert_nonnull(strstr(a.error, "nft did not say the rule's handle"));
    g_clear_pointer(&a.error, g_free);

    unlink(log);
    g_free(ok);
    ok = g_build_filename(dir, "nft", NULL);
    unlink(ok);
    g_assert_cmpint(rmdir(dir), ==, 0);
}

static const vrmTestFunc testFuncs[] = {
    { "/steer/rule-text", testRuleText },
    { "/steer/cgroup", testCgroup },
    { "/steer/daemon", testDaemon },
    { "/steer/handle", testHandle },
    { "/steer/runs", testRuns },
};

VRM_TEST_MAIN(vrmTestInit, testFuncs)
