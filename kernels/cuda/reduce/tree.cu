// The shared-memory tree reductions of the reduction ladder. Each block reduces its own slice of
// x to one float, partial[blockIdx.x]; the host launches the kernel again on the partial sums
// until one value is left. Every kernel needs blockDim.x floats of dynamic shared memory and
// blockDim.x a power of two (64 to 1024). Elements past n count as 0, the identity of +.
//
// The first three kernels read one element per thread (slice = blockDim.x elements); the others
// add two elements while loading (slice = 2 * blockDim.x elements).

#define FULL_MASK 0xffffffffu

// Rung 1: interleaved addressing. In step s, the threads whose index is a multiple of 2s add the
// element s to their right. The active threads are spread over every warp, so every warp runs
// the branch with most of its lanes idle, and % is a slow instruction.
extern "C" __global__ void reduce_interleaved(const float* __restrict__ x, float* partial, int n)
{
    extern __shared__ float buf[];
    unsigned int t = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (t % (2 * s) == 0) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = buf[0];
}

// Rung 2: the same pairs, but handed to the first threads of the block: thread t works on
// buf[2st] and buf[2st + s]. Whole warps are now active or idle, but the lanes of a warp touch
// words 2s apart, so several of them fall in the same shared-memory bank (bank conflicts).
extern "C" __global__ void reduce_interleaved_strided(const float* __restrict__ x, float* partial, int n)
{
    extern __shared__ float buf[];
    unsigned int t = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        unsigned int k = 2 * s * t;
        if (k < blockDim.x) buf[k] += buf[k + s];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = buf[0];
}

// Rung 3: sequential addressing. In each step the first half of the active threads add the
// second half: thread t adds buf[t + s] to buf[t]. Consecutive lanes touch consecutive words (no
// bank conflicts), and only the last five steps leave a warp partly active.
extern "C" __global__ void reduce_sequential(const float* __restrict__ x, float* partial, int n)
{
    extern __shared__ float buf[];
    unsigned int t = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = buf[0];
}

// Two elements per thread, added while loading: the block's slice is 2 * blockDim.x elements.
__device__ float load_two(const float* __restrict__ x, int n)
{
    unsigned int i = blockIdx.x * (2 * blockDim.x) + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    if (i + blockDim.x < n) v += x[i + blockDim.x];
    return v;
}

// Rung 4: sequential addressing with the first addition done during the load. Half as many
// blocks, and no thread is idle in the first step.
extern "C" __global__ void reduce_first_add(const float* __restrict__ x, float* partial, int n)
{
    extern __shared__ float buf[];
    unsigned int t = threadIdx.x;
    buf[t] = load_two(x, n);
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = buf[0];
}

// Rung 5: as rung 4, but the last 64 values are reduced by warp 0 alone, with __syncwarp()
// instead of __syncthreads(): the other warps of the block are done. Every step reads into a
// register, waits for all 32 lanes, writes, and waits again; the barrier also orders the lanes'
// shared-memory accesses. (Without these __syncwarp() calls the tail is a data race: see the
// "SIMT and warps" chapter.)
extern "C" __global__ void reduce_syncwarp_tail(const float* __restrict__ x, float* partial, int n)
{
    extern __shared__ float buf[];
    unsigned int t = threadIdx.x;
    buf[t] = load_two(x, n);
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t < 32) {
        float v = buf[t] + buf[t + 32];
        for (unsigned int s = 16; s > 0; s >>= 1) {
            __syncwarp();
            buf[t] = v;
            __syncwarp();
            v += buf[t + s];   // lanes t >= s compute values that nobody reads
        }
        if (t == 0) partial[blockIdx.x] = v;
    }
}

// The sum of the 32 lanes' v, in lane 0, from register to register. All 32 lanes must call it.
__device__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(FULL_MASK, v, offset);
    return v;
}

// Rung 6: no shared-memory tree at all. Each warp sums its 32 values with shuffles, lane 0 of
// every warp writes the warp's total, and warp 0 sums those totals with shuffles again. One
// __syncthreads() per block instead of log2(blockDim.x). Needs only 32 floats of shared memory
// (blockDim.x a multiple of 32 would do; the ladder keeps powers of two).
extern "C" __global__ void reduce_shuffle(const float* __restrict__ x, float* partial, int n)
{
    __shared__ float warp_totals[32];
    unsigned int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = warp_sum(load_two(x, n));
    if (lane == 0) warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? warp_totals[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) partial[blockIdx.x] = v;
    }
}
