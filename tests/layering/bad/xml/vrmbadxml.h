/* Two headers that include each other: refused. */
#pragma once
#include "vrmbadxml2.h"
