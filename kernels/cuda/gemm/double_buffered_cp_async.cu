// Rung 6, second form: a STAGES-deep pipeline of cp.async copies (compute capability 8.0 and
// later; the chapter falls back to gemm_double_buffered elsewhere).
// C = alpha * A * B + beta * C, row-major, any M, N, K >= 1.
//
// min_arch: sm_80
//
// Same thread mapping and multiplication as gemm_double_buffered; the copies change. cp.async
// moves bytes from global to shared memory without a detour through registers and without
// making the thread wait, so STAGES - 1 future tiles can be in flight while the block multiplies
// the current one, and no staging registers are needed.
//
//   B tile: 16-byte copies, as it is (when N % 4 == 0 and B is aligned; 4-byte copies otherwise).
//   A tile: cp.async cannot transpose a 16-byte vector, so A is copied element by element
//           (4-byte copies) into the transposed tile. Eight consecutive lanes copy eight
//           consecutive elements of one row (one 32-byte sector of A); a warp covers 4 rows x 8
//           columns of k. With the tile's pitch BM + 4 (LAYOUT 1), element (k, m) is in bank
//           (4 k + m) mod 32: the 32 lanes hit 32 different banks.
//
// Pipeline: tiles 0 .. STAGES - 2 are requested up front. At step t the block waits for tile t
// (cp_async_wait<STAGES - 2>: at most STAGES - 2 younger groups still in flight), synchronises,
// requests tile t + STAGES - 1 into the stage that held tile t - 1 (every thread has finished
// with it: it passed the barrier), and multiplies tile t. One barrier per step.
//
// Launch: block (BM / TM) * (BN / TN) threads, grid (ceil(N / BN), ceil(M / BM)), dynamic shared
// memory STAGES * BK * (BM + 4 + BN) * 4 bytes. Requires TM % 4 == 0, TN % 4 == 0, BK % 8 == 0.
//
// name_expressions: gemm_cp_async<128, 128, 8, 8, 8, 2>, gemm_cp_async<128, 128, 16, 8, 8, 3>
// name_expressions: gemm_cp_async<128, 128, 16, 8, 8, 4>, gemm_cp_async<64, 64, 16, 4, 4, 3>
// name_expressions: gemm_cp_async<128, 256, 32, 8, 8, 3>
#include "gemm/simt_tiles.cuh"
#include "gemm/cp_async.cuh"

// Request the BM x BK tile of A at (m0, k0) (transposed, padded) and the BK x BN tile of B at
// (k0, n0) as cp.async copies into one pipeline stage; elements outside the matrices become 0.
template <int BM, int BN, int BK, int THREADS>
__device__ __forceinline__ void request_tiles(const float* __restrict__ A, const float* __restrict__ B,
                                              float* As, float* Bs, int M, int N, int K,
                                              int m0, int n0, int k0, bool b_vec)
{
    typedef ATile<BM, BK, 1> T;
    // A: element e of a slab of 8 columns of k is row e / 8, column e % 8 of the slab.
#pragma unroll
    for (int e = threadIdx.x; e < BM * BK; e += THREADS) {
        const int slab = e / (8 * BM), in_slab = e % (8 * BM);
        const int m = in_slab / 8, k = 8 * slab + in_slab % 8;
        const bool inside = m0 + m < M && k0 + k < K;
        const float* src = inside ? A + (long long)(m0 + m) * K + k0 + k : A;
        cp_async4(&As[T::index(k, m)], src, inside ? 4 : 0);
    }
    if (b_vec) {
#pragma unroll
        for (int i = threadIdx.x; i < BK * BN / 4; i += THREADS) {
            const int k = i / (BN / 4), n = 4 * (i % (BN / 4));
            const bool inside = k0 + k < K && n0 + n < N;            // N % 4 == 0: all four or none
            const float* src = inside ? B + (long long)(k0 + k) * N + n0 + n : B;
            cp_async16(&Bs[k * BN + n], src, inside ? 16 : 0);
        }
    } else {
#pragma unroll
        for (int i = threadIdx.x; i < BK * BN; i += THREADS) {
            const int k = i / BN, n = i % BN;
            const bool inside = k0 + k < K && n0 + n < N;
            const float* src = inside ? B + (long long)(k0 + k) * N + n0 + n : B;
            cp_async4(&Bs[k * BN + n], src, inside ? 4 : 0);
        }
    }
}

template <int BM, int BN, int BK, int TM, int TN, int STAGES>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), min_blocks((BM / TM) * (BN / TN), BM, BN, BK, TM, TN, false))
gemm_cp_async(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
              int M, int N, int K, float alpha, float beta)
{
    constexpr int THREADS = (BM / TM) * (BN / TN);
    typedef ATile<BM, BK, 1> T;
    extern __shared__ __align__(16) float smem[];
    float* const As = smem;                          // stage s of A at As + s * T::WORDS
    float* const Bs = smem + STAGES * T::WORDS;      // stage s of B at Bs + s * BK * BN

    const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
    int row_base[TM / 4], col_base[TN / 4];
#pragma unroll
    for (int q = 0; q < TM / 4; ++q) row_base[q] = q * (4 * BM / TM) + 4 * ty;
#pragma unroll
    for (int q = 0; q < TN / 4; ++q) col_base[q] = q * (4 * BN / TN) + 4 * tx;

    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const bool b_vec = (N % 4 == 0) && aligned16(B);
    const int steps = (K + BK - 1) / BK;
    float acc[TM][TN] = {};

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < steps)
            request_tiles<BM, BN, BK, THREADS>(A, B, As + s * T::WORDS, Bs + s * BK * BN, M, N, K,
                                               m0, n0, s * BK, b_vec);
        cp_async_commit();                           // an empty group when there is no tile s
    }
    for (int t = 0; t < steps; ++t) {
        cp_async_wait<STAGES - 2>();                 // this thread's copies of tile t have landed
        __syncthreads();                             // ... and everyone else's; tile t - 1 is free
        const int next = t + STAGES - 1;
        if (next < steps)
            request_tiles<BM, BN, BK, THREADS>(A, B, As + (next % STAGES) * T::WORDS,
                                               Bs + (next % STAGES) * BK * BN, M, N, K, m0, n0,
                                               next * BK, b_vec);
        cp_async_commit();
        multiply_tiles<BM, BN, BK, TM, TN, 1>(As + (t % STAGES) * T::WORDS, Bs + (t % STAGES) * BK * BN,
                                              acc, row_base, col_base);
    }
    store_tile<TM, TN>(C, M, N, m0, n0, acc, row_base, col_base, alpha, beta);
}
