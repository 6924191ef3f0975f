// Occupancy set by registers: copy_one_in_flight (latency_copy.cu) with R extra registers per
// thread.
//
// The copy loop is the same as copy_one_in_flight's, so every thread still has one load in flight;
// only the number of registers each thread holds changes. Before the loop each thread loads R
// values from `ballast`; after it, it folds them into a sum with the last value it copied. The
// compiler must keep all R values in registers for the whole loop: it cannot load them after the
// loop (y is not __restrict__, so a store to y might change ballast), and it cannot fold them into
// one sum before the loop (the sum needs the loop's last value, and float FMAs do not reassociate).
// The ballast stands in for the live state of a real kernel, such as a GEMM's accumulators.
//
// With more registers per thread fewer warps fit on an SM (64 K 32-bit registers per SM, allocated
// per warp in units of 256), so R dials the occupancy the way the unused dynamic shared memory of
// latency_copy.cu does. ptxas reports the registers it allocated (CuPy:
// kernel.attributes["num_regs"]). __launch_bounds__(128) lets it use up to 255 per thread for
// blocks of 128 threads.
//
// ballast must hold R zeros: then every thread's sum is 0 and the guarded store after the loop
// never runs (the compiler cannot know that). n >= 1.
//
// name_expressions: copy_with_ballast<0>, copy_with_ballast<8>, copy_with_ballast<16>
// name_expressions: copy_with_ballast<24>, copy_with_ballast<32>, copy_with_ballast<48>
// name_expressions: copy_with_ballast<64>, copy_with_ballast<80>, copy_with_ballast<96>
// name_expressions: copy_with_ballast<112>, copy_with_ballast<128>, copy_with_ballast<160>
// name_expressions: copy_with_ballast<192>, copy_with_ballast<224>

template <int R>
__global__ void __launch_bounds__(128) copy_with_ballast(const float* x, float* y, int n, const float* ballast)
{
    float held[R > 0 ? R : 1];
#pragma unroll
    for (int r = 0; r < R; ++r) held[r] = ballast[r];

    float last = 0.0f;
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        last = x[i];
        y[i] = last;
    }

    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) sum = fmaf(held[r], last, sum);
    if (sum != 0.0f) y[0] = sum;
}
