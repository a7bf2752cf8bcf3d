#pragma once
#include "vrmbadxml.h"
