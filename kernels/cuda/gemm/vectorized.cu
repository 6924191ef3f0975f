// Rungs 4 and 5 of the GEMM ladder: 16-byte loads, a transposed A tile, and (rung 5) a shared
// layout without bank conflicts. C = alpha * A * B + beta * C, row-major, any M, N, K >= 1.
//
// Compared with gemm_2d (rung 3): the tiles are copied with float4 global loads (when K or N is
// not a multiple of 4, or A, B are not 16-byte aligned, a uniform branch takes checked scalar
// loads instead), A is stored transposed so that a thread's TM values of A at one k are
// consecutive words, and every shared-memory read is a float4 (LDS.128).
//
// SPLIT = 0: thread (ty, tx) owns rows ty * TM .. ty * TM + TM - 1 and columns tx * TN .. + TN - 1.
//            With TN = 8, lanes tx and tx + 4 read B words 32 apart: the same banks, a 2-way
//            conflict on every read of B.
// SPLIT = 1: the TM rows are TM / 4 runs of four, run q starting at q * (4 * BM / TM) + 4 * ty;
//            columns alike. Eight consecutive lanes now read eight consecutive float4 of B.
// LAYOUT: the A tile's layout (plain, padded or swizzled; see simt_tiles.cuh).
//
// Launch: block (BM / TM) * (BN / TN) threads, grid (ceil(N / BN), ceil(M / BM)), no dynamic
// shared memory. Requires TM % 4 == 0, TN % 4 == 0, BK % 4 == 0.
//
// name_expressions: gemm_vec4<128, 128, 8, 8, 8, 0, 0>, gemm_vec4<128, 128, 8, 8, 8, 1, 0>
// name_expressions: gemm_vec4<128, 128, 8, 8, 8, 0, 2>, gemm_vec4<128, 128, 8, 8, 8, 1, 1>
// name_expressions: gemm_vec4<128, 128, 8, 8, 8, 1, 2>, gemm_vec4<64, 64, 16, 4, 4, 1, 2>
#include "gemm/simt_tiles.cuh"

template <int BM, int BN, int BK, int TM, int TN, int SPLIT, int LAYOUT>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), min_blocks((BM / TM) * (BN / TN), BM, BN, BK, TM, TN, true))
gemm_vec4(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
          int M, int N, int K, float alpha, float beta)
{
    constexpr int THREADS = (BM / TM) * (BN / TN);
    constexpr int A_LOADS = (BM * BK / 4 + THREADS - 1) / THREADS;
    constexpr int B_LOADS = (BK * BN / 4 + THREADS - 1) / THREADS;
    typedef ATile<BM, BK, LAYOUT> T;
    __shared__ __align__(16) float As[T::WORDS];
    __shared__ __align__(16) float Bs[BK * BN];

    const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
    int row_base[TM / 4], col_base[TN / 4];
#pragma unroll
    for (int q = 0; q < TM / 4; ++q) row_base[q] = SPLIT ? q * (4 * BM / TM) + 4 * ty : ty * TM + 4 * q;
#pragma unroll
    for (int q = 0; q < TN / 4; ++q) col_base[q] = SPLIT ? q * (4 * BN / TN) + 4 * tx : tx * TN + 4 * q;

    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const bool a_vec = (K % 4 == 0) && aligned16(A);     // the same in every thread of the grid
    const bool b_vec = (N % 4 == 0) && aligned16(B);
    float4 ra[A_LOADS], rb[B_LOADS];
    float acc[TM][TN] = {};

    for (int k0 = 0; k0 < K; k0 += BK) {
        fetch_a<BM, BK, THREADS, A_LOADS>(ra, A, M, K, K, m0, k0, a_vec);
        fetch_b<BN, BK, THREADS, B_LOADS>(rb, B, N, K, k0, n0, b_vec);
        stash_a<BM, BK, THREADS, A_LOADS, LAYOUT>(ra, As);
        stash_b<BN, BK, THREADS, B_LOADS>(rb, Bs);
        __syncthreads();
        multiply_tiles<BM, BN, BK, TM, TN, LAYOUT>(As, Bs, acc, row_base, col_base);
        __syncthreads();                                 // before the next step overwrites the tiles
    }
    store_tile<TM, TN>(C, M, N, m0, n0, acc, row_base, col_base, alpha, beta);
}
