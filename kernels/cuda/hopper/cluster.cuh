// Thread-block clusters (compute capability 9.0; PTX ISA, "Cluster of Cooperative Thread Arrays",
// "mapa", "barrier.cluster", and the .multicast::cluster form of "cp.async.bulk.tensor").
//
// The blocks of a cluster run at the same time on SMs of one GPC, and each may read, write and
// atomically update the others' shared memory (distributed shared memory, DSMEM). An address in
// the "shared::cluster" window names a block and an offset: mapa turns this block's own shared
// address into the same offset in block `rank`. A TMA load may multicast: one block issues it and
// the box lands at the same offset in every block of a mask, each block's mbarrier at that offset
// counting the bytes. Peers must not touch a block's shared memory before it has been initialised
// or after the block has exited: barrier.cluster.arrive/wait brackets both ends.
#pragma once

#include "hopper/tma.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// This block's rank in its cluster (0 .. cluster size - 1).
__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}

// Every thread of every block of the cluster arrives; memory operations before the barrier are
// visible to every thread of the cluster after it (release / acquire at cluster scope). Not
// .aligned: the threads of a warp may reach it from different branches.
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

// The shared::cluster address of this block's shared address `address` in block `rank`.
__device__ __forceinline__ unsigned cluster_map(unsigned address, unsigned rank)
{
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
    return remote;
}

// Arrive once on an mbarrier that may live in another block of the cluster (a shared::cluster
// address from cluster_map), with the instruction's default semantics (release at CTA scope).
__device__ __forceinline__ void mbarrier_arrive_cluster(unsigned remote_bar)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" :: "r"(remote_bar) : "memory");
}

// Add `value` to the 32-bit word at a shared::cluster address (this block's or a peer's).
__device__ __forceinline__ void cluster_shared_add(unsigned remote_address, unsigned value)
{
    asm volatile("red.relaxed.cluster.shared::cluster.add.u32 [%0], %1;" :: "r"(remote_address), "r"(value)
                 : "memory");
}

// One box of `map` at column x, row y, written to shared offset `dst` of every block whose bit is
// set in `mask`; each of those blocks' mbarrier at offset `bar` receives the box's bytes.
__device__ __forceinline__ void tma_load_2d_multicast(unsigned dst, const TensorMap* map, unsigned bar, int x, int y,
                                                      unsigned short mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(bar), "h"(mask)
                 : "memory");
}

#endif  // __CUDA_ARCH__ >= 900
