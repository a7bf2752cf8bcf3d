/*
 * vrmflowtest.c: credit accounting of a channel direction; the pinned-memory
 * check and the counters of the transport
 */
#include <config.h>

#include <string.h>

#include "vrmflow.h"
#include "vrmproto.h"
#include "vrmstats.h"
#include "vrmtransport.h"
#include "vrmerror.h"
#include "vrmtestmain.h"

static void
testTxCredits(void)
{
    vrmTxFlow f;
    guint32 idx, i;

    vrmTxFlowInit(&f, 4);
    g_assert_cmpuint(vrmTxFlowCredits(&f), ==, 4);
    for (i = 0; i < 4; i++) {
        g_assert_cmpuint(vrmTxFlowPeek(&f, 0), ==, i);
        g_assert_true(vrmTxFlowTake(&f, &idx));
        g_assert_cmpuint(idx, ==, i);
    }
    g_assert_false(vrmTxFlowTake(&f, &idx));
    g_assert_cmpuint(vrmTxFlowCredits(&f), ==, 0);
    g_assert_cmpint(vrmTxFlowCredit(&f, 5), ==, -1);  /* more than in flight */
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_PROTOCOL);
    g_assert_cmpint(vrmTxFlowCredit(&f, 0), ==, -1);  /* zero credits */
    g_assert_cmpint(vrmTxFlowCredit(&f, 2), ==, 0);
    g_assert_cmpuint(vrmTxFlowCredits(&f), ==, 2);
    /* the ring wraps */
    g_assert_true(vrmTxFlowTake(&f, &idx));
    g_assert_cmpuint(idx, ==, 0);
    g_assert_cmpuint(vrmTxFlowPeek(&f, 3), ==, 0);
    g_assert_cmpint(vrmTxFlowCredit(&f, 3), ==, 0);
    g_assert_cmpint(vrmTxFlowCredit(&f, 1), ==, -1);
}

static void
testRxFill(void)
{
    vrmRxFlow f;

    vrmRxFlowInit(&f, 4, 65536);
    g_assert_cmpint(vrmRxFlowFill(&f, 1, 10), ==, -1);        /* out of order */
    g_assert_cmpint(vrmRxFlowFill(&f, 0, 0), ==, -1);         /* empty */
    g_assert_cmpint(vrmRxFlowFill(&f, 0, 65537), ==, -1);     /* bigger than a chunk */
    g_assert_cmpint(vrmRxFlowFill(&f, 0, 65536), ==, 0);
    g_assert_cmpint(vrmRxFlowFill(&f, 1, 1), ==, 0);
    g_assert_cmpint(vrmRxFlowFill(&f, 2, 1), ==, 0);
    g_assert_cmpint(vrmRxFlowFill(&f, 3, 1), ==, 0);
    g_assert_cmpuint(f.bytes, ==, 65539);
    /* the ring is full: a fifth chunk had no credit */
    g_assert_cmpint(vrmRxFlowFill(&f, 0, 1), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "without a credit"));
    vrmRxFlowDrained(&f);
    /* in the socket, its pages perhaps still read from (zero copy): held,
     * no credit */
    g_assert_cmpuint(vrmRxFlowTakeCredits(&f, true), ==, 0);
    g_assert_cmpint(vrmRxFlowFill(&f, 0, 1), ==, -1);
    vrmRxFlowReleased(&f, 1);
    /* released but not yet credited back: still no credit for the writer */
    g_assert_cmpint(vrmRxFlowFill(&f, 0, 1), ==, -1);
    g_assert_cmpuint(vrmRxFlowTakeCredits(&f, true), ==, 1);
    g_assert_cmpint(vrmRxFlowFill(&f, 0, 1), ==, 0);
}

static void
testRxTags(void)
{
    vrmRxFlow f;
    guint32 idx, i;

    vrmRxFlowInit(&f, 64, 65536);
    for (i = 0; i < 40; i++) {
        g_assert_cmpint(vrmRxFlowFillTag(&f, i % 32, 5, &idx), ==, 0);
        g_assert_cmpuint(idx, ==, i);
        vrmRxFlowDrained(&f);
        vrmRxFlowReleased(&f, 1);
        vrmRxFlowTakeCredits(&f, true);
    }
    g_assert_cmpint(vrmRxFlowFillTag(&f, 9, 5, &idx), ==, -1);
}

