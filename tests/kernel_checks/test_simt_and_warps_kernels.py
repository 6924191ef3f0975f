"""The "SIMT and warps" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every kernel is checked with kernels.check against a float64 (or int64) NumPy reference, on fresh
random inputs, sizes that are not multiples of the block (1 and primes among them) and poisoned
outputs. The references are tested against plain Python loops on the CPU in tests/test_simt_and_warps.py.
The deliberately racy block_sum_unsafe_tail is not tested for correctness on a GPU: only that it runs.
On the CPU backend, where a warp's threads run one after another between barriers, its race gives
a wrong sum every time, which is tested. copy_with_ballast is also run with a ballast of ones, which
must change its output: the kernel really reads the values it holds.
"""
from __future__ import annotations

import numpy as np
import pytest
from kernel_backends import gpu_only

SIZES = [1, 31, 257, 4099, 100_003]
A = np.array([0.75, 0.5, -0.625, 0.875])
B = np.array([0.25, -0.125, 0.5, -0.375])


# --------------------------------------------------------------------------- references


def branch_reference(x, n, pattern, work, block):
    t = np.arange(n) % block
    path = {0: np.zeros(n, dtype=int), 1: (t // 32) % 2, 2: (t // 32) % 4, 3: t % 2, 4: t % 4,
            5: np.where(x > 0, 0, 1)}[pattern]
    v = np.array(x, dtype=np.float64)
    for _ in range(int(work)):
        v = v * A[path] + B[path]
    return v


def short_branch_reference(x, n):
    return np.where(x < 0, -0.5 * x, x + 1.0)


def long_branch_reference(x, n, work):
    v = np.array(x, dtype=np.float64)
    neg = x < 0
    for _ in range(int(work)):
        v = np.where(neg, v * 0.75 + 0.25, v * 0.5 - 0.125)
    return v


def block_sums_reference(x, n, grid, block):
    total = grid * block
    padded = np.zeros(-(-n // total) * total, dtype=np.int64)
    padded[:n] = x
    return padded.reshape(-1, grid, block).sum(axis=(0, 2))


def warp_sums_reference(x, n):
    padded = np.zeros(-(-n // 32) * 32)
    padded[:n] = x
    return np.repeat(padded.reshape(-1, 32).sum(axis=1), 32)[:n]


def votes_reference(x, n):
    p = np.zeros(-(-n // 32) * 32, dtype=bool)
    p[:n] = x > 0
    p = p.reshape(-1, 32)
    return {"ballot": (p * (2 ** np.arange(32, dtype=np.int64))).sum(axis=1),
            "count": p.sum(axis=1), "any": p.any(axis=1).astype(int), "all": p.all(axis=1).astype(int)}


# --------------------------------------------------------------------------- tests



@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("pattern", range(6))
def test_branch_paths(k, n, pattern):
    kern = k.load_kernel("simt_and_warps/branch_paths.cu", "branch_paths")
    for block in (64, 256):
        k.check(lambda x, y, n, pattern, work, block: kern((k.ceil_div(n, block),), (block,), (x, y, n, pattern, work)),
                branch_reference, inputs={"x": k.rand(n), "n": n, "pattern": pattern, "work": 13, "block": block},
                outputs={"y": (n, np.float32)}, tol=1e-5).raise_if_failed()


@pytest.mark.parametrize("n", SIZES)
def test_short_and_long_branch(k, n):
    short = k.load_kernel("simt_and_warps/short_branch.cu", "short_branch")
    long = k.load_kernel("simt_and_warps/short_branch.cu", "long_branch")
    g = k.ceil_div(n, 128)
    k.check(lambda x, y, n: short((g,), (128,), (x, y, n)), short_branch_reference,
            inputs={"x": k.rand(n), "n": n}, outputs={"y": (n, np.float32)}, tol=1e-6).raise_if_failed()
    k.check(lambda x, y, n, work: long((g,), (128,), (x, y, n, work)), long_branch_reference,
            inputs={"x": k.rand(n), "n": n, "work": 9}, outputs={"y": (n, np.float32)}, tol=1e-5).raise_if_failed()


@pytest.mark.parametrize("n", SIZES + gpu_only(1_000_003))
@pytest.mark.parametrize("name,blocks", [("block_sum_syncwarp", (32, 64, 256, 1024)),
                                         ("block_sum_shfl", (32, 96, 256, 1024))])
def test_block_sums(k, n, name, blocks):
    kern = k.load_kernel("simt_and_warps/block_sum.cu", name)
    for block in blocks:
        for grid in k.pick(gpu=(1, 7, 264), cpu=(1, 7, 33)):
            k.check(lambda x, n, grid, block, partial: kern((grid,), (block,), (x, partial, n)),
                    block_sums_reference,
                    inputs={"x": k.rand(n, np.int32, -100, 100), "n": n, "grid": grid, "block": block},
                    outputs={"partial": (grid, np.int32)}).raise_if_failed()


def test_unsafe_tail_runs(k):
    cp = k.xp
    kern = k.load_kernel("simt_and_warps/block_sum.cu", "block_sum_unsafe_tail")
    x = cp.ones(100_003, dtype=cp.int32)
    partial = cp.full(7, -1, dtype=cp.int32)
    kern((7,), (256,), (x, partial, 100_003))
    cp.cuda.Device().synchronize()  # it may give wrong sums, but it must not crash
    if k.on_cpu:
        # Lane 0 runs its five steps before lanes 1-15 have run any: it adds values that the other
        # lanes have not yet updated, so the race shows (the exact sums are 14286 or 14285).
        expected = block_sums_reference(np.ones(100_003), 100_003, 7, 256)
        assert not np.array_equal(partial.get(), expected)


@pytest.mark.parametrize("n", SIZES)
def test_warp_allreduce_and_votes(k, n):
    allreduce = k.load_kernel("simt_and_warps/warp_ops.cu", "warp_allreduce")
    votes = k.load_kernel("simt_and_warps/warp_ops.cu", "warp_votes")
    g = k.ceil_div(n, 256)
    w = k.ceil_div(n, 32)
    k.check(lambda x, y, n: allreduce((g,), (256,), (x, y, n)), warp_sums_reference,
            inputs={"x": k.rand(n), "n": n}, outputs={"y": (n, np.float32)}, tol=1e-5).raise_if_failed()
    for low in (-1.0, -0.05):
        k.check(lambda x, ballot, count, any, all, n: votes((g,), (256,), (x, ballot, count, any, all, n)),
                votes_reference, inputs={"x": k.rand(n, np.float32, low, 1.0), "n": n},
                outputs={"ballot": (w, np.uint32), "count": (w, np.int32), "any": (w, np.int32),
                         "all": (w, np.int32)}).raise_if_failed()


@pytest.mark.parametrize("n", SIZES + [1_000_003])
@pytest.mark.parametrize("name", ["copy_one_in_flight", "copy_four_in_flight"])
def test_latency_copies(k, n, name):
    kern = k.load_kernel("simt_and_warps/latency_copy.cu", name)
    for grid, smem in k.pick(gpu=((1, 0), (13, 0), (132, 40 * 1024)), cpu=((1, 0), (13, 0), (33, 40 * 1024))):
        k.check(lambda x, y, n: kern((grid,), (128,), (x, y, n), shared_mem=smem), lambda x, n: x,
                inputs={"x": k.rand(n), "n": n}, outputs={"y": (n, np.float32)}, tol=0).raise_if_failed()


@pytest.mark.parametrize("n", SIZES + [1_000_003])
@pytest.mark.parametrize("ballast", [0, 8, 24, 96, 224])
def test_copy_with_ballast(k, n, ballast):
    """Every instantiation is an exact copy, with a grid that covers n or not, given R zeros."""
    kern = k.load_kernel("simt_and_warps/register_ballast.cu", f"copy_with_ballast<{ballast}>")
    zeros = k.xp.zeros(max(ballast, 1), dtype=k.xp.float32)
    for grid in k.pick(gpu=(1, 13, 2 * k.sm_count, 16 * k.sm_count), cpu=(1, 13, 33)):
        k.check(lambda x, y, n: kern((grid,), (128,), (x, y, n, zeros)), lambda x, n: x,
                inputs={"x": k.rand(n), "n": n}, outputs={"y": (n, np.float32)}, tol=0).raise_if_failed()


@pytest.mark.parametrize("ballast", [8, 224])
def test_copy_with_ballast_uses_its_ballast(k, ballast):
    """With a ballast of ones the guarded store after the loop runs and overwrites y[0] with some
    thread's sum of R products, while every other element is still copied: the kernel really reads
    and keeps its R values (which is why the chapter passes zeros)."""
    cp = k.xp
    kern = k.load_kernel("simt_and_warps/register_ballast.cu", f"copy_with_ballast<{ballast}>")
    n = 4099
    x = cp.asarray(np.random.default_rng(0).uniform(0.5, 1.0, n).astype(np.float32))  # sums >= 4 > x[0]
    y = cp.full(n, np.nan, dtype=cp.float32)
    kern((5,), (128,), (x, y, n, cp.ones(ballast, dtype=cp.float32)))
    got, want = cp.asnumpy(y), cp.asnumpy(x)
    assert np.array_equal(got[1:], want[1:])
    assert got[0] >= 0.5 * ballast and got[0] != want[0]
