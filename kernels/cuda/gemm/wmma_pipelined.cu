// Rung 8, third form: the WMMA tensor-core kernel with lean copies, a fragment pipeline and a
// direct epilogue (compute capability 8.0 and later). fp16 A and B (bit patterns), fp32
// accumulation and C. C = alpha * A * B + beta * C, row-major, any M, N, K >= 1.
//
// min_arch: sm_80
//
// Same warp tiles, WMMA fragments, padded shared layout (conflict-free for the ldmatrix
// instructions the fragment loads become) and STAGES-deep cp.async pipeline as
// gemm_wmma_cp_async. What its SASS showed, and what changes here:
//
//   copies: gemm_wmma_cp_async recomputes every copy's row, column, bounds and address in a loop
//           the compiler cannot unroll (its trip count depends on threadIdx.x): about 28
//           instructions per 16-byte copy, more issue slots than its tensor-core instructions.
//           Here each thread's copies are fixed at compile time (THREADS divides the chunk
//           count): one global pointer per operand, advanced by one tile per step, and shared
//           addresses that are a stage base plus compile-time offsets. Interior blocks (the whole
//           tile inside C, K and N multiples of 8, aligned operands) copy with no checks; edge
//           blocks take the checked copies (a uniform branch per block). As in rung 7b the first
//           tile is the short one when BK does not divide K, so only it needs checks in k.
//   fragments: the fragments of the next 16-wide slice of k are loaded before the products of
//           the current one (two register buffers), and, when BK / 16 is even, the first slice of
//           the next tile right after the barrier, under the products of the last slice of the
//           current tile: the tensor cores do not wait for fragment loads.
//   epilogue: a warp whose WM x WN tile lies inside C (with N % 4 == 0 and C 32-byte aligned)
//           stores its accumulators straight to global memory (wmma.store to .global), after
//           alpha * acc + beta * C element by element on fragments (C loaded with wmma.load.c,
//           only when beta != 0). Other warps go through the shared scratch tile as before.
//
// Pipeline: tiles 0 .. STAGES - 2 are requested up front and tile 0 is waited for. At step t the
// block requests tile t + STAGES - 1 into the stage of tile t - 1 (every warp finished reading
// it before the barrier of step t - 1), multiplies tile t, and at its last slice waits for tile
// t + 1 (cp_async_wait<STAGES - 2>) and synchronises. One barrier per step.
//
// Launch: block 32 * (BM / WM) * (BN / WN) threads, 1-D grid ceil(M / BM) * ceil(N / BN),
// dynamic shared memory max(STAGES * stage, warps * 1280) bytes with stage = 2 * (BM * (BK + 8)
// + BK * (BN + 8)) (opt in above 48 KB). Requires BK % 16 == 0, WM % 16 == 0, WN % 16 == 0,
// STAGES >= 2, and the block's threads to divide the 16-byte chunks of both tiles and to be a
// multiple of the chunks in one row of each.
//
// name_expressions: gemm_wmma_pipelined<128, 256, 64, 64, 64, 3>
// name_expressions: gemm_wmma_pipelined<128, 256, 32, 64, 64, 4>
// name_expressions: gemm_wmma_pipelined<128, 128, 64, 64, 64, 3>
// name_expressions: gemm_wmma_pipelined<128, 128, 32, 64, 64, 4>
// name_expressions: gemm_wmma_pipelined<256, 128, 32, 64, 64, 4>
// name_expressions: gemm_wmma_pipelined<64, 64, 32, 32, 32, 3>
// name_expressions: gemm_wmma_pipelined<128, 128, 32, 64, 64, 3>
#include "gemm/wmma_tiles.cuh"
#include "gemm/cp_async.cuh"

// The 16-byte chunks of one ROWS x COLS tile of halves that a thread copies: LOADS chunks, all in
// column 8 * (threadIdx.x % (COLS / 8)), rows threadIdx.x / (COLS / 8) + l * ROW_STEP.
template <int ROWS, int COLS, int LD, int THREADS>
struct ChunkMap {
    static constexpr int PER_ROW = COLS / 8;
    static constexpr int LOADS = ROWS * PER_ROW / THREADS;
    static constexpr int ROW_STEP = THREADS / PER_ROW;
    static_assert(THREADS % PER_ROW == 0 && (ROWS * PER_ROW) % THREADS == 0, "whole chunks per thread");
    __device__ static __forceinline__ int row() { return threadIdx.x / PER_ROW; }
    __device__ static __forceinline__ int col() { return 8 * (threadIdx.x % PER_ROW); }

