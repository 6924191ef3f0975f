// LayerNorm of each row of a rows x cols float matrix (row-major):
//   y_j = (x_j - mean) / sqrt(var + eps) * gamma_j + beta_j,
// with var the biased variance (the mean of (x - mean)^2, as torch.nn.LayerNorm uses). The same
// row-reduction pattern as softmax, with another state: Welford's (count, mean, M2), where M2 is
// the sum of squared deviations from the mean. One block per row (grid = rows, blockDim.x a
// multiple of 32): each thread runs Welford's recurrence over its elements, Chan's rule merges
// the states across lanes and warps, and a second pass writes y.
//
// Why not var = E[x^2] - E[x]^2: when |mean| is much larger than the standard deviation the two
// terms are nearly equal and their float difference loses most of its digits (it can even be
// negative). Welford's recurrence and Chan's merge work with deviations from the mean instead.
#include "softmax/softmax_common.cuh"

struct Welford {
    float n;      // elements seen
    float mean;   // their mean
    float m2;     // sum of (x - mean)^2 over them
};

__device__ __forceinline__ void welford_add(Welford& w, float x)
{
    w.n += 1.0f;
    const float delta = x - w.mean;
    w.mean += delta / w.n;
    w.m2 += delta * (x - w.mean);               // old deviation times new deviation
}

// Chan, Golub and LeVeque: the state of the union of two disjoint sets.
__device__ __forceinline__ Welford welford_merge(Welford a, Welford b)
{
    if (b.n == 0.0f) return a;
    if (a.n == 0.0f) return b;
    Welford r;
    r.n = a.n + b.n;
    const float delta = b.mean - a.mean;
    const float b_share = b.n / r.n;
    r.mean = a.mean + delta * b_share;
    r.m2 = a.m2 + b.m2 + delta * delta * a.n * b_share;
    return r;
}

// Tree over the lanes with __shfl_down_sync (lane 0 ends with all 32), then lane 0's state is
// broadcast, so every lane holds the very same state.
__device__ __forceinline__ Welford warp_welford(Welford w)
{
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
        Welford other;
        other.n = __shfl_down_sync(FULL_MASK, w.n, o);
        other.mean = __shfl_down_sync(FULL_MASK, w.mean, o);
        other.m2 = __shfl_down_sync(FULL_MASK, w.m2, o);
        w = welford_merge(w, other);             // lanes >= 32 - o merge junk nobody reads
    }
    w.n = __shfl_sync(FULL_MASK, w.n, 0);
    w.mean = __shfl_sync(FULL_MASK, w.mean, 0);
    w.m2 = __shfl_sync(FULL_MASK, w.m2, 0);
    return w;
}

__device__ __forceinline__ Welford block_welford(Welford w)
{
    __shared__ Welford per_warp[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    w = warp_welford(w);
    if (lane == 0) per_warp[warp] = w;
    __syncthreads();
    Welford mine = {0.0f, 0.0f, 0.0f};
    if (lane < (int)(blockDim.x >> 5)) mine = per_warp[lane];
    mine = warp_welford(mine);                   // every warp merges the same states in the same order
    __syncthreads();                             // all reads of per_warp done before a next call writes it
    return mine;
}

extern "C" __global__ void layernorm_welford(const float* __restrict__ x, const float* __restrict__ gamma,
                                             const float* __restrict__ beta, float* __restrict__ y,
                                             int cols, float eps)
{
    const long long offset = (long long)blockIdx.x * cols;
    const float* row = x + offset;
    float* out = y + offset;
    const bool packed = ((((unsigned long long)x | (unsigned long long)y | (unsigned long long)gamma |
                           (unsigned long long)beta) & 15) == 0) && cols % 4 == 0;
    const int packs = cols / 4;

    Welford w = {0.0f, 0.0f, 0.0f};
    if (packed) {
        for (int p = threadIdx.x; p < packs; p += blockDim.x) {
            float v[4];
            load16(row + 4 * p, v);
#pragma unroll
            for (int i = 0; i < 4; ++i) welford_add(w, v[i]);
        }
    } else {
        for (int j = threadIdx.x; j < cols; j += blockDim.x) welford_add(w, row[j]);
    }
    w = block_welford(w);
    const float mean = w.mean;
    const float rstd = rsqrtf(w.m2 / w.n + eps);  // w.n == cols

    if (packed) {
        for (int p = threadIdx.x; p < packs; p += blockDim.x) {
            float v[4], g[4], b[4];
            load16(row + 4 * p, v);
            load16(gamma + 4 * p, g);
            load16(beta + 4 * p, b);
#pragma unroll
            for (int i = 0; i < 4; ++i) v[i] = (v[i] - mean) * rstd * g[i] + b[i];
            store16(out + 4 * p, v);
        }
    } else {
        for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = (row[j] - mean) * rstd * gamma[j] + beta[j];
    }
}
