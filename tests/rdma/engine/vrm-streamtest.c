/*
 * vrm-streamtest: stands in for QEMU on both ends of virt-rdma-engine
 *
 * source:      connects N times to PATH (in order), writes a deterministic
 *              pseudo-random stream of --bytes on each connection and reads
 *              and verifies the reverse stream of --reverse-bytes.
 * destination: listens on PATH, accepts N connections, verifies the stream
 *              of connection i and writes its reverse stream.
 * Every stream is checked byte for byte against the generator and its
 * word-wise FNV-1a 64 checksum printed. Exit 0 only if every stream arrived exactly.
 * --irregular: every write and every read has a pseudo-random size from 1
 * byte to IRREGULAR_MAX (about 300 KB), as QEMU's writers and readers do
 * under load, instead of the whole buffer each time (the stress target of
 * engine-stress.sh).
 * "-uuid UUID" is taken and ignored as QEMU does: it puts the domain's UUID
 * on the command line, which the destination engine checks.
 * Like QEMU, which outlives its migration streams, it stays --linger
 * milliseconds (default 1000) after closing them: the engines take a QEMU
 * gone when its stream ends for one that crashed mid-stream. Like QEMU
 * too, the source ends its main connection (0) only once every other
 * connection has carried its streams both ways: QEMU's main stream ends
 * the migration after its multifd channels are synced (a connection that
 * is merely made may still wait in the engine's listen backlog).
 *
 * --disks N with --disk-unix PATH: N more connections on PATH, made before
 * the first migration connection, as QEMU's NBD client copies the disks
 * before the migration starts. Each opens with its disk number (4 bytes,
 * outside the checked stream: the engine connects disk channels in any
 * order), the destination answers it (the NBD server's greeting), and the
 * source opens its migration connections only once every disk has
 * answered: so disk data crosses before the main stream exists.
 */
#include <config.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <glib.h>

#define BUF_SIZE (256 * 1024)
#define IRREGULAR_MAX 300000    /* --irregular: largest write or read */

typedef struct {
    guint64 state;
} Gen;

static guint64
genNext(Gen *g)
{
    /* xorshift64* */
    g->state ^= g->state >> 12;
    g->state ^= g->state << 25;
    g->state ^= g->state >> 27;
    return g->state * G_GUINT64_CONSTANT(2685821657736338717);
}

static void
genInit(Gen *g, guint64 seed, guint32 channel, guint32 dir)
{
    guint64 z = seed + G_GUINT64_CONSTANT(0x9e3779b97f4a7c15) * (1 + channel * 2 + dir);

    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94d049bb133111eb);
    g->state = (z ^ (z >> 31)) | 1;
}

/* Fill buf with the next len bytes of the stream (len multiple of 8) */
static void
genFill(Gen *g, guint8 *buf, size_t len)
{
    size_t i;

    for (i = 0; i < len; i += 8) {
        guint64 v = genNext(g);
        memcpy(buf + i, &v, 8);
    }
}

/* FNV-1a over 64-bit words, bytewise for a tail: the printed checksum.
 * Both ends hash the same blocks (BUF_SIZE, then the last partial one),
 * so their sums match when the streams do; word-wise, because the
 * benchmark runs on an emulated CPU where a bytewise hash of every byte
 * would cost more than the transport being measured. */
static guint64
fnv(guint64 h, const guint8 *p, size_t n)
{
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        guint64 w;

        memcpy(&w, p + i, 8);
        h ^= w;
        h *= G_GUINT64_CONSTANT(0x100000001b3);
    }
    for (; i < n; i++) {
        h ^= p[i];
        h *= G_GUINT64_CONSTANT(0x100000001b3);
    }
    return h;
}

#define FNV_INIT G_GUINT64_CONSTANT(0xcbf29ce484222325)

typedef struct {
    int fd;
    guint32 channel;
    guint32 dir;            /* direction of this half: 0 source->dest */
    guint64 size;
    guint64 seed;
    guint64 done;           /* bytes moved */
    guint64 sum;            /* FNV-1a 64 */
    char *error;
    gint answered;          /* reader: the first byte arrived (atomic) */
    gboolean irregular;     /* pseudo-random sizes of each write or read */
} Half;

