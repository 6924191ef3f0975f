// The Hopper GEMM, third step: warp specialisation with a register split, and clusters that share
// B's tile through TMA multicast (sm_90a). Same operands as gemm_wgmma: fp16 A (M x K row-major)
// and B^T (N x K row-major), fp32 accumulation and C (M x N row-major). Any M and N; K a multiple of 8.
//
// min_arch: sm_90
//
// What changes from wgmma_pipelined.cu (whose ring of full/empty mbarriers this keeps, with one
// wgmma group left in flight):
//
// * setmaxnreg. The producer warpgroup needs a handful of registers, the consumers hold the
//   accumulator (BN / 2 fp32 registers per thread). The producer gives registers back
//   (setmaxnreg.dec to 40) and the consumers claim them (setmaxnreg.inc to 232). With two consumer
//   warpgroups this buys nothing measurable: their 128 accumulator registers already fit in the 168
//   that the launch bound allows every thread. Nor can it buy a third consumer warpgroup for a
//   192 x 256 tile: ptxas compiles the whole kernel within the launch bound's budget (65536 / 512 =
//   128 registers per thread), and an m64n256k16 wgmma with its 128 accumulators needs about 154.
// * Clusters. CLUSTER blocks stacked along M (cluster dimensions 1 x CLUSTER) compute tiles in the
//   same columns of C, so they read the same B^T box, and the GPU runs them at the same time on
//   neighbouring SMs. With MULTICAST = 0 each block still loads its own copy (the cluster only
//   changes which tiles run together); with MULTICAST = 1 block r of the cluster loads only slice
//   r of the box (BN / CLUSTER rows) and multicasts it to every block of the cluster: each B^T box
//   leaves L2 once per cluster instead of once per block. A block's full barrier then counts bytes
//   that its peers' copies deliver, so a stage may be refilled only when the consumers of every
//   block of the cluster have finished with it: each consumer warpgroup arrives on the empty
//   barrier of every block (distributed shared memory), and empty barriers expect 2 * CLUSTER
//   arrivals. Peers' copies may land before this block's producer has announced the stage's bytes;
//   the phase still cannot complete early, as the producer's own arrival is missing until then.
//   Each block issues its multicast slice before its own A box: on an H200 the other order ran at
//   about 60 % of this one's speed (measured; the PTX ISA says nothing about the order of copies).
// * No block leaves while a peer may still arrive on its barriers or copy into it: consumers also
//   release the last stage, and the producer thread waits until the last use of every stage is
//   released before it leaves.
//
// Launch: block 384, grid (ceil(N / BN), ceil(M / 128) rounded up to a multiple of CLUSTER); dynamic
// shared memory STAGES * (128 + BN) * 128 + 1152 bytes.
// Tensor maps: A box 64 (K) x 128 (rows), B^T box 64 (K) x BN / CLUSTER rows with MULTICAST, else BN
// rows; fp16, 128-byte swizzle.
//
// name_expressions: gemm_wgmma_specialised<256, 4, 1, 0>, gemm_wgmma_specialised<256, 4, 2, 0>
// name_expressions: gemm_wgmma_specialised<256, 4, 2, 1>, gemm_wgmma_specialised<256, 3, 1, 0>
// name_expressions: gemm_wgmma_specialised<256, 3, 2, 1>, gemm_wgmma_specialised<128, 4, 1, 0>
// name_expressions: gemm_wgmma_specialised<128, 6, 1, 0>, gemm_wgmma_specialised<128, 6, 2, 1>
#include "hopper/cluster.cuh"
#include "hopper/wgmma.cuh"

template <int BN_, int CLUSTER_, int MULTICAST_>
struct SpecialisedTile {
    enum : int { BN = BN_, CLUSTER = CLUSTER_, CONSUMERS = 2, BM = 128, BK = 64,
                 SHARED_B = CLUSTER > 1 && MULTICAST_,  // the blocks of a cluster fill each other's stages
                 B_SLICE_ROWS = SHARED_B ? BN / CLUSTER : BN,
                 // 65536 registers per SM: 128 producer threads at 40 and 256 consumer threads at 232
                 PRODUCER_REGISTERS = 40, CONSUMER_REGISTERS = 232 };
    enum : unsigned { A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES,
                      B_SLICE_BYTES = B_SLICE_ROWS * BK * 2 };
};

// A consumer warpgroup is done with a stage: one arrival on its empty barrier, in every block of the
// cluster when the stage's B^T slices came from all of them.
template <bool SHARED_B, int CLUSTER>
__device__ __forceinline__ void release_stage(unsigned empty_bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (!SHARED_B) {
        mbarrier_arrive(empty_bar);
    } else {
#pragma unroll
        for (int peer = 0; peer < CLUSTER; ++peer) mbarrier_arrive_cluster(cluster_map(empty_bar, peer));
    }
#endif
}

