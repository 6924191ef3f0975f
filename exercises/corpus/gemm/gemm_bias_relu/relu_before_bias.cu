// expect: wrong_result
// why: the epilogue in the wrong order: max(0, acc) + bias lets negative biases through
#define BLOCK_M 16
#define BLOCK_N 16
#define THREADS 256
extern "C" __global__ void sgemm_bias_relu(const float* A, const float* B, const float* bias, float* C,
                                           int M, int N, int K)
{
    __shared__ float As[16][16];
    __shared__ float Bs[16][16];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(long long)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(long long)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(long long)row * N + col] = fmaxf(acc, 0.0f) + bias[col];
}
