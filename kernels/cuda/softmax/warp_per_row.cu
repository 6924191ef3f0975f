// Softmax with one warp per row, for short rows: a block of blockDim.x threads (a multiple of 32)
// handles blockDim.x / 32 rows (times ROWS for softmax_warp_cached), and the lanes of a warp
// combine their values with shuffles alone: no shared memory, no __syncthreads(). Row-major
// rows x cols matrices; x and y must not overlap.
//
// softmax_warp_online   Any cols. Each lane keeps an online state over its elements (16 at a
//                       time); a butterfly merges the 32 states; a second pass writes. Reads the
//                       row twice.
// softmax_warp_cached   cols <= 32 * ITEMS. Each lane keeps ITEMS elements of each of its warp's
//                       ROWS rows in registers; the row is read once. With the row in registers
//                       the max and the sum are two exact warp reductions, one after the other.
//                       Loading all ROWS rows before reducing any keeps more loads in flight.
//
// T is float or unsigned short (the bits of an fp16 value); arithmetic is in float. Rows move in
// 16-byte packs when both matrices start on a 16-byte boundary and cols is a multiple of the
// pack (4 floats, 8 halves); otherwise one element at a time.
//
// name_expressions: softmax_warp_online<float>, softmax_warp_online<unsigned short>
// name_expressions: softmax_warp_cached<float, 4, 1>, softmax_warp_cached<float, 4, 2>
// name_expressions: softmax_warp_cached<float, 4, 4>
// name_expressions: softmax_warp_cached<float, 8, 1>, softmax_warp_cached<float, 8, 2>
// name_expressions: softmax_warp_cached<float, 16, 1>, softmax_warp_cached<float, 32, 1>
// name_expressions: softmax_warp_cached<unsigned short, 8, 1>
// name_expressions: softmax_warp_cached<unsigned short, 8, 2>
// name_expressions: softmax_warp_cached<unsigned short, 16, 1>
// name_expressions: softmax_warp_cached<unsigned short, 32, 1>
#include "softmax/softmax_common.cuh"

template <typename T>
__global__ void softmax_warp_online(const T* __restrict__ x, T* __restrict__ y, int rows, int cols)
{
    constexpr int N = Pack<T>::N, U = 16 / N;                 // U packs = 16 elements per step
    const int lane = threadIdx.x & 31;
    const long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= rows) return;                                     // the whole warp leaves together
    const T* row = x + r * cols;
    T* out = y + r * cols;
    const bool packed = rows_are_packed(x, y, cols);
    const int packs = cols / N;

    MaxSum s = {LOWEST, 0.0f};
    if (packed) {                                              // U loads in flight per lane
        int p = lane;
        for (; p + (U - 1) * 32 < packs; p += U * 32) {
            float v[U * N];
#pragma unroll
            for (int u = 0; u < U; ++u) load16(row + (p + u * 32) * N, v + u * N);
            online_update<U * N>(s, v);
        }
        for (; p < packs; p += 32) {
            float v[N];
            load16(row + p * N, v);
            online_update<N>(s, v);
        }
    } else {
        for (int j = lane; j < cols; j += 32) {
            const float v = to_float(row[j]);
            online_update<1>(s, &v);
        }
    }
    s = warp_merge(s);
    const float inv = inverse_or_zero(s.d);

    if (packed) {
        int p = lane;
        for (; p + (U - 1) * 32 < packs; p += U * 32) {
            float v[U * N];
#pragma unroll
            for (int u = 0; u < U; ++u) load16(row + (p + u * 32) * N, v + u * N);
#pragma unroll
            for (int i = 0; i < U * N; ++i) v[i] = expf(v[i] - s.m) * inv;
#pragma unroll
            for (int u = 0; u < U; ++u) store16(out + (p + u * 32) * N, v + u * N);
        }
        for (; p < packs; p += 32) {
            float v[N];
            load16(row + p * N, v);
#pragma unroll
            for (int i = 0; i < N; ++i) v[i] = expf(v[i] - s.m) * inv;
            store16(out + p * N, v);
        }
    } else {
        for (int j = lane; j < cols; j += 32) out[j] = from_float<T>(expf(to_float(row[j]) - s.m) * inv);
    }
}

// Lane l keeps packs k * 32 + l (k < ITEMS / N) of each row, or elements k * 32 + l (k < ITEMS)
// on the one-element path; slots past the end of the row hold -inf. Rows past the last one are
// computed on -inf and not stored, so every lane runs every shuffle.
template <typename T, int ITEMS, int ROWS>
__global__ void softmax_warp_cached(const T* __restrict__ x, T* __restrict__ y, int rows, int cols)
{
    constexpr int N = Pack<T>::N, PACKS = ITEMS / N;
    static_assert(ITEMS % N == 0, "ITEMS must be a whole number of 16-byte packs");
    const int lane = threadIdx.x & 31;
    const long long first = ((long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * ROWS;
    const bool packed = rows_are_packed(x, y, cols);
    const int packs = cols / N;

    float v[ROWS][ITEMS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {                           // all loads first
        const bool valid = first + r < rows;
        const T* row = x + (first + r) * cols;
        if (packed) {
#pragma unroll
            for (int k = 0; k < PACKS; ++k) {
                const int p = k * 32 + lane;
                if (valid && p < packs) {
                    load16(row + p * N, v[r] + k * N);
                } else {
#pragma unroll
                    for (int i = 0; i < N; ++i) v[r][k * N + i] = NEG_INF;
                }
            }
        } else {
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) {
                const int j = k * 32 + lane;
                v[r][k] = valid && j < cols ? to_float(row[j]) : NEG_INF;
            }
        }
    }

#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        float m = LOWEST;
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) m = fmaxf(m, v[r][k]);
        m = warp_max(m);
        float d = 0.0f;
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            v[r][k] = expf(v[r][k] - m);
            d += v[r][k];
        }
        const float inv = inverse_or_zero(warp_sum(d));
        if (first + r >= rows) continue;                       // the same for all 32 lanes
        T* out = y + (first + r) * cols;
        if (packed) {
#pragma unroll
            for (int k = 0; k < PACKS; ++k) {
                const int p = k * 32 + lane;
                if (p < packs) {
#pragma unroll
                    for (int i = 0; i < N; ++i) v[r][k * N + i] *= inv;
                    store16(out + p * N, v[r] + k * N);
                }
            }
        } else {
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) {
                const int j = k * 32 + lane;
                if (j < cols) out[j] = from_float<T>(v[r][k] * inv);
            }
        }
    }
}
