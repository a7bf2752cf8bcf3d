/*
 * vrmi18n.h: gettext wrappers; every user-facing string goes through _()
 */
#pragma once

#include <glib/gi18n-lib.h>

/*
 * Programs: the user's locale, our text domain bound and made the default;
 * once, early in main().
 */
void vrmI18nInit(void);

/*
 * Libraries (libvirtrdma): only bind our text domain, which _() names
 * explicitly (gi18n-lib.h); the application's locale and default domain
 * are its own. Idempotent and thread-safe.
 */
void vrmI18nBind(void);
