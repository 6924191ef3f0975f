// The Tensor Memory Accelerator (TMA) and the mbarriers that say when its copies have landed
// (compute capability 9.0 and later; PTX ISA, "cp.async.bulk.tensor", "mbarrier").
//
// A tensor map, built on the host by cuTensorMapEncodeTiled (kernels/hopper.py), describes a 2-D
// array in global memory (base, sizes, row stride) and the box one copy moves (box rows x box
// columns, and how it is swizzled in shared memory). A kernel takes it by value as a
// `const __grid_constant__ TensorMap` parameter and passes its address to the copy instruction:
// one thread then moves a whole box, with no per-element addresses and no registers holding data.
// Out-of-bounds parts of a box read as zeros and are not written, so ragged edges need no code.
//
// The copy into shared memory completes on an mbarrier: a 64-bit counter in shared memory with an
// arrival count and a transaction (byte) count. The issuing thread arrives and announces the bytes
// to expect (arrive.expect_tx); the TMA unit counts them down as they land (complete_tx); the phase
// completes when both reach zero, and threads wait for that phase with try_wait.parity (phase 0,
// 1, 0, ... as the barrier is reused).
#pragma once

// The CUDA driver's CUtensorMap: 128 opaque bytes, 64-byte aligned (cuda.h is not one of the headers
// NVRTC is given, so the layout is declared here).
struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

__device__ __forceinline__ unsigned shared_address(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// `count` threads must arrive (besides the bytes announced) for a phase to complete.
__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}

// Makes the initialised barriers visible to the TMA unit (the async proxy) before any copy uses them.
__device__ __forceinline__ void mbarrier_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrive once and announce `bytes` more bytes that copies will deliver to this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("{\n\t.reg .b64 state;\n\t"
                 "mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n\t}"
                 :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(unsigned bar)
{
    asm volatile("{\n\t.reg .b64 state;\n\tmbarrier.arrive.shared::cta.b64 state, [%0];\n\t}"
                 :: "r"(bar) : "memory");
}

// Wait until the phase of parity `parity` has completed. try_wait suspends the thread for a while
// in hardware before it gives up, so the loop does not spin hot.
__device__ __forceinline__ void mbarrier_wait(unsigned bar, unsigned parity)
{
    unsigned done = 0;
    do {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

// Fetch the tensor map into the TMA unit's cache ahead of the first copy (a hint).
__device__ __forceinline__ void tma_prefetch_map(const TensorMap* map)
{
    asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// One box of `map` whose first element is column x, row y, into shared memory at `dst`, completing
// on barrier `bar`. dst: 128-byte aligned (1024 for the 128-byte swizzle).
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, unsigned bar, int x, int y)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(bar)
                 : "memory");
}

// One box from shared memory at `src` into `map` at column x, row y (parts outside the array are
// not written). Completes in the background: see tma_store_wait_read.
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, unsigned src, int x, int y)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(src) : "memory");
}

// Close this thread's TMA stores into a group and wait until they have read their shared memory
// (which may then be reused or, at the end of the kernel, released).
__device__ __forceinline__ void tma_store_wait_read()
{
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

// Orders this thread's ordinary shared-memory accesses before later TMA (async proxy) accesses.
__device__ __forceinline__ void fence_proxy_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

#endif  // __CUDA_ARCH__ >= 900

// The first `align`-byte boundary at or after the dynamic shared memory's start (a launch asks
// for `align` extra bytes). The 128-byte swizzle repeats every 1024 bytes and wgmma's descriptors
// assume tiles that start on such a boundary.
template <unsigned ALIGN>
__device__ __forceinline__ unsigned char* align_shared(unsigned char* p)
{
    const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(p));
    return p + (ALIGN - address % ALIGN) % ALIGN;
}
