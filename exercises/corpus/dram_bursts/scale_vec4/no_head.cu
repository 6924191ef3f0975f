// expect: crash
// why: float4 accesses from a pointer that is not 16-byte aligned (the head is missing): misaligned address
extern "C" __global__ void scale_vec4(const float* x, float* y, float a, int n)
{
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int stride = gridDim.x * blockDim.x;
    const int n4 = n / 4;
    for (int i = tid; i < n4; i += stride) {
        float4 v = reinterpret_cast<const float4*>(x)[i];
        v.x *= a; v.y *= a; v.z *= a; v.w *= a;
        reinterpret_cast<float4*>(y)[i] = v;
    }
    if (tid < n - 4 * n4) y[4 * n4 + tid] = a * x[4 * n4 + tid];
}
