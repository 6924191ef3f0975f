// Scans of one tile per block, the building blocks of the "Scan" chapter.
//
// hillis_steele_scan   inclusive, one block, n <= blockDim.x: log2(n) steps, every thread adds
//                      in every step (O(n log n) additions), ping-ponging between two halves of
//                      shared memory so no step reads a value the same step overwrites.
// blelloch_scan*       exclusive, one tile of m = 2 * blockDim.x elements per block (blockDim.x
//                      a power of two): an up-sweep that builds a tree of partial sums in place,
//                      then a down-sweep that turns it into the exclusive scan; O(m) additions in
//                      2 log2(m) steps. Each block also writes its tile's total to block_sums.
//   _float_temp        a widely copied version: the down-sweep keeps the swapped value in a
//                      float, so int sums above 2^24 are rounded. Kept to show the bug.
//   (plain)            the same with an int temporary: exact. Thread t owns elements 2t, 2t+1.
//   _padded            thread t owns elements t and t + blockDim.x (coalesced loads), and the
//                      shared array has one padding int every 32 to avoid bank conflicts.
// block_scan_shfl      inclusive, one element per thread, tile = blockDim.x (a multiple of 32):
//                      warp scans with __shfl_up_sync, then a scan of the warp totals.
#include "scan/scan_common.cuh"

extern "C" __global__ void hillis_steele_scan(const int* __restrict__ x, int* __restrict__ y, int n)
{
    extern __shared__ int buf[];                 // 2 * blockDim.x ints: two buffers
    const int t = threadIdx.x;
    int in = 0, out = blockDim.x;                // offsets of the buffer read and the one written
    buf[in + t] = t < n ? x[t] : 0;
    __syncthreads();
    for (int d = 1; d < blockDim.x; d *= 2) {
        buf[out + t] = t >= d ? buf[in + t] + buf[in + t - d] : buf[in + t];
        __syncthreads();
        in = blockDim.x - in;                    // swap the roles of the two buffers
        out = blockDim.x - out;
    }
    if (t < n) y[t] = buf[in + t];
}

extern "C" __global__ void blelloch_scan_float_temp(const int* __restrict__ x, int* __restrict__ y,
                                                    int* __restrict__ block_sums, int n)
{
    extern __shared__ int tmp[];
    const int t = threadIdx.x, m = 2 * blockDim.x;
    const long long base = (long long)blockIdx.x * m;
    tmp[2 * t] = base + 2 * t < n ? x[base + 2 * t] : 0;
    tmp[2 * t + 1] = base + 2 * t + 1 < n ? x[base + 2 * t + 1] : 0;
    int offset = 1;
    for (int d = m >> 1; d > 0; d >>= 1) {       // up-sweep
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            tmp[bi] += tmp[ai];
        }
        offset *= 2;
    }
    if (t == 0) { block_sums[blockIdx.x] = tmp[m - 1]; tmp[m - 1] = 0; }
    for (int d = 1; d < m; d *= 2) {             // down-sweep
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            float v = tmp[ai];                   // BUG: an int sum above 2^24 is rounded here
            tmp[ai] = tmp[bi];
            tmp[bi] += v;                        // int + float is computed in float
        }
    }
    __syncthreads();
    if (base + 2 * t < n) y[base + 2 * t] = tmp[2 * t];
    if (base + 2 * t + 1 < n) y[base + 2 * t + 1] = tmp[2 * t + 1];
}

extern "C" __global__ void blelloch_scan(const int* __restrict__ x, int* __restrict__ y,
                                         int* __restrict__ block_sums, int n)
{
    extern __shared__ int tmp[];
    const int t = threadIdx.x, m = 2 * blockDim.x;
    const long long base = (long long)blockIdx.x * m;
    tmp[2 * t] = base + 2 * t < n ? x[base + 2 * t] : 0;
    tmp[2 * t + 1] = base + 2 * t + 1 < n ? x[base + 2 * t + 1] : 0;
    int offset = 1;
    for (int d = m >> 1; d > 0; d >>= 1) {       // up-sweep: d active threads, operands offset apart
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            tmp[bi] += tmp[ai];
        }
        offset *= 2;
    }
    if (t == 0) { block_sums[blockIdx.x] = tmp[m - 1]; tmp[m - 1] = 0; }   // root: total, then 0
    for (int d = 1; d < m; d *= 2) {             // down-sweep: pass prefixes down the tree
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            int v = tmp[ai];
            tmp[ai] = tmp[bi];
            tmp[bi] += v;
        }
    }
    __syncthreads();
    if (base + 2 * t < n) y[base + 2 * t] = tmp[2 * t];
    if (base + 2 * t + 1 < n) y[base + 2 * t + 1] = tmp[2 * t + 1];
}

extern "C" __global__ void blelloch_scan_padded(const int* __restrict__ x, int* __restrict__ y,
                                                int* __restrict__ block_sums, int n)
{
    extern __shared__ int tmp[];                 // padded(m) ints
    const int t = threadIdx.x, h = blockDim.x, m = 2 * h;
    const long long base = (long long)blockIdx.x * m;
    tmp[padded(t)] = base + t < n ? x[base + t] : 0;            // consecutive threads read
    tmp[padded(t + h)] = base + t + h < n ? x[base + t + h] : 0; // consecutive addresses
    int offset = 1;
    for (int d = m >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            tmp[padded(bi)] += tmp[padded(ai)];
        }
        offset *= 2;
    }
    if (t == 0) { block_sums[blockIdx.x] = tmp[padded(m - 1)]; tmp[padded(m - 1)] = 0; }
    for (int d = 1; d < m; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            int ai = padded(offset * (2 * t + 1) - 1), bi = padded(offset * (2 * t + 2) - 1);
            int v = tmp[ai];
            tmp[ai] = tmp[bi];
            tmp[bi] += v;
        }
    }
    __syncthreads();
    if (base + t < n) y[base + t] = tmp[padded(t)];
    if (base + t + h < n) y[base + t + h] = tmp[padded(t + h)];
}

extern "C" __global__ void block_scan_shfl(const int* __restrict__ x, int* __restrict__ y,
                                           int* __restrict__ block_sums, int n)
{
    __shared__ int warp_totals[33];
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int v = i < n ? x[i] : 0;
    int total;
    const int exclusive = block_exclusive_scan(v, warp_totals, total);
    if (i < n) y[i] = exclusive + v;             // inclusive
    if (threadIdx.x == 0) block_sums[blockIdx.x] = total;
}
