// The pieces of the tensor-core GEMM kernels (rung 8): fp16 A and B, fp32 accumulation and C.
//
// fp16 values travel as their 16-bit patterns (unsigned short): the kernels never compute with
// them, they only copy them into shared memory and hand them to the tensor cores.
//
// A block computes a BM x BN tile of C with (BM / WM) x (BN / WN) warps; each warp owns a
// WM x WN sub-tile as (WM / 16) x (WN / 16) accumulator fragments. Shared memory per stage:
//   A tile  BM x BK halves, row-major with pitch BK + 8   (A_LD)
//   B tile  BK x BN halves, row-major with pitch BN + 8   (B_LD)
// The 8 extra halves (16 bytes) shift consecutive rows by four banks, so the eight 16-byte rows
// that one step of a fragment load reads fall into different banks; they also keep every
// fragment's first element 32-byte aligned, as the fragment loads require.
#pragma once
#include "gemm/gemm_common.cuh"
#include "gemm/wmma_ptx.cuh"

template <int BM, int BN, int BK>
struct WmmaSmem {
    static constexpr int A_LD = BK + 8, B_LD = BN + 8;
    static constexpr int A_HALVES = BM * A_LD, B_HALVES = BK * B_LD;
    static constexpr int STAGE_HALVES = A_HALVES + B_HALVES;
};

// Eight consecutive halves (row, col .. col + 7) of a row-major fp16 matrix with `rows` x `cols`
// valid elements and pitch ld, zero outside. vec (uniform over the grid): ld % 8 == 0,
// cols % 8 == 0 and P 16-byte aligned, so that the eight are all inside or all outside and one
// 16-byte load fetches them.
__device__ __forceinline__ uint4 load8_half(const unsigned short* __restrict__ P, int ld, int rows, int cols,
                                            int row, int col, bool vec)
{
    if (vec) {
        if (row < rows && col < cols)
            return __ldg(reinterpret_cast<const uint4*>(P + (long long)row * ld + col));
        return make_uint4(0u, 0u, 0u, 0u);
    }
    unsigned h[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
        h[j] = (row < rows && col + j < cols) ? __ldg(P + (long long)row * ld + col + j) : 0u;
    return make_uint4(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16), h[6] | (h[7] << 16));
}

// One BK-deep step of the warp's WM x WN sub-tile: for each 16-wide slice of k, load the warp's
// WN / 16 fragments of B, then for each of its WM / 16 fragments of A do WN / 16 products.
template <int BK, int WM, int WN, int A_LD, int B_LD>
__device__ __forceinline__ void warp_mma_step(const unsigned short* As, const unsigned short* Bs,
                                              FragC (&acc)[WM / 16][WN / 16])
{
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
        FragB b[WN / 16];
#pragma unroll
        for (int j = 0; j < WN / 16; ++j) frag_load_b(b[j], Bs + kk * B_LD + 16 * j, B_LD);
#pragma unroll
        for (int i = 0; i < WM / 16; ++i) {
            FragA a;
            frag_load_a(a, As + 16 * i * A_LD + kk, A_LD);
#pragma unroll
            for (int j = 0; j < WN / 16; ++j) frag_mma(acc[i][j], a, b[j]);
        }
    }
}

// The epilogue, one warp at a time and one fragment at a time: the fragment goes to the warp's
// 16 x 16 scratch tile in shared memory (its layout in registers is unspecified), then each lane
// writes 8 of its elements, C = alpha * acc + beta * C with C not read when beta == 0.
// `scratch` is 16 x 20 floats (1280 bytes, 32-byte aligned) that only this warp uses.
template <int WM, int WN>
__device__ __forceinline__ void warp_store(float* __restrict__ C, int M, int N, int row0, int col0,
                                           FragC (&acc)[WM / 16][WN / 16], float* scratch,
                                           float alpha, float beta)
{
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < WM / 16; ++i)
#pragma unroll
        for (int j = 0; j < WN / 16; ++j) {
            frag_store_c(scratch, acc[i][j], 20);
            __syncwarp();
#pragma unroll
            for (int e = lane; e < 256; e += 32) {           // lanes 0-15 and 16-31: two rows
                const int r = e / 16, c = e % 16;
                const int row = row0 + 16 * i + r, col = col0 + 16 * j + c;
                if (row < M && col < N) store_c(C, (long long)row * N + col, scratch[r * 20 + c], alpha, beta);
            }
            __syncwarp();                                   // before the next fragment overwrites it
        }
}
