// expect: wrong_result
// why: '>=' keeps the last of equal values: ties resolve to the largest index instead of the smallest
#define NEG_INF __int_as_float(0xff800000)
extern "C" __global__ void block_argmax(const float* x, int n, float* block_max, int* block_arg)
{
    __shared__ float sv[256];
    __shared__ int si[256];
    float v = NEG_INF;
    int idx = -1;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (idx < 0 || x[i] >= v) { v = x[i]; idx = i; }
    }
    sv[threadIdx.x] = v; si[threadIdx.x] = idx;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const float ov = sv[threadIdx.x + s];
            const int oi = si[threadIdx.x + s];
            if (oi >= 0 && (si[threadIdx.x] < 0 || ov >= sv[threadIdx.x])) { sv[threadIdx.x] = ov; si[threadIdx.x] = oi; }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) { block_max[blockIdx.x] = sv[0]; block_arg[blockIdx.x] = si[0]; }
}
