/* fixture of translation-negative: messages for bad-po/po/de.po */
const char *a = N_("a translated message");
const char *b = N_("a fuzzy message");
const char *c = N_("an untranslated message");
const char *d = N_("a message de.po lacks");
const char *e = N_("a size of %1$" G_GUINT64_FORMAT " bytes");
