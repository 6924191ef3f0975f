// expect: wrong_result
// why: every declaration is an int now, but `i < n ? x[i] : 0.0f` has type float: each element goes through a float on the way in, so values above 2^24 are rounded before the scan starts
#define FULL_MASK 0xffffffffu

extern "C" __global__ void block_inclusive_scan(const int* x, int* y, int* block_sums, int n)
{
    __shared__ int warp_totals[8];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int v = i < n ? x[i] : 0.0f;
    for (int d = 1; d < 32; d *= 2) {
        const int u = __shfl_up_sync(FULL_MASK, v, d);
        if (lane >= d) v += u;
    }
    if (lane == 31) warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int t = lane < 8 ? warp_totals[lane] : 0;
        for (int d = 1; d < 32; d *= 2) {
            const int u = __shfl_up_sync(FULL_MASK, t, d);
            if (lane >= d) t += u;
        }
        if (lane < 8) warp_totals[lane] = t;
    }
    __syncthreads();
    if (warp > 0) v += warp_totals[warp - 1];
    if (i < n) y[i] = v;
    if (threadIdx.x == blockDim.x - 1) block_sums[blockIdx.x] = v;
}
