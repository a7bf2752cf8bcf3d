/*
 * vrmnetwork.h: lists of IP networks ("10.0.0.0/8;fd00::/8;192.0.2.7"),
 * as [peers] allow names them
 *
 * Public API summary
 * ------------------
 *   vrmNetworkListParse(text, &bad)        the list, or NULL with @bad the
 *                                          item that is not a network
 *   vrmNetworkListFormat(nets)             its canonical text
 *   vrmNetworkListHasSockaddr(nets, sa)    an accepted peer's address in it
 *   vrmNetworkListHasAddress(nets, text)   a numeric address in it
 *   vrmNetworkAddressEqual(a, b)           two numeric addresses, the same
 *                                          host (false if one is not one)
 * An IPv4 address seen as IPv4-mapped IPv6 (::ffff:a.b.c.d) counts as
 * IPv4. A NULL list holds every address.
 */
#pragma once

#include <stdbool.h>
#include <sys/socket.h>

#include <glib.h>

typedef struct {
    int family;                 /* AF_INET or AF_INET6 */
    guint8 addr[16];            /* network order; IPv4 in the first 4 */
    unsigned int prefix;        /* bits */
} vrmNetwork;

GArray *vrmNetworkListParse(const char *text, char **bad);
char *vrmNetworkListFormat(const GArray *nets);
bool vrmNetworkListHasSockaddr(const GArray *nets, const struct sockaddr *sa);
bool vrmNetworkListHasAddress(const GArray *nets, const char *address);
bool vrmNetworkAddressEqual(const char *a, const char *b);