/* --irregular: the size of the next write or read, 1 to @most bytes
 * (xorshift32 on the half's own state: not the stream's generator) */
static size_t
ioSize(guint32 *state, size_t most)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return 1 + *state % MIN(most, (size_t)IRREGULAR_MAX);
}

#define DISK_CHANNEL_BASE 1000  /* generator channel of disk 0 */

/* Source: every connection is made (or the attempt gave up), and how
 * many halves of the other connections have ended since */
static GMutex connectLock;
static GCond connectCond;
static gboolean connectOver;
static int othersToEnd;     /* halves of connections 1..N-1 still going */

static void
connectsOver(void)
{
    g_mutex_lock(&connectLock);
    connectOver = TRUE;
    g_cond_broadcast(&connectCond);
    g_mutex_unlock(&connectLock);
}

/* A half of a migration connection other than the main one ended */
static void
halfEnded(const Half *h)
{
    if (h->channel == 0 || h->channel >= DISK_CHANNEL_BASE)
        return;
    g_mutex_lock(&connectLock);
    othersToEnd--;
    g_cond_broadcast(&connectCond);
    g_mutex_unlock(&connectLock);
}

static void
writerRun(Half *h)
{
    g_autofree guint8 *buf = g_malloc(BUF_SIZE);
    guint32 io = 0x9e3779b9u ^ (h->channel * 2 + h->dir + 1);
    Gen g;

    genInit(&g, h->seed, h->channel, h->dir);
    h->sum = FNV_INIT;
    while (h->done < h->size) {
        size_t n = MIN((guint64)BUF_SIZE, h->size - h->done);
        size_t off = 0;

        genFill(&g, buf, BUF_SIZE);
        h->sum = fnv(h->sum, buf, n);
        while (off < n) {
            size_t len = h->irregular ? ioSize(&io, n - off) : n - off;
            ssize_t r = send(h->fd, buf + off, len, MSG_NOSIGNAL);
            if (r < 0) {
                if (errno == EINTR)
                    continue;
                h->error = g_strdup_printf("write failed after %" G_GUINT64_FORMAT " bytes: %s",
                                           h->done + off, g_strerror(errno));
                return;
            }
            off += r;
        }
        h->done += n;
    }
    if (h->channel == 0 && h->dir == 0) {
        /* the source's main connection ends last (see the top) */
        g_mutex_lock(&connectLock);
        while (!connectOver || othersToEnd > 0)
            g_cond_wait(&connectCond, &connectLock);
        g_mutex_unlock(&connectLock);
    }
    if (shutdown(h->fd, SHUT_WR) < 0)
        h->error = g_strdup_printf("shutdown failed: %s", g_strerror(errno));
}

static gpointer
writerThread(gpointer opaque)
{
    writerRun(opaque);
    halfEnded(opaque);
    return NULL;
}

