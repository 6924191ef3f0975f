"""The "Measuring kernels" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every kernel is checked with kernels.check against a float64 NumPy reference, on fresh random inputs,
with sizes that are not multiples of the block size and NaN-poisoned outputs. The references live here
(and are tested against plain Python loops on the CPU in tests/test_measuring_kernels.py).
"""
from __future__ import annotations

import numpy as np
import pytest

BLOCK = 256
SIZES = [1, 255, 257, 1000, 100_003]
WINDOW = 16
VARIANCE_WINDOW = 64


# --------------------------------------------------------------------------- references (float64)


def copy_reference(x, n):
    return x


def poly_reference(x, n, k):
    """Horner's rule as poly_horner does it: acc = 1, then k times acc = acc * x + 0.5."""
    acc = np.ones_like(x)
    for _ in range(int(k)):
        acc = acc * x + 0.5
    return acc


def window_reference(x, n, s):
    """y[i] = sum_m x[(i + m) % n] * (((m - s) mod 16) + 1)."""
    n = int(n)
    idx = (np.arange(n)[:, None] + np.arange(WINDOW)[None, :]) % n
    weights = ((np.arange(WINDOW) - int(s)) % WINDOW) + 1
    return (x[idx] * weights).sum(axis=1)


def variance_reference(x, n):
    """Population variance of x[i], x[i+1], ..., x[i+63] (indices mod n)."""
    n = int(n)
    idx = (np.arange(n)[:, None] + np.arange(VARIANCE_WINDOW)[None, :]) % n
    return x[idx].var(axis=1)


def scale_reference(x, n):
    return 2 * x


# --------------------------------------------------------------------------- helpers



# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("n", SIZES)
def test_copy(k, n):
    kernel = k.load_kernel("measuring_kernels/copy.cu", "copy_f32")
    report = k.check(lambda x, y, n: kernel((k.ceil_div(n, BLOCK),), (BLOCK,), (x, y, n)), copy_reference,
                     inputs={"x": k.rand(n), "n": n}, outputs={"y": (n, np.float32)}, tol=0)
    assert report, str(report)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("degree", [0, 1, 17, 1024])
def test_poly_horner(k, n, degree):
    kernel = k.load_kernel("measuring_kernels/poly.cu", "poly_horner")
    report = k.check(lambda x, y, n, kk: kernel((k.ceil_div(n, BLOCK),), (BLOCK,), (x, y, n, kk)),
                     lambda x, n, kk: poly_reference(x, n, kk),
                     inputs={"x": k.rand(n, low=-0.9, high=0.9), "n": n, "kk": degree},
                     outputs={"y": (n, np.float32)}, tol=1e-5)
    assert report, str(report)


@pytest.mark.parametrize("name", ["window_dynamic", "window_static"])
@pytest.mark.parametrize("n", [16, 257, 1000, 100_003])
@pytest.mark.parametrize("shift", [0, 5, 15, 16, 37])
def test_window(k, name, n, shift):
    kernel = k.load_kernel("measuring_kernels/local_array.cu", name)
    report = k.check(lambda x, y, n, s: kernel((k.ceil_div(n, BLOCK),), (BLOCK,), (x, y, n, s)),
                     window_reference, inputs={"x": k.rand(n), "n": n, "s": shift},
                     outputs={"y": (n, np.float32)}, tol=1e-5)
    assert report, str(report)


@pytest.mark.parametrize("name", ["window_variance", "window_variance_bounded"])
@pytest.mark.parametrize("n", [64, 257, 1000, 100_003])
@pytest.mark.parametrize("block", [128, 256])
def test_window_variance(k, name, n, block):
    kernel = k.load_kernel("measuring_kernels/spill.cu", name)
    report = k.check(lambda x, y, n: kernel((k.ceil_div(n, block),), (block,), (x, y, n)),
                     variance_reference, inputs={"x": k.rand(n), "n": n},
                     outputs={"y": (n, np.float32)}, tol=1e-5)
    assert report, str(report)


def test_window_variance_bounded_refuses_large_blocks(k):
    """__launch_bounds__(256, 4) is a promise: a 512-thread block must not launch."""
    cp = k.xp
    kernel = k.load_kernel("measuring_kernels/spill.cu", "window_variance_bounded")
    x = cp.zeros(1000, dtype=cp.float32)
    y = cp.zeros_like(x)
    with pytest.raises(Exception):
        kernel((2,), (512,), (x, y, 1000))
        cp.cuda.Device().synchronize()


def test_off_by_one_passes_check_on_a_gpu_and_faults_on_the_cpu_backend(k):
    """The chapter's point: the out-of-bounds element is invisible to an output check.

    On a GPU, n = 1000 floats is 4000 bytes; the memory pool rounds allocations up to 512 bytes, so
    the stray access at index n stays inside this array's own padding and harms nothing. The CPU
    backend puts inaccessible memory right after every array (n * 4 bytes is a multiple of 16, so
    there is no padding), so the read of x[n] stops the kernel with the thread and the line.
    """
    kernel = k.load_kernel("measuring_kernels/off_by_one.cu", "scale_off_by_one")
    n = 1000

    def run():
        return k.check(lambda x, y, n: kernel((k.ceil_div(n, BLOCK),), (BLOCK,), (x, y, n)), scale_reference,
                       inputs={"x": k.rand(n), "n": n}, outputs={"y": (n, np.float32)}, tol=0)

    if not k.on_cpu:
        report = run()
        assert report, str(report)
        return
    from kernels.cpu import OutOfBoundsAccess

    with pytest.raises(OutOfBoundsAccess) as e:
        run()
    assert "x[1000]" in str(e.value) and e.value.thread == (232, 0, 0) and e.value.block == (3, 0, 0)
    assert e.value.file == "measuring_kernels/off_by_one.cu" and e.value.line == 15
