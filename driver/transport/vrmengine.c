/*
 * vrmengine.c: one job on one host: rdma_cm and the mutual authentication,
 * QEMU's sockets and their credentials, deadlines, stats, and the order of
 * teardown (docs/protocol.rst, version 2)
 *
 * Threads and the lock rule: the engine's main thread runs a GMainLoop:
 * rdma_cm events, device async events, QEMU's listening socket (source),
 * ordered socket connects (destination), the stats socket, timers and
 * signals. It alone creates and destroys rdma_cm ids, queue pairs and every
 * resource of a channel, and keeps what it knows of each channel in a slot
 * (vrmEngineSlot). Each channel's progress thread reaches the engine only
 * through the vrmChannelHost callbacks: fail() (under e->lock, a leaf lock)
 * and wake() (an eventfd); the main thread then reads the channel's events
 * from its mailbox (vrmChannelTakeEvents).
 *
 * Channels are connected lazily: the destination connects channel 0 at
 * start, and channel k only when the source, whose QEMU opened its k-th
 * connection, asks for it with CHANNEL_CONNECT on channel 0. Memory is
 * registered per channel when it connects, within the job's allowance.
 *
 * This file is the main loop, the deadlines, the stats and the start and
 * end of a job; rdma_cm is vrmenginecm.c, QEMU's sockets vrmengineqemu.c,
 * the slots, devices and pinned memory vrmengineslot.c, failure and
 * wake-ups vrmenginefail.c (what they share: vrmenginepriv.h).
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* accept4, SO_PEERCRED; in each of the engine's files, so
                      * that vrmenginepriv.h's system headers read the same */
#endif

#include "vrmenginepriv.h"

/* ------------------------------------------------------------------ */
/* Stats                                                               */

static double
vrmDataSeconds(gint64 first_us, gint64 last_us)
{
    return first_us ? (last_us - first_us) / 1e6 : 0.0;
}

