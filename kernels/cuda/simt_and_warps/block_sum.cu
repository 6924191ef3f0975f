// Three block sums of an int array. Every block adds up the elements
//   x[i] for i = blockIdx.x * blockDim.x + threadIdx.x + k * gridDim.x * blockDim.x, k = 0, 1, ...
// (a grid-stride loop) and writes its total to partial[blockIdx.x]. They differ in how the
// threads of a block combine their per-thread sums.
// The sums must fit in an int; the callers use small values.

#define FULL_MASK 0xffffffffu

// Per-thread sum over the grid-stride loop.
__device__ int thread_sum(const int* x, int n)
{
    int sum = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        sum += x[i];
    return sum;
}

// WRONG ON PURPOSE (needs blockDim.x a power of two, 64..1024).
// A shared-memory tree whose last five steps run in warp 0 without any synchronisation: the
// "warp-synchronous" idiom of pre-Volta code. Nothing orders lane t's read of tmp[t + s] after the
// write of lane t + s in the previous step: since Volta the lanes of a warp are not guaranteed to
// run in lockstep, and the compiler, which sees no barrier and no volatile, may keep tmp[t] in a
// register or load tmp[t + 16], tmp[t + 8], ... before the stores of earlier steps.
extern "C" __global__ void block_sum_unsafe_tail(const int* x, int* partial, int n)
{
    __shared__ int tmp[1024];
    int t = threadIdx.x;
    tmp[t] = thread_sum(x, n);
    __syncthreads();
    for (int s = blockDim.x / 2; s > 16; s >>= 1) {
        if (t < s) tmp[t] += tmp[t + s];
        __syncthreads();
    }
    if (t < 16) {  // data race: no __syncwarp() between the steps, no volatile
        tmp[t] += tmp[t + 16];
        tmp[t] += tmp[t + 8];
        tmp[t] += tmp[t + 4];
        tmp[t] += tmp[t + 2];
        tmp[t] += tmp[t + 1];
    }
    if (t == 0) partial[blockIdx.x] = tmp[0];
}

// The same tree, made correct with __syncwarp() (blockDim.x a power of two, 32..1024).
// All 32 lanes of warp 0 take part, so the full-warp barrier is legal; each step reads into a
// register, waits for every lane to have read, then writes, then waits for every lane to have
// written. __syncwarp() also orders the shared-memory accesses of the lanes it synchronises.
extern "C" __global__ void block_sum_syncwarp(const int* x, int* partial, int n)
{
    __shared__ int tmp[1024];
    int t = threadIdx.x;
    tmp[t] = thread_sum(x, n);
    __syncthreads();
    for (int s = blockDim.x / 2; s > 16; s >>= 1) {
        if (t < s) tmp[t] += tmp[t + s];
        __syncthreads();
    }
    if (t < 32) {
        int v = tmp[t];
        for (int s = 16; s > 0; s >>= 1) {
            v += tmp[t + s];   // lanes t >= s read values nobody needs; harmless
            __syncwarp();
            tmp[t] = v;
            __syncwarp();
        }
    }
    if (t == 0) partial[blockIdx.x] = tmp[0];
}

// Sum over the 32 lanes of a warp with register shuffles; the total ends up in lane 0.
// Every lane of the warp must call it (the mask names all 32).
__device__ int warp_sum_down(int v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(FULL_MASK, v, offset);
    return v;
}

// Block sum with shuffles (blockDim.x a multiple of 32, up to 1024): each warp reduces its 32
// values in registers, lane 0 of every warp puts the warp's total in shared memory, and warp 0
// reduces those totals. One __syncthreads(), 32 ints of shared memory.
extern "C" __global__ void block_sum_shfl(const int* x, int* partial, int n)
{
    __shared__ int warp_totals[32];
    int lane = threadIdx.x % 32;
    int warp = threadIdx.x / 32;
    int v = warp_sum_down(thread_sum(x, n));
    if (lane == 0) warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int warps = blockDim.x / 32;
        v = lane < warps ? warp_totals[lane] : 0;   // the identity, never uninitialised memory
        v = warp_sum_down(v);
        if (lane == 0) partial[blockIdx.x] = v;
    }
}
