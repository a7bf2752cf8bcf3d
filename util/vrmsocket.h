/*
 * vrmsocket.h: small file-descriptor helpers shared by the engine and the
 * helper
 */
#pragma once

/* Set O_NONBLOCK on @fd; -1 with the error reported. */
int vrmSetNonBlock(int fd);
