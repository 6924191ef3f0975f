/* Codes the kernel side and the runtime of the CPU backend agree on (warp collectives, barrier
 * reductions, directed-rounding operations). Included by cuda_cpu.h and by the runtime.
 */
#pragma once

enum cudacpu_warp_op {
    CUDACPU_SHFL_IDX = 1, CUDACPU_SHFL_UP, CUDACPU_SHFL_DOWN, CUDACPU_SHFL_XOR,
    CUDACPU_BALLOT, CUDACPU_ANY, CUDACPU_ALL, CUDACPU_SYNCWARP,
    CUDACPU_MATCH_ANY, CUDACPU_MATCH_ALL,
    CUDACPU_REDUCE_ADD, CUDACPU_REDUCE_MIN_S, CUDACPU_REDUCE_MAX_S, CUDACPU_REDUCE_MIN_U,
    CUDACPU_REDUCE_MAX_U, CUDACPU_REDUCE_AND, CUDACPU_REDUCE_OR, CUDACPU_REDUCE_XOR
};

enum cudacpu_barrier_op {
    CUDACPU_BAR_SYNC = 0, CUDACPU_BAR_COUNT, CUDACPU_BAR_AND, CUDACPU_BAR_OR
};

enum cudacpu_fp_op { CUDACPU_FP_ADD = 0, CUDACPU_FP_SUB, CUDACPU_FP_MUL, CUDACPU_FP_DIV, CUDACPU_FP_SQRT,
                     CUDACPU_FP_RCP, CUDACPU_FP_FMA };
enum cudacpu_rounding { CUDACPU_RN = 0, CUDACPU_RZ, CUDACPU_RU, CUDACPU_RD };
