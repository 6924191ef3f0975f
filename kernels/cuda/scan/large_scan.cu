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
// name_expressions: single_pass_scan<int, 128, 4>, single_pass_scan<int, 128, 8>
// name_expressions: single_pass_scan<int, 128, 16>
// name_expressions: single_pass_scan<int, 256, 4>, single_pass_scan<int, 256, 16>
// name_expressions: single_pass_scan<int, 512, 4>, single_pass_scan<int, 512, 8>
// name_expressions: single_pass_scan<int, 512, 16>
//
// single_pass_scan_v2: the same algorithm with less waiting per tile (see the comment above it).
// name_expressions: single_pass_scan_v2<int, 128, 8>, single_pass_scan_v2<int, 128, 16>
// name_expressions: single_pass_scan_v2<int, 128, 24>, single_pass_scan_v2<int, 128, 32>
// name_expressions: single_pass_scan_v2<int, 256, 8>, single_pass_scan_v2<int, 256, 16>
// name_expressions: single_pass_scan_v2<int, 256, 24>, single_pass_scan_v2<int, 256, 32>
// name_expressions: single_pass_scan_v2<int, 512, 8>, single_pass_scan_v2<int, 512, 16>
//
// single_pass_scan_backoff: v2 that waits before it looks back and keeps its tile in shared memory
// (see the comment above it).
// name_expressions: single_pass_scan_backoff<int, 256, 32, 0, 0>
// name_expressions: single_pass_scan_backoff<int, 256, 32, 2400, 0>
// name_expressions: single_pass_scan_backoff<int, 256, 32, 3200, 650>
// name_expressions: single_pass_scan_backoff<int, 128, 32, 3200, 650>
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
    __threadfence();   // whatever this thread wrote before becomes visible before the flag (a
                       // reader of such data would also need a fence or an acquire load after
                       // seeing the flag; the value itself travels in the same 64-bit word)
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

// ------------------------------------------------------------------------ single_pass_scan_v2
//
// Decoupled look-back as above (same status words, same host-side zeroing, same dynamic tile
// index), reorganised so that a block spends less time at barriers and waiting:
//   - Warp-striped staging. Warp w of the block owns the contiguous 32 * ITEMS elements
//     [base + w * 32 * ITEMS, ...). It loads them with coalesced 16-byte loads (lane l takes
//     16-byte chunks l, l + 32, l + 64, ...; all ITEMS / 4 loads in flight), puts them in its own
//     region of shared memory and reads them back in blocked order (lane l: chunks l * ITEMS / 4
//     onwards), again 16 bytes at a time. Only __syncwarp is needed, no block-wide barrier. The
//     region is padded by one 16-byte chunk after every 8, so that both access patterns are free
//     of bank conflicts for ITEMS = 4, 8, 16, 32 (ITEMS = 24: up to three-way on the blocked side).
//     Stores go back the same way. Warps whose 32 * ITEMS elements are not all below n (or
//     misaligned arrays) use one 4-byte access per lane instead, coalesced all the same.
//   - Three block-wide barriers per tile in all (tile index, warp totals, tile prefix) instead
//     of eight: every warp scans its warp totals itself after the second barrier.
//   - The tile's aggregate is published right after the warp totals are known, before any
//     thread has computed its outputs; no __threadfence before publishing, because flag and
//     value travel in one 64-bit store and the tile publishes nothing else that others read.
//   - The look-back stops as soon as the nearest PREFIX and everything between it and the tile
//     have been published, instead of waiting for all 32 predecessors in the window.
// Forward progress: a tile waits only for tiles with smaller dynamic indices, whose blocks took
// their index earlier and are therefore running or done; so the wait always ends. A spin that
// still lasts 2^26 polls (seconds) can only be a bug, and traps instead of hanging the GPU.

#define LOOK_BACK_SPIN_LIMIT (1 << 26)

__device__ __forceinline__ void publish_v2(unsigned long long* status, int tile,
                                           unsigned long long flag, unsigned int bits)
{
    *(volatile unsigned long long*)(status + tile) = (flag << 32) | bits;
}

