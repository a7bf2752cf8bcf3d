/*
 * vrmfakepair.c: two real channels joined by the FAKE provider
 */
#include <config.h>

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "vrmfakepair.h"
#include "vrmproto.h"
#include "vrmerror.h"

static GMutex vrmFakePairLock;

static void
vrmFakePairFail(void *opaque, int code, const char *reason)
{
    vrmFakePair *p = opaque;

    g_mutex_lock(&vrmFakePairLock);
    p->failures++;
    if (!p->failure)
        p->failure = g_strdup(reason);
    g_mutex_unlock(&vrmFakePairLock);
}

static void
vrmFakePairWake(void *opaque)
{
}

/* Two connected TCP sockets over loopback (QEMU's TCP port in the
 * transparent mode), like socketpair() */
static void
vrmFakeTcpPair(int sv[2])
{
    struct sockaddr_in sin = { .sin_family = AF_INET };
    socklen_t len = sizeof(sin);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g_assert_cmpint(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), ==, 0);
    g_assert_cmpint(listen(lfd, 1), ==, 0);
    g_assert_cmpint(getsockname(lfd, (struct sockaddr *)&sin, &len), ==, 0);
    sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(connect(sv[0], (struct sockaddr *)&sin, sizeof(sin)), ==, 0);
    sv[1] = accept(lfd, NULL, NULL);
    g_assert_cmpint(sv[1], >=, 0);
    close(lfd);
}

vrmFakePair *
vrmFakePairNew(const vrmFakePairConfig *cfg)
{
    vrmFakePair *p = g_new0(vrmFakePair, 1);
    vrmChannelHost host = {
        .fail = vrmFakePairFail,
        .wake = vrmFakePairWake,
        .opaque = p,
        .jobHeard = cfg->jobHeard,
    };
    guint32 caps = (cfg->pinAll ? VRM_CAP_PIN_ALL : 0) |
                   (cfg->writeImm ? VRM_CAP_WRITE_IMM : 0) |
                   (cfg->tcp ? VRM_CAP_TCP : 0);
    guint32 sq[2], rq[2];
    int cqe[2];
    int i;

    p->cfg = *cfg;
    /* as the engine does: the channel splices into the QEMU sockets, and
     * splice() raises SIGPIPE on a closed one (send() is told not to) */
    signal(SIGPIPE, SIG_IGN);
    for (i = 0; i < 2; i++) {
        vrmChannelConfig cc = {
            .role = i == 0 ? VRM_ENGINE_ROLE_SOURCE : VRM_ENGINE_ROLE_DESTINATION,
            .index = 0,
            .chunkSize = cfg->chunkSize,
            .ringDepth = i == 0 ? cfg->srcDepth : cfg->dstDepth,
            .pinAll = cfg->pinAll,
            .checkEnd = cfg->checkEnd,
            .maxWrite = cfg->maxWrite,
        };
        int sv[2];

        p->dev[i] = vrmFakeDeviceNew(i == 0 ? "fake-src" : "fake-dst");
        p->dev[i]->maxMessage = cfg->maxMessage;
        p->ch[i] = vrmChannelNew(&cc, &host);
        g_assert_cmpint(vrmChannelQueueSizes(&cc, p->dev[i], &sq[i], &rq[i], &cqe[i]), ==, 0);
        g_assert_cmpint(vrmChannelSetup(p->ch[i], p->dev[i]), ==, 0);
        if (cfg->tcpSockets)
            vrmFakeTcpPair(sv);
        else
            g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
        fcntl(sv[0], F_SETFL, O_NONBLOCK);
        fcntl(sv[1], F_SETFL, O_NONBLOCK);
        p->qemu[i] = sv[0];
        p->engineSock[i] = sv[1];
    }
    /* one wire: each side's queues as that side sized them */
    vrmFakeQPPair(p->dev[0], p->dev[1], sq, rq, cqe, &p->qp[0], &p->qp[1]);
    for (i = 0; i < 2; i++)
        g_assert_cmpint(vrmChannelAttachQP(p->ch[i], p->qp[i], caps), ==, 0);

    /* the mutual authentication, as the engines set it up: the source
     * expects the AUTH the destination sends */
    {
        vrmToken token, other;
        guint8 nd[VRM_PROTO_NONCE_LEN], ns[VRM_PROTO_NONCE_LEN];

        g_assert_cmpint(vrmTokenGenerate(&token), ==, 0);
        g_assert_cmpint(vrmTokenGenerate(&other), ==, 0);
        g_assert_cmpint(vrmProtoNonce(nd), ==, 0);
        g_assert_cmpint(vrmProtoNonce(ns), ==, 0);
        vrmProtoMacDestination(&token, ns, nd, caps, 0, 1, p->auth);
        vrmChannelSetAuth(p->ch[0], p->auth);
        if (cfg->badAuth) {
            guint8 bad[VRM_PROTO_MAC_LEN];

            vrmProtoMacDestination(&other, ns, nd, caps, 0, 1, bad);
            vrmChannelSetAuth(p->ch[1], bad);
        } else {
            vrmChannelSetAuth(p->ch[1], p->auth);
        }
    }
    return p;
}

