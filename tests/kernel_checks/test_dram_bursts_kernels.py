"""The "DRAM bursts" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every kernel is checked with kernels.check against a float64 NumPy reference (a copy: the input
itself), on fresh random inputs, with sizes that are not multiples of the block, the grid or K
(1 and primes included), and poisoned outputs.
"""
from __future__ import annotations

import numpy as np
import pytest
from kernel_backends import gpu_only

BLOCK = 256
SIZES = [1, *gpu_only(3), 5, *gpu_only(255), 257, *gpu_only(1021), 100_003]
TYPES = {"unsigned char": (np.uint8, 1), "unsigned short": (np.uint16, 1), "float": (np.float32, 1),
         "float2": (np.float32, 2), "float4": (np.float32, 4)}
LOADS = [1, 2, 4, 8]


def copy_reference(x, n):
    return x



def _inputs(k, n, dtype, comps):
    if np.issubdtype(dtype, np.integer):
        return k.rand(n * comps, dtype, 0, np.iinfo(dtype).max)
    return k.rand(n * comps, dtype)


@pytest.mark.parametrize("ctype", list(TYPES))
@pytest.mark.parametrize("loads", LOADS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("blocks", [1, 3])
def test_copy_batched(k, ctype, loads, n, blocks):
    kernel = k.load_kernel("dram_bursts/copy_batched.cu", f"copy_batched<{ctype}, {loads}>")
    dtype, comps = TYPES[ctype]
    grid = blocks * k.sm_count
    report = k.check(lambda x, y, n: kernel((grid,), (BLOCK,), (x, y, n)), copy_reference,
                     inputs={"x": _inputs(k, n, dtype, comps), "n": n},
                     outputs={"y": (n * comps, dtype)}, tol=0)
    assert report, str(report)


@pytest.mark.parametrize("n", SIZES + [4, 8, *gpu_only(1_000_003)])
@pytest.mark.parametrize("grid", [1, 7, 264])
def test_copy_vec4(k, n, grid):
    kernel = k.load_kernel("dram_bursts/copy_vec4.cu", "copy_vec4")
    report = k.check(lambda x, y, n: kernel((grid,), (BLOCK,), (x, y, n)), copy_reference,
                     inputs={"x": k.rand(n), "n": n}, outputs={"y": (n, np.float32)}, tol=0)
    assert report, str(report)


def test_copy_batched_from_an_offset(k):
    """A misaligned start (a view 4 bytes into the array) is fine for scalar loads."""
    cp = k.xp
    kernel = k.load_kernel("dram_bursts/copy_batched.cu", "copy_batched<float, 4>")
    x = cp.random.random(10_000, dtype=cp.float32)
    y = cp.full_like(x, cp.nan)
    n = 9_001
    kernel((3,), (BLOCK,), (x[1:1 + n], y[1:1 + n], n))
    np.testing.assert_array_equal(y[1:1 + n].get(), x[1:1 + n].get())
    assert np.isnan(y[0].get()) and np.isnan(y[1 + n].get())


def test_copy_vec4_from_a_misaligned_view_is_an_error(k):
    """float4 loads need 16-byte aligned addresses; x + 1 is not. The chapter checks the addresses
    in Python before launching; on the CPU backend a launch without that check faults instead of
    returning garbage (on a GPU: a misaligned-address error)."""
    if not k.on_cpu:
        pytest.skip("on a GPU the error poisons the CUDA context; the chapter avoids the launch")
    from kernels.cpu import KernelFault

    cp = k.xp
    kernel = k.load_kernel("dram_bursts/copy_vec4.cu", "copy_vec4")
    x = cp.arange(1 + 4096, dtype=cp.float32)
    y = cp.zeros(4096, dtype=cp.float32)
    try:
        kernel((2,), (BLOCK,), (x[1:], y, 4096))
    except KernelFault as e:
        assert "copy_vec4" in str(e) and e.line == 27
    else:  # the compiler used unaligned vector loads: then the copy must at least be right
        assert bool(cp.array_equal(y, x[1:]))
