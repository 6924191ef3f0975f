// Rung 7b of the GEMM ladder: warp tiles with a register pipeline and lane pairs that share their
// shared-memory reads (runs on every GPU the course supports). C = alpha * A * B + beta * C,
// row-major, any M, N, K >= 1.
//
// Rung 7 is bounded by two costs that do not show in its source, only in its SASS and in the SM's
// limits (compute capability 9.0: one warp instruction issued per clock per scheduler, and a warp
// FFMA occupies that slot: every other instruction is a lost FFMA; shared memory returns 128 bytes,
// one register per lane, per clock per SM):
//
//   1. issue slots: index arithmetic of the copies, bounds checks on every load, a branch per
//      copy; about 30 % of the instructions in rung 7's loop are not FFMAs.
//   2. the shared-memory return path: an LDS.128 returns four registers per lane, 4 clocks of the
//      path, unless lanes 2i and 2i + 1 (or 4i + j and 4i + j + 2) read the same address, when
//      the hardware packs it into 2 (an observed behaviour, reported for compute capability 7.x
//      from profiler counts and microbenchmarks; NVIDIA's guides do not describe it). With 8 x 8
//      outputs per thread a warp needs 4 LDS.128 per k for 64 FFMAs: at 4 clocks each, four
//      schedulers issuing FFMAs need 100 % of the path.
//
// What this kernel changes (the tiles, the padded transposed A tile and the epilogue are rung 7's):
//
//   lane layout: bit 0 of the lane picks the column group, bit 1 the row group, so that lanes
//            l and l ^ 1 read the same float4 of A and lanes l and l ^ 2 the same float4 of B:
//            every fragment read packs into 2 clocks (50 % of the path at 8 x 8 per thread).
//   register double buffering of the fragments: the values of k + 1 are read from shared memory
//            while the FFMAs of k run; the first fragment of the next tile is read right after the
//            barrier, under the FFMAs of the last k of the current one.
//   one barrier per BK step, placed before the last k (after the registers staged for the next
//            tile are stored to the other shared stage).
//   interior blocks (the whole tile inside C, K and N multiples of 4, aligned operands) run a
//            main loop with no bounds checks at all: pointers are incremented, shared-memory
//            offsets are compile-time constants (the loop is unrolled over the two stages). Blocks
//            on the edges run the same loop with checked loads (a uniform branch per block).
//   K that is not a multiple of BK: the first tile is the short one (it starts at K % BK - BK,
//            columns below 0 read as zero), so every later tile is whole and unchecked.
//
// Launch: block 32 * (BM / WM) * (BN / WN) threads, 1-D grid ceil(M / BM) * ceil(N / BN) (grouped
// order, block_tile), dynamic shared memory 2 * BK * (BM + 4 + BN) * 4 bytes (opt in above 48 KB).
// BLOCKS is __launch_bounds__' minimum number of blocks per SM on compute capability 8.0 and later.
// Requires TM % 4 == 0, TN % 4 == 0, BK % 4 == 0, (WM / TM) * (WN / TN) == 32, both at least 2.
//
// name_expressions: gemm_warp_pipelined<128, 128, 8, 32, 64, 8, 8, 2>
// name_expressions: gemm_warp_pipelined<128, 128, 8, 64, 32, 8, 8, 1>
// name_expressions: gemm_warp_pipelined<128, 128, 16, 32, 64, 8, 8, 1>
// name_expressions: gemm_warp_pipelined<128, 256, 8, 64, 64, 8, 16, 1>
// name_expressions: gemm_warp_pipelined<64, 64, 8, 32, 32, 4, 8, 2>
// name_expressions: gemm_warp_pipelined<256, 128, 8, 64, 64, 16, 8, 1>
#include "gemm/simt_tiles.cuh"

