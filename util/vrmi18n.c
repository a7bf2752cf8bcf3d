/*
 * vrmi18n.c: gettext set-up shared by every program
 */
#include <config.h>

#include <locale.h>

#include "vrmi18n.h"

void
vrmI18nInit(void)
{
    setlocale(LC_ALL, "");
    bindtextdomain(GETTEXT_PACKAGE, LOCALEDIR);
    bind_textdomain_codeset(GETTEXT_PACKAGE, "UTF-8");
    textdomain(GETTEXT_PACKAGE);
}
