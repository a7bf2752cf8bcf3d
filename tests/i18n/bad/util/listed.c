/* listed */
static const char *a = N_("listed");
