// expect: wrong_result | race | hidden_failed | timeout
// expect-cpu: environment_error
// why: never waits for the consumers: the producer refills stages they have not read yet (and arrives on full barriers whose phase has not completed), so boxes are lost or counted twice
// exercise hopper/tma_parity_fix (keep this line: it tells the grader which exercise this is)
#include "hopper/tma.cuh"

#define STAGES 4      // shared-memory stages in the ring
#define BOX_ROWS 32   // one TMA box: BOX_ROWS x BOX_COLS floats (8 KB); a block owns BOX_ROWS rows
#define BOX_COLS 64
#define CONSUMERS 64  // warps 1 and 2: two threads per row, each adding half of every box row

extern "C" __global__ void row_sums_tma(const __grid_constant__ TensorMap x_map, float* y, int rows, int cols)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ __align__(128) float stage[STAGES][BOX_ROWS * BOX_COLS];
    __shared__ __align__(8) unsigned long long full[STAGES];
    __shared__ __align__(8) unsigned long long empty[STAGES];
    const int row0 = blockIdx.x * BOX_ROWS;
    const int k_tiles = (cols + BOX_COLS - 1) / BOX_COLS;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbarrier_init(shared_address(&full[s]), 1);
            mbarrier_init(shared_address(&empty[s]), CONSUMERS);
        }
        mbarrier_init_fence();
    }
    __syncthreads();

    if (threadIdx.x < 32) {  // warp 0: the producer
        if (threadIdx.x == 0) {
            for (int kt = 0; kt < k_tiles; ++kt) {
                const int s = kt % STAGES;
                const int round = kt / STAGES;
                // wait until the consumers have released stage s
                // (no wait: the stage is assumed free)
                mbarrier_arrive_expect_tx(shared_address(&full[s]), BOX_ROWS * BOX_COLS * sizeof(float));
                tma_load_2d(shared_address(stage[s]), &x_map, shared_address(&full[s]), kt * BOX_COLS, row0);
            }
        }
        return;
    }

    const int c = threadIdx.x - 32;  // consumer 0..63
    const int r = c / 2;             // the row of the box this thread adds up
    const int half = c % 2;          // which half of each box row
    constexpr int HALF = BOX_COLS / 2;
    float sum = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        mbarrier_wait(shared_address(&full[s]), (kt / STAGES) & 1);
        const float* part = stage[s] + r * BOX_COLS + half * HALF;
        for (int j = 0; j < HALF; ++j) {
            sum += part[(j + c) % HALF];  // each thread starts at another column: no bank conflicts
        }
        mbarrier_arrive(shared_address(&empty[s]));
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);  // the two halves of the row
    if (half == 0 && row0 + r < rows) {
        y[row0 + r] = sum;
    }
#else
    __trap();  // TMA and mbarrier transaction counts need compute capability 9.0
#endif
}
