// Bandwidth of the memory level that holds a working set.
//
// Every thread of a grid that fills the GPU reads the float4 elements
// i = tid, tid + stride, ... of x (n4 of them, 16 bytes each), and does that
// `reps` times, adding everything up. A thread re-reads the same elements in
// every repetition, and a block stays on its SM for the whole kernel, so each
// SM keeps re-reading its own 1/sm_count share of the working set: that share
// is served by L1 while it fits in L1, the whole working set by L2 while it
// fits in L2, and by device memory beyond that.
//
// out[tid] receives the thread's sum, so that the loads cannot be removed.
// Launch with any 1-D grid; out needs gridDim.x * blockDim.x elements.
extern "C" __global__ void reread(const float4* __restrict__ x,
                                  int n4,
                                  int reps,
                                  float* __restrict__ out)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = gridDim.x * blockDim.x;
    float acc = 0.0f;
    for (int r = 0; r < reps; ++r) {
#pragma unroll 4
        for (int i = tid; i < n4; i += stride) {
            float4 v = x[i];
            acc += (v.x + v.y) + (v.z + v.w);
        }
    }
    out[tid] = acc;
}
