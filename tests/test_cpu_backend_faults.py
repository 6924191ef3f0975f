"""Faults on the CPU backend: each is a KernelFault naming the kernel, block, thread and line, and the
process goes on to run the next kernel correctly.

Every test launches a faulty kernel, checks the exception (class, kernel, block, thread, line and
the key words of the message), then launches a correct kernel of the same module (fixture
``still_works``).
"""
from __future__ import annotations

import platform
import time

import numpy as np

import pytest

from kernels.cpu import (BarrierDeadlock, DeviceAssertion, InvalidAddress, KernelCrash, KernelFault, KernelTimeout,
                         KernelTrap, MisalignedAccess, OutOfBoundsAccess, RawModule, StackOverflow,
                         WarpCollectiveError, set_time_limit, time_limit, xp)

SOURCE = r'''
extern "C" __global__ void scale(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

extern "C" __global__ void read_past(const float* x, float* y, int n, int extra)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i + extra];
}

extern "C" __global__ void write_at(float* y, int index)
{
    if (threadIdx.x == 3) y[index] = 1.0f;
}

extern "C" __global__ void shared_overflow(float* y, int stride)
{
    extern __shared__ float buf[];
    buf[threadIdx.x * stride] = 1.0f;
    y[threadIdx.x] = buf[threadIdx.x * stride];
}

extern "C" __global__ void null_read(const float* x, float* y)
{
    const float* p = x ? nullptr : x;
    y[threadIdx.x] = p[threadIdx.x];
}

extern "C" __global__ void wild_read(const float* x, float* y, unsigned long long address, long long offset)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float* p = address ? reinterpret_cast<const float*>(address) : x + offset;
    y[i] = i == 37 ? p[threadIdx.x] : x[i];
}

extern "C" __global__ void wild_write(float* y, unsigned long long address)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 37) *reinterpret_cast<float*>(address) = 1.0f;
    else y[i] = 2.0f;
}

extern "C" __global__ void vector_load(const float* x, float* y)
{
    const float4* v = reinterpret_cast<const float4*>(x);
    float4 a = v[threadIdx.x];
    y[threadIdx.x] = a.x + a.w;
}

extern "C" __global__ void barrier_in_branch(float* y)
{
    __shared__ float s[64];
    s[threadIdx.x] = threadIdx.x;
    if (threadIdx.x < 16) {
        __syncthreads();
    }
    y[threadIdx.x] = s[63 - threadIdx.x];
}

extern "C" __global__ void early_return(float* y, int n)
{
    if (threadIdx.x >= n) return;
    __syncthreads();
    y[threadIdx.x] = 1.0f;
}

extern "C" __global__ void late_return(float* y, int n)
{
    if (threadIdx.x < n) return;
    __syncthreads();
    y[threadIdx.x] = 1.0f;
}

extern "C" __global__ void two_barriers(float* y)
{
    if (threadIdx.x % 2 == 0) {
        __syncthreads();
    } else {
        y[threadIdx.x] = 1.0f;
        __syncthreads();
    }
}

extern "C" __global__ void shuffle_in_branch(float* y)
{
    float v = threadIdx.x;
    if (threadIdx.x < 16) {
        v += __shfl_down_sync(0xffffffffu, v, 8);
    }
    y[threadIdx.x] = v;
}

extern "C" __global__ void shuffle_then_barrier(float* y)
{
    float v = threadIdx.x;
    if (threadIdx.x % 32 < 16) {
        v += __shfl_down_sync(0xffffffffu, v, 8);
    }
    __syncthreads();
    y[threadIdx.x] = v;
}

extern "C" __global__ void mask_without_self(float* y)
{
    float v = threadIdx.x;
    if (threadIdx.x >= 16) {
        v = __shfl_sync(0x0000ffffu, v, 0);
    }
    y[threadIdx.x] = v;
}

extern "C" __global__ void exited_lane(float* y, int gone)
{
    if (threadIdx.x == gone) return;
    y[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (float)threadIdx.x, 1);
}

extern "C" __global__ void partial_warp(float* y)
{
    y[threadIdx.x] = __shfl_down_sync(0xffffffffu, (float)threadIdx.x, 1);
}

extern "C" __global__ void different_collectives(unsigned* y)
{
    if (threadIdx.x < 16) {
        y[threadIdx.x] = __ballot_sync(0xffffffffu, 1);
    } else {
        y[threadIdx.x] = __shfl_sync(0xffffffffu, 7u, 0);
    }
}

extern "C" __global__ void spin_forever(volatile int* flag)
{
    while (flag[0] == 0) {
    }
}

extern "C" __global__ void wait_for_later_block(volatile int* flags)
{
    if (threadIdx.x == 0) {
        if (blockIdx.x == 0) {
            while (flags[1] == 0) {          // block 1 has not run yet: it never will while this waits
            }
        } else {
            flags[1] = 1;
        }
    }
}

extern "C" __global__ void divide(const int* x, int* y, int d)
{
    y[threadIdx.x] = x[threadIdx.x] / (d - (int)threadIdx.x);
}

extern "C" __global__ void trap_on_negative(const float* x)
{
    if (x[threadIdx.x] < 0.0f) __trap();
}

extern "C" __global__ void checked(const float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) assert(x[i] >= 0.0f);
}

__device__ float deep(float v, int depth)
{
    volatile float pad[1024];
    pad[depth % 1024] = v;
    return depth == 0 ? v : deep(v + pad[depth % 1024], depth - 1) + 1.0f;
}

extern "C" __global__ void recursion(float* y, int depth)
{
    y[threadIdx.x] = deep(1.0f, depth);
}

extern "C" __global__ void aborts(int code)
{
    if (threadIdx.x == 2 && code == 1) abort();
}
'''

