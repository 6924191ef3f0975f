// A histogram in distributed shared memory (compute capability 9.0): the bins of a cluster of
// CLUSTER blocks are split across the blocks' shared memory, and every thread adds into whichever
// block owns its value's bin, its own or a peer's, with one shared-memory atomic.
//
// min_arch: sm_90
//
// With CLUSTER = 1 this is the classic privatised histogram: each block keeps all bins in its own
// shared memory, which caps the bins at what one block may have (227 KB: about 58,000 counters).
// A cluster of 8 holds eight times as many, still in on-chip memory; the alternative for that many
// bins, atomics on the global counters, sends every value to L2. Each block then adds its slice
// of the bins into the global counters once.
//
// Launch: any block size (a multiple of 32), a grid that is a multiple of CLUSTER (cluster
// dimensions CLUSTER x 1), dynamic shared memory 4 * ceil(bins / CLUSTER) bytes. values: n < 2^31
// unsigned ints, read with a grid-stride loop; values >= bins are ignored. counts: bins unsigned
// ints that the kernel adds into (zero them first).
//
// name_expressions: histogram_cluster<1>, histogram_cluster<2>, histogram_cluster<4>
// name_expressions: histogram_cluster<8>
#include "hopper/cluster.cuh"

template <int CLUSTER>
__global__ void __cluster_dims__(CLUSTER, 1, 1)
histogram_cluster(const unsigned* values, int n, unsigned* counts, int bins_)
{
    static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8, "portable cluster sizes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned bins = static_cast<unsigned>(bins_);
    extern __shared__ unsigned slice[];  // this block's bins: rank * per_block .. + per_block - 1
    const unsigned per_block = (bins + CLUSTER - 1) / CLUSTER;
    const unsigned rank = CLUSTER > 1 ? cluster_rank() : 0;
    for (unsigned i = threadIdx.x; i < per_block; i += blockDim.x) slice[i] = 0;
    cluster_sync();  // every block's bins are zero before anyone adds into them

    const unsigned slice0 = shared_address(slice);
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const unsigned value = values[i];
        if (value >= bins) continue;
        const unsigned owner = value / per_block;
        const unsigned offset = value - owner * per_block;
        if (CLUSTER == 1) {
            atomicAdd(&slice[offset], 1u);
        } else {
            cluster_shared_add(cluster_map(slice0 + 4 * offset, owner), 1u);
        }
    }
    cluster_sync();  // every add has landed before the slices are read, and no block leaves early

    for (unsigned i = threadIdx.x; i < per_block; i += blockDim.x) {
        const unsigned bin = rank * per_block + i;
        if (bin < bins && slice[i] != 0) atomicAdd(&counts[bin], slice[i]);
    }
#else
    __trap();  // clusters need compute capability 9.0
#endif
}