static void
readerRun(Half *h)
{
    g_autofree guint8 *want = g_malloc(BUF_SIZE);
    g_autofree guint8 *got = g_malloc(BUF_SIZE);
    guint64 wpos = 0;       /* stream offset of want[0] */
    guint32 io = 0x7f4a7c15u ^ (h->channel * 2 + h->dir + 1);
    Gen g;

    genInit(&g, h->seed, h->channel, h->dir);
    genFill(&g, want, BUF_SIZE);
    h->sum = FNV_INIT;
    for (;;) {
        ssize_t r = read(h->fd, got, h->irregular ? ioSize(&io, BUF_SIZE) : BUF_SIZE);
        ssize_t i = 0;

        if (r < 0) {
            if (errno == EINTR)
                continue;
            h->error = g_strdup_printf("read failed after %" G_GUINT64_FORMAT " bytes: %s",
                                       h->done, g_strerror(errno));
            return;
        }
        if (r == 0)
            break;
        g_atomic_int_set(&h->answered, 1);
        while (i < r) {
            size_t woff = h->done - wpos;
            size_t n = MIN((size_t)(r - i), BUF_SIZE - woff);

            if (h->done + n > h->size) {
                h->error = g_strdup_printf("size mismatch: more than the %" G_GUINT64_FORMAT
                                           " bytes expected arrived", h->size);
                return;
            }
            if (memcmp(want + woff, got + i, n) != 0) {
                size_t k = 0;
                while (want[woff + k] == got[i + k])
                    k++;
                h->error = g_strdup_printf("checksum mismatch: byte %" G_GUINT64_FORMAT
                                           " differs", h->done + k);
                return;
            }
            h->done += n;
            i += n;
            if (h->done - wpos == BUF_SIZE) {
                /* verified: hash the block as the writer did */
                h->sum = fnv(h->sum, want, BUF_SIZE);
                wpos += BUF_SIZE;
                genFill(&g, want, BUF_SIZE);
            }
        }
    }
    if (h->done > wpos)
        h->sum = fnv(h->sum, want, h->done - wpos);
    if (h->done != h->size)
        h->error = g_strdup_printf("size mismatch: %" G_GUINT64_FORMAT " bytes arrived, %"
                                   G_GUINT64_FORMAT " expected", h->done, h->size);
}

static gpointer
readerThread(gpointer opaque)
{
    readerRun(opaque);
    halfEnded(opaque);
    return NULL;
}

/* PATH, or tcp:A.B.C.D:PORT as QEMU's TCP migration (the transparent
 * mode): the address to connect to or listen on */
static socklen_t
addressOf(const char *path, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (g_str_has_prefix(path, "tcp:")) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        g_autofree char *host = g_strdup(path + 4);
        char *colon = strrchr(host, ':');

        if (!colon)
            return 0;
        *colon = '\0';
        in->sin_family = AF_INET;
        in->sin_port = htons((guint16)atoi(colon + 1));
        if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
            return 0;
        return sizeof(*in);
    } else {
        struct sockaddr_un *sun = (struct sockaddr_un *)ss;

        sun->sun_family = AF_UNIX;
        g_strlcpy(sun->sun_path, path, sizeof(sun->sun_path));
        return sizeof(*sun);
    }
}

static int
connectRetry(const char *path, gint64 deadline)
{
    struct sockaddr_storage ss;
    socklen_t len = addressOf(path, &ss);

    if (!len) {
        errno = EINVAL;
        return -1;
    }
    for (;;) {
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
            return -1;
        if (connect(fd, (struct sockaddr *)&ss, len) == 0)
            return fd;
        close(fd);
        if (g_get_monotonic_time() > deadline)
            return -1;
        g_usleep(50 * 1000);
    }
}

/* Destination: the next connection, by the deadline */
static int
acceptBy(int lfd, gint64 deadline)
{
    for (;;) {
        struct pollfd pfd = { .fd = lfd, .events = POLLIN };
        gint64 left = (deadline - g_get_monotonic_time()) / 1000;
        int rc;

        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        rc = poll(&pfd, 1, (int)MIN(left, G_MAXINT));
        if (rc < 0 && errno != EINTR)
            return -1;
        if (rc > 0)
            return accept(lfd, NULL, NULL);
    }
}

/* Both halves of one connection, in threads */
static gboolean irregular;  /* --irregular */

static void
startHalves(Half *tx, Half *rx, GThread **threads, int fd, guint32 channel,
            gboolean source, guint64 fwd, guint64 rev, guint64 seed)
{
    /* dir 0 travels source->destination, dir 1 back */
    *tx = (Half) { .fd = fd, .channel = channel, .dir = source ? 0 : 1,
                   .size = source ? fwd : rev, .seed = seed, .irregular = irregular };
    *rx = (Half) { .fd = fd, .channel = channel, .dir = source ? 1 : 0,
                   .size = source ? rev : fwd, .seed = seed, .irregular = irregular };
    threads[0] = g_thread_new("writer", writerThread, tx);
    threads[1] = g_thread_new("reader", readerThread, rx);
}