FILE = "faults.cu"


@pytest.fixture(scope="module")
def module() -> RawModule:
    return RawModule(code=SOURCE, filename=FILE)


def line_of(text: str) -> int:
    """The line of SOURCE that contains ``text`` (so the tests need no hard-coded numbers)."""
    return next(i for i, line in enumerate(SOURCE.split("\n"), start=1) if text in line)


@pytest.fixture
def still_works(module: RawModule):
    """After the test's fault, a correct launch in the same process gives the right answer."""
    yield
    n = 1000
    x = xp.asarray(np.arange(n, dtype=np.float32))
    y = xp.zeros(n, np.float32)
    module.get_function("scale")((4,), (256,), (x, y, n))
    assert np.array_equal(y.get(), 2 * np.arange(n, dtype=np.float32))


def fault_of(module: RawModule, name: str, grid, block, args, cls: type, **kw) -> KernelFault:
    with pytest.raises(cls) as info:
        module.get_function(name)(grid, block, args, **kw)
    fault = info.value
    assert isinstance(fault, KernelFault) and isinstance(fault, RuntimeError)
    assert fault.kernel == name and str(fault).startswith(f"{name}: ")
    assert "\n" not in str(fault)                                          # one paragraph
    return fault


# ------------------------------------------------------------------------------ out of bounds

def test_read_one_past_the_end(module, still_works):
    n = 1000
    x, y = xp.zeros(n, np.float32), xp.zeros(n, np.float32)
    f = fault_of(module, "read_past", (4,), (256,), (x, y, n, 1), OutOfBoundsAccess)
    assert (f.block, f.thread) == ((3, 0, 0), (231, 0, 0))                # i = 999 reads x[1000]
    assert (f.file, f.line) == (FILE, line_of("y[i] = x[i + extra]"))
    assert "read past the end of argument 'x'" in str(f) and "x[1000]" in str(f) and "1000 float32" in str(f)


def test_write_far_past_the_end(module, still_works):
    y = xp.zeros(100, np.float32)
    f = fault_of(module, "write_at", (2,), (32,), (y, 5000), OutOfBoundsAccess)
    assert (f.block, f.thread, f.line) == ((0, 0, 0), (3, 0, 0), line_of("y[index] = 1.0f"))
    assert "write past the end of argument 'y'" in str(f) and "y[5000]" in str(f)


def test_write_before_the_start(module, still_works):
    y = xp.zeros(100, np.float32)
    f = fault_of(module, "write_at", (1,), (32,), (y, -2000), OutOfBoundsAccess)
    assert "before the start of argument 'y'" in str(f) and "y[-2000]" in str(f) and f.thread == (3, 0, 0)
    with pytest.raises(OutOfBoundsAccess) as info:       # just before the start: the canary tells
        module.get_function("write_at")((1,), (32,), (y, -1))
    assert "before the start of argument 'y'" in str(info.value) and "y[-1]" in str(info.value)