static void
testCreditCoalescing(void)
{
    vrmRxFlow f;
    guint32 i;

    vrmRxFlowInit(&f, 16, 65536);
    for (i = 0; i < 16; i++)
        g_assert_cmpint(vrmRxFlowFill(&f, i, 1), ==, 0);
    for (i = 0; i < 3; i++) {
        vrmRxFlowDrained(&f);
        vrmRxFlowReleased(&f, 1);
        g_assert_cmpuint(vrmRxFlowTakeCredits(&f, false), ==, 0);
    }
    vrmRxFlowDrained(&f);
    vrmRxFlowReleased(&f, 1);   /* a quarter of the ring */
    g_assert_cmpuint(vrmRxFlowTakeCredits(&f, false), ==, 4);
    vrmRxFlowDrained(&f);
    vrmRxFlowReleased(&f, 1);
    g_assert_cmpuint(vrmRxFlowTakeCredits(&f, false), ==, 0);
    g_assert_cmpuint(vrmRxFlowTakeCredits(&f, true), ==, 1);    /* flush */
    g_assert_cmpuint(vrmRxFlowTakeCredits(&f, true), ==, 0);
}

/* writer and receiver driven against each other: credits are conserved */
static void
testConservation(void)
{
    vrmTxFlow tx;
    vrmRxFlow rx;
    GRand *r = g_rand_new_with_seed(42);
    guint32 step;

    vrmTxFlowInit(&tx, 8);
    vrmRxFlowInit(&rx, 8, 65536);
    for (step = 0; step < 100000; step++) {
        guint32 idx;

        if (g_rand_boolean(r) && vrmTxFlowTake(&tx, &idx)) {
            g_assert_cmpint(vrmRxFlowFill(&rx, idx, 1 + g_rand_int_range(r, 0, 65536)), ==, 0);
        } else if (rx.filled && g_rand_boolean(r)) {
            vrmRxFlowDrained(&rx);
        } else if (rx.held && g_rand_boolean(r)) {
            vrmRxFlowReleased(&rx, g_rand_int_range(r, 1, rx.held + 1));
        } else {
            guint32 c = vrmRxFlowTakeCredits(&rx, g_rand_boolean(r));
            if (c)
                g_assert_cmpint(vrmTxFlowCredit(&tx, c), ==, 0);
        }
        g_assert_cmpuint(tx.inflight, ==, rx.filled + rx.held + rx.uncredited);
    }
    g_rand_free(r);
}

static void
describeRing(vrmRemoteRing *rr, guint32 depth, bool pinAll)
{
    guint32 i;

    for (i = 0; i < depth; i++) {
        vrmProtoRingEntry e = {
            .index = i, .depth = depth, .length = 65536, .rkey = pinAll ? 100 + i : 0,
            .addr = 0x10000000ull + (guint64)i * 65536,
        };
        g_assert_cmpint(vrmRemoteRingDescribe(rr, &e, pinAll), ==, 0);
    }
    g_assert_true(vrmRemoteRingComplete(rr));
}

/*
 * Issue 13 item 4: the request queue was sized by the LOCAL ring depth but
 * filled with up to four indexes of the PEER's ring (a destination with
 * max-ring-depth 2 or 3, a source with depth 4, no pin-all). Every array
 * of the remote ring now has the peer's depth; under ASan (the CI's unit
 * tier) an undersized queue is a heap overflow here.
 */
static void
testRemoteRingRequests(void)
{
    guint32 peer;

    for (peer = 2; peer <= 8; peer++) {
        vrmRemoteRing rr = { 0 };
        vrmTxFlow tx;
        guint32 out[16], n, i;
        gint64 waited;

        describeRing(&rr, peer, false);
        vrmTxFlowInit(&tx, peer);
        /* the writer's window (4 in the channel) and more */
        vrmRemoteRingQueueRequests(&rr, &tx, 16, 1000);
        g_assert_cmpuint(rr.queued, ==, peer);
        /* queued once only */
        vrmRemoteRingQueueRequests(&rr, &tx, 16, 2000);
        g_assert_cmpuint(rr.queued, ==, peer);
        n = vrmRemoteRingTakeRequests(&rr, out, 3);
        g_assert_cmpuint(n, ==, MIN(3, peer));
        n += vrmRemoteRingTakeRequests(&rr, out + n, 16);
        g_assert_cmpuint(n, ==, peer);
        g_assert_cmpuint(rr.queued, ==, 0);
        for (i = 0; i < n; i++) {
            vrmProtoRegResult r = { .index = out[i], .rkey = 7,
                                    .addr = 0x10000000ull + (guint64)out[i] * 65536 };

            g_assert_cmpuint(out[i], ==, i);
            g_assert_false(vrmRemoteRingUsable(&rr, out[i]));
            g_assert_cmpint(vrmRemoteRingRegistered(&rr, &r, 1500, &waited), ==, 0);
            g_assert_cmpint(waited, ==, 500);
            g_assert_true(vrmRemoteRingUsable(&rr, out[i]));
            /* a second result for the same chunk answers no request */
            g_assert_cmpint(vrmRemoteRingRegistered(&rr, &r, 1500, &waited), ==, -1);
        }
        vrmRemoteRingClear(&rr);
    }
}

