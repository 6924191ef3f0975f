// Inclusive scans of arrays of any length, tile by tile (a tile: THREADS * ITEMS elements,
// ITEMS consecutive elements per thread, ITEMS a multiple of 4).
//
// Scan-then-propagate, three kernels (config 256 x 8 = 2048-element tiles):
//   tile_scan          scans every tile on its own and writes the tile's total to tile_sums;
//   (the host scans tile_sums with tile_scan again, recursively, until one tile is left);
//   add_tile_offsets   adds the inclusive scan of the tile totals before tile j to tile j.
//   Data movement: read n + write n, then read n + write n again: twice the minimum.
//
// single_pass_scan: one kernel, read n + write n (Merrill & Garland's decoupled look-back).
//   state[0] is a tile counter and state[1 + j] the status word of tile j; the host zeroes them
//   before every launch. A block takes the next tile index from the counter, so a tile's
//   predecessors belong to blocks that started earlier and are running or done: waiting for
//   them always ends. Each status word packs a flag (high 32 bits) and a value (low 32 bits)
//   into one 64-bit word, written with one store, so a reader never sees a flag without its
//   value:
//     INVALID   nothing published yet
//     AGGREGATE value = the sum of this tile alone
//     PREFIX    value = the sum of this tile and all tiles before it (its inclusive prefix)
//   After scanning its tile a block publishes AGGREGATE at once (tile 0: PREFIX). Warp 0 then
//   looks back 32 predecessors at a time: it waits until none of the 32 is INVALID, adds the
//   aggregates down to the nearest PREFIX (and stops there) or adds all 32 and moves on, then
//   publishes its own PREFIX.
//
// name_expressions: single_pass_scan<int, 256, 8>, single_pass_scan<float, 256, 8>
// name_expressions: single_pass_scan<int, 128, 4>, single_pass_scan<int, 128, 8>, single_pass_scan<int, 128, 16>
// name_expressions: single_pass_scan<int, 256, 4>, single_pass_scan<int, 256, 16>
// name_expressions: single_pass_scan<int, 512, 4>, single_pass_scan<int, 512, 8>, single_pass_scan<int, 512, 16>
#include "scan/scan_common.cuh"

#define STP_THREADS 256
#define STP_ITEMS 8

#define FLAG_INVALID 0ull
#define FLAG_AGGREGATE 1ull
#define FLAG_PREFIX 2ull

__device__ __forceinline__ unsigned int to_bits(int v) { return (unsigned int)v; }
__device__ __forceinline__ unsigned int to_bits(float v) { return __float_as_uint(v); }
template <typename T> __device__ __forceinline__ T from_bits(unsigned int b);
template <> __device__ __forceinline__ int from_bits<int>(unsigned int b) { return (int)b; }
template <> __device__ __forceinline__ float from_bits<float>(unsigned int b) { return __uint_as_float(b); }

template <typename T>
__device__ __forceinline__ void publish(unsigned long long* status, int tile,
                                        unsigned long long flag, T value)
{
    __threadfence();   // whatever this thread wrote before becomes visible before the flag
    *(volatile unsigned long long*)(status + tile) = (flag << 32) | to_bits(value);
}