// Run by all 32 lanes of one warp. Returns the sum of all tiles before `tile` and publishes the
// tile's inclusive prefix. The aggregate (or, for tile 0, the prefix) is published first.
template <typename T>
__device__ __forceinline__ T look_back_v2(unsigned long long* status, int tile, T tile_sum)
{
    const int lane = threadIdx.x & 31;
    if (tile == 0) {
        if (lane == 0) publish_v2(status, 0, FLAG_PREFIX, to_bits(tile_sum));
        return T(0);
    }
    if (lane == 0) publish_v2(status, tile, FLAG_AGGREGATE, to_bits(tile_sum));
    T before = T(0);
    int nearest = tile - 1;                       // lane k inspects tile nearest - k
    while (true) {
        const int j = nearest - lane;
        unsigned long long word;
        unsigned int upto;                        // lanes 0 .. (nearest PREFIX, or 31)
        bool found;
        int spins = 0;
        while (true) {
            word = j >= 0 ? *(volatile unsigned long long*)(status + j) : (FLAG_PREFIX << 32);
            const unsigned long long flag = word >> 32;
            const unsigned int invalid = __ballot_sync(FULL_MASK, flag == FLAG_INVALID);
            const unsigned int prefix = __ballot_sync(FULL_MASK, flag == FLAG_PREFIX);
            found = prefix != 0;
            upto = found ? (prefix ^ (prefix - 1)) : FULL_MASK;
            if ((invalid & upto) == 0) break;
            if (++spins == LOOK_BACK_SPIN_LIMIT) __trap();
        }
        const T value = ((upto >> lane) & 1) ? from_bits<T>((unsigned int)word) : T(0);
        before += warp_sum(value);
        if (found) break;
        nearest -= 32;
    }
    if (lane == 0) publish_v2(status, tile, FLAG_PREFIX, to_bits(before + tile_sum));
    return before;
}

// 16-byte chunk c of a warp's staging region lives at slot c + c / 8.
__device__ __forceinline__ int chunk_slot(int c) { return c + (c >> 3); }

template <typename T, int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
single_pass_scan_v2(const T* __restrict__ x, T* __restrict__ y, unsigned long long* state, int n)
{
    static_assert(ITEMS % 4 == 0 && THREADS % 32 == 0 && THREADS <= 1024, "bad configuration");
    typedef typename Vec4<T>::type V;
    constexpr int WARPS = THREADS / 32;
    constexpr int TILE = THREADS * ITEMS;
    constexpr int WARP_ITEMS = 32 * ITEMS;
    constexpr int CHUNKS = ITEMS / 4;              // 16-byte chunks per thread
    constexpr int WARP_SLOTS = 32 * CHUNKS + 4 * CHUNKS;   // 32 * CHUNKS chunks + 1 per 8
    __shared__ V stage[WARPS * WARP_SLOTS];
    __shared__ T warp_totals[WARPS];
    __shared__ int tile_index;
    __shared__ T tile_prefix;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) tile_index = (int)atomicAdd(state, 1ull);   // dynamic tile index
    __syncthreads();                                                   // barrier 1
    const int tile = tile_index;
    const long long wbase = (long long)tile * TILE + (long long)warp * WARP_ITEMS;
    V* my = stage + warp * WARP_SLOTS;
    T* my_scalar = reinterpret_cast<T*>(my);      // element e at e + 4 * (e / 32)
    const bool whole = wbase + WARP_ITEMS <= n;

    // Global -> shared, striped (coalesced), then shared -> registers, blocked.
    if (whole && ((unsigned long long)x & 15) == 0) {
        const V* xv = reinterpret_cast<const V*>(x + wbase);
        V v[CHUNKS];
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) v[k] = xv[k * 32 + lane];        // all in flight
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) my[chunk_slot(k * 32 + lane)] = v[k];
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int e = k * 32 + lane;
            my_scalar[e + 4 * k] = wbase + e < n ? x[wbase + e] : T(0);
        }
    }
    __syncwarp();
    T items[ITEMS];
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        const V v = my[chunk_slot(lane * CHUNKS + c)];
        items[4 * c] = v.x; items[4 * c + 1] = v.y; items[4 * c + 2] = v.z; items[4 * c + 3] = v.w;
    }

    // Thread sums, warp scan, warp totals.
    T thread_sum = items[0];
