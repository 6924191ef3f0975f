// Vector addition with a grid-stride loop: out[i] = x[i] + y[i].
//
// The grid may be smaller than n. Thread t handles elements t, t + stride,
// t + 2*stride, ... where stride is the total number of threads in the grid.
// On every pass of the loop, the 32 threads of a warp still touch 32
// consecutive floats, so the accesses stay contiguous. Launching
// ceil_div(n, block * k) blocks gives each thread about k elements.
extern "C" __global__ void vector_add_grid_stride(const float* __restrict__ x,
                                                  const float* __restrict__ y,
                                                  float* __restrict__ out,
                                                  int n)
{
    // Index arithmetic in 64 bits: i + stride may pass 2^31 - 1 near the end.
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = x[i] + y[i];
    }
}
