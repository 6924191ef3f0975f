// Stream compaction with a scan: keep the elements of x that are > 0, in their original order.
//
// flag_positive   flags[i] = 1 if x[i] > 0 else 0
// (the host runs an inclusive scan of the flags: positions[i] = number kept among x[0..i])
// scatter_kept    a kept x[i] goes to out[positions[i] - 1]; count[0] = positions[n - 1].
// Both use grid-stride loops, so a grid of a few blocks per SM covers any n.
extern "C" __global__ void flag_positive(const int* __restrict__ x, int* __restrict__ flags, int n)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        flags[i] = x[i] > 0 ? 1 : 0;
}

extern "C" __global__ void scatter_kept(const int* __restrict__ x, const int* __restrict__ positions,
                                        int* __restrict__ out, int* __restrict__ count, int n)
{
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const int v = x[i];
        if (v > 0) out[positions[i] - 1] = v;
        if (i == n - 1) count[0] = positions[i];
    }
}
