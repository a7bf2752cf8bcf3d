/*
 * vrmfakepair.h: two real channels joined by the FAKE provider (tests,
 * fuzzers)
 *
 * A source channel and a destination channel, each on its own fake device,
 * their queue pairs joined by the fake wire, and for each a socket pair
 * standing for QEMU's connection (the test holds one end). The test drives
 * everything by hand: vrmFakePairStep() runs one round of both channels and
 * carries some work requests each way; nothing runs in a thread.
 */
#pragma once

#include <stdbool.h>

#include "vrmchannel.h"
#include "vrmfakeprovider.h"

typedef struct {
    guint32 srcDepth;
    guint32 dstDepth;
    guint32 chunkSize;
    bool pinAll;
    bool writeImm;
    bool badAuth;               /* the destination does not hold the token */
    bool checkEnd;              /* both ask before a QEMU stream ends */
    guint32 maxMessage;         /* both devices' message limit, 0: none */
    guint32 maxWrite;           /* the channels' setting (vrmChannelConfig) */
    gint64 *jobHeard;           /* vrmChannelHost's, or NULL */
    bool tcp;                   /* both agreed to VRM_CAP_TCP */
    bool tcpSockets;            /* QEMU's sockets are TCP over loopback */
    const vrmProtoTcpOpen *tcpOpen; /* the source's socket is QEMU's steered
                                 * TCP connection to this address */
} vrmFakePairConfig;

typedef struct {
    vrmFakePairConfig cfg;      /* as created */
    vrmChannel *ch[2];          /* 0: source, 1: destination */
    vrmRdmaDevice *dev[2];
    vrmRdmaQP *qp[2];           /* owned by the channels once attached */
    int qemu[2];                /* the test's end of each QEMU socket, -1 none */
    int engineSock[2];          /* the channel's end, until given */
    int failed[2];              /* vrmChannelStep returned -1 (1) or more */
    char *error[2];             /* and why */
    int failures;               /* fail() calls through the host */
    char *failure;              /* the first one's reason (under the pair's
                                 * lock: progress threads may call it) */
    guint8 auth[32];            /* the AUTH the source expects */
    bool authenticated;         /* events seen */
    bool authFailed;
    bool openRequested;
    vrmProtoTcpOpen tcpOpen;    /* the CHANNEL_OPEN_TCP the destination got */
    bool tcpOpenSet;
    guint32 connect[64];        /* CHANNEL_CONNECTs the destination got */
    guint32 nconnect;
    bool qemuExited[2];         /* set by the test: the verdict says "gone" */
    bool qemuGone[2];           /* the channel found it gone mid-stream */
} vrmFakePair;

vrmFakePair *vrmFakePairNew(const vrmFakePairConfig *cfg);
void vrmFakePairFree(vrmFakePair *p);

/* Hand each side its QEMU socket the way the engine does: the source's
 * once the destination authenticated, the destination's once CHANNEL_OPEN
 * has arrived; and answer when a stream ends (checkEnd): "QEMU lives",
 * or "it has gone" (pid 4242) once the test set qemuExited */
void vrmFakePairGiveSockets(vrmFakePair *p);
/* One round of one channel (a failure recorded in failed/error, the
 * channel's invariants checked); true when anything moved */
bool vrmFakePairStepSide(vrmFakePair *p, int side);
/* One round: step both channels, carry up to @wire work requests each way.
 * Returns true while anything moved. */
bool vrmFakePairStep(vrmFakePair *p, int wire);
/* Run rounds until nothing moves, or @rounds have passed */
void vrmFakePairRun(vrmFakePair *p, int rounds);
