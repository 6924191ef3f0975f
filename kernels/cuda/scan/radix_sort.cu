// LSD radix sort of 32-bit unsigned keys, 4 bits per pass (8 passes), built on a scan.
// A tile is SORT_THREADS * SORT_ITEMS = 2048 keys, one block per tile. Per pass (shift = 0, 4,
// ..., 28; digit = (key >> shift) & 15):
//   radix_tile_counts  counts[d * num_tiles + tile] = keys of digit d in the tile (digit-major);
//   (the host scans counts with an inclusive scan: in digit-major order, the exclusive value
//    scanned - counts is where the tile's first key of digit d goes in the output);
//   radix_scatter      writes every key to that place plus its rank among the tile's earlier
//                      keys of the same digit, which keeps the sort stable.
// Keys of one warp with the same digit are found with 4 ballots (one per digit bit): a warp
// counts them with one shared atomic per distinct digit, and a key's rank inside its warp is the
// number of such lanes below it.
#define SORT_THREADS 256
#define SORT_ITEMS 8
#define SORT_WARPS (SORT_THREADS / 32)
#define RADIX_BITS 4
#define RADIX 16

// Lanes of this warp holding a valid key with the same digit as this lane.
__device__ __forceinline__ unsigned int same_digit_lanes(unsigned int digit, bool valid)
{
    unsigned int peers = __ballot_sync(0xffffffffu, valid);
#pragma unroll
    for (int b = 0; b < RADIX_BITS; ++b) {
        const bool bit = (digit >> b) & 1;
        const unsigned int lanes_with_bit = __ballot_sync(0xffffffffu, bit);
        peers &= bit ? lanes_with_bit : ~lanes_with_bit;
    }
    return peers;
}

extern "C" __global__ void __launch_bounds__(SORT_THREADS)
radix_tile_counts(const unsigned int* __restrict__ keys, int* __restrict__ counts, int n, int shift,
                  int num_tiles)
{
    __shared__ int hist[RADIX];
    const int lane = threadIdx.x & 31;
    if (threadIdx.x < RADIX) hist[threadIdx.x] = 0;
    __syncthreads();
    const long long base = (long long)blockIdx.x * SORT_THREADS * SORT_ITEMS;
#pragma unroll
    for (int r = 0; r < SORT_ITEMS; ++r) {
        const long long i = base + r * SORT_THREADS + threadIdx.x;
        const bool valid = i < n;
        const unsigned int digit = valid ? (keys[i] >> shift) & (RADIX - 1) : 0;
        const unsigned int peers = same_digit_lanes(digit, valid);
        if (valid && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
    }
    __syncthreads();
    if (threadIdx.x < RADIX) counts[threadIdx.x * num_tiles + blockIdx.x] = hist[threadIdx.x];
}

extern "C" __global__ void __launch_bounds__(SORT_THREADS)
radix_scatter(const unsigned int* __restrict__ keys_in, unsigned int* __restrict__ keys_out,
              const int* __restrict__ counts, const int* __restrict__ scanned, int n, int shift,
              int num_tiles)
{
    __shared__ int next[RADIX];                  // output position of the tile's next key of digit d
    __shared__ int warp_start[SORT_WARPS][RADIX];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x < RADIX) {
        const int k = threadIdx.x * num_tiles + blockIdx.x;
        next[threadIdx.x] = scanned[k] - counts[k];   // exclusive scan value
    }
    const long long base = (long long)blockIdx.x * SORT_THREADS * SORT_ITEMS;
    unsigned int key[SORT_ITEMS];
#pragma unroll
    for (int r = 0; r < SORT_ITEMS; ++r) {      // all loads first: SORT_ITEMS in flight
        const long long i = base + r * SORT_THREADS + threadIdx.x;
        key[r] = i < n ? keys_in[i] : 0u;
    }
    for (int r = 0; r < SORT_ITEMS; ++r) {      // rounds in tile order: stable
        const bool valid = base + r * SORT_THREADS + threadIdx.x < n;
        const unsigned int digit = (key[r] >> shift) & (RADIX - 1);
        const unsigned int peers = same_digit_lanes(digit, valid);
        const int rank = __popc(peers & ((1u << lane) - 1));
        if (threadIdx.x < SORT_WARPS * RADIX) (&warp_start[0][0])[threadIdx.x] = 0;
        __syncthreads();
        if (valid && rank == 0) warp_start[warp][digit] = __popc(peers);
        __syncthreads();
        if (threadIdx.x < RADIX) {               // per digit: counts of the warps -> start positions
            int run = next[threadIdx.x];
            for (int w = 0; w < SORT_WARPS; ++w) {
                const int c = warp_start[w][threadIdx.x];
                warp_start[w][threadIdx.x] = run;
                run += c;
            }
            next[threadIdx.x] = run;
        }
        __syncthreads();
        if (valid) keys_out[warp_start[warp][digit] + rank] = key[r];
        __syncthreads();
    }
}
