/* Context switch between fibers (user-mode threads), one per CUDA thread.
 *
 *   void cudacpu_switch(void **save_sp, void *to_sp);
 *
 * Saves the callee-saved registers of the caller on its own stack, stores the stack pointer in
 * *save_sp, loads to_sp and restores the registers saved there. A new fiber's stack is prepared by
 * the runtime so that the first switch "returns" into cudacpu_fiber_trampoline, which calls
 * fn(arg) with fn and arg taken from two callee-saved registers. No system call is made: this is
 * what makes a barrier cost a few nanoseconds instead of the microseconds of swapcontext().
 */
#if defined(__APPLE__)
#define SYM(name) _##name
#define FUNC(name) .globl SYM(name); .p2align 4; SYM(name):
#define END(name)
#else
#define SYM(name) name
#define FUNC(name) .globl name; .hidden name; .type name, @function; .p2align 4; name:
#define END(name) .size name, .-name
#endif

#if defined(__x86_64__)

    .text
FUNC(cudacpu_switch)
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
END(cudacpu_switch)

/* First code a fiber runs: r12 = argument, r13 = function. The function never returns. */
FUNC(cudacpu_fiber_trampoline)
    movq %r12, %rdi
    callq *%r13
    ud2
END(cudacpu_fiber_trampoline)

#elif defined(__aarch64__)

    .text
FUNC(cudacpu_switch)
    sub sp, sp, #176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mov x2, sp
    str x2, [x0]
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #176
    ret
END(cudacpu_switch)

/* First code a fiber runs: x19 = argument, x20 = function. The function never returns. */
FUNC(cudacpu_fiber_trampoline)
    mov x0, x19
    blr x20
    brk #0
END(cudacpu_fiber_trampoline)

#else
#error "the CPU backend's fiber switch exists for x86-64 and aarch64 only"
#endif

#if defined(__linux__) && defined(__ELF__)
    .section .note.GNU-stack,"",%progbits
#endif
