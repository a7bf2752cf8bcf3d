/*
 * vrmhelperrundir.c: the run directory of virt-rdmad
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* O_PATH */
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "vrmhelperrundir.h"
#include "vrmsocket.h"
#include "vrmhelperconf.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

#define VRM_RUN_DIR_MODE 0755
#define VRM_QEMU_DIR_MODE 0755
#define VRM_ENGINE_DIR_MODE 0700
#define VRM_DOMAIN_DIR_MODE 02750
#define VRM_SOCKET_MODE 0660
#define VRM_LISTEN_BACKLOG 64

static int
vrmOpenDirAt(int dirfd, const char *name)
{
    return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/*
 * Make @name below @dirfd (or open it if it is there), then give it
 * @uid:@gid and @mode through its descriptor. A directory that another
 * user could write (an old run directory of 02775, say) is repaired.
 */
static int
vrmEnsureDirAt(int dirfd, const char *name, const char *shown, uid_t uid,
               gid_t gid, mode_t mode, bool root)
{
    struct stat st;
    int fd;

    if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST) {
        vrmReportSystemError(errno, _("cannot create the directory %1$s"), shown);
        return -1;
    }
    if ((fd = vrmOpenDirAt(dirfd, name)) < 0) {
        vrmReportSystemError(errno, _("cannot open the directory %1$s (not a directory, or a symbolic link?)"),
                             shown);
        return -1;
    }
    if (fstat(fd, &st) < 0) {
        vrmReportSystemError(errno, _("cannot inspect the directory %1$s"), shown);
        close(fd);
        return -1;
    }
    if (!root) {
        uid = geteuid();
        gid = st.st_gid;
    }
    if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0) {
        vrmReportSystemError(errno, _("cannot give the directory %1$s to %2$u:%3$u"),
                             shown, (unsigned int)uid, (unsigned int)gid);
        close(fd);
        return -1;
    }
    if ((st.st_mode & 07777) != mode && fchmod(fd, mode) < 0) {
        vrmReportSystemError(errno, _("cannot set the mode of the directory %1$s"),
                             shown);
        close(fd);
        return -1;
    }
    return fd;
}

vrmRunDir *
vrmRunDirOpen(const char *path, uid_t engineUid, gid_t engineGid)
{
    g_autoptr(vrmRunDir) rd = g_new0(vrmRunDir, 1);
    g_autofree char *parent = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *qemuShown = g_build_filename(path, VRM_HELPER_DOMAIN_DIR, NULL);
    g_autofree char *engineShown = g_build_filename(path, VRM_HELPER_ENGINE_DIR, NULL);
    int pfd;

    rd->fd = rd->qemuFd = rd->engineFd = -1;
    rd->path = g_strdup(path);
    rd->root = geteuid() == 0;
    if (g_mkdir_with_parents(parent, 0755) < 0) {
        vrmReportSystemError(errno, _("cannot create the directory %1$s"), parent);
        return NULL;
    }
    if ((pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        vrmReportSystemError(errno, _("cannot open the directory %1$s"), parent);
        return NULL;
    }
    rd->fd = vrmEnsureDirAt(pfd, base, path, 0, 0, VRM_RUN_DIR_MODE, rd->root);
    close(pfd);
    if (rd->fd < 0)
        return NULL;
    if ((rd->qemuFd = vrmEnsureDirAt(rd->fd, VRM_HELPER_DOMAIN_DIR, qemuShown,
                                     0, 0, VRM_QEMU_DIR_MODE, rd->root)) < 0)
        return NULL;
    if ((rd->engineFd = vrmEnsureDirAt(rd->fd, VRM_HELPER_ENGINE_DIR, engineShown,
                                       engineUid, engineGid, VRM_ENGINE_DIR_MODE,
                                       rd->root)) < 0)
        return NULL;
    return g_steal_pointer(&rd);
}

void
vrmRunDirFree(vrmRunDir *rd)
{
    if (!rd)
        return;
    if (rd->fd >= 0)
        close(rd->fd);
    if (rd->qemuFd >= 0)
        close(rd->qemuFd);
    if (rd->engineFd >= 0)
        close(rd->engineFd);
    g_free(rd->path);
    g_free(rd);
}

/*
 * Bind a listening socket at @dirfd/@name (@shown: its whole path) in a
 * directory only root can write, then give it @uid:@gid 0660. A stale
 * socket there is removed first; anything else there is an error.
 */
static int
vrmListenAt(int dirfd, const char *name, const char *shown, uid_t uid,
            gid_t gid, bool root)
{
    struct sockaddr_un sa;
    struct stat st;
    int fd;

    if (vrmUnixAddress(shown, &sa) < 0)
        return -1;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            vrmReportError(VRM_ERR_CONFIG,
                           _("%1$s exists and is not a socket: remove it"), shown);
            return -1;
        }
        if (unlinkat(dirfd, name, 0) < 0) {
            vrmReportSystemError(errno, _("cannot remove the old socket %1$s"), shown);
            return -1;
        }
    }
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
        vrmReportSystemError(errno, _("cannot create a UNIX socket"));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        vrmReportSystemError(errno, _("cannot bind the socket %1$s"), shown);
        close(fd);
        return -1;
    }
    /* nobody else can write this directory: by name is safe here, and
     * fchmodat() has no working AT_SYMLINK_NOFOLLOW on Linux */
    if (fchmodat(dirfd, name, VRM_SOCKET_MODE, 0) < 0 ||
        (root && fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)) {
        vrmReportSystemError(errno, _("cannot set the owner and mode of the socket %1$s"),
                             shown);
        unlinkat(dirfd, name, 0);
        close(fd);
        return -1;
    }
    if (listen(fd, VRM_LISTEN_BACKLOG) < 0) {
        vrmReportSystemError(errno, _("cannot listen on the socket %1$s"), shown);
        unlinkat(dirfd, name, 0);
        close(fd);
        return -1;
    }
    return fd;
}

