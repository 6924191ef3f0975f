// The pieces of the register-tiled FP32 GEMM kernels (rungs 4 to 7 and split-K).
//
// A block computes a BM x BN tile of C with THREADS threads; each thread owns TM x TN outputs,
// in chunks of 4 x 4 so that it can read its operands from shared memory as float4. Per step of
// BK along K the block copies a BM x BK tile of A and a BK x BN tile of B into shared memory:
//
//   A tile, transposed: word a_index(k, m) holds A(m0 + m, k0 + k), so that for a fixed k the
//           values a thread needs (consecutive m) are consecutive words: float4 reads.
//   B tile, as it is:   word k * BN + n holds B(k0 + k, n0 + n).
//
// LAYOUT of the A tile (the chapter measures all three):
//   0  plain:    pitch BM. The transposing stores of a warp hit few banks (bank conflicts).
//   1  padded:   pitch BM + 4; enough for BK = 8 only (see the chapter).
//   2  swizzled: pitch BM, the 16-byte group of m XORed with a function of k: conflict-free
//                stores for BK = 8, 16 and 32, and reads stay float4 (BM % 32 == 0 needed).
//
// Which outputs a thread owns is given by two small arrays: row_base[q] (q < TM / 4) is the first
// of four consecutive rows and col_base[q] (q < TN / 4) the first of four consecutive columns,
// relative to the block tile. The kernels choose them; the functions here only follow them.
#pragma once
#include "gemm/gemm_common.cuh"

// The second argument of the kernels' __launch_bounds__: how many blocks per SM to leave
// registers for. A thread needs about TM * TN accumulators, TM + TN operands, its staging
// registers (4 per float4 fetched ahead, when `staged`) and some for addresses and loop
// counters (32 here). When that fits in 128 registers, the compiler is asked to stay within 128
// (65536 registers / (threads x blocks)): an SM then holds two blocks of 256 threads, or four of
// 128. Otherwise no limit is set, rather than forcing spills.
__host__ __device__ constexpr int min_blocks(int threads, int BM, int BN, int BK, int TM, int TN, bool staged)
{
    const int a = (BM * BK / 4 + threads - 1) / threads, b = (BK * BN / 4 + threads - 1) / threads;
    const int wanted = TM * TN + TM + TN + (staged ? 4 * (a + b) : 0) + 32;
    return wanted <= 128 && threads * 128 <= 65536 ? 65536 / (threads * 128) : 1;
}

template <int BM, int BK, int LAYOUT>
struct ATile {
    static constexpr int PITCH = BM + (LAYOUT == 1 ? 4 : 0);
    static constexpr int WORDS = BK * PITCH;
    // Word of A(m, k) in the tile. The swizzle flips bits 2-4 of m (the 16-byte group within an
    // aligned run of eight groups) by s(k) = (k / 4) * (32 / BK) mod 8, a different value for each
    // of the BK / 4 groups of k that one warp's stores touch together.
    __device__ static __forceinline__ int index(int k, int m)
    {
        if (LAYOUT == 2) {
            constexpr int STEP = BK >= 32 ? 1 : 32 / BK;
            m ^= (((k >> 2) * STEP) & 7) << 2;
        }
        return k * PITCH + m;
    }
};

// Copy one BM x BK tile of A (rows m0.., columns k0..; columns at or beyond k_end read as 0)
// into registers: LOADS float4 per thread, 16-byte loads when vec. Element i of the tile's
// BM * BK / 4 float4 is row i / (BK / 4), columns 4 * (i % (BK / 4)) .. + 3: consecutive
// threads read consecutive 16 bytes of a row (coalesced).
template <int BM, int BK, int THREADS, int LOADS>
__device__ __forceinline__ void fetch_a(float4 (&r)[LOADS], const float* __restrict__ A, int M, int K,
                                        int k_end, int m0, int k0, bool vec)
{
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
        const int i = threadIdx.x + l * THREADS;
        if (i < BM * BK / 4)
            r[l] = load4(A, K, M, k_end, m0 + i / (BK / 4), k0 + 4 * (i % (BK / 4)), vec);
    }
}

// Store what fetch_a loaded into the transposed A tile: four 4-byte stores per float4.
template <int BM, int BK, int THREADS, int LOADS, int LAYOUT>
__device__ __forceinline__ void stash_a(const float4 (&r)[LOADS], float* As)
{
    typedef ATile<BM, BK, LAYOUT> T;
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
        const int i = threadIdx.x + l * THREADS;
        if (i < BM * BK / 4) {
            const int m = i / (BK / 4), k = 4 * (i % (BK / 4));
            As[T::index(k + 0, m)] = r[l].x;
            As[T::index(k + 1, m)] = r[l].y;
            As[T::index(k + 2, m)] = r[l].z;
            As[T::index(k + 3, m)] = r[l].w;
        }
    }
}

// The same for the BK x BN tile of B (rows k0.. up to k_end, columns n0..), kept as it is.
template <int BN, int BK, int THREADS, int LOADS>
__device__ __forceinline__ void fetch_b(float4 (&r)[LOADS], const float* __restrict__ B, int N,
                                        int k_end, int k0, int n0, bool vec)
{
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
        const int i = threadIdx.x + l * THREADS;
        if (i < BK * BN / 4)
            r[l] = load4(B, N, k_end, N, k0 + i / (BN / 4), n0 + 4 * (i % (BN / 4)), vec);
    }
}

template <int BN, int BK, int THREADS, int LOADS>
__device__ __forceinline__ void stash_b(const float4 (&r)[LOADS], float* Bs)
{
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
        const int i = threadIdx.x + l * THREADS;
        if (i < BK * BN / 4)
            *reinterpret_cast<float4*>(&Bs[(i / (BN / 4)) * BN + 4 * (i % (BN / 4))]) = r[l];
    }
}

