// expect: race | wrong_result | nan
// expect-cpu: race
// why: no __syncthreads() between filling the tile and reading the neighbours' slots; the CPU
// backend's race check finds the write and the read of one slot by two threads with no barrier between
#define RADIUS 3
#define BLOCK 256
extern "C" __global__ void stencil7(const float* x, const float* w, float* y, int n)
{
    extern __shared__ float tile[];
    const int t = threadIdx.x;
    const int base = blockIdx.x * BLOCK - RADIUS;
    for (int j = t; j < BLOCK + 2 * RADIUS; j += BLOCK) {
        tile[j] = x[min(max(base + j, 0), n - 1)];
    }
    const int i = blockIdx.x * BLOCK + t;
    if (i < n) {
        float acc = 0.0f;
        for (int k = 0; k <= 2 * RADIUS; ++k) acc += w[k] * tile[t + k];
        y[i] = acc;
    }
}
