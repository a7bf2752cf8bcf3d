/*
 * vrmbenchnative: the engine's data path on this machine's own CPUs, no
 * sandbox, no RDMA device (issue 37 item 1; a benchmark: it shows, it
 * asserts nothing but errors)
 *
 * The verbs provider is FAKE: the unit tests' (tests/driver/
 * vrmfakeprovider.c), each pair of queue pairs carried by a NIC thread of
 * its own (vrmFakeQPStartNIC) whose memcpy of every RDMA WRITE stands for the
 * NIC's DMA. Everything else is the engine's real code: per channel a real
 * source vrmChannel and a real destination vrmChannel (vrmchannel.c,
 * vrmsplice.c, vrmflow.c), each in its own progress thread
 * (vrmChannelStart, the engine's), set up, authenticated and handed QEMU's
 * socket as the engine does it (tests/driver/vrmfakepair.c). What is not
 * run is the engine's main loop (rdma_cm, listening, the stats socket):
 * it does not touch a stream byte. A QEMU stand-in writes a fixed pattern
 * into the source's UNIX stream socket (writes of 512 KiB, multifd's
 * packet), another reads the destination's socket and checks every byte
 * (reads of 512 KiB, memcmp against the pattern); the sockets come from
 * socketpair(), AF_UNIX SOCK_STREAM, the engine's end non-blocking, as the
 * connections the engine accepts or opens.
 *
 * One run prints, each figure the median of 5 rounds (the range of
 * GiB/s beside it), the rounds interleaved so that the ceilings and the
 * engine see the same load:
 *   ceilings   memcpy of a 256 MiB buffer, one thread; one writer to one
 *              reader over a UNIX stream socket pair, 1, 2 and 4 pairs at
 *              once (the same stand-ins, the reader with and without the
 *              check)
 *   engine     1, 2 and 4 channels x chunks of 64 KiB to 4 MiB (the ring
 *              depth the helpers offer by default: 4, and 16 for 64 KiB
 *              chunks, vrmRingDepthDefault; WRITE_WITH_IMM; registration on
 *              first use, as the engine's defaults): GiB/s, CPU s/GiB of
 *              each side's progress threads, the fake NIC's CPU apart
 *              ("DMA"), syscalls and copies per MiB, the ratios to the
 *              socket pairs with as many pairs as channels, and the
 *              targets: GiB/s at least 0.8x theirs, CPU per GiB of each
 *              side at most 1.5x their reader's (source) and writer's
 *              (destination)
 *   syscalls   per MiB, by call, for every row
 *
 * How it counts. CPU: every thread's CLOCK_THREAD_CPUTIME_ID when it ends
 * (the channels' threads are wrapped at g_thread_try_new by the linker's
 * --wrap, so their code is untouched). Syscalls: the libc calls the
 * transport makes on its data path (read, write, send, splice, vmsplice,
 * poll, ioctl) are wrapped the same way and counted per thread's role
 * (a read or write of 8 bytes is an eventfd's); futexes inside GLib (the
 * channel's mailbox lock, the fake NIC's lock and doorbell) are not
 * counted, and the doorbell's futex wake is CPU a device would not cost.
 * Copies: bytes returned by read() and send() (the kernel copied them),
 * per byte moved; vmsplice() and splice() move page references and count
 * as no copy; the fake provider counts its own (vrmFakeDMAGet).
 *
 * Exit status: 0, or 1 when a byte arrived wrong, a count differed, a
 * channel failed or a row missed its deadline (60 s). Targets missed are
 * printed, not failed.
 *
 *   ninja -C build bench-native
 * Environment: VRM_BENCH_MIB (MiB per measurement, 1024), VRM_BENCH_ROUNDS
 * (5), VRM_BENCH_DEPTH (one ring depth for every chunk size).
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* splice, vmsplice */
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "vrmfakepair.h"
#include "vrmerror.h"
#include "vrmlimits.h"

#define BENCH_MIB_DEFAULT 1024
#define BENCH_ROUNDS_DEFAULT 5
#define BENCH_IO_SIZE (512u * 1024)         /* the stand-ins' writes and reads */
#define BENCH_PATTERN_LEN ((1u << 20) + 4093) /* prime to every chunk size */
#define BENCH_MEMCPY_BUF (256u << 20)
#define BENCH_DEADLINE_US (60 * G_USEC_PER_SEC) /* one row, set-up to end */
#define BENCH_TARGET_RATE 0.8               /* x the socket pairs' GiB/s */
#define BENCH_TARGET_CPU 1.5                /* x their CPU per GiB */
#define BENCH_MAX_CHANNELS 4

static const guint32 benchChannels[] = { 1, 2, 4 };
static const guint32 benchChunks[] = { 64u << 10, 256u << 10, 1u << 20, 4u << 20 };

/* Who makes a call: each thread says it once (a thread-local) */
typedef enum {
    BENCH_ROLE_OTHER = 0,       /* main, the fake NICs */
    BENCH_ROLE_SOURCE,          /* the source channels' progress threads */
    BENCH_ROLE_DESTINATION,     /* the destination channels' */
    BENCH_ROLE_WRITER,          /* QEMU stand-in, source side */
    BENCH_ROLE_READER,          /* QEMU stand-in, destination side */

    BENCH_ROLE_LAST
} benchRole;