// Four consecutive elements base[c .. c + 3] of one row of a matrix; element c + j is read only
// when `ok` and 0 <= c + j < hi, and is 0 otherwise. vec (uniform over the grid): c % 4 == 0,
// hi % 4 == 0 and base 16-byte aligned at c, so the four are all inside or all outside.
__device__ __forceinline__ float4 load4_window(const float* __restrict__ base, int c, int hi, bool ok, bool vec)
{
    if (vec) {
        if (ok && c >= 0 && c < hi) return __ldg(reinterpret_cast<const float4*>(base + c));
        return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = (ok && c + j >= 0 && c + j < hi) ? __ldg(base + c + j) : 0.0f;
    return make_float4(v[0], v[1], v[2], v[3]);
}

// The block's share of one BK step: A_LOADS float4 of the BM x BK tile of A and B_LOADS of the
// BK x BN tile of B per thread. Thread i's A float4 l is row (i + l * THREADS) / (BK / 4) of the
// tile, columns 4 * (i % (BK / 4)) .. + 3 (the same for every l); its B float4 l is row
// (i + l * THREADS) / (BN / 4), columns 4 * ((i + l * THREADS) % (BN / 4)) .. + 3.
template <int BM, int BN, int BK, int THREADS>
struct PipelinedCopy {
    static constexpr int A_LOADS = BM * BK / 4 / THREADS, B_LOADS = BK * BN / 4 / THREADS;
    static constexpr int A_PITCH = BM + 4;       // transposed A tile: word k * A_PITCH + m
    static constexpr int A_WORDS = BK * A_PITCH, B_WORDS = BK * BN;
    static constexpr int STAGE_WORDS = A_WORDS + B_WORDS;

    static_assert(THREADS % (BN / 4) == 0 || (BN / 4) % THREADS == 0, "B float4 rows per thread");
    // Thread i's float4 l, relative to its float4 0: A rows (the m of the transposed tile) l *
    // A_ROW_STEP further; B at word offset b_offset(l) of the tile (row * BN + column).
    static constexpr int A_ROW_STEP = THREADS / (BK / 4);
    __host__ __device__ static constexpr int b_row_step(int l) { return (l * THREADS) / (BN / 4); }
    __host__ __device__ static constexpr int b_offset(int l) { return b_row_step(l) * BN + 4 * ((l * THREADS) % (BN / 4)); }
    __device__ static __forceinline__ int a_row() { return threadIdx.x / (BK / 4); }
    __device__ static __forceinline__ int a_col() { return 4 * (threadIdx.x % (BK / 4)); }
    __device__ static __forceinline__ int b_row() { return threadIdx.x / (BN / 4); }
    __device__ static __forceinline__ int b_col() { return 4 * (threadIdx.x % (BN / 4)); }

    // Registers -> one shared stage: A transposed (four 4-byte stores per float4), B as it is.
    // a_st and b_st are the thread's float4 0 in stage 0; `stage` is 0 or 1.
    __device__ static __forceinline__ void stash(const float4 (&ra)[A_LOADS], const float4 (&rb)[B_LOADS],
                                                 float* a_st, float* b_st, int stage)
    {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            float* a = a_st + (stage * STAGE_WORDS + l * A_ROW_STEP);
            a[0 * A_PITCH] = ra[l].x;
            a[1 * A_PITCH] = ra[l].y;
            a[2 * A_PITCH] = ra[l].z;
            a[3 * A_PITCH] = ra[l].w;
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l)
            *reinterpret_cast<float4*>(b_st + (stage * STAGE_WORDS + b_offset(l))) = rb[l];
    }
};

// The main loop, as an object so that its two stages can be compile-time constants: run() goes
// from the first (possibly short) tile to K, accumulating into acc. GUARDED = false only for
// interior blocks with 16-byte loads: no checks after the first tile. `a_off` and `b_off` are the
// words of the thread's first float4 of A and of B in a stage at k = 0; its other float4 lie at
// compile-time offsets from them.
template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int THREADS, bool GUARDED>
struct PipelinedMainloop {
    typedef PipelinedCopy<BM, BN, BK, THREADS> P;
    static constexpr int LR = WM / TM, LC = WN / TN;

    const float* __restrict__ A;
    const float* __restrict__ B;
    int M, N, K, m0, n0;
    bool a_vec, b_vec;
    float* smem;
    const float* a_rd;                            // the thread's first float4 of A and of B
    const float* b_rd;                            // in stage 0 at k = 0, for reading fragments
    float* a_st;                                  // ... and for storing its staged float4
    float* b_st;
    const float* a_row_ptr;                       // checked loads: the thread's row of A,
    const float* b_col_ptr;                       // its column of B in row 0,
    int a_rows_left, b_cols_left;                 // and how many rows / columns lie inside
    int k_first, steps;
    const float* pa;                              // interior blocks: the thread's float4 of the
    const float* pb;                              // next tile, advanced by one tile per fetch
    float4 ra[P::A_LOADS], rb[P::B_LOADS];        // the next tile, staged in registers
    float a[2][TM], b[2][TN];                     // fragments of k (one buffer) and k + 1 (the other)

