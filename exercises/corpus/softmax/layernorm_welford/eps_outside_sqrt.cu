// expect: wrong_result
// why: divides by sqrt(var) + eps instead of sqrt(var + eps): invisible when the variance is near 1 or exactly 0, wrong for rows whose variance is comparable to eps
#define FULL_MASK 0xffffffffu
#define THREADS 256
#define ITEMS 16

struct Stats { float n, mean, m2; };

__device__ Stats merge(Stats a, Stats b)
{
    const float n = a.n + b.n;
    if (n == 0.0f) return a;
    const float delta = b.mean - a.mean;
    const float fb = b.n / n;
    Stats r;
    r.n = n;
    r.mean = a.mean + delta * fb;
    r.m2 = a.m2 + b.m2 + delta * delta * a.n * fb;
    return r;
}

__device__ Stats warp_merge(Stats s)
{
    for (int d = 16; d > 0; d >>= 1) {
        Stats o;
        o.n = __shfl_xor_sync(FULL_MASK, s.n, d);
        o.mean = __shfl_xor_sync(FULL_MASK, s.mean, d);
        o.m2 = __shfl_xor_sync(FULL_MASK, s.m2, d);
        s = merge(s, o);
    }
    return s;
}

extern "C" __global__ void layernorm(const float* x, const float* gamma, const float* beta, float* y,
                                     int rows, int cols, float eps)
{
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    __shared__ Stats warp_stats[THREADS / 32];
    float v[ITEMS];
    Stats s = {0.0f, 0.0f, 0.0f};
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int c = threadIdx.x + k * THREADS;
        v[k] = c < cols ? xr[c] : 0.0f;
    }
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int c = threadIdx.x + k * THREADS;
        if (c < cols) {
            s.n += 1.0f;
            const float delta = v[k] - s.mean;
            s.mean += delta / s.n;
            s.m2 += delta * (v[k] - s.mean);
        }
    }
    s = warp_merge(s);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) warp_stats[warp] = s;
    __syncthreads();
    Stats t = lane < THREADS / 32 ? warp_stats[lane] : Stats{0.0f, 0.0f, 0.0f};
    t = warp_merge(t);
    const float mean = t.mean, inv = 1.0f / (sqrtf(t.m2 / (float)cols) + eps);
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int c = threadIdx.x + k * THREADS;
        if (c < cols) yr[c] = (v[k] - mean) * inv * gamma[c] + beta[c];
    }
}
