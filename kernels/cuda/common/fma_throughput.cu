// Peak FP32 arithmetic: every thread runs CHAINS independent chains of fmaf.
//
// One fmaf(a, b, c) = a * b + c is one instruction and counts as 2 FLOPs. A chain
// acc = fmaf(acc, a, b) must wait for its previous result (about 4 cycles), so each
// thread keeps CHAINS independent accumulators to give the scheduler instructions it
// can issue back to back. a and b are kernel parameters, so the compiler cannot
// fold the chain into a closed form, and each thread writes the sum of its chains,
// so none of the work is dead code.
//
// Work done, exactly: every launched thread executes iters * UNROLL * CHAINS fmaf,
//   FLOPs = 2 * FMAS_PER_ITER * iters * (grid * block),   FMAS_PER_ITER = 128.
// out must hold grid * block floats (one per launched thread). With a close to 1
// and b small, the values stay finite and normal, so no slow paths are taken.
#define CHAINS 8
#define UNROLL 16

extern "C" __global__ void fma_throughput(float* __restrict__ out, int iters, float a, float b)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
        acc[c] = 1.0f + 1e-3f * (float)((i + c) & 1023);  // different start per chain and thread
    }
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int c = 0; c < CHAINS; ++c) {
                acc[c] = fmaf(acc[c], a, b);
            }
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
        sum += acc[c];
    }
    out[i] = sum;
}
