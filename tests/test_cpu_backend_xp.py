"""The CPU backend's array module (kernels.cpu.xp): CuPy's names over NumPy, and how kernels see arrays.

Arrays made by xp live in guarded shared memory and are passed in place; plain NumPy arrays are
copied into guarded memory for the launch and back afterwards, keeping aliasing between arguments.
"""
from __future__ import annotations

import numpy as np
import pytest

import kernels
from kernels.check import check, rand
from kernels.cpu import RawKernel, xp
from kernels.cpu.memory import GuardedBuffer, owner

TWICE = r'''
extern "C" __global__ void twice(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
extern "C" __global__ void shift_left(float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i + 1 < n) y[i] = y[i + 1];
}
extern "C" __global__ void bump(unsigned* counter) { atomicAdd(counter, 1u); }
'''


@pytest.fixture(scope="module")
def twice() -> RawKernel:
    return RawKernel(TWICE, "twice")


def test_creation_functions_and_dtypes():
    for make, expected in [(lambda: xp.zeros(5, xp.float32), np.zeros(5, np.float32)),
                           (lambda: xp.ones((2, 3), dtype=np.int64), np.ones((2, 3), np.int64)),
                           (lambda: xp.full(4, 7, dtype=xp.uint16), np.full(4, 7, np.uint16)),
                           (lambda: xp.full(3, np.nan, xp.float32), np.full(3, np.nan, np.float32)),
                           (lambda: xp.arange(10, dtype=xp.int32), np.arange(10, dtype=np.int32)),
                           (lambda: xp.arange(2, 11, 3), np.arange(2, 11, 3)),
                           (lambda: xp.asarray([1.5, 2.5]), np.array([1.5, 2.5])),
                           (lambda: xp.array(np.eye(2), dtype=xp.float32), np.eye(2, dtype=np.float32)),
                           (lambda: xp.empty_like(np.zeros((2, 2), np.int8)), np.zeros((2, 2), np.int8)),
                           (lambda: xp.zeros_like(np.ones(3)), np.zeros(3)),
                           (lambda: xp.full_like(np.zeros(2, np.int32), -1), np.full(2, -1, np.int32)),
                           (lambda: xp.linspace(0, 1, 5), np.linspace(0, 1, 5))]:
        a = make()
        assert isinstance(a, xp.ndarray) and a.dtype == expected.dtype and a.shape == expected.shape
        assert isinstance(owner(a), GuardedBuffer)
        if a.dtype != np.int8:
            np.testing.assert_array_equal(a.get(), expected)
        assert type(a.get()) is np.ndarray and type(xp.asnumpy(a)) is np.ndarray


def test_arrays_are_aligned_and_guarded():
    for n in (1, 3, 4, 1000, 4099):
        a = xp.zeros(n, np.float32)
        assert a.__array_interface__["data"][0] % 16 == 0
        buf = owner(a)
        assert buf.broken_canaries() == []
        assert buf.guard_hit(buf.base + buf.back_guard) == "after" and buf.guard_hit(buf.base) == "before"
        assert buf.back_guard - (buf.data_offset + buf.nbytes) < 16      # the end is next to the guard


def test_asarray_keeps_an_xp_array_and_copies_anything_else():
    a = xp.arange(5)
    assert xp.asarray(a) is a
    host = np.arange(5)
    b = xp.asarray(host)
    host[0] = 99
    assert int(b[0]) == 0 and xp.asarray(a, dtype=np.float32).dtype == np.float32


def test_elements_and_reductions_are_zero_dimensional_arrays_like_cupy():
    a = xp.arange(6, dtype=np.float32).reshape(2, 3)
    assert isinstance(a[1, 2], xp.ndarray) and a[1, 2].shape == () and a[1, 2].get() == 5.0
    assert float(a.sum()) == 15.0 and a.sum().get() == 15.0 and int(a.max()) == 5
    assert bool((a >= 0).all()) and isinstance(a + 1, xp.ndarray) and f"{a[0, 1]:.1f}" == "1.0"
    assert bool(xp.array_equal(a, a.get())) and isinstance(xp.cumsum(a), xp.ndarray)