    // Checked copy of the tile at (row0, col0) of a row-major matrix with `rows` x `cols` halves
    // and pitch ld into the shared tile at `dst`: cp.async with zero fill when vec, else 2-byte
    // loads and stores (zero outside the matrix; negative rows and columns included).
    __device__ static __forceinline__ void copy_checked(unsigned short* dst, const unsigned short* __restrict__ P,
                                                        int ld, int rows, int cols, int row0, int col0, bool vec)
    {
#pragma unroll
        for (int l = 0; l < LOADS; ++l) {
            const int r = row() + l * ROW_STEP, c = col();
            const int gr = row0 + r, gc = col0 + c;
            if (vec) {                                 // cols % 8 == 0, gc % 8 == 0: all or none
                const bool inside = gr >= 0 && gr < rows && gc >= 0 && gc < cols;
                cp_async16_at(shared_address(&dst[r * LD + c]), inside ? P + (long long)gr * ld + gc : P,
                              inside ? 16 : 0);
            } else {
#pragma unroll
                for (int j = 0; j < 8; ++j)
                    dst[r * LD + c + j] = (gr >= 0 && gr < rows && gc + j >= 0 && gc + j < cols)
                                              ? P[(long long)gr * ld + gc + j] : (unsigned short)0;
            }
        }
    }
};

// The main loop as an object, instantiated twice: GUARDED = false for interior blocks (no checks
// after the first tile), true for blocks on the edges of C or with unaligned operands.
template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool GUARDED>
struct WmmaMainloop {
    static constexpr int THREADS = 32 * (BM / WM) * (BN / WN);
    static constexpr int FM = WM / 16, FN = WN / 16, KS = BK / 16;   // fragments per warp, k slices per tile
    typedef WmmaSmem<BM, BN, BK> S;
    typedef ChunkMap<BM, BK, S::A_LD, THREADS> CA;
    typedef ChunkMap<BK, BN, S::B_LD, THREADS> CB;
    static constexpr unsigned STAGE_BYTES = 2 * S::STAGE_HALVES, A_BYTES = 2 * S::A_HALVES;

    const unsigned short* __restrict__ A;
    const unsigned short* __restrict__ B;
    unsigned short* smem_h;
    int M, N, K, m0, n0, k_first, steps;
    bool a_vec, b_vec;
    const unsigned short* pa;                      // interior blocks: the thread's first chunk of A
    const unsigned short* pb;                      // and of B in the next tile to request
    unsigned a_dst, b_dst;                         // ... and their shared addresses in stage 0
    unsigned a_frag, b_frag;                       // the warp's fragments at k = 0 of stage 0
    FragA fa[2][FM];
    FragB fb[2][FN];

    __device__ __forceinline__ WmmaMainloop(const unsigned short* __restrict__ A_, const unsigned short* __restrict__ B_,
                                            unsigned short* smem_h_, int M_, int N_, int K_, int m0_, int n0_,
                                            bool a_vec_, bool b_vec_, int warp_row, int warp_col)
        : A(A_), B(B_), smem_h(smem_h_), M(M_), N(N_), K(K_), m0(m0_), n0(n0_), a_vec(a_vec_), b_vec(b_vec_)
    {
        const int r = K % BK;
        k_first = r ? r - BK : 0;                  // tile t covers [k_first + t BK, k_first + (t + 1) BK)
        steps = (K + BK - 1) / BK;
        pa = A + (long long)(m0 + CA::row()) * K + (k_first + BK) + CA::col();    // tile 1
        pb = B + (long long)(k_first + BK + CB::row()) * N + n0 + CB::col();
        const unsigned smem0 = shared_address(smem_h);
        a_dst = smem0 + 2 * (CA::row() * S::A_LD + CA::col());
        b_dst = smem0 + A_BYTES + 2 * (CB::row() * S::B_LD + CB::col());
        a_frag = smem0 + 2 * (warp_row * WM * S::A_LD);
        b_frag = smem0 + A_BYTES + 2 * (warp_col * WN);
    }

    // Tile t into stage t % STAGES. Only tile 0 (and every tile of a guarded block) is checked;
    // the unchecked copies of tiles 1, 2, ... must be requested in this order.
    __device__ __forceinline__ void request(int t)
    {
        const int stage = t % STAGES;
        if (GUARDED || t == 0) {
            unsigned short* As = smem_h + stage * S::STAGE_HALVES;
            CA::copy_checked(As, A, K, M, K, m0, k_first + t * BK, a_vec);
            CB::copy_checked(As + S::A_HALVES, B, N, K, N, k_first + t * BK, n0, b_vec);
        } else {
#pragma unroll
            for (int l = 0; l < CA::LOADS; ++l)
                cp_async16_at(a_dst + stage * STAGE_BYTES + 2 * l * CA::ROW_STEP * S::A_LD,
                              pa + (long long)l * CA::ROW_STEP * K);
#pragma unroll
            for (int l = 0; l < CB::LOADS; ++l)
                cp_async16_at(b_dst + stage * STAGE_BYTES + 2 * l * CB::ROW_STEP * S::B_LD,
                              pb + (long long)l * CB::ROW_STEP * N);
            pa += BK;
            pb += (long long)BK * N;
        }
    }

