// expect: nan
// why: the running maximum starts at 0.0f instead of minus infinity (the masked rows are caught by d == 0 instead): for a row whose logits are all far below 0, every exp(x - 0) underflows, d is 0 and the row comes out as minus infinity
#define NEG_INF __int_as_float(0xff800000)
#define FULL_MASK 0xffffffffu
#define THREADS 256

__device__ float rescale(float a, float b)
{
    return a == NEG_INF ? 0.0f : expf(a - b);
}

__device__ void merge(float& m, float& d, float mo, float do_)
{
    const float mn = fmaxf(m, mo);
    d = d * rescale(m, mn) + do_ * rescale(mo, mn);
    m = mn;
}

extern "C" __global__ void log_softmax_rows(const float* x, float* y, int rows, int cols)
{
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    __shared__ float warp_m[THREADS / 32], warp_d[THREADS / 32];
    float m = 0.0f, d = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) merge(m, d, xr[c], 1.0f);
    for (int o = 16; o > 0; o >>= 1) {
        const float mo = __shfl_xor_sync(FULL_MASK, m, o), d_o = __shfl_xor_sync(FULL_MASK, d, o);
        merge(m, d, mo, d_o);
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) { warp_m[warp] = m; warp_d[warp] = d; }
    __syncthreads();
    m = lane < THREADS / 32 ? warp_m[lane] : 0.0f;
    d = lane < THREADS / 32 ? warp_d[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
        const float mo = __shfl_xor_sync(FULL_MASK, m, o), d_o = __shfl_xor_sync(FULL_MASK, d, o);
        merge(m, d, mo, d_o);
    }
    const bool empty = d == 0.0f;                    // nothing but minus infinity in the row
    const float lse = empty ? 0.0f : logf(d);
    for (int c = threadIdx.x; c < cols; c += THREADS) yr[c] = empty ? NEG_INF : (xr[c] - m) - lse;
}
