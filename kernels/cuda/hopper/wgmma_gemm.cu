// The Hopper chapter's first GEMM: one warpgroup, TMA loads and wgmma (sm_90a). fp16 A and B, fp32
// accumulation and C: C = A * B with A row-major M x K and B given as B^T, row-major N x K (B
// column-major), so that both operands are K-major, the layout wgmma reads without transposing.
// The host passes B^T (kernels/hopper.py). Any M and N; K a multiple of 8 (TMA's 16-byte row stride).
//
// min_arch: sm_90
//
// The last WMMA rung (gemm/wmma_pipelined.cu) computes addresses per thread, copies 16 bytes per
// cp.async and feeds the tensor cores 16 x 16 x 16 fragments from registers. Here one block of 128
// threads (one warpgroup) owns a 64 x 128 tile of C. For each 64-wide slice of K, thread 0 asks
// TMA for A's 64 x 64 box and B^T's 128 x 64 box (128-byte swizzle: rows of 128 bytes whose
// 16-byte chunks are permuted by row % 8, so the tensor cores read them without bank conflicts),
// the block waits on one mbarrier, and the warpgroup issues four wgmma.mma_async m64n128k16, each
// reading 16 columns of both boxes through shared-memory descriptors, then commits them and waits.
// The accumulator (64 fp32 registers per thread) never leaves the registers until the end.
//
// Nothing overlaps: a load waits for the previous products, the products for the load. That is
// the step wgmma_pipelined.cu takes next.
//
// Launch: block 128, grid (ceil(N / 128), ceil(M / 64)), dynamic shared memory 24 KB + 1152 bytes
// (A box 8 KB, B box 16 KB, up to 1024 bytes to align them, the barrier). Tensor maps: A box
// 64 (K) x 64 (rows), B^T box 64 (K) x 128 (rows), both fp16 with the 128-byte swizzle.
#include "hopper/wgmma.cuh"

// The tile shape (enumerators: constants that are no objects in memory).
struct SingleTile {
    enum : int { BM = 64, BN = 128, BK = 64 };  // BK: 64 halves, one 128-byte swizzled row
    enum : unsigned { A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2 };
};

extern "C" __global__ void __launch_bounds__(128, 1)
gemm_wgmma(const __grid_constant__ TensorMap a_map, const __grid_constant__ TensorMap b_map, float* C, int M, int N,
           int K)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ unsigned char shared_raw[];
    unsigned char* a_tile = align_shared<1024>(shared_raw);
    unsigned char* b_tile = a_tile + SingleTile::A_BYTES;  // 8 KB: still 1024-aligned
    const unsigned bar = shared_address(b_tile + SingleTile::B_BYTES);
    const int row0 = blockIdx.y * SingleTile::BM;
    const int col0 = blockIdx.x * SingleTile::BN;
    if (threadIdx.x == 0) {
        tma_prefetch_map(&a_map);
        tma_prefetch_map(&b_map);
        mbarrier_init(bar, 1);
        mbarrier_init_fence();
    }
    __syncthreads();

    float d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0.0f;

    const int k_tiles = (K + SingleTile::BK - 1) / SingleTile::BK;  // TMA fills the part of the last box past K with zeros
    for (int kt = 0; kt < k_tiles; ++kt) {
        if (threadIdx.x == 0) {
            mbarrier_arrive_expect_tx(bar, SingleTile::A_BYTES + SingleTile::B_BYTES);
            tma_load_2d(shared_address(a_tile), &a_map, bar, kt * SingleTile::BK, row0);
            tma_load_2d(shared_address(b_tile), &b_map, bar, kt * SingleTile::BK, col0);
        }
        mbarrier_wait(bar, kt & 1);
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < SingleTile::BK / 16; ++k) {
            wgmma_m64nNk16_f32_f16<SingleTile::BN>(d, wgmma_descriptor_sw128(shared_address(a_tile) + 32 * k),
                                                   wgmma_descriptor_sw128(shared_address(b_tile) + 32 * k));
        }
        wgmma_commit_group();
        wgmma_wait_group<0>();
        wgmma_fence_operands(d);
        __syncthreads();  // every warp has finished reading the tiles before the next load replaces them
    }
    store_accumulator(d, C, M, N, row0, col0);
#else
    __trap();  // wgmma needs sm_90a: compile with -arch=sm_90a
#endif
}
