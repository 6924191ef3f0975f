// Softmax with one block per row: grid = rows, blockDim.x a multiple of 32 (at most 1024). The
// threads of a block stride over their row and a block reduction combines them. Row-major
// rows x cols matrices; x and y must not overlap.
//
// softmax_block_3pass    float. Three passes over the row in global memory: max, sum of
//                        exponentials, write. Reads the row three times.
// softmax_block_online   One pass computes the row's max and sum together (online softmax),
//                        a second pass writes. Reads the row twice.
// softmax_block_cached   The row is read once into registers (ITEMS per thread, THREADS
//                        threads, cols <= THREADS * ITEMS), and written from there.
// softmax_block_smem     The row is read once into shared memory (cols * sizeof(T) bytes of
//                        dynamic shared memory, rounded up to 16), and written from there.
//
// T is float or unsigned short (the bits of an fp16 value); arithmetic is in float. Rows move in
// 16-byte packs when both matrices start on a 16-byte boundary and cols is a multiple of the
// pack (4 floats, 8 halves); otherwise one element at a time.
//
// name_expressions: softmax_block_online<float>, softmax_block_online<unsigned short>
// name_expressions: softmax_block_cached<float, 128, 16>, softmax_block_cached<float, 256, 16>
// name_expressions: softmax_block_cached<float, 512, 16>
// name_expressions: softmax_block_cached<float, 1024, 16>, softmax_block_cached<float, 1024, 32>
// name_expressions: softmax_block_cached<float, 128, 32>, softmax_block_cached<float, 512, 8>
// name_expressions: softmax_block_cached<float, 1024, 4>
// name_expressions: softmax_block_cached<unsigned short, 128, 16>
// name_expressions: softmax_block_cached<unsigned short, 256, 16>
// name_expressions: softmax_block_cached<unsigned short, 512, 16>
// name_expressions: softmax_block_cached<unsigned short, 1024, 16>
// name_expressions: softmax_block_cached<unsigned short, 1024, 32>
// name_expressions: softmax_block_smem<float>, softmax_block_smem<unsigned short>
#include "softmax/softmax_common.cuh"

extern "C" __global__ void softmax_block_3pass(const float* __restrict__ x, float* __restrict__ y, int cols)
{
    const long long offset = (long long)blockIdx.x * cols;
    const float* row = x + offset;
    float m = LOWEST;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_max(m);                                          // pass 1: the max
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(row[j] - m);
    const float inv = inverse_or_zero(block_sum(s));           // pass 2: the sum
    for (int j = threadIdx.x; j < cols; j += blockDim.x)       // pass 3: the output
        y[offset + j] = expf(row[j] - m) * inv;
}

// Both passes take U packs (16 elements: four float packs or two half packs) per iteration, so that
// several 16-byte loads are in flight before the arithmetic that needs them, and pass 1 rescales d
// once per 16 elements.
template <typename T>
__global__ void __launch_bounds__(1024) softmax_block_online(const T* __restrict__ x, T* __restrict__ y, int cols)
{
    constexpr int N = Pack<T>::N, U = 16 / N;                 // U packs = 16 elements per step
    const long long offset = (long long)blockIdx.x * cols;
    const T* row = x + offset;
    T* out = y + offset;
    const bool packed = rows_are_packed(x, y, cols);
    const int packs = cols / N, stride = blockDim.x;

    MaxSum s = {LOWEST, 0.0f};                                 // pass 1: max and sum together
    if (packed) {
        int p = threadIdx.x;
        for (; p + (U - 1) * stride < packs; p += U * stride) {
            float v[U * N];
#pragma unroll
            for (int u = 0; u < U; ++u) load16(row + (p + u * stride) * N, v + u * N);
            online_update<U * N>(s, v);
        }
        for (; p < packs; p += stride) {
            float v[N];
            load16(row + p * N, v);
            online_update<N>(s, v);
        }
    } else {
        for (int j = threadIdx.x; j < cols; j += stride) {
            const float v = to_float(row[j]);
            online_update<1>(s, &v);
        }
    }
    s = block_merge(s);
    const float inv = inverse_or_zero(s.d);

    if (packed) {                                              // pass 2: the output
        int p = threadIdx.x;
        for (; p + (U - 1) * stride < packs; p += U * stride) {
            float v[U * N];
#pragma unroll
            for (int u = 0; u < U; ++u) load16(row + (p + u * stride) * N, v + u * N);
#pragma unroll
            for (int i = 0; i < U * N; ++i) v[i] = expf(v[i] - s.m) * inv;
#pragma unroll
            for (int u = 0; u < U; ++u) store16(out + (p + u * stride) * N, v + u * N);
        }
        for (; p < packs; p += stride) {
            float v[N];
            load16(row + p * N, v);
#pragma unroll
            for (int i = 0; i < N; ++i) v[i] = expf(v[i] - s.m) * inv;
            store16(out + p * N, v);
        }
    } else {
        for (int j = threadIdx.x; j < cols; j += stride)
            out[j] = from_float<T>(expf(to_float(row[j]) - s.m) * inv);
    }
}

