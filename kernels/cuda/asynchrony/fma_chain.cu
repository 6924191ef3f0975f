// The compute stage of the chapter's copy -> kernel -> copy pipeline.
//
// Every element goes through `iters` dependent fused multiply-adds,
//
//     acc = x[i];  repeat iters times: acc = acc * 0.9999f + 0.0001f;   y[i] = acc
//
// so the kernel reads 4 bytes and writes 4 bytes per element and does 2 * iters FLOP in
// between. `iters` is a run-time knob: the chapter turns it until one chunk's kernel takes
// about as long as one chunk's copies, which is what makes overlapping them worth it.
//
// The map acc -> 0.9999 acc + 0.0001 pulls every value towards 1 and shrinks rounding
// errors instead of amplifying them: after k steps the result is 1 + (x - 1) * 0.9999^k,
// and the float32 result stays close to a float64 reference for the counts the chapter
// uses (up to 20000). Far beyond that, acc comes so close to 1 that the step 0.0001 * (1 - acc)
// is below float32's resolution and acc stops moving while the exact value still converges.
extern "C" __global__ void fma_chain(const float* __restrict__ x,
                                     float* __restrict__ y,
                                     int n,
                                     int iters)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float acc = x[i];
        #pragma unroll 8
        for (int j = 0; j < iters; ++j) {
            acc = fmaf(acc, 0.9999f, 0.0001f);
        }
        y[i] = acc;
    }
}
