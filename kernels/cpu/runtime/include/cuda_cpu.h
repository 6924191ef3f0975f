/* The CPU backend's prelude: what nvcc/NVRTC provide to every CUDA C source, for a C++ compiler.
 *
 * Included before the reader's kernel source. It maps CUDA's keywords to C++ (a __global__ function
 * becomes a plain function that runs one CUDA thread), declares threadIdx, blockIdx, blockDim and
 * gridDim (set by the runtime before each thread runs), and implements the device functions:
 * barriers and warp collectives (which hand control to the runtime's scheduler), atomics, math
 * functions and intrinsics, printf and assert. Everything a fiber may wait at passes the source
 * file and line of its call site, so that a deadlock names the line.
 */
#pragma once

#define __COURSE_CPU_BACKEND__ 1
#define __CUDACC__ 1
#define __CUDACC_RTC__ 1
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 4
#define __CUDACC_VER_BUILD__ 0
#define __NVCC__ 1
#ifndef __CUDA_ARCH__
#define __CUDA_ARCH__ 800
#endif
#define CUDART_VERSION 12040

#include <assert.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

#include "cuda_cpu_ops.h"

// ---- CUDA keywords ------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
/* Static shared memory: one copy per block. Blocks run one after another, so a static variable is
   exactly that; the section lets the runtime poison it (0xFF bytes) before every block. */
#define __shared__ static __attribute__((section("cudacpu_shared"), used))
#define __forceinline__ inline
#define __inline_hint__ inline
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __cluster_dims__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __cudart_builtin__
#define __device_builtin__
#define __nv_pure__
#define __CUDA_ALIGN__(n) __attribute__((aligned(n)))

// ---- the runtime (libcudacpu) -------------------------------------------------------------------
extern "C" {
void cudacpu_syncthreads(const char *file, int line);
int cudacpu_syncthreads_op(int op, int pred, const char *file, int line);
unsigned long long cudacpu_warp_op(int op, unsigned mask, unsigned long long value, int arg, int width,
                                   const char *file, int line);
unsigned cudacpu_activemask(const char *file, int line, int site);
void cudacpu_yield(void);
void cudacpu_cas_failed(void);
void cudacpu_cas_succeeded(void);
__attribute__((noreturn)) void cudacpu_trap(int kind, const char *what, const char *file, int line);
int cudacpu_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
long long cudacpu_clock64(void);
float cudacpu_fop(int op, int mode, float a, float b, float c);
double cudacpu_dop(int op, int mode, double a, double b, double c);
float cudacpu_f2f_round(double x, int mode);
extern char *cudacpu_dynamic_smem;
}

#define CUDACPU_SITE const char *cudacpu_file = __builtin_FILE(), int cudacpu_line = __builtin_LINE()
#define CUDACPU_AT cudacpu_file, cudacpu_line

#include "cuda_cpu_vector_types.h"

// ---- built-in variables -------------------------------------------------------------------------
/* Same layout as cudacpu_builtins in the runtime: the runtime writes threadIdx before it switches
   to a thread, and blockIdx before every block. */
struct cudacpu_builtins_t {
    uint3 threadIdx;
    uint3 blockIdx;
    dim3 blockDim;
    dim3 gridDim;
};
__attribute__((visibility("hidden"))) cudacpu_builtins_t cudacpu_kernel_builtins;
static const uint3 &threadIdx = cudacpu_kernel_builtins.threadIdx;
static const uint3 &blockIdx = cudacpu_kernel_builtins.blockIdx;
static const dim3 &blockDim = cudacpu_kernel_builtins.blockDim;
static const dim3 &gridDim = cudacpu_kernel_builtins.gridDim;
static constexpr int warpSize = 32;

static inline unsigned cudacpu_linear_tid() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static inline unsigned cudacpu_lane() { return cudacpu_linear_tid() & 31u; }