def test_write_into_the_alignment_padding_is_found_after_the_launch(module, still_works):
    y = xp.zeros(3, np.float32)                    # 12 bytes: 4 bytes of padding before the guard page
    with pytest.raises(OutOfBoundsAccess) as info:
        module.get_function("write_at")((1,), (32,), (y, 3))
    assert "past the end of argument 'y'" in str(info.value) and "after the launch" in str(info.value)
    module.get_function("write_at")((1,), (32,), (y, 2))                 # the canary was restored


def test_numpy_arrays_are_guarded_too(module, still_works):
    x, y = np.zeros(64, np.float32), np.zeros(64, np.float32)              # plain NumPy, copied in and out
    f = fault_of(module, "read_past", (1,), (64,), (x, y, 64, 10), OutOfBoundsAccess)
    assert f.thread == (54, 0, 0) and "x[64]" in str(f)


def test_dynamic_shared_memory_out_of_bounds(module, still_works):
    y = xp.zeros(32, np.float32)
    f = fault_of(module, "shared_overflow", (1,), (32,), (y, 1), OutOfBoundsAccess, shared_mem=0)
    assert "shared_mem=0" in str(f) and f.line == line_of("buf[threadIdx.x * stride] = 1.0f")
    f = fault_of(module, "shared_overflow", (1,), (32,), (y, 2000), OutOfBoundsAccess, shared_mem=256)
    assert f.thread == (1, 0, 0) and "shared_mem=256 bytes" in str(f)    # byte 8000: past the page


def test_null_pointer(module, still_works):
    x, y = xp.zeros(8, np.float32), xp.zeros(8, np.float32)
    f = fault_of(module, "null_read", (1,), (8,), (x, y), InvalidAddress)
    assert "null pointer" in str(f) and f.thread == (0, 0, 0) and f.line == line_of("y[threadIdx.x] = p[threadIdx.x]")


WILD = 0x1234_0000_1000                  # canonical user space, far from anything a process maps


@pytest.mark.parametrize("address, offset, shown", [(WILD, 0, WILD + 4 * 5), (0, -(1 << 40), None)],
                         ids=["fixed-address", "argument-minus-2^40"])
def test_wild_pointer_read(module, still_works, address, offset, shown):
    """A pointer far from every argument array (neither null nor next to one): thread 37 of the grid,
    thread 5 of block 1, reads through it; the others read x."""
    x, y = xp.zeros(64, np.float32), xp.zeros(64, np.float32)
    f = fault_of(module, "wild_read", (2,), (32,), (x, y, address, offset), InvalidAddress)
    assert type(f) is InvalidAddress                                      # not out-of-bounds, not misaligned
    assert (f.block, f.thread) == ((1, 0, 0), (5, 0, 0)) and (f.file, f.line) == (FILE, line_of("y[i] = i == 37"))
    assert "block (1, 0, 0), thread (5, 0, 0)" in str(f) and f"{FILE}:{f.line}" in str(f)
    assert "invalid memory read" in str(f) and "belongs to no argument array" in str(f) and "null" not in str(f)
    if shown is None:                                                      # x - 4 TiB: computed from x
        shown = int(x.data.ptr) + 4 * offset + 4 * 5
    assert f"address {shown:#x}" in str(f)


NON_CANONICAL = (1 << 63) + 0x1000  # x86-64: bits 63..47 (63..56 with 5-level paging) must agree


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="non-canonical addresses are x86-64's")
def test_wild_pointer_past_the_address_space(module, still_works):
    """An address outside the address space (non-canonical on x86-64) gives a general-protection fault
    that carries no address; it is still an InvalidAddress of the right thread, and says both causes
    the processor cannot tell apart. (A fixed address: x + an offset lands in or out of the address
    space depending on where the allocator placed x.)"""
    x, y = xp.zeros(64, np.float32), xp.zeros(64, np.float32)
    f = fault_of(module, "wild_read", (2,), (32,), (x, y, NON_CANONICAL, 0), InvalidAddress)
    assert (f.block, f.thread, f.line) == ((1, 0, 0), (5, 0, 0), line_of("y[i] = i == 37"))
    assert "invalid memory access" in str(f) and "block (1, 0, 0), thread (5, 0, 0)" in str(f)
    assert "outside the machine's address space" in str(f)


def test_wild_pointer_write(module, still_works):
    y = xp.zeros(64, np.float32)
    f = fault_of(module, "wild_write", (2,), (32,), (y, WILD), InvalidAddress)
    assert (f.block, f.thread, f.line) == ((1, 0, 0), (5, 0, 0), line_of("*reinterpret_cast<float*>(address) = 1.0f"))
    assert "invalid memory write" in str(f) and f"address {WILD:#x} belongs to no argument array" in str(f)


