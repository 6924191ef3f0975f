/* The CPU backend's runtime: runs a CUDA grid on one OS thread, block after block, with every CUDA
 * thread of a block on its own fiber (a user-mode context with its own stack).
 *
 * Why fibers: a CUDA thread can stop in the middle of the kernel at __syncthreads() or at a warp
 * collective and wait for the others. A fiber runs until it reaches such a point, records what it
 * waits for and switches back to the scheduler (a few nanoseconds, fiber_switch.S). A thread that
 * never waits runs from start to end without any switch, and the next thread of the block starts
 * on the same stack.
 *
 * Why a child process: every launch runs in a forked child (cudacpu_launch_start). A kernel that
 * reads past an array, deadlocks or loops forever takes down the child only; the child reports
 * the fault, with block, thread and source line, through a status block in shared memory, and
 * the Python process carries on. Arrays live in shared memory, so the child's writes are visible
 * to the parent; the kernel library's globals (__device__, __constant__) are copied back after a
 * clean exit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fenv.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#if defined(__linux__)
#include <link.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#endif

#include "abi.h"
#include "cuda_cpu_ops.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

extern "C" void cudacpu_switch(void **save_sp, void *to_sp);
extern "C" void cudacpu_fiber_trampoline(void);

/* Base of the extern __shared__ region (defined below, set when the library is loaded). */
extern "C" __attribute__((visibility("default"))) char *cudacpu_dynamic_smem;

