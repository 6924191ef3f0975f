// Two ways to read an array badly, next to the way to read it well.
//
// copy_strided: y[i] = x[i * stride]. Lane k of a warp reads the float at byte
//   offset 4 * stride * k from the warp's first address, so one warp-wide load
//   touches min(32, 4 * stride) 32-byte sectors (stride >= 1) instead of 4.
//   stride = 1 is a plain copy; stride = 0 makes every lane read the same float
//   (a broadcast: one sector). The writes stay contiguous.
// copy_offset:  y[i] = x[i + offset]. Every warp reads 128 contiguous bytes that
//   start `offset` floats past a 128-byte boundary: 5 sectors instead of 4 when
//   the offset is not a multiple of 8 floats (32 bytes).
//
// Both use a grid-stride loop, so a grid smaller than n / blockDim gives each
// thread several elements while every pass of a warp still covers 32
// consecutive i. x must hold at least (n - 1) * stride + 1 (or n + offset) floats.
extern "C" __global__ void copy_strided(const float* __restrict__ x,
                                        float* __restrict__ y,
                                        int n, int stride)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = x[(long long)i * stride];   // 64-bit index: i * stride may exceed 2^31
    }
}

extern "C" __global__ void copy_offset(const float* __restrict__ x,
                                       float* __restrict__ y,
                                       int n, int offset)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = x[i + offset];
    }
}