def test_misaligned_vector_load(module, still_works):
    from kernels.cpu.toolchain import compiler

    if compiler().kind == "clang":  # documented in book/cpu_backend.md
        pytest.skip("Clang's alignment check does not cover the copy of a whole float4")
    x, y = xp.zeros(1 + 4 * 8, np.float32), xp.zeros(8, np.float32)
    f = fault_of(module, "vector_load", (1,), (8,), (x[1:], y), MisalignedAccess)
    assert "float4" in str(f) and "multiple of 16" in str(f) and f.line == line_of("float4 a = v[threadIdx.x]")
    module.get_function("vector_load")((1,), (8,), (x[:32], y))           # aligned: fine


# ------------------------------------------------------------------------------ barriers

def test_barrier_inside_a_branch(module, still_works):
    f = fault_of(module, "barrier_in_branch", (1,), (64,), (xp.zeros(64, np.float32),), BarrierDeadlock)
    assert f.thread == (16, 0, 0) and f.line == line_of("if (threadIdx.x < 16) {") + 1
    assert "returned without reaching the __syncthreads()" in str(f) and "16 thread(s)" in str(f)


def test_thread_returns_while_others_wait_at_a_barrier(module, still_works):
    f = fault_of(module, "early_return", (2,), (64,), (xp.zeros(64, np.float32), 40), BarrierDeadlock)
    assert f.block == (0, 0, 0) and f.thread == (40, 0, 0) and f.line == line_of("if (threadIdx.x >= n)") + 1
    assert "returned without reaching the __syncthreads()" in str(f) and "40 thread(s)" in str(f)
    module.get_function("early_return")((2,), (64,), (xp.zeros(64, np.float32), 64))   # all reach it: fine


def test_barrier_after_a_thread_has_returned(module, still_works):
    f = fault_of(module, "late_return", (1,), (64,), (xp.zeros(64, np.float32), 10), BarrierDeadlock)
    assert f.thread == (10, 0, 0) and "thread (0, 0, 0) of the same block has already returned" in str(f)


def test_threads_at_two_different_barriers(module, still_works):
    f = fault_of(module, "two_barriers", (1,), (32,), (xp.zeros(32, np.float32),), BarrierDeadlock)
    assert f.thread == (1, 0, 0) and "different barriers" in str(f)
    assert f"{FILE}:{line_of('if (threadIdx.x % 2 == 0) {') + 1}" in str(f)


# ------------------------------------------------------------------------------ warp collectives

def test_lane_returns_without_the_shuffle_its_warp_waits_in(module, still_works):
    f = fault_of(module, "shuffle_in_branch", (1,), (32,), (xp.zeros(32, np.float32),), WarpCollectiveError)
    assert f.thread == (16, 0, 0) and f.line == line_of("v += __shfl_down_sync(0xffffffffu, v, 8);")
    assert "lane(s) 0-15" in str(f) and "__shfl_down_sync" in str(f)


def test_shuffle_and_barrier_deadlock(module, still_works):
    f = fault_of(module, "shuffle_then_barrier", (1,), (64,), (xp.zeros(64, np.float32),), BarrierDeadlock)
    assert "deadlocked" in str(f) and "__shfl_down_sync" in str(f) and "__syncthreads()" in str(f)
    assert f.thread == (0, 0, 0)


def test_lane_not_in_its_own_mask(module, still_works):
    f = fault_of(module, "mask_without_self", (1,), (32,), (xp.zeros(32, np.float32),), WarpCollectiveError)
    assert f.thread == (16, 0, 0) and "does not include the lane itself" in str(f)


def test_mask_names_a_lane_that_has_returned(module, still_works):
    f = fault_of(module, "exited_lane", (1,), (32,), (xp.zeros(32, np.float32), 0), WarpCollectiveError)
    assert f.thread == (1, 0, 0) and "lane(s) 0," in str(f) and "already returned" in str(f)
    f = fault_of(module, "exited_lane", (1,), (32,), (xp.zeros(32, np.float32), 5), WarpCollectiveError)
    assert f.thread == (5, 0, 0) and "returned without calling the __shfl_xor_sync" in str(f)


def test_full_mask_in_a_partial_warp(module, still_works):
    f = fault_of(module, "partial_warp", (1,), (40,), (xp.zeros(40, np.float32),), WarpCollectiveError)
    assert f.thread == (32, 0, 0) and "do not exist" in str(f) and "8-31" in str(f)


