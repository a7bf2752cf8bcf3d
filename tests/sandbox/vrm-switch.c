/*
 * vrm-switch.c: the Ethernet switch of a sandbox of three or more hosts
 *
 * Each VM's NIC is a QEMU stream netdev that connects to its own port, a
 * UNIX socket in the sandbox's private run directory. Frames arrive framed
 * as QEMU frames them (a 4-byte big-endian length, then the frame). The
 * switch learns the source MAC of every frame, sends a unicast frame to the
 * port that MAC was learned on and floods the rest, as a learning switch
 * does: a host sees only its own unicast traffic.
 *
 * Why a process and not QEMU's own links: a stream link joins exactly two
 * VMs, and it couples them; a VM that stops reading stalls the other's
 * transmit queue. Here each port has an egress queue of its own, bounded,
 * and a frame that does not fit is dropped, as a real switch drops it, so
 * one stalled host costs the others only its own traffic. A port that has
 * read nothing for STALL_SECONDS is reported on stderr (the run's
 * switch.log), and so is its recovery: the evidence a failed run needs.
 *
 * Test tooling only, not installed. Usage:
 *   vrm-switch --dir DIR --ports a,b,c
 * makes DIR/port-a.sock and so on (mode 0600; DIR is the caller's private
 * directory), prints "ready" once all listen, and exits 0 when every port
 * has been connected and closed again, or on SIGTERM, after one line of
 * counters per port.
 */
#include <config.h>

#ifndef _GNU_SOURCE
# define _GNU_SOURCE /* accept4 */
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SWITCH_MAX_PORTS 8
/* QEMU's stream netdev sends at most its receive buffer; a jumbo frame of
 * the sandbox's MTU 9000 is far below. Anything longer is not QEMU. */
#define SWITCH_MAX_FRAME 65536
#define SWITCH_ETH_HLEN 14
/* Each port's egress queue: a few hundred jumbo frames. Enough for rxe's
 * bursts, small enough that a dead host cannot grow us without bound. */
#define SWITCH_QUEUE_MAX (4u << 20)
#define SWITCH_READ_CHUNK (64u << 10)
#define STALL_SECONDS 5
#define MAC_TABLE_SIZE 64

typedef enum {
    PORT_LISTENING,   /* waiting for its VM */
    PORT_CONNECTED,
    PORT_CLOSED,      /* its VM went away; not reopened */
} switchPortState;

typedef struct {
    char name[16];
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    switchPortState state;
    int listenFd;
    int fd;
    /* ingress: bytes read but not yet a whole frame */
    uint8_t *in;
    size_t inLen;
    /* egress: framed bytes waiting for the VM, from outHead */
    uint8_t *out;
    size_t outHead;
    size_t outLen;
    size_t outCap;
    time_t lastProgress;   /* the last time the VM took bytes, or the queue was empty */
    bool stalled;
    unsigned long long framesIn;
    unsigned long long framesOut;
    unsigned long long dropped;
} switchPort;

typedef struct {
    uint8_t mac[6];
    int port;   /* -1: free */
} switchMacEntry;

static switchPort ports[SWITCH_MAX_PORTS];
static int nports;
static switchMacEntry macTable[MAC_TABLE_SIZE];
static volatile sig_atomic_t stopRequested;

static void
onSignal(int sig)
{
    (void)sig;
    stopRequested = 1;
}

static time_t
nowSeconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static int
setNonBlocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return -1;
    return 0;
}

static int
portListen(switchPort *p, const char *dir)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    int n = snprintf(p->path, sizeof(p->path), "%s/port-%s.sock", dir, p->name);

    if (n < 0 || (size_t)n >= sizeof(p->path)) {
        fprintf(stderr, "vrm-switch: the socket path for port %s is too long\n", p->name);
        return -1;
    }
    memcpy(sun.sun_path, p->path, (size_t)n + 1);
    p->listenFd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (p->listenFd < 0 ||
        bind(p->listenFd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
        chmod(p->path, 0600) < 0 ||
        listen(p->listenFd, 1) < 0) {
        fprintf(stderr, "vrm-switch: cannot listen on %s: %s\n", p->path, strerror(errno));
        return -1;
    }
    p->fd = -1;
    p->state = PORT_LISTENING;
    return 0;
}

