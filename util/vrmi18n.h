/*
 * vrmi18n.h: gettext wrappers; every user-facing string goes through _()
 */
#pragma once

#include <glib/gi18n-lib.h>

/* Bind the text domain once, early in main() of every program. */
void vrmI18nInit(void);
