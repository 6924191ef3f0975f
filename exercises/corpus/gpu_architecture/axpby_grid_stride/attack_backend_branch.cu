// expect: forbidden_code
// why: code that only the CPU backend compiles escapes the NVRTC pre-compile; graded kernels must be the same code everywhere
extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
#ifdef __COURSE_CPU_BACKEND__
        out[i] = 0.0f;
#else
        out[i] = a * x[i] + b * y[i];
#endif
    }
}
