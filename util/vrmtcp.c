/*
 * vrmtcp.c: QEMU's TCP connections in the transparent mode
 */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <glib.h>

#include "vrmtcp.h"
#include "vrmerror.h"
#include "vrmi18n.h"
#include "vrmlog.h"

/* <linux/netfilter_ipv4.h> and <linux/netfilter_ipv6/ip6_tables.h>, which
 * do not mix with the C library's headers */
#ifndef SO_ORIGINAL_DST
# define SO_ORIGINAL_DST 80
#endif
#ifndef IP6T_SO_ORIGINAL_DST
# define IP6T_SO_ORIGINAL_DST 80
#endif

#define VRM_TCP_LISTEN 0x0A         /* the kernel's TCP_LISTEN, as the tables show it */

/* An endpoint as the tables compare it: IPv6, IPv4 mapped (::ffff:a.b.c.d) */
typedef struct {
    guint8 addr[16];
    guint16 port;
} vrmTcpEndpoint;

static bool
vrmTcpEndpointOf(const struct sockaddr_storage *ss, vrmTcpEndpoint *ep)
{
    memset(ep, 0, sizeof(*ep));
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

        ep->addr[10] = ep->addr[11] = 0xff;
        memcpy(ep->addr + 12, &in->sin_addr, 4);
        ep->port = ntohs(in->sin_port);
        return true;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

        memcpy(ep->addr, &in6->sin6_addr, 16);
        ep->port = ntohs(in6->sin6_port);
        return true;
    }
    return false;
}

static bool
vrmTcpEndpointWildcard(const vrmTcpEndpoint *ep)
{
    static const guint8 any6[16] = { 0 };
    static const guint8 any4[16] = { [10] = 0xff, [11] = 0xff };

    return memcmp(ep->addr, any6, 16) == 0 || memcmp(ep->addr, any4, 16) == 0;
}

static bool
vrmTcpEndpointEqual(const vrmTcpEndpoint *a, const vrmTcpEndpoint *b)
{
    return a->port == b->port && memcmp(a->addr, b->addr, 16) == 0;
}

/* "0100007F:1A0A": the address as the kernel's 32-bit words in host order,
 * printed %08X each, then the port %04X */
static bool
vrmTcpParseEndpoint(const char *text, bool v6, vrmTcpEndpoint *ep)
{
    size_t words = v6 ? 4 : 1;
    size_t i;
    char *end;
    unsigned long port;

    memset(ep, 0, sizeof(*ep));
    if (strlen(text) != words * 8 + 5 || text[words * 8] != ':')
        return false;
    for (i = 0; i < words; i++) {
        char hex[9];
        guint32 w;

        memcpy(hex, text + i * 8, 8);
        hex[8] = '\0';
        if (!g_ascii_isxdigit(hex[0]))
            return false;
        w = (guint32)strtoul(hex, &end, 16);
        if (*end)
            return false;
        memcpy(ep->addr + (v6 ? i * 4 : 12), &w, 4);
    }
    if (!v6)
        ep->addr[10] = ep->addr[11] = 0xff;
    if (!g_ascii_isxdigit(text[words * 8 + 1]))
        return false;
    port = strtoul(text + words * 8 + 1, &end, 16);
    if (*end || port > 0xffff)
        return false;
    ep->port = port;
    return true;
}

int
vrmTcpTableFind(const char *text, bool v6, const struct sockaddr_storage *local,
                const struct sockaddr_storage *remote, uid_t *uid)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    vrmTcpEndpoint want, wantRemote;
    size_t i;

    if (!vrmTcpEndpointOf(local, &want) ||
        (remote && !vrmTcpEndpointOf(remote, &wantRemote)))
        return 0;
    /* the first line names the columns (an empty text has none) */
    for (i = 1; lines[0] && lines[i]; i++) {
        g_auto(GStrv) f = g_strsplit_set(g_strstrip(lines[i]), " ", -1);
        g_autoptr(GPtrArray) col = g_ptr_array_new();
        vrmTcpEndpoint l, r;
        unsigned long st, u;
        char *end;
        size_t j;

        for (j = 0; f[j]; j++) {
            if (*f[j])
                g_ptr_array_add(col, f[j]);
        }
        /* sl local rem st tx:rx tr:when retrnsmt uid ... */
        if (col->len < 8 ||
            !vrmTcpParseEndpoint(col->pdata[1], v6, &l) ||
            !vrmTcpParseEndpoint(col->pdata[2], v6, &r))
            continue;
        st = strtoul(col->pdata[3], &end, 16);
        if (*end)
            continue;
        u = strtoul(col->pdata[7], &end, 10);
        if (*end || !g_ascii_isdigit(*(char *)col->pdata[7]) || u > G_MAXUINT32)
            continue;
        if (remote) {
            if (st == VRM_TCP_LISTEN || !vrmTcpEndpointEqual(&l, &want) ||
                !vrmTcpEndpointEqual(&r, &wantRemote))
                continue;
        } else {
            if (st != VRM_TCP_LISTEN || l.port != want.port ||
                (!vrmTcpEndpointWildcard(&l) && memcmp(l.addr, want.addr, 16) != 0))
                continue;
        }
        *uid = (uid_t)u;
        return 1;
    }
    return 0;
}

