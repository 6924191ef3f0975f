// expect: wrong_result
// why: each thread adds exactly eight elements (two int4), no grid-stride loop: the grid stops at 1024 blocks, so past 2^21 elements the last ones are never added
#define FULL_MASK 0xffffffffu

extern "C" __global__ void sum_partials(const int* x, int n, long long* partial)
{
    __shared__ long long warp_totals[32];
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int stride = gridDim.x * blockDim.x;
    const int n4 = n / 4;
    const int4* x4 = reinterpret_cast<const int4*>(x);
    long long v = 0;
    for (int k = 0; k < 2; ++k) {                    // the grid is sized for 8 elements per thread
        const int i = tid + k * stride;
        if (i < n4) {
            const int4 p = x4[i];
            v += (long long)p.x + p.y + (long long)p.z + p.w;
        }
    }
    if (tid < n - 4 * n4) v += x[4 * n4 + tid];
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(FULL_MASK, v, d);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? warp_totals[lane] : 0;
        for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(FULL_MASK, v, d);
        if (lane == 0) partial[blockIdx.x] = v;
    }
}
