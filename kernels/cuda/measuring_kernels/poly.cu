// Evaluate a polynomial of degree k at every element, by Horner's rule:
//
//     acc = 1;  repeat k times: acc = acc * x[i] + 0.5;   y[i] = acc
//
// Each element costs k fused multiply-adds (2k FLOP) and moves 8 bytes
// (one float read, one float written), so the arithmetic intensity is
// 2k / 8 = k / 4 FLOP per byte. Changing k at run time slides the same kernel
// along the x axis of a roofline plot: small k is memory-bound, large k is
// compute-bound.
//
// The k FMAs of one thread depend on each other (each needs the previous acc).
// The GPU hides their latency by switching between the many resident warps,
// each of which has its own independent chain.
//
// With |x| < 1 the values stay bounded (acc tends to 0.5 / (1 - x)), so the
// float32 result stays close to a float64 reference for any k.
extern "C" __global__ void poly_horner(const float* __restrict__ x,
                                       float* __restrict__ y,
                                       int n,
                                       int k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float xi = x[i];
        float acc = 1.0f;
        // Unrolling removes most of the loop counter and branch instructions,
        // which would otherwise compete with the FMAs for issue slots.
        #pragma unroll 16
        for (int j = 0; j < k; ++j) {
            acc = fmaf(acc, xi, 0.5f);
        }
        y[i] = acc;
    }
}
