#error "the cuRAND device API (curand_kernel.h) is not available on the CPU backend; generate random numbers on the host and pass them in"
