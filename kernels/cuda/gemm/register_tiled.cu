// Rung 3 of the GEMM ladder: register tiling. C = alpha * A * B + beta * C, row-major,
// any M, N, K >= 1.
//
// A block computes a BM x BN tile of C; per step of BK along K it copies a BM x BK tile of A
// (as it is, As[m][k]) and a BK x BN tile of B into shared memory with scalar, coalesced loads
// (zero outside the matrices), then every thread accumulates several outputs in registers.
//
// gemm_1d: BM * BN / TM threads; thread t owns column t % BN and the TM consecutive rows starting
//   at (t / BN) * TM. At each k it reads one value of B and reuses it for TM products: per FMA it
//   reads 1 + 1 / TM shared words instead of 2.
// gemm_2d: (BM / TM) * (BN / TN) threads; thread (ty, tx) owns a TM x TN tile (rows ty * TM..,
//   columns tx * TN..). At each k it reads TM values of A and TN of B into registers and does
//   their outer product, TM * TN FMAs for TM + TN shared reads.
//
// Launch: block BM * BN / TM (gemm_1d) or (BM / TM) * (BN / TN) (gemm_2d) threads,
// grid (ceil(N / BN), ceil(M / BM)).
//
// name_expressions: gemm_1d<64, 64, 8, 8>, gemm_2d<64, 64, 8, 4, 4>, gemm_2d<128, 128, 8, 8, 8>
#include "gemm/gemm_common.cuh"

// Copy the BM x BK tile of A at (m0, k0) and the BK x BN tile of B at (k0, n0) into shared
// memory, zero outside the matrices. Consecutive threads copy consecutive elements of a row.
template <int BM, int BN, int BK, int THREADS>
__device__ __forceinline__ void copy_tiles(const float* __restrict__ A, const float* __restrict__ B,
                                           float* As, float* Bs, int M, int N, int K, int m0, int n0, int k0)
{
    for (int i = threadIdx.x; i < BM * BK; i += THREADS) {
        const int r = i / BK, c = i % BK;
        As[i] = (m0 + r < M && k0 + c < K) ? A[(m0 + r) * K + k0 + c] : 0.0f;
    }
    for (int i = threadIdx.x; i < BK * BN; i += THREADS) {
        const int r = i / BN, c = i % BN;
        Bs[i] = (k0 + r < K && n0 + c < N) ? B[(k0 + r) * N + n0 + c] : 0.0f;
    }
}

template <int BM, int BN, int BK, int TM>
__global__ void __launch_bounds__(BM * BN / TM)
gemm_1d(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
        int M, int N, int K, float alpha, float beta)
{
    constexpr int THREADS = BM * BN / TM;
    __shared__ float As[BM * BK], Bs[BK * BN];
    const int col = threadIdx.x % BN, row0 = (threadIdx.x / BN) * TM;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    float acc[TM] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        copy_tiles<BM, BN, BK, THREADS>(A, B, As, Bs, M, N, K, m0, n0, k0);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k * BN + col];               // one read of B, TM products
#pragma unroll
            for (int i = 0; i < TM; ++i)
                acc[i] = fmaf(As[(row0 + i) * BK + k], b, acc[i]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
        if (m0 + row0 + i < M && n0 + col < N)
            store_c(C, (long long)(m0 + row0 + i) * N + n0 + col, acc[i], alpha, beta);
}

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_2d(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
        int M, int N, int K, float alpha, float beta)
{
    constexpr int THREADS = (BM / TM) * (BN / TN);
    __shared__ float As[BM * BK], Bs[BK * BN];
    const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        copy_tiles<BM, BN, BK, THREADS>(A, B, As, Bs, M, N, K, m0, n0, k0);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[(ty * TM + i) * BK + k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k * BN + tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)                    // the outer product a b^T
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = m0 + ty * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = n0 + tx * TN + j;
            if (row < M && col < N) store_c(C, (long long)row * N + col, acc[i][j], alpha, beta);
        }
    }
}
