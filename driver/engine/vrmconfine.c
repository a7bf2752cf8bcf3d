/*
 * vrmconfine.c: what the engine gives up before it talks to anybody
 *
 * The engine is the network-facing parser of virt-rdma. It runs as an
 * unprivileged user (virt-rdmad sets the user, the groups, the memlock
 * limit and no capabilities); on top of that it confines itself:
 *   - not dumpable: other processes of the engine user can neither ptrace
 *     it nor read its memory or environment (/proc/PID/mem, environ);
 *   - no new privileges: nothing it could execute gains any;
 *   - a seccomp filter (raw BPF, no new dependency): the system calls an
 *     engine never makes fail with EPERM: starting programs (execve,
 *     execveat), other processes' memory (ptrace, process_vm_readv/writev),
 *     the mount family, kexec, kernel modules, bpf, perf_event_open, the
 *     kernel keyring, namespaces (unshare, setns, and clone with any
 *     CLONE_NEW* flag; clone3, whose flags a filter cannot read, fails
 *     with ENOSYS so that glibc falls back to clone). A deny list:
 *     everything libibverbs, librdmacm and their providers do stays
 *     allowed, threads included.
 */
#include <config.h>

#include <errno.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "vrmconfine.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

#if defined(__x86_64__)
# define VRM_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
# define VRM_AUDIT_ARCH AUDIT_ARCH_AARCH64
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
# define VRM_AUDIT_ARCH AUDIT_ARCH_PPC64LE
#elif defined(__s390x__)
# define VRM_AUDIT_ARCH AUDIT_ARCH_S390X
#endif

/* The denied system calls (those this architecture has) */
static const int vrmDenied[] = {
#ifdef __NR_execve
    __NR_execve,
#endif
#ifdef __NR_execveat
    __NR_execveat,
#endif
#ifdef __NR_ptrace
    __NR_ptrace,
#endif
#ifdef __NR_process_vm_readv
    __NR_process_vm_readv,
#endif
#ifdef __NR_process_vm_writev
    __NR_process_vm_writev,
#endif
#ifdef __NR_mount
    __NR_mount,
#endif
#ifdef __NR_umount2
    __NR_umount2,
#endif
#ifdef __NR_pivot_root
    __NR_pivot_root,
#endif
#ifdef __NR_open_tree
    __NR_open_tree,
#endif
#ifdef __NR_move_mount
    __NR_move_mount,
#endif
#ifdef __NR_fsopen
    __NR_fsopen,
#endif
#ifdef __NR_fsconfig
    __NR_fsconfig,
#endif
#ifdef __NR_fsmount
    __NR_fsmount,
#endif
#ifdef __NR_fspick
    __NR_fspick,
#endif
#ifdef __NR_mount_setattr
    __NR_mount_setattr,
#endif
#ifdef __NR_kexec_load
    __NR_kexec_load,
#endif
#ifdef __NR_kexec_file_load
    __NR_kexec_file_load,
#endif
#ifdef __NR_init_module
    __NR_init_module,
#endif
#ifdef __NR_finit_module
    __NR_finit_module,
#endif
#ifdef __NR_delete_module
    __NR_delete_module,
#endif
#ifdef __NR_bpf
    __NR_bpf,
#endif
#ifdef __NR_perf_event_open
    __NR_perf_event_open,
#endif
#ifdef __NR_keyctl
    __NR_keyctl,
#endif
#ifdef __NR_add_key
    __NR_add_key,
#endif
#ifdef __NR_request_key
    __NR_request_key,
#endif
#ifdef __NR_unshare
    __NR_unshare,
#endif
#ifdef __NR_setns
    __NR_setns,
#endif
};

#if defined(__x86_64__)
# define VRM_X32_SYSCALL_BIT 0x40000000u   /* the x32 ABI: none of ours */
# define VRM_SECCOMP_X32 2
#else
# define VRM_SECCOMP_X32 0
#endif

/* clone's flags that make a namespace (CLONE_NEWTIME is 0x80) */
#define VRM_CLONE_NEW_FLAGS 0x7E020080u
G_STATIC_ASSERT((VRM_CLONE_NEW_FLAGS & 0x7E020000u) == 0x7E020000u);
#if defined(__NR_clone) && defined(__NR_clone3)
# define VRM_SECCOMP_CLONE 7
/* clone(flags, ...); s390x passes the stack first */
# if defined(__s390x__)
#  define VRM_CLONE_FLAGS_ARG 1
# else
#  define VRM_CLONE_FLAGS_ARG 0
# endif
/* the flags' low 32 bits, where every CLONE_NEW* flag is */
# if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define VRM_CLONE_FLAGS_OFFSET offsetof(struct seccomp_data, args[VRM_CLONE_FLAGS_ARG])
# else
#  define VRM_CLONE_FLAGS_OFFSET (offsetof(struct seccomp_data, args[VRM_CLONE_FLAGS_ARG]) + 4)
# endif
#else
# define VRM_SECCOMP_CLONE 0
#endif
#define VRM_SECCOMP_LEN (4 + VRM_SECCOMP_X32 + VRM_SECCOMP_CLONE + \
                         2 * G_N_ELEMENTS(vrmDenied) + 1)

size_t
vrmConfineDeniedCount(void)
{
    return G_N_ELEMENTS(vrmDenied);
}

int
vrmConfine(void)
{
#ifdef VRM_AUDIT_ARCH
    struct sock_filter filter[VRM_SECCOMP_LEN];
    struct sock_fprog prog = { .len = 0, .filter = filter };
    size_t n = 0, i;
#endif

    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
        vrmReportSystemError(errno, "%s", _("cannot make the engine undumpable"));
        return -1;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        vrmReportSystemError(errno, "%s", _("cannot set no-new-privileges on the engine"));
        return -1;
    }
#ifdef VRM_AUDIT_ARCH
    /* another architecture's numbers would mean other calls: refuse them */
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                               offsetof(struct seccomp_data, arch));
    filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, VRM_AUDIT_ARCH, 1, 0);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                               offsetof(struct seccomp_data, nr));
#ifdef VRM_X32_SYSCALL_BIT
    filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, VRM_X32_SYSCALL_BIT, 0, 1);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                               SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
#endif
#if VRM_SECCOMP_CLONE
    filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                               SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
    filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, VRM_CLONE_FLAGS_OFFSET);
    filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, VRM_CLONE_NEW_FLAGS, 0, 1);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                               SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
    /* not a namespace: on with the number */
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                               offsetof(struct seccomp_data, nr));
#endif
    for (i = 0; i < G_N_ELEMENTS(vrmDenied); i++) {
        filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                                   vrmDenied[i], 0, 1);
        filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                                   SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
    }
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    g_assert(n == VRM_SECCOMP_LEN);
    prog.len = n;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) {
        vrmReportSystemError(errno, "%s", _("cannot install the engine's seccomp filter"));
        return -1;
    }
    VRM_DEBUG("confined: not dumpable, no new privileges, %zu system calls denied",
              G_N_ELEMENTS(vrmDenied));
#else
    VRM_INFO("no seccomp filter on this architecture");
#endif
    return 0;
}
