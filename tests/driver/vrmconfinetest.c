/*
 * vrmconfinetest.c: the engine's self-confinement, checked in a child
 * process: not dumpable, no new privileges, the seccomp filter in force,
 * and the denied system calls fail with EPERM while the engine's own keep
 * working
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* CLONE_NEW* */
#endif

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vrmconfine.h"
#include "vrmerror.h"

/* The value of "Key:" in /proc/self/status */
static char *
statusField(const char *key)
{
    g_autofree char *status = NULL;
    g_auto(GStrv) lines = NULL;
    size_t i;

    g_assert_true(g_file_get_contents("/proc/self/status", &status, NULL, NULL));
    lines = g_strsplit(status, "\n", -1);
    for (i = 0; lines[i]; i++) {
        if (g_str_has_prefix(lines[i], key) && lines[i][strlen(key)] == ':')
            return g_strstrip(g_strdup(lines[i] + strlen(key) + 1));
    }
    return NULL;
}

static void *
threadMain(void *opaque)
{
    return opaque;
}

/* In the child: exit 0 when everything holds, else the number of the check */
static int
confinedChild(void)
{
    g_autofree char *seccomp = NULL;
    g_autofree char *nnp = NULL;
    char *argv[] = { (char *)"/bin/true", NULL };
    int fds[2];
    pthread_t thread;
    pid_t child;
    long r;
    int status;

    if (vrmConfine() < 0)
        return 1;
    if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
        return 2;
    if (!(nnp = statusField("NoNewPrivs")) || !g_str_equal(nnp, "1"))
        return 3;
    if (!(seccomp = statusField("Seccomp")) || !g_str_equal(seccomp, "2"))
        return 4;
    if (execve("/bin/true", argv, NULL) == 0 || errno != EPERM)
        return 5;
    if (syscall(SYS_ptrace, 0, 0, 0, 0) == 0 || errno != EPERM)
        return 6;
    if (syscall(SYS_unshare, 0) == 0 || errno != EPERM)
        return 7;
    if (syscall(SYS_bpf, 0, NULL, 0) == 0 || errno != EPERM)
        return 8;
    /* what the engine does still works */
    if (pipe(fds) < 0 || write(fds[1], "x", 1) != 1)
        return 9;
    /* no namespace by clone (issue 33 item 6): a new user and network
     * namespace is refused; clone3 says ENOSYS (glibc then uses clone) */
    if ((r = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0)) == 0)
        _exit(0);       /* the namespaced child, if the filter let it be */
    if (r > 0 || errno != EPERM)
        return 10;
    if ((r = syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0)) == 0)
        _exit(0);
    if (r > 0 || errno != EPERM)
        return 11;
    if (syscall(SYS_clone3, NULL, 0) == 0 || errno != ENOSYS)
        return 12;
#if defined(__x86_64__)
    /* the same call by the x32 ABI's number */
    if ((r = syscall(0x40000000 | 56 /* x32 clone */, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)) == 0)
        _exit(0);
    if (r > 0 || errno != EPERM)
        return 13;
#endif
    /* a thread and a plain child still start */
    if (pthread_create(&thread, NULL, threadMain, NULL) != 0 || pthread_join(thread, NULL) != 0)
        return 14;
    if ((child = fork()) == 0)
        _exit(0);
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status))
        return 15;
    return 0;
}

static void
testConfine(void)
{
    pid_t pid = fork();
    int status = 0;

    g_assert_cmpint(pid, >=, 0);
    if (pid == 0)
        _exit(confinedChild());
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_cmpuint(vrmConfineDeniedCount(), >=, 20);
}

int
main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/confine/child", testConfine);
    return g_test_run();
}
