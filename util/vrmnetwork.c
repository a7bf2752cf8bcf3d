/*
 * vrmnetwork.c: lists of IP networks
 */
#include <config.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "vrmnetwork.h"
#include "vrmparse.h"

/* "ADDR" or "ADDR/PREFIX"; host bits must be zero */
static bool
vrmNetworkParseOne(const char *item, vrmNetwork *net)
{
    g_autofree char *addr = g_strdup(item);
    char *slash = strchr(addr, '/');
    unsigned long long prefix;
    unsigned int max;
    unsigned int i;

    memset(net, 0, sizeof(*net));
    if (slash)
        *slash = '\0';
    if (inet_pton(AF_INET, addr, net->addr) == 1) {
        net->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, addr, net->addr) == 1) {
        net->family = AF_INET6;
        max = 128;
    } else {
        return false;
    }
    net->prefix = max;
    if (slash) {
        if (!vrmParseUInt64(slash + 1, &prefix) || prefix > max)
            return false;
        net->prefix = prefix;
    }
    for (i = net->prefix; i < max; i++) {
        if (net->addr[i / 8] & (0x80 >> (i % 8)))
            return false;
    }
    return true;
}

GArray *
vrmNetworkListParse(const char *text, char **bad)
{
    g_autoptr(GArray) nets = g_array_new(FALSE, FALSE, sizeof(vrmNetwork));
    g_auto(GStrv) items = g_strsplit_set(text ? text : "", "; ,", -1);
    size_t i;

    *bad = NULL;
    for (i = 0; items[i]; i++) {
        vrmNetwork net;

        if (!*items[i])
            continue;
        if (!vrmNetworkParseOne(items[i], &net)) {
            *bad = g_strdup(items[i]);
            return NULL;
        }
        g_array_append_val(nets, net);
    }
    if (nets->len == 0) {
        *bad = g_strdup(text ? text : "");
        return NULL;
    }
    return g_steal_pointer(&nets);
}

char *
vrmNetworkListFormat(const GArray *nets)
{
    GString *out = g_string_new(NULL);
    guint i;

    for (i = 0; nets && i < nets->len; i++) {
        const vrmNetwork *n = &g_array_index(nets, vrmNetwork, i);
        char buf[INET6_ADDRSTRLEN];

        inet_ntop(n->family, n->addr, buf, sizeof(buf));
        g_string_append_printf(out, "%s%s/%u", i ? ";" : "", buf, n->prefix);
    }
    return g_string_free(out, FALSE);
}

static bool
vrmNetworkHas(const vrmNetwork *n, int family, const guint8 *addr)
{
    unsigned int full = n->prefix / 8;
    unsigned int rest = n->prefix % 8;

    if (n->family != family || memcmp(n->addr, addr, full) != 0)
        return false;
    return !rest || ((n->addr[full] ^ addr[full]) & (0xff << (8 - rest))) == 0;
}

static bool
vrmNetworkListHas(const GArray *nets, int family, const guint8 *addr)
{
    static const guint8 mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    guint i;

    if (!nets)
        return true;
    if (family == AF_INET6 && memcmp(addr, mapped, sizeof(mapped)) == 0) {
        family = AF_INET;
        addr += sizeof(mapped);
    }
    for (i = 0; i < nets->len; i++) {
        if (vrmNetworkHas(&g_array_index(nets, vrmNetwork, i), family, addr))
            return true;
    }
    return false;
}

bool
vrmNetworkListHasSockaddr(const GArray *nets, const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return vrmNetworkListHas(nets, AF_INET,
                                 (const guint8 *)&((const struct sockaddr_in *)sa)->sin_addr);
    if (sa->sa_family == AF_INET6)
        return vrmNetworkListHas(nets, AF_INET6,
                                 (const guint8 *)&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return !nets;
}

bool
vrmNetworkListHasAddress(const GArray *nets, const char *address)
{
    guint8 buf[16];

    if (!nets)
        return true;
    if (address && inet_pton(AF_INET, address, buf) == 1)
        return vrmNetworkListHas(nets, AF_INET, buf);
    if (address && inet_pton(AF_INET6, address, buf) == 1)
        return vrmNetworkListHas(nets, AF_INET6, buf);
    return false;
}

/* @address as (family, 16 bytes), an IPv4-mapped IPv6 address as IPv4 */
static bool
vrmNetworkAddressParse(const char *address, int *family, guint8 *buf)
{
    static const guint8 mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

    memset(buf, 0, 16);
    if (!address)
        return false;
    if (inet_pton(AF_INET, address, buf) == 1) {
        *family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, address, buf) != 1)
        return false;
    *family = AF_INET6;
    if (memcmp(buf, mapped, sizeof(mapped)) == 0) {
        memmove(buf, buf + sizeof(mapped), 4);
        memset(buf + 4, 0, 12);
        *family = AF_INET;
    }
    return true;
}

bool
vrmNetworkAddressEqual(const char *a, const char *b)
{
    guint8 ba[16];
    guint8 bb[16];
    int fa;
    int fb;

    return vrmNetworkAddressParse(a, &fa, ba) && vrmNetworkAddressParse(b, &fb, bb) &&
        fa == fb && memcmp(ba, bb, sizeof(ba)) == 0;
}
