// Vector addition, one element per thread: out[i] = x[i] + y[i].
//
// Launch with a 1-D grid of ceil_div(n, block) blocks of `block` threads.
// Each thread computes its global index from the block it belongs to and its
// position inside that block; threads whose index falls past the end of the
// arrays (the last block is usually only partly full) do nothing.
extern "C" __global__ void vector_add(const float* __restrict__ x,
                                      const float* __restrict__ y,
                                      float* __restrict__ out,
                                      int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // global thread index, x fastest
    if (i < n) {                                   // bounds check: n need not divide evenly
        out[i] = x[i] + y[i];
    }
}
