/* cooperative_groups/scan.h for the CPU backend: the scans live in cooperative_groups.h. */
#pragma once
#include "../cooperative_groups.h"