// THREADS threads (the launch must use blockDim.x == THREADS), each keeping ITEMS elements in
// registers: packs k * THREADS + threadIdx.x (k < ITEMS / N) of the row, or elements
// k * THREADS + threadIdx.x (k < ITEMS) on the one-element path; cols <= THREADS * ITEMS. Slots
// past the end of the row hold -inf, which adds nothing. The block size is a template parameter
// so that every offset k * THREADS is a compile-time constant. The thread first computes its own
// state exactly (its max, then its exponentials, kept in place of the elements); one block_merge
// gives the row's state; every exponential is rescaled by exp(m_thread - m_row) / d_row on the
// way out: one exponential per element in all.
template <typename T, int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS) softmax_block_cached(const T* __restrict__ x, T* __restrict__ y, int cols)
{
    constexpr int N = Pack<T>::N, PACKS = ITEMS / N;
    static_assert(ITEMS % N == 0, "ITEMS must be a whole number of 16-byte packs");
    const long long offset = (long long)blockIdx.x * cols;
    const T* row = x + offset;
    T* out = y + offset;
    const bool packed = rows_are_packed(x, y, cols);
    const int packs = cols / N;

    float v[ITEMS];
    if (packed) {
#pragma unroll
        for (int k = 0; k < PACKS; ++k) {
            const int p = k * THREADS + threadIdx.x;
            if (p < packs) {
                load16(row + p * N, v + k * N);
            } else {
#pragma unroll
                for (int i = 0; i < N; ++i) v[k * N + i] = NEG_INF;
            }
        }
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int j = k * THREADS + threadIdx.x;
            v[k] = j < cols ? to_float(row[j]) : NEG_INF;
        }
    }

    MaxSum mine = {LOWEST, 0.0f};
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) mine.m = fmaxf(mine.m, v[k]);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        v[k] = expf(v[k] - mine.m);
        mine.d += v[k];
    }
    const MaxSum all = block_merge(mine);
    const float scale = expf(mine.m - all.m) * inverse_or_zero(all.d);

    if (packed) {
#pragma unroll
        for (int k = 0; k < PACKS; ++k) {
            const int p = k * THREADS + threadIdx.x;
            if (p < packs) {
#pragma unroll
                for (int i = 0; i < N; ++i) v[k * N + i] *= scale;
                store16(out + p * N, v + k * N);
            }
        }
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int j = k * THREADS + threadIdx.x;
            if (j < cols) out[j] = from_float<T>(v[k] * scale);
        }
    }
}

// Pass 1 copies the row into shared memory while it computes the online state (U packs per
// iteration, as in softmax_block_online); pass 2 reads the copy. Each thread reads back exactly
// the packs (or elements) it stored, so the copy needs no barrier of its own.
template <typename T>
__global__ void __launch_bounds__(1024) softmax_block_smem(const T* __restrict__ x, T* __restrict__ y, int cols)
{
    constexpr int N = Pack<T>::N, U = 16 / N;
    extern __shared__ uint4 cache[];                           // the row, in 16-byte packs
    T* cached = reinterpret_cast<T*>(cache);
    const long long offset = (long long)blockIdx.x * cols;
    const T* row = x + offset;
    T* out = y + offset;
    const bool packed = rows_are_packed(x, y, cols);
    const int packs = cols / N, stride = blockDim.x;
    const uint4* row16 = reinterpret_cast<const uint4*>(row);

    MaxSum s = {LOWEST, 0.0f};
    if (packed) {
        int p = threadIdx.x;
        for (; p + (U - 1) * stride < packs; p += U * stride) {
            uint4 raw[U];
#pragma unroll
            for (int u = 0; u < U; ++u) raw[u] = __ldg(row16 + p + u * stride);
            float v[U * N];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                cache[p + u * stride] = raw[u];
                unpack16(raw[u], v + u * N, T());
            }
            online_update<U * N>(s, v);
        }
        for (; p < packs; p += stride) {
            const uint4 raw = __ldg(row16 + p);
            cache[p] = raw;
            float v[N];
            unpack16(raw, v, T());
            online_update<N>(s, v);
        }
    } else {
        for (int j = threadIdx.x; j < cols; j += stride) {
            const T e = row[j];
            cached[j] = e;
            const float v = to_float(e);
            online_update<1>(s, &v);
        }
    }
    s = block_merge(s);
    const float inv = inverse_or_zero(s.d);

    if (packed) {
        for (int p = threadIdx.x; p < packs; p += stride) {
            float v[N];
            unpack16(cache[p], v, T());
#pragma unroll
            for (int i = 0; i < N; ++i) v[i] = expf(v[i] - s.m) * inv;
            store16(out + p * N, v);
        }
    } else {
        for (int j = threadIdx.x; j < cols; j += stride)
            out[j] = from_float<T>(expf(to_float(cached[j]) - s.m) * inv);
    }
}