// ---- barriers and fences ------------------------------------------------------------------------
static inline void __syncthreads(CUDACPU_SITE) { cudacpu_syncthreads(CUDACPU_AT); }
static inline int __syncthreads_count(int predicate, CUDACPU_SITE) {
    return cudacpu_syncthreads_op(CUDACPU_BAR_COUNT, predicate, CUDACPU_AT);
}
static inline int __syncthreads_and(int predicate, CUDACPU_SITE) {
    return cudacpu_syncthreads_op(CUDACPU_BAR_AND, predicate, CUDACPU_AT);
}
static inline int __syncthreads_or(int predicate, CUDACPU_SITE) {
    return cudacpu_syncthreads_op(CUDACPU_BAR_OR, predicate, CUDACPU_AT);
}
/* One OS thread runs the block, so memory is always coherent; a fence only has to stop the
   compiler from moving loads and stores across it. */
static inline void __threadfence_block() { __asm__ __volatile__("" ::: "memory"); }
static inline void __threadfence() { __asm__ __volatile__("" ::: "memory"); }
static inline void __threadfence_system() { __asm__ __volatile__("" ::: "memory"); }
static inline void __nanosleep(unsigned int) { cudacpu_yield(); }

// ---- warp collectives ---------------------------------------------------------------------------
template <typename T>
static inline unsigned long long cudacpu_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "warp shuffles move values of at most 8 bytes");
    unsigned long long b = 0;
    memcpy(&b, &v, sizeof(T));
    return b;
}
template <typename T>
static inline T cudacpu_from_bits(unsigned long long b) {
    T v;
    memcpy(&v, &b, sizeof(T));
    return v;
}

template <typename T>
static inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize, CUDACPU_SITE) {
    return cudacpu_from_bits<T>(cudacpu_warp_op(CUDACPU_SHFL_IDX, mask, cudacpu_bits(var), srcLane, width, CUDACPU_AT));
}
template <typename T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize, CUDACPU_SITE) {
    return cudacpu_from_bits<T>(cudacpu_warp_op(CUDACPU_SHFL_UP, mask, cudacpu_bits(var), (int)delta, width, CUDACPU_AT));
}
template <typename T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize, CUDACPU_SITE) {
    return cudacpu_from_bits<T>(cudacpu_warp_op(CUDACPU_SHFL_DOWN, mask, cudacpu_bits(var), (int)delta, width, CUDACPU_AT));
}
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize, CUDACPU_SITE) {
    return cudacpu_from_bits<T>(cudacpu_warp_op(CUDACPU_SHFL_XOR, mask, cudacpu_bits(var), laneMask, width, CUDACPU_AT));
}
static inline unsigned __ballot_sync(unsigned mask, int predicate, CUDACPU_SITE) {
    return (unsigned)cudacpu_warp_op(CUDACPU_BALLOT, mask, predicate != 0, 0, 32, CUDACPU_AT);
}
static inline int __any_sync(unsigned mask, int predicate, CUDACPU_SITE) {
    return (int)cudacpu_warp_op(CUDACPU_ANY, mask, predicate != 0, 0, 32, CUDACPU_AT);
}
static inline int __all_sync(unsigned mask, int predicate, CUDACPU_SITE) {
    return (int)cudacpu_warp_op(CUDACPU_ALL, mask, predicate != 0, 0, 32, CUDACPU_AT);
}
static inline int __uni_sync(unsigned mask, int predicate, CUDACPU_SITE) {
    int any = (int)cudacpu_warp_op(CUDACPU_ANY, mask, predicate != 0, 0, 32, CUDACPU_AT);
    int all = (int)cudacpu_warp_op(CUDACPU_ALL, mask, predicate != 0, 0, 32, CUDACPU_AT);
    return all || !any;
}
static inline void __syncwarp(unsigned mask = 0xffffffffu, CUDACPU_SITE) {
    cudacpu_warp_op(CUDACPU_SYNCWARP, mask, 0, 0, 32, CUDACPU_AT);
}
/* Lanes that wait at the same call of __activemask() when the whole warp has stopped form one
   converged group: that group is the mask. A macro, so that __COUNTER__ tells apart two calls on
   one line (the two branches of a ?:, say). */
