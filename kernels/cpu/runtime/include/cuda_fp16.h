/* cuda_fp16.h for the CPU backend: __half and __half2 with CUDA's conversions and arithmetic.
 *
 * A __half is 16 bits (IEEE binary16) stored in an unsigned short. Arithmetic converts to float,
 * computes, and rounds the result back to half (round to nearest even), which gives the correctly
 * rounded half result for +, -, *, / and sqrt; __hfma computes in double so that it rounds once.
 */
#pragma once
#include "cuda_cpu.h"

static inline unsigned short cudacpu_float2half_bits(float f) {
    unsigned int x;
    memcpy(&x, &f, 4);
    unsigned int sign = (x >> 16) & 0x8000u;
    unsigned int ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)                                    // Inf or NaN (keep a quiet NaN)
        return (unsigned short)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);   // rounds to Inf
    if (ax < 0x38800000u) {                                   // subnormal half (or zero)
        float a;
        memcpy(&a, &ax, 4);
        unsigned int m = (unsigned int)nearbyintf(a * 16777216.0f);   // units of 2^-24, ties to even
        return (unsigned short)(sign | m);
    }
    unsigned int h = ((((ax >> 23) - 112u) << 10) | ((ax >> 13) & 0x3ffu));
    unsigned int rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return (unsigned short)(sign | h);
}

