// expect: wrong_result
// why: integer overflow: the running sums are 32-bit ints, which wrap around past 2^31
extern "C" __global__ void sum_partials(const int* x, int n, long long* partial)
{
    __shared__ int buf[256];
    int s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    buf[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) buf[threadIdx.x] += buf[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = buf[0];
}
