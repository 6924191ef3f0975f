// expect: passed | too_slow
// expect-cpu: passed
// why: a valid alternative: the mean first, then the sum of squared deviations (two passes over the row)
#define THREADS 256
__device__ float block_sum(float v, float* s)
{
    __syncthreads();
    s[threadIdx.x] = v;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    return s[0];
}
extern "C" __global__ void layernorm(const float* x, const float* gamma, const float* beta, float* y,
                                     int rows, int cols, float eps)
{
    __shared__ float s[THREADS];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float a = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) a += xr[c];
    const float mean = block_sum(a, s) / cols;
    float b = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) { const float d = xr[c] - mean; b += d * d; }
    const float rstd = rsqrtf(block_sum(b, s) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += THREADS) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
}