/* The calls counted */
typedef enum {
    BENCH_CALL_READ = 0,
    BENCH_CALL_READ_AGAIN,      /* of them: EAGAIN, nothing to read */
    BENCH_CALL_READ_EVENT,      /* a read of 8 bytes: an eventfd's */
    BENCH_CALL_WRITE,
    BENCH_CALL_WRITE_EVENT,
    BENCH_CALL_SEND,
    BENCH_CALL_SPLICE,
    BENCH_CALL_VMSPLICE,
    BENCH_CALL_POLL,
    BENCH_CALL_POLL_TIMEOUT,    /* of them: poll() that timed out (no syscall more) */
    BENCH_CALL_IOCTL,

    BENCH_CALL_LAST
} benchCall;

static const char *const benchCallName[BENCH_CALL_LAST] = {
    "read", "(EAGAIN)", "read(eventfd)", "write", "write(eventfd)", "send", "splice", "vmsplice", "poll", "(timed out)", "ioctl",
};

/* Per role, since the last benchCountersReset(); relaxed atomics */
typedef struct {
    guint64 calls[BENCH_CALL_LAST];
    guint64 syscalls;
    guint64 copied;             /* bytes copied by the kernel for read()/send() */
    guint64 cpuNs;              /* of the threads that ended */
} benchCounters;

static __thread benchRole benchMyRole;
static benchCounters benchCount[BENCH_ROLE_LAST];

static void
benchCountersReset(void)
{
    memset(benchCount, 0, sizeof(benchCount));
}

static void
benchCountersGet(benchCounters *out)
{
    int i;

    for (i = 0; i < BENCH_ROLE_LAST; i++) {
        int k;

        for (k = 0; k < BENCH_CALL_LAST; k++)
            out[i].calls[k] = __atomic_load_n(&benchCount[i].calls[k], __ATOMIC_RELAXED);
        out[i].syscalls = __atomic_load_n(&benchCount[i].syscalls, __ATOMIC_RELAXED);
        out[i].copied = __atomic_load_n(&benchCount[i].copied, __ATOMIC_RELAXED);
        out[i].cpuNs = __atomic_load_n(&benchCount[i].cpuNs, __ATOMIC_RELAXED);
    }
}

static inline void
benchSyscall(benchCall call, gssize copied)
{
    __atomic_add_fetch(&benchCount[benchMyRole].calls[call], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&benchCount[benchMyRole].syscalls, 1, __ATOMIC_RELAXED);
    if (copied > 0)
        __atomic_add_fetch(&benchCount[benchMyRole].copied, copied, __ATOMIC_RELAXED);
}

static guint64
benchThreadCpuNs(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
        return 0;
    return (guint64)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* A thread of @role ends: its CPU time is its role's */
static void
benchThreadEnds(void)
{
    __atomic_add_fetch(&benchCount[benchMyRole].cpuNs, benchThreadCpuNs(), __ATOMIC_RELAXED);
}

/* ---- the linker's --wrap: the transport's calls, counted ---- */

ssize_t __real_read(int fd, void *buf, size_t len);
ssize_t __wrap_read(int fd, void *buf, size_t len);
ssize_t __real_write(int fd, const void *buf, size_t len);
ssize_t __wrap_write(int fd, const void *buf, size_t len);
ssize_t __real_send(int fd, const void *buf, size_t len, int flags);
ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags);
ssize_t __real_splice(int in, loff_t *inOff, int out, loff_t *outOff, size_t len,
                      unsigned int flags);
ssize_t __wrap_splice(int in, loff_t *inOff, int out, loff_t *outOff, size_t len,
                      unsigned int flags);
ssize_t __real_vmsplice(int fd, const struct iovec *iov, size_t n, unsigned int flags);
ssize_t __wrap_vmsplice(int fd, const struct iovec *iov, size_t n, unsigned int flags);
int __real_poll(struct pollfd *fds, nfds_t n, int timeout);
int __wrap_poll(struct pollfd *fds, nfds_t n, int timeout);
int __real_ioctl(int fd, unsigned long req, ...);
int __wrap_ioctl(int fd, unsigned long req, ...);
GThread *__real_g_thread_try_new(const gchar *name, GThreadFunc func, gpointer data,
                                 GError **error);
GThread *__wrap_g_thread_try_new(const gchar *name, GThreadFunc func, gpointer data,
                                 GError **error);

ssize_t
__wrap_read(int fd, void *buf, size_t len)
{
    ssize_t r = __real_read(fd, buf, len);
    int err = errno;

    benchSyscall(len == sizeof(guint64) ? BENCH_CALL_READ_EVENT : BENCH_CALL_READ, r);
    if (r < 0 && err == EAGAIN && len != sizeof(guint64))
        __atomic_add_fetch(&benchCount[benchMyRole].calls[BENCH_CALL_READ_AGAIN], 1,
                           __ATOMIC_RELAXED);
    errno = err;
    return r;
}

ssize_t
__wrap_write(int fd, const void *buf, size_t len)
{
    ssize_t r = __real_write(fd, buf, len);

    benchSyscall(len == sizeof(guint64) ? BENCH_CALL_WRITE_EVENT : BENCH_CALL_WRITE, r);
    return r;
}

