// Building blocks shared by the scan kernels of the "Scan" chapter.
//
// warp_inclusive_scan   Hillis-Steele inside one warp, through registers (__shfl_up_sync).
// warp_sum              butterfly sum of the 32 lanes (__shfl_xor_sync); every lane gets it.
// block_exclusive_scan  one value per thread: warp scans, then a scan of the warp totals.
// load_tile/store_tile  move a tile of THREADS * ITEMS elements between global memory and
//                       registers, ITEMS consecutive elements per thread, through shared memory:
//                       the global accesses are coalesced (16-byte vectors when the tile is full
//                       and aligned), and the shared array is padded by one element every 32
//                       so that neither access pattern has bank conflicts.
#pragma once

#define FULL_MASK 0xffffffffu

// One padding element after every 32: element i lives at i + i / 32.
__device__ __forceinline__ int padded(int i) { return i + (i >> 5); }

template <typename T> struct Vec4;
template <> struct Vec4<int>   { typedef int4 type; };
template <> struct Vec4<float> { typedef float4 type; };

// Inclusive scan of v over the 32 lanes of a full warp: log2(32) = 5 steps.
template <typename T>
__device__ __forceinline__ T warp_inclusive_scan(T v)
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        T from_below = __shfl_up_sync(FULL_MASK, v, d);  // v of lane - d (own v for lane < d)
        if (lane >= d) v += from_below;
    }
    return v;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v)
{
#pragma unroll
    for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(FULL_MASK, v, d);
    return v;
}

// Exclusive scan of one value per thread over the block (blockDim.x a multiple of 32, at most
// 1024). `warp_totals` is shared memory for 33 values. Returns the thread's exclusive prefix and
// sets `block_total`. Ends with a barrier, so warp_totals may be reused afterwards.
template <typename T>
__device__ __forceinline__ T block_exclusive_scan(T v, T* warp_totals, T& block_total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    T inclusive = warp_inclusive_scan(v);
    T exclusive = __shfl_up_sync(FULL_MASK, inclusive, 1);
    if (lane == 0) exclusive = T(0);
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {                      // scan the warp totals with one more warp scan
        T total = lane < warps ? warp_totals[lane] : T(0);
        T incl = warp_inclusive_scan(total);
        T excl = __shfl_up_sync(FULL_MASK, incl, 1);
        if (lane < warps) warp_totals[lane] = lane == 0 ? T(0) : excl;
        if (lane == 31) warp_totals[32] = incl;
    }
    __syncthreads();
    block_total = warp_totals[32];
    T result = warp_totals[warp] + exclusive;
    __syncthreads();
    return result;
}

// Tile [base, base + THREADS * ITEMS) of x into items[] (ITEMS consecutive elements per thread);
// elements at or past n read as 0. `smem` holds padded(THREADS * ITEMS) elements.
template <typename T, int THREADS, int ITEMS>
__device__ __forceinline__ void load_tile(const T* x, long long base, int n, T* smem, T (&items)[ITEMS])
{
    constexpr int TILE = THREADS * ITEMS;
    const bool vector = base + TILE <= n && ((unsigned long long)(x + base) & 15) == 0;
    if (vector) {                         // full, aligned tile: 16-byte loads, ITEMS / 4 per thread
        typedef typename Vec4<T>::type V;
        const V* xv = reinterpret_cast<const V*>(x + base);
        V v[ITEMS / 4];
#pragma unroll
        for (int k = 0; k < ITEMS / 4; ++k) v[k] = xv[k * THREADS + threadIdx.x];   // all in flight
#pragma unroll
        for (int k = 0; k < ITEMS / 4; ++k) {
            const int j = 4 * (k * THREADS + threadIdx.x);
            smem[padded(j)] = v[k].x;     smem[padded(j + 1)] = v[k].y;
            smem[padded(j + 2)] = v[k].z; smem[padded(j + 3)] = v[k].w;
        }
    } else {                              // the last tile (or a misaligned one): one element each
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int j = k * THREADS + threadIdx.x;
            smem[padded(j)] = base + j < n ? x[base + j] : T(0);
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) items[i] = smem[padded(threadIdx.x * ITEMS + i)];
    __syncthreads();
}

// The reverse of load_tile: items[] of every thread to y[base ...], only below n.
template <typename T, int THREADS, int ITEMS>
__device__ __forceinline__ void store_tile(T* y, long long base, int n, T* smem, const T (&items)[ITEMS])
{
    constexpr int TILE = THREADS * ITEMS;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) smem[padded(threadIdx.x * ITEMS + i)] = items[i];
    __syncthreads();
    const bool vector = base + TILE <= n && ((unsigned long long)(y + base) & 15) == 0;
    if (vector) {
        typedef typename Vec4<T>::type V;
        V* yv = reinterpret_cast<V*>(y + base);
#pragma unroll
        for (int k = 0; k < ITEMS / 4; ++k) {
            const int j = 4 * (k * THREADS + threadIdx.x);
            V v;
            v.x = smem[padded(j)];     v.y = smem[padded(j + 1)];
            v.z = smem[padded(j + 2)]; v.w = smem[padded(j + 3)];
            yv[k * THREADS + threadIdx.x] = v;
        }
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int j = k * THREADS + threadIdx.x;
            if (base + j < n) y[base + j] = smem[padded(j)];
        }
    }
}
