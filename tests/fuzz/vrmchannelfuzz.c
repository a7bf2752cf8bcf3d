/*
 * vrmchannelfuzz.c: libFuzzer target for the channel state machines
 *
 * The real channel code (driver/transport/vrmchannel.c), a source and a
 * destination, joined by the FAKE provider (tests/driver/vrmfakeprovider.c),
 * with QEMU's sockets as socket pairs. The input is a script:
 *
 *   byte 0      source ring depth 2..9
 *   byte 1      destination ring depth 2..9
 *   byte 2      bit 0 pin-all, bit 1 WRITE_IMM, bit 2: 128K chunks (64K
 *               otherwise), bit 3: the destination's AUTH is wrong, bit 4:
 *               both ask whether QEMU lives when a stream ends, bits 5
 *               and 6: the source's / destination's QEMU is then gone,
 *               bit 7: the devices carry at most 1024 bytes per work
 *               request (Soft-RoCE's limit: chunks go in pieces)
 *   then ops    QEMU writes and closes on either side, a round of either
 *               channel, work requests carried either way (one at a time or
 *               in bulk), a hostile message injected into either channel
 *               (raw bytes, or a well-formed message of any type with fuzzed
 *               fields), a WRITE_WITH_IMM with a fuzzed immediate value.
 *
 * Checked on every round (an abort is a finding): the fake provider's rules
 * (every work request inside a registration with the right access, no send,
 * receive or completion queue over its size) and the channel's invariants
 * (credits never above the peer's depth, our ring never over-filled, no
 * queue of registration requests or results over its ring). Without a
 * hostile message, the bytes each QEMU end reads are a prefix of what the
 * other wrote, and once everything has run both channels have ended with
 * every byte delivered, or (a QEMU gone) the side whose QEMU went before
 * it had all of its stream failed saying so.
 */
#include <config.h>

#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vrmfakepair.h"
#include "vrmflow.h"
#include "vrmproto.h"
#include "vrmerror.h"
#include "vrmlog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_MAX_WRITE (64 * 1024)
/* the run-out stops after this many rounds in a row without movement */
#define RUN_OUT_IDLE 64

typedef struct {
    const uint8_t *p;
    size_t left;
} Input;

static uint8_t
take8(Input *in)
{
    if (!in->left)
        return 0;
    in->left--;
    return *in->p++;
}

static uint32_t
take32(Input *in)
{
    uint32_t v = 0;
    int i;

    for (i = 0; i < 4; i++)
        v = (v << 8) | take8(in);
    return v;
}

typedef struct {
    guint64 written[2];         /* bytes QEMU wrote on each side */
    guint64 read[2];            /* bytes QEMU read on each side */
    bool shut[2];
    bool hostile;               /* a message was injected: no end-to-end promise */
    guint8 buf[FUZZ_MAX_WRITE];
} Run;

/* The streams' own bytes are neither coverage nor a search target: their
 * generation and check are left out of the instrumentation (it would
 * otherwise drown the channel's features in per-byte comparisons) */
#define FUZZ_PLAIN __attribute__((no_sanitize("coverage", "address", "undefined"), noinline))

/* The stream written on side @side: byte n is pattern[side][n % PERIOD],
 * a table longer than the period so that any PERIOD bytes, or any write,
 * from any offset are one slice (written straight from the table, compared
 * with memcmp, not byte by byte) */
#define PERIOD 65521            /* prime: no alignment with the chunk sizes */
#define PATTERN_LEN (PERIOD + MAX(PERIOD, FUZZ_MAX_WRITE))
static guint8 pattern[2][PATTERN_LEN];

static void
patternInit(void)
{
    int side;
    guint32 k;

    for (side = 0; side < 2; side++)
        for (k = 0; k < PATTERN_LEN; k++)
            pattern[side][k] = (guint8)((k % PERIOD) * 131 + side * 7 + ((k % PERIOD) >> 11));
}

/* Offset of the first byte that differs, or -1 */
FUZZ_PLAIN static gssize
streamCheck(int side, guint64 n, const guint8 *buf, size_t len)
{
    size_t done = 0;

    while (done < len) {
        size_t off = (n + done) % PERIOD, k = MIN(len - done, (size_t)PERIOD), i;

        if (memcmp(buf + done, &pattern[side][off], k) != 0) {
            for (i = 0; buf[done + i] == pattern[side][off + i]; i++)
                ;
            return done + i;
        }
        done += k;
    }
    return -1;
}

static void
qemuWrite(vrmFakePair *p, Run *r, int side, size_t len)
{
    ssize_t w;

    if (r->shut[side])
        return;
    /* bytes written.. of the stream, one slice of the table */
    len = MIN(len, FUZZ_MAX_WRITE);
    w = send(p->qemu[side], &pattern[side][r->written[side] % PERIOD], len,
             MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0)
        r->written[side] += w;
}

