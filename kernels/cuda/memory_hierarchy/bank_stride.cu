// Shared-memory bank conflicts as a function of the stride between lanes.
//
// The block copies a 1024-word table into shared memory. Then lane l of every
// warp reads word (l * stride) mod 1024, `iters` times. Shared memory has 32
// banks of 4-byte words (word w lives in bank w mod 32); the lanes of one warp
// request that hit different words of the same bank are served one after the
// other. With stride s, gcd(s, 32) lanes share each bank that is used, so the
// request takes gcd(s, 32) times as long as a conflict-free one. Stride 0
// makes every lane read the same word: a broadcast, served in one pass.
//
// The pointer is volatile so that the compiler re-reads shared memory in every
// iteration instead of keeping the value in a register.
// out[tid] = iters * table[(lane * stride) mod 1024] (summed in float).
// Launch with blocks whose size is a multiple of 32.
#define WORDS 1024

extern "C" __global__ void bank_stride(const float* __restrict__ table,
                                       int stride,
                                       int iters,
                                       float* __restrict__ out)
{
    __shared__ float buf[WORDS];
    for (int i = threadIdx.x; i < WORDS; i += blockDim.x) {
        buf[i] = table[i];
    }
    __syncthreads();

    const volatile float* s = buf;
    int lane = threadIdx.x & 31;
    int word = (lane * stride) & (WORDS - 1);
    float acc = 0.0f;
#pragma unroll 8
    for (int k = 0; k < iters; ++k) {
        acc += s[word];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
