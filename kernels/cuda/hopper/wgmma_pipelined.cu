// The Hopper GEMM, second step: a ring of STAGES shared-memory stages, a producer warp that only
// issues TMA loads and two consumer warpgroups that only issue wgmma (warp specialisation; sm_90a).
// Same operands as gemm_wgmma: fp16 A (M x K row-major) and B^T (N x K row-major, i.e. B column-
// major), fp32 accumulation and C (M x N row-major). Any M and N; K a multiple of 8.
//
// min_arch: sm_90
//
// A block of 384 threads owns a 128 x BN tile of C (BN = 128 or 256): warpgroup 0 is the producer
// (one thread of it issues every load; the rest exit at once), warpgroups 1 and 2 the consumers,
// each computing 64 rows with m64nBNk16 (BN / 2 fp32 accumulator registers per thread). Each stage
// holds A's 128 x 64 box and B^T's BN x 64 box (16 KB + BN / 8 KB, 128-byte swizzle) and has two
// mbarriers:
//
//   full[s]:  the producer arrives with expect_tx(the stage's bytes) and issues both loads; the
//             phase completes when the bytes have landed. Consumers wait on it.
//   empty[s]: one arrival per consumer warpgroup once its wgmma reading stage s have completed;
//             the producer waits on it before it reuses the stage.
//
// Step kt uses stage kt % STAGES in round kt / STAGES, so its full barrier completes its phase of
// parity (kt / STAGES) & 1, and the producer's wait on empty before round r >= 1 has parity (r - 1) & 1.
//
// IN_FLIGHT = 0: each consumer waits for its products of a stage (wgmma.wait_group 0) before it
// frees that stage. IN_FLIGHT = 1: it waits with wait_group 1, so one group of products may still
// run while the next stage's are issued, and frees the previous stage instead.
//
// Launch: block 384, grid (ceil(N / BN), ceil(M / 128)), dynamic shared memory STAGES * (16 KB +
// BN / 8 KB) + 1152 bytes (up to 1024 to align the stages, then the 2 * STAGES barriers). Tensor
// maps: A box 64 (K) x 128 (rows), B^T box 64 (K) x BN (rows), fp16, 128-byte swizzle.
// 2 <= STAGES <= 6 (and the stages within the 227 KB a block may have).
//
// name_expressions: gemm_wgmma_pipelined<128, 4, 0>, gemm_wgmma_pipelined<128, 4, 1>
// name_expressions: gemm_wgmma_pipelined<128, 3, 1>, gemm_wgmma_pipelined<256, 4, 1>
// name_expressions: gemm_wgmma_pipelined<256, 3, 1>
#include "hopper/wgmma.cuh"

// The tile shape (enumerators: constants that are no objects in memory).
template <int BN_>
struct RingTile {
    enum : int { BM = 128, BN = BN_, BK = 64, CONSUMERS = 2 };
    enum : unsigned { A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES };
};

template <int BN, int STAGES, int IN_FLIGHT>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma_pipelined(const __grid_constant__ TensorMap a_map, const __grid_constant__ TensorMap b_map, float* C,
                     int M, int N, int K)
{
    static_assert(STAGES >= 2 && STAGES <= 6 && (IN_FLIGHT == 0 || IN_FLIGHT == 1), "2..6 stages, IN_FLIGHT 0 or 1");
    static_assert(BN == 128 || BN == 256, "wgmma m64n128k16 or m64n256k16");
    using Tile = RingTile<BN>;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ unsigned char shared_raw[];
    unsigned char* stages = align_shared<1024>(shared_raw);  // stage s: A at s * 32 KB, B^T 16 KB later
    const unsigned stage0 = shared_address(stages);
    const unsigned full0 = stage0 + STAGES * Tile::STAGE_BYTES;  // full[s] at full0 + 8 s
    const unsigned empty0 = full0 + 8 * STAGES;               // empty[s] at empty0 + 8 s
    const int row0 = blockIdx.y * Tile::BM;
    const int col0 = blockIdx.x * Tile::BN;
    const int k_tiles = (K + Tile::BK - 1) / Tile::BK;
    if (threadIdx.x == 0) {
        tma_prefetch_map(&a_map);
        tma_prefetch_map(&b_map);
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(full0 + 8 * s, 1);
            mbarrier_init(empty0 + 8 * s, Tile::CONSUMERS);
        }
        mbarrier_init_fence();
    }
    __syncthreads();  // the last block-wide barrier: the producer's idle threads leave after it

    const int warpgroup = threadIdx.x / 128;
    if (warpgroup == 0) {
        if (threadIdx.x == 0) {
            for (int kt = 0; kt < k_tiles; ++kt) {
                const int s = kt % STAGES;
                const int round = kt / STAGES;
                if (round > 0) mbarrier_wait(empty0 + 8 * s, (round - 1) & 1);
                const unsigned a_stage = stage0 + s * Tile::STAGE_BYTES;
                mbarrier_arrive_expect_tx(full0 + 8 * s, Tile::STAGE_BYTES);
                tma_load_2d(a_stage, &a_map, full0 + 8 * s, kt * Tile::BK, row0);
                tma_load_2d(a_stage + Tile::A_BYTES, &b_map, full0 + 8 * s, kt * Tile::BK, col0);
            }
        }
        return;
    }

    const int consumer = warpgroup - 1;  // rows 64 * consumer .. + 63 of the block's tile
    const bool signals = threadIdx.x % 128 == 0;
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;

    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        mbarrier_wait(full0 + 8 * s, (kt / STAGES) & 1);
        // this consumer's 64 rows of A start 8 KB into the stage: still 1024-aligned
        const unsigned a_rows = stage0 + s * Tile::STAGE_BYTES + consumer * (64 * Tile::BK * 2);
        const unsigned b_rows = stage0 + s * Tile::STAGE_BYTES + Tile::A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < Tile::BK / 16; ++k) {
            wgmma_m64nNk16_f32_f16<BN>(d, wgmma_descriptor_sw128(a_rows + 32 * k),
                                       wgmma_descriptor_sw128(b_rows + 32 * k));
        }
        wgmma_commit_group();
        if (IN_FLIGHT == 0) {
            wgmma_wait_group<0>();
            if (signals) mbarrier_arrive(empty0 + 8 * s);
        } else {
            wgmma_wait_group<1>();  // the products of step kt - 1 are done: free their stage
            if (signals && kt > 0) mbarrier_arrive(empty0 + 8 * ((kt - 1) % STAGES));
        }
    }
    wgmma_wait_group<0>();
    wgmma_fence_operands(d);
    store_accumulator(d, C, M, N, row0 + 64 * consumer, col0);
#else
    __trap();  // wgmma needs sm_90a: compile with -arch=sm_90a
#endif
}
