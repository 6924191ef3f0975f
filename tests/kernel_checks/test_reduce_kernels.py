"""The "Reduce" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every kernel is checked with kernels.check against a float64 (or int64) NumPy reference, on fresh
random inputs, sizes that are not multiples of the block (1 and primes among them) and poisoned
outputs. Float sums are compared with the worst-case error bound of their summation depth
(kernels.chapters.reduce.sum_error_bound); inputs are positive, so the bound is a relative error.
"""
from __future__ import annotations

import numpy as np
import pytest
from kernel_backends import gpu_only

from kernels.chapters import reduce as red

SIZES = [1, *gpu_only(2), 3, 31, 257, 4099, 65_537, *gpu_only(1_000_003)]
TREE = {"reduce_interleaved": 1, "reduce_interleaved_strided": 1, "reduce_sequential": 1,
        "reduce_first_add": 2, "reduce_syncwarp_tail": 2, "reduce_shuffle": 2}


def sum_reference(x, n):
    return np.array([x[:n].sum()])


def sliced_reference(x, offset, n):
    return np.array([x[offset:offset + n].sum()])


def multi_pass(k, kernel, per_thread, block):
    cp = k.xp
    per_block = per_thread * block

    def launch(x, n, out):
        src = x
        for grid in red.pass_grids(n, per_block):
            dst = out if grid == 1 else cp.empty(grid, cp.float32)
            kernel((grid,), (block,), (src, dst, n), shared_mem=4 * block)
            src, n = dst, grid
    return launch


@pytest.mark.parametrize("n", SIZES)
def test_atomic(k, n):
    kern = k.load_kernel("reduce/atomic_sum.cu", "sum_atomic")

    def launch(x, n, out):
        out.fill(0)
        kern((k.ceil_div(n, 128),), (128,), (x, out, n))
    k.check(launch, sum_reference, inputs={"x": k.rand(n, np.float32, 0, 1), "n": n},
            outputs={"out": (1, np.float32)}, tol=red.sum_error_bound(n - 1)).raise_if_failed()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", sorted(TREE))
def test_tree(k, name, n):
    kern = k.load_kernel("reduce/tree.cu", name)
    for block in (64, 128, 256, 1024):
        per_block = TREE[name] * block
        depth = len(red.pass_grids(n, per_block)) * int(np.log2(per_block))
        k.check(multi_pass(k, kern, TREE[name], block), sum_reference,
                inputs={"x": k.rand(n, np.float32, 0, 1), "n": n}, outputs={"out": (1, np.float32)},
                tol=red.sum_error_bound(depth)).raise_if_failed()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("offset", [0, 1, 2, 3])
def test_vec4_two_pass(k, n, offset):
    cp = k.xp
    kern = k.load_kernel("reduce/vec4_sum.cu", "sum_vec4_partials")
    for grid, block in k.pick(gpu=((1, 32), (7, 256), (264, 256), (1000, 1024)),
                              cpu=((1, 32), (7, 256), (33, 256), (13, 1024))):
        partial = cp.empty(grid, cp.float32)

        def launch(x, offset, n, out):
            kern((grid,), (block,), (x[offset:offset + n], partial, n))
            kern((1,), (block,), (partial, out, grid))
        k.check(launch, sliced_reference,
                inputs={"x": k.rand(n + 3, np.float32, 0, 1), "offset": offset, "n": n},
                outputs={"out": (1, np.float32)},
                tol=red.sum_error_bound(red.vec4_depth(n, grid, block) + 1)).raise_if_failed()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("offset", [0, 1, 2, 3])
def test_vec4_single_pass(k, n, offset):
    cp = k.xp
    kern = k.load_kernel("reduce/vec4_sum.cu", "sum_vec4_single_pass")
    counter = cp.zeros(1, cp.uint32)
    for grid, block in k.pick(gpu=((1, 32), (7, 256), (264, 256), (1000, 1024)),
                              cpu=((1, 32), (7, 256), (33, 256), (13, 1024))):
        partial = cp.empty(grid, cp.float32)

        def launch(x, offset, n, out):
            for _ in range(2):                   # the counter must be back at 0 for the second
                kern((grid,), (block,), (x[offset:offset + n], partial, counter, out, n))
        k.check(launch, sliced_reference,
                inputs={"x": k.rand(n + 3, np.float32, 0, 1), "offset": offset, "n": n},
                outputs={"out": (1, np.float32)},
                tol=red.sum_error_bound(red.vec4_depth(n, grid, block))).raise_if_failed()
        assert int(counter[0]) == 0


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_int_single_pass_is_exact(k, n, offset):
    cp = k.xp
    kern = k.load_kernel("reduce/vec4_sum.cu", "sum_int_single_pass")
    counter = cp.zeros(1, cp.uint32)
    for grid, block in k.pick(gpu=((1, 64), (13, 256), (264, 256)), cpu=((1, 64), (13, 256), (33, 256))):
        partial = cp.empty(grid, cp.int64)

        def launch(x, offset, n, out):
            kern((grid,), (block,), (x[offset:offset + n], partial, counter, out, n))
        k.check(launch, sliced_reference,
                inputs={"x": k.rand(n + 3, np.int32, -2**31, 2**31 - 1), "offset": offset, "n": n},
                outputs={"out": (1, np.int64)}).raise_if_failed()
        assert int(counter[0]) == 0


def test_single_pass_is_deterministic(k):
    cp = k.xp
    kern = k.load_kernel("reduce/vec4_sum.cu", "sum_vec4_single_pass")
    n = k.pick(gpu=10_000_019, cpu=100_003)
    grid = k.pick(gpu=264, cpu=33)
    x = cp.random.random(n, dtype=cp.float32)
    partial = cp.empty(grid, cp.float32)
    counter = cp.zeros(1, cp.uint32)
    out = cp.empty(1, cp.float32)
    bits = set()
    for _ in range(5):
        kern((grid,), (256,), (x, partial, counter, out, n))
        bits.add(int(out.view(cp.uint32)[0]))
    assert len(bits) == 1