namespace {

constexpr int MAX_THREADS = 1024;
constexpr int WARP = 32;
constexpr int MAX_WARPS = MAX_THREADS / WARP;
constexpr uint64_t DYNAMIC_SMEM_MAX = 232448;       // 227 KB: the largest opt-in of current GPUs
constexpr int CAS_FAILURES_BEFORE_YIELD = 16;

enum ThreadState : uint8_t { NOT_STARTED, RUNNING, RUNNABLE, BLOCKED, DONE };
enum WaitKind : uint8_t { W_NONE, W_BARRIER, W_WARP, W_ACTIVEMASK, W_YIELD };

struct Fiber {
    void *sp;
    char *guard;          // lowest page: PROT_NONE
    char *lo, *hi;        // usable stack
};

struct ThreadRec {
    uint8_t state, wait;
    int16_t op;
    int32_t line;
    const char *file;
    Fiber *fiber;
    unsigned mask;
    int32_t arg, width;
    uint64_t value, result;
    int32_t cas_failures;
};

struct Pending {
    int op;
    unsigned mask, arrived;
    int width;
    const char *file;
    int line;
};

struct WarpState {
    Pending pending[WARP];
    int npending;
    int unblocked;                // lanes NOT_STARTED, RUNNING or RUNNABLE
    int activemask_waiters;
    unsigned lanes;               // lanes that exist (the last warp of a block may be partial)
    unsigned exited;
};

struct BlockState {
    int n, live, exited, first_exited;
    int bar_waiting, bar_op, bar_line;
    const char *bar_file;
    int bar_count, bar_and, bar_or;
};

// ---- state of the launch (meaningful in the child only) ----------------------------------------
const cudacpu_spec *g_spec;
cudacpu_status *g_status;
cudacpu_builtins *g_builtins;
void *g_sched_sp;
int g_cur = -1;                   // the CUDA thread running now (linear index), -1: the scheduler
ThreadRec g_threads[MAX_THREADS];
uint32_t g_tidx[MAX_THREADS][3];
WarpState g_warps[MAX_WARPS];
BlockState g_blk;
int g_nwarps;

// What the memory-access trace (trace.cpp) records with every access: the block, how many
// __syncthreads() have completed in the launch, and per thread how many __syncwarp()s and warp
// collectives it has completed in its block (accesses of two lanes separated by neither may race).
cudacpu_trace *g_trace;
uint32_t g_block_linear;
uint32_t g_barrier_epoch;
uint16_t g_syncwarp_count[MAX_THREADS];
uint16_t g_collective_count[MAX_THREADS];

Fiber g_fibers[MAX_THREADS];
Fiber *g_free[MAX_THREADS];
int g_nfibers, g_nfree;
char *g_stack_region;
size_t g_stack_slot, g_page;

char g_out[1 << 16];
size_t g_out_len;
int g_out_fd = -1;

alignas(16) char g_altstack[1 << 16];

// ---- small helpers ------------------------------------------------------------------------------

void write_all(int fd, const char *p, size_t n) {
    while (n > 0 && fd >= 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

void flush_output() {
    write_all(g_out_fd, g_out, g_out_len);
    g_out_len = 0;
}

void set_thread(uint32_t t, bool known) {
    if (!g_status) return;
    g_status->has_thread = known ? 1 : 0;
    if (known) {
        g_status->thread[0] = g_tidx[t][0];
        g_status->thread[1] = g_tidx[t][1];
        g_status->thread[2] = g_tidx[t][2];
    }
    if (g_builtins) {
        g_status->block[0] = g_builtins->blockIdx[0];
        g_status->block[1] = g_builtins->blockIdx[1];
        g_status->block[2] = g_builtins->blockIdx[2];
    }
}

void copy_file(const char *file) {
    if (!file) file = "";
    strncpy(g_status->file, file, sizeof g_status->file - 1);
    g_status->file[sizeof g_status->file - 1] = 0;
}

[[noreturn]] void finish_fault() {
    g_status->state = CUDACPU_FAULTED;
    flush_output();
    _exit(3);
}

/* Report a fault found by the runtime itself (deadlock, warp misuse, assert ...) and end the child. */
[[noreturn]] __attribute__((format(printf, 5, 6)))
void fault(int kind, int thread, const char *file, int line, const char *fmt, ...) {
    g_status->kind = kind;
    set_thread(thread >= 0 ? (uint32_t)thread : 0, thread >= 0);
    copy_file(file);
    g_status->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_status->message, sizeof g_status->message, fmt, ap);
    va_end(ap);
    finish_fault();
}

/* "0-15, 17, 20-31" for the set bits of a lane mask, offset by base. */
void format_lanes(char *out, size_t cap, unsigned mask, int base) {
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < 32 && len + 16 < cap;) {
        if (!(mask >> i & 1u)) { ++i; continue; }
        int j = i;
        while (j + 1 < 32 && (mask >> (j + 1) & 1u)) ++j;
        if (j == i)
            len += (size_t)snprintf(out + len, cap - len, "%s%d", len ? ", " : "", base + i);
        else
            len += (size_t)snprintf(out + len, cap - len, "%s%d-%d", len ? ", " : "", base + i, base + j);
        i = j + 1;
    }
}

/* The thread index of linear thread t as "(x, y, z)" text. */
void format_thread(char *out, size_t cap, int t) {
    snprintf(out, cap, "(%u, %u, %u)", g_tidx[t][0], g_tidx[t][1], g_tidx[t][2]);
}

const char *op_name(int op) {
    switch (op) {
        case CUDACPU_SHFL_IDX: return "__shfl_sync";
        case CUDACPU_SHFL_UP: return "__shfl_up_sync";
        case CUDACPU_SHFL_DOWN: return "__shfl_down_sync";
        case CUDACPU_SHFL_XOR: return "__shfl_xor_sync";
        case CUDACPU_BALLOT: return "__ballot_sync";
        case CUDACPU_ANY: return "__any_sync";
        case CUDACPU_ALL: return "__all_sync";
        case CUDACPU_SYNCWARP: return "__syncwarp";
        case CUDACPU_MATCH_ANY: return "__match_any_sync";
        case CUDACPU_MATCH_ALL: return "__match_all_sync";
        case CUDACPU_REDUCE_ADD: return "__reduce_add_sync";
        case CUDACPU_REDUCE_MIN_S: case CUDACPU_REDUCE_MIN_U: return "__reduce_min_sync";
        case CUDACPU_REDUCE_MAX_S: case CUDACPU_REDUCE_MAX_U: return "__reduce_max_sync";
        case CUDACPU_REDUCE_AND: return "__reduce_and_sync";
        case CUDACPU_REDUCE_OR: return "__reduce_or_sync";
        case CUDACPU_REDUCE_XOR: return "__reduce_xor_sync";
        default: return "a warp collective";
    }
}

const char *barrier_name(int op) {
    switch (op) {
        case CUDACPU_BAR_COUNT: return "__syncthreads_count()";
        case CUDACPU_BAR_AND: return "__syncthreads_and()";
        case CUDACPU_BAR_OR: return "__syncthreads_or()";
        default: return "__syncthreads()";
    }
}

const char *base_name(const char *file) {
    return file ? file : "?";
}

// ---- fibers -------------------------------------------------------------------------------------

void fiber_main(Fiber *f);

Fiber *new_fiber() {
    if (!g_stack_region) {
        g_page = (size_t)sysconf(_SC_PAGESIZE);
        size_t stack = (g_spec->stack_bytes + g_page - 1) / g_page * g_page;
        g_stack_slot = stack + g_page;
        void *p = mmap(nullptr, g_stack_slot * MAX_THREADS, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            fault(CUDACPU_FAULT_INTERNAL, g_cur, "", 0, "could not reserve memory for the threads' stacks");
        g_stack_region = (char *)p;
    }
    Fiber *f = &g_fibers[g_nfibers];
    char *slot = g_stack_region + g_stack_slot * (size_t)g_nfibers;
    ++g_nfibers;
    f->guard = slot;
    f->lo = slot + g_page;
    f->hi = slot + g_stack_slot;
    if (mprotect(f->lo, g_stack_slot - g_page, PROT_READ | PROT_WRITE) != 0)
        fault(CUDACPU_FAULT_INTERNAL, g_cur, "", 0, "could not allocate a thread's stack");
    uintptr_t top = (uintptr_t)f->hi & ~(uintptr_t)15;
    void **sp;
#if defined(__x86_64__)
    /* [r15][r14][r13][r12][rbx][rbp][return address] then padding; see fiber_switch.S */
    void **ret_slot = (void **)(top - 24);
    ret_slot[0] = (void *)&cudacpu_fiber_trampoline;
    sp = ret_slot - 6;
    sp[0] = nullptr;                 // r15
    sp[1] = nullptr;                 // r14
    sp[2] = (void *)&fiber_main;     // r13: function
    sp[3] = (void *)f;               // r12: argument
    sp[4] = nullptr;                 // rbx
    sp[5] = nullptr;                 // rbp: ends frame-pointer walks
#elif defined(__aarch64__)
    sp = (void **)(top - 176);
    memset(sp, 0, 176);
    sp[0] = (void *)f;               // x19: argument
    sp[1] = (void *)&fiber_main;     // x20: function
    sp[10] = nullptr;                // x29
    sp[11] = (void *)&cudacpu_fiber_trampoline;   // x30
#endif
    f->sp = (void *)sp;
    return f;
}

Fiber *take_fiber() {
    if (g_nfree > 0) return g_free[--g_nfree];
    return new_fiber();
}

inline void enter(int t) {
    g_cur = t;
    memcpy(g_builtins->threadIdx, g_tidx[t], sizeof g_tidx[t]);
    ThreadRec &r = g_threads[t];
    r.state = RUNNING;
    cudacpu_switch(&g_sched_sp, r.fiber->sp);
    g_cur = -1;
}

void resolve_activemask(int w);

/* The running thread stops until another thread makes it RUNNABLE again. */
void block_current() {
    const int t = g_cur;
    ThreadRec &r = g_threads[t];
    WarpState &W = g_warps[t >> 5];
    r.state = BLOCKED;
    --W.unblocked;
    if (W.unblocked == 0 && W.activemask_waiters > 0) resolve_activemask(t >> 5);
    if (r.state == BLOCKED) {
        cudacpu_switch(&r.fiber->sp, g_sched_sp);
    } else {                      // released at once (an __activemask() of this lane alone)
        r.state = RUNNING;
    }
}

inline void release(int t) {
    g_threads[t].state = RUNNABLE;
    g_threads[t].wait = W_NONE;
    ++g_warps[t >> 5].unblocked;
}

void thread_exit(int t);

void fiber_main(Fiber *f) {
    for (;;) {
        int t = g_cur;
        g_spec->entry(g_spec->args);
        thread_exit(t);
        int next = t + 1;
        if (next < g_blk.n && g_threads[next].state == NOT_STARTED) {
            /* The scheduler would start this thread next anyway: run it here, on the same stack,
               without a switch. A kernel without barriers runs a whole block this way. */
            g_threads[next].fiber = f;
            g_cur = next;
            memcpy(g_builtins->threadIdx, g_tidx[next], sizeof g_tidx[next]);
            g_threads[next].state = RUNNING;
            continue;
        }
        g_free[g_nfree++] = f;
        cudacpu_switch(&f->sp, g_sched_sp);
    }
}

// ---- barriers -----------------------------------------------------------------------------------

void fault_barrier_after_exit(int t, int op, const char *file, int line) {
    char who[48], gone[48];
    format_thread(who, sizeof who, t);
    format_thread(gone, sizeof gone, g_blk.first_exited);
    fault(CUDACPU_FAULT_BARRIER, t, file, line,
          "thread %s reached %s, but thread %s of the same block has already returned, so the barrier "
          "can never complete (a deadlock on a GPU). Every thread of the block must reach the same "
          "barrier: do not return early, and do not put a barrier inside a branch that only some "
          "threads take.", who, barrier_name(op), gone);
}

int barrier_arrive(int op, int pred, const char *file, int line) {
    const int t = g_cur;
    if (g_blk.exited > 0) fault_barrier_after_exit(t, op, file, line);
    if (g_blk.bar_waiting == 0) {
        g_blk.bar_op = op;
        g_blk.bar_file = file;
        g_blk.bar_line = line;
        g_blk.bar_count = 0;
        g_blk.bar_and = 1;
        g_blk.bar_or = 0;
    } else if (g_blk.bar_line != line || g_blk.bar_op != op ||
               (g_blk.bar_file != file && strcmp(base_name(g_blk.bar_file), base_name(file)) != 0)) {
        char who[48];
        format_thread(who, sizeof who, t);
        fault(CUDACPU_FAULT_BARRIER, t, file, line,
              "thread %s reached %s at %s:%d while %d other thread(s) of its block wait at %s at "
              "%s:%d. Threads that wait at different barriers never meet (a deadlock, or undefined "
              "behaviour, on a GPU): every thread of the block must reach the same barrier.",
              who, barrier_name(op), base_name(file), line, g_blk.bar_waiting,
              barrier_name(g_blk.bar_op), base_name(g_blk.bar_file), g_blk.bar_line);
    }
    g_blk.bar_count += pred != 0;
    g_blk.bar_and &= pred != 0;
    g_blk.bar_or |= pred != 0;
    ++g_blk.bar_waiting;
    int result = 0;
    switch (op) {
        case CUDACPU_BAR_COUNT: result = g_blk.bar_count; break;
        case CUDACPU_BAR_AND: result = g_blk.bar_and; break;
        case CUDACPU_BAR_OR: result = g_blk.bar_or; break;
        default: break;
    }
    if (g_blk.bar_waiting == g_blk.n) {
        // The last thread has arrived: every waiting thread may go on; this one continues at once.
        g_blk.bar_waiting = 0;
        ++g_barrier_epoch;
        for (int i = 0; i < g_blk.n; ++i) {
            ThreadRec &r = g_threads[i];
            if (r.state == BLOCKED && r.wait == W_BARRIER) {
                r.result = (uint64_t)(int64_t)result;
                release(i);
            }
        }
        return result;
    }
    ThreadRec &r = g_threads[t];
    r.wait = W_BARRIER;
    r.file = file;
    r.line = line;
    block_current();
    return (int)(int64_t)r.result;
}

// ---- warp collectives ---------------------------------------------------------------------------

bool is_shuffle(int op) {
    return op == CUDACPU_SHFL_IDX || op == CUDACPU_SHFL_UP || op == CUDACPU_SHFL_DOWN || op == CUDACPU_SHFL_XOR;
}

/* All lanes of p's mask have arrived: compute every lane's result and let them go on. */
void complete_collective(int w, Pending &p) {
    const int base = w * WARP;
    const unsigned mask = p.mask;
    uint64_t out[WARP];
    unsigned ballot = 0;
    bool any = false, all = true;
    uint32_t sum = 0, band = 0xffffffffu, bor = 0, bxor = 0;
    int32_t smin = INT32_MAX, smax = INT32_MIN;
    uint32_t umin = UINT32_MAX, umax = 0;
    for (int l = 0; l < WARP; ++l) {
        if (!(mask >> l & 1u)) continue;
        uint64_t v = g_threads[base + l].value;
        uint32_t v32 = (uint32_t)v;
        if (v) ballot |= 1u << l;
        any |= v != 0;
        all &= v != 0;
        sum += v32;
        band &= v32;
        bor |= v32;
        bxor ^= v32;
        if ((int32_t)v32 < smin) smin = (int32_t)v32;
        if ((int32_t)v32 > smax) smax = (int32_t)v32;
        if (v32 < umin) umin = v32;
        if (v32 > umax) umax = v32;
    }
    bool all_equal = true;
    {
        int first = __builtin_ctz(mask);
        uint64_t v0 = g_threads[base + first].value;
        for (int l = 0; l < WARP; ++l)
            if ((mask >> l & 1u) && g_threads[base + l].value != v0) all_equal = false;
    }
    const int width = p.width;
    for (int l = 0; l < WARP; ++l) {
        if (!(mask >> l & 1u)) continue;
        ThreadRec &r = g_threads[base + l];
        uint64_t res = 0;
        int src = -1;
        switch (p.op) {
            case CUDACPU_SHFL_IDX:
                src = (l & ~(width - 1)) + (r.arg & (width - 1));
                break;
            case CUDACPU_SHFL_UP: {
                unsigned delta = (unsigned)r.arg;
                src = (delta > (unsigned)(l & (width - 1))) ? l : l - (int)delta;
                break;
            }
            case CUDACPU_SHFL_DOWN: {
                unsigned delta = (unsigned)r.arg;
                src = ((unsigned)(l & (width - 1)) + delta >= (unsigned)width) ? l : l + (int)delta;
                break;
            }
            case CUDACPU_SHFL_XOR: {
                int s = l ^ r.arg;
                src = (s < 0 || s >= (l & ~(width - 1)) + width) ? l : s;
                break;
            }
            case CUDACPU_BALLOT: res = ballot; break;
            case CUDACPU_ANY: res = any; break;
            case CUDACPU_ALL: res = all; break;
            case CUDACPU_SYNCWARP: res = 0; break;
            case CUDACPU_MATCH_ANY: {
                unsigned m = 0;
                for (int j = 0; j < WARP; ++j)
                    if ((mask >> j & 1u) && g_threads[base + j].value == r.value) m |= 1u << j;
                res = m;
                break;
            }
            case CUDACPU_MATCH_ALL: res = all_equal ? ((uint64_t)mask | (1ull << 32)) : 0; break;
            case CUDACPU_REDUCE_ADD: res = sum; break;
            case CUDACPU_REDUCE_MIN_S: res = (uint32_t)smin; break;
            case CUDACPU_REDUCE_MAX_S: res = (uint32_t)smax; break;
            case CUDACPU_REDUCE_MIN_U: res = umin; break;
            case CUDACPU_REDUCE_MAX_U: res = umax; break;
            case CUDACPU_REDUCE_AND: res = band; break;
            case CUDACPU_REDUCE_OR: res = bor; break;
            case CUDACPU_REDUCE_XOR: res = bxor; break;
            default: break;
        }
        if (src >= 0) {
            // Reading a lane that does not take part is undefined on a GPU: give a poison value.
            res = (src < WARP && (mask >> src & 1u)) ? g_threads[base + src].value : ~0ull;
        }
        out[l] = res;
    }
    for (int l = 0; l < WARP; ++l) {
        if (!(mask >> l & 1u)) continue;
        ThreadRec &r = g_threads[base + l];
        r.result = out[l];
        ++g_collective_count[base + l];
        if (p.op == CUDACPU_SYNCWARP) ++g_syncwarp_count[base + l];
        if (r.state == BLOCKED && r.wait == W_WARP) release(base + l);
    }
}

void fault_missing_lanes(int t, const char *what, unsigned missing, int w, const char *file, int line,
                         const char *why) {
    char who[48], lanes[160];
    format_thread(who, sizeof who, t);
    format_lanes(lanes, sizeof lanes, missing, 0);
    fault(CUDACPU_FAULT_WARP, t, file, line,
          "thread %s (lane %d of warp %d) called %s with a mask that names lane(s) %s, which %s. Every "
          "lane named in the mask must call the same collective (with the same mask); on a GPU the "
          "result is undefined or the warp hangs.", who, t & 31, w, what, lanes, why);
}

uint64_t warp_arrive(int op, unsigned mask, uint64_t value, int arg, int width, const char *file, int line) {
    const int t = g_cur;
    const int w = t >> 5, lane = t & 31;
    WarpState &W = g_warps[w];
    const unsigned bit = 1u << lane;
    char who[48];
    if (!(mask & bit)) {
        format_thread(who, sizeof who, t);
        fault(CUDACPU_FAULT_WARP, t, file, line,
              "thread %s (lane %d of warp %d) called %s with mask 0x%08x, which does not include the "
              "lane itself. A lane may only call a *_sync collective with its own bit set in the mask "
              "(use __activemask() or __ballot_sync() to build the mask of the lanes that take part).",
              who, lane, w, op_name(op), mask);
    }
    if (is_shuffle(op) && (width < 1 || width > 32 || (width & (width - 1)) != 0)) {
        format_thread(who, sizeof who, t);
        fault(CUDACPU_FAULT_WARP, t, file, line,
              "thread %s called %s with width %d; the width must be a power of two from 1 to 32.",
              who, op_name(op), width);
    }
    if (mask & ~W.lanes)
        fault_missing_lanes(t, op_name(op), mask & ~W.lanes, w, file, line,
                            "do not exist (the block's last warp is partial: make the block a multiple of "
                            "32 threads, or leave those lanes out of the mask)");
    if (mask & W.exited)
        fault_missing_lanes(t, op_name(op), mask & W.exited, w, file, line, "have already returned");
    /* Join the collective that waits for this lane with the same operation and mask. Groups with
       other masks may be pending at the same time (two half-warps, say); if they can never all
       complete, the scheduler finds the deadlock and names both. */
    Pending *p = nullptr;
    for (int i = 0; i < W.npending; ++i) {
        Pending &q = W.pending[i];
        if (q.mask == mask && q.op == op && q.width == width && !(q.arrived & bit)) {
            p = &q;
            break;
        }
    }
    if (!p) {
        p = &W.pending[W.npending++];
        p->op = op;
        p->mask = mask;
        p->arrived = 0;
        p->width = width;
        p->file = file;
        p->line = line;
    }
    ThreadRec &r = g_threads[t];
    r.value = value;
    r.arg = arg;
    r.op = (int16_t)op;
    r.mask = mask;
    r.file = file;
    r.line = line;
    p->arrived |= bit;
    if (p->arrived == mask) {
        Pending done = *p;
        *p = W.pending[--W.npending];
        complete_collective(w, done);
        return r.result;
    }
    r.wait = W_WARP;
    block_current();
    return r.result;
}

/* Every live lane of warp w is blocked or gone: lanes waiting at the same __activemask() call form
   one converged group, and that group is the mask they get. */
void resolve_activemask(int w) {
    WarpState &W = g_warps[w];
    const int base = w * WARP;
    unsigned waiting = 0;
    for (int l = 0; l < WARP; ++l) {
        ThreadRec &r = g_threads[base + l];
        if ((W.lanes >> l & 1u) && r.state == BLOCKED && r.wait == W_ACTIVEMASK) waiting |= 1u << l;
    }
    while (waiting) {
        int first = __builtin_ctz(waiting);
        ThreadRec &f = g_threads[base + first];
        unsigned group = 0;
        for (int l = first; l < WARP; ++l) {
            ThreadRec &r = g_threads[base + l];
            if ((waiting >> l & 1u) && r.line == f.line && r.arg == f.arg &&
                (r.file == f.file || strcmp(base_name(r.file), base_name(f.file)) == 0))
                group |= 1u << l;
        }
        for (int l = 0; l < WARP; ++l) {
            if (!(group >> l & 1u)) continue;
            g_threads[base + l].result = group;
            --W.activemask_waiters;
            release(base + l);
        }
        waiting &= ~group;
    }
}

void thread_exit(int t) {
    ThreadRec &r = g_threads[t];
    const int w = t >> 5;
    WarpState &W = g_warps[w];
    r.state = DONE;
    --g_blk.live;
    if (g_blk.exited++ == 0) g_blk.first_exited = t;
    --W.unblocked;
    W.exited |= 1u << (t & 31);
    char who[48];
    if (g_blk.bar_waiting > 0) {
        format_thread(who, sizeof who, t);
        fault(CUDACPU_FAULT_BARRIER, t, g_blk.bar_file, g_blk.bar_line,
              "thread %s returned without reaching the %s at %s:%d, where %d thread(s) of its block "
              "wait; the barrier can never complete (a deadlock on a GPU). Every thread of the block "
              "must reach the same barrier: do not put a barrier inside a branch that only some "
              "threads take, and do not return before it.",
              who, barrier_name(g_blk.bar_op), base_name(g_blk.bar_file), g_blk.bar_line, g_blk.bar_waiting);
    }
    for (int i = 0; i < W.npending; ++i) {
        Pending &p = W.pending[i];
        if (p.mask >> (t & 31) & 1u) {
            format_thread(who, sizeof who, t);
            char lanes[160];
            format_lanes(lanes, sizeof lanes, p.arrived, 0);
            fault(CUDACPU_FAULT_WARP, t, p.file, p.line,
                  "thread %s (lane %d of warp %d) returned without calling the %s (mask 0x%08x) at %s:%d "
                  "that lane(s) %s of its warp wait in. Every lane named in the mask must call it; "
                  "on a GPU the result is undefined or the warp hangs.",
                  who, t & 31, w, op_name(p.op), p.mask, base_name(p.file), p.line, lanes);
        }
    }
    if (W.unblocked == 0 && W.activemask_waiters > 0) resolve_activemask(w);
}

/* No thread can run: describe who waits for whom and end the launch. */
[[noreturn]] void deadlock() {
    char text[1536];
    size_t len = 0;
    int report = -1;
    const char *file = "";
    int line = 0;
    for (int w = 0; w < g_nwarps && len + 256 < sizeof text; ++w) {
        WarpState &W = g_warps[w];
        for (int i = 0; i < W.npending && len + 256 < sizeof text; ++i) {
            Pending &p = W.pending[i];
            char have[160], missing[160];
            format_lanes(have, sizeof have, p.arrived, 0);
            format_lanes(missing, sizeof missing, p.mask & ~p.arrived, 0);
            if (report < 0) {
                report = w * WARP + __builtin_ctz(p.arrived);
                file = p.file;
                line = p.line;
            }
            char where[200] = "elsewhere";
            for (int l = 0; l < WARP; ++l) {
                if (!((p.mask & ~p.arrived) >> l & 1u)) continue;
                ThreadRec &r = g_threads[w * WARP + l];
                if (r.wait == W_BARRIER)
                    snprintf(where, sizeof where, "at %s at %s:%d", barrier_name(g_blk.bar_op),
                             base_name(r.file), r.line);
                else if (r.wait == W_WARP)
                    snprintf(where, sizeof where, "in %s (mask 0x%08x) at %s:%d", op_name(r.op), r.mask,
                             base_name(r.file), r.line);
                else if (r.wait == W_ACTIVEMASK)
                    snprintf(where, sizeof where, "in __activemask() at %s:%d", base_name(r.file), r.line);
                break;
            }
            len += (size_t)snprintf(text + len, sizeof text - len,
                                    "lane(s) %s of warp %d wait in %s (mask 0x%08x) at %s:%d for lane(s) %s, "
                                    "which wait %s; ", have, w, op_name(p.op), p.mask, base_name(p.file),
                                    p.line, missing, where);
        }
    }
    if (g_blk.bar_waiting > 0 && len + 200 < sizeof text) {
        int first = -1;
        for (int i = 0; i < g_blk.n; ++i)
            if (g_threads[i].state == BLOCKED && g_threads[i].wait == W_BARRIER) { first = i; break; }
        if (report < 0) {
            report = first;
            file = g_blk.bar_file;
            line = g_blk.bar_line;
        }
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "%d of the block's %d threads wait at %s at %s:%d; ", g_blk.bar_waiting, g_blk.n,
                                barrier_name(g_blk.bar_op), base_name(g_blk.bar_file), g_blk.bar_line);
    }
    if (len >= 2) text[len - 2] = 0;
    fault(g_blk.bar_waiting > 0 ? CUDACPU_FAULT_BARRIER : CUDACPU_FAULT_WARP, report, file, line,
          "the block is deadlocked: %s. No thread can go on (on a GPU this kernel hangs or gives "
          "undefined results).", text);
}

// ---- the grid -----------------------------------------------------------------------------------

void run_block() {
    const int n = g_blk.n;
    for (int t = 0; t < n; ++t) {
        ThreadRec &r = g_threads[t];
        r.state = NOT_STARTED;
        r.wait = W_NONE;
        r.fiber = nullptr;
        r.cas_failures = 0;
        g_syncwarp_count[t] = 0;
        g_collective_count[t] = 0;
    }
    for (int w = 0; w < g_nwarps; ++w) {
        WarpState &W = g_warps[w];
        int lanes = n - w * WARP < WARP ? n - w * WARP : WARP;
        W.lanes = lanes == WARP ? 0xffffffffu : ((1u << lanes) - 1u);
        W.unblocked = lanes;
        W.npending = 0;
        W.activemask_waiters = 0;
        W.exited = 0;
    }
    g_blk.live = n;
    g_blk.exited = 0;
    g_blk.first_exited = -1;
    g_blk.bar_waiting = 0;
    while (g_blk.live > 0) {
        bool progress = false;
        for (int t = 0; t < n; ++t) {
            const uint8_t s = g_threads[t].state;
            if (s == RUNNABLE) {
                enter(t);
                progress = true;
            } else if (s == NOT_STARTED) {
                g_threads[t].fiber = take_fiber();
                enter(t);
                progress = true;
            }
        }
        if (!progress && g_blk.live > 0) deadlock();
    }
}

void poison_shared() {
    const cudacpu_spec *s = g_spec;
    if (s->static_smem_begin && s->static_smem_end > s->static_smem_begin)
        memset(s->static_smem_begin, 0xff, (size_t)(s->static_smem_end - s->static_smem_begin));
    if (s->dynamic_smem && cudacpu_dynamic_smem) memset(cudacpu_dynamic_smem, 0xff, s->dynamic_smem);
}

}  // namespace

