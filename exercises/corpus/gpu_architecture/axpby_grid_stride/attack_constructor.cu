// expect: compile_error
// expect-cpu: compile_error | forbidden_code
// why: a constant object whose constructor would run when the CPU backend loads the library, before any kernel and outside the kernel's sandbox
struct Boot {
    int v;
    __host__ __device__ Boot() { v = ((unsigned long long)this % 7 == 3) ? 2 : 1; }
};
__constant__ Boot boot;

extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = (boot.v > 0) * (a * x[i] + b * y[i]);
}
