// Single-head attention O = softmax(Q K^T * scale) V, float32, row-major Q (n_q x D),
// K and V (n_k x D), O (n_q x D), computed the FlashAttention way: the n_q x n_k matrix of scores
// is never stored. Keys are visited in tiles of 32; for each tile a query keeps the online-softmax
// state (m, l) of the scores seen so far and an output accumulator o, and when the running max
// grows from m to m', both l and o are rescaled by exp(m - m'). At the end O = o / l.
//
// One warp per query row, WARPS warps per block (blockDim.x = 32 * WARPS, grid =
// ceil(n_q / WARPS)). Per tile the block stages 32 rows of K and of V in shared memory; lane j
// computes the score of key j of the tile (a dot product of length D), and each lane accumulates
// the output dimensions lane, lane + 32, ... (D / 32 of them). With causal != 0, query i sees only
// keys j <= i; a query that sees no key (only possible when n_k == 0) gets a zero row.
//
// A teaching kernel: plain float FMAs, no tensor cores. It shows the algorithm and its memory
// footprint (O(n D) instead of O(n^2)), not the speed of FlashAttention's implementations.
//
// name_expressions: flash_attention_forward<32, 8>, flash_attention_forward<64, 8>
// name_expressions: flash_attention_forward<128, 8>
#include "softmax/softmax_common.cuh"

template <int D, int WARPS>
__global__ void __launch_bounds__(32 * WARPS) flash_attention_forward(
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    float* __restrict__ o, int n_q, int n_k, float scale, int causal)
{
    static_assert(D % 32 == 0 && D <= 128, "D must be 32, 64, 96 or 128");
    constexpr int THREADS = 32 * WARPS, PER_LANE = D / 32;
    __shared__ float k_tile[32][D + 1];          // +1: lane j reads row j, so rows land in different banks
    __shared__ float v_tile[32][D];
    __shared__ float q_rows[WARPS][D];

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int i = blockIdx.x * WARPS + warp;     // this warp's query
    const bool active = i < n_q;
    if (active)
        for (int t = lane; t < D; t += 32) q_rows[warp][t] = q[(long long)i * D + t];

    // keys this block needs: all of them, or (causal) up to its last query
    const int last_query = min(n_q - 1, (int)blockIdx.x * WARPS + WARPS - 1);
    const int key_end = causal ? min(n_k, last_query + 1) : n_k;

    float m = LOWEST, l = 0.0f, acc[PER_LANE];
#pragma unroll
    for (int c = 0; c < PER_LANE; ++c) acc[c] = 0.0f;

    for (int base = 0; base < key_end; base += 32) {
        __syncthreads();                         // the previous tile is no longer read
        for (int e = threadIdx.x; e < 32 * D; e += THREADS) {
            const int r = e / D, c = e % D;
            const bool in = base + r < n_k;
            k_tile[r][c] = in ? k[(long long)(base + r) * D + c] : 0.0f;
            v_tile[r][c] = in ? v[(long long)(base + r) * D + c] : 0.0f;
        }
        __syncthreads();
        if (!active) continue;                   // the whole warp: i is the same for all lanes

        const int j = base + lane;               // this lane's key
        float s = NEG_INF;
        if (j < n_k && (!causal || j <= i)) {
            float dot = 0.0f;
#pragma unroll 8
            for (int t = 0; t < D; ++t) dot += q_rows[warp][t] * k_tile[lane][t];
            s = dot * scale;
        }
        const float m_new = fmaxf(m, warp_max(s));
        const float p = expf(s - m_new);         // 0 for a masked key
        const float correction = expf(m - m_new);
        l = l * correction + warp_sum(p);
#pragma unroll
        for (int c = 0; c < PER_LANE; ++c) acc[c] *= correction;
        for (int jj = 0; jj < 32; ++jj) {        // acc += p_jj * V[jj], p_jj broadcast from lane jj
            const float pj = __shfl_sync(FULL_MASK, p, jj);
#pragma unroll
            for (int c = 0; c < PER_LANE; ++c) acc[c] += pj * v_tile[jj][lane + 32 * c];
        }
        m = m_new;
    }
    if (active) {
        const float inv = inverse_or_zero(l);
#pragma unroll
        for (int c = 0; c < PER_LANE; ++c) o[(long long)i * D + lane + 32 * c] = acc[c] * inv;
    }
}
