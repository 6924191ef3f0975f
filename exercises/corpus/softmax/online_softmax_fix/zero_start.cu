// expect: wrong_result
// why: avoids expf(-inf - -inf) by starting the running maximum at 0.0f instead of minus infinity (and treats d == 0 as the masked row): for a row whose logits are all far below 0 every exp(x - 0) underflows, d stays 0 and the row comes out as zeros, as if it were masked
#define NEG_INF __int_as_float(0xff800000)
#define FULL_MASK 0xffffffffu
#define WARPS 8

extern "C" __global__ void online_softmax(const float* x, float* y, int rows, int cols)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int row = blockIdx.x * WARPS + warp;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    float m = 0.0f, d = 0.0f;                        // m never becomes -inf: no -inf - -inf
    for (int c = lane; c < cols; c += 32) {
        const float v = xr[c];
        const float m_new = fmaxf(m, v);
        d = d * expf(m - m_new) + expf(v - m_new);
        m = m_new;
    }
    for (int off = 16; off > 0; off >>= 1) {
        const float m_o = __shfl_xor_sync(FULL_MASK, m, off);
        const float d_o = __shfl_xor_sync(FULL_MASK, d, off);
        const float m_new = fmaxf(m, m_o);
        d = d * expf(m - m_new) + d_o * expf(m_o - m_new);
        m = m_new;
    }
    for (int c = lane; c < cols; c += 32) {
        yr[c] = d == 0.0f ? 0.0f : expf(xr[c] - m) / d;
    }
}
