"""The "Softmax" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every kernel configuration (each compiled instantiation, several block sizes of the others) is
checked with kernels.check against the float64 NumPy reference on every row length it can hold
among 1, 2, 31, 33, 1000, 4096 and 40000 (and 100000 on a GPU), on every input kind of
kernels.chapters.softmax.AWKWARD_KINDS (random, rows of equal values, +-1e4, entries of -inf, rows entirely
-inf, one spike at the first, last or a random position), in float32 and float16, with matrices
that start on a 16-byte boundary and with input or output views that start one element later
(the one-element path). Outputs are NaN-poisoned, inputs are fresh and must be left unchanged, and
each input kind's rows are compared with the reference on their own; on a GPU a second launch must
also give the same bits. The dispatch rule's kernel, the shared-memory kernel above 48 KiB (the
opt-in), LayerNorm and the flash-attention kernel are checked the same way.

The CPU variant (CI) uses the fewest rows that hold every input kind, and leaves to the GPU variant
the 256-thread blocks of every kernel but softmax_block_cached (their smaller and larger blocks and
every compiled instantiation run on both), the longest rows and the full-size matrices.

The references, models and tolerances are tested on the CPU in tests/test_softmax.py; torch,
occupancy and timing on a GPU in tests/gpu/test_softmax_gpu.py.
"""
from __future__ import annotations

import numpy as np
import pytest
from kernel_backends import gpu_only, gpu_only_case

from kernels.chapters import softmax as sm

SMEM_LIMIT_H100 = 232448       # the most a block may have: which (config, length) pairs to collect
LONG = 40_000                  # a row longer than any register cache, in shared memory with the opt-in
LENGTHS = (1, 2, 31, 33, 1000, 4096, LONG)
GPU_LENGTHS = (100_000,)       # longer than any block's shared memory: re-read from global memory


def configs(dtype: str) -> list[tuple[sm.Config, bool]]:
    """(configuration, checked on the CPU backend too). Every compiled instantiation is checked on
    both backends, and every kernel with 32 threads, an odd number of warps or 1024 threads; the
    block sizes in between add nothing the CPU backend would find and run on the GPU only."""
    found = []
    if dtype == "float32":
        found += [(sm.Config("three_kernels", t), t != 256) for t in (32, 256, 1024)]
        found += [(sm.Config("block_3pass", t), t != 256) for t in (32, 256, 1024)]
    found += [(sm.Config("block_online", t), t != 256) for t in (32, 96, 256, 1024)]
    found += [(sm.Config("block_smem", t), t != 256) for t in (64, 256, 1024)]
    found += [(sm.Config("block_cached", t, i), True) for t, i in sm.BLOCK_CACHED[dtype]]
    found += [(sm.Config("warp_online", t), t != 256) for t in (32, 128, 256)]
    found += [(sm.Config("warp_cached", t, i, r), t == 64) for i, r in sm.WARP_CACHED[dtype] for t in (64, 256)]
    return found


def plannable(config: sm.Config, dtype: str, cols: int, limit: int = SMEM_LIMIT_H100) -> bool:
    try:
        sm.plan(config, rows_for(cols), cols, dtype, limit)
    except ValueError:
        return False
    return True


def rows_for(cols: int) -> int:
    return 3 if cols > 10_000 else 9


def _id(value):
    return value.label if isinstance(value, sm.Config) else str(value)


def _cases() -> list:
    cases = []
    for dtype in ("float32", "float16"):
        for config, on_cpu in configs(dtype):
            for cols in LENGTHS + GPU_LENGTHS:
                if plannable(config, dtype, cols):
                    both = on_cpu and cols in LENGTHS
                    cases.append((dtype, config, cols) if both else gpu_only_case(dtype, config, cols))
    return cases


CASES = _cases()


