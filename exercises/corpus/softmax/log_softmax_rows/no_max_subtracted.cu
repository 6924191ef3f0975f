// expect: nan | wrong_result
// why: the maximum is not subtracted: expf overflows for logits near 10^4, the log is infinite
#define THREADS 256
extern "C" __global__ void log_softmax_rows(const float* x, float* y, int rows, int cols)
{
    __shared__ float scratch[THREADS];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += expf(xr[c]);
    scratch[threadIdx.x] = s;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) scratch[threadIdx.x] += scratch[threadIdx.x + k];
        __syncthreads();
    }
    const float lse = logf(scratch[0]);
    for (int c = threadIdx.x; c < cols; c += THREADS) yr[c] = xr[c] - lse;
}