void
vrmFakePairFree(vrmFakePair *p)
{
    int i;

    if (!p)
        return;
    for (i = 0; i < 2; i++) {
        vrmChannelFree(p->ch[i]);
        vrmRdmaDeviceFree(p->dev[i]);
        if (p->qemu[i] >= 0)
            close(p->qemu[i]);
        if (p->engineSock[i] >= 0)
            close(p->engineSock[i]);
        g_free(p->error[i]);
    }
    g_free(p->failure);
    g_free(p);
}

void
vrmFakePairGiveSockets(vrmFakePair *p)
{
    vrmChannelEvents ev;
    guint32 k;
    int i;

    for (i = 0; i < 2; i++) {
        vrmChannelTakeEvents(p->ch[i], &ev);
        if (ev.authenticated)
            p->authenticated = true;
        if (ev.authFailed)
            p->authFailed = true;
        if (ev.openRequested)
            p->openRequested = true;
        if (ev.tcpOpenSet) {
            p->tcpOpen = ev.tcpOpen;
            p->tcpOpenSet = true;
        }
        if (ev.streamEnded)
            vrmChannelStreamVerdict(p->ch[i], !p->qemuExited[i], 4242);
        if (ev.qemuGone)
            p->qemuGone[i] = true;
        for (k = 0; k < ev.nconnect; k++)
            p->connect[p->nconnect++ % G_N_ELEMENTS(p->connect)] = ev.connect[k];
    }
    if (p->authenticated && p->engineSock[0] >= 0) {
        if (p->cfg.tcpOpen)
            vrmChannelGiveTcpSocket(p->ch[0], p->engineSock[0], p->cfg.tcpOpen);
        else
            vrmChannelGiveSocket(p->ch[0], p->engineSock[0]);
        p->engineSock[0] = -1;
    }
    if (p->openRequested && p->engineSock[1] >= 0) {
        vrmChannelGiveSocket(p->ch[1], p->engineSock[1]);
        p->engineSock[1] = -1;
    }
}

bool
vrmFakePairStepSide(vrmFakePair *p, int side)
{
    bool progress = false;
    int rc;

    if (p->failed[side])
        return false;
    if ((rc = vrmChannelStep(p->ch[side], &progress)) != 0) {
        p->failed[side] = rc < 0 ? 1 : rc == VRM_CHANNEL_UNAUTHENTICATED ? 2 : 3;
        p->error[side] = g_strdup(vrmGetLastErrorMessage());
    }
    if (vrmChannelCheckInvariants(p->ch[side]) < 0)
        g_error("%s", vrmGetLastErrorMessage());
    return progress;
}

bool
vrmFakePairStep(vrmFakePair *p, int wire)
{
    bool moved = false;
    int i;

    for (i = 0; i < 2; i++)
        moved |= vrmFakePairStepSide(p, i);
    for (i = 0; i < 2; i++) {
        if (!p->failed[i] && vrmFakeQPDeliver(p->qp[i], wire) > 0)
            moved = true;
    }
    return moved;
}

void
vrmFakePairRun(vrmFakePair *p, int rounds)
{
    int idle = 0;

    while (rounds-- > 0 && idle < 3) {
        vrmFakePairGiveSockets(p);
        idle = vrmFakePairStep(p, 64) ? 0 : idle + 1;
    }
}