#pragma unroll
    for (int i = 1; i < ITEMS; ++i) thread_sum += items[i];
    const T inclusive = warp_inclusive_scan(thread_sum);
    T thread_prefix = __shfl_up_sync(FULL_MASK, inclusive, 1);         // within the warp
    if (lane == 0) thread_prefix = T(0);
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();                                                   // barrier 2

    // Every warp scans the warp totals: the tile's sum and its own warp's prefix.
    const T total = lane < WARPS ? warp_totals[lane] : T(0);
    const T totals_incl = warp_inclusive_scan(total);
    const T tile_sum = __shfl_sync(FULL_MASK, totals_incl, WARPS - 1);
    T totals_excl = __shfl_up_sync(FULL_MASK, totals_incl, 1);
    if (lane == 0) totals_excl = T(0);
    const T warp_prefix = __shfl_sync(FULL_MASK, totals_excl, warp);
    if (warp == 0) {
        const T before = look_back_v2(state + 1, tile, tile_sum);
        if (lane == 0) tile_prefix = before;
    }
    __syncthreads();                                                   // barrier 3

    T running = tile_prefix + warp_prefix + thread_prefix;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) { running += items[i]; items[i] = running; }

    // Registers -> shared, blocked (each lane rewrites only its own chunks), then striped out.
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        V v;
        v.x = items[4 * c]; v.y = items[4 * c + 1]; v.z = items[4 * c + 2]; v.w = items[4 * c + 3];
        my[chunk_slot(lane * CHUNKS + c)] = v;
    }
    __syncwarp();
    if (whole && ((unsigned long long)y & 15) == 0) {
        V* yv = reinterpret_cast<V*>(y + wbase);
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) yv[k * 32 + lane] = my[chunk_slot(k * 32 + lane)];
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int e = k * 32 + lane;
            if (wbase + e < n) y[wbase + e] = my_scalar[e + 4 * k];
        }
    }
}

// ------------------------------------------------------------------- single_pass_scan_backoff
//
// single_pass_scan_v2 with two changes, for GPUs whose memory outruns v2's look-back (the H200):
//   - Back off. After publishing its aggregate, warp 0 sleeps WAIT_NS nanoseconds (__nanosleep,
//     compute capability 7.0 and later) before its first poll, and POLL_NS after every poll that
//     finds a predecessor with nothing published. By then the predecessors have usually
//     published, so one poll tends to do; polling at once keeps many warps reading status words
//     over and over, in the same memory system the data streams need. CUB's decoupled look-back
//     backs off the same way (its "L2 write latency" and per-poll delays, tuned per architecture).
//   - Keep the tile in shared memory, not in registers, while warp 0 looks back: each thread
//     re-reads its chunks from the staging area after the look-back, and __launch_bounds__ asks
//     for 1536 / THREADS blocks per SM. Registers held across the wait are what limited v2's
//     occupancy (56 registers, 9 blocks of 128 threads per SM on an H200); with 40 registers,
//     6 blocks of 256 threads fit.
// Data movement, status words, dynamic tile index, forward progress and the bounded spin are v2's.
// look_back_backoff is look_back_v2 with the two sleeps added (look_back_v2 stays as the chapter
// ran it); with WAIT_NS = POLL_NS = 0 the kernel shows the second change alone.
// Recorded on an NVIDIA H200 by benchmarks/bench_ladder_tops.py --candidates (2^28 int32, against a
// copy of the same bytes in the same run; benchmarks/results/ladder_tops_h200.txt), L2 flushed / back
// to back: v2 <int, 128, 32> 70.2 / 70.0 %; <int, 256, 32, 0, 0> 76.9 / 76.4 %; <int, 256, 32,
// 2400, 0> 82.1 / 81.9 %; <int, 256, 32, 3200, 650> 82.5 / 82.1 %; <int, 128, 32, 3200, 650> 80.1 /
// 80.1 % (an earlier recording put the last three at 82.4 to 82.7 % and 80.5 %). In exploratory runs
// a first sleep of 6 us or more fell back to about 74 %.

template <typename T, int WAIT_NS, int POLL_NS>
__device__ __forceinline__ T look_back_backoff(unsigned long long* status, int tile, T tile_sum)
{
    const int lane = threadIdx.x & 31;
    if (tile == 0) {
        if (lane == 0) publish_v2(status, 0, FLAG_PREFIX, to_bits(tile_sum));
        return T(0);
    }
    if (lane == 0) publish_v2(status, tile, FLAG_AGGREGATE, to_bits(tile_sum));
    if (WAIT_NS > 0) __nanosleep(WAIT_NS);        // let the predecessors publish first
    T before = T(0);
    int nearest = tile - 1;                       // lane k inspects tile nearest - k
    while (true) {
        const int j = nearest - lane;
        unsigned long long word;
        unsigned int upto;                        // lanes 0 .. (nearest PREFIX, or 31)
        bool found;
        int spins = 0;
        while (true) {
            word = j >= 0 ? *(volatile unsigned long long*)(status + j) : (FLAG_PREFIX << 32);
            const unsigned long long flag = word >> 32;
            const unsigned int invalid = __ballot_sync(FULL_MASK, flag == FLAG_INVALID);
            const unsigned int prefix = __ballot_sync(FULL_MASK, flag == FLAG_PREFIX);
            found = prefix != 0;
            upto = found ? (prefix ^ (prefix - 1)) : FULL_MASK;
            if ((invalid & upto) == 0) break;
            if (++spins == LOOK_BACK_SPIN_LIMIT) __trap();
            if (POLL_NS > 0) __nanosleep(POLL_NS);
        }
        const T value = ((upto >> lane) & 1) ? from_bits<T>((unsigned int)word) : T(0);
        before += warp_sum(value);
        if (found) break;
        nearest -= 32;
    }
    if (lane == 0) publish_v2(status, tile, FLAG_PREFIX, to_bits(before + tile_sum));
    return before;
}

