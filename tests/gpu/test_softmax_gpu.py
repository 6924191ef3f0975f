"""GPU tests of the "Softmax" chapter: what only a GPU has.

torch.softmax (where installed) against the kernels on ordinary inputs and on the all -inf row
whose convention differs, torch on CuPy's CUDA stream, CUDA's occupancy calculator behind
Softmax.blocks_per_sm, and the sweep's measure function, which times. The kernels' correctness
on awkward inputs, on the GPU and on the CPU backend, is checked in
tests/kernel_checks/test_softmax_kernels.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from kernels.chapters import softmax as sm

pytestmark = pytest.mark.gpu


def _torch():
    """torch, or a skip naming why not: absent, broken (an install can fail inside its own import
    with something other than ImportError), or blind to the GPU."""
    try:
        import torch
    except Exception as exc:                                            # noqa: BLE001
        pytest.skip(f"torch does not import here: {type(exc).__name__}: {exc}")
    if not torch.cuda.is_available():
        pytest.skip("torch does not see the GPU")
    return torch


def test_blocks_per_sm_from_the_occupancy_calculator(k):
    """A 128 KiB row in shared memory leaves room for one block per SM; 256-thread register-cached
    blocks fit several; the answer never exceeds what the threads allow."""
    limit = sm.max_shared_per_block()
    smem = sm.Softmax(sm.Config("block_smem", 1024))
    if sm.smem_bytes(32768, np.float32) + sm.STATIC_SHARED_BYTES <= limit:
        assert smem.blocks_per_sm(4096, 32768) == 1
    cached = sm.Softmax(sm.choose_config(4096, np.float32, limit))
    per_sm = cached.blocks_per_sm(65536, 4096)
    assert 1 <= per_sm <= k.device_info().max_threads_per_sm // cached.config.threads
    assert sm.Softmax(sm.Config("block_online", 1024)).blocks_per_sm(4096, 32768) >= 1


def test_sweep_measure_point(k):
    measure = sm.sweep_measure(copy_gbps=1000.0, max_elements=2**20)
    for kernel in ("warp_cached", "block_cached", "block_online", "dispatch", "library"):
        point = measure(kernel, 64, 512)
        assert point["GB/s"] > 0 and point["time_ms"] > 0 and point["config"]
    with pytest.raises(ValueError):
        measure("warp_cached", 4, 4096)                                # a warp cannot hold the row
    with pytest.raises(ValueError):
        measure("block_online", 2**12, 2**12)                          # over the element budget


def test_torch_agrees_and_differs_only_on_masked_rows(k):
    torch = _torch()
    cp = k.array_module()

    for dtype, cols in (("float32", 128), ("float32", 4096), ("float32", 32768), ("float16", 4096)):
        x = cp.random.uniform(-3, 3, (64, cols), dtype=cp.float32).astype(dtype)
        y = cp.empty_like(x)
        sm.Softmax(sm.choose_config(cols, dtype, sm.max_shared_per_block()))(x, y)
        name, fn = sm.library_softmax(x)
        assert name == "torch.softmax"
        theirs = cp.asarray(fn()).astype(cp.float64)
        assert float(cp.abs(y.astype(cp.float64) - theirs).max()) < (1e-6 if dtype == "float32" else 1e-3)
    assert "nan" in sm.torch_on_all_masked_row().lower()


def test_on_cupy_stream_runs_torch_on_cupys_stream(k):
    torch = _torch()
    cp = k.array_module()

    seen = []
    runner = sm.on_cupy_stream(lambda: seen.append(torch.cuda.current_stream().cuda_stream))
    runner()
    with cp.cuda.Stream(non_blocking=True) as stream:
        runner()
    assert seen == [cp.cuda.Stream.null.ptr, stream.ptr]