    __device__ __forceinline__ PipelinedMainloop(const float* __restrict__ A_, const float* __restrict__ B_,
                                                 int M_, int N_, int K_, int m0_, int n0_, bool a_vec_,
                                                 bool b_vec_, float* smem_, int a_off_, int b_off_)
        : A(A_), B(B_), M(M_), N(N_), K(K_), m0(m0_), n0(n0_), a_vec(a_vec_), b_vec(b_vec_), smem(smem_),
          a_rd(smem_ + a_off_), b_rd(smem_ + P::A_WORDS + b_off_)
    {
        const int r = K % BK;
        k_first = r ? r - BK : 0;                 // the first tile is [k_first, k_first + BK)
        steps = (K + BK - 1) / BK;
        // Only dereferenced for tiles 1 .. steps - 1, which lie inside A and B.
        pa = A + (long long)(m0 + P::a_row()) * K + (k_first + BK) + P::a_col();
        pb = B + (long long)(k_first + BK + P::b_row()) * N + n0 + P::b_col();
        a_st = smem + P::a_col() * P::A_PITCH + P::a_row();
        b_st = smem + P::A_WORDS + P::b_row() * BN + P::b_col();
        a_row_ptr = A + (long long)(m0 + P::a_row()) * K;
        b_col_ptr = B + n0 + P::b_col();
        a_rows_left = M - (m0 + P::a_row());
        b_cols_left = N - (n0 + P::b_col());
    }

    // Checked loads of the tile at k0 (the first tile, or any tile of an edge block), relative to
    // the thread's row of A and column of B (a_row_ptr, b_col_ptr) and how many rows of A and
    // columns of B are left from there: few values stay live across the loop.
    __device__ __forceinline__ void fetch_checked(int k0)
    {
#pragma unroll
        for (int l = 0; l < P::A_LOADS; ++l)
            ra[l] = load4_window(a_row_ptr + (long long)(l * P::A_ROW_STEP) * K, k0 + P::a_col(), K,
                                 l * P::A_ROW_STEP < a_rows_left, a_vec);
#pragma unroll
        for (int l = 0; l < P::B_LOADS; ++l) {
            const int krow = k0 + P::b_row() + P::b_row_step(l), c = P::b_offset(l) - P::b_row_step(l) * BN;
            rb[l] = load4_window(b_col_ptr + (long long)krow * N, c, b_cols_left, krow >= 0 && krow < K, b_vec);
        }
    }

    __device__ __forceinline__ void fetch_fast()
    {
#pragma unroll
        for (int l = 0; l < P::A_LOADS; ++l)
            ra[l] = __ldg(reinterpret_cast<const float4*>(pa + (long long)(l * P::A_ROW_STEP) * K));
#pragma unroll
        for (int l = 0; l < P::B_LOADS; ++l)
            rb[l] = __ldg(reinterpret_cast<const float4*>(
                pb + (long long)P::b_row_step(l) * N + (P::b_offset(l) - P::b_row_step(l) * BN)));
        pa += BK;
        pb += (long long)BK * N;
    }

    // The fragments of step k of stage `stage` into buffer `buf`; every offset from the thread's
    // two base pointers is a compile-time constant (an immediate of the LDS instruction).
    __device__ __forceinline__ void read_frags(int buf, int stage, int k)
    {
#pragma unroll
        for (int q = 0; q < TM / 4; ++q) {
            const float4 v = *reinterpret_cast<const float4*>(a_rd + (stage * P::STAGE_WORDS + k * P::A_PITCH + q * 4 * LR));
            a[buf][4 * q + 0] = v.x; a[buf][4 * q + 1] = v.y; a[buf][4 * q + 2] = v.z; a[buf][4 * q + 3] = v.w;
        }
#pragma unroll
        for (int q = 0; q < TN / 4; ++q) {
            const float4 v = *reinterpret_cast<const float4*>(b_rd + (stage * P::STAGE_WORDS + k * BN + q * 4 * LC));
            b[buf][4 * q + 0] = v.x; b[buf][4 * q + 1] = v.y; b[buf][4 * q + 2] = v.z; b[buf][4 * q + 3] = v.w;
        }
    }

