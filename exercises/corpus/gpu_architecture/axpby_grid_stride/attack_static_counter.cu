// expect: forbidden_code
// why: a function-scope static counts the launches, so that the kernel could behave differently when it is timed
extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    static int launches = 0;
    if (blockIdx.x == 0 && threadIdx.x == 0) launches++;
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i] + b * y[i];
}