# Rows per input kind on the CPU backend, which runs every thread of a launch in turn: the fewest
# that hold every case of the kind (all_masked: row 0 is -inf, row 1 is not; spikes: the spike at
# a random position, the last and the first).
CPU_ROWS = {"random": 1, "equal": 1, "large": 1, "neg_inf": 1, "all_masked": 2, "spikes": 3}


def check_config(k, config: sm.Config, dtype: str, cols: int) -> None:
    """Every input kind, aligned and one element off on either side, with kernels.check (which also
    finds an input the kernel changed); on a GPU also the same bits from a second launch.

    The kinds are stacked into one matrix, so each variant is one launch, and each kind's rows are
    compared with the reference as an output of their own: the relative error of one kind's rows
    cannot hide in another's (a row with one spike has a far larger norm than a random row).
    """
    limit = sm.max_shared_per_block()
    if not plannable(config, dtype, cols, limit):
        pytest.skip(f"{config.label} cannot take rows of {cols} {dtype} on this device (shared memory {limit} B)")
    cp = k.xp
    run = sm.Softmax(config)
    tol = sm.softmax_tolerance(cols, sm.threads_per_row(config), dtype)
    counts = k.pick(gpu={kind: rows_for(cols) for kind in sm.AWKWARD_KINDS}, cpu=CPU_ROWS)
    parts = {kind: sm.awkward_matrix(kind, n, cols, dtype) for kind, n in counts.items()}
    x = np.concatenate(list(parts.values()))
    rows = x.shape[0]
    ends = np.cumsum([part.shape[0] for part in parts.values()])
    spans = {f"y_{kind}": (int(end) - part.shape[0], int(end)) for (kind, part), end in zip(parts.items(), ends)}
    outputs = {name: ((hi - lo, cols), dtype) for name, (lo, hi) in spans.items()}

    def split(y, out):
        for name, (lo, hi) in spans.items():
            out[name][...] = y[lo:hi]

    def reference(x):
        ref = sm.softmax_reference(x)
        return {name: ref[lo:hi] for name, (lo, hi) in spans.items()}

    def aligned(x, **out):
        y = cp.full((rows, cols), cp.nan, dtype=dtype)
        run(x, y)
        split(y, out)

    def input_one_later(flat, **out):
        y = cp.full((rows, cols), cp.nan, dtype=dtype)
        run(flat[1:].reshape(rows, cols), y)
        split(y, out)

    def output_one_later(x, head, **out):
        ybuf = cp.full(rows * cols + 1, cp.nan, dtype=dtype)
        ybuf[:1] = 0
        run(x, ybuf[1:].reshape(rows, cols))
        head[...] = ybuf[:1]                                            # nothing written before y
        split(ybuf[1:].reshape(rows, cols), out)

    k.check(aligned, reference, inputs={"x": x}, outputs=outputs, tol=tol).raise_if_failed()
    flat = np.concatenate([np.zeros(1, dtype), x.ravel()])
    k.check(input_one_later, lambda flat: reference(flat[1:].reshape(rows, cols)), inputs={"flat": flat},
            outputs=outputs, tol=tol).raise_if_failed()
    k.check(output_one_later, lambda x: {"head": np.zeros(1), **reference(x)}, inputs={"x": x},
            outputs={"head": ((1,), dtype), **outputs}, tol=tol).raise_if_failed()
    if k.on_cpu:
        return                          # the CPU backend runs the threads in one order: same bits
    x = cp.asarray(sm.awkward_matrix("random", rows_for(cols), cols, dtype))
    y1, y2 = cp.empty_like(x), cp.empty_like(x)
    run(x, y1)
    run(x, y2)
    bits = cp.uint16 if dtype == "float16" else cp.uint32
    assert bool((y1.view(bits) == y2.view(bits)).all())


def test_every_unbounded_kernel_is_checked_on_most_lengths():
    """The kernels that take any row length are collected on (nearly) every length."""
    for dtype in ("float32", "float16"):
        for config, _ in configs(dtype):
            if config.kind not in ("block_cached", "warp_cached"):
                assert sum(plannable(config, dtype, cols) for cols in LENGTHS) >= 6, config.label
    assert {case[1].kind for case in CASES if not hasattr(case, "marks")} == set(sm.KINDS)   # all on the CPU


