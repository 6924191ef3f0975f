// expect: forbidden_code
// why: reads the GPU's clock with inline assembly (a kernel could behave differently when timed)
extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = a * x[i] + b * y[i] + (t == 0 ? 1.0f : 0.0f);
    }
}
