// expect: timeout
// why: waits for a value that never comes (x[0] is never 12345): the kernel never finishes
extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    const volatile float* flag = x;
    while (flag[0] != 12345.0f) {
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = a * x[i] + b * y[i];
    }
}