ssize_t
__wrap_send(int fd, const void *buf, size_t len, int flags)
{
    ssize_t r = __real_send(fd, buf, len, flags);

    benchSyscall(BENCH_CALL_SEND, r);
    return r;
}

ssize_t
__wrap_splice(int in, loff_t *inOff, int out, loff_t *outOff, size_t len,
              unsigned int flags)
{
    benchSyscall(BENCH_CALL_SPLICE, 0);     /* page references: no copy */
    return __real_splice(in, inOff, out, outOff, len, flags);
}

ssize_t
__wrap_vmsplice(int fd, const struct iovec *iov, size_t n, unsigned int flags)
{
    benchSyscall(BENCH_CALL_VMSPLICE, 0);
    return __real_vmsplice(fd, iov, n, flags);
}

int
__wrap_poll(struct pollfd *fds, nfds_t n, int timeout)
{
    int r = __real_poll(fds, n, timeout);
    int err = errno;

    benchSyscall(BENCH_CALL_POLL, 0);
    if (r == 0)
        __atomic_add_fetch(&benchCount[benchMyRole].calls[BENCH_CALL_POLL_TIMEOUT], 1,
                           __ATOMIC_RELAXED);
    errno = err;
    return r;
}

int
__wrap_ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    void *arg;

    va_start(ap, req);
    arg = va_arg(ap, void *);
    va_end(ap);
    benchSyscall(BENCH_CALL_IOCTL, 0);
    return __real_ioctl(fd, req, arg);
}

/* The channels whose progress threads are about to start, and their role */
typedef struct {
    gpointer channel;
    benchRole role;
} benchKnown;

static benchKnown benchChannelsKnown[2 * BENCH_MAX_CHANNELS];
static guint benchNKnown;

typedef struct {
    GThreadFunc func;
    gpointer data;
    benchRole role;
} benchTrampoline;

static gpointer
benchTrampolineRun(gpointer opaque)
{
    g_autofree benchTrampoline *t = opaque;
    gpointer ret;

    benchMyRole = t->role;
    ret = t->func(t->data);
    benchThreadEnds();
    return ret;
}

/* vrmChannelStart's thread, with its role and its CPU time counted */
GThread *
__wrap_g_thread_try_new(const gchar *name, GThreadFunc func, gpointer data,
                        GError **error)
{
    benchTrampoline *t = g_new0(benchTrampoline, 1);
    guint i;

    t->func = func;
    t->data = data;
    for (i = 0; i < benchNKnown; i++) {
        if (benchChannelsKnown[i].channel == data)
            t->role = benchChannelsKnown[i].role;
    }
    return __real_g_thread_try_new(name, benchTrampolineRun, t, error);
}

/* ---- the QEMU stand-ins ---- */

static guint8 *benchPattern;    /* 2 * BENCH_PATTERN_LEN: any window fits */

static const guint8 *
benchPatternAt(guint32 stream, guint64 offset)
{
    return benchPattern + (offset + (guint64)stream * 7919u) % BENCH_PATTERN_LEN;
}

typedef struct {
    int fd;
    guint32 stream;             /* which pattern shift */
    guint64 total;              /* bytes to write / expected */
    bool check;                 /* the reader compares every byte */
    benchRole role;
    /* results */
    gint64 lastByteUs;          /* reader: the last byte read (monotonic) */
    guint64 got;                /* reader: bytes read */
    char *error;                /* the first thing wrong, or NULL */
    gint failed;                /* error is set (atomic, for the main thread) */
} benchStandIn;

static void G_GNUC_PRINTF(2, 3)
benchStandInFail(benchStandIn *s, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    s->error = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_atomic_int_set(&s->failed, 1);
    /* the other end learns it at once (EPIPE), not by a full socket */
    shutdown(s->fd, SHUT_RDWR);
}

static gpointer
benchWriter(gpointer opaque)
{
    benchStandIn *w = opaque;
    guint64 off = 0;

    benchMyRole = w->role;
    while (off < w->total) {
        size_t n = MIN(BENCH_IO_SIZE, w->total - off);
        ssize_t r = write(w->fd, benchPatternAt(w->stream, off), n);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            benchStandInFail(w, "stream %u: write failed after %" G_GUINT64_FORMAT " bytes: %s",
                                       w->stream, off, g_strerror(errno));
            break;
        }
        off += r;
    }
    /* QEMU's stream ends */
    shutdown(w->fd, SHUT_WR);
    benchThreadEnds();
    return NULL;
}

