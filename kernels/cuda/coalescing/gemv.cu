// Matrix-vector product y = A x, A is M x N row-major, fp32.
//
// gemv_thread_per_row: thread `row` walks its whole row. At any moment the 32
//   lanes of a warp read A at 32 addresses N floats apart: one sector per lane,
//   32 sectors per request, of which each lane uses 4 bytes; the other 28 bytes
//   help only if they are still in L1 when the lane comes back for them.
// gemv_warp_per_row:   warp w computes row w. Lane l reads A[w][l], A[w][l + 32],
//   ..., so each warp-wide load covers 32 consecutive floats (4 sectors), then
//   the 32 partial sums are added with five shuffle steps. blockDim.x must be a
//   multiple of 32, so that a whole warp leaves together when its row is >= M
//   and __shfl_down_sync always has all 32 lanes present.
extern "C" __global__ void gemv_thread_per_row(const float* __restrict__ A,
                                               const float* __restrict__ x,
                                               float* __restrict__ y,
                                               int M, int N)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        const float* a = A + (long long)row * N;
        float acc = 0.0f;
        for (int j = 0; j < N; ++j) {
            acc += a[j] * x[j];
        }
        y[row] = acc;
    }
}

extern "C" __global__ void gemv_warp_per_row(const float* __restrict__ A,
                                             const float* __restrict__ x,
                                             float* __restrict__ y,
                                             int M, int N)
{
    int lane = threadIdx.x & 31;
    int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;  // one row per warp
    if (row >= M) {
        return;                                               // the whole warp leaves together
    }
    const float* a = A + (long long)row * N;
    float acc = 0.0f;
#pragma unroll 4
    for (int j = lane; j < N; j += 32) {
        acc += a[j] * x[j];
    }
    for (int offset = 16; offset > 0; offset >>= 1) {         // tree sum over the 32 lanes
        acc += __shfl_down_sync(0xffffffffu, acc, offset);
    }
    if (lane == 0) {
        y[row] = acc;
    }
}
