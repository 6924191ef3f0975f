"""GPU tests of the kernels of the "Softmax" chapter.

Every kernel configuration (each compiled instantiation, several block sizes of the others) is
checked with kernels.check against the float64 NumPy reference on every row length it can hold
among 1, 2, 31, 33, 1000 and 100000, on every input kind of kernels.softmax.AWKWARD_KINDS (random,
rows of equal values, +-1e4, entries of -inf, rows entirely -inf, one spike at the first, last or a
random position), in float32 and float16, with matrices that start on a 16-byte boundary and with
input or output views that start one element later. Outputs are NaN-poisoned; inputs are fresh.
LayerNorm and the flash-attention kernel are checked the same way; torch, where installed, is
compared on ordinary inputs and on the all -inf row whose convention differs.
"""
from __future__ import annotations

import numpy as np
import pytest

from kernels import softmax as sm

pytestmark = pytest.mark.gpu

LENGTHS = (1, 2, 31, 33, 1000, 100_000)
SMEM_LIMIT_H100 = 232448


def configs(dtype: str) -> list[sm.Config]:
    found = []
    if dtype == "float32":
        found += [sm.Config("three_kernels", t) for t in (32, 256, 1024)]
        found += [sm.Config("block_3pass", t) for t in (32, 256, 1024)]
    found += [sm.Config("block_online", t) for t in (32, 96, 256, 1024)]
    found += [sm.Config("block_smem", t) for t in (64, 256, 1024)]
    found += [sm.Config("block_cached", t, i) for t, i in sm.BLOCK_CACHED[dtype]]
    found += [sm.Config("warp_online", t) for t in (32, 128, 256)]
    found += [sm.Config("warp_cached", t, i, r) for i, r in sm.WARP_CACHED[dtype] for t in (64, 256)]
    return found


ALL = [(dtype, c) for dtype in ("float32", "float16") for c in configs(dtype)]


def rows_for(cols: int) -> int:
    return 3 if cols > 10_000 else 9


def check_config(k, config: sm.Config, dtype: str, cols: int) -> None:
    import cupy as cp

    run = sm.Softmax(config)
    rows = rows_for(cols)
    tol = sm.softmax_tolerance(cols, sm.threads_per_row(config), dtype)
    for kind in sm.AWKWARD_KINDS:
        x = sm.awkward_matrix(kind, rows, cols, dtype)
        k.check(run, sm.softmax_reference, inputs={"x": x}, outputs={"y": ((rows, cols), dtype)},
                tol=tol).raise_if_failed()
        flat = np.concatenate([np.zeros(1, dtype), x.ravel()])          # input one element later
        k.check(lambda flat, y: run(flat[1:].reshape(rows, cols), y),
                lambda flat: sm.softmax_reference(flat[1:].reshape(rows, cols)),
                inputs={"flat": flat}, outputs={"y": ((rows, cols), dtype)}, tol=tol).raise_if_failed()

        def shifted_output(x, ybuf):                                    # output one element later
            ybuf[:1] = 0
            run(x, ybuf[1:].reshape(rows, cols))
        k.check(shifted_output, lambda x: np.concatenate([[0.0], sm.softmax_reference(x).ravel()]),
                inputs={"x": x}, outputs={"ybuf": ((rows * cols + 1,), dtype)}, tol=tol).raise_if_failed()
    # the input is read-only, and a second launch gives the same bits
    x = cp.asarray(sm.awkward_matrix("random", rows, cols, dtype))
    y1, y2 = cp.empty_like(x), cp.empty_like(x)
    before = x.copy()
    run(x, y1)
    run(x, y2)
    assert bool((x == before).all())
    assert bool((y1.view(cp.uint16 if dtype == "float16" else cp.uint32) ==
                 y2.view(cp.uint16 if dtype == "float16" else cp.uint32)).all())


@pytest.mark.parametrize("dtype,config", ALL, ids=lambda v: v.label if isinstance(v, sm.Config) else v)
def test_config_on_awkward_inputs(k, dtype, config):
    limit = sm.max_shared_per_block()
    tried = 0
    for cols in LENGTHS:
        try:
            sm.plan(config, rows_for(cols), cols, dtype, limit)
        except ValueError:
            continue
        check_config(k, config, dtype, cols)
        tried += 1
    if config.kind not in ("block_cached", "warp_cached"):
        assert tried >= 5                      # the unbounded kernels ran on (nearly) every length


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("cols", LENGTHS + (128, 129, 1024, 1025, 4096, 16385, 32768))
def test_dispatch_rule_on_awkward_inputs(k, dtype, cols):
    check_config(k, sm.choose_config(cols, dtype, sm.max_shared_per_block()), dtype, cols)


def test_large_rows_in_shared_memory_with_opt_in(k):
    """softmax_block_smem above 48 KiB of dynamic shared memory (the opt-in), where the GPU allows."""
    limit = sm.max_shared_per_block()
    for cols in (16_384, 32_768, 50_000):
        config = sm.Config("block_smem", 1024)
        try:
            sm.plan(config, 2, cols, "float32", limit)
        except ValueError:
            pytest.skip(f"this GPU gives a block {limit} bytes of shared memory")
        check_config(k, config, "float32", cols)


