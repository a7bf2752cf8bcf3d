/*
 * vrmi18n.c: gettext set-up shared by every program
 */
#include <config.h>

#include <locale.h>

#include "vrmi18n.h"

void
vrmI18nBind(void)
{
    static gsize bound;

    if (g_once_init_enter(&bound)) {
        bindtextdomain(GETTEXT_PACKAGE, LOCALEDIR);
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
