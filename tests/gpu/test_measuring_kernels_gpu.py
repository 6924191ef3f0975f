"""GPU tests of the "Measuring kernels" chapter that need a GPU's timing (L2 flushing).

The kernels' correctness is checked on every backend in
tests/kernel_checks/test_measuring_kernels_kernels.py.
"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

BLOCK = 256


def test_l2_flush_changes_small_copy_bandwidth(k):
    """A working set far below L2 is faster with L2 warm than flushed (the chapter's sweep)."""
    import cupy as cp

    kernel = k.load_kernel("measuring_kernels/copy.cu", "copy_f32")
    l2 = k.device_info().l2_bytes
    m = max(l2 // 4 // 8, 1 << 16)  # input + output = a quarter of L2
    x = cp.ones(m, dtype=cp.float32)
    y = cp.empty_like(x)
    run = lambda: kernel((k.ceil_div(m, BLOCK),), (BLOCK,), (x, y, m))  # noqa: E731
    warm = k.benchmark(run, repeat=50, flush_l2=False)
    cold = k.benchmark(run, repeat=50, flush_l2=True)
    assert warm.median_ms <= cold.median_ms * 1.05, (warm, cold)
