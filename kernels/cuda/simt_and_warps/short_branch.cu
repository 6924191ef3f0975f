// A branch so short that the compiler does not branch at all: both outcomes are a single
// instruction, so it computes the condition into a predicate and selects (or predicates) the
// result. Compare the PTX/SASS of the two kernels: the same if/else, with a long loop in
// `long_branch`, which needs real branch instructions.

extern "C" __global__ void short_branch(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if (v < 0.0f) {
        v = -0.5f * v;
    } else {
        v = v + 1.0f;
    }
    y[i] = v;
}

extern "C" __global__ void long_branch(const float* x, float* y, int n, int work)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    if (v < 0.0f) {
        for (int k = 0; k < work; ++k) v = v * 0.75f + 0.25f;
    } else {
        for (int k = 0; k < work; ++k) v = v * 0.5f - 0.125f;
    }
    y[i] = v;
}
