/*
 * vrmtcp.h: QEMU's TCP connections in the transparent mode
 * (docs/transparent.rst): where a steered connection was going, which user
 * owns a TCP socket, and whether an address is this host's
 *
 * The engine cannot ask a TCP peer for its credentials (no SO_PEERCRED), so
 * it reads the owner's uid from the kernel's socket tables
 * (/proc/net/tcp and tcp6, readable by every user), as ss(8) shows it.
 *
 * Public API summary
 * ------------------
 *   vrmTcpOriginalDestination(fd, &orig)   1 steered here (orig: where it
 *                                          was going), 0 not, -1 reported
 *   vrmTcpSocketUid(local, remote, &uid)   the owner of the socket bound to
 *                                          @local and connected to @remote
 *                                          (NULL: listening): 1, 0 none, -1
 *   vrmTcpTableFind(text, v6, local, remote, &uid)  the same in one table's
 *                                          text (tests, fuzzing)
 *   vrmTcpAddressIsLocal(addr)             1 one of this host's, 0 not, -1
 *   vrmTcpFormat(addr)                     "192.0.2.1:49152", "[2001:db8::1]:49152"
 *   vrmTcpSetNoDelay(fd)                   TCP_NODELAY on the engine's end of a
 *                                          connection with QEMU (best effort)
 */
#pragma once

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

int vrmTcpOriginalDestination(int fd, struct sockaddr_storage *orig);
int vrmTcpSocketUid(const struct sockaddr_storage *local,
                    const struct sockaddr_storage *remote, uid_t *uid);
int vrmTcpTableFind(const char *text, bool v6, const struct sockaddr_storage *local,
                    const struct sockaddr_storage *remote, uid_t *uid);
int vrmTcpAddressIsLocal(const struct sockaddr_storage *addr);
char *vrmTcpFormat(const struct sockaddr_storage *addr);
void vrmTcpSetNoDelay(int fd);
