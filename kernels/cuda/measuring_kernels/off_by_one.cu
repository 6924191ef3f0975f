// A deliberately broken kernel for compute-sanitizer: y[i] = 2 * x[i].
//
// The bounds check uses <= instead of <, so the thread with i == n (it exists
// whenever n is not a multiple of the block size) reads x[n] and writes y[n],
// one element past the end of both arrays. The n values that the caller looks
// at are all correct, so a correctness check of y cannot see the bug; the
// out-of-bounds write silently lands in whatever memory follows y, or faults.
// compute-sanitizer's memcheck tool reports it.
extern "C" __global__ void scale_off_by_one(const float* __restrict__ x,
                                            float* __restrict__ y,
                                            int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) {                       // BUG: should be i < n
        y[i] = 2.0f * x[i];
    }
}
