// Warp-level matrix multiply-accumulate on the tensor cores (compute capability 7.0 and later),
// written with the PTX wmma instructions that CUDA's C++ API nvcuda::wmma (header <mma.h>)
// wraps. Using PTX directly keeps the kernels free of toolkit headers, so NVRTC compiles them
// wherever CuPy runs; the operations and their rules are those of the C++ API
// (CUDA C++ Programming Guide, "Warp Matrix Functions"; PTX ISA, "Warp Level Matrix Multiply-
// Accumulate Instructions").
//
// A fragment is one 16 x 16 matrix spread over the 32 lanes of a warp; which lane holds which
// elements is unspecified, so a kernel only loads, multiplies and stores whole fragments, and all
// 32 lanes must execute each call together with the same arguments:
//   FragA  16 x 16 fp16 (rows of A),   8 registers of two halves per lane
//   FragB  16 x 16 fp16 (rows of B),   8 registers of two halves per lane
//   FragC  16 x 16 fp32 accumulator,   8 floats per lane
// Loads and stores address shared memory: the pointer must be 32-byte aligned and the leading
// dimension `ld` (elements between rows) a multiple of 8 halves or 4 floats.
#pragma once

struct FragA { unsigned x[8]; };
struct FragB { unsigned x[8]; };
struct FragC { float x[8]; };

// The 32-bit shared-memory address that the .shared forms of the instructions take.
__device__ __forceinline__ unsigned shared_address(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void frag_zero(FragC& c)
{
#pragma unroll
    for (int i = 0; i < 8; ++i) c.x[i] = 0.0f;
}

// A 16 x 16 tile of a row-major fp16 matrix in shared memory, as the left operand.
__device__ __forceinline__ void frag_load_a(FragA& a, const unsigned short* p, int ld)
{
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : "=r"(a.x[0]), "=r"(a.x[1]), "=r"(a.x[2]), "=r"(a.x[3]),
                   "=r"(a.x[4]), "=r"(a.x[5]), "=r"(a.x[6]), "=r"(a.x[7])
                 : "r"(shared_address(p)), "r"(ld) : "memory");
}

// A 16 x 16 tile of a row-major fp16 matrix in shared memory, as the right operand.
__device__ __forceinline__ void frag_load_b(FragB& b, const unsigned short* p, int ld)
{
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : "=r"(b.x[0]), "=r"(b.x[1]), "=r"(b.x[2]), "=r"(b.x[3]),
                   "=r"(b.x[4]), "=r"(b.x[5]), "=r"(b.x[6]), "=r"(b.x[7])
                 : "r"(shared_address(p)), "r"(ld) : "memory");
}

// c += a * b: fp16 products, accumulated in fp32 by the tensor cores.
__device__ __forceinline__ void frag_mma(FragC& c, const FragA& a, const FragB& b)
{
    asm volatile("wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, "
                 "{%8, %9, %10, %11, %12, %13, %14, %15}, "
                 "{%16, %17, %18, %19, %20, %21, %22, %23}, "
                 "{%0, %1, %2, %3, %4, %5, %6, %7};"
                 : "+f"(c.x[0]), "+f"(c.x[1]), "+f"(c.x[2]), "+f"(c.x[3]),
                   "+f"(c.x[4]), "+f"(c.x[5]), "+f"(c.x[6]), "+f"(c.x[7])
                 : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]),
                   "r"(a.x[4]), "r"(a.x[5]), "r"(a.x[6]), "r"(a.x[7]),
                   "r"(b.x[0]), "r"(b.x[1]), "r"(b.x[2]), "r"(b.x[3]),
                   "r"(b.x[4]), "r"(b.x[5]), "r"(b.x[6]), "r"(b.x[7]));
}

// The accumulator as a row-major 16 x 16 fp32 tile in shared memory.
__device__ __forceinline__ void frag_store_c(float* p, const FragC& c, int ld)
{
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.shared.f32 "
                 "[%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;"
                 :: "r"(shared_address(p)), "f"(c.x[0]), "f"(c.x[1]), "f"(c.x[2]), "f"(c.x[3]),
                    "f"(c.x[4]), "f"(c.x[5]), "f"(c.x[6]), "f"(c.x[7]), "r"(ld) : "memory");
}

// The same loads with the tile given as a shared-memory address (see shared_address): a kernel
// that keeps one base address per warp reaches every fragment with a compile-time offset.
__device__ __forceinline__ void frag_load_a_at(FragA& a, unsigned addr, int ld)
{
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : "=r"(a.x[0]), "=r"(a.x[1]), "=r"(a.x[2]), "=r"(a.x[3]),
                   "=r"(a.x[4]), "=r"(a.x[5]), "=r"(a.x[6]), "=r"(a.x[7])
                 : "r"(addr), "r"(ld) : "memory");
}

__device__ __forceinline__ void frag_load_b_at(FragB& b, unsigned addr, int ld)
{
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : "=r"(b.x[0]), "=r"(b.x[1]), "=r"(b.x[2]), "=r"(b.x[3]),
                   "=r"(b.x[4]), "=r"(b.x[5]), "=r"(b.x[6]), "=r"(b.x[7])
                 : "r"(addr), "r"(ld) : "memory");
}

// A row-major 16 x 16 fp32 tile of global memory (32-byte aligned, ld a multiple of 4) as an
// accumulator, and an accumulator stored to one. Accumulator fragments of the same shape share
// their element mapping, so alpha * acc + beta * c may be computed element by element.
__device__ __forceinline__ void frag_load_c_global(FragC& c, const float* p, int ld)
{
    asm volatile("wmma.load.c.sync.aligned.row.m16n16k16.global.f32 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, [%8], %9;"
                 : "=f"(c.x[0]), "=f"(c.x[1]), "=f"(c.x[2]), "=f"(c.x[3]),
                   "=f"(c.x[4]), "=f"(c.x[5]), "=f"(c.x[6]), "=f"(c.x[7])
                 : "l"(p), "r"(ld) : "memory");
}

__device__ __forceinline__ void frag_store_c_global(float* p, const FragC& c, int ld)
{
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.global.f32 "
                 "[%0], {%1, %2, %3, %4, %5, %6, %7, %8}, %9;"
                 :: "l"(p), "f"(c.x[0]), "f"(c.x[1]), "f"(c.x[2]), "f"(c.x[3]),
                    "f"(c.x[4]), "f"(c.x[5]), "f"(c.x[6]), "f"(c.x[7]), "r"(ld) : "memory");
}