/* The disk connections of either end */
typedef struct {
    gboolean source;
    const char *path;
    int lfd;                /* destination: listening */
    int n;
    guint64 fwd, rev, seed;
    gint64 deadline;
    Half *tx, *rx;          /* n each, indexed by disk number */
    GThread **threads;      /* 2n */
    char *error;
} Disks;

/* Source: connect every disk, send its number, start its halves */
static int
disksConnect(Disks *d)
{
    int i;

    for (i = 0; i < d->n; i++) {
        guint32 hdr = GUINT32_TO_LE((guint32)i);
        int fd = connectRetry(d->path, d->deadline);

        if (fd < 0 || send(fd, &hdr, sizeof(hdr), MSG_NOSIGNAL) != sizeof(hdr)) {
            d->error = g_strdup_printf("disk connection %d failed: %s", i, g_strerror(errno));
            return -1;
        }
        startHalves(&d->tx[i], &d->rx[i], &d->threads[2 * i], fd, DISK_CHANNEL_BASE + i,
                    TRUE, d->fwd, d->rev, d->seed);
    }
    /* the destination's answer on every disk first (the NBD greeting) */
    for (i = 0; i < d->n; i++) {
        while (!g_atomic_int_get(&d->rx[i].answered) && d->rx[i].size > 0) {
            if (g_get_monotonic_time() > d->deadline) {
                d->error = g_strdup_printf("disk %d: no answer by the deadline", i);
                return -1;
            }
            g_usleep(10 * 1000);
        }
    }
    return 0;
}

/* Destination: accept the disks in whatever order they come */
static gpointer
disksAccept(gpointer opaque)
{
    Disks *d = opaque;
    int i;

    for (i = 0; i < d->n; i++) {
        struct timeval tv = { .tv_sec = 60 };
        guint32 hdr;
        int fd = acceptBy(d->lfd, d->deadline);

        if (fd < 0) {
            d->error = g_strdup_printf("disk connection %d failed: %s", i, g_strerror(errno));
            return NULL;
        }
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (recv(fd, &hdr, sizeof(hdr), MSG_WAITALL) != sizeof(hdr) ||
            (hdr = GUINT32_FROM_LE(hdr)) >= (guint32)d->n || d->threads[2 * hdr]) {
            d->error = g_strdup_printf("disk connection %d: no valid disk number", i);
            close(fd);
            return NULL;
        }
        tv.tv_sec = 0;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        startHalves(&d->tx[hdr], &d->rx[hdr], &d->threads[2 * hdr], fd,
                    DISK_CHANNEL_BASE + hdr, FALSE, d->fwd, d->rev, d->seed);
    }
    return NULL;
}

static int
listenOn(const char *path)
{
    struct sockaddr_storage ss;
    socklen_t len = addressOf(path, &ss);
    int fd, one = 1;

    if (!len) {
        fprintf(stderr, "vrm-streamtest: bad address %s\n", path);
        return -1;
    }
    if (ss.ss_family == AF_UNIX)
        unlink(path);
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ss.ss_family != AF_UNIX)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0) {
        fprintf(stderr, "vrm-streamtest: cannot listen on %s: %s\n", path, g_strerror(errno));
        return -1;
    }
    return fd;
}

