/*
 * vrmhelperrundir.h: the run directory of virt-rdmad, made so that no
 * socket root creates or uses can be replaced by anybody else
 *
 *   <run-dir>                   root:root 0755
 *     virt-rdmad.sock           root:GROUP 0660 (the control socket)
 *     qemu/                     root:root 0755
 *       <uuid>/                 QEMU-user:engine-group 02750, one per job;
 *                               removed when the job ends (if still its own)
 *         migrate.sock          source: bound by virt-rdmad, QEMU-user:
 *                               engine-group 0660, passed to the engine;
 *                               destination: QEMU's own listener (the
 *                               setgid directory gives it the engine group)
 *         nbd.sock              the same for QEMU's disk copy (NBD), when
 *                               the domain has disks to copy
 *     engine/                   engine-user 0700: the engines' stats sockets
 *
 * Every operation below the run directory goes through directory file
 * descriptors (*at() calls, O_NOFOLLOW, AT_SYMLINK_NOFOLLOW); a socket is
 * bound while its directory is still root's alone, and only then is the
 * directory given to the QEMU user. Run as another user than root (tests),
 * ownership stays that user's.
 *
 * Public API summary
 * ------------------
 *   vrmRunDirOpen(path, engineUid, engineGid)   create or repair, open
 *   vrmRunDirFree(rd)
 *   vrmRunDirListen(rd, name, gid)              the control socket: bound,
 *                                               root:gid 0660, listening
 *   vrmRunDirCheckSocket(rd, name, gid)         the control socket systemd
 *                                               made: checked and repaired
 *   vrmRunDirDomainCreate(rd, uuid, uid, gid, listen, &dir, &fd, &diskFd)
 *                                               the per-domain directory;
 *                                               with @listen also its bound
 *                                               listening socket, and with
 *                                               @diskFd the disks' one
 *   vrmRunDirDomainRemove(rd, &dir)             remove it, if still the job's
 *   vrmRunDirDomainAdopt(rd, &dir)              a restarted helper holds it again
 *   vrmRunDirEngineSocket(rd, id)               <run-dir>/engine/job-ID.stats
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

typedef struct _vrmRunDir vrmRunDir;
struct _vrmRunDir {
    char *path;
    int fd;                 /* <run-dir> */
    int qemuFd;             /* <run-dir>/qemu */
    int engineFd;           /* <run-dir>/engine */
    bool root;              /* we run as root: ownership is ours to give */
};

/* A per-domain directory as it was made: removed only if still that one.
 * The descriptor keeps its inode alive, so a directory made again under
 * the same name cannot get the same inode number. */
typedef struct {
    char *uuid;
    int fd;                 /* O_PATH, -1: none */
    dev_t dev;
    ino_t ino;
} vrmDomainDir;

vrmRunDir *vrmRunDirOpen(const char *path, uid_t engineUid, gid_t engineGid);
void vrmRunDirFree(vrmRunDir *rd);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vrmRunDir, vrmRunDirFree);

int vrmRunDirListen(vrmRunDir *rd, const char *name, gid_t gid);
int vrmRunDirCheckSocket(vrmRunDir *rd, const char *name, gid_t gid);

int vrmRunDirDomainCreate(vrmRunDir *rd, const char *uuid, uid_t qemuUid,
                          gid_t engineGid, bool listen, vrmDomainDir *dir,
                          int *listenFd, int *diskListenFd);
void vrmRunDirDomainRemove(vrmRunDir *rd, vrmDomainDir *dir);
/* After a restart: hold @dir->uuid's directory as it is now (if any) */
void vrmRunDirDomainAdopt(vrmRunDir *rd, vrmDomainDir *dir);
void vrmDomainDirClear(vrmDomainDir *dir);

char *vrmRunDirEngineSocket(const vrmRunDir *rd, unsigned long long id);
