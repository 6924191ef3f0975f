/* The structures the CPU backend's runtime shares with Python (kernels/cpu/abi.py mirrors them
 * with ctypes; change both together). Plain C layout, fixed-width fields only.
 */
#pragma once
#include <stdint.h>

#define CUDACPU_MAX_RANGES 16
#define CUDACPU_MAX_FRAMES 48
#define CUDACPU_TRACE_MAX_RANGES 64
#define CUDACPU_TRACE_HEADER_BYTES 4096   /* the records start this far into the trace buffer */

/* What went wrong (status.kind). */
enum cudacpu_fault_kind {
    CUDACPU_OK = 0,
    CUDACPU_FAULT_SIGNAL = 1,          /* SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP */
    CUDACPU_FAULT_TIMEOUT = 2,         /* the time limit ran out */
    CUDACPU_FAULT_BARRIER = 3,         /* a __syncthreads() that not every thread reaches */
    CUDACPU_FAULT_WARP = 4,            /* a warp collective called wrongly or never completed */
    CUDACPU_FAULT_ASSERT = 5,          /* assert() failed in device code */
    CUDACPU_FAULT_TRAP = 6,            /* __trap() */
    CUDACPU_FAULT_STACK = 7,           /* a thread ran past the end of its stack */
    CUDACPU_FAULT_UNSUPPORTED = 8,     /* a feature the CPU backend cannot run, found at run time */
    CUDACPU_FAULT_INTERNAL = 9,        /* the runtime itself failed (a bug, or out of memory) */
    CUDACPU_FAULT_MISALIGNED = 10      /* an access at an address that is not a multiple of its size */
};

enum cudacpu_state { CUDACPU_RUNNING = 0, CUDACPU_DONE = 1, CUDACPU_FAULTED = 2 };

typedef struct cudacpu_status {
    int32_t state;                     /* cudacpu_state */
    int32_t kind;                      /* cudacpu_fault_kind */
    int32_t signo, si_code;
    int32_t has_thread;                /* block/thread below name a thread (else only the block) */
    int32_t line;                      /* source line when the runtime knows it (barriers, warps) */
    uint32_t block[3], thread[3];
    uint64_t addr, pc;                 /* faulting address and instruction (signals) */
    int32_t is_write;                  /* 1 write, 0 read, -1 unknown */
    int32_t nframes;
    uint64_t frames[CUDACPU_MAX_FRAMES];   /* return-address candidates, innermost first */
    uint64_t blocks_done;
    int32_t globals_saved;
    int32_t pad;
    char file[512];
    char message[2048];
} cudacpu_status;

typedef struct cudacpu_builtins {
    uint32_t threadIdx[3], blockIdx[3], blockDim[3], gridDim[3];
} cudacpu_builtins;

typedef struct cudacpu_spec {
    void (*entry)(void **args);        /* runs one CUDA thread of the kernel */
    void **args;
    cudacpu_builtins *builtins;        /* the kernel library's threadIdx, blockIdx, ... */
    uint32_t grid[3], block[3];
    uint64_t dynamic_smem;             /* bytes of extern __shared__ memory per block */
    char *static_smem_begin, *static_smem_end;
    int32_t nranges;                   /* writable data of the kernel library (globals) */
    int32_t out_fd;                    /* printf output goes here */
    char *range_addr[CUDACPU_MAX_RANGES];
    uint64_t range_len[CUDACPU_MAX_RANGES];
    char *save_buffer;                 /* shared memory the child copies the globals into */
    uint64_t stack_bytes;              /* per CUDA thread */
    double time_limit;                 /* seconds */
    cudacpu_status *status;            /* shared memory */
    struct cudacpu_trace *trace;       /* where to record memory accesses (traced builds), or null */
    const void *sandbox;               /* a seccomp BPF program (struct sock_filter[]) that the child */
    uint64_t sandbox_len;              /* installs before the grid runs (the grader's), or null */
} cudacpu_spec;

typedef struct cudacpu_object_info {
    uint64_t base;                     /* load address: file offsets + base = run-time addresses */
    int32_t nwritable, nexec;
    uint64_t w_addr[CUDACPU_MAX_RANGES], w_len[CUDACPU_MAX_RANGES];
    uint64_t x_addr[CUDACPU_MAX_RANGES], x_len[CUDACPU_MAX_RANGES];
    char path[1024];
} cudacpu_object_info;

/* Memory-access tracing (kernels/traffic). A traced build of a kernel library is compiled with
 * -fsanitize=thread but linked without the sanitizer's library: every load and store of the kernel
 * calls one of the __tsan_* hooks that the runtime defines (trace.cpp), and the hook appends a
 * record here when the address lies in shared memory or in one of the ranges below. */
enum cudacpu_space { CUDACPU_SPACE_GLOBAL = 0, CUDACPU_SPACE_SHARED = 1, CUDACPU_SPACE_CONSTANT = 2,
                     CUDACPU_SPACE_PARAM = 3 /* the launch's argument values: not recorded */ };
enum cudacpu_access_flags { CUDACPU_ACCESS_WRITE = 1, CUDACPU_ACCESS_ATOMIC = 2 };

typedef struct cudacpu_trace_record {
    uint64_t addr;
    uint32_t pc;                       /* return address of the hook, minus trace.pc_base */
    uint32_t block;                    /* linear block index */
    uint32_t barrier;                  /* __syncthreads() completed in this launch before the access */
    uint16_t syncwarp;                 /* __syncwarp()s this thread completed in its block */
    uint16_t collective;               /* warp collectives of any kind this thread completed */
    uint16_t thread;                   /* linear thread index in the block */
    uint16_t size;                     /* bytes */
    uint8_t flags;                     /* cudacpu_access_flags */
    uint8_t space;                     /* cudacpu_space */
    uint8_t range;                     /* index into the ranges below (255: shared memory) */
    uint8_t pad;
} cudacpu_trace_record;

typedef struct cudacpu_trace {
    uint64_t capacity;                 /* records the buffer has room for */
    uint64_t count;                    /* records made (more than capacity: the rest were dropped) */
    uint64_t local;                    /* accesses to a thread's own stack (not recorded) */
    uint64_t unclassified;             /* accesses outside shared memory and every range (not recorded) */
    uint64_t pc_base;                  /* load address of the kernel library */
    uint32_t nranges, pad;
    uint64_t range_lo[CUDACPU_TRACE_MAX_RANGES], range_hi[CUDACPU_TRACE_MAX_RANGES];
    uint8_t range_space[CUDACPU_TRACE_MAX_RANGES];
} cudacpu_trace;
