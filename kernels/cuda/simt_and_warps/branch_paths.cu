// Divergence: the same arithmetic, with threads sent down one of four code paths.
//
// Every thread runs `work` steps of a dependent recurrence v = v * a + b on its element. The four
// paths use different constants (a, b), so they are four different loops in the machine code, and
// `pattern` decides which path each thread takes:
//   0  uniform         every thread takes path 0
//   1  per warp        warp w takes path w % 2          (threadIdx.x / 32) % 2
//   2  per warp, 4     warp w takes path w % 4          (threadIdx.x / 32) % 4
//   3  every other     lane l takes path l % 2          threadIdx.x % 2
//   4  lane % 4        lane l takes path l % 4          threadIdx.x % 4
//   5  data            path 0 if x[i] > 0, else path 1  (depends on the input)
// Patterns 0-2 never split a warp; patterns 3-5 split (almost) every warp.
// Assumes blockDim.x is a multiple of 32, so that threadIdx.x / 32 is the warp inside the block.

__device__ int choose_path(int pattern, float v)
{
    int t = threadIdx.x;
    switch (pattern) {
        case 1: return (t / 32) % 2;
        case 2: return (t / 32) % 4;
        case 3: return t % 2;
        case 4: return t % 4;
        case 5: return v > 0.0f ? 0 : 1;
        default: return 0;
    }
}

extern "C" __global__ void branch_paths(const float* x, float* y, int n, int pattern, int work)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    int path = choose_path(pattern, v);
    if (path == 0) {
        for (int k = 0; k < work; ++k) v = v * 0.75f + 0.25f;
    } else if (path == 1) {
        for (int k = 0; k < work; ++k) v = v * 0.5f - 0.125f;
    } else if (path == 2) {
        for (int k = 0; k < work; ++k) v = v * -0.625f + 0.5f;
    } else {
        for (int k = 0; k < work; ++k) v = v * 0.875f - 0.375f;
    }
    y[i] = v;
}
