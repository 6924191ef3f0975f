/* cooperative_groups.h for the CPU backend: thread blocks, warp tiles (tiled_partition<N>, N a power
 * of two up to 32) and coalesced groups, built on __syncthreads and the warp collectives, so a
 * group that is misused deadlocks or faults the same way. Grid-wide groups (this_grid().sync())
 * need all blocks resident at once, which the CPU backend cannot do: the compiler driver rejects
 * them before compiling.
 */
#pragma once
#include "cuda_cpu.h"

namespace cooperative_groups {

class thread_block {
  public:
    void sync(CUDACPU_SITE) const { cudacpu_syncthreads(CUDACPU_AT); }
    unsigned long long thread_rank() const { return cudacpu_linear_tid(); }
    unsigned long long size() const { return (unsigned long long)blockDim.x * blockDim.y * blockDim.z; }
    unsigned long long num_threads() const { return size(); }
    dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    dim3 dim_threads() const { return blockDim; }
    dim3 group_dim() const { return blockDim; }
};

static inline thread_block this_thread_block() { return thread_block(); }
static inline void sync(const thread_block &g, CUDACPU_SITE) { cudacpu_syncthreads(CUDACPU_AT); }

/* A tile of N consecutive threads of a warp. */
template <unsigned int N>
class thread_block_tile {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0,
                  "the CPU backend supports tiled_partition<N> with N a power of two up to 32");

  public:
    static constexpr unsigned int num_threads_v = N;
    unsigned int mask() const {
        if (N == 32) return 0xffffffffu;
        return ((1u << N) - 1u) << (cudacpu_lane() & ~(N - 1u));
    }
    void sync(CUDACPU_SITE) const { cudacpu_warp_op(CUDACPU_SYNCWARP, mask(), 0, 0, 32, CUDACPU_AT); }
    unsigned long long thread_rank() const { return cudacpu_linear_tid() & (N - 1u); }
    unsigned long long size() const { return N; }
    unsigned long long num_threads() const { return N; }
    unsigned long long meta_group_rank() const { return cudacpu_linear_tid() / N; }
    unsigned long long meta_group_size() const {
        unsigned long long threads = (unsigned long long)blockDim.x * blockDim.y * blockDim.z;
        return (threads + N - 1) / N;
    }
    template <typename T> T shfl(T var, int src, CUDACPU_SITE) const {
        return cudacpu_from_bits<T>(cudacpu_warp_op(CUDACPU_SHFL_IDX, mask(), cudacpu_bits(var), src, (int)N, CUDACPU_AT));
    }
    template <typename T> T shfl_up(T var, unsigned int delta, CUDACPU_SITE) const {
        return cudacpu_from_bits<T>(cudacpu_warp_op(CUDACPU_SHFL_UP, mask(), cudacpu_bits(var), (int)delta, (int)N, CUDACPU_AT));
    }
    template <typename T> T shfl_down(T var, unsigned int delta, CUDACPU_SITE) const {
        return cudacpu_from_bits<T>(cudacpu_warp_op(CUDACPU_SHFL_DOWN, mask(), cudacpu_bits(var), (int)delta, (int)N, CUDACPU_AT));
    }
    template <typename T> T shfl_xor(T var, unsigned int lane_mask, CUDACPU_SITE) const {
        return cudacpu_from_bits<T>(cudacpu_warp_op(CUDACPU_SHFL_XOR, mask(), cudacpu_bits(var), (int)lane_mask, (int)N, CUDACPU_AT));
    }
    int any(int pred, CUDACPU_SITE) const { return (int)cudacpu_warp_op(CUDACPU_ANY, mask(), pred != 0, 0, 32, CUDACPU_AT); }
    int all(int pred, CUDACPU_SITE) const { return (int)cudacpu_warp_op(CUDACPU_ALL, mask(), pred != 0, 0, 32, CUDACPU_AT); }
    unsigned int ballot(int pred, CUDACPU_SITE) const {
        unsigned bits = (unsigned)cudacpu_warp_op(CUDACPU_BALLOT, mask(), pred != 0, 0, 32, CUDACPU_AT);
        return N == 32 ? bits : (bits >> (cudacpu_lane() & ~(N - 1u))) & ((1u << N) - 1u);
    }
    template <typename T> unsigned int match_any(T value, CUDACPU_SITE) const {
        unsigned m = (unsigned)cudacpu_warp_op(CUDACPU_MATCH_ANY, mask(), cudacpu_bits(value), 0, 32, CUDACPU_AT);
        return N == 32 ? m : (m >> (cudacpu_lane() & ~(N - 1u))) & ((1u << N) - 1u);
    }
};

template <unsigned int N, typename Parent>
static inline thread_block_tile<N> tiled_partition(const Parent &) { return thread_block_tile<N>(); }

