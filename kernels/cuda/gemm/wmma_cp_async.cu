// Rung 8, second form: the tensor-core kernel with a STAGES-deep cp.async pipeline (compute
// capability 8.0 and later; the chapter falls back to gemm_wmma elsewhere). fp16 A and B (bit
// patterns), fp32 accumulation and C. C = alpha * A * B + beta * C, row-major, any M, N, K >= 1.
//
// min_arch: sm_80
//
// Same warp tiles, fragments, padded shared layout and epilogue as gemm_wmma; the copies are
// cp.async (16 bytes, zero-filled outside the matrices) and STAGES - 1 future tiles are in
// flight while the block multiplies the current one. Tensor cores consume data so fast that one
// tile in flight (register staging) leaves them waiting for memory; a deeper pipeline and
// larger tiles are what let them run. When K % 8 != 0 or N % 8 != 0 (or a matrix is not 16-byte
// aligned) that operand is copied with ordinary checked 2-byte loads and stores instead
// (a uniform branch; slower, but right).
//
// Pipeline as in gemm_cp_async: wait for tile t, barrier, request tile t + STAGES - 1 into the
// stage freed by tile t - 1, multiply tile t.
//
// Launch: block 32 * (BM / WM) * (BN / WN) threads, 1-D grid ceil(M / BM) * ceil(N / BN),
// dynamic shared memory max(STAGES * stage, warps * 1280) bytes with stage = 2 * (BM * (BK + 8)
// + BK * (BN + 8)) (opt in above 48 KB). Requires BK % 16 == 0, WM % 16 == 0, WN % 16 == 0.
//
// name_expressions: gemm_wmma_cp_async<128, 128, 32, 64, 32, 3>
// name_expressions: gemm_wmma_cp_async<128, 256, 32, 64, 64, 3>
// name_expressions: gemm_wmma_cp_async<128, 256, 32, 64, 64, 4>
// name_expressions: gemm_wmma_cp_async<256, 128, 32, 64, 64, 4>
// name_expressions: gemm_wmma_cp_async<64, 64, 32, 32, 32, 3>
// name_expressions: gemm_wmma_cp_async<128, 128, 64, 64, 64, 3>
#include "gemm/wmma_tiles.cuh"
#include "gemm/cp_async.cuh"

// One ROWS x COLS tile (halves) of a row-major fp16 matrix at (row0, col0) into shared memory
// with pitch LD: cp.async 16-byte copies when vec, else checked 2-byte copies; 0 outside.
template <int ROWS, int COLS, int LD, int THREADS>
__device__ __forceinline__ void request_tile_half(unsigned short* dst, const unsigned short* __restrict__ P,
                                                  int ld, int rows, int cols, int row0, int col0, bool vec)
{
    if (vec) {
#pragma unroll
        for (int c = threadIdx.x; c < ROWS * COLS / 8; c += THREADS) {
            const int r = c / (COLS / 8), k = 8 * (c % (COLS / 8));
            const bool inside = row0 + r < rows && col0 + k < cols;   // all eight or none
            const unsigned short* src = inside ? P + (long long)(row0 + r) * ld + col0 + k : P;
            cp_async16(&dst[r * LD + k], src, inside ? 16 : 0);
        }
    } else {
        for (int e = threadIdx.x; e < ROWS * COLS; e += THREADS) {
            const int r = e / COLS, k = e % COLS;
            const bool inside = row0 + r < rows && col0 + k < cols;
            dst[r * LD + k] = inside ? P[(long long)(row0 + r) * ld + col0 + k] : (unsigned short)0;
        }
    }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
__global__ void __launch_bounds__(32 * (BM / WM) * (BN / WN))
gemm_wmma_cp_async(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                   float* __restrict__ C, int M, int N, int K, float alpha, float beta)
{
    constexpr int THREADS = 32 * (BM / WM) * (BN / WN);
    typedef WmmaSmem<BM, BN, BK> S;
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

    auto request = [&](int step) {                   // tile `step` into stage step % STAGES
        unsigned short* As = smem_h + (step % STAGES) * S::STAGE_HALVES;
        request_tile_half<BM, BK, S::A_LD, THREADS>(As, A, K, M, K, m0, step * BK, a_vec);
        request_tile_half<BK, BN, S::B_LD, THREADS>(As + S::A_HALVES, B, N, K, N, step * BK, n0, b_vec);
    };

    const int steps = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < steps) request(s);
        cp_async_commit();                           // an empty group when there is no tile s
    }
    for (int t = 0; t < steps; ++t) {
        cp_async_wait<STAGES - 2>();                 // this thread's copies of tile t have landed
        __syncthreads();                             // ... and everyone's; tile t - 1 is free
        if (t + STAGES - 1 < steps) request(t + STAGES - 1);
        cp_async_commit();
        const unsigned short* As = smem_h + (t % STAGES) * S::STAGE_HALVES;
        warp_mma_step<BK, WM, WN, S::A_LD, S::B_LD>(As + warp_row * WM * S::A_LD,
                                                    As + S::A_HALVES + warp_col * WN, acc);
    }
    cp_async_wait<0>();
    __syncthreads();                                 // every warp is done with the tiles
    float* scratch = reinterpret_cast<float*>(smem_h) + warp * 16 * 20;
    warp_store<WM, WN>(C, M, N, m0 + warp_row * WM, n0 + warp_col * WN, acc, scratch, alpha, beta);
}
