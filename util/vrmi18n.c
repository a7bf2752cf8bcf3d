/*
 * vrmi18n.c: gettext set-up shared by every program
 */
#define _GNU_SOURCE /* secure_getenv() */
#include <config.h>

#include <locale.h>
#include <stdlib.h>

#include "vrmi18n.h"

void
vrmI18nBind(void)
{
    static gsize bound;

    if (g_once_init_enter(&bound)) {
        /* VRM_LOCALEDIR: tests only: the build tree's message catalogs
         * (tests/i18n/check-translation.sh); ignored in set-id programs */
        const char *dir = secure_getenv("VRM_LOCALEDIR");

        bindtextdomain(GETTEXT_PACKAGE, dir && *dir ? dir : LOCALEDIR);
        bind_textdomain_codeset(GETTEXT_PACKAGE, "UTF-8");
        g_once_init_leave(&bound, 1);
    }
}

void
vrmI18nInit(void)
{
    setlocale(LC_ALL, "");
    vrmI18nBind();
    textdomain(GETTEXT_PACKAGE);
}