static gpointer
benchReader(gpointer opaque)
{
    benchStandIn *rd = opaque;
    g_autofree guint8 *buf = g_malloc(BENCH_IO_SIZE);

    benchMyRole = rd->role;
    /* the destination's QEMU sends nothing back */
    shutdown(rd->fd, SHUT_WR);
    for (;;) {
        ssize_t r = read(rd->fd, buf, BENCH_IO_SIZE);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            benchStandInFail(rd, "stream %u: read failed after %" G_GUINT64_FORMAT " bytes: %s",
                                        rd->stream, rd->got, g_strerror(errno));
            break;
        }
        if (r == 0)
            break;
        if (rd->got + r > rd->total) {
            benchStandInFail(rd, "stream %u: more than the %" G_GUINT64_FORMAT " bytes written arrived",
                                        rd->stream, rd->total);
            break;
        }
        if (rd->check && memcmp(buf, benchPatternAt(rd->stream, rd->got), r) != 0) {
            guint64 at = rd->got;
            const guint8 *want = benchPatternAt(rd->stream, rd->got);
            ssize_t i;

            for (i = 0; i < r && buf[i] == want[i]; i++)
                ;
            benchStandInFail(rd, "stream %u: byte %" G_GUINT64_FORMAT " arrived wrong",
                                        rd->stream, at + i);
            break;
        }
        rd->got += r;
        if (rd->got == rd->total)
            rd->lastByteUs = g_get_monotonic_time();
    }
    if (!rd->error && rd->got != rd->total)
        benchStandInFail(rd, "stream %u: %" G_GUINT64_FORMAT " bytes arrived of %" G_GUINT64_FORMAT,
                                    rd->stream, rd->got, rd->total);
    benchThreadEnds();
    return NULL;
}

static int
benchBlocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);

    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

/* ---- measurements ---- */

typedef struct {
    double gibps;
    double srcCpu;              /* s/GiB: engine source, or the socket reader */
    double dstCpu;              /* s/GiB: engine destination, or the socket writer */
    double dmaCpu;              /* s/GiB: the fake NICs */
    double srcSys;              /* syscalls per MiB */
    double dstSys;
    double srcCopies;           /* copies per MiB */
    double dstCopies;
    double dmaCopies;
    double spliced;             /* share of the destination's bytes spliced */
    double srcCalls[BENCH_CALL_LAST];   /* per MiB */
    double dstCalls[BENCH_CALL_LAST];
} benchResult;

/* every field a double: medians are taken field by field */
#define BENCH_RESULT_FIELDS (sizeof(benchResult) / sizeof(double))
G_STATIC_ASSERT(sizeof(benchResult) % sizeof(double) == 0);

static void
benchCallsPerMiB(const benchCounters *c, double gib, double *out)
{
    int k;

    for (k = 0; k < BENCH_CALL_LAST; k++)
        out[k] = c->calls[k] / (gib * 1024);
}

static int
benchCompareDouble(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* The median of @n results, field by field; the lowest and highest GiB/s */
static void
benchMedian(const benchResult *rs, guint n, benchResult *med, double *lo, double *hi)
{
    g_autofree double *v = g_new(double, n);
    guint f, i;

    for (f = 0; f < BENCH_RESULT_FIELDS; f++) {
        for (i = 0; i < n; i++)
            v[i] = ((const double *)&rs[i])[f];
        qsort(v, n, sizeof(double), benchCompareDouble);
        ((double *)med)[f] = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    }
    *lo = *hi = rs[0].gibps;
    for (i = 1; i < n; i++) {
        *lo = MIN(*lo, rs[i].gibps);
        *hi = MAX(*hi, rs[i].gibps);
    }
}

static double
benchGiB(guint64 bytes)
{
    return (double)bytes / (1024.0 * 1024 * 1024);
}

static double
benchMemcpy(guint64 total)
{
    g_autofree guint8 *a = g_malloc(BENCH_MEMCPY_BUF);
    g_autofree guint8 *b = g_malloc(BENCH_MEMCPY_BUF);
    guint64 done = 0;
    gint64 t0;

    memset(a, 0x5a, BENCH_MEMCPY_BUF);
    memset(b, 0xa5, BENCH_MEMCPY_BUF);
    t0 = g_get_monotonic_time();
    while (done < total) {
        memcpy(done / BENCH_MEMCPY_BUF % 2 ? a : b, done / BENCH_MEMCPY_BUF % 2 ? b : a,
               BENCH_MEMCPY_BUF);
        done += BENCH_MEMCPY_BUF;
    }
    return benchGiB(done) / ((g_get_monotonic_time() - t0) / 1e6);
}

/* @n writers to @n readers over UNIX stream socket pairs, @total bytes in
 * all; -1 and @why when something went wrong */
static int
benchSocketPairs(guint32 n, guint64 total, bool check, benchResult *res, char **why)
{
    benchStandIn w[BENCH_MAX_CHANNELS] = { 0 }, rd[BENCH_MAX_CHANNELS] = { 0 };
    GThread *tw[BENCH_MAX_CHANNELS], *tr[BENCH_MAX_CHANNELS];
    benchCounters c[BENCH_ROLE_LAST];
    gint64 t0, last = 0;
    double gib = benchGiB(total);
    guint32 i;
    int ret = 0;

    benchCountersReset();
    for (i = 0; i < n; i++) {
        int sv[2];

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
            *why = g_strdup_printf("socketpair: %s", g_strerror(errno));
            return -1;
        }
        w[i] = (benchStandIn) { .fd = sv[0], .stream = i, .total = total / n,
                                .role = BENCH_ROLE_WRITER };
        rd[i] = (benchStandIn) { .fd = sv[1], .stream = i, .total = total / n,
                                 .check = check, .role = BENCH_ROLE_READER };
    }
    t0 = g_get_monotonic_time();
    for (i = 0; i < n; i++) {
        tr[i] = g_thread_new("bench-reader", benchReader, &rd[i]);
        tw[i] = g_thread_new("bench-writer", benchWriter, &w[i]);
    }
    for (i = 0; i < n; i++) {
        g_thread_join(tw[i]);
        g_thread_join(tr[i]);
        close(w[i].fd);
        close(rd[i].fd);
        last = MAX(last, rd[i].lastByteUs);
        if (!*why && (w[i].error || rd[i].error))
            *why = g_strdup(rd[i].error ? rd[i].error : w[i].error);
        g_free(w[i].error);
        g_free(rd[i].error);
        if (*why)
            ret = -1;
    }
    benchCountersGet(c);
    *res = (benchResult) {
        .gibps = gib / ((last - t0) / 1e6),
        .srcCpu = c[BENCH_ROLE_READER].cpuNs / 1e9 / gib,
        .dstCpu = c[BENCH_ROLE_WRITER].cpuNs / 1e9 / gib,
        .srcSys = c[BENCH_ROLE_READER].syscalls / (gib * 1024),
        .dstSys = c[BENCH_ROLE_WRITER].syscalls / (gib * 1024),
        .srcCopies = (double)c[BENCH_ROLE_READER].copied / total,
        .dstCopies = (double)c[BENCH_ROLE_WRITER].copied / total,
    };
    benchCallsPerMiB(&c[BENCH_ROLE_READER], gib, res->srcCalls);
    benchCallsPerMiB(&c[BENCH_ROLE_WRITER], gib, res->dstCalls);
    return ret;
}