// =================================================================================================
// Dynamic shared memory: one fixed region for the whole process (the rewritten
// `extern __shared__ T name[];` reads its address), followed by inaccessible pages.
// =================================================================================================

char *cudacpu_dynamic_smem = nullptr;
static size_t g_dynamic_region_len;

__attribute__((constructor)) static void cudacpu_init_dynamic_smem() {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (DYNAMIC_SMEM_MAX + page - 1) / page * page + page;
    void *p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
        cudacpu_dynamic_smem = (char *)p;
        g_dynamic_region_len = len;
    }
}

EXPORT uint64_t cudacpu_dynamic_smem_size(void) { return g_dynamic_region_len; }

// =================================================================================================
// Entry points called by kernel code (declared in cuda_cpu.h)
// =================================================================================================

EXPORT void cudacpu_syncthreads(const char *file, int line) {
    barrier_arrive(CUDACPU_BAR_SYNC, 0, file, line);
}

EXPORT int cudacpu_syncthreads_op(int op, int pred, const char *file, int line) {
    return barrier_arrive(op, pred, file, line);
}

EXPORT uint64_t cudacpu_warp_op(int op, unsigned mask, uint64_t value, int arg, int width, const char *file,
                                int line) {
    return warp_arrive(op, mask, value, arg, width, file, line);
}

