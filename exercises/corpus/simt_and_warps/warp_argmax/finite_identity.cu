// expect: wrong_result
// why: lanes past n start from -1e30f, a "very negative" number that is still larger than elements below -1e30 (and than minus infinity)
#define FULL_MASK 0xffffffffu

extern "C" __global__ void warp_argmax(const float* x, float* wmax, int* warg, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : -1e30f;
    int idx = i < n ? i : 0x7fffffff;
    for (int d = 16; d > 0; d >>= 1) {
        const float ov = __shfl_xor_sync(FULL_MASK, v, d);
        const int oi = __shfl_xor_sync(FULL_MASK, idx, d);
        if (ov > v || (ov == v && oi < idx)) {
            v = ov;
            idx = oi;
        }
    }
    if (threadIdx.x % 32 == 0 && i < n) {
        wmax[i / 32] = v;
        warg[i / 32] = idx;
    }
}
