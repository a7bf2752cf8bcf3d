/*
 * vrmengineqemu.c: QEMU's side of a job: its listening sockets (the source's
 * per-domain socket, its disks', the transparent mode's TCP), the
 * credentials of what connects, and the destination's ordered connects
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* accept4, SO_PEERCRED; in each of the engine's files, so
                      * that vrmenginepriv.h's system headers read the same */
#endif

#include "vrmenginepriv.h"

/* A listening socket at @path, mode 0600 by the engine's umask (set by
 * its main at start): no chmod by path after bind */
int
vrmEngineUnixListen(const char *path)
{
    struct sockaddr_un sun;
    struct stat st;
    int fd;

    if (vrmUnixAddress(path, &sun) < 0)
        return -1;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path);
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
        vrmReportSystemError(errno, _("cannot create a UNIX socket"));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        vrmReportSystemError(errno, _("cannot bind a UNIX socket to %1$s"), path);
        close(fd);
        return -1;
    }
    if (listen(fd, VRM_ENGINE_LISTEN_BACKLOG) < 0) {
        vrmReportSystemError(errno, _("cannot listen on %1$s"), path);
        close(fd);
        unlink(path);
        return -1;
    }
    return fd;
}

/* The uid QEMU runs as: --qemu-uid, or ours */
static uid_t
vrmEngineQemuUid(vrmEngine *e)
{
    return e->s.qemuUid >= 0 ? (uid_t)e->s.qemuUid : geteuid();
}

static int
vrmEnginePeerCred(int fd, struct ucred *cred)
{
    socklen_t len = sizeof(*cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) < 0) {
        vrmReportSystemError(errno, _("cannot read the credentials of QEMU's socket"));
        return -1;
    }
    return 0;
}

/* Source: is this connection QEMU's? root (libvirtd hands the socket to
 * QEMU) or exactly QEMU's uid and, when given, its pid */
static bool
vrmEngineQemuAllowed(vrmEngine *e, const struct ucred *cred)
{
    if (cred->uid == 0)
        return true;
    if (cred->uid != vrmEngineQemuUid(e))
        return false;
    return e->s.qemuPid < 0 || cred->pid == e->s.qemuPid;
}

/* Source: the slot for a connection QEMU just opened on the migration
 * socket (@disk false: main, then multifd, in order) or on the disk
 * socket (NBD, one per disk it copies); NULL reported if there is none */
static vrmEngineSlot *
vrmEngineNextQemuSlot(vrmEngine *e, bool disk)
{
    guint32 max = e->agreed ? e->agreed : e->s.channels;

    if (!disk) {
        if (e->acceptedSocks >= max) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("QEMU opened more connections than the %1$u channels of this job"),
                           max);
            return NULL;
        }
        return &e->slots[e->acceptedSocks++];
    }
    if (e->acceptedDisks >= e->s.diskChannels) {
        vrmReportError(VRM_ERR_RESOURCE,
                       _("QEMU opened more disk connections than the %1$u disk channels of this job (one per disk of the domain that is neither read-only nor shareable, at most 16): name at most that many with --migrate-disks"),
                       e->s.diskChannels);
        return NULL;
    }
    if (e->agreed && !(vrmChannelCaps(e->slots[0].ch) & VRM_CAP_DISKS)) {
        vrmReportError(VRM_ERR_VERSION,
                       _("QEMU copies a disk (--copy-storage-all) but the destination's virt-rdma engine cannot carry disks; install the same virt-rdma on both hosts"));
        return NULL;
    }
    return &e->slots[e->s.channels + e->acceptedDisks++];
}

/* Source: QEMU's connection to its channel, once the peer proved itself */
void
vrmEngineGiveQemuSocket(vrmEngineSlot *slot)
{
    if (slot->tcp)
        vrmChannelGiveTcpSocket(slot->ch, slot->qemuFd, &slot->tcpOpen);
    else
        vrmChannelGiveSocket(slot->ch, slot->qemuFd);
    slot->qemuFd = -1;
}

/* Source: QEMU's connection @conn (ours now) takes the next slot; with
 * @tcpOpen, a steered TCP connection and where it was going. -1: the job
 * fails (reported) */