template <typename T, int THREADS, int ITEMS, int WAIT_NS, int POLL_NS>
__global__ void __launch_bounds__(THREADS, 1536 / THREADS)
single_pass_scan_backoff(const T* __restrict__ x, T* __restrict__ y, unsigned long long* state, int n)
{
    static_assert(ITEMS % 4 == 0 && THREADS % 32 == 0 && THREADS <= 1024, "bad configuration");
    typedef typename Vec4<T>::type V;
    constexpr int WARPS = THREADS / 32;
    constexpr int TILE = THREADS * ITEMS;
    constexpr int WARP_ITEMS = 32 * ITEMS;
    constexpr int CHUNKS = ITEMS / 4;
    constexpr int WARP_SLOTS = 32 * CHUNKS + 4 * CHUNKS;
    __shared__ V stage[WARPS * WARP_SLOTS];
    __shared__ T warp_totals[WARPS];
    __shared__ int tile_index;
    __shared__ T tile_prefix;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) tile_index = (int)atomicAdd(state, 1ull);   // dynamic tile index
    __syncthreads();                                                   // barrier 1
    const int tile = tile_index;
    const long long wbase = (long long)tile * TILE + (long long)warp * WARP_ITEMS;
    V* my = stage + warp * WARP_SLOTS;
    T* my_scalar = reinterpret_cast<T*>(my);      // element e at e + 4 * (e / 32)
    const bool whole = wbase + WARP_ITEMS <= n;

    // Global -> shared, striped and coalesced, as v2.
    if (whole && ((unsigned long long)x & 15) == 0) {
        const V* xv = reinterpret_cast<const V*>(x + wbase);
        V v[CHUNKS];
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) v[k] = xv[k * 32 + lane];        // all in flight
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) my[chunk_slot(k * 32 + lane)] = v[k];
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int e = k * 32 + lane;
            my_scalar[e + 4 * k] = wbase + e < n ? x[wbase + e] : T(0);
        }
    }
    __syncwarp();

    // The thread's sum from its chunks (blocked order), which stay in shared memory.
    T thread_sum = T(0);
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        const V v = my[chunk_slot(lane * CHUNKS + c)];
        thread_sum += (v.x + v.y) + (v.z + v.w);
    }
    const T inclusive = warp_inclusive_scan(thread_sum);
    T thread_prefix = __shfl_up_sync(FULL_MASK, inclusive, 1);
    if (lane == 0) thread_prefix = T(0);
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();                                                   // barrier 2

    const T total = lane < WARPS ? warp_totals[lane] : T(0);
    const T totals_incl = warp_inclusive_scan(total);
    const T tile_sum = __shfl_sync(FULL_MASK, totals_incl, WARPS - 1);
    T totals_excl = __shfl_up_sync(FULL_MASK, totals_incl, 1);
    if (lane == 0) totals_excl = T(0);
    const T warp_prefix = __shfl_sync(FULL_MASK, totals_excl, warp);
    if (warp == 0) {
        const T before = look_back_backoff<T, WAIT_NS, POLL_NS>(state + 1, tile, tile_sum);
        if (lane == 0) tile_prefix = before;
    }
    __syncthreads();                                                   // barrier 3

    // Re-read the chunks, scan them in place, store them out striped.
    T running = tile_prefix + warp_prefix + thread_prefix;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        V v = my[chunk_slot(lane * CHUNKS + c)];
        running += v.x; v.x = running; running += v.y; v.y = running;
        running += v.z; v.z = running; running += v.w; v.w = running;
        my[chunk_slot(lane * CHUNKS + c)] = v;
    }
    __syncwarp();
    if (whole && ((unsigned long long)y & 15) == 0) {
        V* yv = reinterpret_cast<V*>(y + wbase);
#pragma unroll
        for (int k = 0; k < CHUNKS; ++k) yv[k * 32 + lane] = my[chunk_slot(k * 32 + lane)];
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int e = k * 32 + lane;
            if (wbase + e < n) y[wbase + e] = my_scalar[e + 4 * k];
        }
    }
}
