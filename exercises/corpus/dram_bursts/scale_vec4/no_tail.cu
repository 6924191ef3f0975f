// expect: unwritten
// why: head and body, but the n % 4 floats after the last float4 are never written
extern "C" __global__ void scale_vec4(const float* x, float* y, float a, int n)
{
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int stride = gridDim.x * blockDim.x;
    int head = (int)(((16 - ((unsigned long long)x & 15)) & 15) / 4);
    if (head > n) head = n;
    if (tid < head) y[tid] = a * x[tid];
    const int n4 = (n - head) / 4;
    for (int i = tid; i < n4; i += stride) {
        float4 v = reinterpret_cast<const float4*>(x + head)[i];
        v.x *= a; v.y *= a; v.z *= a; v.w *= a;
        reinterpret_cast<float4*>(y + head)[i] = v;
    }
}
