// Pointer chasing: one thread follows j = next[j] through a chain of indices.
//
// Every load needs the result of the previous one, so at most one load is in
// flight and the time per step is the latency of whichever memory level holds
// the chain (L1, L2 or device memory). The host builds `next` as one random
// cycle that visits one 4-byte word per 128-byte cache line, so neither spatial
// locality nor a sequential prefetch can help.
//
// The thread first walks `warm_steps` steps untimed (to load the chain into
// the caches it fits in), then times `steps` more steps twice: with clock64()
// (SM clock cycles) and with the %globaltimer register (nanoseconds).
// timing[0] = cycles, timing[1] = nanoseconds. The final index goes to last[0]
// so the chain cannot be optimised away, and so that it can be checked.
//
// Launch with one block of one thread.
__device__ __forceinline__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void pointer_chase(const unsigned int* next,
                                         int warm_steps,
                                         int steps,
                                         unsigned int* last,
                                         long long* timing)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) {
        return;
    }
    unsigned int j = 0;
    for (int s = 0; s < warm_steps; ++s) {
        j = next[j];
    }
    long long c0 = clock64();
    unsigned long long t0 = global_ns();
    for (int s = 0; s < steps; ++s) {
        j = next[j];
    }
    // The store makes the last load complete before the clocks are read again.
    last[0] = j;
    __threadfence_block();
    long long c1 = clock64();
    unsigned long long t1 = global_ns();
    timing[0] = c1 - c0;
    timing[1] = (long long)(t1 - t0);
}