// Run by all 32 lanes of warp 0. Publishes the tile's aggregate, finds the sum of all earlier
// tiles, publishes the tile's inclusive prefix, and returns the sum of the earlier tiles.
template <typename T>
__device__ T decoupled_look_back(unsigned long long* status, int tile, T tile_sum)
{
    const int lane = threadIdx.x & 31;
    if (tile == 0) {
        if (lane == 0) publish(status, 0, FLAG_PREFIX, tile_sum);
        return T(0);
    }
    if (lane == 0) publish(status, tile, FLAG_AGGREGATE, tile_sum);
    T before = T(0);
    int nearest = tile - 1;                      // the predecessor lane 0 inspects
    while (true) {
        const int j = nearest - lane;            // lane k inspects tile nearest - k
        unsigned long long word;
        do {                                     // wait until all 32 have published something
            word = j >= 0 ? *(volatile unsigned long long*)(status + j) : (FLAG_PREFIX << 32);
        } while (__any_sync(FULL_MASK, (word >> 32) == FLAG_INVALID));
        const unsigned int has_prefix = __ballot_sync(FULL_MASK, (word >> 32) == FLAG_PREFIX);
        T value = from_bits<T>((unsigned int)word);
        if (has_prefix) {                        // the nearest PREFIX ends the look-back
            const int stop = __ffs(has_prefix) - 1;
            before += warp_sum(lane <= stop ? value : T(0));
            break;
        }
        before += warp_sum(value);               // 32 aggregates: add them, look further back
        nearest -= 32;
    }
    if (lane == 0) publish(status, tile, FLAG_PREFIX, before + tile_sum);
    return before;
}

template <typename T, int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
single_pass_scan(const T* __restrict__ x, T* __restrict__ y, unsigned long long* state, int n)
{
    constexpr int TILE = THREADS * ITEMS;
    __shared__ T smem[TILE + TILE / 32];
    __shared__ T warp_totals[33];
    __shared__ int tile_index;
    __shared__ T tile_prefix;
    if (threadIdx.x == 0) tile_index = (int)atomicAdd(state, 1ull);   // dynamic tile index
    __syncthreads();
    const int tile = tile_index;
    const long long base = (long long)tile * TILE;

    T items[ITEMS];
    load_tile<T, THREADS, ITEMS>(x, base, n, smem, items);
    T thread_sum = items[0];
#pragma unroll
    for (int i = 1; i < ITEMS; ++i) thread_sum += items[i];
    T tile_sum;
    const T thread_prefix = block_exclusive_scan(thread_sum, warp_totals, tile_sum);

    if (threadIdx.x < 32) {
        const T before = decoupled_look_back(state + 1, tile, tile_sum);
        if (threadIdx.x == 0) tile_prefix = before;
    }
    __syncthreads();
    T running = tile_prefix + thread_prefix;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) { running += items[i]; items[i] = running; }
    store_tile<T, THREADS, ITEMS>(y, base, n, smem, items);
}

extern "C" __global__ void __launch_bounds__(STP_THREADS)
tile_scan(const int* __restrict__ x, int* __restrict__ y, int* __restrict__ tile_sums, int n)
{
    constexpr int TILE = STP_THREADS * STP_ITEMS;
    __shared__ int smem[TILE + TILE / 32];
    __shared__ int warp_totals[33];
    const long long base = (long long)blockIdx.x * TILE;
    int items[STP_ITEMS];
    load_tile<int, STP_THREADS, STP_ITEMS>(x, base, n, smem, items);
    int thread_sum = 0;
#pragma unroll
    for (int i = 0; i < STP_ITEMS; ++i) thread_sum += items[i];
    int tile_sum;
    int running = block_exclusive_scan(thread_sum, warp_totals, tile_sum);
#pragma unroll
    for (int i = 0; i < STP_ITEMS; ++i) { running += items[i]; items[i] = running; }
    store_tile<int, STP_THREADS, STP_ITEMS>(y, base, n, smem, items);
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = tile_sum;
}

// Launch with one block per tile except the first: block b adds scanned_sums[b] (the sum of
// tiles 0..b) to tile b + 1.
extern "C" __global__ void __launch_bounds__(STP_THREADS)
add_tile_offsets(int* __restrict__ y, const int* __restrict__ scanned_sums, int n)
{
    constexpr int TILE = STP_THREADS * STP_ITEMS;
    const long long base = (long long)(blockIdx.x + 1) * TILE;
    const int offset = scanned_sums[blockIdx.x];
#pragma unroll
    for (int k = 0; k < STP_ITEMS; ++k) {
        const long long i = base + k * STP_THREADS + threadIdx.x;
        if (i < n) y[i] += offset;
    }
}
