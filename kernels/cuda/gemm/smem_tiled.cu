// Rung 2 of the GEMM ladder: shared-memory tiling. C = alpha * A * B + beta * C, row-major,
// any M, N, K >= 1.
//
// A block of TILE x TILE threads computes a TILE x TILE tile of C, one element per thread, like
// the naive kernel. The K loop walks in steps of TILE: the block first copies a TILE x TILE tile
// of A and one of B into shared memory (each thread one element of each, coalesced), waits, and
// then every thread reads TILE values of A and TILE of B from shared memory. Each element loaded
// from global memory is used TILE times: global traffic drops by a factor TILE.
//
// Elements outside A or B are stored as 0, so the tiles at the edges need no other special case
// and the sum over k is unchanged. Two barriers per step: after the copy (the tile is complete)
// and after the products (nobody still reads the tile the next copy overwrites).
//
// Bank conflicts: at one k the 32 lanes of a warp (same ty when TILE = 32) read one word of As
// (a broadcast) and 32 consecutive words of Bs (32 banks): none, so padding Bs would not help.
//
// Launch: block (TILE, TILE), grid (ceil(N / TILE), ceil(M / TILE)).
//
// name_expressions: gemm_smem<16>, gemm_smem<32>
#include "gemm/gemm_common.cuh"

template <int TILE>
__global__ void __launch_bounds__(TILE * TILE)
gemm_smem(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
          int M, int N, int K, float alpha, float beta)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k)
            acc = fmaf(As[ty][k], Bs[k][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N) store_c(C, (long long)row * N + col, acc, alpha, beta);
}