#define __activemask() cudacpu_activemask(__FILE__, __LINE__, __COUNTER__)
template <typename T>
static inline unsigned __match_any_sync(unsigned mask, T value, CUDACPU_SITE) {
    return (unsigned)cudacpu_warp_op(CUDACPU_MATCH_ANY, mask, cudacpu_bits(value), 0, 32, CUDACPU_AT);
}
template <typename T>
static inline unsigned __match_all_sync(unsigned mask, T value, int *pred, CUDACPU_SITE) {
    unsigned long long r = cudacpu_warp_op(CUDACPU_MATCH_ALL, mask, cudacpu_bits(value), 0, 32, CUDACPU_AT);
    *pred = (int)(r >> 32);
    return (unsigned)r;
}
static inline unsigned __reduce_add_sync(unsigned mask, unsigned value, CUDACPU_SITE) {
    return (unsigned)cudacpu_warp_op(CUDACPU_REDUCE_ADD, mask, value, 0, 32, CUDACPU_AT);
}
static inline int __reduce_add_sync(unsigned mask, int value, CUDACPU_SITE) {
    return (int)(unsigned)cudacpu_warp_op(CUDACPU_REDUCE_ADD, mask, (unsigned)value, 0, 32, CUDACPU_AT);
}
static inline unsigned __reduce_min_sync(unsigned mask, unsigned value, CUDACPU_SITE) {
    return (unsigned)cudacpu_warp_op(CUDACPU_REDUCE_MIN_U, mask, value, 0, 32, CUDACPU_AT);
}
static inline int __reduce_min_sync(unsigned mask, int value, CUDACPU_SITE) {
    return (int)(unsigned)cudacpu_warp_op(CUDACPU_REDUCE_MIN_S, mask, (unsigned)value, 0, 32, CUDACPU_AT);
}
static inline unsigned __reduce_max_sync(unsigned mask, unsigned value, CUDACPU_SITE) {
    return (unsigned)cudacpu_warp_op(CUDACPU_REDUCE_MAX_U, mask, value, 0, 32, CUDACPU_AT);
}
static inline int __reduce_max_sync(unsigned mask, int value, CUDACPU_SITE) {
    return (int)(unsigned)cudacpu_warp_op(CUDACPU_REDUCE_MAX_S, mask, (unsigned)value, 0, 32, CUDACPU_AT);
}
static inline unsigned __reduce_and_sync(unsigned mask, unsigned value, CUDACPU_SITE) {
    return (unsigned)cudacpu_warp_op(CUDACPU_REDUCE_AND, mask, value, 0, 32, CUDACPU_AT);
}
static inline unsigned __reduce_or_sync(unsigned mask, unsigned value, CUDACPU_SITE) {
    return (unsigned)cudacpu_warp_op(CUDACPU_REDUCE_OR, mask, value, 0, 32, CUDACPU_AT);
}
static inline unsigned __reduce_xor_sync(unsigned mask, unsigned value, CUDACPU_SITE) {
    return (unsigned)cudacpu_warp_op(CUDACPU_REDUCE_XOR, mask, value, 0, 32, CUDACPU_AT);
}

// ---- atomics ------------------------------------------------------------------------------------
/* One OS thread runs the block and a thread is never interrupted between two barriers, so a
   read-modify-write is indivisible as it stands. Each function keeps CUDA's exact semantics.
   In a traced build (kernels/traffic, -DCUDACPU_TRACE) the read and the write are marked as one
   atomic access, which never races with another atomic. */
#ifdef CUDACPU_TRACE
extern "C" void cudacpu_trace_atomic(int inside);
struct cudacpu_atomic_scope {
    cudacpu_atomic_scope() { cudacpu_trace_atomic(1); }
    ~cudacpu_atomic_scope() { cudacpu_trace_atomic(0); }
};
#define CUDACPU_ATOMIC_SCOPE cudacpu_atomic_scope cudacpu_atomic_scope_;
#else
#define CUDACPU_ATOMIC_SCOPE
#endif
#define CUDACPU_ATOMIC_SCOPES(RET, NAME, PARAMS, ARGS)                                              \
    static inline RET NAME##_block PARAMS { return NAME ARGS; }                                     \
    static inline RET NAME##_system PARAMS { return NAME ARGS; }

#define CUDACPU_ATOMIC_RMW(NAME, T, EXPR)                                                           \
    static inline T NAME(T *address, T val) {                                                       \
        CUDACPU_ATOMIC_SCOPE                                                                        \
        T old = *address;                                                                           \
        *address = (EXPR);                                                                          \
        return old;                                                                                 \
    }                                                                                               \
    CUDACPU_ATOMIC_SCOPES(T, NAME, (T * address, T val), (address, val))