static inline float cudacpu_half_bits2float(unsigned short h) {
    unsigned int sign = (unsigned int)(h & 0x8000u) << 16;
    unsigned int e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    unsigned int x;
    if (e == 0) {
        if (m == 0) {
            x = sign;
        } else {                                              // subnormal: normalise
            float f = (float)m * 5.9604644775390625e-08f;     // m * 2^-24, exact
            memcpy(&x, &f, 4);
            x |= sign;
        }
    } else if (e == 31) {
        x = sign | 0x7f800000u | (m << 13);
    } else {
        x = sign | ((e + 112u) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

struct __half_raw { unsigned short x; };

struct __half {
    unsigned short __x;
    __half() = default;
    constexpr __half(const __half_raw &r) : __x(r.x) {}
    __half(float f) : __x(cudacpu_float2half_bits(f)) {}
    __half(double f) : __x(cudacpu_float2half_bits((float)f)) {}
    __half(int v) : __x(cudacpu_float2half_bits((float)v)) {}
    __half(unsigned int v) : __x(cudacpu_float2half_bits((float)v)) {}
    __half(short v) : __x(cudacpu_float2half_bits((float)v)) {}
    __half(unsigned short v) : __x(cudacpu_float2half_bits((float)v)) {}
    __half(long long v) : __x(cudacpu_float2half_bits((float)v)) {}
    __half(unsigned long long v) : __x(cudacpu_float2half_bits((float)v)) {}
    operator float() const { return cudacpu_half_bits2float(__x); }
    operator __half_raw() const { return __half_raw{__x}; }
    __half &operator=(float f) { __x = cudacpu_float2half_bits(f); return *this; }
    __half &operator=(const __half_raw &r) { __x = r.x; return *this; }
};
static_assert(sizeof(__half) == 2, "__half is 16 bits");
typedef __half half;

struct __half2_raw { unsigned short x, y; };

struct alignas(4) __half2 {
    __half x, y;
    __half2() = default;
    constexpr __half2(const __half &a, const __half &b) : x(a), y(b) {}
    __half2(const __half2_raw &r) { x.__x = r.x; y.__x = r.y; }
    operator __half2_raw() const { return __half2_raw{x.__x, y.__x}; }
};
typedef __half2 half2;

static inline __half cudacpu_make_half(unsigned short bits) { __half h; h.__x = bits; return h; }

// ---- conversions --------------------------------------------------------------------------------
static inline __half __float2half(float a) { return cudacpu_make_half(cudacpu_float2half_bits(a)); }
static inline __half __float2half_rn(float a) { return __float2half(a); }
static inline __half __double2half(double a) { return __float2half((float)a); }
static inline float __half2float(__half a) { return cudacpu_half_bits2float(a.__x); }
static inline __half2 __float2half2_rn(float a) { return __half2(__float2half(a), __float2half(a)); }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2(__float2half(a), __float2half(b)); }
static inline __half2 __halves2half2(__half lo, __half hi) { return __half2(lo, hi); }
static inline __half2 __half2half2(__half a) { return __half2(a, a); }
static inline __half2 make_half2(__half x, __half y) { return __half2(x, y); }
static inline float2 __half22float2(__half2 a) { return make_float2(__half2float(a.x), __half2float(a.y)); }
static inline __half2 __float22half2_rn(float2 a) { return __floats2half2_rn(a.x, a.y); }
static inline float __low2float(__half2 a) { return __half2float(a.x); }
static inline float __high2float(__half2 a) { return __half2float(a.y); }
static inline __half __low2half(__half2 a) { return a.x; }
static inline __half __high2half(__half2 a) { return a.y; }
static inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
static inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
static inline __half2 __low2half2(__half2 a) { return __half2(a.x, a.x); }
static inline __half2 __high2half2(__half2 a) { return __half2(a.y, a.y); }
static inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }
static inline __half __int2half_rn(int i) { return __float2half((float)i); }
static inline __half __uint2half_rn(unsigned int i) { return __float2half((float)i); }
static inline __half __short2half_rn(short i) { return __float2half((float)i); }
static inline int __half2int_rn(__half h) { return __float2int_rn(__half2float(h)); }
static inline int __half2int_rz(__half h) { return __float2int_rz(__half2float(h)); }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __short_as_half(short i) { return cudacpu_make_half((unsigned short)i); }
static inline __half __ushort_as_half(unsigned short i) { return cudacpu_make_half(i); }

// ---- arithmetic ---------------------------------------------------------------------------------
static inline __half __hadd(__half a, __half b) { return __float2half(__half2float(a) + __half2float(b)); }
static inline __half __hsub(__half a, __half b) { return __float2half(__half2float(a) - __half2float(b)); }
static inline __half __hmul(__half a, __half b) { return __float2half(__half2float(a) * __half2float(b)); }
static inline __half __hdiv(__half a, __half b) { return __float2half(__half2float(a) / __half2float(b)); }
static inline __half __hadd_sat(__half a, __half b) { return __float2half(__saturatef(__half2float(a) + __half2float(b))); }
static inline __half __hmul_sat(__half a, __half b) { return __float2half(__saturatef(__half2float(a) * __half2float(b))); }
static inline __half __hfma(__half a, __half b, __half c) {
    return __float2half((float)((double)__half2float(a) * __half2float(b) + __half2float(c)));
}
static inline __half __hfma_sat(__half a, __half b, __half c) { return __float2half(__saturatef(__half2float(__hfma(a, b, c)))); }
static inline __half __hneg(__half a) { return cudacpu_make_half((unsigned short)(a.__x ^ 0x8000u)); }
static inline __half __habs(__half a) { return cudacpu_make_half((unsigned short)(a.__x & 0x7fffu)); }
static inline bool __hisnan(__half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
static inline int __hisinf(__half a) { return (a.__x & 0x7fffu) == 0x7c00u ? ((a.__x & 0x8000u) ? -1 : 1) : 0; }
static inline __half __hmax(__half a, __half b) { return __float2half(fmaxf(__half2float(a), __half2float(b))); }
static inline __half __hmin(__half a, __half b) { return __float2half(fminf(__half2float(a), __half2float(b))); }
static inline bool __heq(__half a, __half b) { return __half2float(a) == __half2float(b); }
static inline bool __hne(__half a, __half b) { return __half2float(a) != __half2float(b); }
static inline bool __hlt(__half a, __half b) { return __half2float(a) < __half2float(b); }
static inline bool __hle(__half a, __half b) { return __half2float(a) <= __half2float(b); }
static inline bool __hgt(__half a, __half b) { return __half2float(a) > __half2float(b); }
static inline bool __hge(__half a, __half b) { return __half2float(a) >= __half2float(b); }
static inline __half hsqrt(__half a) { return __float2half(sqrtf(__half2float(a))); }
static inline __half hrsqrt(__half a) { return __float2half(1.0f / sqrtf(__half2float(a))); }
static inline __half hrcp(__half a) { return __float2half(1.0f / __half2float(a)); }
static inline __half hexp(__half a) { return __float2half(expf(__half2float(a))); }
static inline __half hexp2(__half a) { return __float2half(exp2f(__half2float(a))); }
static inline __half hlog(__half a) { return __float2half(logf(__half2float(a))); }
static inline __half hlog2(__half a) { return __float2half(log2f(__half2float(a))); }
static inline __half hsin(__half a) { return __float2half(sinf(__half2float(a))); }
static inline __half hcos(__half a) { return __float2half(cosf(__half2float(a))); }
static inline __half hfloor(__half a) { return __float2half(floorf(__half2float(a))); }
static inline __half hceil(__half a) { return __float2half(ceilf(__half2float(a))); }
static inline __half htrunc(__half a) { return __float2half(truncf(__half2float(a))); }

#define CUDACPU_HALF2_BINARY(NAME, OP)                                                              \
    static inline __half2 NAME(__half2 a, __half2 b) { return __half2(OP(a.x, b.x), OP(a.y, b.y)); }
CUDACPU_HALF2_BINARY(__hadd2, __hadd)
CUDACPU_HALF2_BINARY(__hsub2, __hsub)
CUDACPU_HALF2_BINARY(__hmul2, __hmul)
CUDACPU_HALF2_BINARY(__h2div, __hdiv)
CUDACPU_HALF2_BINARY(__hadd2_sat, __hadd_sat)
CUDACPU_HALF2_BINARY(__hmul2_sat, __hmul_sat)
CUDACPU_HALF2_BINARY(__hmax2, __hmax)
CUDACPU_HALF2_BINARY(__hmin2, __hmin)
#undef CUDACPU_HALF2_BINARY
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }
static inline __half2 __hneg2(__half2 a) { return __half2(__hneg(a.x), __hneg(a.y)); }
static inline __half2 __habs2(__half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
static inline __half2 h2sqrt(__half2 a) { return __half2(hsqrt(a.x), hsqrt(a.y)); }
static inline __half2 h2exp(__half2 a) { return __half2(hexp(a.x), hexp(a.y)); }
static inline bool __hbeq2(__half2 a, __half2 b) { return __heq(a.x, b.x) && __heq(a.y, b.y); }

// ---- operators (as cuda_fp16.hpp defines them for device code) ----------------------------------
static inline __half operator+(const __half &a, const __half &b) { return __hadd(a, b); }
static inline __half operator-(const __half &a, const __half &b) { return __hsub(a, b); }
static inline __half operator*(const __half &a, const __half &b) { return __hmul(a, b); }
static inline __half operator/(const __half &a, const __half &b) { return __hdiv(a, b); }
static inline __half &operator+=(__half &a, const __half &b) { a = __hadd(a, b); return a; }
static inline __half &operator-=(__half &a, const __half &b) { a = __hsub(a, b); return a; }
static inline __half &operator*=(__half &a, const __half &b) { a = __hmul(a, b); return a; }
static inline __half &operator/=(__half &a, const __half &b) { a = __hdiv(a, b); return a; }
static inline __half operator+(const __half &a) { return a; }
static inline __half operator-(const __half &a) { return __hneg(a); }
static inline bool operator==(const __half &a, const __half &b) { return __heq(a, b); }
static inline bool operator!=(const __half &a, const __half &b) { return __hne(a, b); }
static inline bool operator<(const __half &a, const __half &b) { return __hlt(a, b); }
static inline bool operator<=(const __half &a, const __half &b) { return __hle(a, b); }
static inline bool operator>(const __half &a, const __half &b) { return __hgt(a, b); }
static inline bool operator>=(const __half &a, const __half &b) { return __hge(a, b); }
static inline __half2 operator+(const __half2 &a, const __half2 &b) { return __hadd2(a, b); }
static inline __half2 operator-(const __half2 &a, const __half2 &b) { return __hsub2(a, b); }
static inline __half2 operator*(const __half2 &a, const __half2 &b) { return __hmul2(a, b); }
static inline __half2 operator/(const __half2 &a, const __half2 &b) { return __h2div(a, b); }
static inline __half2 &operator+=(__half2 &a, const __half2 &b) { a = __hadd2(a, b); return a; }
static inline __half2 &operator-=(__half2 &a, const __half2 &b) { a = __hsub2(a, b); return a; }
static inline __half2 &operator*=(__half2 &a, const __half2 &b) { a = __hmul2(a, b); return a; }
static inline __half2 operator-(const __half2 &a) { return __hneg2(a); }

// ---- atomics and loads --------------------------------------------------------------------------
static inline __half atomicAdd(__half *address, __half val) { CUDACPU_ATOMIC_SCOPE __half old = *address; *address = __hadd(old, val); return old; }
static inline __half2 atomicAdd(__half2 *address, __half2 val) { CUDACPU_ATOMIC_SCOPE __half2 old = *address; *address = __hadd2(old, val); return old; }