EXPORT unsigned cudacpu_activemask(const char *file, int line, int site) {
    const int t = g_cur;
    ThreadRec &r = g_threads[t];
    r.wait = W_ACTIVEMASK;
    r.file = file;
    r.line = line;
    r.arg = site;
    ++g_warps[t >> 5].activemask_waiters;
    block_current();
    return (unsigned)r.result;
}

/* Let the other threads run (a spin-wait loop: __nanosleep, a failing atomicCAS). */
EXPORT void cudacpu_yield(void) {
    const int t = g_cur;
    if (t < 0) return;
    ThreadRec &r = g_threads[t];
    r.state = RUNNABLE;
    r.wait = W_YIELD;
    cudacpu_switch(&r.fiber->sp, g_sched_sp);
}

EXPORT void cudacpu_cas_failed(void) {
    const int t = g_cur;
    if (t < 0) return;
    if (++g_threads[t].cas_failures >= CAS_FAILURES_BEFORE_YIELD) {
        g_threads[t].cas_failures = 0;
        cudacpu_yield();
    }
}

EXPORT void cudacpu_cas_succeeded(void) {
    if (g_cur >= 0) g_threads[g_cur].cas_failures = 0;
}

EXPORT __attribute__((noreturn)) void cudacpu_trap(int kind, const char *what, const char *file, int line) {
    if (!g_status) abort();
    char who[48] = "";
    if (g_cur >= 0) format_thread(who, sizeof who, g_cur);
    if (kind == CUDACPU_FAULT_ASSERT)
        fault(kind, g_cur, file, line, "thread %s: assertion `%s' failed.", who, what ? what : "");
    else if (kind == CUDACPU_FAULT_TRAP)
        fault(kind, g_cur, file, line, "thread %s executed __trap(), which aborts the kernel.", who);
    else
        fault(kind, g_cur, file, line, "thread %s: %s", who, what ? what : "");
}

