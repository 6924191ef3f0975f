// expect: wrong_result
// why: the float scan of ints: the per-thread value is an int, but the warp totals still go through float
extern "C" __global__ void block_inclusive_scan(const int* x, int* y, int* block_sums, int n)
{
    __shared__ float warp_totals[8];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int v = i < n ? x[i] : 0;
    for (int d = 1; d < 32; d *= 2) {
        const int u = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += u;
    }
    if (lane == 31) warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < 8 ? warp_totals[lane] : 0;
        for (int d = 1; d < 32; d *= 2) {
            const float u = __shfl_up_sync(0xffffffffu, t, d);
            if (lane >= d) t += u;
        }
        if (lane < 8) warp_totals[lane] = t;
    }
    __syncthreads();
    if (warp > 0) v += warp_totals[warp - 1];
    if (i < n) y[i] = v;
    if (threadIdx.x == blockDim.x - 1) block_sums[blockIdx.x] = v;
}