static int
vrmEngineTakeQemuConnection(vrmEngine *e, int conn, bool disk,
                            const vrmProtoTcpOpen *tcpOpen)
{
    vrmEngineSlot *slot;

    if (!(slot = vrmEngineNextQemuSlot(e, disk))) {
        close(conn);
        return -1;
    }
    slot->qemuFd = conn;
    if (tcpOpen) {
        slot->tcp = true;
        slot->tcpOpen = *tcpOpen;
    }
    if (slot->index > 0) {
        /* lazily: the destination connects the channel now */
        slot->wanted = true;
        slot->connectDeadline = g_get_monotonic_time() +
                                (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;
        if (vrmChannelAnnounce(e->slots[0].ch, slot->index) < 0)
            return -1;
    }
    if (slot->state >= VRM_ENGINE_SLOT_AUTHENTICATED)
        vrmEngineGiveQemuSocket(slot);
    return 0;
}

/* Source: a migration connection of the other kind than the job's first
 * (its socket path, or TCP steered here) is not QEMU's migration: QEMU
 * migrates over one URI. Refused with a warning; the job goes on. */
static bool
vrmEngineQemuKindAllowed(vrmEngine *e, bool tcp)
{
    if (e->acceptedSocks == 0 || e->slots[0].tcp == tcp)
        return true;
    if (vrmEngineMayWarn(e))
        VRM_WARN(_("refused a migration connection over %1$s: QEMU's first one came over %2$s, and it migrates over one of them"),
                 tcp ? "TCP" : _("its socket"), tcp ? _("its socket") : "TCP");
    return false;
}

/* Source: QEMU's connections on one of its sockets */
static void
vrmEngineAcceptQemu(vrmEngine *e, int fd, bool disk)
{
    struct ucred cred;
    int conn;

    while ((conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        if (vrmEnginePeerCred(conn, &cred) < 0) {
            close(conn);
            vrmEngineFailLast(e);
            return;
        }
        if (!vrmEngineQemuAllowed(e, &cred)) {
            /* not QEMU: refused, QEMU's own connections go on */
            if (vrmEngineMayWarn(e))
                VRM_WARN(_("refused a connection to QEMU's socket from pid %1$d (uid %2$u): only root or QEMU (uid %3$u%4$s) may connect"),
                         (int)cred.pid, (unsigned)cred.uid, (unsigned)vrmEngineQemuUid(e),
                         e->s.qemuPid > 0 ? _(", its pid") : "");
            close(conn);
            continue;
        }
        if (!disk && !vrmEngineQemuKindAllowed(e, false)) {
            close(conn);
            continue;
        }
        /* what an operator reads in the helper's log (tests read the stats) */
        VRM_INFO("QEMU connection %u accepted (%s, pid %d, uid %u)",
                 disk ? VRM_DISK_CHANNEL_BASE + e->acceptedDisks : e->acceptedSocks,
                 disk ? "a disk's" : "migration", (int)cred.pid, (unsigned)cred.uid);
        if (vrmEngineTakeQemuConnection(e, conn, disk, NULL) < 0) {
            vrmEngineFailLast(e);
            return;
        }
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        vrmReportSystemError(errno, _("cannot accept a connection from QEMU"));
        vrmEngineFailLast(e);
    }
}

gboolean
vrmEngineUnixAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngineAcceptQemu(opaque, fd, false);
    return G_SOURCE_CONTINUE;
}

gboolean
vrmEngineDiskAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngineAcceptQemu(opaque, fd, true);
    return G_SOURCE_CONTINUE;
}

/* A TCP address as CHANNEL_OPEN_TCP names it, and back */
static bool
vrmEngineTcpOpenOf(const struct sockaddr_storage *ss, vrmProtoTcpOpen *open)
{
    memset(open, 0, sizeof(*open));
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

        open->family = VRM_PROTO_FAMILY_IPV4;
        open->port = ntohs(in->sin_port);
        memcpy(open->addr, &in->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

        open->family = VRM_PROTO_FAMILY_IPV6;
        open->port = ntohs(in6->sin6_port);
        memcpy(open->addr, &in6->sin6_addr, 16);
    } else {
        return false;
    }
    return open->port != 0;
}

socklen_t
vrmEngineTcpSockaddr(const vrmProtoTcpOpen *open, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (open->family == VRM_PROTO_FAMILY_IPV4) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;

        in->sin_family = AF_INET;
        in->sin_port = htons(open->port);
        memcpy(&in->sin_addr, open->addr, 4);
        return sizeof(*in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(open->port);
        memcpy(&in6->sin6_addr, open->addr, 16);
        return sizeof(*in6);
    }
}

/* Source, transparent mode: is @conn (from @peer) a connection of QEMU's
 * that the job's rule steered here? Its original destination (@open) is
 * what the peer connects to. false: refused, and said why. */
