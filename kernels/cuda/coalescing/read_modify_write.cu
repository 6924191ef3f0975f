// Add 1 to n floats of a, in place, at an offset or with a stride. Both the load and the store of
// every thread follow the pattern, unlike access_patterns.cu, whose writes stay contiguous.
//
// add_one_offset:  a[i + offset] += 1 for i < n. a holds at least n + offset floats.
// add_one_strided: a[i * stride] += 1 for i < n. a holds at least (n - 1) * stride + 1 floats.
//
// Elements that the pattern skips are left as they are. A grid-stride loop, as in
// access_patterns.cu.
extern "C" __global__ void add_one_offset(float* a, int n, int offset)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        a[i + offset] += 1.0f;
    }
}

extern "C" __global__ void add_one_strided(float* a, int n, int stride)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        a[(long long)i * stride] += 1.0f;   // 64-bit index: i * stride may exceed 2^31
    }
}
