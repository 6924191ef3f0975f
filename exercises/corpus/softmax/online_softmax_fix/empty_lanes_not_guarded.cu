// expect: nan
// why: the rescale of the merge is fixed, but lanes with no element still compute expf(-inf - -inf) = NaN
#define NEG_INF __int_as_float(0xff800000)
extern "C" __global__ void online_softmax(const float* x, float* y, int rows, int cols)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int row = blockIdx.x * 8 + warp;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    float m = NEG_INF, d = 0.0f;
    for (int c = lane; c < cols; c += 32) {
        const float v = xr[c], mn = fmaxf(m, v);
        d = d * expf(m - mn) + expf(v - mn);
        m = mn;
    }
    for (int off = 16; off > 0; off >>= 1) {
        const float mo = __shfl_xor_sync(0xffffffffu, m, off), dd = __shfl_xor_sync(0xffffffffu, d, off);
        const float mn = fmaxf(m, mo);
        d = d * expf(m - mn) + dd * expf(mo - mn);
        m = mn;
    }
    for (int c = lane; c < cols; c += 32) yr[c] = expf(xr[c] - m) / d;
}
