// Building blocks shared by the kernels of the "Softmax" chapter.
//
// Element types   float, and fp16 carried as its 16-bit pattern (unsigned short). Every kernel
//                 converts to float on load and accumulates in float, with the conversions of
//                 cuda_fp16.h (each compiles to one cvt instruction).
// 16-byte packs   load16 / store16 move 16 bytes (4 floats or 8 halves) with one instruction;
//                 the address must be a multiple of 16. Stores are streaming stores.
// MaxSum          the online-softmax state of a set of elements: m, the largest element (at
//                 least LOWEST), and d, the sum of exp(x - m) over the set. online_update adds
//                 elements, merge combines two states (associative and commutative).
// reductions      warp_max, warp_merge (butterflies: every lane gets the result), block_max,
//                 block_sum, block_merge (every thread of the block gets the result). warp_sum
//                 is the butterfly sum of the Scan chapter, included below.
//
// Why LOWEST and not -inf: the running max starts at the lowest finite float. An element of -inf
// then never meets a max of -inf, so x - m is -inf (and exp gives 0) instead of -inf - (-inf),
// which is NaN. A state with d == 0 has seen no finite element; a row whose final d is 0 (every
// element -inf) is written as zeros, the convention of this chapter.
#pragma once
#include <cuda_fp16.h>
#include "scan/scan_common.cuh"   // FULL_MASK and warp_sum (every lane gets the total)

#define LOWEST (-3.402823466e+38f)      // -FLT_MAX, the identity of the running max
#define NEG_INF __int_as_float(0xff800000)  // -inf: fills the slots past the end of a row

// ---------------------------------------------------------------- element types

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(unsigned short h)
{
    return __half2float(__ushort_as_half(h));
}

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ unsigned short from_float<unsigned short>(float v)
{
    return __half_as_ushort(__float2half_rn(v));   // round to nearest even
}

// Elements per 16 bytes: 4 floats or 8 halves.
template <typename T> struct Pack { static constexpr int N = 16 / sizeof(T); };

// A 16-byte pack as N floats, and back.
__device__ __forceinline__ void unpack16(uint4 raw, float* v, float)
{
    v[0] = __uint_as_float(raw.x); v[1] = __uint_as_float(raw.y);
    v[2] = __uint_as_float(raw.z); v[3] = __uint_as_float(raw.w);
}
__device__ __forceinline__ void unpack16(uint4 raw, float* v, unsigned short)
{
    const unsigned int w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {   // the lower half of each word is the element at the lower address
        v[2 * k] = to_float((unsigned short)(w[k] & 0xffffu));
        v[2 * k + 1] = to_float((unsigned short)(w[k] >> 16));
    }
}
__device__ __forceinline__ uint4 pack16(const float* v, float)
{
    return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]),
                      __float_as_uint(v[2]), __float_as_uint(v[3]));
}
__device__ __forceinline__ uint4 pack16(const float* v, unsigned short)
{
    unsigned int w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
        w[k] = (unsigned int)from_float<unsigned short>(v[2 * k]) |
               ((unsigned int)from_float<unsigned short>(v[2 * k + 1]) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Pack::N elements of T at p (16-byte aligned) into v[0 .. N-1], through the read-only path.
template <typename T>
__device__ __forceinline__ void load16(const T* p, float* v)
{
    unpack16(__ldg(reinterpret_cast<const uint4*>(p)), v, T());
}
// The store is a streaming store (st.global.cs, evict-first in L2): the kernels never read their
// output again, and evicting it first keeps it from pushing out of L2 the rows that a second pass
// over the input still has to read.
template <typename T>
__device__ __forceinline__ void store16(T* p, const float* v)
{
    __stcs(reinterpret_cast<uint4*>(p), pack16(v, T()));
}

// Rows can be read and written in 16-byte packs when both arrays start on a 16-byte boundary
// and every row is a whole number of packs (then every row starts on a boundary too).
template <typename T>
__device__ __forceinline__ bool rows_are_packed(const T* x, const T* y, int cols)
{
    return (((unsigned long long)x | (unsigned long long)y) & 15) == 0 && cols % Pack<T>::N == 0;
}

// ---------------------------------------------------------------- the online-softmax state

struct MaxSum {
    float m;   // the largest element seen, or LOWEST
    float d;   // sum of exp(x - m) over the elements seen
};

// Add N elements to the state: one rescale of d for the whole group, then N exponentials.
template <int N>
__device__ __forceinline__ void online_update(MaxSum& s, const float* v)
{
    float m = s.m;
#pragma unroll
    for (int k = 0; k < N; ++k) m = fmaxf(m, v[k]);
    float d = s.d * expf(s.m - m);          // exp(0) = 1 when the max did not change
#pragma unroll
    for (int k = 0; k < N; ++k) d += expf(v[k] - m);
    s.m = m;
    s.d = d;
}

// The state of the union of two disjoint sets. The two products are rounded separately (no fused
// multiply-add), so merge(a, b) and merge(b, a) agree bit for bit and all lanes of a butterfly
// end with the same state.
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b)
{
    const float m = fmaxf(a.m, b.m);
    MaxSum r;
    r.m = m;
    r.d = __fadd_rn(__fmul_rn(a.d, expf(a.m - m)), __fmul_rn(b.d, expf(b.m - m)));
    return r;
}

// ---------------------------------------------------------------- warp and block reductions

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum s)
{
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
        MaxSum other;
        other.m = __shfl_xor_sync(FULL_MASK, s.m, o);
        other.d = __shfl_xor_sync(FULL_MASK, s.d, o);
        s = merge(s, other);
    }
    return s;
}

// Block-wide versions: blockDim.x a multiple of 32 (at most 1024), called by every thread.
// Each warp reduces its lanes, lane 0 stores the warp's result, and then every warp reduces the
// warp results itself, so no second barrier is needed to hand the result back. The barrier at
// the start keeps a second call from overwriting results that a warp is still reading.
__device__ __forceinline__ float block_max(float v)
{
    __shared__ float per_warp[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) per_warp[warp] = v;
    __syncthreads();
    return warp_max(lane < (int)(blockDim.x >> 5) ? per_warp[lane] : LOWEST);
}

__device__ __forceinline__ float block_sum(float v)
{
    __shared__ float per_warp[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) per_warp[warp] = v;
    __syncthreads();
    return warp_sum(lane < (int)(blockDim.x >> 5) ? per_warp[lane] : 0.0f);
}

__device__ __forceinline__ MaxSum block_merge(MaxSum s)
{
    __shared__ MaxSum per_warp[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    s = warp_merge(s);
    __syncthreads();
    if (lane == 0) per_warp[warp] = s;
    __syncthreads();
    MaxSum mine;
    mine.m = LOWEST;
    mine.d = 0.0f;
    if (lane < (int)(blockDim.x >> 5)) mine = per_warp[lane];
    return warp_merge(mine);
}

// 1 / d, or 0 for a row with no finite element (d == 0): such a row is written as zeros.
__device__ __forceinline__ float inverse_or_zero(float d) { return d > 0.0f ? 1.0f / d : 0.0f; }
