// wgmma: the warpgroup-wide tensor-core instruction of Hopper (sm_90a only; PTX ISA,
// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate").
//
// The four warps of a warpgroup (128 consecutive threads, the first a multiple of 128) issue one
// wgmma.mma_async together: D (64 x N, fp32, in registers spread over the 128 threads) += A (64 x 16)
// times B (16 x N), with A and B read straight from shared memory through 64-bit matrix
// descriptors. It is asynchronous: wgmma.fence orders earlier register accesses to D before it,
// wgmma.commit_group closes the issued operations into a group, and wgmma.wait_group N waits until
// at most N groups are pending; only then may D be read or A and B's shared memory be overwritten.
//
// Descriptor ("Matrix Descriptor Format"): bits 0-13 the start address >> 4, bits 16-29 the
// leading-dimension byte offset >> 4, bits 32-45 the stride-dimension byte offset >> 4, bits 49-51
// the base offset (0 for tiles aligned to the swizzle's 1024-byte repeat), bits 62-63 the swizzle
// (0 none, 1 128-byte, 2 64-byte, 3 32-byte). kernels/hopper.py encodes the same fields in Python.
//
// The layout used here is the one a TMA load with the 128-byte swizzle leaves: a K-major tile whose
// rows are 64 halves (128 bytes) long, row r at byte 128 r with its 16-byte chunk c stored at chunk
// c ^ (r % 8). Groups of 8 rows (1024 bytes) follow one another: stride-dimension offset 1024. The
// leading-dimension offset is unused for swizzled K-major tiles (set to 1 by convention). The k-th
// 16-wide slice of K starts 32 k bytes into the tile: the descriptor's address advances by 32 bytes
// and the hardware applies the swizzle to the full address, which is why tiles are 1024-aligned.
#pragma once

#include "hopper/tma.cuh"

__host__ __device__ constexpr unsigned long long wgmma_descriptor(unsigned address, unsigned leading_bytes,
                                                                  unsigned stride_bytes, unsigned swizzle_mode)
{
    return (static_cast<unsigned long long>((address & 0x3FFFF) >> 4))
         | (static_cast<unsigned long long>((leading_bytes >> 4) & 0x3FFF) << 16)
         | (static_cast<unsigned long long>((stride_bytes >> 4) & 0x3FFF) << 32)
         | (static_cast<unsigned long long>(swizzle_mode & 0x3) << 62);
}

// A K-major tile of 64-half rows, 128-byte swizzled, starting at shared address `address`.
__host__ __device__ constexpr unsigned long long wgmma_descriptor_sw128(unsigned address)
{
    return wgmma_descriptor(address, 16, 1024, 1);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit_group()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_wait_group()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}

// Warp specialisation's register split (setmaxnreg): every thread of the warpgroup executes the
// same instruction; .dec gives registers back to the SM's pool, .inc waits until the pool can grant
// the new count. The counts are multiples of 8 in 24..256.
template <int REGISTERS>
__device__ __forceinline__ void warpgroup_release_registers()
{
    static_assert(REGISTERS % 8 == 0 && REGISTERS >= 24 && REGISTERS <= 256, "setmaxnreg: 24..256, multiple of 8");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(REGISTERS));
}

template <int REGISTERS>
__device__ __forceinline__ void warpgroup_claim_registers()
{
    static_assert(REGISTERS % 8 == 0 && REGISTERS >= 24 && REGISTERS <= 256, "setmaxnreg: 24..256, multiple of 8");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(REGISTERS));
}

// Ties the accumulator registers to this point of the program: the compiler may not move their
// reads and writes across it (used around wgmma_wait_group, which it cannot see touching them).
template <int R>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}

// d (64 x N, fp32: N / 2 registers per thread) += A (64 x 16, fp16, K-major) * B (16 x N, fp16,
// K-major: B^T is N x 16 row-major), both from shared memory through descriptors; with
// accumulate = 0, d = A * B instead. A and B unscaled, not transposed (both K-major). N = 128 or 256.
template <int N>
__device__ __forceinline__ void wgmma_m64nNk16_f32_f16(float (&d)[N / 2], unsigned long long desc_a,
                                                       unsigned long long desc_b, int accumulate = 1);

template <>
__device__ __forceinline__ void wgmma_m64nNk16_f32_f16<128>(float (&d)[64], unsigned long long desc_a,
                                                          unsigned long long desc_b, int accumulate)
{
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "setp.ne.b32 p, %66, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},"
        " %64, %65, p, 1, 1, 0, 0;\n\t"
        "}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

template <>
__device__ __forceinline__ void wgmma_m64nNk16_f32_f16<256>(float (&d)[128], unsigned long long desc_a,
                                                          unsigned long long desc_b, int accumulate)
{
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "setp.ne.b32 p, %130, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127},"
        " %128, %129, p, 1, 1, 0, 0;\n\t"
        "}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// Where register i (0..N/2 - 1) of thread t of a warpgroup sits in the 64 x N accumulator: warp
// t / 32 owns rows 16 (t / 32) .. + 15; within the warp the layout of mma.sync's m16n8 C fragment
// repeats along N, one 8-column block per four registers.
__host__ __device__ constexpr int wgmma_accumulator_row(int thread, int i)
{
    return 16 * (thread / 32) + (thread % 32) / 4 + 8 * ((i / 2) % 2);
}

__host__ __device__ constexpr int wgmma_accumulator_col(int thread, int i)
{
    return 8 * (i / 4) + 2 * (thread % 4) + (i % 2);
}

// Stores a warpgroup's 64 x (2 R) accumulator at rows row0.., columns col0.. of C (M x N row-major
// fp32), skipping what falls outside C; two neighbouring columns at once where C allows.
template <int R>
__device__ __forceinline__ void store_accumulator(const float (&d)[R], float* C, int M, int N, int row0, int col0)
{
    const int t = threadIdx.x % 128;
    const bool pairs = (N % 2) == 0;
#pragma unroll
    for (int i = 0; i < R; i += 2) {
        const int row = row0 + wgmma_accumulator_row(t, i);
        const int col = col0 + wgmma_accumulator_col(t, i);
        if (row >= M) continue;
        float* out = C + static_cast<long long>(row) * N + col;
        if (pairs && col + 1 < N) {
            *reinterpret_cast<float2*>(out) = make_float2(d[i], d[i + 1]);
        } else {
            if (col < N) out[0] = d[i];
            if (col + 1 < N) out[1] = d[i + 1];
        }
    }
}
