"""Conformance of the CPU backend (kernels.cpu) with CUDA semantics, one test per feature.

Each test runs a small CUDA C kernel on the CPU backend and compares with NumPy. The kernels share a
few modules (compiled once per test run and cached on disk) to keep the suite fast.
"""
from __future__ import annotations

import io
import sys

import numpy as np
import pytest

from kernels.cpu import RawModule, xp

CORE = r'''
#include <cstdint>
#include <math_constants.h>

// ---- indices ------------------------------------------------------------------------------------
extern "C" __global__ void indices(int* out)
{
    int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int per_block = blockDim.x * blockDim.y * blockDim.z;
    int* o = out + 4 * (bid * per_block + tid);
    o[0] = threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z;
    o[1] = blockIdx.x + 10 * blockIdx.y + 100 * blockIdx.z;
    o[2] = blockDim.x + 10 * blockDim.y + 100 * blockDim.z;
    o[3] = gridDim.x + 10 * gridDim.y + 100 * gridDim.z + 1000 * warpSize;
}

// ---- barriers and shared memory -----------------------------------------------------------------
extern "C" __global__ void reverse_block(const int* x, int* y)
{
    __shared__ int s[1024];
    int t = threadIdx.x, base = blockIdx.x * blockDim.x;
    s[t] = x[base + t];
    __syncthreads();                                  // every write before any read
    y[base + t] = s[blockDim.x - 1 - t];
}

extern "C" __global__ void barrier_reductions(const int* x, int* out)
{
    int v = x[threadIdx.x];
    out[3 * threadIdx.x + 0] = __syncthreads_count(v > 0);
    out[3 * threadIdx.x + 1] = __syncthreads_and(v > 0);
    out[3 * threadIdx.x + 2] = __syncthreads_or(v > 0);
}

extern "C" __global__ void shared_is_poisoned(unsigned* out)
{
    __shared__ unsigned s[64];
    if (blockIdx.x == 0) s[threadIdx.x] = 7;         // block 0 writes; block 1 must not see it
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}

extern __shared__ float at_namespace_scope[];         // dynamic shared memory, declared outside

template <typename T>
__global__ void dynamic_reverse(const T* x, T* y, int n)
{
    extern __shared__ T buf[];                        // dynamic shared memory of type T
    int t = threadIdx.x;
    if (t < n) buf[t] = x[blockIdx.x * n + t];
    __syncthreads();
    if (t < n) y[blockIdx.x * n + t] = buf[n - 1 - t];
}

extern "C" __global__ void dynamic_outside(float* y)
{
    at_namespace_scope[threadIdx.x] = 2.0f * threadIdx.x;
    __syncthreads();
    y[threadIdx.x] = at_namespace_scope[blockDim.x - 1 - threadIdx.x];
}

// ---- device functions, templates, constant and global memory, local arrays ----------------------
__device__ __forceinline__ float square(float v) { return v * v; }
__device__ __noinline__ float cube(float v) { return v * v * v; }

template <typename T, int SCALE>
__device__ T scaled(T v) { return v * SCALE; }

template <typename T, int SCALE>
__global__ void __launch_bounds__(128) apply(const T* __restrict__ x, T* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll 4
    for (; i < n; i += gridDim.x * blockDim.x)
        y[i] = scaled<T, SCALE>(__ldg(x + i)) + (T)square((float)x[i]) + (T)cube(1.0f);
}

__constant__ float weights[8];
__device__ unsigned int launches;
__device__ int table[4] = {1, 2, 3, 4};

extern "C" __global__ void weighted(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = weights[i % 8] * x[i] + table[i % 4];
    if (i == 0) atomicAdd(&launches, 1u);
}

extern "C" __global__ void local_window(const float* x, float* y, int n, int shift)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v[16];
    for (int m = 0; m < 16; ++m) v[m] = x[(i + m) % n];
    float acc = 0.0f;
    for (int j = 0; j < 16; ++j) acc += v[(j + shift) & 15] * (float)(j + 1);   // run-time indices
    y[i] = acc;
}

extern "C" __global__ void fixed_width(int8_t* a, uint16_t* b, int64_t* c, uint64_t* d)
{
    a[0] = (int8_t)-5; b[0] = (uint16_t)65535; c[0] = INT64_MIN; d[0] = UINT64_MAX;
}

// ---- warp collectives ---------------------------------------------------------------------------
extern "C" __global__ void shuffles(const int* x, int* out, int width)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x, n = gridDim.x * blockDim.x;
    int v = x[t];
    out[t] = __shfl_sync(0xffffffffu, v, 5, width);
    out[n + t] = __shfl_up_sync(0xffffffffu, v, 3, width);
    out[2 * n + t] = __shfl_down_sync(0xffffffffu, v, 3, width);
    out[3 * n + t] = __shfl_xor_sync(0xffffffffu, v, 6, width);
    double d = __shfl_down_sync(0xffffffffu, (double)v + 0.5, 1, width);   // 64-bit values too
    out[4 * n + t] = (int)(2.0 * d);
}

extern "C" __global__ void votes(const int* x, unsigned* out)
{
    int t = threadIdx.x, lane = t & 31, w = t / 32;
    int p = x[t] > 0;
    unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
    out[5 * t + 0] = __ballot_sync(0xffffffffu, p);
    out[5 * t + 1] = __any_sync(0xffffffffu, p);
    out[5 * t + 2] = __all_sync(0xffffffffu, p);
    out[5 * t + 3] = __ballot_sync(half, p);           // two half-warp groups at once
    out[5 * t + 4] = __popc(__ballot_sync(0xffffffffu, p)) + 100 * w;
}

extern "C" __global__ void active_masks(const int* x, unsigned* out)
{
    int t = threadIdx.x;
    unsigned m;
    if (x[t] > 0) {
        m = __activemask();
    } else {
        m = __activemask();
    }
    out[t] = m;
}

extern "C" __global__ void syncwarp_sum(const int* x, int* out)
{
    __shared__ int s[32];
    int t = threadIdx.x;
    int v = x[t];
    for (int d = 16; d > 0; d >>= 1) {
        s[t] = v;
        __syncwarp();
        if (t < d) v += s[t + d];
        __syncwarp();
    }
    if (t == 0) out[0] = v;
}

extern "C" __global__ void match_and_reduce(const int* x, unsigned* out)
{
    int t = threadIdx.x;
    int pred = -1;
    out[6 * t + 0] = __match_any_sync(0xffffffffu, x[t]);
    out[6 * t + 1] = __match_all_sync(0xffffffffu, x[t] / 1000, &pred);
    out[6 * t + 2] = pred;
    out[6 * t + 3] = (unsigned)__reduce_add_sync(0xffffffffu, x[t]);
    out[6 * t + 4] = (unsigned)__reduce_min_sync(0xffffffffu, x[t] - 50);
    out[6 * t + 5] = __reduce_or_sync(0xffffffffu, (unsigned)x[t]);
}

// The classic warp-synchronous tail with neither __syncwarp() nor volatile: a data race.
extern "C" __global__ void racy_tail(const int* x, int* out)
{
    __shared__ int s[64];
    int t = threadIdx.x;
    s[t] = x[t] + x[t + 32];
    if (t < 16) {
        s[t] += s[t + 16];
        s[t] += s[t + 8];
        s[t] += s[t + 4];
        s[t] += s[t + 2];
        s[t] += s[t + 1];
    }
    if (t == 0) out[0] = s[0];
}

// ---- atomics ------------------------------------------------------------------------------------
extern "C" __global__ void atomics_int(int* acc, int* old, const int* v)
{
    int t = threadIdx.x;
    old[0 * 64 + t] = atomicAdd(&acc[0], v[t]);
    old[1 * 64 + t] = atomicSub(&acc[1], v[t]);
    old[2 * 64 + t] = atomicMin(&acc[2], v[t]);
    old[3 * 64 + t] = atomicMax(&acc[3], v[t]);
    old[4 * 64 + t] = atomicExch(&acc[4], v[t]);
    old[5 * 64 + t] = atomicAnd(&acc[5], v[t]);
    old[6 * 64 + t] = atomicOr(&acc[6], v[t]);
    old[7 * 64 + t] = atomicXor(&acc[7], v[t]);
    old[8 * 64 + t] = atomicCAS(&acc[8], t, t + 1);  // acc[8] counts up from 0 in thread order
    old[9 * 64 + t] = atomicAdd_block(&acc[9], 1) + atomicAdd_system(&acc[9], 1);
}

extern "C" __global__ void atomics_unsigned(unsigned* acc, unsigned* old, const unsigned* v, const unsigned* bits)
{
    int t = threadIdx.x;
    old[0 * 64 + t] = atomicAdd(&acc[0], v[t]);
    old[1 * 64 + t] = atomicSub(&acc[1], v[t]);
    old[2 * 64 + t] = atomicInc(&acc[2], 9u);        // counts 0..9 and wraps to 0
    old[3 * 64 + t] = atomicDec(&acc[3], 9u);        // counts down and wraps from 0 to 9
    old[4 * 64 + t] = atomicMin(&acc[4], v[t]);
    old[5 * 64 + t] = atomicMax(&acc[5], v[t]);
    old[6 * 64 + t] = atomicExch(&acc[6], v[t]);
    old[7 * 64 + t] = atomicCAS(&acc[7], 5u, 77u);
    old[8 * 64 + t] = atomicAnd(&acc[8], bits[t]);
    old[9 * 64 + t] = atomicOr(&acc[9], bits[64 + t]);
    old[10 * 64 + t] = atomicXor(&acc[10], bits[128 + t]);
}

extern "C" __global__ void atomics_wide(unsigned long long* acc, unsigned long long* old,
                                        const unsigned long long* v, float* facc, float* fold,
                                        double* dacc, double* dold, const float* fv)
{
    int t = threadIdx.x;
    old[0 * 64 + t] = atomicAdd(&acc[0], v[t]);
    old[1 * 64 + t] = atomicMin(&acc[1], v[t]);
    old[2 * 64 + t] = atomicMax(&acc[2], v[t]);
    old[3 * 64 + t] = atomicExch(&acc[3], v[t]);
    old[4 * 64 + t] = atomicCAS(&acc[4], 0ull, v[t]);
    old[5 * 64 + t] = atomicAnd(&acc[5], v[t]);
    old[6 * 64 + t] = atomicOr(&acc[6], v[t]);
    old[7 * 64 + t] = atomicXor(&acc[7], v[t]);
    fold[t] = atomicAdd(&facc[0], fv[t]);
    fold[64 + t] = atomicExch(&facc[1], fv[t]);
    dold[t] = atomicAdd(&dacc[0], (double)fv[t]);
    long long* s = (long long*)&acc[8];
    atomicMin(s, (long long)t - 30);
    atomicMax(s + 1, (long long)t - 30);
}

// A float maximum built from atomicCAS, as the CUDA guide shows.
__device__ float atomic_max_float(float* address, float val)
{
    int* as_int = (int*)address;
    int old = *as_int, assumed;
    do {
        assumed = old;
        old = atomicCAS(as_int, assumed, __float_as_int(fmaxf(val, __int_as_float(assumed))));
    } while (assumed != old);
    return __int_as_float(old);
}

extern "C" __global__ void cas_max(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomic_max_float(out, x[i]);
}

// ---- integer intrinsics and conversions ---------------------------------------------------------
extern "C" __global__ void bits(const unsigned* x, const unsigned long long* y, long long* out)
{
    int t = threadIdx.x;
    unsigned v = x[t];
    unsigned long long w = y[t];
    long long* o = out + 12 * t;
    o[0] = __popc(v); o[1] = __ffs((int)v); o[2] = __clz((int)v); o[3] = __brev(v);
    o[4] = __popcll(w); o[5] = __ffsll((long long)w); o[6] = __clzll((long long)w);
    o[7] = (long long)__brevll(w);
    o[8] = __byte_perm(v, 0x11223344u, 0x0527u);
    o[9] = __funnelshift_l(v, 0xf0f0f0f0u, 12);
    o[10] = __umulhi(v, 0x9e3779b9u);
    o[11] = __mul24((int)v, 3);
}

extern "C" __global__ void conversions(const float* x, int* i, unsigned* u, float* f, long long* bitsout)
{
    int t = threadIdx.x;
    float v = x[t];
    i[4 * t + 0] = __float2int_rn(v); i[4 * t + 1] = __float2int_rz(v);
    i[4 * t + 2] = __float2int_ru(v); i[4 * t + 3] = __float2int_rd(v);
    u[t] = __float2uint_rn(v);
    f[4 * t + 0] = __int_as_float(__float_as_int(v) ^ 0x80000000);      // -v, bit for bit
    f[4 * t + 1] = __uint_as_float(__float_as_uint(v) & 0x7fffffffu);   // |v|
    f[4 * t + 2] = __fadd_rz(v, 1e-9f);                                 // rounds toward zero
    f[4 * t + 3] = __fadd_ru(v, 1e-9f);                                 // rounds up
    bitsout[t] = __double_as_longlong((double)v);
}

// ---- math -------------------------------------------------------------------------------------------
extern "C" __global__ void math(const float* x, float* out)
{
    int t = threadIdx.x;
    float v = x[t];
    float* o = out + 16 * t;
    o[0] = __expf(v); o[1] = __logf(fabsf(v) + 1.0f); o[2] = __fdividef(v, 3.0f); o[3] = rsqrtf(fabsf(v) + 1.0f);
    o[4] = fmaf(v, 2.0f, 1.0f); o[5] = __fmaf_rn(v, v, -1.0f); o[6] = fminf(v, 0.25f); o[7] = fmaxf(v, 0.25f);
    o[8] = __saturatef(v); o[9] = exp2f(v); o[10] = sinpif(v); o[11] = __sinf(v) + __cosf(v);
    o[12] = min(v, 0.5f) + max(-1, (int)(4 * v)) + (float)min(3u, 7u);
    o[13] = INFINITY; o[14] = CUDART_INF_F + 0.0f * v; o[15] = powf(fabsf(v), 1.5f);
}
'''


