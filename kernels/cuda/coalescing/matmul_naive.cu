// Naive matrix multiplication C = A B (A is M x K, B is K x N, C is M x N, all
// row-major), one thread per element of C, in two thread mappings.
//
// matmul_naive:   col comes from threadIdx.x (the fastest index, so the 32 lanes
//   of a warp have 32 consecutive columns and the same row). At each k the warp
//   reads B[k * N + col]: 32 consecutive floats, 4 sectors (coalesced), and
//   A[row * K + k]: one address for all lanes (a broadcast, 1 sector). Its store
//   to C is coalesced too.
// matmul_swapped: row comes from threadIdx.x. Now the warp reads A[row * K + k]
//   at 32 addresses K floats apart (32 sectors per request), B[k * N + col] is
//   the broadcast, and the stores to C are N floats apart.
//
// Launch with blockDim.x = 32 so that a warp is exactly one row of the block.
extern "C" __global__ void matmul_naive(const float* __restrict__ A,
                                        const float* __restrict__ B,
                                        float* __restrict__ C,
                                        int M, int N, int K)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = acc;
    }
}

extern "C" __global__ void matmul_swapped(const float* __restrict__ A,
                                          const float* __restrict__ B,
                                          float* __restrict__ C,
                                          int M, int N, int K)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = acc;
    }
}
