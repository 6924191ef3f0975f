// Rotary position embedding (RoPE) three ways: the angle tables in __constant__ memory, the same
// tables in global memory, and no table at all.
//
// x and out are [batch][seq][heads][pairs] float2, row-major: each head vector of 2 * pairs floats
// is a list of pairs (x0, x1). The pair p of a vector at position m is rotated by the angle
// m * theta[p], with theta[p] = base^(-2p / (2 * pairs)):
//     out = (x0 cos - x1 sin, x0 sin + x1 cos).
// The tables hold cos and sin of m * theta[p] at entry m * pairs + p, for m < seq.
//
// One thread rotates one pair; consecutive threads take consecutive pairs of a head vector. So the
// 32 lanes of a warp read 32 different table entries at every table load. The constant cache
// serves one address per pass (CUDA C++ Programming Guide, constant memory), so rope_constant's
// table loads are serialised into 32 passes, while the global tables are read through L1 like any
// other 128 contiguous bytes. rope_sincos computes the angle instead: only theta, pairs floats, is
// read.
//
// batch * seq * heads * pairs < 2^31; rope_constant needs seq * pairs <= ROPE_TABLE_ENTRIES.
// Fill rope_cos_c and rope_sin_c from the host (CuPy: RawModule.get_global).
#define ROPE_TABLE_ENTRIES 4096

__constant__ float rope_cos_c[ROPE_TABLE_ENTRIES];
__constant__ float rope_sin_c[ROPE_TABLE_ENTRIES];

__device__ float2 rotate(float2 v, float c, float s)
{
    return make_float2(v.x * c - v.y * s, v.x * s + v.y * c);
}

// The pair index t of the whole tensor -> table entry m * pairs + p.
__device__ int table_entry(int t, int seq, int heads, int pairs)
{
    int p = t % pairs;
    int m = (t / pairs / heads) % seq;
    return m * pairs + p;
}

extern "C" __global__ void rope_constant(const float2* __restrict__ x, float2* __restrict__ out,
                                         int seq, int heads, int pairs, int total)
{
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
        int e = table_entry(t, seq, heads, pairs);
        out[t] = rotate(x[t], rope_cos_c[e], rope_sin_c[e]);
    }
}

extern "C" __global__ void rope_global(const float2* __restrict__ x, float2* __restrict__ out,
                                       const float* __restrict__ cos_table, const float* __restrict__ sin_table,
                                       int seq, int heads, int pairs, int total)
{
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
        int e = table_entry(t, seq, heads, pairs);
        out[t] = rotate(x[t], cos_table[e], sin_table[e]);
    }
}

extern "C" __global__ void rope_sincos(const float2* __restrict__ x, float2* __restrict__ out,
                                       const float* __restrict__ theta, int seq, int heads, int pairs, int total)
{
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
        int p = t % pairs;
        int m = (t / pairs / heads) % seq;
        float s, c;
        sincosf(m * theta[p], &s, &c);
        out[t] = rotate(x[t], c, s);
    }
}
