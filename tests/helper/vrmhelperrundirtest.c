/*
 * vrmhelperrundirtest.c: the run directory model (issue 13 item 1, 7)
 *
 * Modes and owners of what virt-rdmad makes; a run directory that others
 * could write is repaired; a symbolic link in its place is refused; a
 * per-domain directory is made afresh over what a killed job left, and is
 * removed only while it is still the job's. As root, with a second local
 * user (daemon, standing for a member of the access group): that user can
 * neither remove the control socket nor put its own in its place, and
 * cannot write a per-domain directory of another QEMU user.
 */
#include <config.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vrmtestutils.h"
#include "vrmerror.h"
#include "vrmhelperconf.h"
#include "vrmhelperrundir.h"

typedef struct {
    char *top;
    char *run;
} vrmRunFixture;

static void
setUp(vrmRunFixture *f, gconstpointer data)
{
    f->top = g_dir_make_tmp("vrmrundirtest-XXXXXX", NULL);
    g_assert_nonnull(f->top);
    /* others must reach the run directory through it (the second user) */
    g_assert_cmpint(chmod(f->top, 0755), ==, 0);
    f->run = g_build_filename(f->top, "run", NULL);
}

static void
tearDown(vrmRunFixture *f, gconstpointer data)
{
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", f->top);

    g_spawn_command_line_sync(cmd, NULL, NULL, NULL, NULL);
    g_free(f->top);
    g_free(f->run);
}

static mode_t
modeOf(const char *path)
{
    struct stat st;

    g_assert_cmpint(lstat(path, &st), ==, 0);
    return st.st_mode & 07777;
}

static void
testModes(vrmRunFixture *f, gconstpointer data)
{
    g_autoptr(vrmRunDir) rd = NULL;
    g_autofree char *qemu = g_build_filename(f->run, "qemu", NULL);
    g_autofree char *engine = g_build_filename(f->run, "engine", NULL);
    g_autofree char *sock = g_build_filename(f->run, "virt-rdmad.sock", NULL);
    int fd;

    /* an old run directory: group-writable, setgid */
    g_assert_cmpint(mkdir(f->run, 02775), ==, 0);
    g_assert_cmpint(chmod(f->run, 02775), ==, 0);
    rd = vrmRunDirOpen(f->run, geteuid(), getegid());
    g_assert_nonnull(rd);
    g_assert_cmpint(modeOf(f->run), ==, 0755);
    g_assert_cmpint(modeOf(qemu), ==, 0755);
    g_assert_cmpint(modeOf(engine), ==, 0700);
    fd = vrmRunDirListen(rd, "virt-rdmad.sock", getegid());
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(modeOf(sock), ==, 0660);
    close(fd);
    /* a second time: the stale socket goes, a new one comes */
    fd = vrmRunDirListen(rd, "virt-rdmad.sock", getegid());
    g_assert_cmpint(fd, >=, 0);
    close(fd);
    g_assert_cmpint(vrmRunDirCheckSocket(rd, "virt-rdmad.sock", getegid()), ==, 0);
}

static void
testSymlinkRefused(vrmRunFixture *f, gconstpointer data)
{
    g_autofree char *elsewhere = g_build_filename(f->top, "elsewhere", NULL);
    g_autoptr(vrmRunDir) rd = NULL;

    g_assert_cmpint(mkdir(elsewhere, 0755), ==, 0);
    g_assert_cmpint(symlink(elsewhere, f->run), ==, 0);
    vrmResetLastError();
    rd = vrmRunDirOpen(f->run, geteuid(), getegid());
    g_assert_null(rd);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "symbolic link"));
}

static void
testDomainDir(vrmRunFixture *f, gconstpointer data)
{
    const char *uuid = "7B9C1A2E-3F4D-4E5F-8A6B-0C1D2E3F4A5B";
    g_autoptr(vrmRunDir) rd = vrmRunDirOpen(f->run, geteuid(), getegid());
    g_autofree char *dir = g_build_filename(f->run, "qemu",
                                            "7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b", NULL);
    g_autofree char *sock = g_build_filename(dir, "migrate.sock", NULL);
    g_autofree char *nbd = g_build_filename(dir, "nbd.sock", NULL);
    g_autofree char *junk = g_build_filename(dir, "junk", NULL);
    vrmDomainDir d1 = { 0 };
    vrmDomainDir d2 = { 0 };
    int lfd = -1;
    int dfd = -1;

    g_assert_nonnull(rd);
    /* what a killed job left */
    g_assert_cmpint(g_mkdir_with_parents(dir, 0777), ==, 0);
    g_assert_true(g_file_set_contents(junk, "x", 1, NULL));
    g_assert_cmpint(vrmRunDirDomainCreate(rd, uuid, geteuid(), getegid(), true,
                                          &d1, &lfd, &dfd), ==, 0);
    g_assert_cmpint(lfd, >=, 0);
    /* the disks' socket too: bound, listening, the same mode */
    g_assert_cmpint(dfd, >=, 0);
    g_assert_cmpint(modeOf(nbd), ==, 0660);
    close(dfd);
    g_assert_false(g_file_test(junk, G_FILE_TEST_EXISTS));
    g_assert_cmpint(modeOf(dir), ==, geteuid() == 0 ? 02750 : 0700);
    g_assert_cmpint(modeOf(sock), ==, 0660);
    close(lfd);
    /* a later job made it again: the first job must not remove it */
    g_assert_cmpint(vrmRunDirDomainCreate(rd, uuid, geteuid(), getegid(), false,
                                          &d2, NULL, NULL), ==, 0);
    g_assert_false(g_file_test(nbd, G_FILE_TEST_EXISTS));
    vrmRunDirDomainRemove(rd, &d1);
    g_assert_true(g_file_test(dir, G_FILE_TEST_IS_DIR));
    vrmRunDirDomainRemove(rd, &d2);
    g_assert_false(g_file_test(dir, G_FILE_TEST_EXISTS));
    vrmResetLastError();
    g_assert_cmpint(vrmRunDirDomainCreate(rd, "../../etc", 0, 0, false, &d1, NULL, NULL), ==, -1);
}