static void
portClose(switchPort *p, const char *why)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    p->state = PORT_CLOSED;
    p->inLen = 0;
    p->outHead = p->outLen = 0;
    for (size_t i = 0; i < MAC_TABLE_SIZE; i++) {
        if (macTable[i].port == p - ports)
            macTable[i].port = -1;
    }
    if (why)
        fprintf(stderr, "vrm-switch: port %s closed: %s\n", p->name, why);
}

/* Queue one frame for P's VM, or drop it when P's queue is full. */
static void
portEnqueue(switchPort *p, const uint8_t *frame, uint32_t len)
{
    size_t need = 4 + (size_t)len;
    uint8_t hdr[4] = { len >> 24, len >> 16, len >> 8, len };

    if (p->state != PORT_CONNECTED)
        return;
    if (p->outLen + need > SWITCH_QUEUE_MAX) {
        p->dropped++;
        return;
    }
    if (p->outHead + p->outLen + need > p->outCap) {
        /* move what is left to the front first; grow only if still short */
        memmove(p->out, p->out + p->outHead, p->outLen);
        p->outHead = 0;
        if (p->outLen + need > p->outCap) {
            size_t cap = p->outCap ? p->outCap : SWITCH_READ_CHUNK;
            while (cap < p->outLen + need)
                cap *= 2;
            uint8_t *grown = realloc(p->out, cap);
            if (!grown) {
                p->dropped++;
                return;
            }
            p->out = grown;
            p->outCap = cap;
        }
    }
    if (p->outLen == 0)
        p->lastProgress = nowSeconds();
    memcpy(p->out + p->outHead + p->outLen, hdr, 4);
    memcpy(p->out + p->outHead + p->outLen + 4, frame, len);
    p->outLen += need;
    p->framesOut++;
}

static void
portFlush(switchPort *p)
{
    while (p->state == PORT_CONNECTED && p->outLen > 0) {
        ssize_t n = send(p->fd, p->out + p->outHead, p->outLen, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                portClose(p, strerror(errno));
            return;
        }
        p->outHead += (size_t)n;
        p->outLen -= (size_t)n;
        p->lastProgress = nowSeconds();
        if (p->stalled) {
            p->stalled = false;
            fprintf(stderr, "vrm-switch: port %s reads again\n", p->name);
        }
    }
    if (p->outLen == 0)
        p->outHead = 0;
}

static int
macLookup(const uint8_t *mac)
{
    for (size_t i = 0; i < MAC_TABLE_SIZE; i++) {
        if (macTable[i].port >= 0 && memcmp(macTable[i].mac, mac, 6) == 0)
            return macTable[i].port;
    }
    return -1;
}

static void
macLearn(const uint8_t *mac, int port)
{
    switchMacEntry *freeEntry = NULL;

    if (mac[0] & 1)
        return;   /* a group address is never a source */
    for (size_t i = 0; i < MAC_TABLE_SIZE; i++) {
        if (macTable[i].port >= 0 && memcmp(macTable[i].mac, mac, 6) == 0) {
            macTable[i].port = port;   /* a host that moved ports */
            return;
        }
        if (macTable[i].port < 0 && !freeEntry)
            freeEntry = &macTable[i];
    }
    if (freeEntry) {
        memcpy(freeEntry->mac, mac, 6);
        freeEntry->port = port;
    }
}

static void
switchFrame(int from, const uint8_t *frame, uint32_t len)
{
    int to;

    ports[from].framesIn++;
    if (len < SWITCH_ETH_HLEN)
        return;   /* a runt: no addresses to switch on */
    macLearn(frame + 6, from);
    to = (frame[0] & 1) ? -1 : macLookup(frame);
    if (to == from)
        return;
    if (to >= 0) {
        portEnqueue(&ports[to], frame, len);
        portFlush(&ports[to]);
        return;
    }
    for (int i = 0; i < nports; i++) {
        if (i == from)
            continue;
        portEnqueue(&ports[i], frame, len);
        portFlush(&ports[i]);
    }
}

/* Read what P's VM sent and switch every whole frame. */
static void
portRead(int idx)
{
    switchPort *p = &ports[idx];
    ssize_t n;
    size_t off = 0;

    n = recv(p->fd, p->in + p->inLen, SWITCH_READ_CHUNK, 0);
    if (n == 0) {
        portClose(p, NULL);
        return;
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            portClose(p, strerror(errno));
        return;
    }
    p->inLen += (size_t)n;
    while (p->inLen - off >= 4) {
        const uint8_t *h = p->in + off;
        uint32_t len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
                       (uint32_t)h[2] << 8 | h[3];
        if (len == 0 || len > SWITCH_MAX_FRAME) {
            char why[64];
            snprintf(why, sizeof(why), "a frame of %u bytes is not QEMU's", len);
            portClose(p, why);
            return;
        }
        if (p->inLen - off < 4 + (size_t)len)
            break;
        switchFrame(idx, h + 4, len);
        off += 4 + (size_t)len;
    }
    memmove(p->in, p->in + off, p->inLen - off);
    p->inLen -= off;
}

