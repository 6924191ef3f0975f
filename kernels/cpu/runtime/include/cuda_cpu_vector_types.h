/* CUDA's built-in vector types (float4, int2, uchar4, ...) with CUDA's sizes and alignments, and
 * their make_* functions. The alignment matters: a float4 load through reinterpret_cast needs a
 * 16-byte aligned address on the GPU, and the CPU compiler may use aligned vector instructions too.
 */
#pragma once

#define CUDACPU_VECTOR_FAMILY(T, NAME, ALIGN2, ALIGN4)                                              \
    struct NAME##1 { T x; };                                                                        \
    struct alignas(ALIGN2) NAME##2 { T x, y; };                                                     \
    struct NAME##3 { T x, y, z; };                                                                  \
    struct alignas(ALIGN4) NAME##4 { T x, y, z, w; };                                               \
    static inline NAME##1 make_##NAME##1(T x) { NAME##1 r; r.x = x; return r; }                    \
    static inline NAME##2 make_##NAME##2(T x, T y) { NAME##2 r; r.x = x; r.y = y; return r; }      \
    static inline NAME##3 make_##NAME##3(T x, T y, T z) {                                          \
        NAME##3 r; r.x = x; r.y = y; r.z = z; return r;                                             \
    }                                                                                               \
    static inline NAME##4 make_##NAME##4(T x, T y, T z, T w) {                                     \
        NAME##4 r; r.x = x; r.y = y; r.z = z; r.w = w; return r;                                    \
    }

CUDACPU_VECTOR_FAMILY(signed char, char, 2, 4)
CUDACPU_VECTOR_FAMILY(unsigned char, uchar, 2, 4)
CUDACPU_VECTOR_FAMILY(short, short, 4, 8)
CUDACPU_VECTOR_FAMILY(unsigned short, ushort, 4, 8)
CUDACPU_VECTOR_FAMILY(int, int, 8, 16)
CUDACPU_VECTOR_FAMILY(unsigned int, uint, 8, 16)
CUDACPU_VECTOR_FAMILY(long, long, 2 * sizeof(long), 16)
CUDACPU_VECTOR_FAMILY(unsigned long, ulong, 2 * sizeof(unsigned long), 16)
CUDACPU_VECTOR_FAMILY(long long, longlong, 16, 16)
CUDACPU_VECTOR_FAMILY(unsigned long long, ulonglong, 16, 16)
CUDACPU_VECTOR_FAMILY(float, float, 8, 16)
CUDACPU_VECTOR_FAMILY(double, double, 16, 16)

#undef CUDACPU_VECTOR_FAMILY

static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "float4 must be 16 bytes, 16-aligned");
static_assert(sizeof(float3) == 12 && alignof(float3) == 4, "float3 must be 12 bytes, 4-aligned");
static_assert(sizeof(int2) == 8 && alignof(int2) == 8, "int2 must be 8 bytes, 8-aligned");
static_assert(sizeof(double2) == 16 && alignof(double2) == 16, "double2 must be 16-aligned");

/* dim3: the type of blockDim and gridDim (and of launch configurations in CUDA C++). */
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