/* In a child as @uid: 0 if @path could be unlinked and rebound */
static int
tryReplaceAs(uid_t uid, gid_t gid, const char *path)
{
    pid_t pid = fork();
    int status = 0;

    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
            _exit(3);
        if (unlink(path) < 0)
            _exit(errno == EACCES || errno == EPERM ? 1 : 2);
        g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        _exit(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : 1);
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/*
 * issue 13 finding 1: with an access group the old run directory was
 * 02775 without the sticky bit, and a member replaced root's control
 * socket with its own. Now the member can touch neither.
 */
static void
testGroupMemberCannotReplace(vrmRunFixture *f, gconstpointer data)
{
    struct passwd *member = getpwnam("daemon");
    g_autoptr(vrmRunDir) rd = NULL;
    g_autofree char *sock = g_build_filename(f->run, "virt-rdmad.sock", NULL);
    g_autofree char *dom = NULL;
    g_autofree char *domSock = NULL;
    g_autofree char *diskSock = NULL;
    vrmDomainDir d = { 0 };
    int fd;
    int lfd = -1;
    int dfd = -1;

    if (geteuid() != 0) {
        g_test_skip("needs root: CI runs the unit tests as root");
        return;
    }
    g_assert_nonnull(member);
    rd = vrmRunDirOpen(f->run, 65534, 65534);
    g_assert_nonnull(rd);
    /* the member's own group is the access group */
    fd = vrmRunDirListen(rd, "virt-rdmad.sock", member->pw_gid);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(tryReplaceAs(member->pw_uid, member->pw_gid, sock), ==, 1);
    g_assert_true(g_file_test(sock, G_FILE_TEST_EXISTS));
    close(fd);

    /* the per-domain directory of a QEMU user (nobody) and the engine
     * group (nogroup): the member cannot replace the socket there either */
    g_assert_cmpint(vrmRunDirDomainCreate(rd, "7b9c1a2e-3f4d-4e5f-8a6b-0c1d2e3f4a5b",
                                          65534, 65534, true, &d, &lfd, &dfd), ==, 0);
    dom = g_build_filename(f->run, "qemu", d.uuid, NULL);
    domSock = g_build_filename(dom, "migrate.sock", NULL);
    diskSock = g_build_filename(dom, "nbd.sock", NULL);
    g_assert_cmpint(tryReplaceAs(member->pw_uid, member->pw_gid, domSock), ==, 1);
    g_assert_cmpint(tryReplaceAs(member->pw_uid, member->pw_gid, diskSock), ==, 1);
    {
        struct stat st;

        g_assert_cmpint(stat(domSock, &st), ==, 0);
        g_assert_cmpuint(st.st_uid, ==, 65534);
        g_assert_cmpuint(st.st_gid, ==, 65534);
        g_assert_cmpint(stat(diskSock, &st), ==, 0);
        g_assert_cmpuint(st.st_uid, ==, 65534);
        g_assert_cmpuint(st.st_gid, ==, 65534);
        g_assert_cmpint(stat(dom, &st), ==, 0);
        g_assert_cmpuint(st.st_uid, ==, 65534);
        g_assert_cmpint(st.st_mode & 07777, ==, 02750);
    }
    close(lfd);
    close(dfd);
    vrmRunDirDomainRemove(rd, &d);
}

int
main(int argc, char **argv)
{
    vrmTestInit(&argc, &argv);
#define ADD(path, func) \
    g_test_add(path, vrmRunFixture, NULL, setUp, func, tearDown)
    ADD("/rundir/modes", testModes);
    ADD("/rundir/symlink-refused", testSymlinkRefused);
    ADD("/rundir/domain-dir", testDomainDir);
    ADD("/rundir/group-member-cannot-replace", testGroupMemberCannotReplace);
#undef ADD
    return g_test_run();
}
