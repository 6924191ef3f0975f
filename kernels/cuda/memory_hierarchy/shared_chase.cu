// Pointer chasing in shared memory: one thread follows j = s[j] through a chain
// of indices that the block first copies from global into shared memory.
//
// The same measurement as pointer_chase.cu, one level closer to the SM: every
// load needs the result of the previous one, so at most one load is in flight
// and the time per step is the latency of a shared-memory load. The host builds
// `next` as one random cycle through all `entries` words (mh.shared_chain);
// shared memory has no lines and no cache, so one word per entry is enough.
//
// The block copies next[0 .. entries) into dynamic shared memory (launch with
// shared_mem = 4 * entries bytes) and waits at __syncthreads(). Thread 0 then
// walks `warm_steps` steps untimed and times `steps` more steps twice: with
// clock64() (SM clock cycles) and with the %globaltimer register (nanoseconds).
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

extern "C" __global__ void shared_chase(const unsigned int* next,
                                        int entries,
                                        int warm_steps,
                                        int steps,
                                        unsigned int* last,
                                        long long* timing)
{
    extern __shared__ unsigned int s[];
    if (blockIdx.x != 0) {
        return;
    }
    for (int i = threadIdx.x; i < entries; i += blockDim.x) {
        s[i] = next[i];
    }
    __syncthreads();
    if (threadIdx.x != 0) {
        return;
    }
    unsigned int j = 0;
    for (int k = 0; k < warm_steps; ++k) {
        j = s[j];
    }
    long long c0 = clock64();
    unsigned long long t0 = global_ns();
    for (int k = 0; k < steps; ++k) {
        j = s[j];
    }
    // The store makes the last load complete before the clocks are read again.
    last[0] = j;
    __threadfence_block();
    long long c1 = clock64();
    unsigned long long t1 = global_ns();
    timing[0] = c1 - c0;
    timing[1] = (long long)(t1 - t0);
}
