// Building blocks shared by the GEMM kernels of the "GEMM" chapter.
//
// Every kernel computes C = alpha * A * B + beta * C with row-major A (M x K), B (K x N) and
// C (M x N), for any M, N, K >= 1. Sizes are int: M * K, K * N and M * N must stay below 2^31
// (the Python launchers refuse larger problems).
//
// store_c        the epilogue of one element; with beta == 0 the old C is never read.
// store_c4       the same for four consecutive elements (16-byte aligned).
// load4          four consecutive elements of a row of a row-major matrix, zero outside it,
//                with one 16-byte load when `vec` says that this is safe.
// block_tile     which output tile a block computes, in an order that keeps L2 warm.
#pragma once

// BLAS semantics: beta == 0 means "overwrite C", so C is not read and whatever it held, NaN
// included, cannot reach the result (0 * NaN would be NaN).
__device__ __forceinline__ void store_c(float* C, long long index, float acc, float alpha, float beta)
{
    if (beta == 0.0f) C[index] = alpha * acc;
    else              C[index] = alpha * acc + beta * C[index];
}

__device__ __forceinline__ void store_c4(float* c, float4 acc, float alpha, float beta)
{
    float4 v = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
    if (beta != 0.0f) {
        const float4 old = *reinterpret_cast<const float4*>(c);
        v.x += beta * old.x; v.y += beta * old.y; v.z += beta * old.z; v.w += beta * old.w;
    }
    *reinterpret_cast<float4*>(c) = v;
}

// True when p is 16-byte aligned, as a float4 load or store from it requires.
__device__ __forceinline__ bool aligned16(const void* p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// Elements (row, col .. col + 3) of a row-major matrix with `rows` x `cols` valid elements and
// row pitch `ld`; elements outside it read as 0. `vec` must be uniform over the grid and true only
// when ld % 4 == 0, cols % 4 == 0 (or the matrix ends exactly at cols) and P is 16-byte aligned:
// then col % 4 == 0 makes the four elements either all inside or all outside, and one 16-byte
// load (LDG.128) fetches them. Otherwise four checked 4-byte loads do.
__device__ __forceinline__ float4 load4(const float* __restrict__ P, int ld, int rows, int cols,
                                        int row, int col, bool vec)
{
    if (vec) {
        if (row < rows && col < cols)
            return __ldg(reinterpret_cast<const float4*>(P + (long long)row * ld + col));
        return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < rows) {
        const float* p = P + (long long)row * ld;
        if (col + 0 < cols) v.x = __ldg(p + col + 0);
        if (col + 1 < cols) v.y = __ldg(p + col + 1);
        if (col + 2 < cols) v.z = __ldg(p + col + 2);
        if (col + 3 < cols) v.w = __ldg(p + col + 3);
    }
    return v;
}

// The output tile (tile_m, tile_n) of block `bid` on a 1-D grid of tiles_m * tiles_n blocks.
// Blocks run roughly in the order of their index. Row by row (tile_n fastest), one wave of blocks
// would need all of B at once; in groups of GROUP tile rows, a wave covers a compact patch of C,
// so the rows of A and the columns of B it needs are fewer and more of them stay in L2.
template <int GROUP>
__device__ __forceinline__ void block_tile(int bid, int tiles_m, int tiles_n, int& tile_m, int& tile_n)
{
    const int per_group = GROUP * tiles_n;
    const int first_m = (bid / per_group) * GROUP;
    const int rows = min(tiles_m - first_m, GROUP);      // the last group may be shorter
    const int in_group = bid % per_group;
    tile_m = first_m + in_group % rows;
    tile_n = in_group / rows;
}
