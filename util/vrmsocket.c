/*
 * vrmsocket.c: small file-descriptor helpers
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include <glib.h>

#include "vrmsocket.h"
#include "vrmerror.h"
#include "vrmi18n.h"

int
vrmSetNonBlock(int fd)
{
    int flags = fcntl(fd, F_GETFL);

    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        vrmReportSystemError(errno, _("cannot make a socket non-blocking"));
        return -1;
    }
    return 0;
}

int
vrmUnixAddress(const char *path, struct sockaddr_un *sa)
{
    if (!vrmUnixAddressFill(path, sa)) {
        vrmReportError(VRM_ERR_CONFIG,
                       _("the socket path %1$s is longer than the %2$zu bytes a UNIX socket address holds"),
                       path ? path : "", sizeof(sa->sun_path) - 1);
        return -1;
    }
    return 0;
}