int
vrmRunDirListen(vrmRunDir *rd, const char *name, gid_t gid)
{
    g_autofree char *shown = g_build_filename(rd->path, name, NULL);

    return vrmListenAt(rd->fd, name, shown, 0, gid, rd->root);
}

int
vrmRunDirCheckSocket(vrmRunDir *rd, const char *name, gid_t gid)
{
    g_autofree char *shown = g_build_filename(rd->path, name, NULL);
    struct stat st;

    if (fstatat(rd->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        vrmReportSystemError(errno, _("cannot inspect the control socket %1$s"), shown);
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        vrmReportError(VRM_ERR_CONFIG, _("%1$s is not a socket"), shown);
        return -1;
    }
    if (!rd->root)
        return 0;
    /* the unit's SocketGroup= should have done it: say so, and repair */
    if (st.st_uid != 0 || st.st_gid != gid) {
        VRM_WARN(_("the control socket %1$s is %2$u:%3$u, not 0:%4$u: repairing it (set SocketGroup= in virt-rdmad.socket)"),
                 shown, (unsigned int)st.st_uid, (unsigned int)st.st_gid,
                 (unsigned int)gid);
        if (fchownat(rd->fd, name, 0, gid, AT_SYMLINK_NOFOLLOW) < 0) {
            vrmReportSystemError(errno, _("cannot give the control socket %1$s to its group"),
                                 shown);
            return -1;
        }
    }
    if ((st.st_mode & 07777) != VRM_SOCKET_MODE) {
        VRM_WARN(_("the control socket %1$s has mode %2$04o, not 0660: repairing it"),
                 shown, (unsigned int)(st.st_mode & 07777));
        if (fchmodat(rd->fd, name, VRM_SOCKET_MODE, 0) < 0) {
            vrmReportSystemError(errno, _("cannot set the mode of the control socket %1$s"),
                                 shown);
            return -1;
        }
    }
    return 0;
}

/* Empty and remove @dirfd's child directory @name (what a job left) */
static int
vrmRemoveDirAt(int parentFd, const char *name, const char *shown)
{
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    DIR *dir;
    struct dirent *ent;
    int fd;
    guint i;

    if ((fd = vrmOpenDirAt(parentFd, name)) < 0) {
        if (errno == ENOENT)
            return 0;
        vrmReportSystemError(errno, _("cannot open the directory %1$s"), shown);
        return -1;
    }
    if (!(dir = fdopendir(fd))) {
        vrmReportSystemError(errno, _("cannot read the directory %1$s"), shown);
        close(fd);
        return -1;
    }
    while ((ent = readdir(dir))) {
        if (!g_str_equal(ent->d_name, ".") && !g_str_equal(ent->d_name, ".."))
            g_ptr_array_add(names, g_strdup(ent->d_name));
    }
    for (i = 0; i < names->len; i++) {
        /* sockets and files only: a directory in there is not ours */
        if (unlinkat(dirfd(dir), names->pdata[i], 0) < 0 && errno != ENOENT)
            VRM_WARN(_("cannot remove %1$s/%2$s: %3$s"), shown,
                     (const char *)names->pdata[i], g_strerror(errno));
    }
    closedir(dir);
    if (unlinkat(parentFd, name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
        vrmReportSystemError(errno, _("cannot remove the directory %1$s"), shown);
        return -1;
    }
    return 0;
}

int
vrmRunDirDomainCreate(vrmRunDir *rd, const char *uuid, uid_t qemuUid,
                      gid_t engineGid, bool listen, vrmDomainDir *dir,
                      int *listenFd, int *diskListenFd)
{
    g_autofree char *name = g_ascii_strdown(uuid, -1);
    g_autofree char *shown = g_build_filename(rd->path, VRM_HELPER_DOMAIN_DIR,
                                              name, NULL);
    g_autofree char *sockShown = g_build_filename(shown, VRM_HELPER_DOMAIN_SOCKET,
                                                  NULL);
    g_autofree char *diskShown = g_build_filename(shown, VRM_HELPER_DOMAIN_DISK_SOCKET,
                                                  NULL);
    struct stat st;
    int fd;
    int lfd = -1;
    int dfd = -1;

    memset(dir, 0, sizeof(*dir));
    dir->fd = -1;
    if (!g_uuid_string_is_valid(name)) {
        vrmReportError(VRM_ERR_INVALID_ARG, _("'%1$s' is not a domain UUID"), uuid);
        return -1;
    }
    /* what an earlier job left (the helper was killed, say): start afresh */
    if (vrmRemoveDirAt(rd->qemuFd, name, shown) < 0)
        return -1;
    if (mkdirat(rd->qemuFd, name, 0700) < 0) {
        vrmReportSystemError(errno, _("cannot create the directory %1$s"), shown);
        return -1;
    }
    if ((fd = vrmOpenDirAt(rd->qemuFd, name)) < 0 || fstat(fd, &st) < 0) {
        vrmReportSystemError(errno, _("cannot open the directory %1$s"), shown);
        if (fd >= 0)
            close(fd);
        unlinkat(rd->qemuFd, name, AT_REMOVEDIR);
        return -1;
    }
    /* the socket first, while the directory is root's alone */
    if (listen &&
        (lfd = vrmListenAt(fd, VRM_HELPER_DOMAIN_SOCKET, sockShown, qemuUid,
                           engineGid, rd->root)) < 0)
        goto error;
    if (listen && diskListenFd &&
        (dfd = vrmListenAt(fd, VRM_HELPER_DOMAIN_DISK_SOCKET, diskShown, qemuUid,
                           engineGid, rd->root)) < 0)
        goto error;
    if (rd->root && fchown(fd, qemuUid, engineGid) < 0) {
        vrmReportSystemError(errno, _("cannot give the directory %1$s to %2$u:%3$u"),
                             shown, (unsigned int)qemuUid, (unsigned int)engineGid);
        goto error;
    }
    if (fchmod(fd, rd->root ? VRM_DOMAIN_DIR_MODE : 0700) < 0) {
        vrmReportSystemError(errno, _("cannot set the mode of the directory %1$s"), shown);
        goto error;
    }
    close(fd);
    dir->fd = openat(rd->qemuFd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    dir->uuid = g_steal_pointer(&name);
    dir->dev = st.st_dev;
    dir->ino = st.st_ino;
    if (listenFd)
        *listenFd = lfd;
    if (diskListenFd)
        *diskListenFd = dfd;
    return 0;

 error:
    if (lfd >= 0)
        close(lfd);
    if (dfd >= 0)
        close(dfd);
    close(fd);
    vrmRemoveDirAt(rd->qemuFd, name, shown);
    return -1;
}

void
vrmRunDirDomainRemove(vrmRunDir *rd, vrmDomainDir *dir)
{
    g_autofree char *shown = NULL;
    struct stat st;

    if (!dir->uuid)
        return;
    shown = g_build_filename(rd->path, VRM_HELPER_DOMAIN_DIR, dir->uuid, NULL);
    /* a later job of the same domain may have made it again: not ours */
    if (fstatat(rd->qemuFd, dir->uuid, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode) && st.st_dev == dir->dev && st.st_ino == dir->ino &&
        vrmRemoveDirAt(rd->qemuFd, dir->uuid, shown) < 0)
        VRM_WARN("%s", vrmGetLastErrorMessage());
    vrmDomainDirClear(dir);
}

void
vrmRunDirDomainAdopt(vrmRunDir *rd, vrmDomainDir *dir)
{
    struct stat st;

    if (!dir->uuid || !g_uuid_string_is_valid(dir->uuid))
        return;
    if (dir->fd >= 0)
        close(dir->fd);
    dir->fd = openat(rd->qemuFd, dir->uuid, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir->fd < 0 || fstat(dir->fd, &st) < 0) {
        vrmDomainDirClear(dir);
        return;
    }
    dir->dev = st.st_dev;
    dir->ino = st.st_ino;
}

void
vrmDomainDirClear(vrmDomainDir *dir)
{
    if (dir->fd >= 0)
        close(dir->fd);
    dir->fd = -1;
    g_clear_pointer(&dir->uuid, g_free);
    dir->dev = 0;
    dir->ino = 0;
}

char *
vrmRunDirEngineSocket(const vrmRunDir *rd, unsigned long long id)
{
    g_autofree char *name = g_strdup_printf("job-%llu.stats", id);

    return g_build_filename(rd->path, VRM_HELPER_ENGINE_DIR, name, NULL);
}