CUDACPU_ATOMIC_RMW(atomicAdd, int, (int)((unsigned)old + (unsigned)val))
CUDACPU_ATOMIC_RMW(atomicAdd, unsigned int, old + val)
CUDACPU_ATOMIC_RMW(atomicAdd, unsigned long long, old + val)
CUDACPU_ATOMIC_RMW(atomicAdd, float, old + val)
CUDACPU_ATOMIC_RMW(atomicAdd, double, old + val)
CUDACPU_ATOMIC_RMW(atomicSub, int, (int)((unsigned)old - (unsigned)val))
CUDACPU_ATOMIC_RMW(atomicSub, unsigned int, old - val)
CUDACPU_ATOMIC_RMW(atomicExch, int, val)
CUDACPU_ATOMIC_RMW(atomicExch, unsigned int, val)
CUDACPU_ATOMIC_RMW(atomicExch, unsigned long long, val)
CUDACPU_ATOMIC_RMW(atomicExch, float, val)
CUDACPU_ATOMIC_RMW(atomicMin, int, val < old ? val : old)
CUDACPU_ATOMIC_RMW(atomicMin, unsigned int, val < old ? val : old)
CUDACPU_ATOMIC_RMW(atomicMin, long long, val < old ? val : old)
CUDACPU_ATOMIC_RMW(atomicMin, unsigned long long, val < old ? val : old)
CUDACPU_ATOMIC_RMW(atomicMax, int, val > old ? val : old)
CUDACPU_ATOMIC_RMW(atomicMax, unsigned int, val > old ? val : old)
CUDACPU_ATOMIC_RMW(atomicMax, long long, val > old ? val : old)
CUDACPU_ATOMIC_RMW(atomicMax, unsigned long long, val > old ? val : old)
CUDACPU_ATOMIC_RMW(atomicAnd, int, old & val)
CUDACPU_ATOMIC_RMW(atomicAnd, unsigned int, old & val)
CUDACPU_ATOMIC_RMW(atomicAnd, unsigned long long, old & val)
CUDACPU_ATOMIC_RMW(atomicOr, int, old | val)
CUDACPU_ATOMIC_RMW(atomicOr, unsigned int, old | val)
CUDACPU_ATOMIC_RMW(atomicOr, unsigned long long, old | val)
CUDACPU_ATOMIC_RMW(atomicXor, int, old ^ val)
CUDACPU_ATOMIC_RMW(atomicXor, unsigned int, old ^ val)
CUDACPU_ATOMIC_RMW(atomicXor, unsigned long long, old ^ val)
/* atomicInc: ((old >= val) ? 0 : (old + 1)); atomicDec: (((old == 0) || (old > val)) ? val : (old - 1)) */
CUDACPU_ATOMIC_RMW(atomicInc, unsigned int, old >= val ? 0u : old + 1u)
CUDACPU_ATOMIC_RMW(atomicDec, unsigned int, (old == 0u || old > val) ? val : old - 1u)

#define CUDACPU_ATOMIC_CAS(T)                                                                       \
    static inline T atomicCAS(T *address, T compare, T val) {                                       \
        CUDACPU_ATOMIC_SCOPE                                                                        \
        T old = *address;                                                                           \
        if (old == compare) {                                                                       \
            *address = val;                                                                         \
            cudacpu_cas_succeeded();                                                                \
        } else {                                                                                    \
            cudacpu_cas_failed(); /* a spin loop lets the other threads run now and then */        \
        }                                                                                           \
        return old;                                                                                 \
    }                                                                                               \
    CUDACPU_ATOMIC_SCOPES(T, atomicCAS, (T * address, T compare, T val), (address, compare, val))

CUDACPU_ATOMIC_CAS(int)
CUDACPU_ATOMIC_CAS(unsigned int)
CUDACPU_ATOMIC_CAS(unsigned long long)
CUDACPU_ATOMIC_CAS(unsigned short)

#undef CUDACPU_ATOMIC_RMW
#undef CUDACPU_ATOMIC_CAS