@pytest.mark.parametrize("dtype,config,cols", CASES, ids=_id)
def test_config_on_awkward_inputs(k, dtype, config, cols):
    check_config(k, config, dtype, cols)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("cols", [1, 2, 31, 33, 128, 129, 1000, 1024, 1025, 4096, 16385, 32768, LONG,
                                  *gpu_only(100_000)])
def test_dispatch_rule_on_awkward_inputs(k, dtype, cols):
    check_config(k, sm.choose_config(cols, dtype, sm.max_shared_per_block()), dtype, cols)


def test_large_rows_in_shared_memory_with_opt_in(k):
    """softmax_block_smem above 48 KiB of dynamic shared memory (the opt-in), where the device allows."""
    limit = sm.max_shared_per_block()
    for cols in (16_384, 32_768, 50_000):
        config = sm.Config("block_smem", 1024)
        try:
            sm.plan(config, 2, cols, "float32", limit)
        except ValueError:
            pytest.skip(f"this GPU gives a block {limit} bytes of shared memory")
        check_config(k, config, "float32", cols)


@pytest.mark.parametrize("rows", [9, *gpu_only(4096)])
def test_full_size_check_helpers(k, rows):
    """reference_on_gpu and check_on_gpu, which check the chapter's full-size matrices where they are."""
    cp = k.xp
    x = cp.random.uniform(-1, 1, (rows, 4096), dtype=cp.float32)
    ref = sm.reference_on_gpu(x, cp.float64, chunk_elements=rows * 4096 // 4)   # a few slices
    host = sm.softmax_reference(cp.asnumpy(x))
    assert np.allclose(cp.asnumpy(ref), host, rtol=1e-12, atol=0)
    run = sm.Softmax(sm.choose_config(4096))
    err = sm.check_on_gpu(run, x, ref, sm.softmax_tolerance(4096, 256))
    assert err < 1e-6
    with pytest.raises(AssertionError):
        sm.check_on_gpu(lambda x, y: None, x, ref, 1e-3)             # nothing written: NaN stays


def test_all_masked_rows_are_zeros(k):
    cp = k.xp
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


def _near(center: float, shape) -> np.ndarray:
    """Fresh float32 values uniform in [center - 1, center + 1)."""
    return np.random.default_rng().uniform(center - 1, center + 1, shape).astype(np.float32)


def _mean_over_std(rows: np.ndarray) -> float:
    """The largest |mean| / std of the rows, for the tolerance.

    It must be the drawn rows' own ratio: with few columns a row's spread can be far below the
    distribution's (two values may land close together), and the rounding of the mean is amplified
    by |mean| / std whatever the algorithm.
    """
    x = rows.astype(np.float64)
    return float((np.abs(x.mean(axis=1)) / np.sqrt(x.var(axis=1) + 1e-5)).max())


@pytest.mark.parametrize("cols", [1, 2, 31, 33, 1000, 4096, LONG, *gpu_only(100_000)])
def test_layernorm(k, cols):
    rows = rows_for(cols)
    for threads in (32, 256, 1024):
        norm = sm.LayerNorm(threads)
        for center in (0.0, 1000.0):
            x = _near(center, (rows, cols))
            k.check(lambda x, gamma, beta, y: norm(x, gamma, beta, y, 1e-5),
                    lambda x, gamma, beta: sm.layernorm_reference(x, gamma, beta, 1e-5),
                    inputs={"x": x,
                            "gamma": k.rand(cols, np.float32, 0.5, 1.5), "beta": k.rand(cols, np.float32, -1, 1)},
                    outputs={"y": ((rows, cols), np.float32)},
                    tol=sm.layernorm_tolerance(cols, threads, _mean_over_std(x))).raise_if_failed()
            flat = _near(center, rows * cols + 1)
            k.check(lambda flat, gamma, beta, y: norm(flat[1:].reshape(rows, cols), gamma, beta, y, 1e-5),
                    lambda flat, gamma, beta: sm.layernorm_reference(flat[1:].reshape(rows, cols), gamma, beta,
                                                                     1e-5),
                    inputs={"flat": flat,
                            "gamma": k.rand(cols, np.float32, 0.5, 1.5), "beta": k.rand(cols, np.float32, -1, 1)},
                    outputs={"y": ((rows, cols), np.float32)},
                    tol=sm.layernorm_tolerance(cols, threads, _mean_over_std(flat[1:].reshape(rows, cols)))
                    ).raise_if_failed()


def test_layernorm_of_a_constant_row_is_beta(k):
    cp = k.xp
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


@pytest.mark.parametrize("n", [256, *gpu_only(1024)])
def test_flash_attention_matches_naive_attention(k, n):
    cp = k.xp
    q, kk, v = (cp.random.uniform(-1, 1, (n, 64), dtype=cp.float32) for _ in range(3))
    o = cp.empty_like(q)
    for causal in (False, True):
        sm.FlashAttention()(q, kk, v, o, causal)
        naive = sm.naive_attention(q, kk, v, causal)
        assert float(cp.abs(o - naive).max() / cp.abs(naive).max()) < 1e-4


TWICE_WELFORD = r'''
#include "softmax/layernorm.cu"
// Two block reductions in one kernel, as a fused kernel would call them: the second call's
// per_warp writes must not reach the first call's reads.
extern "C" __global__ void two_welfords(const float* a, const float* b, float* out, int n)
{
    Welford wa = {0.0f, 0.0f, 0.0f}, wb = {0.0f, 0.0f, 0.0f};
    for (int j = threadIdx.x; j < n; j += blockDim.x) { welford_add(wa, a[j]); welford_add(wb, b[j]); }
    wa = block_welford(wa);
    wb = block_welford(wb);
    if (threadIdx.x == 0) { out[0] = wa.mean; out[1] = wb.mean; }
    if (threadIdx.x == blockDim.x - 1) { out[2] = wa.mean; out[3] = wb.mean; }
}
'''


@pytest.mark.parametrize("threads", [64, 256, 1024])
def test_block_welford_can_be_called_twice_in_one_kernel(k, threads):
    """block_welford reuses its shared scratch: it must end with a barrier, or a second call in the
    same kernel overwrites per-warp states that slower warps of the first call still read."""
    cp = k.xp
    n = 4 * threads
    rng = np.random.default_rng(threads)
    a = cp.asarray(rng.uniform(-1, 1, n).astype(np.float32))
    b = cp.asarray(rng.uniform(100, 101, n).astype(np.float32))   # means far apart: a mix-up shows
    out = cp.full(4, np.nan, dtype=cp.float32)
    kernel = k.load_kernel(TWICE_WELFORD, "two_welfords")
    kernel((1,), (threads,), (a, b, out, np.int32(n)))
    got = cp.asnumpy(out)
    if k.on_cpu:  # the CPU backend's threads switch at barriers and shuffles: the race detector sees it
        from kernels.traffic.probe import traced_findings

        races, _ = traced_findings(lambda: kernel((1,), (threads,), (a, b, cp.empty_like(out), np.int32(n))))
        assert not races, races
    for column, x in ((0, a), (1, b)):
        x64 = cp.asnumpy(x).astype(np.float64)
        # each of the n Welford/Chan steps moves the float32 mean by at most a few roundings of
        # max|x|: n * 2u * max|x| bounds the error; a mix-up of the two means is off by about 100
        bound = n * 2 * 2.0**-24 * np.abs(x64).max()
        assert np.all(np.abs(got[[column, column + 2]] - x64.mean()) <= bound), (got, x64.mean(), bound)
