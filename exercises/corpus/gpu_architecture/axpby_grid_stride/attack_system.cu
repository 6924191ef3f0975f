// expect: forbidden_code | compile_error
// expect-cpu: forbidden_code
// why: declares the C library's system() as a device function and calls it to write a file outside the grading folder; on the CPU backend a kernel is native code, so only the grader's checks stand in the way
extern "C" __device__ int system(const char* command);

extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    const int stride = gridDim.x * blockDim.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) system("touch /tmp/course-grader-escaped");
    for (; i < n; i += stride) out[i] = a * x[i] + b * y[i];
}