void
vrmEngineGetStats(vrmEngine *e, vrmEngineStats *st)
{
    gint64 now = e->endUs ? e->endUs : g_get_monotonic_time();
    vrmStats total = { 0 };
    double curTotal = 0;
    gint64 dataFirst = 0, dataLast = 0;
    struct rusage ru;
    guint32 caps = e->caps;
    guint32 i;

    vrmEngineStatsInit(st);
    g_mutex_lock(&e->lock);
    st->state = e->failed ? VRM_ENGINE_STATE_FAILED :
        e->finished ? VRM_ENGINE_STATE_COMPLETED : VRM_ENGINE_STATE_RUNNING;
    if (e->failed) {
        st->error = g_strdup(e->failReason);
        st->errorCode = e->failCode ? e->failCode : VRM_ERR_INTERNAL;
    }
    g_mutex_unlock(&e->lock);

    for (i = 0; i < e->nslots; i++) {
        if (e->slots[i].state >= VRM_ENGINE_SLOT_ESTABLISHED) {
            caps = vrmChannelCaps(e->slots[i].ch);
            break;
        }
    }
    st->role = e->s.role;
    st->protocolVersion = VRM_PROTOCOL_VERSION;
    st->pinAll = caps & VRM_CAP_PIN_ALL;
    st->writeImm = caps & VRM_CAP_WRITE_IMM;
    st->capabilities = caps;
    st->channels = e->agreed ? e->agreed : e->s.channels;
    st->established = e->established;
    st->qemuConnections = e->s.role == VRM_ENGINE_ROLE_SOURCE ?
        e->acceptedSocks : e->nextOpen;
    for (i = e->s.channels; i < e->nslots; i++)
        st->diskConnections += e->s.role == VRM_ENGINE_ROLE_SOURCE ?
            e->slots[i].wanted : e->slots[i].open == VRM_ENGINE_SLOT_OPEN_CONNECTED;
    st->qemuGone = e->qemuGone;
    st->rdmaPort = e->rdmaPort;
    st->chunkSize = e->s.chunkSize;
    st->ringDepth = e->s.ringDepth;
    st->pinnedBound = vrmPinnedBytes(st->channels + e->s.diskChannels, e->s.ringDepth,
                                     e->s.chunkSize);
    st->elapsedS = e->startUs ? (now - e->startUs) / 1e6 : 0;
    /* The engine's own CPU time (all threads): what RDMA costs the host */
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        st->cpuUserS = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
        st->cpuSystemS = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    }
    for (i = 0; i < e->nslots; i++) {
        gint64 first, last;
        vrmStats snap;

        vrmChannelStats(e->slots[i].ch, &snap, &first, &last);
        if (first && (!dataFirst || first < dataFirst))
            dataFirst = first;
        dataLast = MAX(dataLast, last);
        vrmStatsAccumulate(&total, &snap);
        curTotal += e->slots[i].mbpsCurrent;
    }
    /* averages are taken over the data phase: first to last stream byte */
    st->dataS = vrmDataSeconds(dataFirst, dataLast);
    st->mbps = curTotal;
    st->mbpsAverage = vrmStatsMbps(total.v[VRM_STAT_BYTES_SENT] +
                                   total.v[VRM_STAT_BYTES_RECEIVED], st->dataS);
    st->bytesSent = total.v[VRM_STAT_BYTES_SENT];
    st->bytesReceived = total.v[VRM_STAT_BYTES_RECEIVED];
    st->bytesSpliced = total.v[VRM_STAT_BYTES_SPLICED];
    st->chunks = total.v[VRM_STAT_CHUNKS_WRITTEN];
    st->chunksReceived = total.v[VRM_STAT_CHUNKS_RECEIVED];
    st->registrations = total.v[VRM_STAT_REGISTRATIONS];
    st->registrationNs = total.v[VRM_STAT_REGISTRATION_US] * 1000;
    st->pinnedBytes = total.v[VRM_STAT_PINNED_BYTES];
    st->creditStalls = total.v[VRM_STAT_CREDIT_STALLS];
    st->completions = total.v[VRM_STAT_COMPLETIONS];
    st->cqPolls = total.v[VRM_STAT_CQ_POLLS];
    st->cqIdlePolls = total.v[VRM_STAT_CQ_IDLE_POLLS];
    st->doorbells = total.v[VRM_STAT_DOORBELLS];
    st->controlSent = total.v[VRM_STAT_CONTROL_SENT];
    st->controlReceived = total.v[VRM_STAT_CONTROL_RECEIVED];
}