static bool
vrmEngineTcpAdmit(vrmEngine *e, int conn, const struct sockaddr_storage *peer,
                  vrmProtoTcpOpen *open)
{
    g_autofree char *from = vrmTcpFormat(peer);
    g_autofree char *to = NULL;
    struct sockaddr_storage orig;
    uid_t uid = 0;
    int rc;

    if ((rc = vrmTcpOriginalDestination(conn, &orig)) <= 0) {
        /* a local process that connected to the engine's port itself */
        if (rc < 0)
            vrmResetLastError();
        if (vrmEngineMayWarn(e))
            VRM_WARN(_("refused a TCP connection from %1$s: it was not steered to this job by the transparent mode's rule"),
                     from);
        return false;
    }
    to = vrmTcpFormat(&orig);
    /* the connecting socket, as it sees itself: bound to @peer, connected
     * to where it was going */
    if ((rc = vrmTcpSocketUid(peer, &orig, &uid)) <= 0 ||
        (uid != 0 && uid != vrmEngineQemuUid(e))) {
        if (rc < 0)
            vrmResetLastError();
        if (vrmEngineMayWarn(e)) {
            if (rc > 0)
                VRM_WARN(_("refused a TCP connection from %1$s to %2$s: its socket belongs to uid %3$u, not to QEMU's user (uid %4$u) or root"),
                         from, to, (unsigned)uid, (unsigned)vrmEngineQemuUid(e));
            else
                VRM_WARN(_("refused a TCP connection from %1$s to %2$s: its socket is not in the kernel's table (it closed at once)"),
                         from, to);
        }
        return false;
    }
    if (!vrmEngineTcpOpenOf(&orig, open))
        return false;
    VRM_INFO("QEMU connection %u accepted (TCP from %s to %s, uid %u)",
             e->acceptedSocks, from, to, (unsigned)uid);
    return true;
}

gboolean
vrmEngineTcpAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngine *e = opaque;
    struct sockaddr_storage peer;
    socklen_t len = sizeof(peer);
    vrmProtoTcpOpen open;
    int conn;

    while ((conn = accept4(fd, (struct sockaddr *)&peer, &len,
                           SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        len = sizeof(peer);
        if (!vrmEngineTcpAdmit(e, conn, &peer, &open) ||
            !vrmEngineQemuKindAllowed(e, true)) {
            close(conn);
            continue;
        }
        vrmTcpSetNoDelay(conn);
        if (vrmEngineTakeQemuConnection(e, conn, false, &open) < 0) {
            vrmEngineFailLast(e);
            return G_SOURCE_CONTINUE;
        }
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
        errno != ECONNABORTED) {
        vrmReportSystemError(errno, _("cannot accept a connection from QEMU"));
        vrmEngineFailLast(e);
    }
    return G_SOURCE_CONTINUE;
}

/* Destination: is the listener QEMU of this domain? Its uid is QEMU's (or
 * root) and, when the domain is known, its command line names it. */
static int
vrmEngineCheckListener(vrmEngine *e, int fd, const char *sockPath)
{
    g_autofree char *path = NULL;
    g_autofree char *cmdline = NULL;
    struct ucred cred;
    gsize len = 0, off;
    bool named = false;

    if (vrmEnginePeerCred(fd, &cred) < 0)
        return -1;
    if (cred.uid != 0 && cred.uid != vrmEngineQemuUid(e)) {
        vrmReportError(VRM_ERR_AUTH,
                       _("QEMU's socket %1$s is served by pid %2$d of uid %3$u, not by QEMU's user (uid %4$u) or root; refusing to send it the migration"),
                       sockPath, (int)cred.pid, (unsigned)cred.uid,
                       (unsigned)vrmEngineQemuUid(e));
        return -1;
    }
    if (e->s.domainUUID) {
        path = g_strdup_printf("/proc/%d/cmdline", (int)cred.pid);
        if (g_file_get_contents(path, &cmdline, &len, NULL)) {
            for (off = 0; off < len; off += strlen(cmdline + off) + 1) {
                const char *arg = cmdline + off;
                gsize next = off + strlen(arg) + 1;

                if (g_str_equal(arg, "-uuid") && next < len &&
                    g_ascii_strcasecmp(cmdline + next, e->s.domainUUID) == 0)
                    named = true;
            }
        }
        if (!named) {
            vrmReportError(VRM_ERR_AUTH,
                           _("QEMU's socket %1$s is served by pid %2$d, whose command line does not carry -uuid %3$s: not QEMU of this domain; refusing to send it the migration"),
                           sockPath, (int)cred.pid, e->s.domainUUID);
            return -1;
        }
    }
    e->qemuPid = cred.pid;
    return 0;
}

static gboolean
vrmEngineOpenTcpWritable(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngineSlot *slot = opaque;

    slot->openSource = 0;
    vrmEngineOpenNext(slot->engine);
    return G_SOURCE_REMOVE;
}

/* Destination, transparent mode: may the source have channel @slot opened
 * to the TCP address it names? Only a port of QEMU's (libvirt's migration
 * range) on one of this host's addresses */
static int
vrmEngineTcpTargetAllowed(vrmEngine *e, vrmEngineSlot *slot,
                          const struct sockaddr_storage *ss, const char *to)
{
    int rc;

    if (!e->s.tcpPortMax) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the source's QEMU opened channel %1$u over TCP (to %2$s), but this engine was started without the transparent mode (--tcp-port-min, --tcp-port-max)"),
                       slot->index, to);
        return -1;
    }
    if (slot->tcpOpen.port < e->s.tcpPortMin || slot->tcpOpen.port > e->s.tcpPortMax) {
        vrmReportError(VRM_ERR_AUTH,
                       _("the source asks for channel %1$u to be opened to %2$s, outside QEMU's migration ports %3$u-%4$u; refused"),
                       slot->index, to, e->s.tcpPortMin, e->s.tcpPortMax);
        return -1;
    }
    if ((rc = vrmTcpAddressIsLocal(ss)) < 0)
        return -1;
    if (rc == 0) {
        vrmReportError(VRM_ERR_AUTH,
                       _("the source asks for channel %1$u to be opened to %2$s, which is not an address of this host; refused (an engine connects only to its own host's QEMU)"),
                       slot->index, to);
        return -1;
    }
    return 0;
}