/* The engine: @n channels of @chunk, @total bytes in all */
static int
benchEngine(guint32 n, guint32 chunk, guint32 depth, guint64 total, benchResult *res,
            char **why)
{
    vrmFakePair *p[BENCH_MAX_CHANNELS] = { 0 };
    benchStandIn w[BENCH_MAX_CHANNELS] = { 0 }, rd[BENCH_MAX_CHANNELS] = { 0 };
    GThread *tw[BENCH_MAX_CHANNELS] = { 0 }, *tr[BENCH_MAX_CHANNELS] = { 0 };
    bool exited[BENCH_MAX_CHANNELS][2] = { { 0 } };
    bool started = false;
    benchCounters c[BENCH_ROLE_LAST];
    vrmFakeDMA dma0, dma1;
    guint64 spliced = 0;
    gint64 deadline = g_get_monotonic_time() + BENCH_DEADLINE_US, t0 = 0, last = 0;
    double gib = benchGiB(total);
    guint32 i, k, left;
    int ret = 0;

    benchCountersReset();
    vrmFakeDMAGet(&dma0);
    benchNKnown = 0;
    for (i = 0; i < n; i++) {
        vrmFakePairConfig cfg = {
            .srcDepth = depth,
            .dstDepth = depth,
            .chunkSize = chunk,
            .writeImm = true,
        };

        p[i] = vrmFakePairNew(&cfg);
        benchChannelsKnown[benchNKnown++] = (benchKnown) { p[i]->ch[0], BENCH_ROLE_SOURCE };
        benchChannelsKnown[benchNKnown++] = (benchKnown) { p[i]->ch[1], BENCH_ROLE_DESTINATION };
        vrmFakeQPStartNIC(p[i]->qp[0]);
        if (vrmChannelStart(p[i]->ch[0]) < 0 || vrmChannelStart(p[i]->ch[1]) < 0) {
            *why = g_strdup(vrmGetLastErrorMessage());
            return -1;
        }
        w[i] = (benchStandIn) { .fd = p[i]->qemu[0], .stream = i, .total = total / n,
                                .role = BENCH_ROLE_WRITER };
        rd[i] = (benchStandIn) { .fd = p[i]->qemu[1], .stream = i, .total = total / n,
                                 .check = true, .role = BENCH_ROLE_READER };
        if (benchBlocking(w[i].fd) < 0 || benchBlocking(rd[i].fd) < 0) {
            *why = g_strdup_printf("fcntl: %s", g_strerror(errno));
            return -1;
        }
    }

    /* the engine's main thread: sockets handed over as the engine does
     * (the source's once the destination authenticated, the
     * destination's once CHANNEL_OPEN came), until every thread ended */
    for (left = 2 * n; left > 0;) {
        bool ready = true;

        for (i = 0; i < n; i++) {
            for (k = 0; k < 2; k++) {
                vrmChannelEvents ev;

                vrmChannelTakeEvents(p[i]->ch[k], &ev);
                if (ev.authenticated)
                    p[i]->authenticated = true;
                if (ev.openRequested)
                    p[i]->openRequested = true;
                if (ev.exited && !exited[i][k]) {
                    exited[i][k] = true;
                    left--;
                }
            }
            if (p[i]->authenticated && p[i]->engineSock[0] >= 0) {
                vrmChannelGiveSocket(p[i]->ch[0], p[i]->engineSock[0]);
                p[i]->engineSock[0] = -1;
            }
            if (p[i]->openRequested && p[i]->engineSock[1] >= 0) {
                vrmChannelGiveSocket(p[i]->ch[1], p[i]->engineSock[1]);
                p[i]->engineSock[1] = -1;
            }
            if (p[i]->engineSock[0] >= 0 || p[i]->engineSock[1] >= 0)
                ready = false;
        }
        /* QEMU starts once every channel is open, so set-up is not timed */
        if (ready && !started) {
            started = true;
            t0 = g_get_monotonic_time();
            for (i = 0; i < n; i++) {
                tr[i] = g_thread_new("bench-reader", benchReader, &rd[i]);
                tw[i] = g_thread_new("bench-writer", benchWriter, &w[i]);
            }
        }
        for (i = 0; i < n; i++) {
            if (__atomic_load_n(&p[i]->failures, __ATOMIC_RELAXED))
                ret = -1;
            /* wrong bytes: the reader stopped, the channels cannot end */
            if (started && (g_atomic_int_get(&w[i].failed) || g_atomic_int_get(&rd[i].failed))) {
                /* the reader's first: its failure fails the writer */
                *why = g_strdup_printf("%u channels of %u KiB: %s", n, chunk >> 10,
                                       g_atomic_int_get(&rd[i].failed) ? rd[i].error : w[i].error);
                return -1;
            }
        }
        if (ret < 0)
            break;
        if (g_get_monotonic_time() > deadline) {
            *why = g_strdup_printf("%u channels of %u KiB: not done within %d s",
                                   n, chunk >> 10, (int)(BENCH_DEADLINE_US / G_USEC_PER_SEC));
            /* the stand-ins may block for ever: nothing is freed */
            return -1;
        }
        if (left)
            g_usleep(1000);
    }
    if (ret < 0) {
        for (i = 0; i < n && !*why; i++) {
            if (p[i]->failures)
                *why = g_strdup_printf("%u channels of %u KiB: channel %u failed: %s", n,
                                       chunk >> 10, i, p[i]->failure);
        }
        /* the stand-ins may block for ever: nothing is freed */
        return -1;
    }
    for (i = 0; i < n; i++) {
        g_thread_join(tw[i]);
        g_thread_join(tr[i]);
        last = MAX(last, rd[i].lastByteUs);
        if (!*why && (w[i].error || rd[i].error))
            *why = g_strdup(rd[i].error ? rd[i].error : w[i].error);
        g_free(w[i].error);
        g_free(rd[i].error);
        vrmFakeQPStopNIC(p[i]->qp[0]);
    }
    benchCountersGet(c);
    vrmFakeDMAGet(&dma1);
    for (i = 0; i < n; i++) {
        vrmStats st;
        gint64 first, end;

        vrmChannelStats(p[i]->ch[1], &st, &first, &end);
        spliced += st.v[VRM_STAT_BYTES_SPLICED];
        if (!*why && st.v[VRM_STAT_BYTES_RECEIVED] != total / n)
            *why = g_strdup_printf("channel %u: %" G_GUINT64_FORMAT " bytes delivered of %" G_GUINT64_FORMAT,
                                   i, (guint64)st.v[VRM_STAT_BYTES_RECEIVED], total / n);
        vrmFakePairFree(p[i]);
    }
    if (!*why && vrmFakeViolation())
        *why = g_strdup_printf("the fake provider saw a broken rule: %s", vrmFakeViolation());
    if (*why)
        return -1;
    *res = (benchResult) {
        .gibps = gib / ((last - t0) / 1e6),
        .srcCpu = c[BENCH_ROLE_SOURCE].cpuNs / 1e9 / gib,
        .dstCpu = c[BENCH_ROLE_DESTINATION].cpuNs / 1e9 / gib,
        .dmaCpu = (dma1.cpuNs - dma0.cpuNs) / 1e9 / gib,
        .srcSys = c[BENCH_ROLE_SOURCE].syscalls / (gib * 1024),
        .dstSys = c[BENCH_ROLE_DESTINATION].syscalls / (gib * 1024),
        .srcCopies = (double)c[BENCH_ROLE_SOURCE].copied / total,
        .dstCopies = (double)c[BENCH_ROLE_DESTINATION].copied / total,
        .dmaCopies = (double)(dma1.bytes - dma0.bytes) / total,
        .spliced = (double)spliced / total,
    };
    benchCallsPerMiB(&c[BENCH_ROLE_SOURCE], gib, res->srcCalls);
    benchCallsPerMiB(&c[BENCH_ROLE_DESTINATION], gib, res->dstCalls);
    return 0;
}

