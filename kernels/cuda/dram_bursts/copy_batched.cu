// Copy n elements of type T, with K independent loads in flight per thread.
//
// The chapter uses this one kernel for two experiments on the same number of
// bytes:
//   * access size: T = unsigned char, unsigned short, float, float2, float4
//     (1, 2, 4, 8, 16 bytes per load instruction), K = 1;
//   * loads in flight: T = float, K = 1, 2, 4, 8.
// Each pass of the outer loop first issues K loads (x[i], x[i + stride], ...),
// all independent of each other, and only then stores the K values. A thread
// therefore waits for DRAM once per pass with K * sizeof(T) bytes requested,
// instead of once per element. "#pragma unroll 1" keeps the compiler from
// unrolling the outer loop, which would put more loads in flight than K and
// blur the experiment.
//
// Every load instruction of a warp reads 32 consecutive elements, so each
// access is fully coalesced whatever T is.
//
// Launch with any 1-D grid (the chapter uses a fixed number of blocks per SM);
// n may be any size (the last pass checks every index). Requires
// n + K * gridDim.x * blockDim.x < 2^31 so that indices fit an int.
//
// name_expressions: copy_batched<unsigned char, 1>, copy_batched<unsigned short, 1>
// name_expressions: copy_batched<float, 1>, copy_batched<float2, 1>, copy_batched<float4, 1>
// name_expressions: copy_batched<float, 2>, copy_batched<float, 4>, copy_batched<float, 8>
// name_expressions: copy_batched<unsigned char, 2>, copy_batched<unsigned char, 4>
// name_expressions: copy_batched<unsigned char, 8>
// name_expressions: copy_batched<unsigned short, 2>, copy_batched<unsigned short, 4>
// name_expressions: copy_batched<unsigned short, 8>
// name_expressions: copy_batched<float2, 2>, copy_batched<float2, 4>, copy_batched<float2, 8>
// name_expressions: copy_batched<float4, 2>, copy_batched<float4, 4>, copy_batched<float4, 8>
template <typename T, int K>
__global__ void copy_batched(const T* __restrict__ x, T* __restrict__ y, int n)
{
    const int stride = gridDim.x * blockDim.x;          // threads in the grid
    int base = blockIdx.x * blockDim.x + threadIdx.x;   // this thread's first element

#pragma unroll 1
    for (; base < n; base += K * stride) {
        T v[K];
#pragma unroll
        for (int j = 0; j < K; ++j) {                   // K independent loads ...
            const int i = base + j * stride;
            if (i < n) v[j] = x[i];
        }
#pragma unroll
        for (int j = 0; j < K; ++j) {                   // ... then K stores
            const int i = base + j * stride;
            if (i < n) y[i] = v[j];
        }
    }
}