// BK steps of outer products on the tiles in shared memory: at each k the thread reads its TM
// values of A and TN values of B (float4 reads) and does TM * TN fused multiply-adds.
template <int BM, int BN, int BK, int TM, int TN, int LAYOUT>
__device__ __forceinline__ void multiply_tiles(const float* As, const float* Bs, float (&acc)[TM][TN],
                                               const int (&row_base)[TM / 4], const int (&col_base)[TN / 4])
{
    typedef ATile<BM, BK, LAYOUT> T;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
        float a[TM], b[TN];
#pragma unroll
        for (int q = 0; q < TM / 4; ++q) {
            const float4 v = *reinterpret_cast<const float4*>(&As[T::index(k, row_base[q])]);
            a[4 * q + 0] = v.x; a[4 * q + 1] = v.y; a[4 * q + 2] = v.z; a[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int q = 0; q < TN / 4; ++q) {
            const float4 v = *reinterpret_cast<const float4*>(&Bs[k * BN + col_base[q]]);
            b[4 * q + 0] = v.x; b[4 * q + 1] = v.y; b[4 * q + 2] = v.z; b[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j)
                acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

// Write the thread's TM x TN outputs: C = alpha * acc + beta * C (C not read when beta == 0).
// 16-byte stores when N % 4 == 0 and C is aligned (then a group of four columns is either wholly
// inside or wholly outside the matrix); checked scalar stores otherwise.
template <int TM, int TN>
__device__ __forceinline__ void store_tile(float* __restrict__ C, int M, int N, int m0, int n0,
                                           const float (&acc)[TM][TN], const int (&row_base)[TM / 4],
                                           const int (&col_base)[TN / 4], float alpha, float beta)
{
    const bool vec = (N % 4 == 0) && aligned16(C);
#pragma unroll
    for (int qi = 0; qi < TM / 4; ++qi)
#pragma unroll
        for (int ii = 0; ii < 4; ++ii) {
            const int row = m0 + row_base[qi] + ii;
            if (row >= M) continue;
#pragma unroll
            for (int qj = 0; qj < TN / 4; ++qj) {
                const int col = n0 + col_base[qj];
                const float* a = &acc[4 * qi + ii][4 * qj];
                if (vec) {
                    if (col < N)
                        store_c4(C + (long long)row * N + col, make_float4(a[0], a[1], a[2], a[3]), alpha, beta);
                } else {
#pragma unroll
                    for (int jj = 0; jj < 4; ++jj)
                        if (col + jj < N) store_c(C, (long long)row * N + col + jj, a[jj], alpha, beta);
                }
            }
        }
}

// The main loop with two shared-memory stages and register staging (rung 6 onwards): while the
// block multiplies the tiles of step t, the global loads of step t + 1 are already in flight
// into registers; they go to the other stage afterwards. One barrier per step.
// Shared memory: 2 * BK * (A PITCH + BN) floats, A stages first. Accumulates K range
// [k_begin, k_end) into acc.
template <int BM, int BN, int BK, int TM, int TN, int THREADS, int LAYOUT>
__device__ __forceinline__ void mainloop_double_buffered(
    const float* __restrict__ A, const float* __restrict__ B, int M, int N, int K,
    int m0, int n0, int k_begin, int k_end, float* smem, float (&acc)[TM][TN],
    const int (&row_base)[TM / 4], const int (&col_base)[TN / 4], bool a_vec, bool b_vec)
{
    typedef ATile<BM, BK, LAYOUT> T;
    constexpr int A_LOADS = (BM * BK / 4 + THREADS - 1) / THREADS;
    constexpr int B_LOADS = (BK * BN / 4 + THREADS - 1) / THREADS;
    float* const As = smem;                       // stage s of A at As + s * T::WORDS
    float* const Bs = smem + 2 * T::WORDS;        // stage s of B at Bs + s * BK * BN
    float4 ra[A_LOADS], rb[B_LOADS];

    const int steps = (k_end - k_begin + BK - 1) / BK;
    if (steps <= 0) return;
    fetch_a<BM, BK, THREADS, A_LOADS>(ra, A, M, K, k_end, m0, k_begin, a_vec);
    fetch_b<BN, BK, THREADS, B_LOADS>(rb, B, N, k_end, k_begin, n0, b_vec);
    stash_a<BM, BK, THREADS, A_LOADS, LAYOUT>(ra, As);
    stash_b<BN, BK, THREADS, B_LOADS>(rb, Bs);
    __syncthreads();
    for (int t = 0; t < steps; ++t) {
        const int cur = t & 1;
        const bool more = t + 1 < steps;
        if (more) {                                   // loads for step t + 1: in flight from here
            const int k_next = k_begin + (t + 1) * BK;
            fetch_a<BM, BK, THREADS, A_LOADS>(ra, A, M, K, k_end, m0, k_next, a_vec);
            fetch_b<BN, BK, THREADS, B_LOADS>(rb, B, N, k_end, k_next, n0, b_vec);
        }
        multiply_tiles<BM, BN, BK, TM, TN, LAYOUT>(As + cur * T::WORDS, Bs + cur * BK * BN, acc,
                                                   row_base, col_base);
        if (more) {                                   // the other stage was last read in step t - 1,
            stash_a<BM, BK, THREADS, A_LOADS, LAYOUT>(ra, As + (cur ^ 1) * T::WORDS);  // before the
            stash_b<BN, BK, THREADS, B_LOADS>(rb, Bs + (cur ^ 1) * BK * BN);           // barrier that
        }                                                                              // ended it
        __syncthreads();
    }
}
