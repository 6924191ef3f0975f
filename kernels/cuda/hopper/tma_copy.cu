// The Hopper chapter's first kernel: a 2-D tile copy through the Tensor Memory Accelerator.
// An fp16 matrix (rows x cols, row-major, cols a multiple of 8 so that a row is a whole number of
// 16-byte units, as TMA requires of the row stride) is copied tile by tile. Compute capability 9.0.
//
// min_arch: sm_90
//
// Each block copies one ROWS x COLS box. Thread 0 initialises an mbarrier, announces the box's
// bytes (arrive.expect_tx) and issues one cp.async.bulk.tensor: the TMA unit reads the box
// (coordinates: column, row) and writes it, unswizzled, into shared memory, counting the bytes down
// on the barrier. Every thread waits for phase 0 of the barrier; then the tile goes out:
//
//   tma_copy_tma_store:   thread 0 issues the opposite copy (shared to global through the
//                         destination's tensor map) and waits until it has read shared memory;
//   tma_copy_plain_store: the block's threads store it with 16-byte stores, coalesced along rows.
//
// Boxes hanging over the bottom or right edge need no code: TMA reads zeros outside the array and
// does not write outside it; the plain store checks the bounds itself.
//
// Launch: block 128 threads, grid (ceil(cols / COLS), ceil(rows / ROWS)), dynamic shared memory
// ROWS * COLS * 2 + 1152 bytes (up to 1024 to align the tile, then the barrier; opt in above
// 48 KB). Tensor maps (kernels/hopper.py): box COLS x ROWS, no swizzle.
//
// name_expressions: tma_copy_tma_store<128, 64>, tma_copy_plain_store<128, 64>
// name_expressions: tma_copy_tma_store<64, 128>, tma_copy_plain_store<64, 128>
#include "hopper/tma.cuh"

template <int ROWS, int COLS>
struct TileCopy {
    enum : unsigned { BYTES = ROWS * COLS * 2 };  // an enumerator: a constant that is no object in memory
    static_assert(COLS % 8 == 0 && COLS <= 256 && ROWS <= 256, "TMA boxes: <= 256 per side, 16-byte rows");
};

// Loads this block's box into `tile` (its barrier right after it) and waits until it has landed.
template <int ROWS, int COLS>
__device__ __forceinline__ void load_tile(const TensorMap* src, unsigned char* tile)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned bar = shared_address(tile + TileCopy<ROWS, COLS>::BYTES);
    if (threadIdx.x == 0) {
        mbarrier_init(bar, 1);
        mbarrier_init_fence();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mbarrier_arrive_expect_tx(bar, TileCopy<ROWS, COLS>::BYTES);
        tma_load_2d(shared_address(tile), src, bar, blockIdx.x * COLS, blockIdx.y * ROWS);
    }
    mbarrier_wait(bar, 0);
#endif
}

template <int ROWS, int COLS>
__global__ void tma_copy_tma_store(const __grid_constant__ TensorMap src, const __grid_constant__ TensorMap dst)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ unsigned char shared_raw[];
    unsigned char* tile = align_shared<1024>(shared_raw);
    load_tile<ROWS, COLS>(&src, tile);
    if (threadIdx.x == 0) {
        fence_proxy_async_shared();
        tma_store_2d(&dst, shared_address(tile), blockIdx.x * COLS, blockIdx.y * ROWS);
        tma_store_wait_read();  // shared memory must outlive the store's reads
    }
#else
    __trap();  // TMA needs compute capability 9.0
#endif
}

template <int ROWS, int COLS>
__global__ void tma_copy_plain_store(const __grid_constant__ TensorMap src, unsigned short* dst, int rows, int cols)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ unsigned char shared_raw[];
    unsigned char* tile = align_shared<1024>(shared_raw);
    load_tile<ROWS, COLS>(&src, tile);
    constexpr int CHUNKS_PER_ROW = COLS / 8;  // 16-byte chunks of 8 halves
    const int row0 = blockIdx.y * ROWS;
    const int col0 = blockIdx.x * COLS;
    for (int c = threadIdx.x; c < ROWS * CHUNKS_PER_ROW; c += blockDim.x) {
        const int r = c / CHUNKS_PER_ROW;
        const int col = col0 + 8 * (c % CHUNKS_PER_ROW);
        if (row0 + r < rows && col < cols) {  // cols % 8 == 0: a chunk is wholly in or out
            const uint4 v = reinterpret_cast<const uint4*>(tile)[c];
            *reinterpret_cast<uint4*>(dst + static_cast<long long>(row0 + r) * cols + col) = v;
        }
    }
#else
    __trap();  // TMA needs compute capability 9.0
#endif
}
