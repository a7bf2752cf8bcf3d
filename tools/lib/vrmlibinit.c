/*
 * vrmlibinit.c: what libvirtrdma sets up when it is loaded
 *
 * Its messages are translated in virt-rdma's own text domain (_() names it,
 * see util/vrmi18n.h): bind it to the installed catalogues. The
 * application's locale and default text domain stay its own.
 */
#include <config.h>

#include "vrmi18n.h"

void vrmLibInit(void) __attribute__((constructor));

void
vrmLibInit(void)
{
    vrmI18nBind();
}
