// A CPU stand-in for kernels/cuda/gemm/wmma_ptx.cuh, so that the course's CPU backend can run the
// tensor-core GEMM kernels in tests (it cannot run PTX). The operations keep the rules of the real
// ones (all 32 lanes call them with the same arguments, pointers 32-byte aligned, ld a multiple of
// 16 bytes, shared addresses for the _at forms) and trap when a rule is broken.
//
// The element mapping is a valid choice of the unspecified one: every lane holds whole A and B
// tiles (as floats converted from fp16), and an accumulator's element x[e] of lane l is element
// 32 e + l of the row-major 16 x 16 tile. Loads and stores of accumulators touch only the lane's
// own eight elements, as on the GPU, so a lane never sees another lane's half-finished work.
#pragma once

extern "C" char* cudacpu_dynamic_smem;

struct FragA { float v[256]; };
struct FragB { float v[256]; };
struct FragC { float x[8]; };

__device__ __forceinline__ float emu_half_to_float(unsigned short h)
{
    const unsigned sign = (h >> 15) & 1u, exp = (h >> 10) & 31u, man = h & 1023u;
    float v;
    if (exp == 0) v = ldexpf((float)man, -24);
    else if (exp == 31) v = man ? __int_as_float(0x7fc00000) : __int_as_float(0x7f800000);
    else v = ldexpf((float)(man | 1024u), (int)exp - 25);
    return sign ? -v : v;
}

__device__ __forceinline__ unsigned shared_address(const void* p)
{
    return static_cast<unsigned>(static_cast<const char*>(p) - cudacpu_dynamic_smem);
}

__device__ __forceinline__ const void* emu_shared_pointer(unsigned addr)
{
    return cudacpu_dynamic_smem + addr;
}

__device__ __forceinline__ void emu_check(const void* p, int ld, int ld_multiple)
{
    if ((reinterpret_cast<unsigned long long>(p) & 31ull) != 0 || ld % ld_multiple != 0) __trap();
}

__device__ __forceinline__ void frag_zero(FragC& c)
{
    for (int i = 0; i < 8; ++i) c.x[i] = 0.0f;
}

__device__ __forceinline__ void emu_load_tile(float* v, const unsigned short* p, int ld)
{
    emu_check(p, ld, 8);
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) v[16 * r + c] = emu_half_to_float(p[r * ld + c]);
}

__device__ __forceinline__ void frag_load_a(FragA& a, const unsigned short* p, int ld) { emu_load_tile(a.v, p, ld); }
__device__ __forceinline__ void frag_load_b(FragB& b, const unsigned short* p, int ld) { emu_load_tile(b.v, p, ld); }

__device__ __forceinline__ void frag_load_a_at(FragA& a, unsigned addr, int ld)
{
    emu_load_tile(a.v, static_cast<const unsigned short*>(emu_shared_pointer(addr)), ld);
}

__device__ __forceinline__ void frag_load_b_at(FragB& b, unsigned addr, int ld)
{
    emu_load_tile(b.v, static_cast<const unsigned short*>(emu_shared_pointer(addr)), ld);
}

__device__ __forceinline__ void frag_mma(FragC& c, const FragA& a, const FragB& b)
{
    const int lane = threadIdx.x % 32;
    for (int e = 0; e < 8; ++e) {
        const int idx = 32 * e + lane, r = idx / 16, col = idx % 16;
        float s = c.x[e];
        for (int k = 0; k < 16; ++k) s = fmaf(a.v[16 * r + k], b.v[16 * k + col], s);
        c.x[e] = s;
    }
}

__device__ __forceinline__ void emu_store_c(float* p, const FragC& c, int ld)
{
    emu_check(p, ld, 4);
    const int lane = threadIdx.x % 32;
    for (int e = 0; e < 8; ++e) {
        const int idx = 32 * e + lane;
        p[(idx / 16) * ld + idx % 16] = c.x[e];
    }
}

__device__ __forceinline__ void frag_store_c(float* p, const FragC& c, int ld) { emu_store_c(p, c, ld); }
__device__ __forceinline__ void frag_store_c_global(float* p, const FragC& c, int ld) { emu_store_c(p, c, ld); }

__device__ __forceinline__ void frag_load_c_global(FragC& c, const float* p, int ld)
{
    emu_check(p, ld, 4);
    const int lane = threadIdx.x % 32;
    for (int e = 0; e < 8; ++e) {
        const int idx = 32 * e + lane;
        c.x[e] = p[(idx / 16) * ld + idx % 16];
    }
}
