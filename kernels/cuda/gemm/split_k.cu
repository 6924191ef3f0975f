// Split-K: when C is too small to give every SM a block (few output tiles) but K is long, split
// the K loop itself over SPLITS blocks per output tile, then add their partial products.
// C = alpha * A * B + beta * C, row-major, any M, N, K >= 1.
//
// gemm_split_k_partial: block (x, y, z) computes the BM x BN tile (y, x) of the product over
//   k in [z * k_chunk, min(K, (z + 1) * k_chunk)) with rung 6's main loop, and writes it to
//   workspace slice z: W[z * M * N + row * N + col]. k_chunk must be a positive multiple of BK
//   (the launcher makes it so; then every float4 of A is inside one slice or outside it).
// split_k_reduce: C = alpha * (W[0] + W[1] + ... + W[SPLITS - 1]) + beta * C, in this fixed
//   order, so the result does not depend on which blocks finished first (unlike atomicAdd into
//   C, the other common way to combine the slices).
//
// Launch: partial: block (BM / TM) * (BN / TN), grid (ceil(N / BN), ceil(M / BM), splits),
//   dynamic shared memory 2 * BK * (BM + BN) * 4 bytes; reduce: any 1-D grid covering M * N.
//
// name_expressions: gemm_split_k_partial<128, 128, 8, 8, 8>, gemm_split_k_partial<64, 64, 16, 4, 4>
// name_expressions: gemm_split_k_partial<128, 64, 16, 8, 4>
#include "gemm/simt_tiles.cuh"

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), min_blocks((BM / TM) * (BN / TN), BM, BN, BK, TM, TN, true))
gemm_split_k_partial(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ W,
                     int M, int N, int K, int k_chunk)
{
    constexpr int THREADS = (BM / TM) * (BN / TN);
    extern __shared__ __align__(16) float smem[];

    const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
    int row_base[TM / 4], col_base[TN / 4];
#pragma unroll
    for (int q = 0; q < TM / 4; ++q) row_base[q] = q * (4 * BM / TM) + 4 * ty;
#pragma unroll
    for (int q = 0; q < TN / 4; ++q) col_base[q] = q * (4 * BN / TN) + 4 * tx;

    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int k_begin = blockIdx.z * k_chunk;
    const int k_end = min(K, k_begin + k_chunk);
    const bool a_vec = (K % 4 == 0) && (k_chunk % 4 == 0) && aligned16(A);
    const bool b_vec = (N % 4 == 0) && aligned16(B);
    float acc[TM][TN] = {};
    mainloop_double_buffered<BM, BN, BK, TM, TN, THREADS, 2>(A, B, M, N, K, m0, n0, k_begin, k_end, smem,
                                                             acc, row_base, col_base, a_vec, b_vec);
    store_tile<TM, TN>(W + (long long)blockIdx.z * M * N, M, N, m0, n0, acc, row_base, col_base, 1.0f, 0.0f);
}

extern "C" __global__ void split_k_reduce(const float* __restrict__ W, float* __restrict__ C,
                                          int M, int N, int splits, float alpha, float beta)
{
    const long long size = (long long)M * N;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < size;
         i += (long long)gridDim.x * blockDim.x) {
        float sum = 0.0f;
        for (int z = 0; z < splits; ++z) sum += W[z * size + i];
        store_c(C, i, sum, alpha, beta);
    }
}
