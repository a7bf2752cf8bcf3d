/*
 * vrmconfine.h: the engine confines itself (not dumpable, no new
 * privileges, a seccomp deny list); see vrmconfine.c
 */
#pragma once

#include <stddef.h>

#include <glib.h>

/* -1 reported */
int vrmConfine(void);
/* How many system calls the filter denies */
size_t vrmConfineDeniedCount(void);