static const char *
benchVerdict(bool ok)
{
    return ok ? "met" : "MISSED";
}

static guint64
benchEnvNumber(const char *name, guint64 dflt, guint64 min, guint64 max)
{
    const char *v = g_getenv(name);
    guint64 n = v ? g_ascii_strtoull(v, NULL, 10) : dflt;

    return CLAMP(n, min, max);
}

static void
benchPrintCalls(const char *side, const double *calls)
{
    int k;

    printf("  %-4s", side);
    for (k = 0; k < BENCH_CALL_LAST; k++) {
        if (calls[k] >= 0.05)
            printf(" %s %.1f", benchCallName[k], calls[k]);
    }
    printf("\n");
}

static void
benchPrintLoad(const char *when)
{
    g_autofree char *load = NULL;

    if (g_file_get_contents("/proc/loadavg", &load, NULL, NULL))
        printf("load average %s: %s", when, load);
}

#define BENCH_NCH G_N_ELEMENTS(benchChannels)
#define BENCH_NCHUNK G_N_ELEMENTS(benchChunks)
#define BENCH_ROUNDS_MAX 9

/* Every measurement, @rounds times, interleaved: the ceilings and the
 * engine see the same load. -1 and @why on the first failure. */
static int
benchMeasure(guint rounds, guint32 depth, guint64 total, double *memcpyRate,
             benchResult sockRaw[][BENCH_ROUNDS_MAX], benchResult sockChk[][BENCH_ROUNDS_MAX],
             benchResult eng[][BENCH_NCHUNK][BENCH_ROUNDS_MAX], char **why)
{
    guint ci, ki, r;

    for (r = 0; r < rounds; r++) {
        fprintf(stderr, "vrmbenchnative: round %u of %u\n", r + 1, rounds);
        memcpyRate[r] = benchMemcpy(total);
        for (ci = 0; ci < BENCH_NCH; ci++) {
            guint32 n = benchChannels[ci];

            if (benchSocketPairs(n, total, false, &sockRaw[ci][r], why) < 0 ||
                benchSocketPairs(n, total, true, &sockChk[ci][r], why) < 0)
                return -1;
            for (ki = 0; ki < BENCH_NCHUNK; ki++) {
                guint32 d = depth ? depth : vrmRingDepthDefault(benchChunks[ki]);

                if (benchEngine(n, benchChunks[ki], d, total, &eng[ci][ki][r], why) < 0)
                    return -1;
            }
        }
    }
    return 0;
}

