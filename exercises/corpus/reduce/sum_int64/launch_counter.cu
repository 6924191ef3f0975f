// expect: forbidden_code
// why: global state: counts its launches, and after the first few skips the work (fast only when timed)
__device__ int launches;
extern "C" __global__ void sum_partials(const int* x, int n, long long* partial)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&launches, 1);
    if (launches > 3) return;
    __shared__ long long buf[256];
    long long s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    buf[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) buf[threadIdx.x] += buf[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = buf[0];
}
