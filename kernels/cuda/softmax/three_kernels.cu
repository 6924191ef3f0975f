// Softmax of each row of a rows x cols float matrix (row-major) in three launches, one per step
// of the safe formula y_j = exp(x_j - m) / d with m = max_j x_j and d = sum_j exp(x_j - m):
//
//   row_max       m of every row              reads the matrix once, writes rows floats
//   row_sum_exp   d of every row              reads the matrix and m, writes rows floats
//   normalise     y = exp(x - m) / d          reads the matrix, m and d, writes the matrix
//
// Every kernel runs one block per row (grid = rows, blockDim.x a multiple of 32): the threads
// stride over the row, so a warp reads 32 consecutive floats at a time, and a block reduction
// combines the threads. The matrix is read three times and written once.
#include "softmax/softmax_common.cuh"

extern "C" __global__ void row_max(const float* __restrict__ x, float* __restrict__ m, int cols)
{
    const float* row = x + (long long)blockIdx.x * cols;
    float v = LOWEST;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) v = fmaxf(v, row[j]);
    v = block_max(v);
    if (threadIdx.x == 0) m[blockIdx.x] = v;
}

extern "C" __global__ void row_sum_exp(const float* __restrict__ x, const float* __restrict__ m,
                                       float* __restrict__ d, int cols)
{
    const float* row = x + (long long)blockIdx.x * cols;
    const float row_m = m[blockIdx.x];
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - row_m);
    s = block_sum(s);
    if (threadIdx.x == 0) d[blockIdx.x] = s;
}

extern "C" __global__ void normalise(const float* __restrict__ x, const float* __restrict__ m,
                                     const float* __restrict__ d, float* __restrict__ y, int cols)
{
    const long long offset = (long long)blockIdx.x * cols;
    const float row_m = m[blockIdx.x];
    const float inv = inverse_or_zero(d[blockIdx.x]);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) y[offset + j] = expf(x[offset + j] - row_m) * inv;
}
