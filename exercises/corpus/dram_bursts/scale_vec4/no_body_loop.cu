// expect: unwritten
// why: one float4 per thread in the body, no grid-stride loop: the grid has at most 1024 blocks of 256 threads, so past about 2^20 elements part of the body is never written
extern "C" __global__ void scale_vec4(const float* x, float* y, float a, int n)
{
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long address = (unsigned long long)x;
    int head = (int)(((16 - (address & 15)) & 15) / 4);
    if (head > n) head = n;
    if (tid < head) y[tid] = a * x[tid];

    const int n4 = (n - head) / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x + head);
    float4* y4 = reinterpret_cast<float4*>(y + head);
    if (tid < n4) {                                  // the grid is sized for four floats per thread
        float4 v = x4[tid];
        v.x *= a; v.y *= a; v.z *= a; v.w *= a;
        y4[tid] = v;
    }

    const int tail = head + 4 * n4;
    if (tid < n - tail) y[tail + tid] = a * x[tail + tid];
}
