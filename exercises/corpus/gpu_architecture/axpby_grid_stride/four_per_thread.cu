// expect: unwritten
// why: four elements per thread, unrolled, with no loop: right while the grid covers n with four per thread, but the grid stops at 1024 blocks, so past 2^20 elements the last ones are never written
extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    const int stride = gridDim.x * blockDim.x;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int j = i + k * stride;
        if (j < n) out[j] = a * x[j] + b * y[j];
    }
}