@pytest.fixture(scope="module")
def core() -> RawModule:
    return RawModule(code=CORE, name_expressions=["apply<float, 3>", "apply<double, 2>", "dynamic_reverse<int>",
                                                  "dynamic_reverse<double>"])


def run(module: RawModule, name: str, grid, block, args, **kw) -> None:
    module.get_function(name)(grid, block, args, **kw)


# ------------------------------------------------------------------------------------------- indices

def test_three_dimensional_grid_and_block_indices(core):
    grid, block = (3, 2, 2), (4, 2, 3)
    per_block, blocks = 4 * 2 * 3, 3 * 2 * 2
    out = xp.full(4 * per_block * blocks, -1, np.int32)
    run(core, "indices", grid, block, (out,))
    got = out.get().reshape(blocks, per_block, 4)
    for b in range(blocks):
        bx, by, bz = b % 3, (b // 3) % 2, b // 6
        for t in range(per_block):
            tx, ty, tz = t % 4, (t // 4) % 2, t // 8
            assert got[b, t].tolist() == [tx + 10 * ty + 100 * tz, bx + 10 * by + 100 * bz, 4 + 20 + 300,
                                          3 + 20 + 200 + 32000]


# ------------------------------------------------------------------------------ barriers and shared

def test_syncthreads_orders_shared_memory(core):
    x = xp.asarray(np.arange(3 * 256, dtype=np.int32))
    y = xp.zeros_like(x)
    run(core, "reverse_block", (3,), (256,), (x, y))
    assert np.array_equal(y.get().reshape(3, 256), np.arange(3 * 256).reshape(3, 256)[:, ::-1])


def test_syncthreads_count_and_or(core):
    h = np.where(np.arange(96) % 3 == 0, 1, -1).astype(np.int32)
    out = xp.zeros(3 * 96, np.int32)
    run(core, "barrier_reductions", (1,), (96,), (xp.asarray(h), out))
    assert np.array_equal(out.get().reshape(96, 3), np.tile([32, 0, 1], (96, 1)))
    h[:] = 1
    run(core, "barrier_reductions", (1,), (96,), (xp.asarray(h), out))
    assert np.array_equal(out.get().reshape(96, 3), np.tile([96, 1, 1], (96, 1)))


def test_static_shared_memory_is_private_to_each_block_and_poisoned(core):
    out = xp.zeros(128, np.uint32)
    run(core, "shared_is_poisoned", (2,), (64,), (out,))
    assert (out.get()[:64] == 7).all()
    assert (out.get()[64:] == 0xFFFFFFFF).all()      # block 1 sees poison, not block 0's values


@pytest.mark.parametrize("expr,dtype", [("dynamic_reverse<int>", np.int32), ("dynamic_reverse<double>", np.float64)])
def test_dynamic_shared_memory_of_any_type(core, expr, dtype):
    n = 200
    x = xp.asarray(np.arange(2 * n).astype(dtype))
    y = xp.zeros_like(x)
    core.get_function(expr)((2,), (256,), (x, y, n), shared_mem=n * np.dtype(dtype).itemsize)
    assert np.array_equal(y.get().reshape(2, n), x.get().reshape(2, n)[:, ::-1])


def test_dynamic_shared_memory_declared_at_namespace_scope(core):
    y = xp.zeros(64, np.float32)
    run(core, "dynamic_outside", (1,), (64,), (y,), shared_mem=64 * 4)
    assert np.array_equal(y.get(), 2.0 * np.arange(64)[::-1])


# ------------------------------------------------- functions, templates, constant/global, local memory

@pytest.mark.parametrize("expr,dtype,scale", [("apply<float, 3>", np.float32, 3), ("apply<double, 2>", np.float64, 2)])
def test_device_functions_and_template_kernels(core, expr, dtype, scale):
    h = np.linspace(-2, 2, 1000).astype(dtype)
    y = xp.zeros_like(xp.asarray(h))
    kernel = core.get_function(expr)
    assert kernel.attributes["max_threads_per_block"] == 128           # from __launch_bounds__(128)
    kernel((3,), (128,), (xp.asarray(h), y, 1000))
    square = (h.astype(np.float32) ** 2).astype(np.float64)
    np.testing.assert_allclose(y.get(), h.astype(np.float64) * scale + square + 1, rtol=1e-6, atol=1e-6)


def test_constant_memory_and_device_globals_from_the_host(core):
    w = xp.ndarray((8,), np.float32, memptr=core.get_global("weights"))
    w[...] = np.arange(8, dtype=np.float32)
    table = xp.ndarray((4,), np.int32, memptr=core.get_global("table"))
    assert table.get().tolist() == [1, 2, 3, 4]                          # initialised as declared
    launches = xp.ndarray((1,), np.uint32, memptr=core.get_global("launches"))
    before = int(launches[0])
    h = np.ones(100, np.float32)
    y = xp.zeros(100, np.float32)
    for _ in range(3):
        run(core, "weighted", (1,), (128,), (xp.asarray(h), y, 100))
    np.testing.assert_array_equal(y.get(), np.arange(100) % 8 + np.arange(100) % 4 + 1)
    assert int(launches[0]) == before + 3                                # __device__ state persists
    mp = core.get_global("weights")
    assert mp.size == 32 and mp.ptr == w.__array_interface__["data"][0]


def test_local_arrays_with_run_time_indices(core):
    h = np.random.default_rng(1).random(300).astype(np.float32)
    y = xp.zeros(300, np.float32)
    run(core, "local_window", (2,), (256,), (xp.asarray(h), y, 300, 5))
    idx = (np.arange(300)[:, None] + np.arange(16)[None, :]) % 300
    weights = ((np.arange(16) - 5) % 16) + 1
    np.testing.assert_allclose(y.get(), (h[idx] * weights).sum(axis=1), rtol=1e-5)


def test_fixed_width_integer_types(core):
    a, b = xp.zeros(1, np.int8), xp.zeros(1, np.uint16)
    c, d = xp.zeros(1, np.int64), xp.zeros(1, np.uint64)
    run(core, "fixed_width", (1,), (1,), (a, b, c, d))
    assert (int(a[0]), int(b[0]), int(c[0]), int(d[0])) == (-5, 65535, -2**63, 2**64 - 1)


# ---------------------------------------------------------------------------------- warp collectives

def _shuffle_reference(v: np.ndarray, width: int) -> list[np.ndarray]:
    lane = np.arange(v.size) % 32
    warp = np.arange(v.size) // 32 * 32
    seg = lane // width * width
    within = lane % width

    def take(src, ok):
        return np.where(ok, v[warp + np.clip(src, 0, 31)], v)
    idx = take(seg + 5 % width, True)
    up = take(lane - 3, within >= 3)
    down = take(lane + 3, within + 3 < width)
    xor = take(lane ^ 6, (lane ^ 6) < seg + width)
    d = take(lane + 1, within + 1 < width)
    return [idx, up, down, xor, 2 * d + 1]


@pytest.mark.parametrize("width", [32, 16, 8, 4, 2, 1])
def test_shuffles_with_width(core, width):
    h = (np.arange(64) * 7 + 3).astype(np.int32)
    out = xp.zeros(5 * 64, np.int32)
    run(core, "shuffles", (2,), (32,), (xp.asarray(h), out, width))
    got = out.get().reshape(5, 64)
    for name, g, r in zip(("shfl", "up", "down", "xor", "double down"), got, _shuffle_reference(h, width)):
        np.testing.assert_array_equal(g, r, err_msg=f"{name}, width {width}")


def test_ballot_any_all_with_full_and_partial_masks(core):
    h = np.random.default_rng(2).integers(-1, 2, 64).astype(np.int32)
    h[32:] = 1                                                          # warp 1: all true
    out = xp.zeros(5 * 64, np.uint32)
    run(core, "votes", (1,), (64,), (xp.asarray(h), out))
    got = out.get().reshape(64, 5).astype(np.int64)
    p = (h > 0).reshape(2, 32)
    for w in range(2):
        bits = int(sum(1 << i for i in range(32) if p[w, i]))
        rows = got[32 * w:32 * w + 32]
        assert (rows[:, 0] == bits).all() and (rows[:, 1] == p[w].any()).all() and (rows[:, 2] == p[w].all()).all()
        assert (rows[:16, 3] == bits & 0xFFFF).all() and (rows[16:, 3] == bits & 0xFFFF0000).all()
        assert (rows[:, 4] == p[w].sum() + 100 * w).all()


def test_activemask_groups_the_lanes_of_each_branch(core):
    h = np.where(np.arange(32) % 3 == 0, 1, -1).astype(np.int32)
    out = xp.zeros(32, np.uint32)
    run(core, "active_masks", (1,), (32,), (xp.asarray(h), out))
    taken = int(sum(1 << i for i in range(32) if h[i] > 0))
    assert (out.get() == np.where(h > 0, taken, 0xFFFFFFFF ^ taken)).all()


def test_syncwarp_is_a_barrier_for_the_warp(core):
    h = np.arange(32, dtype=np.int32)
    out = xp.zeros(1, np.int32)
    run(core, "syncwarp_sum", (1,), (32,), (xp.asarray(h), out))
    assert int(out[0]) == h.sum()


def test_match_and_reduce_sync(core):
    h = (np.arange(32) % 4 * 1000 + 7).astype(np.int32)
    out = xp.zeros(6 * 32, np.uint32)
    run(core, "match_and_reduce", (1,), (32,), (xp.asarray(h), out))
    got = out.get().reshape(32, 6)
    for lane in range(32):
        same = sum(1 << j for j in range(32) if h[j] == h[lane])
        assert got[lane, 0] == same
    assert (got[:, 1] == 0).all() and (got[:, 2] == 0).all()          # values differ: no match_all
    assert (got[:, 3] == h.sum()).all() and (got[:, 4].astype(np.int32) == h.min() - 50).all()
    assert (got[:, 5] == np.bitwise_or.reduce(h.astype(np.uint32))).all()


def test_warp_synchronous_code_without_syncwarp_is_a_race(core):
    """Without __syncwarp() or volatile the tail reads values other lanes have not written yet: on the
    CPU backend (lanes run one after another between barriers) the sum is wrong every time, as it can
    be on a GPU since Volta. This is what the "SIMT and warps" chapter warns about."""
    h = np.ones(64, np.int32)
    out = xp.zeros(1, np.int32)
    run(core, "racy_tail", (1,), (32,), (xp.asarray(h), out))
    assert int(out[0]) != 64


# ------------------------------------------------------------------------------------------- atomics

def serial_order_exists(init, old, operand, step, final) -> bool:
    """Whether the old values that one atomic per thread returned are those of SOME serial order of
    the threads: starting from `init`, each thread's old value is the value before it, the value
    after it is step(old, operand), and the last one leaves `final`. Each thread is used once."""
    left = {}
    for o, x in zip(old, operand, strict=True):          # threads with equal (old, operand) are alike
        left[(int(o), int(x))] = left.get((int(o), int(x)), 0) + 1

    def walk(cur: int, n: int) -> bool:
        if n == 0:
            return cur == int(final)
        here = [key for key, count in left.items() if count and key[0] == cur]
        same = [key for key in here if step(cur, key[1]) == cur]
        # A thread that leaves the value as it is can go now in any serial order that has it later
        # at the same value: take it without branching. Otherwise try each different operand.
        for key in same[:1] or here:
            left[key] -= 1
            found = walk(step(cur, key[1]), n - 1)
            left[key] += 1
            if found:
                return True
        return False

    return walk(int(init), len(old))


def _unsigned(bits: int, f):
    return lambda a, b: f(a, b) % 2**bits


def _signed32(f):
    return lambda a, b: (f(a, b) + 2**31) % 2**32 - 2**31


def test_serial_order_check_can_fail():
    add = lambda a, b: a + b                                              # noqa: E731
    assert serial_order_exists(10, [13, 10, 11], [-2, 1, 2], add, 11)     # 10 +1 11 +2 13 -2 11
    assert not serial_order_exists(10, [13, 10, 11], [-2, 1, 2], add, 12)  # wrong final value
    assert not serial_order_exists(10, [13, 10, 10], [-2, 1, 2], add, 11)  # two threads saw 10
    assert not serial_order_exists(10, [10, 12, 12], [1, 1, 1], add, 13)   # nobody saw 11


def test_int_atomics_follow_cuda_semantics(core):
    v = np.random.default_rng(3).integers(-1000, 1000, 64).astype(np.int32)
    init = np.array([10, 10, 5, -5, 0, -1, 0, 0, 0, 0], np.int32)
    acc, old = xp.asarray(init), xp.zeros(10 * 64, np.int32)
    run(core, "atomics_int", (1,), (64,), (acc, old, xp.asarray(v)))
    a = acc.get()
    assert a[0] == 10 + v.sum() and a[1] == 10 - v.sum()
    assert a[2] == min(5, v.min()) and a[3] == max(-5, v.max())
    assert a[4] in v and a[5] == np.bitwise_and.reduce(np.append(v, -1))
    assert a[6] == np.bitwise_or.reduce(v) and a[7] == np.bitwise_xor.reduce(v)
    assert a[8] == 64 and a[9] == 128
    o = old.get().reshape(10, 64)
    # Every returned old value is the value just before that thread's update in one serial order.
    steps = [lambda a, b: a + b, lambda a, b: a - b, min, max, lambda a, b: b, lambda a, b: a & b,
             lambda a, b: a | b, lambda a, b: a ^ b]
    for j, step in enumerate(steps):
        assert serial_order_exists(init[j], o[j], v, _signed32(step), a[j]), f"slot {j}"
    assert (o[4] == 0).sum() >= 1 and set(o[4].tolist()) <= {0, *v.tolist()}   # atomicExch
    # atomicCAS(&acc[8], t, t + 1) succeeds for the thread whose index equals the value: old values too.
    assert serial_order_exists(0, o[8], np.arange(64), lambda a, t: t + 1 if a == t else a, a[8])
    assert set(o[8]) <= set(range(64))                                   # CAS returns the old value


def test_unsigned_atomics_wrap_as_cuda_defines(core):
    v = np.arange(1, 65, dtype=np.uint32)
    rng = np.random.default_rng(9)
    words = rng.integers(0, 2**32, (15, 64), dtype=np.uint64).astype(np.uint32)
    to_and = np.bitwise_or.reduce(words[:7])            # each bit clear with probability 1/128
    to_or = np.bitwise_and.reduce(words[7:14])          # each bit set with probability 1/128
    to_xor = words[14]
    init = np.array([0, 0, 0, 0, 1000, 0, 0, 5, 0xFFFFFFFF, 0x10, 0x12345678], np.uint32)
    acc, old = xp.asarray(init), xp.zeros(11 * 64, np.uint32)
    bits = xp.asarray(np.concatenate([to_and, to_or, to_xor]))
    run(core, "atomics_unsigned", (1,), (64,), (acc, old, xp.asarray(v), bits))
    a, o = acc.get(), old.get().reshape(11, 64)
    assert a[0] == v.sum() and a[1] == np.uint32(-int(v.sum()) % 2**32)
    inc = [0]
    for _ in range(64):                                                  # ((old >= 9) ? 0 : old + 1)
        inc.append(0 if inc[-1] >= 9 else inc[-1] + 1)
    assert a[2] == inc[-1] and sorted(o[2]) == sorted(inc[:-1])
    dec = [0]
    for _ in range(64):                                                  # ((old == 0 || old > 9) ? 9 : old - 1)
        dec.append(9 if dec[-1] == 0 or dec[-1] > 9 else dec[-1] - 1)
    assert a[3] == dec[-1] and sorted(o[3]) == sorted(dec[:-1])
    assert a[4] == 1 and a[5] == 64 and a[7] == 77 and (o[7] == 5).sum() == 1
    assert a[6] in v and (o[6] == 0).sum() == 1 and np.isin(o[6][o[6] != 0], v).all()   # atomicExch
    assert 0 < a[8] < 0xFFFFFFFF and a[8] == np.bitwise_and.reduce(np.append(to_and, init[8]))
    assert 0x10 < a[9] < 0xFFFFFFFF and a[9] == np.bitwise_or.reduce(np.append(to_or, init[9]))
    assert a[10] == np.bitwise_xor.reduce(np.append(to_xor, init[10]))
    for j, operand, step in ((0, v, _unsigned(32, lambda a, b: a + b)), (1, v, _unsigned(32, lambda a, b: a - b)),
                             (2, v, lambda a, b: 0 if a >= 9 else a + 1),
                             (3, v, lambda a, b: 9 if a == 0 or a > 9 else a - 1), (4, v, min), (5, v, max),
                             (6, v, lambda a, b: b), (7, v, lambda a, b: 77 if a == 5 else a),
                             (8, to_and, lambda a, b: a & b), (9, to_or, lambda a, b: a | b),
                             (10, to_xor, lambda a, b: a ^ b)):
        assert serial_order_exists(init[j], o[j], operand, step, a[j]), f"slot {j}"


def test_64_bit_and_floating_point_atomics(core):
    v = np.arange(64, dtype=np.uint64) * 3 + 1
    fv = np.full(64, 0.25, np.float32)
    init = np.array([0, 2**63, 0, 0, 0, 2**64 - 1, 0, 0, 0, 0], np.uint64)
    acc = xp.asarray(init)
    old = xp.zeros(8 * 64, np.uint64)
    facc, fold = xp.zeros(2, np.float32), xp.zeros(128, np.float32)
    dacc, dold = xp.zeros(1, np.float64), xp.zeros(64, np.float64)
    run(core, "atomics_wide", (1,), (64,), (acc, old, xp.asarray(v), facc, fold, dacc, dold, xp.asarray(fv)))
    a = acc.get()
    assert a[0] == v.sum() and a[1] == v.min() and a[2] == v.max() and a[3] in v
    assert a[4] == v[0] and a[5] == np.bitwise_and.reduce(v) and a[6] == np.bitwise_or.reduce(v)
    assert a[7] == np.bitwise_xor.reduce(v)
    assert a[8].astype(np.int64) == -30 and a[9].astype(np.int64) == 33
    assert float(facc[0]) == 16.0 and float(dacc[0]) == 16.0
    assert sorted(fold.get()[:64]) == [0.25 * i for i in range(64)]
    assert float(facc[1]) == 0.25 and sorted(fold.get()[64:]) == [0.0] + [0.25] * 63   # float atomicExch
    assert sorted(dold.get()) == [0.25 * i for i in range(64)]                         # double atomicAdd
    o = old.get().reshape(8, 64)
    for j, step in ((0, _unsigned(64, lambda a, b: a + b)), (1, min), (2, max), (3, lambda a, b: b),
                    (4, lambda a, b: b if a == 0 else a), (5, lambda a, b: a & b), (6, lambda a, b: a | b),
                    (7, lambda a, b: a ^ b)):
        assert serial_order_exists(init[j], o[j], v, step, a[j]), f"slot {j}"


def test_atomic_cas_loop_builds_a_float_maximum(core):
    h = np.random.default_rng(4).standard_normal(5000).astype(np.float32)
    out = xp.full(1, -np.inf, np.float32)
    run(core, "cas_max", (20,), (256,), (xp.asarray(h), out, 5000))
    assert float(out[0]) == h.max()


# -------------------------------------------------------------------------- intrinsics, conversions

def _brev(x: int, bits: int) -> int:
    return int(format(x, f"0{bits}b")[::-1], 2)


def test_bit_intrinsics(core):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    x[:3] = [0, 1, 0x80000000]
    y = rng.integers(0, 2**63, 32, dtype=np.uint64)
    y[:2] = [0, 1 << 40]
    out = xp.zeros(12 * 32, np.int64)
    run(core, "bits", (1,), (32,), (xp.asarray(x), xp.asarray(y), out))
    got = out.get().reshape(32, 12)
    for t in range(32):
        v, w = int(x[t]), int(y[t])
        ffs = (v & -v).bit_length()
        perm_src = v | (0x11223344 << 32)
        perm = sum(((perm_src >> (8 * ((0x0527 >> (4 * i)) & 7))) & 0xFF) << (8 * i) for i in range(4))
        expected = [bin(v).count("1"), ffs, 32 - v.bit_length(), _brev(v, 32), bin(w).count("1"),
                    (w & -w).bit_length(), 64 - w.bit_length(), np.uint64(_brev(w, 64)).astype(np.int64),
                    perm, ((((0xF0F0F0F0 << 32) | v) << 12) >> 32) & 0xFFFFFFFF, (v * 0x9E3779B9) >> 32,
                    np.int32(((v & 0xFFFFFF) ^ 0x800000) - 0x800000).astype(np.int64) * 3]
        assert got[t].tolist() == [int(e) for e in expected], t


def test_conversions_saturate_and_round_like_the_gpu(core):
    h = np.array([0.5, 1.5, 2.5, -0.5, -1.7, 3e9, -3e9, np.nan, 1.0, -0.0, 7.25, -7.25] + [0.1] * 20, np.float32)
    i, u = xp.zeros(4 * 32, np.int32), xp.zeros(32, np.uint32)
    f, b = xp.zeros(4 * 32, np.float32), xp.zeros(32, np.int64)
    run(core, "conversions", (1,), (32,), (xp.asarray(h), i, u, f, b))
    got = i.get().reshape(32, 4)[:12]
    imax, imin = 2**31 - 1, -2**31
    assert got[:, 0].tolist() == [0, 2, 2, 0, -2, imax, imin, 0, 1, 0, 7, -7]        # nearest, ties to even
    assert got[:, 1].tolist() == [0, 1, 2, 0, -1, imax, imin, 0, 1, 0, 7, -7]        # toward zero
    assert got[:, 2].tolist() == [1, 2, 3, 0, -1, imax, imin, 0, 1, 0, 8, -7]        # up
    assert got[:, 3].tolist() == [0, 1, 2, -1, -2, imax, imin, 0, 1, 0, 7, -8]       # down
    assert u.get()[:8].tolist() == [0, 2, 2, 0, 0, 3000000000, 0, 0]                # unsigned saturates at 0
    fl = f.get().reshape(32, 4)
    finite = np.isfinite(h)
    np.testing.assert_array_equal(fl[finite, 0], -h[finite])
    np.testing.assert_array_equal(fl[finite, 1], np.abs(h[finite]))
    assert fl[12, 2] == np.float32(0.1) and fl[12, 3] == np.nextafter(np.float32(0.1), np.float32(1))
    np.testing.assert_array_equal(b.get(), h.astype(np.float64).view(np.int64))


def test_math_functions_and_intrinsics(core):
    h = np.linspace(-2, 2, 32).astype(np.float32)
    out = xp.zeros(16 * 32, np.float32)
    run(core, "math", (1,), (32,), (xp.asarray(h), out))
    g = out.get().reshape(32, 16).astype(np.float64)
    v = h.astype(np.float64)
    expected = [np.exp(v), np.log(np.abs(v) + 1), v / 3, 1 / np.sqrt(np.abs(v) + 1), v * 2 + 1, v * v - 1,
                np.minimum(v, 0.25), np.maximum(v, 0.25), np.clip(v, 0, 1), np.exp2(v), np.sin(np.pi * v),
                np.sin(v) + np.cos(v),
                np.minimum(v, 0.5) + np.maximum(-1, np.trunc(4 * h).astype(int)) + 3, np.full(32, np.inf),
                np.full(32, np.inf), np.abs(v) ** 1.5]
    for j, e in enumerate(expected):
        np.testing.assert_allclose(g[:, j], e, rtol=2e-6, atol=2e-6, err_msg=f"column {j}")


# ------------------------------------------------------- half, bfloat16, vector types, groups, printf

EXTRA = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cstdio>
namespace cg = cooperative_groups;

extern "C" __global__ void halves(const float* x, float* out, unsigned short* bits, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half h = __float2half(x[i]);
    __half r = __float2half_rn(x[i]);
    bits[i] = __half_as_ushort(h) == __half_as_ushort(r) ? __half_as_ushort(h) : 0xdead;
    float* o = out + 8 * i;
    o[0] = __half2float(h);
    o[1] = __half2float(__hadd(h, __float2half(1.0f)));
    o[2] = __half2float(__hmul(h, h));
    o[3] = __half2float(__hfma(h, __float2half(2.0f), __float2half(0.5f)));
    __half2 p = __floats2half2_rn(x[i], -x[i]);
    __half2 q = __hadd2(p, __halves2half2(__float2half(1.0f), __float2half(2.0f)));
    float2 f = __half22float2(__hmul2(q, q));
    o[4] = f.x; o[5] = f.y;
    o[6] = __low2float(q) + __high2float(q);
    __half s = h + h * h - __float2half(0.25f);                        // operators
    o[7] = __half2float(s);
}

extern "C" __global__ void bfloats(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 b = __float2bfloat16(x[i]);
    out[2 * i] = __bfloat162float(b);
    out[2 * i + 1] = __bfloat162float(__hmul(b, __float2bfloat16(3.0f)));
}

struct alignas(16) Pair { float a; int b; };

extern "C" __global__ void vectors(const float* x, float* out, int* sizes)
{
    int t = threadIdx.x;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4 v = x4[t];                                      // 16-byte vector load
    float2 w = make_float2(v.x + v.y, v.z + v.w);
    int4 k = make_int4(1, 2, 3, 4);
    uint2 u = make_uint2(5u, 6u);
    double2 d = make_double2(0.5, 0.25);
    reinterpret_cast<float2*>(out)[t] = w;                 // 8-byte vector store
    out[64 + t] = (float)(k.x + k.w + u.y) + (float)(d.x + d.y);
    if (t == 0) {
        sizes[0] = sizeof(float4); sizes[1] = alignof(float4); sizes[2] = sizeof(float3); sizes[3] = alignof(float3);
        sizes[4] = sizeof(int2); sizes[5] = alignof(int2); sizes[6] = sizeof(double2); sizes[7] = alignof(double2);
        sizes[8] = sizeof(uchar4); sizes[9] = alignof(uchar4); sizes[10] = sizeof(Pair); sizes[11] = sizeof(dim3);
    }
}

extern "C" __global__ void groups(const int* x, int* out)
{
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    int t = block.thread_rank();
    int v = x[t];
    int sum = cg::reduce(tile, v, cg::plus<int>());
    int down = tile.shfl_down(v, 1);
    int first = tile.shfl(v, 0);
    int scan = cg::inclusive_scan(tile, v);
    unsigned votes = tile.ballot(v % 2 == 0);
    block.sync();
    int* o = out + 8 * t;
    o[0] = sum; o[1] = down; o[2] = first; o[3] = scan; o[4] = (int)votes;
    o[5] = (int)tile.thread_rank(); o[6] = (int)tile.meta_group_rank(); o[7] = (int)(tile.size() + 100 * block.size());
}

// tile.sync() orders shared memory within a tile: each thread reads values that other threads of its
// tile wrote just before (a read-after-write), then overwrites its own slot after they have read it
// (a write-after-read), both across the barrier only.
extern "C" __global__ void tile_exchange(const int* x, int* out)
{
    __shared__ int s[64];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    cg::thread_block_tile<8> oct = cg::tiled_partition<8>(block);
    cg::thread_block_tile<4> quad = cg::tiled_partition<4>(block);
    int t = block.thread_rank(), r = tile.thread_rank(), base = t - r;
    int v = x[t];
    s[t] = v;
    tile.sync();
    int next = s[base + (r + 1) % 16];                // written by the next thread of the tile
    tile.sync();
    s[t] = 3 * next;
    tile.sync();
    int* o = out + 12 * t;
    o[0] = next;
    o[1] = s[base + (r + 2) % 16];                    // 3 x[base + (r + 3) % 16]
    o[2] = tile.shfl_up(v, 1);
    o[3] = tile.shfl_xor(v, 1);
    o[4] = tile.shfl_xor(v, 8);
    o[5] = cg::reduce(oct, v, cg::plus<int>());
    o[6] = (int)(oct.thread_rank() + 10 * oct.meta_group_rank() + 1000 * oct.size());
    o[7] = quad.shfl_down(v, 1);
    o[8] = quad.shfl_up(v, 2);
    o[9] = quad.shfl_xor(v, 3);
    o[10] = (int)quad.ballot(v % 2 == 0);
    o[11] = cg::exclusive_scan(quad, v);
}

extern "C" __global__ void coalesced(const int* x, int* out)
{
    int t = threadIdx.x;
    if (x[t] > 0) {
        cg::coalesced_group g = cg::coalesced_threads();
        out[t] = (int)g.thread_rank() + 100 * (int)g.size();
    } else {
        out[t] = -1;
    }
}

extern "C" __global__ void hello(int n)
{
    if (threadIdx.x < n) printf("block %d thread %d: %5.2f %s\n", blockIdx.x, threadIdx.x, 0.5f * threadIdx.x, "ok");
}

extern "C" __global__ void checks(const int* x, int* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    assert(n > 0);
    if (i < n) {
        assert(x[i] >= 0);
        y[i] = x[i];
    }
}
'''


@pytest.fixture(scope="module")
def extra() -> RawModule:
    return RawModule(code=EXTRA)


def test_half_conversions_and_arithmetic_round_like_float16(extra):
    h = np.concatenate([np.array([0.0, -0.0, 1.0, 0.1, 65504, 65519, 65520, 1e5, -1e5, 6e-8, 2.98e-8, 3e-5,
                                  np.inf, -np.inf], np.float32),
                        np.random.default_rng(6).uniform(-8, 8, 50).astype(np.float32)])
    n = h.size
    out, bits = xp.zeros(8 * n, np.float32), xp.zeros(n, np.uint16)
    extra.get_function("halves")((1,), (128,), (xp.asarray(h), out, bits, n))
    o = out.get().reshape(n, 8)
    with np.errstate(all="ignore"):
        f16 = h.astype(np.float16)
        np.testing.assert_array_equal(bits.get(), f16.view(np.uint16))   # rounding, overflow, subnormals
        np.testing.assert_array_equal(o[:, 0], f16.astype(np.float32))
        np.testing.assert_array_equal(o[:, 1], (f16 + np.float16(1)).astype(np.float32))
        np.testing.assert_array_equal(o[:, 2], (f16 * f16).astype(np.float32))
        fma = (f16.astype(np.float64) * 2 + 0.5).astype(np.float16)
        np.testing.assert_array_equal(o[:, 3], fma.astype(np.float32))
        q = np.stack([f16 + np.float16(1), -f16 + np.float16(2)], axis=1)
        np.testing.assert_array_equal(o[:, 4:6], (q * q).astype(np.float32))
        np.testing.assert_array_equal(o[:, 6], q[:, 0].astype(np.float32) + q[:, 1].astype(np.float32))
        s = (f16 + f16 * f16) - np.float16(0.25)
        np.testing.assert_array_equal(o[:, 7], s.astype(np.float32))


def test_half_nan_stays_nan(extra):
    out, bits = xp.zeros(8, np.float32), xp.zeros(1, np.uint16)
    extra.get_function("halves")((1,), (1,), (xp.asarray(np.array([np.nan], np.float32)), out, bits, 1))
    assert np.isnan(float(out[0])) and (int(bits[0]) & 0x7C00) == 0x7C00 and (int(bits[0]) & 0x3FF) != 0


def test_bfloat16_rounds_to_nearest_even(extra):
    h = np.random.default_rng(7).uniform(-100, 100, 64).astype(np.float32)
    out = xp.zeros(128, np.float32)
    extra.get_function("bfloats")((1,), (64,), (xp.asarray(h), out, 64))

    def bf16(v):
        u = v.astype(np.float32).view(np.uint32).astype(np.uint64)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
        return u.astype(np.uint32).view(np.float32)
    o = out.get().reshape(64, 2)
    np.testing.assert_array_equal(o[:, 0], bf16(h))
    np.testing.assert_array_equal(o[:, 1], bf16(bf16(h) * np.float32(3)))


def test_vector_types_loads_and_alignment(extra):
    h = np.arange(4 * 32, dtype=np.float32)
    out, sizes = xp.zeros(2 * 64, np.float32), xp.zeros(12, np.int32)
    extra.get_function("vectors")((1,), (32,), (xp.asarray(h), out, sizes))
    v = h.reshape(32, 4)
    np.testing.assert_array_equal(out.get()[:64].reshape(32, 2), np.stack([v[:, 0] + v[:, 1], v[:, 2] + v[:, 3]], 1))
    assert (out.get()[64:96] == 11.75).all()
    assert sizes.get().tolist() == [16, 16, 12, 4, 8, 8, 16, 16, 4, 4, 16, 12]


def test_cooperative_groups_tiles(extra):
    h = np.random.default_rng(8).integers(0, 100, 64).astype(np.int32)
    out = xp.zeros(8 * 64, np.int32)
    extra.get_function("groups")((1,), (64,), (xp.asarray(h), out))
    o = out.get().reshape(64, 8)
    tiles = h.reshape(4, 16)
    for t in range(64):
        tile, rank = tiles[t // 16], t % 16
        even = sum(1 << i for i in range(16) if tile[i] % 2 == 0)
        assert o[t].tolist() == [tile.sum(), tile[rank + 1] if rank < 15 else tile[rank], tile[0],
                                 tile[:rank + 1].sum(), even, rank, t // 16, 16 + 6400]


def test_tile_sync_and_shuffles_of_smaller_tiles(extra):
    h = np.random.default_rng(10).integers(0, 1000, 64).astype(np.int32)
    out = xp.full(12 * 64, -1, np.int32)
    extra.get_function("tile_exchange")((1,), (64,), (xp.asarray(h), out))
    o = out.get().reshape(64, 12)
    t = np.arange(64)
    r16, r8, r4 = t % 16, t % 8, t % 4
    b16, b8, b4 = t - r16, t - r8, t - r4
    expected = np.stack([
        h[b16 + (r16 + 1) % 16],                                  # after tile.sync(): the neighbour's value
        3 * h[b16 + (r16 + 3) % 16],                              # written after the others had read
        np.where(r16 >= 1, h[t - 1], h),                          # shfl_up: lane 0 keeps its own value
        h[t ^ 1], h[t ^ 8],
        h.reshape(8, 8).sum(1).repeat(8),                         # cg::reduce over tiles of 8
        r8 + 10 * (t // 8) + 8000,
        np.where(r4 < 3, h[np.minimum(t + 1, 63)], h),            # shfl_down: the last lane keeps its own
        np.where(r4 >= 2, h[t - 2], h),
        h[t ^ 3],
        [sum(1 << i for i in range(4) if h[b + i] % 2 == 0) for b in b4],
        [h[b:b + i].sum() for b, i in zip(b4, r4)],               # exclusive scan: lane 0 gets 0
    ], axis=1)
    for j in range(12):
        np.testing.assert_array_equal(o[:, j], expected[:, j], err_msg=f"column {j}")


def test_coalesced_group_is_the_branch(extra):
    h = np.where(np.arange(32) % 4 == 1, 1, 0).astype(np.int32)
    out = xp.zeros(32, np.int32)
    extra.get_function("coalesced")((1,), (32,), (xp.asarray(h), out))
    ranks = np.cumsum(h) - 1
    assert out.get().tolist() == [int(ranks[t]) + 800 if h[t] else -1 for t in range(32)]


def test_printf_reaches_python_stdout(extra, capfd, monkeypatch):
    """Output goes to sys.stdout (what Jupyter shows), never to file descriptor 1 behind its back."""
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    extra.get_function("hello")((2,), (4,), (3,))
    lines = [f"block {b} thread {t}: {0.5 * t:5.2f} ok" for b in range(2) for t in range(3)]
    assert stdout.getvalue().splitlines() == lines
    assert capfd.readouterr().out == ""


def test_assert_that_holds_costs_nothing(extra):
    x = xp.arange(100, dtype=np.int32)
    y = xp.zeros(100, np.int32)
    extra.get_function("checks")((1,), (128,), (x, y, 100))
    assert np.array_equal(y.get(), x.get())
