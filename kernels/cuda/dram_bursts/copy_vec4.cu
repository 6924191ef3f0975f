// Copy n floats with 16-byte vector loads and stores (float4), plus a scalar
// tail for the last n % 4 floats.
//
// reinterpret_cast lets a thread move four floats with one 16-byte load
// (LDG.E.128) and one 16-byte store: a quarter of the instructions of a
// scalar copy. The price is alignment: a float4 access must be at an address
// that is a multiple of 16 bytes. Arrays from cudaMalloc (and CuPy) start at a
// multiple of 256 bytes, so x and y are fine; a pointer into the middle of an
// array (x + 1, a slice) is not, and a misaligned vector access is an error
// that aborts the kernel. The Python side checks the two addresses before it
// launches.
//
// The body uses a grid-stride loop, so any 1-D grid works. The n % 4 floats
// after the last whole float4 are copied one each by the first n % 4 threads
// of the grid.
extern "C" __global__ void copy_vec4(const float* __restrict__ x,
                                     float* __restrict__ y,
                                     int n)
{
    const int stride = gridDim.x * blockDim.x;
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;

    const int n4 = n / 4;                               // whole float4 groups
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int i = tid; i < n4; i += stride) {
        y4[i] = x4[i];
    }

    const int t = 4 * n4 + tid;                         // the tail: 0 to 3 floats
    if (t < n) {
        y[t] = x[t];
    }
}
