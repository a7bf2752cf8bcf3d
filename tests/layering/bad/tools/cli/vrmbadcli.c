/* A tool that talks verbs itself instead of asking the helper: refused. */
#include <config.h>
#include <infiniband/verbs.h>
