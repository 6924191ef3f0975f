"""GPU tests of the "Asynchrony" chapter: streams, graphs and errors.

The chunked multi-stream pipeline must give exactly the serial result; a captured graph must replay
every launch and see new parameters written to its buffer; the sticky error is produced only in a
subprocess. The kernels' correctness is checked on every backend in
tests/kernel_checks/test_asynchrony_kernels.py.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

BLOCK = 256
A, B = float(np.float32(0.9999)), float(np.float32(0.0001))


def fma_reference(x, n, iters):
    acc = x.copy()
    for _ in range(iters):
        acc = acc * A + B
    return acc


def _pipeline(k, cp, h_in, h_out, d_in, d_out, iters, n_streams, chunks, streams):
    from kernels.chapters import asynchrony as ay

    kernel = k.load_kernel("asynchrony/fma_chain.cu", "fma_chain")
    rt = cp.cuda.runtime
    main = cp.cuda.get_current_stream()
    fork = main.record()
    for s in streams[:n_streams]:
        s.wait_event(fork)
    for c, (lo, hi) in enumerate(ay.chunk_bounds(h_in.size, chunks)):
        s = streams[c % n_streams]
        n, off = hi - lo, 4 * lo
        rt.memcpyAsync(d_in.data.ptr + off, h_in.ctypes.data + off, 4 * n, rt.memcpyHostToDevice, s.ptr)
        kernel((k.ceil_div(n, BLOCK),), (BLOCK,), (d_in[lo:hi], d_out[lo:hi], n, iters), stream=s)
        rt.memcpyAsync(h_out.ctypes.data + off, d_out.data.ptr + off, 4 * n, rt.memcpyDeviceToHost, s.ptr)
    for s in streams[:n_streams]:
        main.wait_event(s.record())
    cp.cuda.Device().synchronize()
    return h_out.copy()


@pytest.mark.parametrize("n_streams,chunks", [(1, 1), (1, 7), (2, 5), (3, 16), (4, 64)])
def test_pipeline_equals_serial_and_reference(k, n_streams, chunks):
    import cupy as cp
    import cupyx

    n = 1_000_003
    iters = 50
    h_in = cupyx.empty_pinned(n, dtype=np.float32)
    h_in[:] = np.random.default_rng(3).uniform(-1, 1, n).astype(np.float32)
    h_out = cupyx.empty_pinned(n, dtype=np.float32)
    d_in, d_out = cp.empty(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(4)]
    h_out[:] = np.nan
    serial = _pipeline(k, cp, h_in, h_out, d_in, d_out, iters, 1, 1, streams)
    h_out[:] = np.nan
    d_out.fill(np.nan)
    piped = _pipeline(k, cp, h_in, h_out, d_in, d_out, iters, n_streams, chunks, streams)
    assert np.array_equal(piped, serial)
    np.testing.assert_allclose(serial, fma_reference(h_in.astype(np.float64), n, iters), rtol=0, atol=1e-5)


def test_graph_replays_every_launch_and_sees_new_parameters(k):
    import cupy as cp

    add_one = k.load_kernel("asynchrony/add_one.cu", "add_one")
    affine = k.load_kernel("asynchrony/affine_from_buffer.cu", "affine_from_buffer")
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(1001, dtype=cp.float32)
    with s:
        s.begin_capture()
        for _ in range(17):
            add_one((k.ceil_div(x.size, BLOCK),), (BLOCK,), (x, x.size))
        graph = s.end_capture()
    assert float(x.max()) == 0.0                     # capture runs nothing
    for _ in range(3):
        graph.launch(s)
    s.synchronize()
    assert bool((x == 51).all())

    n = 100_003
    xs = cp.asarray(np.random.default_rng(4).uniform(-1, 1, n).astype(np.float32))
    ys = cp.empty_like(xs)
    coeffs = cp.zeros(2, dtype=cp.float32)
    with s:
        s.begin_capture()
        affine((k.ceil_div(n, BLOCK),), (BLOCK,), (xs, ys, coeffs, n))
        g2 = s.end_capture()
    ref = xs.get().astype(np.float64)
    for a, b in ((2.0, 1.0), (-0.5, 0.25)):
        coeffs.set(np.array([a, b], dtype=np.float32), stream=s)
        g2.launch(s)
        s.synchronize()
        np.testing.assert_allclose(ys.get(), a * ref + b, rtol=1e-6, atol=1e-6)


def test_illegal_address_is_sticky_in_a_subprocess(k):
    script = textwrap.dedent('''
        import cupy as cp, numpy as np
        gather = cp.RawKernel(SOURCE, "gather")
        n = 1000
        x = cp.arange(n, dtype=cp.float32); y = cp.empty_like(x)
        idx = cp.arange(n, dtype=cp.int64); idx[7] = 1 << 40
        cp.cuda.Device().synchronize()
        gather((4,), (256,), (x, idx, y, np.int32(n)))
        print("launch returned", flush=True)
        try:
            cp.cuda.Device().synchronize()
            print("sync ok", flush=True)
        except Exception as e:
            print("sync failed:", type(e).__name__, e, flush=True)
        try:
            float(cp.ones(10).sum())
            print("later call ok", flush=True)
        except Exception as e:
            print("later call failed:", type(e).__name__, e, flush=True)
    ''').replace("SOURCE", repr(k.source("asynchrony/gather.cu")))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    out = done.stdout
    assert "launch returned" in out, done.stderr
    assert "sync failed" in out and "later call failed" in out, out + done.stderr
