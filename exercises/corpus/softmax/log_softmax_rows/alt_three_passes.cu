// expect: passed | too_slow
// expect-cpu: passed
// why: a valid alternative: three passes (max, sum, output) with shared-memory trees
#define NEG_INF __int_as_float(0xff800000)
#define THREADS 256
extern "C" __global__ void log_softmax_rows(const float* x, float* y, int rows, int cols)
{
    __shared__ float s[THREADS];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = NEG_INF;
    for (int c = threadIdx.x; c < cols; c += THREADS) m = fmaxf(m, xr[c]);
    s[threadIdx.x] = m;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + k]);
        __syncthreads();
    }
    m = s[0];
    __syncthreads();
    if (m == NEG_INF) {
        for (int c = threadIdx.x; c < cols; c += THREADS) yr[c] = NEG_INF;
        return;
    }
    float d = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) d += expf(xr[c] - m);
    s[threadIdx.x] = d;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    const float lse = logf(s[0]);
    for (int c = threadIdx.x; c < cols; c += THREADS) yr[c] = (xr[c] - m) - lse;
}
