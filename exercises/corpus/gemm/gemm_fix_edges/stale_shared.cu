// expect: wrong_result | nan | race
// why: the store is guarded now, but skipped loads still leave stale values in the shared tiles
// (never-written shared memory may hold anything, NaN included, and may differ from run to run, which the
// grader's second run reports as a race)
#define TILE 16
extern "C" __global__ void sgemm_tiled16(const float* A, const float* B, float* C, int M, int N, int K)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        if (row < M && k0 + tx < K) As[ty][tx] = A[(long long)row * K + k0 + tx];
        if (k0 + ty < K && col < N) Bs[ty][tx] = B[(long long)(k0 + ty) * N + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(long long)row * N + col] = acc;
}