EXPORT int cudacpu_printf(const char *fmt, ...) {
    char tmp[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return n;
    size_t len = (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1;
    if (g_out_len + len > sizeof g_out) flush_output();
    memcpy(g_out + g_out_len, tmp, len);
    g_out_len += len;
    return n;
}

EXPORT long long cudacpu_clock64(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Arithmetic in a directed rounding mode (__fadd_rz, __fmul_ru, __fmaf_rd ...). This file is
   compiled with -frounding-math, so the operations below really use the mode set here. */
static int fe_mode(int mode) {
    switch (mode) {
        case CUDACPU_RZ: return FE_TOWARDZERO;
        case CUDACPU_RU: return FE_UPWARD;
        case CUDACPU_RD: return FE_DOWNWARD;
        default: return FE_TONEAREST;
    }
}

EXPORT float cudacpu_fop(int op, int mode, float a, float b, float c) {
    fesetround(fe_mode(mode));
    volatile float va = a, vb = b, vc = c;
    volatile float r;
    switch (op) {
        case CUDACPU_FP_ADD: r = va + vb; break;
        case CUDACPU_FP_SUB: r = va - vb; break;
        case CUDACPU_FP_MUL: r = va * vb; break;
        case CUDACPU_FP_DIV: r = va / vb; break;
        case CUDACPU_FP_SQRT: r = sqrtf(va); break;
        case CUDACPU_FP_RCP: r = 1.0f / va; break;
        default: r = fmaf(va, vb, vc); break;
    }
    float out = r;
    fesetround(FE_TONEAREST);
    return out;
}

EXPORT double cudacpu_dop(int op, int mode, double a, double b, double c) {
    fesetround(fe_mode(mode));
    volatile double va = a, vb = b, vc = c;
    volatile double r;
    switch (op) {
        case CUDACPU_FP_ADD: r = va + vb; break;
        case CUDACPU_FP_SUB: r = va - vb; break;
        case CUDACPU_FP_MUL: r = va * vb; break;
        case CUDACPU_FP_DIV: r = va / vb; break;
        case CUDACPU_FP_SQRT: r = sqrt(va); break;
        case CUDACPU_FP_RCP: r = 1.0 / va; break;
        default: r = fma(va, vb, vc); break;
    }
    double out = r;
    fesetround(FE_TONEAREST);
    return out;
}

EXPORT float cudacpu_f2f_round(double x, int mode) {
    fesetround(fe_mode(mode));
    volatile double vx = x;
    volatile float r = (float)vx;
    float out = r;
    fesetround(FE_TONEAREST);
    return out;
}

// =================================================================================================
// The child: signals, the grid, the report
// =================================================================================================

namespace {

bool in_fiber_guard(uint64_t addr) {
    for (int i = 0; i < g_nfibers; ++i) {
        const Fiber &f = g_fibers[i];
        if (addr >= (uint64_t)f.guard && addr < (uint64_t)f.lo) return true;
    }
    return false;
}

bool on_some_stack(uint64_t addr, uint64_t *lo, uint64_t *hi) {
    if (g_cur >= 0 && g_threads[g_cur].fiber) {
        *lo = (uint64_t)g_threads[g_cur].fiber->lo;
        *hi = (uint64_t)g_threads[g_cur].fiber->hi;
        return addr >= *lo && addr < *hi;
    }
    return false;
}

void record_frames(uint64_t pc, uint64_t sp, uint64_t fp) {
    int n = 0;
    g_status->frames[n++] = pc;
    uint64_t lo = 0, hi = 0;
    if (!on_some_stack(sp, &lo, &hi)) {
        g_status->nframes = n;
        return;
    }
    // Return addresses through the frame-pointer chain (kernel code keeps frame pointers) ...
    uint64_t f = fp;
    while (n < CUDACPU_MAX_FRAMES / 2 && f >= lo && f + 16 <= hi && (f & 7) == 0) {
        uint64_t *frame = (uint64_t *)f;
        uint64_t ret = frame[1];
        if (ret) g_status->frames[n++] = ret;
        uint64_t next = frame[0];
        if (next <= f) break;
        f = next;
    }
    // ... and the words just above the stack pointer (a library function without a frame pointer
    // called from kernel code leaves the call site there). Python keeps those in the kernel's code.
    for (uint64_t a = sp; a + 8 <= hi && a < sp + 8 * 64 && n < CUDACPU_MAX_FRAMES; a += 8)
        g_status->frames[n++] = *(uint64_t *)a;
    g_status->nframes = n;
}

void on_signal(int sig, siginfo_t *si, void *ctx) {
    if (!g_status || g_status->state != CUDACPU_RUNNING) _exit(4);
    ucontext_t *uc = (ucontext_t *)ctx;
    uint64_t pc = 0, sp = 0, fp = 0;
    int is_write = -1;
#if defined(__x86_64__) && defined(__linux__)
    pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
    fp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
    if (sig == SIGSEGV) is_write = (uc->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#elif defined(__aarch64__) && defined(__linux__)
    pc = (uint64_t)uc->uc_mcontext.pc;
    sp = (uint64_t)uc->uc_mcontext.sp;
    fp = (uint64_t)uc->uc_mcontext.regs[29];
#endif
    g_status->signo = sig;
    g_status->si_code = si ? si->si_code : 0;
    g_status->addr = si ? (uint64_t)si->si_addr : 0;
    g_status->pc = pc;
    g_status->is_write = is_write;
    int kind = CUDACPU_FAULT_SIGNAL;
    if (sig == SIGALRM) kind = CUDACPU_FAULT_TIMEOUT;
    else if ((sig == SIGSEGV || sig == SIGBUS) && in_fiber_guard(g_status->addr)) kind = CUDACPU_FAULT_STACK;
    g_status->kind = kind;
    set_thread(g_cur >= 0 ? (uint32_t)g_cur : 0, g_cur >= 0);
    record_frames(pc, sp, fp);
    finish_fault();
}

void install_handlers() {
    stack_t ss;
    ss.ss_sp = g_altstack;
    ss.ss_size = sizeof g_altstack;
    ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigfillset(&sa.sa_mask);
    const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGALRM, SIGSYS};
    for (int s : sigs) sigaction(s, &sa, nullptr);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    for (int s : sigs) sigaddset(&set, s);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

#if defined(__linux__)
/* The grader's sandbox for the process that runs a student's kernel: close every descriptor the
   kernel does not need (the grader's pipes among them), then install the seccomp program that the
   grader built with libseccomp (kernels/grading/sandbox.py). From here on a system call that could
   reach outside the kernel (files, processes, signals to others, the network) kills this process.
   Returns false when the kernel refuses the program: the launch must then not run. */
bool enter_sandbox(const cudacpu_spec *s, int keep_fd) {
    int lo = 3, hi = keep_fd > lo ? keep_fd - 1 : -1;
    if (hi >= lo && syscall(SYS_close_range, (unsigned)lo, (unsigned)hi, 0u) != 0)
        for (int fd = lo; fd <= hi; ++fd) close(fd);
    unsigned from = (unsigned)(keep_fd >= 3 ? keep_fd + 1 : 3);
    if (syscall(SYS_close_range, from, ~0u, 0u) != 0) {
        struct rlimit rl;
        long top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (long)rl.rlim_cur : 65536;
        for (long fd = from; fd < top; ++fd) close((int)fd);
    }
    struct sock_fprog prog;
    prog.len = (unsigned short)(s->sandbox_len / sizeof(struct sock_filter));
    prog.filter = (struct sock_filter *)s->sandbox;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}
#endif

[[noreturn]] void child_main(const cudacpu_spec *s, int keep_fd) {
#if defined(__linux__)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    g_spec = s;
    g_status = s->status;
    g_builtins = s->builtins;
    g_out_fd = s->out_fd;
    g_out_len = 0;
    g_trace = s->trace;
    install_handlers();
    if (s->out_fd >= 0) {
        dup2(s->out_fd, 1);
        dup2(s->out_fd, 2);
    }
    // Dynamic shared memory: usable up to the size of this launch, inaccessible beyond.
    if (cudacpu_dynamic_smem) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t usable = (s->dynamic_smem + page - 1) / page * page;
        if (usable) mprotect(cudacpu_dynamic_smem, usable, PROT_READ | PROT_WRITE);
    }
    if (s->time_limit > 0) {
        struct itimerval it;
        memset(&it, 0, sizeof it);
        double whole = s->time_limit;
        it.it_value.tv_sec = (time_t)whole;
        it.it_value.tv_usec = (suseconds_t)((whole - (double)(time_t)whole) * 1e6);
        if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0) it.it_value.tv_usec = 1;
        setitimer(ITIMER_REAL, &it, nullptr);
    }
#if defined(__linux__)
    if (s->sandbox && s->sandbox_len) {
        if (s->out_fd >= 0) g_out_fd = 1;  // its copy: the original is closed with the others
        if (!enter_sandbox(s, keep_fd)) {
            fault(CUDACPU_FAULT_INTERNAL, -1, "", 0, "the grader's sandbox could not be installed (seccomp "
                  "refused, errno %d): the kernel was not run", errno);
        }
    }
#endif
    const uint32_t bx = s->block[0], by = s->block[1], bz = s->block[2];
    const int n = (int)(bx * by * bz);
    for (int t = 0; t < n; ++t) {
        g_tidx[t][0] = (uint32_t)t % bx;
        g_tidx[t][1] = ((uint32_t)t / bx) % by;
        g_tidx[t][2] = (uint32_t)t / (bx * by);
    }
    g_blk.n = n;
    g_nwarps = (n + WARP - 1) / WARP;
    for (int d = 0; d < 3; ++d) {
        g_builtins->blockDim[d] = s->block[d];
        g_builtins->gridDim[d] = s->grid[d];
    }
    uint64_t done = 0;
    for (uint32_t z = 0; z < s->grid[2]; ++z)
        for (uint32_t y = 0; y < s->grid[1]; ++y)
            for (uint32_t x = 0; x < s->grid[0]; ++x) {
                g_builtins->blockIdx[0] = x;
                g_builtins->blockIdx[1] = y;
                g_builtins->blockIdx[2] = z;
                g_block_linear = x + s->grid[0] * (y + s->grid[1] * z);
                poison_shared();
                run_block();
                g_status->blocks_done = ++done;
            }
    struct itimerval off;
    memset(&off, 0, sizeof off);
    setitimer(ITIMER_REAL, &off, nullptr);
    char *dst = s->save_buffer;
    for (int i = 0; i < s->nranges && dst; ++i) {
        memcpy(dst, s->range_addr[i], s->range_len[i]);
        dst += s->range_len[i];
    }
    g_status->globals_saved = dst != nullptr;
    flush_output();
    g_status->state = CUDACPU_DONE;
    _exit(0);
}

}  // namespace

// =================================================================================================
// Misaligned accesses. Kernel code is compiled with -fsanitize=alignment: every access through a
// pointer checks that the address is a multiple of the type's alignment (a GPU faults with
// "misaligned address" otherwise, e.g. a float4 load from x + 1) and calls this handler if not.
// =================================================================================================

struct UbsanLocation {
    const char *file;
    uint32_t line, column;
};
struct UbsanType {
    uint16_t kind, info;
    char name[1];
};
struct UbsanTypeMismatch {
    UbsanLocation loc;
    const UbsanType *type;
    unsigned char log_alignment;
    unsigned char check_kind;
};

static void misaligned(UbsanTypeMismatch *d, uintptr_t ptr, void *ret, void *frame) {
    if (!g_status || g_status->state != CUDACPU_RUNNING) return;   // not in a launch: ignore
    const uint64_t align = 1ull << d->log_alignment;
    if (ptr == 0 || (ptr & (align - 1)) == 0) return;
    static const char *const kinds[] = {"load of", "store to", "reference to", "member access in",
                                        "member call on", "constructor call on"};
    const char *what = d->check_kind < 6 ? kinds[d->check_kind] : "access to";
    const char *type = d->type ? d->type->name : "a value";
    int local;
    record_frames((uint64_t)ret, (uint64_t)&local, (uint64_t)frame);
    g_status->addr = ptr;
    char who[48] = "";
    if (g_cur >= 0) format_thread(who, sizeof who, g_cur);
    fault(CUDACPU_FAULT_MISALIGNED, g_cur, d->loc.file, (int)d->loc.line,
          "thread %s: %s %s at address %#llx, which is not a multiple of %llu bytes (a GPU stops with "
          "\"misaligned address\"). A vector type such as float4 or int4 needs a 16-byte aligned address: "
          "a pointer into the middle of an array (x + 1, a slice) is not.",
          who, what, type, (unsigned long long)ptr, (unsigned long long)align);
}

EXPORT void __ubsan_handle_type_mismatch_v1(UbsanTypeMismatch *d, uintptr_t ptr) {
    misaligned(d, ptr, __builtin_return_address(0), __builtin_frame_address(0));
}

EXPORT void __ubsan_handle_type_mismatch_v1_abort(UbsanTypeMismatch *d, uintptr_t ptr) {
    misaligned(d, ptr, __builtin_return_address(0), __builtin_frame_address(0));
}

// =================================================================================================
// The parent: start, wait for and finish one launch
// =================================================================================================

/* Fork a child that runs the grid. Returns its pid and, in *fd, a pipe that reports end of file
   when the child is gone (whatever the reason), or -1 with errno set. */
EXPORT int cudacpu_launch_start(const cudacpu_spec *s, int *fd) {
    int p[2];
    if (pipe(p) != 0) return -1;
    fcntl(p[0], F_SETFD, FD_CLOEXEC);
    fcntl(p[1], F_SETFD, FD_CLOEXEC);
    memset(s->status, 0, sizeof *s->status);
    s->status->state = CUDACPU_RUNNING;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        errno = e;
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        child_main(s, p[1]);
    }
    close(p[1]);
    *fd = p[0];
    return (int)pid;
}

/* 1 when the child has gone, 0 when timeout_ms passed (or a signal came) first. */
EXPORT int cudacpu_launch_wait(int fd, int timeout_ms) {
    struct pollfd pfd;
    pfd.fd = fd;
    pfd.events = POLLIN;
    pfd.revents = 0;
    int r = poll(&pfd, 1, timeout_ms);
    if (r > 0) return 1;
    return 0;
}

/* Reap the child (killing it first if asked), copy the globals back after a clean run, and return
   the wait status (-1 when the child could not be reaped, e.g. someone else reaped it). */
EXPORT int cudacpu_launch_finish(const cudacpu_spec *s, int pid, int fd, int kill_first) {
    if (kill_first) kill((pid_t)pid, SIGKILL);
    int wstatus = 0;
    pid_t r;
    do {
        r = waitpid((pid_t)pid, &wstatus, 0);
    } while (r < 0 && errno == EINTR);
    close(fd);
    if (s->status->state == CUDACPU_DONE && s->status->globals_saved) {
        const char *src = s->save_buffer;
        for (int i = 0; i < s->nranges; ++i) {
            memcpy(s->range_addr[i], src, s->range_len[i]);
            src += s->range_len[i];
        }
    }
    return r < 0 ? -1 : wstatus;
}

// =================================================================================================
// Facts about loaded kernel libraries
// =================================================================================================

#if defined(__linux__)
namespace {
struct FindObject {
    uintptr_t addr;
    cudacpu_object_info *out;
    bool found;
};

int find_object(struct dl_phdr_info *info, size_t, void *data) {
    FindObject *q = (FindObject *)data;
    bool mine = false;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
        if (q->addr >= lo && q->addr < hi) mine = true;
    }
    if (!mine) return 0;
    cudacpu_object_info *o = q->out;
    memset(o, 0, sizeof *o);
    o->base = info->dlpi_addr;
    strncpy(o->path, info->dlpi_name ? info->dlpi_name : "", sizeof o->path - 1);
    uintptr_t relro_lo = 0, relro_hi = 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_GNU_RELRO) {
            relro_lo = info->dlpi_addr + ph.p_vaddr;
            relro_hi = relro_lo + ph.p_memsz;
        }
    }
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
        if ((ph.p_flags & PF_X) && o->nexec < CUDACPU_MAX_RANGES) {
            o->x_addr[o->nexec] = lo;
            o->x_len[o->nexec++] = hi - lo;
        }
        if (!(ph.p_flags & PF_W)) continue;
        // the writable segment minus its read-only-after-relocation part
        uintptr_t parts[2][2] = {{lo, hi < relro_lo ? hi : (relro_lo > lo ? relro_lo : lo)},
                                 {relro_hi > lo ? (relro_hi < hi ? relro_hi : hi) : lo, hi}};
        if (relro_hi <= lo || relro_lo >= hi) {
            parts[0][0] = lo;
            parts[0][1] = hi;
            parts[1][0] = parts[1][1] = 0;
        }
        for (auto &part : parts) {
            if (part[1] > part[0] && o->nwritable < CUDACPU_MAX_RANGES) {
                o->w_addr[o->nwritable] = part[0];
                o->w_len[o->nwritable++] = part[1] - part[0];
            }
        }
    }
    q->found = true;
    return 1;
}
}  // namespace

EXPORT int cudacpu_find_object(const void *addr, cudacpu_object_info *out) {
    FindObject q{(uintptr_t)addr, out, false};
    dl_iterate_phdr(find_object, &q);
    return q.found ? 0 : -1;
}

EXPORT uint64_t cudacpu_symbol_size(const void *addr) {
    Dl_info info;
    const ElfW(Sym) *sym = nullptr;
    if (!dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym) return 0;
    return sym->st_size;
}
#endif

EXPORT int cudacpu_abi_version(void) { return 2; }
EXPORT uint64_t cudacpu_status_size(void) { return sizeof(cudacpu_status); }
EXPORT uint64_t cudacpu_spec_size(void) { return sizeof(cudacpu_spec); }
EXPORT uint64_t cudacpu_trace_header_size(void) { return sizeof(cudacpu_trace); }
EXPORT uint64_t cudacpu_trace_record_size(void) { return sizeof(cudacpu_trace_record); }

// The hooks that traced kernel libraries call on every load and store. They read the scheduler's
// state above (the running thread, its stack, the epochs), so they belong to this translation unit.
#include "trace.cpp"