def test_lanes_in_different_collectives(module, still_works):
    f = fault_of(module, "different_collectives", (1,), (32,), (xp.zeros(32, np.uint32),), WarpCollectiveError)
    assert "deadlocked" in str(f) and "__ballot_sync" in str(f) and "__shfl_sync" in str(f)


# ------------------------------------------------------------------------------ time limit

def test_endless_loop_stops_at_the_time_limit(module, still_works):
    flag = xp.zeros(1, np.int32)
    start = time.monotonic()
    f = fault_of(module, "spin_forever", (1,), (1,), (flag,), KernelTimeout, time_limit=0.5)
    assert time.monotonic() - start < 5
    assert "time limit of 0.5 s" in str(f) and f.line == line_of("while (flag[0] == 0)")


def test_spin_wait_for_a_later_block_times_out(module, still_works):
    old = time_limit()
    set_time_limit(0.3)
    try:
        assert time_limit() == 0.3
        f = fault_of(module, "wait_for_later_block", (2,), (32,), (xp.zeros(2, np.int32),), KernelTimeout)
    finally:
        set_time_limit(None)
    assert time_limit() == old
    assert f.block == (0, 0, 0) and "one block after another" in str(f)
    with pytest.raises(ValueError):
        set_time_limit(-1)


# ------------------------------------------------------------------------------ crashes

def test_integer_division_by_zero(module, still_works):
    f = fault_of(module, "divide", (1,), (8,), (xp.ones(8, np.int32), xp.zeros(8, np.int32), 5), KernelCrash)
    assert "division by zero" in str(f) and f.thread == (5, 0, 0) and f.line == line_of("x[threadIdx.x] / (d")


def test_trap(module, still_works):
    x = xp.asarray(np.array([1, 2, -3, 4], np.float32))
    f = fault_of(module, "trap_on_negative", (1,), (4,), (x,), KernelTrap)
    assert f.thread == (2, 0, 0) and f.line == line_of("__trap();")


def test_assert(module, still_works):
    h = np.ones(300, np.float32)
    h[257] = -1
    f = fault_of(module, "checked", (2,), (256,), (xp.asarray(h), 300), DeviceAssertion)
    assert (f.block, f.thread) == ((1, 0, 0), (1, 0, 0)) and "x[i] >= 0.0f" in str(f)
    assert f.line == line_of("assert(x[i] >= 0.0f)")


def test_stack_overflow(module, still_works):
    f = fault_of(module, "recursion", (1,), (2,), (xp.zeros(2, np.float32), 100_000), StackOverflow)
    assert f.thread == (0, 0, 0) and "KiB of stack" in str(f)
    y = xp.zeros(2, np.float32)
    module.get_function("recursion")((1,), (2,), (y, 10))                 # shallow recursion is fine
    assert y.get().tolist() == [1034.0, 1034.0]          # 2 ** 10 + 10


def test_abort(module, still_works):
    f = fault_of(module, "aborts", (1,), (4,), (1,), KernelCrash)
    assert "abort()" in str(f) and f.thread == (2, 0, 0)


def test_many_faults_in_a_row_leave_the_process_healthy(module, still_works):
    x = xp.zeros(10, np.float32)
    for _ in range(5):
        with pytest.raises(OutOfBoundsAccess):
            module.get_function("write_at")((1,), (32,), (x, 10_000))
        with pytest.raises(BarrierDeadlock):
            module.get_function("barrier_in_branch")((1,), (64,), (xp.zeros(64, np.float32),))


def test_fault_inside_a_header_names_the_header(still_works, monkeypatch):
    """block_scan_shfl needs whole warps; a 48-thread block has a partial warp. The shuffle that
    fails is in scan/scan_common.cuh, and the fault says so."""
    import kernels

    monkeypatch.setenv("COURSE_BACKEND", "cpu")
    scan = kernels.load_kernel("scan/basic_scans.cu", "block_scan_shfl")
    x = xp.ones(100, np.int32)
    with pytest.raises(WarpCollectiveError) as info:
        scan(1, 48, (x, xp.zeros(100, np.int32), xp.zeros(1, np.int32), 100))
    f = info.value
    assert f.file == "scan/scan_common.cuh" and f.thread == (32, 0, 0) and "16-31" in str(f)
    assert "/" + "scan/scan_common.cuh" not in str(f)                 # no absolute path
    scan(1, 64, (x, xp.zeros(100, np.int32), xp.zeros(1, np.int32), 100))
