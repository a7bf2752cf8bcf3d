/*
 * vrmsocket.c: small file-descriptor helpers
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>

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
