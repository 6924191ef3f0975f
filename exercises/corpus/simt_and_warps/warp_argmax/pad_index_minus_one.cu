// expect: wrong_result
// why: lanes past n carry (-inf, -1): in a last group whose elements are all minus infinity the padding ties with them and its index -1 wins the tie
#define NEG_INF __int_as_float(0xff800000)
#define FULL_MASK 0xffffffffu

extern "C" __global__ void warp_argmax(const float* x, float* wmax, int* warg, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : NEG_INF;
    int idx = i < n ? i : -1;                        // "no element": but -1 is the smallest index of all
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
