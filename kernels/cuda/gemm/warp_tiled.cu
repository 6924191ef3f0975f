// Rung 7 of the GEMM ladder: warp tiles. C = alpha * A * B + beta * C, any M, N, K >= 1.
//
// Rung 6 spreads a warp's 32 threads over a strip of the block tile (two rows of 16 thread tiles,
// 16 x 128 outputs for a 128 x 128 block with 8 x 8 per thread). Here each warp owns a compact
// WM x WN sub-tile of the block tile, and its lanes form an LR x LC grid inside it
// (LR = WM / TM, LC = WN / TN, LR * LC = 32). A lane's TM x TN outputs are again runs of four:
// row run q starts at q * 4 * LR + 4 * lane_row, column run q at q * 4 * LC + 4 * lane_col. Per k
// a warp then reads WM + WN distinct floats from shared memory instead of 16 + 128, and eight
// consecutive lanes always read either one float4 (a broadcast) or eight consecutive float4:
// no bank conflicts. The blocks are also numbered in groups of 8 tile rows (block_tile), so that
// the blocks running at the same time share rows of A and columns of B in L2.
//
// Everything else (double-buffered main loop, swizzled A tile, epilogue) is rung 6's.
// Launch: block 32 * (BM / WM) * (BN / WN) threads, 1-D grid ceil(M / BM) * ceil(N / BN),
// dynamic shared memory 2 * BK * (BM + BN) * 4 bytes (opt in above 48 KB).
// Requires TM % 4 == 0, TN % 4 == 0, (WM / TM) * (WN / TN) == 32, BK in {8, 16, 32}, BM % 32 == 0.
//
// name_expressions: gemm_warp_tiled<128, 128, 8, 32, 64, 8, 8>
// name_expressions: gemm_warp_tiled<128, 128, 16, 64, 32, 8, 8>
// name_expressions: gemm_warp_tiled<128, 256, 16, 64, 64, 8, 16>
// name_expressions: gemm_warp_tiled<64, 64, 16, 32, 32, 4, 8>
// name_expressions: gemm_warp_tiled<128, 128, 8, 64, 32, 8, 8>
#include "gemm/simt_tiles.cuh"

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN>
__global__ void __launch_bounds__(32 * (BM / WM) * (BN / WN), min_blocks(32 * (BM / WM) * (BN / WN), BM, BN, BK, TM, TN, true))
gemm_warp_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                int M, int N, int K, float alpha, float beta)
{
    constexpr int THREADS = 32 * (BM / WM) * (BN / WN);
    constexpr int LR = WM / TM, LC = WN / TN;             // the lanes of a warp as an LR x LC grid
    static_assert(LR * LC == 32, "a warp tile must give each of the 32 lanes one TM x TN tile");
    extern __shared__ __align__(16) float smem[];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int warp_row = warp / (BN / WN), warp_col = warp % (BN / WN);
    const int lane_row = lane / LC, lane_col = lane % LC;
    int row_base[TM / 4], col_base[TN / 4];
#pragma unroll
    for (int q = 0; q < TM / 4; ++q) row_base[q] = warp_row * WM + q * 4 * LR + 4 * lane_row;
#pragma unroll
    for (int q = 0; q < TN / 4; ++q) col_base[q] = warp_col * WN + q * 4 * LC + 4 * lane_col;

    int tile_m, tile_n;
    block_tile<8>(blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN, tile_m, tile_n);
    const int m0 = tile_m * BM, n0 = tile_n * BN;
    const bool a_vec = (K % 4 == 0) && aligned16(A);
    const bool b_vec = (N % 4 == 0) && aligned16(B);
    float acc[TM][TN] = {};
    mainloop_double_buffered<BM, BN, BK, TM, TN, THREADS, 2>(A, B, M, N, K, m0, n0, 0, K, smem, acc,
                                                             row_base, col_base, a_vec, b_vec);
    store_tile<TM, TN>(C, M, N, m0, n0, acc, row_base, col_base, alpha, beta);
}
