// A 256-entry lookup table read from constant memory or from global memory.
//
// Every thread adds up iters table entries. In iteration k, lane l reads entry
// (k + l mod distinct) mod 256, so one warp-wide load asks for `distinct`
// different words (1, 2, 4, ..., 32; distinct must be a power of two).
//
// The constant cache answers one address per pass and broadcasts it to every
// lane that asked for it: with distinct = 1 a warp load is one pass, with
// distinct = 32 it is serialised into 32 passes. Global loads go through L1
// in 32-byte sectors and 128-byte lines, so 32 neighbouring words cost about
// as much as one.
//
// Fill table_c from the host (CuPy: RawModule.get_global("table_c")).
// out[tid] = sum over k of table[(k + (lane & (distinct - 1))) & 255].
#define ENTRIES 256

__constant__ float table_c[ENTRIES];

extern "C" __global__ void lookup_constant(int distinct, int iters, float* __restrict__ out)
{
    int lane = threadIdx.x & 31;
    int offset = lane & (distinct - 1);
    float acc = 0.0f;
#pragma unroll 4
    for (int k = 0; k < iters; ++k) {
        acc += table_c[(k + offset) & (ENTRIES - 1)];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

extern "C" __global__ void lookup_global(const float* __restrict__ table, int distinct, int iters,
                                         float* __restrict__ out)
{
    int lane = threadIdx.x & 31;
    int offset = lane & (distinct - 1);
    float acc = 0.0f;
#pragma unroll 4
    for (int k = 0; k < iters; ++k) {
        acc += table[(k + offset) & (ENTRIES - 1)];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