// ---- loads and stores with cache hints: plain accesses here -------------------------------------
template <typename T> static inline T __ldg(const T *p) { return *p; }
template <typename T> static inline T __ldcg(const T *p) { return *p; }
template <typename T> static inline T __ldca(const T *p) { return *p; }
template <typename T> static inline T __ldcs(const T *p) { return *p; }
template <typename T> static inline T __ldlu(const T *p) { return *p; }
template <typename T> static inline T __ldcv(const T *p) { return *(const volatile T *)p; }
template <typename T> static inline void __stcg(T *p, T v) { *p = v; }
template <typename T> static inline void __stcs(T *p, T v) { *p = v; }
template <typename T> static inline void __stwb(T *p, T v) { *p = v; }
template <typename T> static inline void __stwt(T *p, T v) { *p = v; }

// ---- integer intrinsics -------------------------------------------------------------------------
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x) {
    return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
static inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}
static inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)((v << (shift & 31)) >> 32);
}
static inline unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)((v << (shift > 32 ? 32 : shift)) >> 32);
}
static inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)(v >> (shift & 31));
}
static inline unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)(v >> (shift > 32 ? 32 : shift));
}
static inline int __mul24(int x, int y) {
    return (int)(((long long)(x << 8 >> 8) * (long long)(y << 8 >> 8)));
}
static inline unsigned int __umul24(unsigned int x, unsigned int y) { return (x & 0xffffffu) * (y & 0xffffffu); }
static inline int __mulhi(int x, int y) { return (int)(((long long)x * y) >> 32); }
static inline unsigned int __umulhi(unsigned int x, unsigned int y) { return (unsigned)(((unsigned long long)x * y) >> 32); }
static inline long long __mul64hi(long long x, long long y) { return (long long)(((__int128)x * y) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
    return (unsigned long long)(((unsigned __int128)x * y) >> 64);
}
static inline unsigned int __sad(int x, int y, unsigned int z) { return z + (unsigned)(x > y ? x - y : y - x); }
static inline unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) { return z + (x > y ? x - y : y - x); }
static inline int __hadd(int x, int y) { return (int)(((long long)x + y) >> 1); }
static inline int __rhadd(int x, int y) { return (int)(((long long)x + y + 1) >> 1); }
static inline unsigned int __uhadd(unsigned int x, unsigned int y) { return (unsigned)(((unsigned long long)x + y) >> 1); }
static inline unsigned int __urhadd(unsigned int x, unsigned int y) { return (unsigned)(((unsigned long long)x + y + 1) >> 1); }
static inline int __dp4a(int a, int b, int c) {
    int r = c;
    for (int i = 0; i < 4; ++i) r += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
    return r;
}
static inline unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) {
    unsigned r = c;
    for (int i = 0; i < 4; ++i) r += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
    return r;
}

// ---- min and max, with CUDA's overloads ---------------------------------------------------------
#define CUDACPU_MINMAX(A, B, R)                                                                     \
    static inline R min(A a, B b) { return (R)a < (R)b ? (R)a : (R)b; }                             \
    static inline R max(A a, B b) { return (R)a > (R)b ? (R)a : (R)b; }
CUDACPU_MINMAX(int, int, int)
CUDACPU_MINMAX(unsigned int, unsigned int, unsigned int)
CUDACPU_MINMAX(int, unsigned int, unsigned int)
CUDACPU_MINMAX(unsigned int, int, unsigned int)
CUDACPU_MINMAX(long, long, long)
CUDACPU_MINMAX(unsigned long, unsigned long, unsigned long)
CUDACPU_MINMAX(long, unsigned long, unsigned long)
CUDACPU_MINMAX(unsigned long, long, unsigned long)
CUDACPU_MINMAX(long long, long long, long long)
CUDACPU_MINMAX(unsigned long long, unsigned long long, unsigned long long)
CUDACPU_MINMAX(long long, unsigned long long, unsigned long long)
CUDACPU_MINMAX(unsigned long long, long long, unsigned long long)
#undef CUDACPU_MINMAX
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(float a, double b) { return fmin((double)a, b); }
static inline double max(float a, double b) { return fmax((double)a, b); }
static inline double min(double a, float b) { return fmin(a, (double)b); }
static inline double max(double a, float b) { return fmax(a, (double)b); }
static inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

// ---- reinterpretations and conversions ----------------------------------------------------------
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
static inline float __uint_as_float(unsigned int x) { float f; memcpy(&f, &x, 4); return f; }
static inline unsigned int __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
static inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
static inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
static inline int __double2hiint(double x) { return (int)(__double_as_longlong(x) >> 32); }
static inline int __double2loint(double x) { return (int)__double_as_longlong(x); }
static inline double __hiloint2double(int hi, int lo) {
    return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}

