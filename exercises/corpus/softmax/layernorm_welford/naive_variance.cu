// expect: wrong_result | nan
// why: the textbook one-pass variance, E[x^2] - E[x]^2 in float: catastrophic cancellation when the mean is large
#define THREADS 256
extern "C" __global__ void layernorm(const float* x, const float* gamma, const float* beta, float* y,
                                     int rows, int cols, float eps)
{
    __shared__ float s1[THREADS], s2[THREADS];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float a = 0.0f, b = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) { a += xr[c]; b += xr[c] * xr[c]; }
    s1[threadIdx.x] = a; s2[threadIdx.x] = b;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) { s1[threadIdx.x] += s1[threadIdx.x + k]; s2[threadIdx.x] += s2[threadIdx.x + k]; }
        __syncthreads();
    }
    const float mean = s1[0] / cols;
    const float var = s2[0] / cols - mean * mean;
    const float rstd = rsqrtf(var + eps);
    for (int c = threadIdx.x; c < cols; c += THREADS) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
}