/* Destination, transparent mode: connect @slot's channel to QEMU's TCP
 * port that the source's QEMU meant to reach, without blocking (a connect
 * in progress is watched), retrying a refused one until the deadline.
 * 1: connected, 0: in progress or a retry is scheduled, -1: the job fails. */
static int
vrmEngineOpenTcpSlot(vrmEngine *e, vrmEngineSlot *slot)
{
    struct sockaddr_storage ss;
    socklen_t sslen = vrmEngineTcpSockaddr(&slot->tcpOpen, &ss);
    socklen_t len = sizeof(int);
    g_autofree char *to = vrmTcpFormat(&ss);
    uid_t uid = 0;
    int fd, err = 0, rc;

    if (!slot->openDeadline) {
        slot->openDeadline = g_get_monotonic_time() +
                             (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;
        if (vrmEngineTcpTargetAllowed(e, slot, &ss, to) < 0)
            return -1;
    }
    if (slot->openFd < 0) {
        if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
            vrmReportSystemError(errno, _("cannot create a TCP socket"));
            return -1;
        }
        vrmTcpSetNoDelay(fd);
        if (connect(fd, (struct sockaddr *)&ss, sslen) == 0)
            goto connected;
        err = errno;
        if (err == EINPROGRESS) {
            slot->openFd = fd;
            slot->openSource = g_unix_fd_add(fd, G_IO_OUT, vrmEngineOpenTcpWritable, slot);
            return 0;
        }
    } else {
        fd = slot->openFd;
        slot->openFd = -1;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err == 0)
            goto connected;
    }
    close(fd);
    if ((err == ECONNREFUSED || err == EAGAIN || err == EINTR) &&
        g_get_monotonic_time() < slot->openDeadline) {
        slot->openSource = g_timeout_add(VRM_ENGINE_OPEN_RETRY_MS, vrmEngineOpenRetry, slot);
        return 0;
    }
    vrmReportSystemError(err,
                         _("could not connect channel %1$u to QEMU at %2$s within %3$u seconds"),
                         slot->index, to, e->s.deadlineConnect);
    return -1;

 connected:
    /* no credentials over TCP: the kernel's table names the listener's owner */
    if ((rc = vrmTcpSocketUid(&ss, NULL, &uid)) <= 0 ||
        (uid != 0 && uid != vrmEngineQemuUid(e))) {
        if (rc == 0)
            vrmReportError(VRM_ERR_AUTH,
                           _("nobody listens on QEMU's port %1$s any more; refusing to send it the migration"),
                           to);
        else if (rc > 0)
            vrmReportError(VRM_ERR_AUTH,
                           _("QEMU's port %1$s is served by uid %2$u, not by QEMU's user (uid %3$u) or root; refusing to send it the migration"),
                           to, (unsigned)uid, (unsigned)vrmEngineQemuUid(e));
        close(fd);
        return -1;
    }
    VRM_INFO("channel %u connected to QEMU at %s (TCP, uid %u)", slot->index, to,
             (unsigned)uid);
    vrmChannelGiveSocket(slot->ch, fd);
    slot->open = VRM_ENGINE_SLOT_OPEN_CONNECTED;
    return 1;
}

