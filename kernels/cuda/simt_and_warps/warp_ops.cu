// Warp-level primitives on a 1-D array, one element per thread, blockDim.x a multiple of 32.
// Threads past the end of the array (i >= n) stay in the kernel and take part in the warp
// operations with a neutral value: a full-mask *_sync call must be reached by all 32 lanes.

#define FULL_MASK 0xffffffffu

// y[i] = sum of x over the 32 consecutive elements of i's warp (elements past n count as 0).
// Butterfly, d = 16, 8, 4, 2, 1: after the step with xor distance d every lane holds the sum of
// the 32 / d lanes that agree with it in the bits below d (lane % d): 2 lanes after d = 16, all 32
// after d = 1, so after five steps every lane holds the whole warp's sum.
extern "C" __global__ void warp_allreduce(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    for (int d = 16; d > 0; d >>= 1)
        v += __shfl_xor_sync(FULL_MASK, v, d);
    if (i < n) y[i] = v;
}

// For every warp w (elements 32w .. 32w + 31) and the predicate p = (i < n && x[i] > 0):
//   ballot[w] = bit l set when lane l's p is true      (__ballot_sync)
//   count[w]  = number of lanes with p true            (__popc of the ballot)
//   any[w]    = 1 when some lane has p true            (__any_sync)
//   all[w]    = 1 when all 32 lanes have p true        (__all_sync)
extern "C" __global__ void warp_votes(const float* x, unsigned int* ballot, int* count,
                                      int* any, int* all, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int p = i < n && x[i] > 0.0f;
    unsigned int bits = __ballot_sync(FULL_MASK, p);
    int some = __any_sync(FULL_MASK, p);
    int every = __all_sync(FULL_MASK, p);
    int w = i / 32;
    if (threadIdx.x % 32 == 0 && 32 * w < n) {
        ballot[w] = bits;
        count[w] = __popc(bits);
        any[w] = some;
        all[w] = every;
    }
}
