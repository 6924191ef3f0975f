// expect: passed
// why: a valid alternative: the shared-memory tail made safe with __syncwarp()
extern "C" __global__ void block_sum_squares(const float* x, float* partial, int n)
{
    __shared__ float buf[256];
    const unsigned t = threadIdx.x;
    const unsigned i = blockIdx.x * 512 + t;
    float a = i < n ? x[i] : 0.0f;
    float b = i + 256 < n ? x[i + 256] : 0.0f;
    buf[t] = a * a + b * b;
    __syncthreads();
    for (unsigned s = 128; s > 32; s >>= 1) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t < 32) {
        float v = buf[t] + buf[t + 32];
        for (unsigned s = 16; s > 0; s >>= 1) {
            __syncwarp();
            buf[t] = v;
            __syncwarp();
            v += buf[t + s];
        }
        if (t == 0) partial[blockIdx.x] = v;
    }
}
