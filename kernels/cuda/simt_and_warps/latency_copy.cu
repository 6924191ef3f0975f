// Copy kernels for the latency-hiding experiment. Launched with one wave of blocks (as many as fit
// on the GPU at once), so the number of warps resident on each SM is fixed for the whole run; the
// caller sets it with the dynamic shared memory each block requests. The kernels never touch that
// shared memory: asking for it is enough to keep other blocks off the SM.

// One load in flight per thread: x and y are not __restrict__, so the compiler cannot move the
// next iteration's load above this iteration's store (they might alias), and each thread waits for
// one load at a time.
extern "C" __global__ void copy_one_in_flight(const float* x, float* y, int n)
{
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = x[i];
}

// Four independent loads in flight per thread: all four are issued before any is needed.
extern "C" __global__ void copy_four_in_flight(const float* __restrict__ x, float* __restrict__ y, int n)
{
    int stride = gridDim.x * blockDim.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        float a = x[i];
        float b = x[i + stride];
        float c = x[i + 2 * stride];
        float d = x[i + 3 * stride];
        y[i] = a;
        y[i + stride] = b;
        y[i + 2 * stride] = c;
        y[i + 3 * stride] = d;
    }
    for (; i < n; i += stride)  // the last, partial round
        y[i] = x[i];
}