static void
testRemoteRingChecks(void)
{
    vrmRemoteRing rr = { 0 };
    vrmProtoRingEntry e = { .index = 1, .depth = 4, .length = 65536 };
    vrmProtoRegResult r = { .index = 0, .addr = 0x10000000ull };
    gint64 waited;

    /* entries in order from 0 */
    g_assert_cmpint(vrmRemoteRingDescribe(&rr, &e, false), ==, -1);
    describeRing(&rr, 4, false);
    /* no fifth entry */
    e.index = 4;
    g_assert_cmpint(vrmRemoteRingDescribe(&rr, &e, false), ==, -1);
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "described its ring again"));
    /* a result nobody asked for, a wrong address, an index past the ring */
    g_assert_cmpint(vrmRemoteRingRegistered(&rr, &r, 0, &waited), ==, -1);
    r.index = 9;
    g_assert_cmpint(vrmRemoteRingRegistered(&rr, &r, 0, &waited), ==, -1);
    vrmRemoteRingClear(&rr);

    /* pin-all: every chunk usable from the description */
    describeRing(&rr, 3, true);
    g_assert_true(vrmRemoteRingUsable(&rr, 2));
    g_assert_false(vrmRemoteRingUsable(&rr, 3));
    vrmRemoteRingClear(&rr);
}

static void
testPinnedBound(void)
{
    g_auto(vrmEngineSettings) s = { 0 };

    vrmEngineSettingsInit(&s);
    s.channels = 2;
    s.ringDepth = 4;
    s.chunkSize = 65536;
    /* 2 * (2 rings * 4 * 64 KiB + (2*4+32 + 4*4+32) * 4 KiB) */
    g_assert_cmpuint(vrmEngineSettingsPinnedBytes(&s), ==, 2 * (2 * 4 * 65536 + 88 * 4096));
    s.maxPinned = 1024;
    g_assert_cmpint(vrmEngineCheckPinned(&s), ==, -1);
    g_assert_cmpint(vrmGetLastErrorCode(), ==, VRM_ERR_RESOURCE);
    /* memory is registered channel by channel: the first must fit */
    g_assert_nonnull(strstr(vrmGetLastErrorMessage(), "1 channel would pin 884736 bytes"));
}

static void
testStatsCounters(void)
{
    vrmStats s = { 0 }, snap, total = { 0 };

    vrmStatsAdd(&s, VRM_STAT_BYTES_SENT, 1000000);
    vrmStatsAdd(&s, VRM_STAT_CREDIT_STALLS, 2);
    vrmStatsSnapshot(&s, &snap);
    vrmStatsAccumulate(&total, &snap);
    vrmStatsAccumulate(&total, &snap);
    g_assert_cmpuint(total.v[VRM_STAT_BYTES_SENT], ==, 2000000);
    g_assert_cmpuint(total.v[VRM_STAT_CREDIT_STALLS], ==, 4);
    /* the seed's mbps: megabits per second */
    g_assert_cmpfloat_with_epsilon(vrmStatsMbps(1000000, 1.0), 8.0, 1e-9);
    g_assert_cmpfloat(vrmStatsMbps(5, 0), ==, 0);
}

static const vrmTestFunc testFuncs[] = {
    { "/flow/tx/credits", testTxCredits },
    { "/flow/rx/fill", testRxFill },
    { "/flow/rx/tags", testRxTags },
    { "/flow/rx/coalescing", testCreditCoalescing },
    { "/flow/conservation", testConservation },
    { "/flow/remote/requests", testRemoteRingRequests },
    { "/flow/remote/checks", testRemoteRingChecks },
    { "/settings/pinned", testPinnedBound },
    { "/stats/counters", testStatsCounters },
};

VRM_TEST_MAIN(NULL, testFuncs)
