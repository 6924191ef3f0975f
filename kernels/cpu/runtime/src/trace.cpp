/* Memory-access tracing for kernels/traffic (included by runtime.cpp: the hooks need the scheduler's
 * state, which lives in that translation unit).
 *
 * A traced build of a kernel library is compiled with -fsanitize=thread and linked without the
 * sanitizer's runtime library. The compiler then calls __tsan_read4(address) before every 4-byte
 * load, __tsan_write16(address) before every 16-byte store and so on; this file defines those hooks.
 * A hook looks at the address: a thread's own stack is local memory (counted, not recorded), the
 * static and dynamic shared memory of the block is shared memory, and the ranges the launcher put
 * in the trace header are global memory (argument arrays, __device__ variables) or constant memory.
 * A recorded access carries the thread, the block, the hook's return address (Python turns it into
 * a source line) and the epochs that order it against other threads' accesses (barriers, warp
 * synchronisation). Atomics are marked by cudacpu_trace_atomic(), which the atomic functions of
 * cuda_cpu.h call around their read-modify-write in a traced build.
 *
 * Normal builds never call any of this: without -fsanitize=thread there are no hook calls.
 */

namespace {

bool g_trace_in_atomic;

inline cudacpu_trace_record *trace_records(cudacpu_trace *t) {
    return (cudacpu_trace_record *)((char *)t + CUDACPU_TRACE_HEADER_BYTES);
}

__attribute__((noinline)) void trace_access(const void *p, uint32_t size, uint32_t flags, void *ret) {
    cudacpu_trace *T = g_trace;
    const int t = g_cur;
    if (T == nullptr || t < 0) return;              // not a traced launch, or the runtime's own code
    const uintptr_t a = (uintptr_t)p;
    const Fiber *f = g_threads[t].fiber;
    if (f && a >= (uintptr_t)f->lo && a < (uintptr_t)f->hi) {
        ++T->local;                                 // the thread's stack: local memory
        return;
    }
    uint8_t space, range = 255;
    const uintptr_t s_lo = (uintptr_t)g_spec->static_smem_begin, s_hi = (uintptr_t)g_spec->static_smem_end;
    const uintptr_t d_lo = (uintptr_t)cudacpu_dynamic_smem, d_hi = d_lo + g_dynamic_region_len;
    if ((a >= s_lo && a < s_hi) || (a >= d_lo && a < d_hi)) {
        space = CUDACPU_SPACE_SHARED;
    } else {
        uint32_t i = 0;
        const uint32_t n = T->nranges < CUDACPU_TRACE_MAX_RANGES ? T->nranges : CUDACPU_TRACE_MAX_RANGES;
        while (i < n && !(a >= T->range_lo[i] && a < T->range_hi[i])) ++i;
        if (i == n) {
            const uintptr_t b = (uintptr_t)g_builtins;
            if (!(a >= b && a < b + sizeof(cudacpu_builtins))) ++T->unclassified;  // threadIdx etc.: registers
            return;
        }
        space = T->range_space[i];
        if (space == CUDACPU_SPACE_PARAM) return;   // each thread reading its arguments
        range = (uint8_t)i;
    }
    const uint64_t i = T->count++;
    if (i >= T->capacity)                           // full: stop here, Python reports the launch as too large
        fault(CUDACPU_FAULT_INTERNAL, t, "", 0, "the memory-access trace is full (%llu accesses)",
              (unsigned long long)T->capacity);
    cudacpu_trace_record &r = trace_records(T)[i];
    r.addr = a;
    r.pc = (uint32_t)((uintptr_t)ret - T->pc_base);
    r.block = g_block_linear;
    r.barrier = g_barrier_epoch;
    r.syncwarp = g_syncwarp_count[t];
    r.collective = g_collective_count[t];
    r.thread = (uint16_t)t;
    r.size = (uint16_t)(size < 65535 ? size : 65535);
    r.flags = (uint8_t)(flags | (g_trace_in_atomic ? CUDACPU_ACCESS_ATOMIC : 0));
    r.space = space;
    r.range = range;
    r.pad = 0;
}

}  // namespace

#define CUDACPU_HOOK extern "C" __attribute__((visibility("default")))
#define CUDACPU_RET __builtin_return_address(0)

/* Plain, unaligned and volatile loads and stores of 1 to 16 bytes. */
#define CUDACPU_ACCESS_HOOKS(N)                                                                    \
    CUDACPU_HOOK void __tsan_read##N(void *p) { trace_access(p, N, 0, CUDACPU_RET); }                 \
    CUDACPU_HOOK void __tsan_write##N(void *p) { trace_access(p, N, CUDACPU_ACCESS_WRITE, CUDACPU_RET); } \
    CUDACPU_HOOK void __tsan_unaligned_read##N(void *p) { trace_access(p, N, 0, CUDACPU_RET); }       \
    CUDACPU_HOOK void __tsan_unaligned_write##N(void *p) {                                          \
        trace_access(p, N, CUDACPU_ACCESS_WRITE, CUDACPU_RET);                                      \
    }                                                                                               \
    CUDACPU_HOOK void __tsan_volatile_read##N(void *p) { trace_access(p, N, 0, CUDACPU_RET); }        \
    CUDACPU_HOOK void __tsan_volatile_write##N(void *p) {                                           \
        trace_access(p, N, CUDACPU_ACCESS_WRITE, CUDACPU_RET);                                      \
    }