gboolean
vrmEngineOpenRetry(gpointer opaque)
{
    vrmEngineSlot *slot = opaque;

    slot->openSource = 0;
    vrmEngineOpenNext(slot->engine);
    return G_SOURCE_REMOVE;
}

/* Destination: connect @slot's channel to QEMU's socket at @path, without
 * ever blocking: a listener that does not take connections (its backlog
 * full) is retried until the deadline like one that is not there yet.
 * 1: connected, 0: a retry is scheduled, -1: the job fails. */
static int
vrmEngineOpenSlot(vrmEngine *e, vrmEngineSlot *slot, const char *path)
{
    struct sockaddr_un sun;
    int fd;

    if (!path) {
        vrmReportError(VRM_ERR_PROTOCOL,
                       _("the source's QEMU opened channel %1$u on its UNIX socket, but this engine takes only TCP connections (the transparent mode): start both engines the same way"),
                       slot->index);
        return -1;
    }
    if (!slot->openDeadline)
        slot->openDeadline = g_get_monotonic_time() +
                             (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;
    if (vrmUnixAddress(path, &sun) < 0)
        return -1;
    if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
        vrmReportSystemError(errno, _("cannot create a UNIX socket"));
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        int err = errno;

        close(fd);
        if ((err == ENOENT || err == ECONNREFUSED || err == EAGAIN || err == EINTR) &&
            g_get_monotonic_time() < slot->openDeadline) {
            slot->openSource = g_timeout_add(VRM_ENGINE_OPEN_RETRY_MS,
                                             vrmEngineOpenRetry, slot);
            return 0;
        }
        vrmReportSystemError(err,
                             _("could not connect channel %1$u to QEMU at %2$s within %3$u seconds"),
                             slot->index, path, e->s.deadlineConnect);
        return -1;
    }
    if (vrmEngineCheckListener(e, fd, path) < 0) {
        close(fd);
        return -1;
    }
    VRM_INFO("channel %u connected to QEMU (pid %d) at %s", slot->index, (int)e->qemuPid,
             path);
    vrmChannelGiveSocket(slot->ch, fd);
    slot->open = VRM_ENGINE_SLOT_OPEN_CONNECTED;
    return 1;
}

/* Destination: the channels whose CHANNEL_OPEN arrived. Migration
 * channels strictly in channel order (QEMU takes its main connection
 * first); disk channels each as it comes (every NBD connection stands
 * alone). */
void
vrmEngineOpenNext(vrmEngine *e)
{
    guint32 i;
    int rc;

    while (e->nextOpen < e->s.channels && !vrmEngineFailed(e)) {
        vrmEngineSlot *slot = &e->slots[e->nextOpen];

        if (slot->open == VRM_ENGINE_SLOT_OPEN_NONE || slot->openSource)
            break;
        rc = slot->tcp ? vrmEngineOpenTcpSlot(e, slot) :
                         vrmEngineOpenSlot(e, slot, e->s.qemuPath);
        if (rc < 0) {
            vrmEngineFailLast(e);
            return;
        }
        if (rc == 0)
            break;
        e->nextOpen++;
    }
    for (i = e->s.channels; i < e->nslots && !vrmEngineFailed(e); i++) {
        vrmEngineSlot *slot = &e->slots[i];

        if (slot->open != VRM_ENGINE_SLOT_OPEN_REQUESTED || slot->openSource)
            continue;
        if (vrmEngineOpenSlot(e, slot, e->s.diskPath) < 0) {
            vrmEngineFailLast(e);
            return;
        }
    }
}

/* A channel's QEMU stream ended: did QEMU go with it? (issue 13 item 11) */
void
vrmEngineStreamEnded(vrmEngine *e, vrmEngineSlot *slot)
{
    vrmChannelStreamVerdict(slot->ch, !(e->qemuPid > 0 && vrmEngineProcessGone(e->qemuPid)),
                            (int)e->qemuPid);
}