int
main(int argc G_GNUC_UNUSED, char **argv G_GNUC_UNUSED)
{
    guint64 mib = benchEnvNumber("VRM_BENCH_MIB", BENCH_MIB_DEFAULT, 64, 1u << 20);
    guint rounds = benchEnvNumber("VRM_BENCH_ROUNDS", BENCH_ROUNDS_DEFAULT, 1, BENCH_ROUNDS_MAX);
    /* 0: the helpers' default for each chunk size */
    guint32 depth = g_getenv("VRM_BENCH_DEPTH") ?
        benchEnvNumber("VRM_BENCH_DEPTH", VRM_RING_DEPTH_DEFAULT,
                       VRM_RING_DEPTH_MIN, VRM_RING_DEPTH_MAX) : 0;
    guint64 total = mib << 20;
    static benchResult sockRaw[BENCH_NCH][BENCH_ROUNDS_MAX], sockChk[BENCH_NCH][BENCH_ROUNDS_MAX];
    static benchResult eng[BENCH_NCH][BENCH_NCHUNK][BENCH_ROUNDS_MAX];
    benchResult sock[BENCH_NCH], chk[BENCH_NCH], mc;
    double memcpyRate[BENCH_ROUNDS_MAX], lo, hi;
    GRand *rand;
    guint ci, ki, i;
    guint rateMet = 0, cpuMet = 0, rows = 0;
    g_autofree char *why = NULL;

    /* a reader that gave up must not kill its writer */
    signal(SIGPIPE, SIG_IGN);
    benchPattern = g_malloc(2 * BENCH_PATTERN_LEN);
    rand = g_rand_new_with_seed(37);
    for (i = 0; i < 2 * BENCH_PATTERN_LEN / 4; i++)
        ((guint32 *)benchPattern)[i] = g_rand_int(rand);
    g_rand_free(rand);
    memcpy(benchPattern + BENCH_PATTERN_LEN, benchPattern, BENCH_PATTERN_LEN);

    printf("virt-rdma engine at native speed: %u CPUs, FAKE verbs provider (its copy is the NIC's DMA,\n"
           "reported apart); %" G_GUINT64_FORMAT " MiB per measurement, %u rounds, medians; "
           "stand-ins write and read %u KiB at a time, the reader checks every byte\n",
           g_get_num_processors(), mib, rounds, BENCH_IO_SIZE >> 10);
    benchPrintLoad("before");
    fflush(stdout);

    if (benchMeasure(rounds, depth, total, memcpyRate, sockRaw, sockChk, eng, &why) < 0) {
        fprintf(stderr, "vrmbenchnative: %s\n", why);
        return 1;
    }
    benchPrintLoad("after ");
    qsort(memcpyRate, rounds, sizeof(double), benchCompareDouble);
    printf("\nceilings\n");
    printf("  memcpy, one thread, 256 MiB buffers: %.2f GiB/s (%.2f to %.2f)\n",
           memcpyRate[rounds / 2], memcpyRate[0], memcpyRate[rounds - 1]);
    printf("  %-5s %-12s %6s %12s %8s %8s %6s %6s %5s %5s\n", "pairs", "reader", "GiB/s",
           "(range)", "wr s/GiB", "rd s/GiB", "wr sys", "rd sys", "wr cp", "rd cp");
    for (ci = 0; ci < BENCH_NCH; ci++) {
        for (i = 0; i < 2; i++) {
            benchResult *m = i ? &chk[ci] : &sock[ci];
            g_autofree char *range = NULL;

            benchMedian(i ? sockChk[ci] : sockRaw[ci], rounds, m, &lo, &hi);
            range = g_strdup_printf("%.2f-%.2f", lo, hi);
            printf("  %-5u %-12s %6.2f %12s %8.3f %8.3f %6.1f %6.1f %5.2f %5.2f\n",
                   benchChannels[ci], i ? "checks bytes" : "reads only", m->gibps, range,
                   m->dstCpu, m->srcCpu, m->dstSys, m->srcSys, m->dstCopies, m->srcCopies);
        }
    }
    printf("  sys: syscalls per MiB; cp: copies per MiB (bytes the kernel copied per byte moved)\n");

    printf("\nengine: per channel a real source and destination vrmChannel in their progress threads,\n");
    if (depth)
        printf("ring depth %u", depth);
    else
        printf("ring depth %u (%u for 64 KiB chunks: the helpers' default)",
               vrmRingDepthDefault(VRM_CHUNK_SIZE_DEFAULT), vrmRingDepthDefault(64 * 1024));
    printf("; CPU of the engine's threads per side, the fake NIC's apart (DMA)\n");
    printf("%-2s %5s %5s %11s %5s %5s | %6s %6s %6s %4s %4s | %5s %5s | %4s %4s %4s %3s | %s\n",
           "ch", "chunk", "GiB/s", "(range)", "x sk", "x ck", "src", "dst", "DMA", "x rd", "x wr",
           "src", "dst", "cp", "cp", "DMA", "spl", "targets");
    printf("%-2s %5s %5s %11s %5s %5s | %6s %6s %6s %4s %4s | %5s %5s | %4s %4s %4s %3s | %s\n",
           "", "KiB", "", "", "", "", "s/GiB", "s/GiB", "s/GiB", "", "", "sys", "sys", "src",
           "dst", "", "%", "0.8x rate, 1.5x CPU");
    for (ci = 0; ci < BENCH_NCH; ci++) {
        for (ki = 0; ki < BENCH_NCHUNK; ki++) {
            g_autofree char *range = NULL;
            double xs, xc, xrd, xwr;
            bool rateOk, cpuOk;

            benchMedian(eng[ci][ki], rounds, &mc, &lo, &hi);
            range = g_strdup_printf("%.2f-%.2f", lo, hi);
            xs = mc.gibps / sock[ci].gibps;
            xc = mc.gibps / chk[ci].gibps;
            xrd = mc.srcCpu / sock[ci].srcCpu;
            xwr = mc.dstCpu / sock[ci].dstCpu;
            rateOk = xs >= BENCH_TARGET_RATE;
            cpuOk = xrd <= BENCH_TARGET_CPU && xwr <= BENCH_TARGET_CPU;
            rateMet += rateOk;
            cpuMet += cpuOk;
            rows++;
            printf("%-2u %5u %5.2f %11s %5.2f %5.2f | %6.3f %6.3f %6.3f %4.1f %4.1f | %5.1f %5.1f | %4.2f %4.2f %4.2f %3.0f | %s, %s\n",
                   benchChannels[ci], benchChunks[ki] >> 10, mc.gibps, range, xs, xc, mc.srcCpu,
                   mc.dstCpu, mc.dmaCpu, xrd, xwr, mc.srcSys, mc.dstSys, mc.srcCopies,
                   mc.dstCopies, mc.dmaCopies, mc.spliced * 100, benchVerdict(rateOk),
                   benchVerdict(cpuOk));
        }
    }
    printf("x sk: GiB/s over the socket pairs' (reads only), as many pairs as channels; x ck: over\n"
           "the pairs whose reader checks bytes, as the engine's reader does; x rd, x wr: the source's\n"
           "CPU per GiB over the socket reader's, the destination's over the writer's (the provider's\n"
           "copy excluded); spl: the destination's bytes spliced, not copied, into QEMU's socket\n");
    printf("targets: GiB/s >= %.1fx the socket pairs' in %u of %u rows; CPU per GiB <= %.1fx theirs "
           "(both sides) in %u of %u rows\n",
           BENCH_TARGET_RATE, rateMet, rows, BENCH_TARGET_CPU, cpuMet, rows);

    printf("\nsyscalls per MiB by call (medians; in brackets, of the call before: reads that\n"
           "found nothing, polls that timed out)\n");
    for (ci = 0; ci < BENCH_NCH; ci++) {
        for (i = 0; i < 2; i++) {
            const benchResult *m = i ? &chk[ci] : &sock[ci];

            printf("socket pairs %u, %s\n", benchChannels[ci], i ? "checks bytes" : "reads only");
            benchPrintCalls("rd", m->srcCalls);
            benchPrintCalls("wr", m->dstCalls);
        }
        for (ki = 0; ki < BENCH_NCHUNK; ki++) {
            benchMedian(eng[ci][ki], rounds, &mc, &lo, &hi);
            printf("engine %u ch, %u KiB\n", benchChannels[ci], benchChunks[ki] >> 10);
            benchPrintCalls("src", mc.srcCalls);
            benchPrintCalls("dst", mc.dstCalls);
        }
    }
    g_free(benchPattern);
    return 0;
}