template <int BN, int STAGES, int CLUSTER, int MULTICAST>
__global__ void __launch_bounds__(384, 1) __cluster_dims__(1, CLUSTER, 1)
gemm_wgmma_specialised(const __grid_constant__ TensorMap a_map, const __grid_constant__ TensorMap b_map, float* C,
                       int M, int N, int K)
{
    using Tile = SpecialisedTile<BN, CLUSTER, MULTICAST>;
    constexpr bool SHARED_B = Tile::SHARED_B;
    static_assert(BN == 128 || BN == 256, "wgmma m64n128k16 or m64n256k16");
    static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of 1 or 2 blocks along M");
    static_assert(MULTICAST == 0 || (MULTICAST == 1 && CLUSTER > 1), "multicast needs a cluster");
    static_assert(STAGES >= 2 && STAGES * Tile::STAGE_BYTES + 1152 <= 232448, "the stages fit in 227 KB");
    static_assert(Tile::B_SLICE_BYTES % 1024 == 0, "a multicast slice keeps the swizzle's 1024-byte repeat");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ unsigned char shared_raw[];
    const unsigned stage0 = shared_address(align_shared<1024>(shared_raw));
    const unsigned full0 = stage0 + STAGES * Tile::STAGE_BYTES;  // full[s] at full0 + 8 s
    const unsigned empty0 = full0 + 8 * STAGES;               // empty[s] at empty0 + 8 s
    const unsigned rank = SHARED_B ? cluster_rank() : 0;
    const int row0 = blockIdx.y * Tile::BM;
    const int col0 = blockIdx.x * Tile::BN;
    const int k_tiles = (K + Tile::BK - 1) / Tile::BK;
    if (threadIdx.x == 0) {
        tma_prefetch_map(&a_map);
        tma_prefetch_map(&b_map);
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(full0 + 8 * s, 1);
            mbarrier_init(empty0 + 8 * s, Tile::CONSUMERS * (SHARED_B ? CLUSTER : 1));
        }
        mbarrier_init_fence();
    }
    // Every block's barriers exist before any peer multicasts into it or arrives on them.
    if (SHARED_B) cluster_sync(); else __syncthreads();

    const int warpgroup = threadIdx.x / 128;
    if (warpgroup == 0) {
        warpgroup_release_registers<Tile::PRODUCER_REGISTERS>();
        if (threadIdx.x == 0) {
            for (int kt = 0; kt < k_tiles; ++kt) {
                const int s = kt % STAGES;
                const int round = kt / STAGES;
                if (round > 0) mbarrier_wait(empty0 + 8 * s, (round - 1) & 1);
                const unsigned a_stage = stage0 + s * Tile::STAGE_BYTES;
                const unsigned b_stage = a_stage + Tile::A_BYTES;
                mbarrier_arrive_expect_tx(full0 + 8 * s, Tile::STAGE_BYTES);
                if (SHARED_B) {
                    tma_load_2d_multicast(b_stage + rank * Tile::B_SLICE_BYTES, &b_map, full0 + 8 * s, kt * Tile::BK,
                                          col0 + rank * Tile::B_SLICE_ROWS, (1u << CLUSTER) - 1);
                } else {
                    tma_load_2d(b_stage, &b_map, full0 + 8 * s, kt * Tile::BK, col0);
                }
                tma_load_2d(a_stage, &a_map, full0 + 8 * s, kt * Tile::BK, row0);
            }
            // The producer's tail: with shared stages this block may leave only when the consumers of
            // every block have released every stage (their last arrivals land on these barriers).
            if (SHARED_B) {
                for (int s = 0; s < STAGES && s < k_tiles; ++s) {
                    const int uses = (k_tiles - 1 - s) / STAGES + 1;
                    mbarrier_wait(empty0 + 8 * s, (uses - 1) & 1);
                }
            }
        }
        return;  // the producer warpgroup's other threads leave at once
    }

    warpgroup_claim_registers<Tile::CONSUMER_REGISTERS>();
    const int consumer = warpgroup - 1;  // rows 64 * consumer .. + 63 of the block's tile
    const bool signals = threadIdx.x % 128 == 0;
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;

    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        mbarrier_wait(full0 + 8 * s, (kt / STAGES) & 1);
        const unsigned a_rows = stage0 + s * Tile::STAGE_BYTES + consumer * (64 * Tile::BK * 2);
        const unsigned b_rows = stage0 + s * Tile::STAGE_BYTES + Tile::A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < Tile::BK / 16; ++k) {
            wgmma_m64nNk16_f32_f16<BN>(d, wgmma_descriptor_sw128(a_rows + 32 * k),
                                       wgmma_descriptor_sw128(b_rows + 32 * k));
        }
        wgmma_commit_group();
        wgmma_wait_group<1>();  // the products of step kt - 1 are done: free their stage
        if (signals && kt > 0) release_stage<SHARED_B, CLUSTER>(empty0 + 8 * ((kt - 1) % STAGES));
    }
    wgmma_wait_group<0>();
    wgmma_fence_operands(d);
    if (SHARED_B && signals && k_tiles > 0) release_stage<SHARED_B, CLUSTER>(empty0 + 8 * ((k_tiles - 1) % STAGES));
    store_accumulator(d, C, M, N, row0 + 64 * consumer, col0);
#else
    __trap();  // wgmma needs sm_90a: compile with -arch=sm_90a
#endif
}
