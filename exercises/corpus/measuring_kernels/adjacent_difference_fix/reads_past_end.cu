// expect: oob_read
// why: writes only what it should, but every difference also depends on x[n], one past the end
extern "C" __global__ void adjacent_difference(const float* x, float* d, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - 1) {
        d[i] = x[i + 1] - x[i] + 0.0f * x[n];
    }
}