/* Read what each QEMU end has; true when there was anything */
static bool
qemuRead(vrmFakePair *p, Run *r)
{
    bool got = false;
    int side;

    for (side = 0; side < 2; side++) {
        ssize_t n;

        while ((n = recv(p->qemu[side], r->buf, sizeof(r->buf), MSG_DONTWAIT)) > 0) {
            gssize bad;

            /* what side `side` reads was written by the other side */
            if (!r->hostile && (bad = streamCheck(!side, r->read[side], r->buf, n)) >= 0)
                g_error("side %d read a wrong byte at offset %" G_GUINT64_FORMAT,
                        side, r->read[side] + bad);
            r->read[side] += n;
            got = true;
        }
    }
    return got;
}

/* A well-formed message of any type, fields from the input */
static size_t
buildMessage(Input *in, guint8 *buf, const vrmFakePair *pair)
{
    int type = take8(in) % VRM_MSG_LAST;
    guint32 n = 1 + take8(in) % 4, i;

    switch (type) {
    case VRM_MSG_ERROR:
        return vrmProtoBuildError(buf, take8(in), "fuzz");
    case VRM_MSG_RAM_BLOCKS: {
        vrmProtoRingEntry e[4];

        for (i = 0; i < n; i++)
            e[i] = (vrmProtoRingEntry) { .index = take8(in) % 10, .depth = take8(in) % 10,
                                         .length = 65536u << (take8(in) % 2),
                                         .rkey = take32(in), .addr = take32(in) };
        return vrmProtoBuildRing(buf, e, n);
    }
    case VRM_MSG_REGISTER_REQUEST: {
        guint32 idx[4];

        for (i = 0; i < n; i++)
            idx[i] = take8(in) % 12;
        return vrmProtoBuildRegRequest(buf, idx, n);
    }
    case VRM_MSG_REGISTER_RESULT: {
        vrmProtoRegResult res[4];

        for (i = 0; i < n; i++)
            res[i] = (vrmProtoRegResult) { .index = take8(in) % 12, .rkey = take32(in),
                                           .addr = take32(in) };
        return vrmProtoBuildRegResult(buf, res, n);
    }
    case VRM_MSG_DATA: {
        vrmProtoDataEntry d[4];

        for (i = 0; i < n; i++)
            d[i] = (vrmProtoDataEntry) { .index = take8(in) % 12, .length = take32(in) % 200000 };
        return vrmProtoBuildData(buf, d, n);
    }
    case VRM_MSG_EOF:
    case VRM_MSG_EOF_ACK:
        return vrmProtoBuildU64(buf, type, take32(in));
    case VRM_MSG_READY:
    case VRM_MSG_CHANNEL_OPEN:
    case VRM_MSG_CHANNEL_UNUSED:
    case VRM_MSG_KEEPALIVE:
    case VRM_MSG_CHANNEL_CONNECT:
        return vrmProtoBuildU32Pair(buf, type, take8(in) % 6, 0);
    case VRM_MSG_AUTH: {
        guint8 mac[VRM_PROTO_MAC_LEN];

        /* the right proof or a made-up one */
        if (take8(in) & 1)
            memcpy(mac, pair->auth, sizeof(mac));
        else
            for (i = 0; i < sizeof(mac); i++)
                mac[i] = take8(in);
        return vrmProtoBuildAuth(buf, mac);
    }
    default:
        return 0;
    }
}

/* g_error() stops at a breakpoint (SIGTRAP), which libFuzzer does not
 * catch: a finding would leave no input behind. Make it an abort. */
