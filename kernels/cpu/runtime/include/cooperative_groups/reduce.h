/* cooperative_groups/reduce.h for the CPU backend: reduce() lives in cooperative_groups.h. */
#pragma once
#include "../cooperative_groups.h"