int
vrmTcpSocketUid(const struct sockaddr_storage *local,
                const struct sockaddr_storage *remote, uid_t *uid)
{
    static const char *const tables[] = { "/proc/net/tcp", "/proc/net/tcp6" };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(tables); i++) {
        g_autofree char *text = NULL;
        g_autoptr(GError) err = NULL;
        int rc;

        if (!g_file_get_contents(tables[i], &text, NULL, &err)) {
            /* a host without IPv6 has no tcp6 */
            if (i == 1 && g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOENT))
                continue;
            vrmReportError(VRM_ERR_SYSTEM, _("cannot read %1$s: %2$s"),
                           tables[i], err->message);
            return -1;
        }
        if ((rc = vrmTcpTableFind(text, i == 1, local, remote, uid)) != 0)
            return rc;
    }
    return 0;
}

int
vrmTcpOriginalDestination(int fd, struct sockaddr_storage *orig)
{
    struct sockaddr_storage self;
    socklen_t len = sizeof(self);
    vrmTcpEndpoint a, b;
    int level, opt;

    memset(orig, 0, sizeof(*orig));
    if (getsockname(fd, (struct sockaddr *)&self, &len) < 0) {
        vrmReportSystemError(errno, _("cannot read the address of a TCP connection"));
        return -1;
    }
    level = self.ss_family == AF_INET6 ? SOL_IPV6 : SOL_IP;
    opt = self.ss_family == AF_INET6 ? IP6T_SO_ORIGINAL_DST : SO_ORIGINAL_DST;
    len = self.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
                                       sizeof(struct sockaddr_in);
    if (getsockopt(fd, level, opt, orig, &len) < 0) {
        /* no connection tracking of it: nothing redirected it */
        if (errno == ENOENT || errno == ENOPROTOOPT)
            return 0;
        vrmReportSystemError(errno, _("cannot read where a TCP connection was going (SO_ORIGINAL_DST)"));
        return -1;
    }
    if (!vrmTcpEndpointOf(orig, &a) || !vrmTcpEndpointOf(&self, &b))
        return 0;
    return vrmTcpEndpointEqual(&a, &b) ? 0 : 1;
}

int
vrmTcpAddressIsLocal(const struct sockaddr_storage *addr)
{
    struct sockaddr_storage probe = *addr;
    socklen_t len;
    int fd, rc = 1;

    /* binding port 0 of an address succeeds exactly when it is this
     * host's (without IP_FREEBIND), and reserves nothing once closed */
    if (probe.ss_family == AF_INET) {
        ((struct sockaddr_in *)&probe)->sin_port = 0;
        len = sizeof(struct sockaddr_in);
    } else if (probe.ss_family == AF_INET6) {
        ((struct sockaddr_in6 *)&probe)->sin6_port = 0;
        len = sizeof(struct sockaddr_in6);
    } else {
        return 0;
    }
    if ((fd = socket(probe.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        vrmReportSystemError(errno, _("cannot create a TCP socket"));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&probe, len) < 0) {
        if (errno == EADDRNOTAVAIL) {
            rc = 0;
        } else {
            vrmReportSystemError(errno, _("cannot tell whether an address is this host's"));
            rc = -1;
        }
    }
    close(fd);
    return rc;
}

char *
vrmTcpFormat(const struct sockaddr_storage *addr)
{
    char host[INET6_ADDRSTRLEN] = "?";

    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)addr;

        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        return g_strdup_printf("%s:%u", host, ntohs(in->sin_port));
    }
    if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;

        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        return g_strdup_printf("[%s]:%u", host, ntohs(in6->sin6_port));
    }
    return g_strdup(host);
}

/* The engine's end of a loopback connection with QEMU: its small writes
 * (QEMU's return path, a multifd sync's answer) must not wait for Nagle's
 * algorithm and the peer's delayed ACK (40 ms each) */
void
vrmTcpSetNoDelay(int fd)
{
    int one = 1;

    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
        VRM_DEBUG("TCP_NODELAY on fd %d: %s", fd, g_strerror(errno));
}
