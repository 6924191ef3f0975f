// expect: passed
// why: a valid alternative without shared memory: seven clamped global reads per thread
extern "C" __global__ void stencil7(const float* x, const float* w, float* y, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (int k = -3; k <= 3; ++k) acc += w[k + 3] * x[min(max(i + k, 0), n - 1)];
    y[i] = acc;
}
