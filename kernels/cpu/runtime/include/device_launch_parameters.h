/* device_launch_parameters.h for the CPU backend: everything it declares for device code is in cuda_cpu.h. */
#pragma once
#include "cuda_cpu.h"