def test_random_numbers_with_dtypes():
    xp.random.seed(3)
    r = xp.random.random(1000, dtype=xp.float32)
    assert r.dtype == np.float32 and 0 <= float(r.min()) and float(r.max()) < 1
    i = xp.random.randint(-5, 5, 1000, dtype=xp.int32)
    assert i.dtype == np.int32 and int(i.min()) >= -5 and int(i.max()) < 5
    assert xp.random.randint(3, size=10).dtype == np.dtype(int)
    assert xp.random.standard_normal(100, dtype=np.float32).dtype == np.float32
    u = xp.random.uniform(2, 3, (4, 5))
    assert u.shape == (4, 5) and float(u.min()) >= 2 and isinstance(u, xp.ndarray)
    with pytest.raises(TypeError):
        xp.random.random(5, dtype=np.int32)


def test_cuda_namespace_is_synchronous():
    xp.cuda.Device().synchronize()
    with xp.cuda.Stream(non_blocking=True) as s:
        s.synchronize()
    start, end = xp.cuda.Event(), xp.cuda.Event()
    start.record()
    end.record()
    with pytest.raises(kernels.NoGPUError, match="says nothing about its time on a GPU"):
        xp.cuda.get_elapsed_time(start, end)                       # no unlabelled CPU timings
    assert xp.get_default_memory_pool().used_bytes() == 0


def test_kernels_write_xp_arrays_in_place_and_views_work(twice):
    x = xp.arange(100, dtype=np.float32)
    y = xp.full(102, -1.0, np.float32)
    twice((1,), (128,), (x[10:], y[1:91], 90))
    got = y.get()
    assert got[0] == -1 and got[91] == -1 and np.array_equal(got[1:91], 2 * np.arange(10, 100))


def test_plain_numpy_arrays_are_copied_in_and_out(twice):
    x = np.arange(50, dtype=np.float32)
    y = np.zeros(50, np.float32)
    twice((1,), (64,), (x, y, 50))
    assert np.array_equal(y, 2 * x)
    frozen = np.arange(50, dtype=np.float32)
    frozen.flags.writeable = False
    twice((1,), (64,), (frozen, y, 50))                 # read-only input: fine, not written back
    assert np.array_equal(y, 2 * frozen)


def test_numpy_views_of_one_array_keep_their_aliasing():
    kernel = RawKernel(TWICE, "twice")
    base = np.arange(20, dtype=np.float32)
    kernel((1,), (32,), (base[:10], base[5:15], 10))    # overlapping views, one copy of base
    expected = np.arange(20, dtype=np.float32)
    for i in range(10):                                  # threads run in order on the CPU backend
        expected[5 + i] = 2 * expected[i]
    assert np.array_equal(base, expected)


def test_get_global_memory_as_an_array():
    code = "__device__ unsigned int hits;\n" + TWICE
    kernel = RawKernel(code, "bump")
    hits = xp.ndarray((1,), np.uint32, memptr=kernel.module.get_global("hits"))
    hits[0] = 5
    kernel((2,), (16,), (hits,))                         # a global passed as an argument, in place
    assert int(hits[0]) == 5 + 32
    with pytest.raises(ValueError, match="needs 8 bytes"):
        xp.ndarray((2,), np.uint32, memptr=kernel.module.get_global("hits"))
    with pytest.raises(kernels.signature.KernelNotFoundError, match="no __device__ or __constant__ variable"):
        kernel.module.get_global("misses")


def test_array_module_is_xp_on_the_cpu_backend(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COURSE_BACKEND", "cpu")
    assert kernels.array_module() is xp
    assert xp.RawKernel is RawKernel and xp.float32 is np.float32 and xp.get_array_module() is xp
    with pytest.raises(AttributeError, match="has no attribute 'not_a_function'"):
        xp.not_a_function  # noqa: B018


def test_check_runs_on_xp_arrays(monkeypatch: pytest.MonkeyPatch, twice):
    monkeypatch.setenv("COURSE_BACKEND", "cpu")
    report = check(lambda x, y: twice((1,), (256,), (x, y, 200)), lambda x: 2 * x,
                   inputs={"x": rand(200)}, outputs={"y": (200, np.float32)})
    assert report.ok, str(report)
