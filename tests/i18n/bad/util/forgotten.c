/* has a message, not listed: refused */
static const char *b = _("forgotten");
