// Variance of a sliding window of 64 elements, computed in two passes:
//
//     mean_i = (1/64) sum_{m<64} x[(i + m) % n]
//     y[i]   = (1/64) sum_{m<64} (x[(i + m) % n] - mean_i)^2
//
// The two-pass form is the numerically careful one, and it is also a register
// hog: all 64 inputs must stay alive from the first pass to the second, so the
// compiler wants about 64 registers for them plus a few for indices and sums.
// All array indices are compile-time constants after unrolling, so v[] lives in
// registers, as long as there are enough of them.
//
// window_variance is compiled with no limit. window_variance_bounded promises,
// through __launch_bounds__(256, 4), that it will be launched with at most 256
// threads per block and asks for at least 4 resident blocks per SM. 4 x 256 =
// 1024 threads must then share the SM's 65536 registers, so the compiler caps
// each thread at 64 registers and *spills* what does not fit to local memory.
// The compiler's report shows "bytes spill stores" and "bytes spill loads".
//
// Launch either with a 1-D grid of ceil_div(n, block) blocks, block <= 256 for
// the bounded kernel (a larger block makes the launch fail).
#define WIN 64

__device__ __forceinline__ float window_variance_at(const float* __restrict__ x, int n, int i)
{
    float v[WIN];
    float sum = 0.0f;
    #pragma unroll
    for (int m = 0; m < WIN; ++m) {
        int src = i + m;
        if (src >= n) src -= n;          // wrap around (n >= WIN assumed)
        v[m] = x[src];
        sum += v[m];
    }
    float mean = sum * (1.0f / WIN);
    float sq = 0.0f;
    #pragma unroll
    for (int m = 0; m < WIN; ++m) {
        float d = v[m] - mean;
        sq = fmaf(d, d, sq);
    }
    return sq * (1.0f / WIN);
}

extern "C" __global__ void window_variance(const float* __restrict__ x,
                                           float* __restrict__ y,
                                           int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = window_variance_at(x, n, i);
}

extern "C" __global__ void __launch_bounds__(256, 4)
window_variance_bounded(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = window_variance_at(x, n, i);
}
