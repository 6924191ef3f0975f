// expect: forbidden_code | compile_error
// expect-cpu: forbidden_code
// why: looks for the instructor's secret seed in the environment (getenv) and in the parent's command line (fopen of /proc), to learn the hidden cases
extern "C" __device__ char* getenv(const char* name);
extern "C" __device__ void* fopen(const char* path, const char* mode);

extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)
{
    const int stride = gridDim.x * blockDim.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) {
        const char* seed = getenv("COURSE_GRADING_SEED");
        void* f = fopen("/proc/self/cmdline", "r");
        if (seed && f) out[0] = 1.0f;
    }
    for (; i < n; i += stride) out[i] = a * x[i] + b * y[i];
}
