// A CPU stand-in for kernels/cuda/gemm/cp_async.cuh (tests only): every copy completes at once,
// with the zero fill of the real instruction; commit and wait do nothing. Misaligned copies and
// sizes other than 0 or the copy size trap, as they would be errors on the GPU.
#pragma once

extern "C" char* cudacpu_dynamic_smem;

__device__ __forceinline__ unsigned smem_u32(const void* p)
{
    return static_cast<unsigned>(static_cast<const char*>(p) - cudacpu_dynamic_smem);
}

__device__ __forceinline__ void emu_copy(void* dst, const void* src, int size, int bytes)
{
    if ((reinterpret_cast<unsigned long long>(dst) | reinterpret_cast<unsigned long long>(src)) % size != 0) __trap();
    if (bytes != 0 && bytes != size) __trap();
    unsigned char* d = static_cast<unsigned char*>(dst);
    const unsigned char* s = static_cast<const unsigned char*>(src);
    for (int i = 0; i < size; ++i) d[i] = i < bytes ? s[i] : 0;
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) { emu_copy(dst, src, 16, bytes); }
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int bytes) { emu_copy(dst, src, 4, bytes); }

__device__ __forceinline__ void cp_async16_at(unsigned dst, const void* src)
{
    emu_copy(cudacpu_dynamic_smem + dst, src, 16, 16);
}

__device__ __forceinline__ void cp_async16_at(unsigned dst, const void* src, int bytes)
{
    emu_copy(cudacpu_dynamic_smem + dst, src, 16, bytes);
}

__device__ __forceinline__ void cp_async_commit() {}

template <int N>
__device__ __forceinline__ void cp_async_wait() {}
