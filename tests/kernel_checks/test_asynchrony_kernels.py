"""The "Asynchrony" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every kernel is checked with kernels.check against a float64 NumPy reference on fresh random inputs,
with sizes that are not multiples of the block (1 and primes included) and poisoned outputs. The
streams, graphs and the sticky-error test need a GPU and stay in tests/gpu/test_asynchrony_gpu.py.
"""
from __future__ import annotations

import numpy as np
import pytest

BLOCK = 256
SIZES = [1, 3, 255, 257, 1021, 100_003]
A, B = float(np.float32(0.9999)), float(np.float32(0.0001))


def fma_reference(x, n, iters):
    acc = x.copy()
    for _ in range(iters):
        acc = acc * A + B
    return acc


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("iters", [0, 1, 37, 300])
def test_fma_chain(k, n, iters):
    kernel = k.load_kernel("asynchrony/fma_chain.cu", "fma_chain")
    report = k.check(lambda x, y, n, iters: kernel((k.ceil_div(n, BLOCK),), (BLOCK,), (x, y, n, iters)),
                     fma_reference, inputs={"x": k.rand(n), "n": n, "iters": iters},
                     outputs={"y": (n, np.float32)}, tol=1e-5)
    assert report, str(report)


@pytest.mark.parametrize("n", SIZES)
def test_add_one(k, n):
    cp = k.xp
    kernel = k.load_kernel("asynchrony/add_one.cu", "add_one")

    def launch(x, y, n):
        cp.copyto(y, x)
        kernel((k.ceil_div(n, BLOCK),), (BLOCK,), (y, n))

    report = k.check(launch, lambda x, n: x + 1, inputs={"x": k.rand(n), "n": n},
                     outputs={"y": (n, np.float32)}, tol=1e-6)
    assert report, str(report)


@pytest.mark.parametrize("n", SIZES)
def test_affine_from_buffer(k, n):
    kernel = k.load_kernel("asynchrony/affine_from_buffer.cu", "affine_from_buffer")
    report = k.check(lambda x, y, coeffs, n: kernel((k.ceil_div(n, BLOCK),), (BLOCK,), (x, y, coeffs, n)),
                     lambda x, coeffs, n: coeffs[0] * x + coeffs[1],
                     inputs={"x": k.rand(n), "coeffs": k.rand(2, low=-2, high=2), "n": n},
                     outputs={"y": (n, np.float32)}, tol=1e-6)
    assert report, str(report)


@pytest.mark.parametrize("n", SIZES)
def test_gather_with_valid_indices(k, n):
    kernel = k.load_kernel("asynchrony/gather.cu", "gather")
    report = k.check(lambda x, idx, y, n: kernel((k.ceil_div(n, BLOCK),), (BLOCK,), (x, idx, y, n)),
                     lambda x, idx, n: x[idx],
                     inputs={"x": k.rand(n), "idx": k.rand(n, np.int64, 0, n - 1), "n": n},
                     outputs={"y": (n, np.float32)}, tol=0)
    assert report, str(report)


def test_invalid_launch_is_reported_at_once_and_the_next_launch_works(k):
    cp = k.xp
    add_one = k.load_kernel("asynchrony/add_one.cu", "add_one")
    x = cp.zeros(1000, dtype=cp.float32)
    with pytest.raises(Exception):
        add_one.raw((4,), (2048,), (x, np.int32(x.size)))
    add_one((4,), (BLOCK,), (x, x.size))
    assert bool((x == 1).all())


def test_gather_with_a_bad_index_faults_on_the_cpu_backend(k):
    """The chapter's illegal address: on the CPU backend it is a KernelFault naming the array and the
    thread, and the process goes on (the GPU's sticky error is tested in tests/gpu/)."""
    if not k.on_cpu:
        pytest.skip("the GPU's behaviour is tested in a subprocess in tests/gpu/test_asynchrony_gpu.py")
    from kernels.cpu import KernelFault

    cp = k.xp
    gather = k.load_kernel("asynchrony/gather.cu", "gather")
    n = 1000
    x = cp.arange(n, dtype=cp.float32)
    y = cp.empty_like(x)
    idx = cp.arange(n, dtype=cp.int64)
    idx[7] = 1 << 40
    with pytest.raises(KernelFault) as e:
        gather((4,), (256,), (x, idx, y, n))
    assert "gather" in str(e.value) and e.value.thread == (7, 0, 0) and e.value.line == 14
    idx[7] = 7
    gather((4,), (256,), (x, idx, y, n))
    assert bool(cp.array_equal(y, x))