    // One BK step, tile t, on stage S.
    template <int S>
    __device__ __forceinline__ void step(int t, float (&acc)[TM][TN])
    {
        const bool more = t + 1 < steps;
        if (more) {                               // global loads of tile t + 1: in flight from here
            if constexpr (GUARDED) fetch_checked(k_first + (t + 1) * BK);
            else                   fetch_fast();
        }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k == BK - 1) {                    // stage S ^ 1 was last read before the previous barrier
                if (more) P::stash(ra, rb, a_st, b_st, S ^ 1);
                __syncthreads();
            }
            read_frags((k + 1) & 1, k + 1 < BK ? S : S ^ 1, (k + 1) % BK);
            multiply(acc, k & 1);
        }
    }

    __device__ __forceinline__ void multiply(float (&acc)[TM][TN], int buf)
    {
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j)
                acc[i][j] = fmaf(a[buf][i], b[buf][j], acc[i][j]);
    }

    __device__ __forceinline__ void run(float (&acc)[TM][TN])
    {
        fetch_checked(k_first);
        P::stash(ra, rb, a_st, b_st, 0);
        __syncthreads();
        read_frags(0, 0, 0);
        for (int t = 0; t < steps; t += 2) {      // two steps per iteration: stage 0, then stage 1
            step<0>(t, acc);
            if (t + 1 == steps) break;
            step<1>(t + 1, acc);
        }
    }
};

// BLOCKS caps the registers at 65536 / (threads x BLOCKS). Before compute capability 8.0 (the T4)
// the edge blocks' loop of the 128-register configurations spills under that cap, so it applies
// from 8.0 on only.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define PIPELINED_MIN_BLOCKS(blocks) 1
#else
#define PIPELINED_MIN_BLOCKS(blocks) (blocks)
#endif

template <int BM, int BN, int BK, int WM, int WN, int TM, int TN, int BLOCKS>
__global__ void __launch_bounds__(32 * (BM / WM) * (BN / WN), PIPELINED_MIN_BLOCKS(BLOCKS))
gemm_warp_pipelined(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                    int M, int N, int K, float alpha, float beta)
{
    constexpr int THREADS = 32 * (BM / WM) * (BN / WN);
    constexpr int LR = WM / TM, LC = WN / TN;     // the lanes of a warp as an LR x LC grid
    static_assert(LR * LC == 32 && LR >= 2 && LC >= 2, "a warp tile must hold 32 thread tiles, 2+ each way");
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 reads and copies");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "whole float4 per thread");
    typedef PipelinedCopy<BM, BN, BK, THREADS> P;
    extern __shared__ __align__(16) float smem[];

    // Lane bits: bit 0 and bits 2 .. c of the lane give lane_col (c = log2 LC), bit 1 and the bits
    // above c give lane_row. Lanes l and l ^ 1 share lane_row (the same float4 of A), lanes l and
    // l ^ 2 share lane_col (the same float4 of B).
    constexpr int CB = LC == 2 ? 1 : LC == 4 ? 2 : LC == 8 ? 3 : 4;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int lane_col = (lane & 1) | (((lane >> 2) & ((1 << (CB - 1)) - 1)) << 1);
    const int lane_row = ((lane >> 1) & 1) | ((lane >> (CB + 1)) << 1);
    const int warp_row = warp / (BN / WN), warp_col = warp % (BN / WN);
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
    const bool interior = a_vec && b_vec && m0 + BM <= M && n0 + BN <= N;   // uniform over the block

    float acc[TM][TN] = {};
    if (interior) {
        PipelinedMainloop<BM, BN, BK, WM, WN, TM, TN, THREADS, false> loop(A, B, M, N, K, m0, n0, a_vec, b_vec,
                                                                            smem, row_base[0], col_base[0]);
        loop.run(acc);
    } else {
        PipelinedMainloop<BM, BN, BK, WM, WN, TM, TN, THREADS, true> loop(A, B, M, N, K, m0, n0, a_vec, b_vec,
                                                                           smem, row_base[0], col_base[0]);
        loop.run(acc);
    }
    store_tile<TM, TN>(C, M, N, m0, n0, acc, row_base, col_base, alpha, beta);
}
