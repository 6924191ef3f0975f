// expect: crash
// why: an index computed in 64 bits and far outside every allocation: an illegal address on a GPU
extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    const long long far = 1LL << 40;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i + far] = a * x[i] + b * y[i];
    }
}
