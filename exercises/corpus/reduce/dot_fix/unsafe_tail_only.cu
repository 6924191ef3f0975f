// expect: race | wrong_result
// expect-cpu: race
// why: the accumulator and the loop are fixed, but the last warp still reduces without __syncwarp()
extern "C" __global__ void dot_partials(const float* x, const float* y, int n, float* partial)
{
    __shared__ float sm[256];
    const int tid = threadIdx.x;
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += gridDim.x * blockDim.x) acc += x[i] * y[i];
    sm[tid] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s) sm[tid] += sm[tid + s];
        __syncthreads();
    }
    if (tid < 32) {
        sm[tid] += sm[tid + 32];
        sm[tid] += sm[tid + 16];
        sm[tid] += sm[tid + 8];
        sm[tid] += sm[tid + 4];
        sm[tid] += sm[tid + 2];
        sm[tid] += sm[tid + 1];
    }
    if (tid == 0) partial[blockIdx.x] = sm[0];
}
