/* A ground-floor file that reaches up into the XML layer: refused. */
#include <config.h>
#include "vrmbadxml.h"
