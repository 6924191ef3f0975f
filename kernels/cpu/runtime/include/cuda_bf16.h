/* cuda_bf16.h for the CPU backend: __nv_bfloat16 (the upper 16 bits of a float) and
 * __nv_bfloat162, with round-to-nearest-even conversions; arithmetic rounds each result to bf16.
 */
#pragma once
#include "cuda_fp16.h"

static inline unsigned short cudacpu_float2bf16_bits(float f) {
    unsigned int x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);   // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return (unsigned short)(x >> 16);
}
static inline float cudacpu_bf16_bits2float(unsigned short b) {
    unsigned int x = (unsigned int)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

struct __nv_bfloat16_raw { unsigned short x; };

struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    constexpr __nv_bfloat16(const __nv_bfloat16_raw &r) : __x(r.x) {}
    __nv_bfloat16(float f) : __x(cudacpu_float2bf16_bits(f)) {}
    __nv_bfloat16(double f) : __x(cudacpu_float2bf16_bits((float)f)) {}
    __nv_bfloat16(int v) : __x(cudacpu_float2bf16_bits((float)v)) {}
    operator float() const { return cudacpu_bf16_bits2float(__x); }
    __nv_bfloat16 &operator=(float f) { __x = cudacpu_float2bf16_bits(f); return *this; }
};
typedef __nv_bfloat16 nv_bfloat16;

struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    __nv_bfloat162() = default;
    constexpr __nv_bfloat162(const __nv_bfloat16 &a, const __nv_bfloat16 &b) : x(a), y(b) {}
};
typedef __nv_bfloat162 nv_bfloat162;

static inline __nv_bfloat16 cudacpu_make_bf16(unsigned short bits) { __nv_bfloat16 h; h.__x = bits; return h; }
static inline __nv_bfloat16 __float2bfloat16(float a) { return cudacpu_make_bf16(cudacpu_float2bf16_bits(a)); }
static inline __nv_bfloat16 __float2bfloat16_rn(float a) { return __float2bfloat16(a); }
static inline float __bfloat162float(__nv_bfloat16 a) { return cudacpu_bf16_bits2float(a.__x); }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162(__float2bfloat16(a), __float2bfloat16(b));
}
static inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __floats2bfloat162_rn(a, a); }
static inline float2 __bfloat1622float2(__nv_bfloat162 a) {
    return make_float2(__bfloat162float(a.x), __bfloat162float(a.y));
}
static inline float __low2float(__nv_bfloat162 a) { return __bfloat162float(a.x); }
static inline float __high2float(__nv_bfloat162 a) { return __bfloat162float(a.y); }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) { return __nv_bfloat162(lo, hi); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short i) { return cudacpu_make_bf16(i); }

#define CUDACPU_BF16_OP(NAME, EXPR)                                                                 \
    static inline __nv_bfloat16 NAME(__nv_bfloat16 a, __nv_bfloat16 b) {                            \
        float x = __bfloat162float(a), y = __bfloat162float(b);                                     \
        return __float2bfloat16(EXPR);                                                              \
    }
CUDACPU_BF16_OP(__hadd, x + y)
CUDACPU_BF16_OP(__hsub, x - y)
CUDACPU_BF16_OP(__hmul, x * y)
CUDACPU_BF16_OP(__hdiv, x / y)
CUDACPU_BF16_OP(__hmax, fmaxf(x, y))
CUDACPU_BF16_OP(__hmin, fminf(x, y))
#undef CUDACPU_BF16_OP
static inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
    return __float2bfloat16((float)((double)__bfloat162float(a) * __bfloat162float(b) + __bfloat162float(c)));
}
static inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return cudacpu_make_bf16((unsigned short)(a.__x ^ 0x8000u)); }
static inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
static inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
static inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
    return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
static inline __nv_bfloat16 operator+(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hadd(a, b); }
static inline __nv_bfloat16 operator-(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hsub(a, b); }
static inline __nv_bfloat16 operator*(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hmul(a, b); }
static inline __nv_bfloat16 operator/(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hdiv(a, b); }
static inline __nv_bfloat16 &operator+=(__nv_bfloat16 &a, const __nv_bfloat16 &b) { a = __hadd(a, b); return a; }
static inline __nv_bfloat16 &operator*=(__nv_bfloat16 &a, const __nv_bfloat16 &b) { a = __hmul(a, b); return a; }
static inline __nv_bfloat16 operator-(const __nv_bfloat16 &a) { return __hneg(a); }
static inline bool operator==(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return (float)a == (float)b; }
static inline bool operator<(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return (float)a < (float)b; }
static inline bool operator>(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return (float)a > (float)b; }