/* The lanes of a warp that are here together (the __activemask() of this call). */
class coalesced_group {
    unsigned int m_;

  public:
    explicit coalesced_group(unsigned int m) : m_(m) {}
    unsigned int mask() const { return m_; }
    unsigned long long size() const { return (unsigned)__builtin_popcount(m_); }
    unsigned long long num_threads() const { return size(); }
    unsigned long long thread_rank() const { return (unsigned)__builtin_popcount(m_ & ((1u << cudacpu_lane()) - 1u)); }
    void sync(CUDACPU_SITE) const { cudacpu_warp_op(CUDACPU_SYNCWARP, m_, 0, 0, 32, CUDACPU_AT); }
    template <typename T> T shfl(T var, unsigned int rank, CUDACPU_SITE) const {
        unsigned left = m_;                                    // the lane holding the rank-th bit
        for (unsigned i = 0; i < rank && left; ++i) left &= left - 1;
        int src = left ? __builtin_ctz(left) : (int)cudacpu_lane();
        return cudacpu_from_bits<T>(cudacpu_warp_op(CUDACPU_SHFL_IDX, m_, cudacpu_bits(var), src, 32, CUDACPU_AT));
    }
    unsigned int ballot(int pred, CUDACPU_SITE) const {
        unsigned bits = (unsigned)cudacpu_warp_op(CUDACPU_BALLOT, m_, pred != 0, 0, 32, CUDACPU_AT);
        unsigned r = 0, k = 0;                                 // compacted to the group's ranks
        for (int l = 0; l < 32; ++l)
            if (m_ >> l & 1u) r |= ((bits >> l) & 1u) << k++;
        return r;
    }
    int any(int pred, CUDACPU_SITE) const { return (int)cudacpu_warp_op(CUDACPU_ANY, m_, pred != 0, 0, 32, CUDACPU_AT); }
    int all(int pred, CUDACPU_SITE) const { return (int)cudacpu_warp_op(CUDACPU_ALL, m_, pred != 0, 0, 32, CUDACPU_AT); }
};

static inline coalesced_group coalesced_threads_at(const char *file, int line, int site) {
    return coalesced_group(cudacpu_activemask(file, line, site));
}
/* A macro for the same reason as __activemask(): each call is its own convergence point. */
#define coalesced_threads() coalesced_threads_at(__FILE__, __LINE__, __COUNTER__)

template <typename T> struct plus { T operator()(const T &a, const T &b) const { return a + b; } };
template <typename T> struct less { T operator()(const T &a, const T &b) const { return b < a ? b : a; } };
template <typename T> struct greater { T operator()(const T &a, const T &b) const { return a < b ? b : a; } };
template <typename T> struct bit_and { T operator()(const T &a, const T &b) const { return a & b; } };
template <typename T> struct bit_or { T operator()(const T &a, const T &b) const { return a | b; } };
template <typename T> struct bit_xor { T operator()(const T &a, const T &b) const { return a ^ b; } };

/* cg::reduce(tile, value, op): every lane of the tile gets the reduction of all of them. */
template <unsigned int N, typename T, typename Op>
static inline T reduce(const thread_block_tile<N> &g, T value, Op op, CUDACPU_SITE) {
    for (unsigned int d = N / 2; d > 0; d /= 2)
        value = op(value, g.shfl_xor(value, d, CUDACPU_AT));
    return value;
}
template <unsigned int N, typename T, typename Op>
static inline T inclusive_scan(const thread_block_tile<N> &g, T value, Op op, CUDACPU_SITE) {
    const unsigned rank = (unsigned)g.thread_rank();
    for (unsigned int d = 1; d < N; d *= 2) {
        T other = g.shfl_up(value, d, CUDACPU_AT);
        if (rank >= d) value = op(value, other);
    }
    return value;
}
template <unsigned int N, typename T>
static inline T inclusive_scan(const thread_block_tile<N> &g, T value, CUDACPU_SITE) {
    return inclusive_scan(g, value, plus<T>(), CUDACPU_AT);
}
template <unsigned int N, typename T, typename Op>
static inline T exclusive_scan(const thread_block_tile<N> &g, T value, Op op, CUDACPU_SITE) {
    T inclusive = inclusive_scan(g, value, op, CUDACPU_AT);
    T shifted = g.shfl_up(inclusive, 1, CUDACPU_AT);
    return g.thread_rank() == 0 ? T() : shifted;
}
template <unsigned int N, typename T>
static inline T exclusive_scan(const thread_block_tile<N> &g, T value, CUDACPU_SITE) {
    return exclusive_scan(g, value, plus<T>(), CUDACPU_AT);
}

}  // namespace cooperative_groups