static gboolean
vrmEngineStatsAccept(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngine *e = opaque;
    int conn;

    while ((conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        g_auto(vrmEngineStats) st = { 0 };
        g_autofree char *json = NULL;
        g_autofree char *line = NULL;

        vrmEngineGetStats(e, &st);
        json = vrmEngineStatsFormat(&st);
        line = g_strconcat(json, "\n", NULL);
        /* one record, far below the socket buffer: one non-blocking send;
         * a reader that does not take it loses it, the engine never waits */
        if (send(conn, line, strlen(line), MSG_NOSIGNAL) < 0)
            VRM_DEBUG("stats client: %s", g_strerror(errno));
        close(conn);
    }
    return G_SOURCE_CONTINUE;
}

/* ------------------------------------------------------------------ */
/* Main loop glue                                                      */

/* Channels that must be connected and authenticated by now */
static int
vrmEngineCheckDeadlines(vrmEngine *e, gint64 now)
{
    guint32 i;

    for (i = 0; i < e->nslots; i++) {
        vrmEngineSlot *slot = &e->slots[i];

        if (slot->openFd >= 0 && now > slot->openDeadline) {
            /* a TCP connect to QEMU still in progress (its SYN unanswered):
             * the watch alone would wait for ever */
            struct sockaddr_storage ss;
            g_autofree char *to = NULL;

            vrmEngineTcpSockaddr(&slot->tcpOpen, &ss);
            to = vrmTcpFormat(&ss);
            vrmReportError(VRM_ERR_TIMEOUT,
                           _("could not connect channel %1$u to QEMU at %2$s within %3$u seconds"),
                           slot->index, to, e->s.deadlineConnect);
            return -1;
        }
        if (!slot->wanted || slot->state >= VRM_ENGINE_SLOT_AUTHENTICATED ||
            now <= slot->connectDeadline)
            continue;
        if (e->s.role == VRM_ENGINE_ROLE_SOURCE && e->rejects)
            vrmReportError(VRM_ERR_TIMEOUT,
                           _("channel %1$u was not connected by an authenticated peer within %2$u seconds; %3$u connection attempts were refused (last: %4$s)"),
                           slot->index, e->s.deadlineConnect, e->rejects,
                           vrmProtoRejectReasonToString(e->lastReject));
        else
            vrmReportError(VRM_ERR_TIMEOUT,
                           _("channel %1$u was not connected within %2$u seconds"),
                           slot->index, e->s.deadlineConnect);
        return -1;
    }
    return 0;
}

/* QEMU has begun: connected on the source, announced on the destination */
static bool
vrmEngineStreamBegun(const vrmEngine *e)
{
    return e->s.role == VRM_ENGINE_ROLE_SOURCE ? e->acceptedSocks > 0 :
        e->slots[0].open != VRM_ENGINE_SLOT_OPEN_NONE;
}

static gboolean
vrmEngineTick(gpointer opaque)
{
    vrmEngine *e = opaque;
    gint64 now = g_get_monotonic_time();
    guint64 sum = 0;
    guint32 i;

    for (i = 0; i < e->nslots; i++) {
        vrmEngineSlot *slot = &e->slots[i];
        gint64 first, last;
        vrmStats snap;
        guint64 delta;

        vrmChannelStats(slot->ch, &snap, &first, &last);
        delta = snap.v[VRM_STAT_BYTES_SENT] + snap.v[VRM_STAT_BYTES_RECEIVED] -
                slot->sample.v[VRM_STAT_BYTES_SENT] - slot->sample.v[VRM_STAT_BYTES_RECEIVED];
        slot->mbpsCurrent = vrmStatsMbps(delta, VRM_ENGINE_TICK_MS / 1000.0);
        slot->sample = snap;
        /* keepalive completions are no progress */
        sum += snap.v[VRM_STAT_BYTES_SENT] + snap.v[VRM_STAT_BYTES_RECEIVED] +
               snap.v[VRM_STAT_REGISTRATIONS];
    }
    sum += e->established + e->acceptedSocks + e->acceptedDisks + e->nextOpen;
    if (sum != e->lastProgressSum) {
        e->lastProgressSum = sum;
        e->lastProgressUs = now;
    }
    if (vrmEngineCheckDeadlines(e, now) < 0) {
        vrmEngineFailLast(e);
    } else if (e->s.role == VRM_ENGINE_ROLE_SOURCE && !vrmEngineStreamBegun(e) &&
               e->s.qemuPid > 0 && vrmEngineProcessGone(e->s.qemuPid)) {
        /* its migration went elsewhere (libvirt's TCP, not steered here),
         * or it ended: nothing will come; the helper asks libvirt which */
        vrmReportError(VRM_ERR_PEER,
                       _("QEMU (pid %1$lld) exited without opening its migration stream to this engine"),
                       (long long)e->s.qemuPid);
        vrmEngineFailLast(e);
    } else if (e->s.waitStream && !vrmEngineStreamBegun(e)) {
        if (now - e->startUs > (gint64)e->s.waitStream * G_USEC_PER_SEC) {
            vrmReportError(VRM_ERR_TIMEOUT,
                           _("QEMU did not begin its migration stream within %1$u seconds"),
                           e->s.waitStream);
            vrmEngineFailLast(e);
        }
    } else if (e->s.idleTimeout &&
               now - e->lastProgressUs > (gint64)e->s.idleTimeout * G_USEC_PER_SEC) {
        vrmReportError(VRM_ERR_TIMEOUT,
                       _("nothing moved on any channel for %1$u seconds (idle timeout)"),
                       e->s.idleTimeout);
        vrmEngineFailLast(e);
    }
    return G_SOURCE_CONTINUE;
}

static gboolean
vrmEngineSignal(gpointer opaque)
{
    vrmEngine *e = opaque;

    vrmReportError(VRM_ERR_CANCELLED, _("interrupted by a signal"));
    vrmEngineFailLast(e);
    return G_SOURCE_CONTINUE;
}

/* Destination: channel 0 carried CHANNEL_CONNECT{k}: connect channel k */
static int
vrmEngineConnectRequested(vrmEngine *e, guint32 k)
{
    vrmEngineSlot *slot;

    if (k >= VRM_DISK_CHANNEL_BASE) {
        /* a disk: QEMU opens those in any order, each once */
        slot = vrmEngineSlotOf(e, k);
        if (!slot || slot->wanted) {
            if (!e->s.diskChannels)
                vrmReportError(VRM_ERR_PROTOCOL,
                               _("the source's QEMU copies a disk, but this job carries no disks: the destination's virt-rdmad found no disk to copy in the domain's definition"));
            else
                vrmReportError(VRM_ERR_PROTOCOL,
                               _("the source asked for disk channel %1$u, which is connected already or beyond the %2$u disk channels of this job"),
                               k - VRM_DISK_CHANNEL_BASE, e->s.diskChannels);
            return -1;
        }
    } else {
        /* QEMU opens its migration connections one after the other: so
         * must they come */
        if (k != e->nextConnect || k >= e->agreed) {
            vrmReportError(VRM_ERR_PROTOCOL,
                           _("the source asked for channel %1$u where channel %2$u of %3$u was next"),
                           k, e->nextConnect, e->agreed);
            return -1;
        }
        slot = &e->slots[k];
        e->nextConnect++;
    }
    slot->wanted = true;
    slot->connectDeadline = g_get_monotonic_time() +
                            (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;
    VRM_INFO("channel %u: QEMU opened it on the source, connecting", k);
    return vrmEngineConnectChannel(e, slot);
}

/* Every channel QEMU opened has ended, the main one too (it is wanted
 * from the start), and every disk connection */
static bool
vrmEngineAllDone(vrmEngine *e)
{
    guint32 i;

    for (i = 0; i < e->nslots; i++) {
        if (e->slots[i].wanted && e->slots[i].state != VRM_ENGINE_SLOT_DONE)
            return false;
    }
    return true;
}

/* A channel told something: act on its events */
static gboolean
vrmEngineWoken(gint fd, GIOCondition cond, gpointer opaque)
{
    vrmEngine *e = opaque;
    guint64 junk;
    guint32 i, j;

    if (read(fd, &junk, sizeof(junk)) < 0 && errno != EAGAIN)
        VRM_DEBUG("engine eventfd: %s", g_strerror(errno));
    for (i = 0; i < e->nslots; i++) {
        vrmEngineSlot *slot = &e->slots[i];
        vrmChannelEvents ev;

        vrmChannelTakeEvents(slot->ch, &ev);
        /* a fact for the final stats even when the job is failing: a
         * channel reports QEMU gone and fails the job at once, so the
         * failure is often seen first */
        if (ev.qemuGone)
            e->qemuGone = true;
        if (vrmEngineFailed(e))
            continue;
        if (ev.authFailed) {
            vrmEngineSlotReset(e, slot, VRM_REJECT_TOKEN,
                               _("the peer could not prove it holds this job's token"));
            continue;
        }
        if (ev.authenticated && slot->state < VRM_ENGINE_SLOT_AUTHENTICATED) {
            vrmEngineSlotAdvance(slot, VRM_ENGINE_SLOT_AUTHENTICATED);
            e->established++;
            VRM_INFO("channel %u: the peer proved it holds the token (%u established)",
                     slot->index, e->established);
            if (slot->qemuFd >= 0)
                vrmEngineGiveQemuSocket(slot);
        }
        if (ev.openRequested && slot->open == VRM_ENGINE_SLOT_OPEN_NONE)
            slot->open = VRM_ENGINE_SLOT_OPEN_REQUESTED;
        if (ev.tcpOpenSet) {
            slot->tcp = true;
            slot->tcpOpen = ev.tcpOpen;
        }
        for (j = 0; j < ev.nconnect; j++) {
            if (vrmEngineConnectRequested(e, ev.connect[j]) < 0) {
                vrmEngineFailLast(e);
                break;
            }
        }
        if (ev.streamEnded)
            vrmEngineStreamEnded(e, slot);
        if (ev.done)
            vrmEngineSlotAdvance(slot, VRM_ENGINE_SLOT_DONE);
    }
    if (vrmEngineFailed(e)) {
        g_main_loop_quit(e->loop);
        return G_SOURCE_CONTINUE;
    }
    if (e->s.role == VRM_ENGINE_ROLE_DESTINATION)
        vrmEngineOpenNext(e);
    if (vrmEngineAllDone(e)) {
        e->finished = true;
        g_main_loop_quit(e->loop);
    }
    return G_SOURCE_CONTINUE;
}

vrmEngine *
vrmEngineNew(const vrmEngineSettings *settings, const vrmToken *token)
{
    vrmEngine *e = g_new0(vrmEngine, 1);
    guint32 i;

    vrmEngineSettingsCopy(&e->s, settings);
    e->token = *token;
    e->portStr = g_strdup_printf("%u", e->s.port);
    g_mutex_init(&e->lock);
    e->unixFd = -1;
    e->diskFd = -1;
    e->tcpFd = -1;
    e->statsFd = -1;
    e->wakefd = -1;
    e->qemuPid = e->s.qemuPid > 0 ? (pid_t)e->s.qemuPid : 0;
    e->devices = g_ptr_array_new_with_free_func((GDestroyNotify)vrmRdmaDeviceFree);
    e->asyncSources = g_ptr_array_new();
    e->nslots = e->s.channels + e->s.diskChannels;
    e->slots = g_new0(vrmEngineSlot, e->nslots);
    for (i = 0; i < e->nslots; i++) {
        vrmEngineSlot *slot = &e->slots[i];

        slot->engine = e;
        slot->disk = i >= e->s.channels;
        slot->index = slot->disk ? VRM_DISK_CHANNEL_BASE + i - e->s.channels : i;
        slot->qemuFd = -1;
        slot->openFd = -1;
        slot->ch = vrmEngineNewChannel(e, slot);
    }
    e->nextConnect = 1;
    e->caps = (e->s.caps & vrmCapabilityMigrationMask()) |
              (e->s.diskChannels ? VRM_CAP_DISKS : 0) |
              (e->s.tcpListenFd >= 0 || e->s.tcpPortMax ? VRM_CAP_TCP : 0);
    return e;
}

/* Source: while it tears down, a failed job still answers connect
 * requests with its reject record */
static void
vrmEngineDrainCM(vrmEngine *e)
{
    if (e->cm && e->s.role == VRM_ENGINE_ROLE_SOURCE && vrmEngineFailed(e))
        vrmEngineCMEvent(e->cm->fd, G_IO_IN, e);
}

/* Source whose job failed: before it goes, a moment more of "job ended"
 * answers, so a destination still connecting stops at once instead of
 * retrying for its deadline (issue 13 item 12) */
static void
vrmEngineLinger(vrmEngine *e)
{
    gint64 until = g_get_monotonic_time() + VRM_ENGINE_LINGER_US;

    if (!e->cm || !e->listenId || e->s.role != VRM_ENGINE_ROLE_SOURCE || !vrmEngineFailed(e))
        return;
    while (g_get_monotonic_time() < until) {
        struct pollfd pfd = { .fd = e->cm->fd, .events = POLLIN };

        if (poll(&pfd, 1, 100) > 0)
            vrmEngineCMEvent(e->cm->fd, G_IO_IN, e);
    }
}

/* One of QEMU's listening sockets: closed, and unlinked if we bound it */
static void
vrmEngineCloseListener(int *fd, bool own, const char *path)
{
    if (*fd < 0)
        return;
    close(*fd);
    *fd = -1;
    if (own)
        unlink(path);
}

static void
vrmEngineTeardown(vrmEngine *e)
{
    guint32 i;

    /* 1. stop the progress threads (each bounded: poll interval + ERROR wait) */
    for (i = 0; i < e->nslots; i++)
        vrmChannelStop(e->slots[i].ch, VRM_ERR_CANCELLED, _("the job ended"));
    for (i = 0; i < e->nslots; i++) {
        vrmChannelEvents ev;

        vrmChannelJoin(e->slots[i].ch);
        vrmEngineDrainCM(e);
        /* the channel's last word, final now that its thread has ended:
         * "QEMU gone" comes just before the failure it causes, which can
         * end the main loop before the loop has read it */
        vrmChannelTakeEvents(e->slots[i].ch, &ev);
        if (ev.qemuGone)
            e->qemuGone = true;
    }
    e->endUs = g_get_monotonic_time();
    /* 2. QEMU's listening socket and the sockets not handed over */
    vrmEngineCloseListener(&e->unixFd, e->unixOwn, e->s.qemuPath);
    vrmEngineCloseListener(&e->diskFd, e->diskOwn, e->s.diskPath);
    vrmEngineCloseListener(&e->tcpFd, false, NULL);
    /* 3. disconnect; queue pairs, registrations and ids go in vrmEngineFree */
    for (i = 0; i < e->nslots; i++) {
        vrmEngineSlot *slot = &e->slots[i];

        if (slot->qemuFd >= 0)
            close(slot->qemuFd);
        slot->qemuFd = -1;
        if (slot->retrySource)
            g_source_remove(slot->retrySource);
        if (slot->openSource)
            g_source_remove(slot->openSource);
        slot->retrySource = slot->openSource = 0;
        if (slot->openFd >= 0)
            close(slot->openFd);
        slot->openFd = -1;
        if (slot->id && slot->state >= VRM_ENGINE_SLOT_ESTABLISHED)
            rdma_disconnect(slot->id);
    }
    vrmEngineDrainCM(e);
    vrmEngineLinger(e);
}

void
vrmEngineFree(vrmEngine *e)
{
    guint32 i;

    if (!e)
        return;
    for (i = 0; e->slots && i < e->nslots; i++) {
        /* the channel (queue pair, memory) before its rdma_cm id */
        vrmChannelFree(e->slots[i].ch);
        if (e->slots[i].id && rdma_destroy_id(e->slots[i].id) < 0)
            VRM_WARN("rdma_destroy_id on channel %u failed: %s", e->slots[i].index,
                     g_strerror(errno));
        if (e->slots[i].qemuFd >= 0)
            close(e->slots[i].qemuFd);
    }
    g_free(e->slots);
    if (e->listenId)
        rdma_destroy_id(e->listenId);
    for (i = 0; e->asyncSources && i < e->asyncSources->len; i++)
        g_source_remove(GPOINTER_TO_UINT(g_ptr_array_index(e->asyncSources, i)));
    if (e->asyncSources)
        g_ptr_array_free(e->asyncSources, TRUE);
    if (e->devices)
        g_ptr_array_free(e->devices, TRUE);
    if (e->cm)
        rdma_destroy_event_channel(e->cm);
    vrmEngineCloseListener(&e->unixFd, e->unixOwn, e->s.qemuPath);
    if (e->s.qemuListenFd >= 0)
        close(e->s.qemuListenFd);
    vrmEngineCloseListener(&e->diskFd, e->diskOwn, e->s.diskPath);
    if (e->s.diskListenFd >= 0)
        close(e->s.diskListenFd);
    vrmEngineCloseListener(&e->tcpFd, false, NULL);
    if (e->s.tcpListenFd >= 0)
        close(e->s.tcpListenFd);
    if (e->statsFd >= 0) {
        close(e->statsFd);
        unlink(e->s.statsSocket);
    }
    if (e->wakefd >= 0)
        close(e->wakefd);
    if (e->loop)
        g_main_loop_unref(e->loop);
    g_free(e->failReason);
    g_free(e->portStr);
    g_mutex_clear(&e->lock);
    vrmTokenClear(&e->token);
    vrmEngineSettingsClear(&e->s);
    g_free(e);
}

static int
vrmEngineListenRdma(vrmEngine *e)
{
    struct rdma_addrinfo *ai = NULL;
    g_autofree char *addr = vrmEngineFormatAddress(e->s.address, e->s.port);
    int rc;

    if (vrmEngineResolve(e, true, &ai) < 0)
        return -1;
    if (rdma_create_id(e->cm, &e->listenId, NULL, RDMA_PS_TCP) < 0) {
        vrmReportSystemError(errno, _("cannot create an rdma_cm id"));
        rdma_freeaddrinfo(ai);
        return -1;
    }
    rc = rdma_bind_addr(e->listenId, ai->ai_src_addr);
    rdma_freeaddrinfo(ai);
    if (rc < 0) {
        vrmReportSystemError(errno, _("cannot bind to the RDMA address %1$s"), addr);
        return -1;
    }
    if (e->listenId->verbs && !vrmEngineDevice(e, e->listenId->verbs))
        return -1;
    if (rdma_listen(e->listenId, VRM_ENGINE_LISTEN_BACKLOG) < 0) {
        vrmReportSystemError(errno, _("cannot listen on the RDMA address %1$s"), addr);
        return -1;
    }
    /* port 0: the kernel chose one; the stats record tells the launcher */
    e->rdmaPort = ntohs(rdma_get_src_port(e->listenId));
    VRM_INFO("listening on %s port %u for up to %u channels", e->s.address, e->rdmaPort,
             e->s.channels);
    return 0;
}

/* Source: QEMU's listening socket, inherited (*@inherited, from the
 * launcher, which owns its path) or bound at @path here (*@own) */
static int
vrmEngineTakeListener(int *inherited, const char *path, int *fd, bool *own)
{
    if (*inherited >= 0) {
        *fd = *inherited;
        *inherited = -1;
        if (vrmSetNonBlock(*fd) < 0 || fcntl(*fd, F_SETFD, FD_CLOEXEC) < 0)
            return -1;
        return 0;
    }
    if ((*fd = vrmEngineUnixListen(path)) < 0)
        return -1;
    *own = true;
    return 0;
}

static int vrmEngineRunInner(vrmEngine *e);

int
vrmEngineRun(vrmEngine *e)
{
    int ret = vrmEngineRunInner(e);

    if (ret < 0 && !vrmEngineFailed(e))
        vrmEngineFailLast(e);
    if (!e->endUs)
        e->endUs = g_get_monotonic_time();
    return ret;
}

/* The loop's own descriptors: its wake-up eventfd, rdma_cm's events
 * (non-blocking), the stats socket */
static int
vrmEngineOpenEvents(vrmEngine *e)
{
    int flags;

    if ((e->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        vrmReportSystemError(errno, _("cannot create an eventfd"));
        return -1;
    }
    if (!(e->cm = rdma_create_event_channel())) {
        vrmReportSystemError(errno, _("cannot open the rdma_cm event channel (is rdma_ucm loaded?)"));
        return -1;
    }
    flags = fcntl(e->cm->fd, F_GETFL);
    if (flags < 0 || fcntl(e->cm->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        vrmReportSystemError(errno, _("cannot make the rdma_cm event channel non-blocking"));
        return -1;
    }
    if (e->s.statsSocket &&
        (e->statsFd = vrmEngineUnixListen(e->s.statsSocket)) < 0)
        return -1;
    return 0;
}

/* Source: the rdma_cm listener, and QEMU's listeners as the helper handed
 * them (their sources added to SOURCES) */
static int
vrmEngineSourceListen(vrmEngine *e, guint *sources, guint *nsources)
{
    if (vrmEngineListenRdma(e) < 0)
        return -1;
    if (e->s.tcpListenFd >= 0) {
        /* the transparent mode: QEMU's TCP connections, steered here */
        if (vrmEngineTakeListener(&e->s.tcpListenFd, NULL, &e->tcpFd, NULL) < 0)
            return -1;
        sources[(*nsources)++] = g_unix_fd_add(e->tcpFd, G_IO_IN, vrmEngineTcpAccept, e);
    }
    if (e->s.qemuListenFd >= 0 || e->s.qemuPath) {
        /* the per-domain path (with a TCP listener too, the helper's
         * jobs: the hook cannot tell which URI libvirt was given) */
        if (vrmEngineTakeListener(&e->s.qemuListenFd, e->s.qemuPath,
                                  &e->unixFd, &e->unixOwn) < 0)
            return -1;
        sources[(*nsources)++] = g_unix_fd_add(e->unixFd, G_IO_IN, vrmEngineUnixAccept, e);
    }
    if (e->s.diskChannels) {
        if (vrmEngineTakeListener(&e->s.diskListenFd, e->s.diskPath,
                                  &e->diskFd, &e->diskOwn) < 0)
            return -1;
        sources[(*nsources)++] = g_unix_fd_add(e->diskFd, G_IO_IN, vrmEngineDiskAccept, e);
    }
    if (e->s.fault == VRM_ENGINE_FAULT_FAIL) {
        vrmReportError(VRM_ERR_INTERNAL, _("test hook: failing right after listening"));
        vrmEngineFailLast(e);
    }
    return 0;
}

static int
vrmEngineRunInner(vrmEngine *e)
{
    guint sources[10];
    guint nsources = 0;
    guint32 i;

    e->startUs = e->lastProgressUs = g_get_monotonic_time();
    e->loop = g_main_loop_new(NULL, FALSE);
    /* channel 0 is wanted from the start: the destination connects it at
     * once (the helper's "connected" point) */
    e->slots[0].wanted = true;
    e->slots[0].connectDeadline = e->startUs + (gint64)e->s.deadlineConnect * G_USEC_PER_SEC;

    if (vrmEngineSettingsValidate(&e->s) < 0 || vrmEngineCheckPinned(&e->s) < 0)
        return -1;
    if (vrmEngineOpenEvents(e) < 0)
        return -1;

    if (e->s.role == VRM_ENGINE_ROLE_SOURCE) {
        if (vrmEngineSourceListen(e, sources, &nsources) < 0)
            return -1;
    } else if (vrmEngineConnectChannel(e, &e->slots[0]) < 0) {
        return -1;
    }
    sources[nsources++] = g_unix_fd_add(e->cm->fd, G_IO_IN, vrmEngineCMEvent, e);
    sources[nsources++] = g_unix_fd_add(e->wakefd, G_IO_IN, vrmEngineWoken, e);
    if (e->statsFd >= 0)
        sources[nsources++] = g_unix_fd_add(e->statsFd, G_IO_IN, vrmEngineStatsAccept, e);
    sources[nsources++] = g_timeout_add(VRM_ENGINE_TICK_MS, vrmEngineTick, e);
    sources[nsources++] = g_unix_signal_add(SIGINT, vrmEngineSignal, e);
    sources[nsources++] = g_unix_signal_add(SIGTERM, vrmEngineSignal, e);
    g_assert(nsources <= G_N_ELEMENTS(sources));

    if (!vrmEngineFailed(e))
        g_main_loop_run(e->loop);

    vrmEngineTeardown(e);
    for (i = 0; i < nsources; i++)
        g_source_remove(sources[i]);

    if (!e->finished || vrmEngineFailed(e)) {
        g_mutex_lock(&e->lock);
        vrmSetLastError(e->failCode ? e->failCode : VRM_ERR_INTERNAL,
                        e->failReason ? e->failReason : _("the job ended before its channels did"));
        g_mutex_unlock(&e->lock);
        return -1;
    }
    return 0;
}
