/*
 * vrmsocket.h: small file-descriptor helpers shared by the engine and the
 * helper
 */
#pragma once

#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

/* Set O_NONBLOCK on @fd; -1 with the error reported. */
int vrmSetNonBlock(int fd);

/* The address of the UNIX socket at @path; -1 with the error reported
 * when the path does not fit (never cut short) */
int vrmUnixAddress(const char *path, struct sockaddr_un *sa);
/* The same without reporting, for the log itself (which the error module
 * reports through): false if it does not fit. Inline, so that the log
 * below everything calls nothing above it. */
static inline bool
vrmUnixAddressFill(const char *path, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (!path || strlen(path) >= sizeof(sa->sun_path))
        return false;
    memcpy(sa->sun_path, path, strlen(path) + 1);
    return true;
}