/* GPU float-to-integer conversions saturate, and NaN becomes 0. */
template <typename I>
static inline I cudacpu_saturate_int(double r) {
    if (r != r) return 0;
    if (r >= (double)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
    if (r <= (double)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
    return (I)r;
}
#define CUDACPU_F2I(NAME, FROM, I)                                                                  \
    static inline I NAME##_rn(FROM x) { return cudacpu_saturate_int<I>(nearbyint((double)x)); }    \
    static inline I NAME##_rz(FROM x) { return cudacpu_saturate_int<I>(trunc((double)x)); }        \
    static inline I NAME##_ru(FROM x) { return cudacpu_saturate_int<I>(ceil((double)x)); }         \
    static inline I NAME##_rd(FROM x) { return cudacpu_saturate_int<I>(floor((double)x)); }
CUDACPU_F2I(__float2int, float, int)
CUDACPU_F2I(__float2uint, float, unsigned int)
CUDACPU_F2I(__float2ll, float, long long)
CUDACPU_F2I(__float2ull, float, unsigned long long)
CUDACPU_F2I(__double2int, double, int)
CUDACPU_F2I(__double2uint, double, unsigned int)
CUDACPU_F2I(__double2ll, double, long long)
CUDACPU_F2I(__double2ull, double, unsigned long long)
#undef CUDACPU_F2I
static inline float __double2float_rn(double x) { return (float)x; }
static inline float __double2float_rz(double x) { return cudacpu_f2f_round(x, CUDACPU_RZ); }
static inline float __double2float_ru(double x) { return cudacpu_f2f_round(x, CUDACPU_RU); }
static inline float __double2float_rd(double x) { return cudacpu_f2f_round(x, CUDACPU_RD); }
#define CUDACPU_I2F(NAME, FROM)                                                                     \
    static inline float NAME##_rn(FROM x) { return (float)x; }                                     \
    static inline float NAME##_rz(FROM x) { return cudacpu_f2f_round((double)x, CUDACPU_RZ); }      \
    static inline float NAME##_ru(FROM x) { return cudacpu_f2f_round((double)x, CUDACPU_RU); }      \
    static inline float NAME##_rd(FROM x) { return cudacpu_f2f_round((double)x, CUDACPU_RD); }
CUDACPU_I2F(__int2float, int)
CUDACPU_I2F(__uint2float, unsigned int)
#undef CUDACPU_I2F
static inline float __ll2float_rn(long long x) { return (float)x; }
static inline float __ull2float_rn(unsigned long long x) { return (float)x; }
static inline double __int2double_rn(int x) { return (double)x; }
static inline double __uint2double_rn(unsigned int x) { return (double)x; }
static inline double __ll2double_rn(long long x) { return (double)x; }
static inline double __ull2double_rn(unsigned long long x) { return (double)x; }

// ---- floating-point intrinsics ------------------------------------------------------------------
/* Round-to-nearest versions are the plain operations; the directed modes go through the runtime,
   which is compiled to honour the rounding mode. volatile keeps them from being fused or folded. */
static inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
static inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
static inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __frsqrt_rn(float a) { return 1.0f / sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { volatile double r = a + b; return r; }
static inline double __dsub_rn(double a, double b) { volatile double r = a - b; return r; }
static inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __drcp_rn(double a) { return 1.0 / a; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
#define CUDACPU_DIRECTED(SUFFIX, MODE)                                                              \
    static inline float __fadd_##SUFFIX(float a, float b) { return cudacpu_fop(CUDACPU_FP_ADD, MODE, a, b, 0); } \
    static inline float __fsub_##SUFFIX(float a, float b) { return cudacpu_fop(CUDACPU_FP_SUB, MODE, a, b, 0); } \
    static inline float __fmul_##SUFFIX(float a, float b) { return cudacpu_fop(CUDACPU_FP_MUL, MODE, a, b, 0); } \
    static inline float __fdiv_##SUFFIX(float a, float b) { return cudacpu_fop(CUDACPU_FP_DIV, MODE, a, b, 0); } \
    static inline float __frcp_##SUFFIX(float a) { return cudacpu_fop(CUDACPU_FP_RCP, MODE, a, 0, 0); }          \
    static inline float __fsqrt_##SUFFIX(float a) { return cudacpu_fop(CUDACPU_FP_SQRT, MODE, a, 0, 0); }        \
    static inline float __fmaf_##SUFFIX(float a, float b, float c) { return cudacpu_fop(CUDACPU_FP_FMA, MODE, a, b, c); } \
    static inline double __dadd_##SUFFIX(double a, double b) { return cudacpu_dop(CUDACPU_FP_ADD, MODE, a, b, 0); } \
    static inline double __dsub_##SUFFIX(double a, double b) { return cudacpu_dop(CUDACPU_FP_SUB, MODE, a, b, 0); } \
    static inline double __dmul_##SUFFIX(double a, double b) { return cudacpu_dop(CUDACPU_FP_MUL, MODE, a, b, 0); } \
    static inline double __ddiv_##SUFFIX(double a, double b) { return cudacpu_dop(CUDACPU_FP_DIV, MODE, a, b, 0); } \
    static inline double __drcp_##SUFFIX(double a) { return cudacpu_dop(CUDACPU_FP_RCP, MODE, a, 0, 0); }          \
    static inline double __dsqrt_##SUFFIX(double a) { return cudacpu_dop(CUDACPU_FP_SQRT, MODE, a, 0, 0); }        \
    static inline double __fma_##SUFFIX(double a, double b, double c) { return cudacpu_dop(CUDACPU_FP_FMA, MODE, a, b, c); }
CUDACPU_DIRECTED(rz, CUDACPU_RZ)
CUDACPU_DIRECTED(ru, CUDACPU_RU)
CUDACPU_DIRECTED(rd, CUDACPU_RD)
#undef CUDACPU_DIRECTED

/* The fast-math intrinsics are approximations on a GPU; here they are the accurate functions. */
/* (The C library declares functions of these names already: macros keep CUDA's meaning.) */
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __sincosf(x, s, c) sincosf((x), (s), (c))
#define __powf(x, y) powf((x), (y))
static inline float __fdividef(float x, float y) { return x / y; }
static inline float fdividef(float x, float y) { return x / y; }
static inline float __saturatef(float x) { return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }  // NaN -> 0
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline double rcbrt(double x) { return 1.0 / cbrt(x); }
static inline double cudacpu_sinpi(double x) {
    double r = fmod(x, 2.0);                      // sin(pi x) is exactly 0 at integers
    if (r == floor(r)) return copysign(0.0, x);
    return sin(M_PI * r);
}
static inline double cudacpu_cospi(double x) {
    double r = fmod(fabs(x), 2.0);
    if (r == 0.5 || r == 1.5) return 0.0;
    return cos(M_PI * r);
}
static inline double sinpi(double x) { return cudacpu_sinpi(x); }
static inline double cospi(double x) { return cudacpu_cospi(x); }
static inline float sinpif(float x) { return (float)cudacpu_sinpi(x); }
static inline float cospif(float x) { return (float)cudacpu_cospi(x); }
static inline void sincospi(double x, double *s, double *c) { *s = sinpi(x); *c = cospi(x); }
static inline void sincospif(float x, float *s, float *c) { *s = sinpif(x); *c = cospif(x); }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752); }
static inline double erfinv(double y) {
    if (y <= -1.0) return y == -1.0 ? -HUGE_VAL : NAN;
    if (y >= 1.0) return y == 1.0 ? HUGE_VAL : NAN;
    double w = -log((1.0 - y) * (1.0 + y)), x;   // Giles' approximation, then two Newton steps
    if (w < 5.0) {
        w -= 2.5;
        x = 2.81022636e-08;
        x = 3.43273939e-07 + x * w; x = -3.5233877e-06 + x * w; x = -4.39150654e-06 + x * w;
        x = 0.00021858087 + x * w; x = -0.00125372503 + x * w; x = -0.00417768164 + x * w;
        x = 0.246640727 + x * w; x = 1.50140941 + x * w;
    } else {
        w = sqrt(w) - 3.0;
        x = -0.000200214257;
        x = 0.000100950558 + x * w; x = 0.00134934322 + x * w; x = -0.00367342844 + x * w;
        x = 0.00573950773 + x * w; x = -0.0076224613 + x * w; x = 0.00943887047 + x * w;
        x = 1.00167406 + x * w; x = 2.83297682 + x * w;
    }
    x *= y;
    for (int i = 0; i < 2; ++i) x -= (erf(x) - y) / (1.1283791670955126 * exp(-x * x));
    return x;
}
static inline float erfinvf(float y) { return (float)erfinv(y); }
static inline double erfcinv(double y) { return erfinv(1.0 - y); }
static inline float erfcinvf(float y) { return (float)erfinv(1.0 - (double)y); }
static inline double normcdfinv(double p) { return -1.4142135623730951 * erfcinv(2.0 * p); }
static inline float normcdfinvf(float p) { return (float)normcdfinv(p); }
static inline double erfcx(double x) { return exp(x * x) * erfc(x); }
static inline float erfcxf(float x) { return (float)erfcx(x); }
static inline float norm3df(float a, float b, float c) { return (float)sqrt((double)a * a + (double)b * b + (double)c * c); }
static inline float rnorm3df(float a, float b, float c) { return 1.0f / norm3df(a, b, c); }
static inline float norm4df(float a, float b, float c, float d) {
    return (float)sqrt((double)a * a + (double)b * b + (double)c * c + (double)d * d);
}
static inline float rnorm4df(float a, float b, float c, float d) { return 1.0f / norm4df(a, b, c, d); }
static inline double norm3d(double a, double b, double c) { return sqrt(a * a + b * b + c * c); }
static inline double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
static inline float rhypotf(float a, float b) { return 1.0f / hypotf(a, b); }
static inline double rhypot(double a, double b) { return 1.0 / hypot(a, b); }
static inline float normf(int dim, const float *a) {
    double s = 0;
    for (int i = 0; i < dim; ++i) s += (double)a[i] * a[i];
    return (float)sqrt(s);
}
static inline float rnormf(int dim, const float *a) { return 1.0f / normf(dim, a); }

// ---- clocks, traps, printf, assert --------------------------------------------------------------
static inline long long clock64() { return cudacpu_clock64(); }
static inline unsigned long long __globaltimer() { return (unsigned long long)cudacpu_clock64(); }
static inline void __trap(CUDACPU_SITE) { cudacpu_trap(6, "__trap()", CUDACPU_AT); }
static inline void __brkpt(CUDACPU_SITE) { cudacpu_trap(6, "__brkpt()", CUDACPU_AT); }

/* printf writes into the launch's output buffer; Python prints it after the launch. */
#define printf cudacpu_printf
namespace std { using ::cudacpu_printf; }

#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : cudacpu_trap(5, #e, __FILE__, __LINE__))
#endif
/* A later #include <assert.h> brings back the C library's assert: route its failure here too. */
extern "C" __attribute__((visibility("hidden"), noreturn)) void
__assert_fail(const char *assertion, const char *file, unsigned int line, const char *) noexcept {
    cudacpu_trap(5, assertion, file, (int)line);
}

// ---- entry points (used by the wrappers the compiler driver appends after the source) -----------
/* cudacpu_invoke(&kernel, args) calls kernel(*args[0], *args[1], ...) with each argument read as the
   kernel's own parameter type, deduced from the function pointer (works for template
   instantiations given as name expressions, e.g. &reduce<float, 256>). */
template <typename T>
using cudacpu_param_t = typename std::remove_cv<typename std::remove_reference<T>::type>::type;
template <typename... P, size_t... I>
static inline void cudacpu_invoke_impl(void (*f)(P...), void **a, std::index_sequence<I...>) {
    (void)a;
    f(*static_cast<cudacpu_param_t<P> *>(a[I])...);
}
template <typename... P>
static inline void cudacpu_invoke(void (*f)(P...), void **a) {
    cudacpu_invoke_impl(f, a, std::index_sequence_for<P...>{});
}
template <typename... P>
static inline int cudacpu_param_sizes(void (*)(P...), unsigned long long *s, int cap) {
    const unsigned long long sizes[] = {sizeof(cudacpu_param_t<P>)..., 0ull};
    const int n = (int)sizeof...(P);
    for (int i = 0; i < n && i < cap; ++i) s[i] = sizes[i];
    return n;
}