CUDACPU_ACCESS_HOOKS(1)
CUDACPU_ACCESS_HOOKS(2)
CUDACPU_ACCESS_HOOKS(4)
CUDACPU_ACCESS_HOOKS(8)
CUDACPU_ACCESS_HOOKS(16)
#undef CUDACPU_ACCESS_HOOKS

/* Copies of other sizes (a 12-byte float3, say). */
CUDACPU_HOOK void __tsan_read_range(void *p, unsigned long size) { trace_access(p, (uint32_t)size, 0, CUDACPU_RET); }
CUDACPU_HOOK void __tsan_write_range(void *p, unsigned long size) {
    trace_access(p, (uint32_t)size, CUDACPU_ACCESS_WRITE, CUDACPU_RET);
}

/* Hooks the compiler may emit that carry no access. */
CUDACPU_HOOK void __tsan_init(void) {}
CUDACPU_HOOK void __tsan_func_entry(void *) {}
CUDACPU_HOOK void __tsan_func_exit(void) {}
CUDACPU_HOOK void __tsan_vptr_update(void **, void *) {}
CUDACPU_HOOK void __tsan_vptr_read(void **) {}
CUDACPU_HOOK void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
CUDACPU_HOOK void __tsan_atomic_signal_fence(int) {}

/* cuda_cpu.h's atomic functions are plain read-modify-writes (one OS thread runs a block); in a traced
   build they call this around it, so that their load and store are recorded as atomic. */
EXPORT void cudacpu_trace_atomic(int inside) { g_trace_in_atomic = inside != 0; }

/* C11/C++11 atomics (__atomic builtins, std::atomic) in kernel code: performed here, recorded as one
   atomic access each (a read for load, a write for the others). */
#define CUDACPU_ATOMIC_HOOKS(N, T)                                                                  \
    CUDACPU_HOOK T __tsan_atomic##N##_load(const volatile T *a, int) {                              \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC, CUDACPU_RET);               \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                \
    }                                                                                               \
    CUDACPU_HOOK void __tsan_atomic##N##_store(volatile T *a, T v, int) {                           \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC | CUDACPU_ACCESS_WRITE, CUDACPU_RET); \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                   \
    }                                                                                               \
    CUDACPU_HOOK T __tsan_atomic##N##_exchange(volatile T *a, T v, int) {                           \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC | CUDACPU_ACCESS_WRITE, CUDACPU_RET); \
        return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                         \
    }                                                                                               \
    CUDACPU_HOOK T __tsan_atomic##N##_fetch_add(volatile T *a, T v, int) {                          \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC | CUDACPU_ACCESS_WRITE, CUDACPU_RET); \
        return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                          \
    }                                                                                               \
    CUDACPU_HOOK T __tsan_atomic##N##_fetch_sub(volatile T *a, T v, int) {                          \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC | CUDACPU_ACCESS_WRITE, CUDACPU_RET); \
        return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                          \
    }                                                                                               \
    CUDACPU_HOOK T __tsan_atomic##N##_fetch_and(volatile T *a, T v, int) {                          \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC | CUDACPU_ACCESS_WRITE, CUDACPU_RET); \
        return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                          \
    }                                                                                               \
    CUDACPU_HOOK T __tsan_atomic##N##_fetch_or(volatile T *a, T v, int) {                           \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC | CUDACPU_ACCESS_WRITE, CUDACPU_RET); \
        return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                           \
    }                                                                                               \
    CUDACPU_HOOK T __tsan_atomic##N##_fetch_xor(volatile T *a, T v, int) {                          \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC | CUDACPU_ACCESS_WRITE, CUDACPU_RET); \
        return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                          \
    }                                                                                               \
    CUDACPU_HOOK T __tsan_atomic##N##_fetch_nand(volatile T *a, T v, int) {                         \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC | CUDACPU_ACCESS_WRITE, CUDACPU_RET); \
        return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                         \
    }                                                                                               \
    CUDACPU_HOOK int __tsan_atomic##N##_compare_exchange_strong(volatile T *a, T *c, T v, int, int) { \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC | CUDACPU_ACCESS_WRITE, CUDACPU_RET); \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
    }                                                                                               \
    CUDACPU_HOOK int __tsan_atomic##N##_compare_exchange_weak(volatile T *a, T *c, T v, int, int) { \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC | CUDACPU_ACCESS_WRITE, CUDACPU_RET); \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
    }                                                                                               \
    CUDACPU_HOOK T __tsan_atomic##N##_compare_exchange_val(volatile T *a, T c, T v, int, int) {     \
        trace_access((const void *)a, sizeof(T), CUDACPU_ACCESS_ATOMIC | CUDACPU_ACCESS_WRITE, CUDACPU_RET); \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);           \
        return c;                                                                                   \
    }
CUDACPU_ATOMIC_HOOKS(8, uint8_t)
CUDACPU_ATOMIC_HOOKS(16, uint16_t)
CUDACPU_ATOMIC_HOOKS(32, uint32_t)
CUDACPU_ATOMIC_HOOKS(64, uint64_t)
#undef CUDACPU_ATOMIC_HOOKS
#undef CUDACPU_HOOK
#undef CUDACPU_RET