static gboolean
parseSize(const char *s, guint64 *out)
{
    char *end = NULL;
    guint64 v = g_ascii_strtoull(s, &end, 10);

    switch (*end) {
    case 'K': v <<= 10; end++; break;
    case 'M': v <<= 20; end++; break;
    case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (*end == '+') {      /* "3M+17" */
        guint64 extra;
        if (!parseSize(end + 1, &extra))
            return FALSE;
        v += extra;
        end += strlen(end);
    }
    *out = v;
    return *s && *end == '\0';
}

int
main(int argc, char **argv)
{
    char *role = NULL, *path = NULL, *bytes = NULL, *rbytes = NULL;
    char *diskPath = NULL, *diskBytes = NULL, *diskRbytes = NULL;
    gint channels = 1, deadline = 60, linger = 1000, ndisks = 0;
    gint64 seed = 1;
    GOptionEntry entries[] = {
        { "role", 0, 0, G_OPTION_ARG_STRING, &role, "source or destination", "ROLE" },
        { "unix", 0, 0, G_OPTION_ARG_FILENAME, &path, "the engine's UNIX path, or tcp:A.B.C.D:PORT", "PATH" },
        { "channels", 0, 0, G_OPTION_ARG_INT, &channels, "connections (default 1)", "N" },
        { "bytes", 0, 0, G_OPTION_ARG_STRING, &bytes, "source->destination bytes per channel (e.g. 3M+17)", "SIZE" },
        { "reverse-bytes", 0, 0, G_OPTION_ARG_STRING, &rbytes, "destination->source bytes per channel", "SIZE" },
        { "seed", 0, 0, G_OPTION_ARG_INT64, &seed, "stream seed", "N" },
        { "deadline", 0, 0, G_OPTION_ARG_INT, &deadline, "seconds for the connections (default 60)", "SEC" },
        { "linger", 0, 0, G_OPTION_ARG_INT, &linger, "milliseconds to stay after the streams (default 1000)", "MS" },
        { "disks", 0, 0, G_OPTION_ARG_INT, &ndisks, "disk (NBD) connections before the migration's (default 0)", "N" },
        { "disk-unix", 0, 0, G_OPTION_ARG_FILENAME, &diskPath, "the engine's disk socket", "PATH" },
        { "disk-bytes", 0, 0, G_OPTION_ARG_STRING, &diskBytes, "source->destination bytes per disk", "SIZE" },
        { "disk-reverse-bytes", 0, 0, G_OPTION_ARG_STRING, &diskRbytes, "destination->source bytes per disk (at least 1: the answer)", "SIZE" },
        { "irregular", 0, 0, G_OPTION_ARG_NONE, &irregular, "writes and reads of pseudo-random sizes, 1 byte to 300 KB", NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) octx = g_option_context_new(NULL);
    g_autoptr(GError) err = NULL;
    guint64 fwd = 0, rev = 0, total = 0;
    gint64 start, dl;
    Half *tx, *rx;
    GThread **threads;
    GThread *diskAcceptor = NULL;
    Disks disks = { 0 };
    gboolean source;
    int lfd = -1, failed = 0, i;

    /* QEMU's "-uuid UUID" pair: on the command line, not an option here */
    for (i = 1; i + 1 < argc; i++) {
        if (g_str_equal(argv[i], "-uuid")) {
            memmove(&argv[i], &argv[i + 2], (argc - i - 1) * sizeof(*argv));
            argc -= 2;
            break;
        }
    }
    g_option_context_add_main_entries(octx, entries, NULL);
    if (!g_option_context_parse(octx, &argc, &argv, &err)) {
        fprintf(stderr, "vrm-streamtest: %s\n", err->message);
        return 2;
    }
    if (!role || !path || channels < 1 || ndisks < 0 || (ndisks && !diskPath) ||
        (bytes && !parseSize(bytes, &fwd)) || (rbytes && !parseSize(rbytes, &rev)) ||
        (diskBytes && !parseSize(diskBytes, &disks.fwd)) ||
        (diskRbytes && !parseSize(diskRbytes, &disks.rev)) || (ndisks && disks.rev < 1)) {
        fprintf(stderr, "vrm-streamtest: bad arguments (see --help)\n");
        return 2;
    }
    source = g_str_equal(role, "source");
    dl = g_get_monotonic_time() + (gint64)deadline * G_USEC_PER_SEC;
    disks = (Disks) { .source = source, .path = diskPath, .lfd = -1, .n = ndisks,
                      .fwd = disks.fwd, .rev = disks.rev, .seed = seed, .deadline = dl,
                      .tx = g_new0(Half, ndisks), .rx = g_new0(Half, ndisks),
                      .threads = g_new0(GThread *, 2 * ndisks) };
    if (ndisks && !source) {
        if ((disks.lfd = listenOn(diskPath)) < 0)
            return 1;
        diskAcceptor = g_thread_new("disks", disksAccept, &disks);
    } else if (ndisks && disksConnect(&disks) < 0) {
        fprintf(stderr, "vrm-streamtest: %s\n", disks.error);
        connectsOver();
        return 1;
    }
    tx = g_new0(Half, channels);
    rx = g_new0(Half, channels);
    threads = g_new0(GThread *, 2 * channels);

    if (!source && (lfd = listenOn(path)) < 0)
        return 1;

    /* set before any thread runs: the main writer waits for it */
    othersToEnd = 2 * (channels - 1);
    start = 0;
    for (i = 0; i < channels; i++) {
        int fd;

        if (source) {
            fd = connectRetry(path, dl);
        } else {
            fd = acceptBy(lfd, dl);
        }
        if (fd < 0) {
            fprintf(stderr, "vrm-streamtest: connection %d failed: %s\n", i, g_strerror(errno));
            connectsOver();
            return 1;
        }
        if (!start)
            start = g_get_monotonic_time();
        startHalves(&tx[i], &rx[i], &threads[2 * i], fd, i, source, fwd, rev, seed);
    }
    connectsOver();
    for (i = 0; i < 2 * channels; i++)
        g_thread_join(threads[i]);
    if (diskAcceptor)
        g_thread_join(diskAcceptor);
    if (disks.error) {
        printf("disks: ERROR: %s\n", disks.error);
        failed = 1;
    }
    for (i = 0; i < ndisks; i++) {
        if (disks.threads[2 * i]) {
            g_thread_join(disks.threads[2 * i]);
            g_thread_join(disks.threads[2 * i + 1]);
        }
        printf("disk %d: sent %" G_GUINT64_FORMAT " bytes fnv %016" G_GINT64_MODIFIER "x, "
               "received %" G_GUINT64_FORMAT " bytes fnv %016" G_GINT64_MODIFIER "x%s%s%s%s%s\n",
               i, disks.tx[i].done, disks.tx[i].sum, disks.rx[i].done, disks.rx[i].sum,
               disks.threads[2 * i] ? "" : " NEVER-CONNECTED",
               disks.tx[i].error ? " SEND-ERROR: " : "", disks.tx[i].error ? disks.tx[i].error : "",
               disks.rx[i].error ? " RECV-ERROR: " : "", disks.rx[i].error ? disks.rx[i].error : "");
        if (!disks.threads[2 * i] || disks.tx[i].error || disks.rx[i].error)
            failed = 1;
        total += disks.tx[i].done + disks.rx[i].done;
        if (disks.threads[2 * i])
            close(disks.tx[i].fd);
    }

    for (i = 0; i < channels; i++) {
        printf("channel %d: sent %" G_GUINT64_FORMAT " bytes fnv %016" G_GINT64_MODIFIER "x, "
               "received %" G_GUINT64_FORMAT " bytes fnv %016" G_GINT64_MODIFIER "x%s%s%s%s\n",
               i, tx[i].done, tx[i].sum, rx[i].done, rx[i].sum,
               tx[i].error ? " SEND-ERROR: " : "", tx[i].error ? tx[i].error : "",
               rx[i].error ? " RECV-ERROR: " : "", rx[i].error ? rx[i].error : "");
        if (tx[i].error || rx[i].error)
            failed = 1;
        total += tx[i].done + rx[i].done;
        close(tx[i].fd);
    }
    {
        double secs = (g_get_monotonic_time() - start) / 1e6;
        printf("streamtest %s: %s, %d channels, %" G_GUINT64_FORMAT " bytes in %.3f s, %.1f Mbit/s\n",
               role, failed ? "FAILED" : "OK", channels, total, secs,
               secs > 0 ? total * 8.0 / 1e6 / secs : 0.0);
    }
    if (lfd >= 0) {
        close(lfd);
        unlink(path);
    }
    if (disks.lfd >= 0) {
        close(disks.lfd);
        unlink(diskPath);
    }
    fflush(stdout);
    if (linger > 0)
        g_usleep((gulong)linger * 1000);
    return failed;
}