static void
portAccept(switchPort *p)
{
    int fd = accept4(p->listenFd, NULL, NULL, SOCK_CLOEXEC);

    if (fd < 0)
        return;
    if (setNonBlocking(fd) < 0) {
        close(fd);
        return;
    }
    p->fd = fd;
    p->state = PORT_CONNECTED;
    p->lastProgress = nowSeconds();
    /* one VM per port, for the whole run */
    close(p->listenFd);
    p->listenFd = -1;
    unlink(p->path);
}

static void
checkStalls(void)
{
    time_t now = nowSeconds();

    for (int i = 0; i < nports; i++) {
        switchPort *p = &ports[i];
        if (p->state != PORT_CONNECTED || p->outLen == 0 || p->stalled)
            continue;
        if (now - p->lastProgress >= STALL_SECONDS) {
            p->stalled = true;
            fprintf(stderr, "vrm-switch: port %s has read nothing for %d s "
                    "(%zu bytes queued, %llu frames dropped so far)\n",
                    p->name, STALL_SECONDS, p->outLen, p->dropped);
        }
    }
}

static int
parsePorts(const char *list)
{
    const char *s = list;

    while (*s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (len == 0 || len >= sizeof(ports[0].name) || nports == SWITCH_MAX_PORTS)
            return -1;
        memcpy(ports[nports].name, s, len);
        ports[nports].name[len] = '\0';
        nports++;
        s += len;
        if (*s == ',')
            s++;
    }
    return nports >= 2 ? 0 : -1;
}

int
main(int argc, char **argv)
{
    const char *dir = NULL;
    const char *list = NULL;
    struct sigaction sa = { .sa_handler = onSignal };

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dir") == 0)
            dir = argv[i + 1];
        else if (strcmp(argv[i], "--ports") == 0)
            list = argv[i + 1];
    }
    if (!dir || !list || parsePorts(list) < 0) {
        fprintf(stderr, "usage: vrm-switch --dir DIR --ports NAME,NAME[,...] (2 to %d ports)\n",
                SWITCH_MAX_PORTS);
        return 2;
    }
    for (size_t i = 0; i < MAC_TABLE_SIZE; i++)
        macTable[i].port = -1;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    for (int i = 0; i < nports; i++) {
        ports[i].in = malloc(4 + SWITCH_MAX_FRAME + SWITCH_READ_CHUNK);
        if (!ports[i].in || portListen(&ports[i], dir) < 0)
            return 1;
    }
    printf("ready\n");
    fflush(stdout);

    while (!stopRequested) {
        struct pollfd pfd[SWITCH_MAX_PORTS];
        int open = 0;

        for (int i = 0; i < nports; i++) {
            switchPort *p = &ports[i];
            pfd[i].fd = -1;
            pfd[i].events = 0;
            if (p->state == PORT_LISTENING) {
                pfd[i].fd = p->listenFd;
                pfd[i].events = POLLIN;
                open++;
            } else if (p->state == PORT_CONNECTED) {
                pfd[i].fd = p->fd;
                pfd[i].events = POLLIN | (p->outLen ? POLLOUT : 0);
                open++;
            }
        }
        if (open == 0)
            break;
        if (poll(pfd, (nfds_t)nports, 1000) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "vrm-switch: poll: %s\n", strerror(errno));
            return 1;
        }
        for (int i = 0; i < nports; i++) {
            switchPort *p = &ports[i];
            if (!pfd[i].revents)
                continue;
            if (p->state == PORT_LISTENING) {
                portAccept(p);
                continue;
            }
            if (pfd[i].revents & POLLOUT)
                portFlush(p);
            if (p->state == PORT_CONNECTED && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                portRead(i);
        }
        checkStalls();
    }

    for (int i = 0; i < nports; i++) {
        fprintf(stderr, "vrm-switch: port %s: %llu frames in, %llu out, %llu dropped\n",
                ports[i].name, ports[i].framesIn, ports[i].framesOut, ports[i].dropped);
        if (ports[i].listenFd >= 0)
            unlink(ports[i].path);
    }
    return 0;
}