def test_full_size_check_helpers(k):
    import cupy as cp

    x = cp.random.uniform(-1, 1, (4096, 4096), dtype=cp.float32)
    ref = sm.reference_on_gpu(x, cp.float64, chunk_elements=2**20)
    host = sm.softmax_reference(cp.asnumpy(x))
    assert np.allclose(cp.asnumpy(ref), host, rtol=1e-12, atol=0)
    run = sm.Softmax(sm.choose_config(4096))
    err = sm.check_on_gpu(run, x, ref, sm.softmax_tolerance(4096, 256))
    assert err < 1e-6
    with pytest.raises(AssertionError):
        sm.check_on_gpu(lambda x, y: None, x, ref, 1e-3)             # nothing written: NaN stays


def test_all_masked_rows_are_zeros(k):
    import cupy as cp

    for dtype in ("float32", "float16"):
        for cols in (1, 7, 128, 4096, 40_000):
            x = cp.full((4, cols), -cp.inf, dtype=dtype)
            x[1, cols // 2] = 3.0
            y = cp.full_like(x, cp.nan)
            sm.Softmax(sm.choose_config(cols, dtype, sm.max_shared_per_block()))(x, y)
            host = cp.asnumpy(y).astype(np.float64)
            assert not np.isnan(host).any()
            assert (host[[0, 2, 3]] == 0).all()
            assert host[1, cols // 2] == 1.0 and host[1].sum() == 1.0


def test_layernorm(k):
    import cupy as cp

    for threads in (32, 256, 1024):
        norm = sm.LayerNorm(threads)
        for cols in (1, 2, 31, 33, 1000, 4096, 100_000):
            rows = rows_for(cols)
            for center in (0.0, 1000.0):
                tol = sm.layernorm_tolerance(cols, threads, center / 0.5)
                k.check(lambda x, gamma, beta, y: norm(x, gamma, beta, y, 1e-5),
                        lambda x, gamma, beta: sm.layernorm_reference(x, gamma, beta, 1e-5),
                        inputs={"x": k.rand((rows, cols), np.float32, center - 1, center + 1),
                                "gamma": k.rand(cols, np.float32, 0.5, 1.5), "beta": k.rand(cols, np.float32, -1, 1)},
                        outputs={"y": ((rows, cols), np.float32)}, tol=tol).raise_if_failed()
                k.check(lambda flat, gamma, beta, y: norm(flat[1:].reshape(rows, cols), gamma, beta, y, 1e-5),
                        lambda flat, gamma, beta: sm.layernorm_reference(flat[1:].reshape(rows, cols), gamma, beta,
                                                                         1e-5),
                        inputs={"flat": k.rand(rows * cols + 1, np.float32, center - 1, center + 1),
                                "gamma": k.rand(cols, np.float32, 0.5, 1.5), "beta": k.rand(cols, np.float32, -1, 1)},
                        outputs={"y": ((rows, cols), np.float32)}, tol=tol).raise_if_failed()
    x = cp.full((2, 64), 5.0, dtype=cp.float32)                        # zero variance: y = beta
    beta = cp.arange(64, dtype=cp.float32)
    y = cp.empty_like(x)
    sm.LayerNorm()(x, cp.ones(64, cp.float32), beta, y)
    assert bool((y == beta).all())


@pytest.mark.parametrize("d", sm.FLASH_HEAD_DIMS)
def test_flash_attention(k, d):
    flash = sm.FlashAttention()
    for n_q, n_k in ((1, 1), (1, 40), (31, 31), (33, 33), (100, 100), (20, 70), (70, 20), (257, 300)):
        for causal in (False, True):
            k.check(lambda q, kk, v, o: flash(q, kk, v, o, causal),
                    lambda q, kk, v: sm.attention_reference(q, kk, v, causal),
                    inputs={"q": k.rand((n_q, d)), "kk": k.rand((n_k, d)), "v": k.rand((n_k, d))},
                    outputs={"o": ((n_q, d), np.float32)}, tol=sm.attention_tolerance(n_k, d)).raise_if_failed()


def test_flash_attention_matches_naive_attention(k):
    import cupy as cp

    q, kk, v = (cp.random.uniform(-1, 1, (1024, 64), dtype=cp.float32) for _ in range(3))
    o = cp.empty_like(q)
    for causal in (False, True):
        sm.FlashAttention()(q, kk, v, o, causal)
        naive = sm.naive_attention(q, kk, v, causal)
        assert float(cp.abs(o - naive).max() / cp.abs(naive).max()) < 1e-4


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
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch does not see the GPU")
    import cupy as cp

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
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch does not see the GPU")
    import cupy as cp

    seen = []
    runner = sm.on_cupy_stream(lambda: seen.append(torch.cuda.current_stream().cuda_stream))
    runner()
    with cp.cuda.Stream(non_blocking=True) as stream:
        runner()
    assert seen == [cp.cuda.Stream.null.ptr, stream.ptr]
