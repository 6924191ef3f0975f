// Two ways to write the same weighted window sum, to see where a per-thread
// array lives. For each i (indices taken modulo n, weights cycling with shift s):
//
//     y[i] = sum_{m=0}^{15} x[(i + m) % n] * (((m - s) mod 16) + 1)
//
// Both kernels first copy the 16 inputs into a per-thread array v[16].
//
// window_dynamic reads v[(j + s) & 15]: the index depends on the run-time
// value s, so the compiler cannot map each v[...] to a fixed register.
// Registers cannot be indexed at run time, so v goes to *local memory*: a
// per-thread stack frame in device memory (cached in L1 and L2). The compiler's
// resource report shows it as "bytes stack frame".
//
// window_static computes the same sum but reads v[m] with m a loop counter of
// a fully unrolled loop: every index is a compile-time constant, so each v[m]
// is a register and the weight is computed with integer arithmetic instead.
//
// Launch either with a 1-D grid of ceil_div(n, block) blocks.
#define WINDOW 16

extern "C" __global__ void window_dynamic(const float* __restrict__ x,
                                          float* __restrict__ y,
                                          int n, int s)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v[WINDOW];
    #pragma unroll
    for (int m = 0; m < WINDOW; ++m) {
        int src = i + m;
        if (src >= n) src -= n;          // wrap around (n >= WINDOW assumed)
        v[m] = x[src];
    }
    float acc = 0.0f;
    #pragma unroll
    for (int j = 0; j < WINDOW; ++j) {
        // m = (j + s) mod 16 has weight ((m - s) mod 16) + 1 = j + 1.
        acc += v[(j + s) & (WINDOW - 1)] * (float)(j + 1);
    }
    y[i] = acc;
}

extern "C" __global__ void window_static(const float* __restrict__ x,
                                         float* __restrict__ y,
                                         int n, int s)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v[WINDOW];
    #pragma unroll
    for (int m = 0; m < WINDOW; ++m) {
        int src = i + m;
        if (src >= n) src -= n;
        v[m] = x[src];
    }
    float acc = 0.0f;
    #pragma unroll
    for (int m = 0; m < WINDOW; ++m) {
        // Same terms as above, visited in a different order: v[m] with m a
        // compile-time constant, and the weight computed from m and s.
        acc += v[m] * (float)(((m - s) & (WINDOW - 1)) + 1);
    }
    y[i] = acc;
}