static void
onTrap(int sig G_GNUC_UNUSED)
{
    abort();
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    vrmLogSetLevel(VRM_LOG_ERROR);
    signal(SIGTRAP, onTrap);
    patternInit();
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Input in = { data, size };
    vrmFakePairConfig cfg = { 0 };
    vrmFakePair *p;
    static Run run;
    Run *r = &run;
    uint8_t flags;
    int ops = 0;

    memset(r, 0, offsetof(Run, buf));
    if (size < 3)
        return 0;
    cfg.srcDepth = 2 + take8(&in) % 8;
    cfg.dstDepth = 2 + take8(&in) % 8;
    flags = take8(&in);
    cfg.pinAll = flags & 1;
    cfg.writeImm = flags & 2;
    /* one chunk size for both: the pair's channels share it; the peer's
     * is taken from its description either way */
    cfg.chunkSize = (flags & 4) ? 128 * 1024 : 64 * 1024;
    cfg.badAuth = flags & 8;
    cfg.checkEnd = flags & 16;
    cfg.maxMessage = (flags & 128) ? 1024 : 0;

    vrmFakeViolationReset();
    p = vrmFakePairNew(&cfg);
    p->qemuExited[0] = flags & 32;
    p->qemuExited[1] = flags & 64;
    while (in.left && ops++ < 400) {
        uint8_t op = take8(&in) % 16;
        int side = op & 1;
        guint8 msg[VRM_CONTROL_MESSAGE_MAX + 64];
        size_t len;

        switch (op >> 1) {
        case 0:                                 /* QEMU writes */
            qemuWrite(p, r, side, take8(&in) * 1024 + take8(&in));
            break;
        case 1:                                 /* QEMU closes its write side */
            if (!r->shut[side]) {
                shutdown(p->qemu[side], SHUT_WR);
                r->shut[side] = true;
            }
            break;
        case 2:                                 /* one round of one channel */
            vrmFakePairGiveSockets(p);
            vrmFakePairStepSide(p, side);
            break;
        case 3:                                 /* carry work requests */
            if (!p->failed[side])
                vrmFakeQPDeliver(p->qp[side], 1 + take8(&in) % 8);
            break;
        case 4:                                 /* hostile: raw bytes */
            /* MIN() evaluates its arguments twice: take the bytes first
             * (a length taken twice overflowed msg; found by a long run) */
            len = take8(&in) * 20;
            len += take8(&in);
            len = MIN(len, sizeof(msg));
            len = MIN(len, in.left);
            memcpy(msg, in.p, len);
            in.p += len;
            in.left -= len;
            vrmFakeQPInject(p->qp[side], msg, len);
            r->hostile = true;
            break;
        case 5:                                 /* hostile: well-formed */
            if ((len = buildMessage(&in, msg, p))) {
                vrmFakeQPInject(p->qp[side], msg, len);
                r->hostile = true;
            }
            break;
        case 6:                                 /* hostile: immediate data */
            vrmFakeQPInjectImm(p->qp[side], take32(&in));
            r->hostile = true;
            break;
        case 7:                                 /* both rounds, and QEMU reads */
            vrmFakePairGiveSockets(p);
            vrmFakePairStep(p, 1 + take8(&in) % 64);
            qemuRead(p, r);
            break;
        }
        if (vrmFakeViolation())
            g_error("fake provider: %s", vrmFakeViolation());
    }

    /* run out: the rest must finish on its own */
    if (!r->hostile && !cfg.badAuth) {
        int rounds, idle = 0;

        if (!r->shut[0])
            shutdown(p->qemu[0], SHUT_WR);
        if (!r->shut[1])
            shutdown(p->qemu[1], SHUT_WR);
        /* Until both have finished, or nothing has moved for RUN_OUT_IDLE
         * rounds in a row: no channel progress, no work request carried,
         * no byte read by QEMU. Nothing in here waits on the clock (the
         * channel's timers are seconds long), so an idle round is a fixed
         * point and the rounds after it would change nothing; a side whose
         * QEMU has gone leaves the other waiting for an end that will not
         * come, and each such input spun all 20000 rounds (some 40% of the
         * fuzzer's CPU time, measured). */
        for (rounds = 0; rounds < 20000 && idle < RUN_OUT_IDLE; rounds++) {
            bool moved;

            vrmFakePairGiveSockets(p);
            moved = vrmFakePairStep(p, 64);
            moved |= qemuRead(p, r);
            if (vrmChannelFinished(p->ch[0]) && vrmChannelFinished(p->ch[1]))
                break;
            idle = moved ? 0 : idle + 1;
        }
        if (p->qemuGone[0] || p->qemuGone[1]) {
            /* a QEMU gone mid-stream: its side failed, naming it; the
             * other may wait for an end that will not come */
            int side = p->qemuGone[0] ? 0 : 1;

            if (!p->qemuExited[side] || !p->failed[side] || !p->error[side] ||
                !strstr(p->error[side], "exited mid-stream"))
                g_error("QEMU %d gone, yet: %s", side,
                        p->error[side] ? p->error[side] : "no failure");
            goto out;
        }
        if (p->failed[0] || p->failed[1])
            g_error("an honest run failed: %s", p->error[0] ? p->error[0] : p->error[1]);
        if (!vrmChannelFinished(p->ch[0]) || !vrmChannelFinished(p->ch[1]))
            g_error("an honest run did not finish (tx %s/%s, rx %s/%s)",
                    vrmChannelTxTypeToString(vrmChannelTxState(p->ch[0])),
                    vrmChannelTxTypeToString(vrmChannelTxState(p->ch[1])),
                    vrmChannelRxTypeToString(vrmChannelRxState(p->ch[0])),
                    vrmChannelRxTypeToString(vrmChannelRxState(p->ch[1])));
        if (r->read[1] != r->written[0] || r->read[0] != r->written[1])
            g_error("bytes lost: %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT " and %"
                    G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT, r->read[1], r->written[0],
                    r->read[0], r->written[1]);
    }
 out:
    vrmFakePairFree(p);
    if (vrmFakeViolation())
        g_error("fake provider: %s", vrmFakeViolation());
    return 0;
}
