// expect: input_modified
// why: correct output, but the kernel reuses x as scratch space (casting away const)
extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    float* scratch = const_cast<float*>(x);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float v = a * x[i] + b * y[i];
        scratch[i] = v;
        out[i] = v;
    }
}
