// Planted data races (and their fixed twins) for checking a race detector against
// compute-sanitizer's racecheck. Every kernel reverses or reduces one block's worth of x
// (blockDim.x a multiple of 32, at most 256, and one block per blockDim.x elements of x).
//
// missing_barrier   writes its element into shared memory and reads a neighbour's without a
//                   __syncthreads() in between: a read-after-write race, also across warps.
// with_barrier      the same with the barrier: no race.
// war_in_place      reverses the tile in place: every thread reads its mirror element and then
//                   overwrites its own, with no barrier between the read and the write of the two
//                   threads: a write-after-read race.
// warp_tail         the last steps of a tree reduction done by warp 0 alone, without
//                   __syncwarp(): lanes of one warp read what other lanes write (Volta and newer
//                   GPUs do not run the lanes of a warp in lockstep).
// warp_tail_synced  the same tail with __syncwarp() between every read and write: no race.
// shuffle_only      warp_tail_synced with every __syncwarp() replaced by a __shfl_sync that returns
//                   the lane's own value: a shuffle exchanges registers, but does it order shared
//                   memory? (The CUDA Programming Guide promises memory ordering for __syncwarp.)
// atomic_counter    every thread adds to one shared counter with atomicAdd, then thread 0 reads
//                   it after a barrier: atomics do not race with each other, so no race.
// global_in_block   every thread of a block adds its value to out[block] with a plain
//                   read-modify-write: a race on global memory (racecheck checks shared memory
//                   only, so only the CPU backend's analysis reports this one).
#define TILE 256

extern "C" __global__ void missing_barrier(const float* x, float* y)
{
    __shared__ float s[TILE];
    const int t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    s[t] = x[i];
    y[i] = s[(t + 1) % blockDim.x];
}

extern "C" __global__ void with_barrier(const float* x, float* y)
{
    __shared__ float s[TILE];
    const int t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    s[t] = x[i];
    __syncthreads();
    y[i] = s[(t + 1) % blockDim.x];
}

extern "C" __global__ void war_in_place(const float* x, float* y)
{
    __shared__ float s[TILE];
    const int t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    s[t] = x[i];
    __syncthreads();
    const float mirror = s[blockDim.x - 1 - t];
    s[t] = mirror;
    __syncthreads();
    y[i] = s[t];
}

extern "C" __global__ void warp_tail(const float* x, float* y)
{
    __shared__ float s[TILE];
    const int t = threadIdx.x;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 32; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t < 32) {
        s[t] += s[t + 32];
        s[t] += s[t + 16];
        s[t] += s[t + 8];
        s[t] += s[t + 4];
        s[t] += s[t + 2];
        s[t] += s[t + 1];
    }
    if (t == 0) y[blockIdx.x] = s[0];
}

extern "C" __global__ void warp_tail_synced(const float* x, float* y)
{
    __shared__ float s[TILE];
    const int t = threadIdx.x;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 32; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t < 32) {
        float v = s[t] + s[t + 32];
        for (int stride = 16; stride > 0; stride >>= 1) {
            __syncwarp();
            s[t] = v;
            __syncwarp();
            v += s[t + stride];
        }
        if (t == 0) y[blockIdx.x] = v;
    }
}

extern "C" __global__ void shuffle_only(const float* x, float* y)
{
    __shared__ float s[TILE];
    const int t = threadIdx.x;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    if (t < 32) {
        float v = s[t] + s[t + 32];
        for (int stride = 16; stride > 0; stride >>= 1) {
            v = __shfl_sync(0xffffffffu, v, t);   // where warp_tail_synced has __syncwarp()
            s[t] = v;
            v = __shfl_sync(0xffffffffu, v, t);
            v += s[t + stride];
        }
        if (t == 0) y[blockIdx.x] = v;
    }
}

extern "C" __global__ void atomic_counter(const float* x, float* y)
{
    __shared__ int count;
    const int t = threadIdx.x;
    if (t == 0) count = 0;
    __syncthreads();
    if (x[blockIdx.x * blockDim.x + t] > 0.0f) atomicAdd(&count, 1);
    __syncthreads();
    if (t == 0) y[blockIdx.x] = (float)count;
}

extern "C" __global__ void global_in_block(const float* x, float* y)
{
    const int t = threadIdx.x;
    if (t == 0) y[blockIdx.x] = 0.0f;
    __syncthreads();
    y[blockIdx.x] += x[blockIdx.x * blockDim.x + t];
}
