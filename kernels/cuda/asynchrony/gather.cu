// y[i] = x[idx[i]]: a gather that trusts its index array.
//
// With indices in [0, len(x)) it is correct. It does not check them, so one bad index makes
// a thread read far outside x. The GPU notices the illegal address while the kernel runs,
// long after the launch call returned to the host; the chapter uses this (in a separate
// process) to show how such an error surfaces later and poisons the CUDA context.
extern "C" __global__ void gather(const float* __restrict__ x,
                                  const long long* __restrict__ idx,
                                  float* __restrict__ y,
                                  int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[idx[i]];
    }
}
