// Rung 6 of the GEMM ladder: double buffering through registers (runs on every GPU the course
// supports, compute capability 7.5 included). C = alpha * A * B + beta * C, any M, N, K >= 1.
//
// Same tiles, thread mapping (SPLIT = 1) and swizzled A layout as rung 5 (gemm_vec4); the one
// change is the order of the work in the K loop (mainloop_double_buffered in simt_tiles.cuh):
// the global loads of the next BK step are issued into registers *before* the block multiplies
// the current tiles, and written to a second shared-memory stage after it. The loads' latency
// is covered by the multiplications of the current step, and one barrier per step suffices.
//
// Launch: block (BM / TM) * (BN / TN) threads, grid (ceil(N / BN), ceil(M / BM)),
// dynamic shared memory 2 * BK * (BM + BN) * 4 bytes (opt in above 48 KB).
// Requires TM % 4 == 0, TN % 4 == 0, BK in {8, 16, 32}, BM % 32 == 0.
//
// name_expressions: gemm_double_buffered<128, 128, 8, 8, 8>
// name_expressions: gemm_double_buffered<128, 128, 16, 8, 8>
// name_expressions: gemm_double_buffered<64, 64, 16, 4, 4>, gemm_double_buffered<128, 64, 16, 8, 4>
// name_expressions: gemm_double_buffered<128, 256, 8, 8, 8>
#include "gemm/simt_tiles.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), min_blocks((BM / TM) * (BN / TN), BM, BN, BK, TM, TN, true))
gemm_double_buffered(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                     int M, int N, int K, float alpha, float beta)
{
    constexpr int THREADS = (BM / TM) * (BN / TN);
    extern __shared__ __align__(16) float smem[];

    const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
    int row_base[TM / 4], col_base[TN / 4];
#pragma unroll
    for (int q = 0; q < TM / 4; ++q) row_base[q] = q * (4 * BM / TM) + 4 * ty;
#pragma unroll
    for (int q = 0; q < TN / 4; ++q) col_base[q] = q * (4 * BN / TN) + 4 * tx;

    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const bool a_vec = (K % 4 == 0) && aligned16(A);
    const bool b_vec = (N % 4 == 0) && aligned16(B);
    float acc[TM][TN] = {};
    mainloop_double_buffered<BM, BN, BK, TM, TN, THREADS, 2>(A, B, M, N, K, m0, n0, 0, K, smem, acc,
                                                             row_base, col_base, a_vec, b_vec);
    store_tile<TM, TN>(C, M, N, m0, n0, acc, row_base, col_base, alpha, beta);
}
