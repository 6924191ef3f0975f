// Copy n floats: y[i] = x[i].
//
// The simplest memory-bound kernel: no arithmetic, one 4-byte load and one
// 4-byte store per element, so the minimal traffic is 8 * n bytes. The chapter
// times it on working sets from 1 MB to 1 GB to show where the data really
// comes from (L2 or DRAM) and why a benchmark must say whether L2 was flushed.
//
// Launch with a 1-D grid of ceil_div(n, block) blocks; the last block is
// usually only partly used, hence the bounds check.
extern "C" __global__ void copy_f32(const float* __restrict__ x,
                                    float* __restrict__ y,
                                    int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i];
    }
}
