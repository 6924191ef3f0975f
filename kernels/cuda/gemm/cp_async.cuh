// cp.async: copies from global to shared memory that bypass the registers and complete in the
// background (compute capability 8.0 and later; PTX ISA, "cp.async"; CUDA exposes the same
// instruction as cuda::memcpy_async). A thread issues copies, closes them into a group with
// cp_async_commit(), and later waits until at most N of its most recent groups are still in
// flight with cp_async_wait<N>(); a __syncthreads() after the wait makes every thread's copies
// visible to the whole block. `bytes` smaller than the copy size zero-fills the rest, so the
// edges of a matrix need no other code (bytes = 0 writes zeros; src must still be a valid address).
#pragma once

__device__ __forceinline__ unsigned smem_u32(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes, cached in L2 only (.cg): dst and src 16-byte aligned.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(smem_u32(dst)), "l"(src), "r"(bytes)
                 : "memory");
}

// 4 bytes (.ca: cached in L1 too): dst and src 4-byte aligned.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(smem_u32(dst)), "l"(src), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}

// The same 16-byte copy with the destination as a shared-memory address (a kernel that keeps its
// addresses as 32-bit integers adds compile-time offsets to them) and no zero fill: src must lie
// wholly inside the matrix.
__device__ __forceinline__ void cp_async16_at(unsigned dst, const void* src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
}

// ... and with zero fill: `bytes` (0 or 16) of src are copied, the rest of the 16 bytes is zero.
__device__ __forceinline__ void cp_async16_at(unsigned dst, const void* src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}
