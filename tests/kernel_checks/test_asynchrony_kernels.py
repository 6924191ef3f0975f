"""The "Asynchrony" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every kernel is checked with kernels.check against a float64 NumPy reference on fresh random inputs,
with sizes that are not multiples of the block (1 and primes included) and poisoned outputs. The
streams, graphs and the sticky-error test need a GPU and stay in tests/gpu/test_asynchrony_gpu.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from kernels.check import check_tolerance, default_seed
from kernels.numerics import gamma

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
    """y = c0 x + c1 in float32, two roundings (or one, if the compiler fuses them): within
    gamma_2 (|c0 x| + |c1|) of the float64 value. Where the two terms cancel, y is tiny and that is a
    large share of it, so the tolerance comes from this bound, not from a fixed relative error."""
    kernel = k.load_kernel("asynchrony/affine_from_buffer.cu", "affine_from_buffer")
    rng = np.random.default_rng(default_seed())
    x = rng.uniform(-1, 1, n).astype(np.float32)
    coeffs = rng.uniform(-2, 2, 2).astype(np.float32)
    c0, c1 = (float(c) for c in coeffs)
    bound = gamma(2) * (np.abs(c0 * x.astype(np.float64)) + abs(c1))
    report = k.check(lambda x, y, coeffs, n: kernel((k.ceil_div(n, BLOCK),), (BLOCK,), (x, y, coeffs, n)),
                     lambda x, coeffs, n: coeffs[0] * x + coeffs[1],
                     inputs={"x": x, "coeffs": coeffs, "n": n}, outputs={"y": (n, np.float32)},
                     tol=check_tolerance(c0 * x.astype(np.float64) + c1, bound))
    assert report, str(report)


def test_affine_cancellation_case_that_failed_a_fixed_tolerance(k):
    """The inputs of seed 1548694214 at n = 1, drawn as the old test drew them, on which tol=1e-6 failed
    a CI run (got -0.0181729793548584 for -0.018173036294456324): c0 x nearly cancels c1, so the
    rounding bound allows more than 1e-6 of the result, and the kernel is within it."""
    kernel = k.load_kernel("asynchrony/affine_from_buffer.cu", "affine_from_buffer")
    rng = np.random.default_rng(1548694214)
    x, coeffs = k.rand(1).draw(rng), k.rand(2, low=-2, high=2).draw(rng)
    c0, c1 = (float(c) for c in coeffs)
    exact = c0 * x.astype(np.float64) + c1
    tol = check_tolerance(exact, gamma(2) * (np.abs(c0 * x.astype(np.float64)) + abs(c1)))
    assert tol > 1e-6 and abs(exact[0]) < 0.02
    report = k.check(lambda x, y, coeffs, n: kernel((1,), (BLOCK,), (x, y, coeffs, n)),
                     lambda x, coeffs, n: coeffs[0] * x + coeffs[1],
                     inputs={"x": x, "coeffs": coeffs, "n": 1}, outputs={"y": (1, np.float32)}, tol=tol)
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
