// Rung 8 of the GEMM ladder: tensor cores through warp-level matrix operations (WMMA), fp16
// inputs, fp32 accumulation and fp32 output. Compute capability 7.0 and later (the T4 included).
// C = alpha * A * B + beta * C, row-major, any M, N, K >= 1; A and B are fp16 bit patterns.
//
// The structure is rung 7's one level up: a block tile in shared memory (two stages, register
// staging, one barrier per step), warp tiles, and per warp a grid of 16 x 16 accumulator
// fragments instead of per-thread outer products. One frag_mma is 16 x 16 x 16 = 4096 fused
// multiply-adds issued by one warp instruction.
//
// Copies: 16-byte loads of eight halves when K % 8 == 0 (A) and N % 8 == 0 (B) and the matrices
// are 16-byte aligned; checked 2-byte loads otherwise (a uniform branch). Elements outside the
// matrices are zero. Blocks are numbered in groups of 8 tile rows (block_tile) for L2 reuse.
//
// Launch: block 32 * (BM / WM) * (BN / WN) threads, 1-D grid ceil(M / BM) * ceil(N / BN),
// dynamic shared memory max(2 * stage, warps * 1280) bytes with stage = 2 * (BM * (BK + 8)
// + BK * (BN + 8)) (opt in above 48 KB). Requires BK % 16 == 0, WM % 16 == 0, WN % 16 == 0.
//
// name_expressions: gemm_wmma<64, 64, 32, 32, 32>, gemm_wmma<128, 128, 32, 64, 32>
// name_expressions: gemm_wmma<128, 128, 32, 32, 64>, gemm_wmma<128, 256, 32, 64, 64>
#include "gemm/wmma_tiles.cuh"

template <int BM, int BN, int BK, int WM, int WN>
__global__ void __launch_bounds__(32 * (BM / WM) * (BN / WN))
gemm_wmma(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, float* __restrict__ C,
          int M, int N, int K, float alpha, float beta)
{
    constexpr int THREADS = 32 * (BM / WM) * (BN / WN);
    typedef WmmaSmem<BM, BN, BK> S;
    constexpr int A_LOADS = (BM * BK / 8 + THREADS - 1) / THREADS;   // 16-byte chunks per thread
    constexpr int B_LOADS = (BK * BN / 8 + THREADS - 1) / THREADS;
    extern __shared__ __align__(128) unsigned short smem_h[];        // stage s at s * STAGE_HALVES

    const int warp = threadIdx.x / 32;
    const int warp_row = warp / (BN / WN), warp_col = warp % (BN / WN);
    int tile_m, tile_n;
    block_tile<8>(blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN, tile_m, tile_n);
    const int m0 = tile_m * BM, n0 = tile_n * BN;
    const bool a_vec = (K % 8 == 0) && aligned16(A);
    const bool b_vec = (N % 8 == 0) && aligned16(B);

    FragC acc[WM / 16][WN / 16];
#pragma unroll
    for (int i = 0; i < WM / 16; ++i)
#pragma unroll
        for (int j = 0; j < WN / 16; ++j) frag_zero(acc[i][j]);

    uint4 ra[A_LOADS], rb[B_LOADS];
    auto fetch = [&](int k0) {                       // global -> registers
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int c = threadIdx.x + l * THREADS;
            if (c < BM * BK / 8) ra[l] = load8_half(A, K, M, K, m0 + c / (BK / 8), k0 + 8 * (c % (BK / 8)), a_vec);
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int c = threadIdx.x + l * THREADS;
            if (c < BK * BN / 8) rb[l] = load8_half(B, N, K, N, k0 + c / (BN / 8), n0 + 8 * (c % (BN / 8)), b_vec);
        }
    };
    auto stash = [&](int stage) {                    // registers -> shared stage
        unsigned short* As = smem_h + stage * S::STAGE_HALVES;
        unsigned short* Bs = As + S::A_HALVES;
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int c = threadIdx.x + l * THREADS;
            if (c < BM * BK / 8)
                *reinterpret_cast<uint4*>(&As[(c / (BK / 8)) * S::A_LD + 8 * (c % (BK / 8))]) = ra[l];
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int c = threadIdx.x + l * THREADS;
            if (c < BK * BN / 8)
                *reinterpret_cast<uint4*>(&Bs[(c / (BN / 8)) * S::B_LD + 8 * (c % (BN / 8))]) = rb[l];
        }
    };

    const int steps = (K + BK - 1) / BK;
    fetch(0);
    stash(0);
    __syncthreads();
    for (int t = 0; t < steps; ++t) {
        const int cur = t & 1;
        if (t + 1 < steps) fetch((t + 1) * BK);      // in flight during the multiplications
        const unsigned short* As = smem_h + cur * S::STAGE_HALVES;
        warp_mma_step<BK, WM, WN, S::A_LD, S::B_LD>(As + warp_row * WM * S::A_LD,
                                                    As + S::A_HALVES + warp_col * WN, acc);
        if (t + 1 < steps) stash(cur ^ 1);           // last read in step t - 1, before its barrier
        __syncthreads();
    }
    // The pipeline's shared memory is free now (the loop ended with a barrier): warp w's scratch
    // tile is the w-th run of 16 x 20 floats.
    float* scratch = reinterpret_cast<float*>(smem_h) + warp * 16 * 20;
    warp_store<WM, WN>(C, M, N, m0 + warp_row * WM, n0 + warp_col * WN, acc, scratch, alpha, beta);
}