    // Slice kk of the stage at byte offset stage_offset into fragment buffer buf.
    __device__ __forceinline__ void load_frags(int buf, unsigned stage_offset, int kk)
    {
#pragma unroll
        for (int i = 0; i < FM; ++i)
            frag_load_a_at(fa[buf][i], a_frag + stage_offset + 2 * (16 * i * S::A_LD + 16 * kk), S::A_LD);
#pragma unroll
        for (int j = 0; j < FN; ++j)
            frag_load_b_at(fb[buf][j], b_frag + stage_offset + 2 * (16 * kk * S::B_LD + 16 * j), S::B_LD);
    }

    // Wait for the next tile, synchronise, and load its first slice into fragment buffer 0.
    __device__ __forceinline__ void next_tile(int stage)
    {
        cp_async_wait<STAGES - 2>();               // the next tile has landed (this thread's copies)
        __syncthreads();                           // ... everyone's, and this tile is no longer read
        load_frags(0, stage * STAGE_BYTES, 0);
    }

    __device__ __forceinline__ void multiply(FragC (&acc)[FM][FN], int buf)
    {
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) frag_mma(acc[i][j], fa[buf][i], fb[buf][j]);
    }

    __device__ __forceinline__ void run(FragC (&acc)[FM][FN])
    {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < steps) request(s);
            cp_async_commit();                     // an empty group when there is no tile s
        }
        cp_async_wait<STAGES - 2>();               // tile 0 has landed (this thread's copies)
        __syncthreads();                           // ... everyone's
        load_frags(0, 0, 0);

        int read_stage = 0;                        // the stage of tile t
        for (int t = 0; t < steps; ++t) {
            if (t + STAGES - 1 < steps) request(t + STAGES - 1);
            cp_async_commit();
            const unsigned cur = read_stage * STAGE_BYTES;
            read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
#pragma unroll
            for (int kk = 0; kk < KS; ++kk) {
                const bool last = kk + 1 == KS;
                if (!last) {
                    load_frags((kk + 1) & 1, cur, kk + 1);
                } else if (KS % 2 == 0) {          // slice 0 of the next tile goes to buffer 0, free now
                    next_tile(read_stage);
                }
                multiply(acc, kk & 1);
                if (last && KS % 2 == 1)           // the last slice used buffer 0: load after it
                    next_tile(read_stage);
            }
        }
        cp_async_wait<0>();
        __syncthreads();                           // every warp is done with the tiles
    }
};

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
__global__ void __launch_bounds__(32 * (BM / WM) * (BN / WN))
gemm_wmma_pipelined(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                    float* __restrict__ C, int M, int N, int K, float alpha, float beta)
{
    constexpr int FM = WM / 16, FN = WN / 16;
    static_assert(BK % 16 == 0 && WM % 16 == 0 && WN % 16 == 0 && STAGES >= 2, "16 x 16 x 16 fragments");
    extern __shared__ __align__(128) unsigned short smem_h[];        // stage s at s * STAGE_HALVES

    const int warp = threadIdx.x / 32;
    const int warp_row = warp / (BN / WN), warp_col = warp % (BN / WN);
    int tile_m, tile_n;
    block_tile<8>(blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN, tile_m, tile_n);
    const int m0 = tile_m * BM, n0 = tile_n * BN;
    const bool a_vec = (K % 8 == 0) && aligned16(A);
    const bool b_vec = (N % 8 == 0) && aligned16(B);
    const bool interior = a_vec && b_vec && m0 + BM <= M && n0 + BN <= N;   // uniform over the block

    FragC acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) frag_zero(acc[i][j]);
    if (interior) {
        WmmaMainloop<BM, BN, BK, WM, WN, STAGES, false> loop(A, B, smem_h, M, N, K, m0, n0, a_vec, b_vec,
                                                             warp_row, warp_col);
        loop.run(acc);
    } else {
        WmmaMainloop<BM, BN, BK, WM, WN, STAGES, true> loop(A, B, smem_h, M, N, K, m0, n0, a_vec, b_vec,
                                                            warp_row, warp_col);
        loop.run(acc);
    }

    const int row0 = m0 + warp_row * WM, col0 = n0 + warp_col * WN;
    const bool direct = row0 + WM <= M && col0 + WN <= N && N % 4 == 0 &&
                        (reinterpret_cast<unsigned long long>(C) & 31ull) == 0;   // uniform over the warp
    if (direct) {
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                float* c = C + (long long)(row0 + 16 * i) * N + col0 + 16 * j;
                FragC& d = acc[i][j];
                if (beta != 0.0f) {
                    FragC old;
                    frag_load_c_global(old, c, N);
#pragma unroll
                    for (int e = 0; e < 8; ++e) d.x[e] = alpha * d.x[e] + beta * old.x[e];
                } else {
#pragma unroll
                    for (int e = 0; e < 8; ++e) d.x[e] = alpha * d.x[e];
                }
                frag_store_c_global(c, d, N);
            }
    } else {
        float* scratch = reinterpret_cast<float*>(smem_h) + warp * 16 * 20;
        warp_store<WM, WN>(C, M, N, row0, col0, acc, scratch, alpha, beta);
    }
}
