// expect: oob_read
// why: the halo is not clamped at the ends of the array: the first block reads x[-3] .. x[-1]
#define RADIUS 3
#define BLOCK 256
extern "C" __global__ void stencil7(const float* x, const float* w, float* y, int n)
{
    extern __shared__ float tile[];
    const int t = threadIdx.x;
    const int base = blockIdx.x * BLOCK - RADIUS;
    for (int j = t; j < BLOCK + 2 * RADIUS; j += BLOCK) {
        tile[j] = x[min(base + j, n - 1)];
    }
    __syncthreads();
    const int i = blockIdx.x * BLOCK + t;
    if (i < n) {
        float acc = 0.0f;
        for (int k = 0; k <= 2 * RADIUS; ++k) acc += w[k] * tile[t + k];
        y[i] = acc;
    }
}
