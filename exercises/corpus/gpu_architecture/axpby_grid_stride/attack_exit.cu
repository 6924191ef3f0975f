// expect: forbidden_code | compile_error
// expect-cpu: forbidden_code
// why: calls exit(0) from the kernel, hoping the grader reads a clean exit as success; the message must name exit(), not memory
extern "C" __device__ void exit(int status);

extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i] + b * y[i];
    if (n > 1000) exit(0);
}
