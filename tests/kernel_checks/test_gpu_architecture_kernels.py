"""The "GPU architecture" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every kernel is checked with kernels.check against a float64 NumPy reference on fresh random inputs,
at sizes that are not multiples of the block (1, 31, 1000003, 2^26 + 5 ...), with NaN-poisoned
outputs. The occupancy and bandwidth tests need a GPU and stay in tests/gpu/.
"""
from __future__ import annotations

import numpy as np
import pytest
from kernel_backends import gpu_only

VECTOR_ADD = ("gpu_architecture/vector_add.cu", "vector_add")
GRID_STRIDE = ("gpu_architecture/vector_add_grid_stride.cu", "vector_add_grid_stride")
SIZES = [1, 31, 32, 33, 1000, 1_000_003, *gpu_only(2**26 + 5)]


def reference(x, y):
    return x + y  # float64: check() hands the reference float64 copies of the inputs


def run_check(k, launch, n):
    result = k.check(launch, reference, inputs={"x": k.rand(n), "y": k.rand(n)},
                     outputs={"out": (n, np.float32)})
    result.raise_if_failed()
    return result


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("block", [32, 256, 1024])
def test_vector_add(k, n, block):
    kernel = k.load_kernel(*VECTOR_ADD)

    def launch(x, y, out):
        kernel(k.ceil_div(n, block), block, (x, y, out, n))

    run_check(k, launch, n)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("block,per_thread", [(256, 1), (256, 2), (128, 4), (1024, 4)])
def test_vector_add_grid_stride(k, n, block, per_thread):
    kernel = k.load_kernel(*GRID_STRIDE)

    def launch(x, y, out):
        kernel(k.ceil_div(n, block * per_thread), block, (x, y, out, n))

    run_check(k, launch, n)


@pytest.mark.parametrize("n", [1_000_003, *gpu_only(2**26 + 5)])
def test_grid_stride_with_a_small_fixed_grid(k, n):
    """A grid far smaller than n: every thread loops many times and the tail is still covered."""
    kernel = k.load_kernel(*GRID_STRIDE)
    sms = k.sm_count

    def launch(x, y, out):
        kernel(sms, 96, (x, y, out, n))   # 96: whole warps, not a power of two

    run_check(k, launch, n)


def test_vector_add_leaves_the_tail_alone(k):
    """Threads past n must not write: the element after the end keeps its poison."""
    cp = k.xp
    kernel = k.load_kernel(*VECTOR_ADD)
    n, block = 1000, 256
    x = cp.random.random(n + 24, dtype=cp.float32)
    y = cp.random.random(n + 24, dtype=cp.float32)
    out = cp.full(n + 24, cp.nan, dtype=cp.float32)
    kernel(k.ceil_div(n, block), block, (x, y, out, n))
    assert bool(cp.array_equal(out[:n], x[:n] + y[:n]))
    assert bool(cp.isnan(out[n:]).all())
