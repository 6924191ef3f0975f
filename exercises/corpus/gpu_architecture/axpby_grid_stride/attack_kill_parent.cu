// expect: forbidden_code | compile_error
// expect-cpu: forbidden_code
// why: kills the process that started it (the grader in the old design), so that a forged report would be read
extern "C" __device__ int kill(int pid, int sig);
extern "C" __device__ int getppid(void);

extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i] + b * y[i];
    if (blockIdx.x == 0 && threadIdx.x == 0) kill(getppid(), 9);
}
