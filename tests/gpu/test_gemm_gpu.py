"""GPU tests of the kernels of the "GEMM" chapter.

Every rung, and several configurations of each sweepable kernel, is checked with kernels.check (via
kernels.chapters.gemm.check_gemm) against a float64 NumPy reference on fresh random inputs and awkward
shapes: 1 x 1 x 1, primes, sizes just past multiples of 4, 8, 16, 32 and 128, non-square shapes.
With beta = 0 the output starts as NaN and must come back finite and right (C is never read); with
general alpha and beta the old C is used. The tolerance is the rounding-error bound of the drawn
inputs (kernels.chapters.gemm.gemm_error_bound); fp16 tensor-core kernels are compared with the float64
product of the fp16-rounded inputs, with twice the fp32 unit roundoff (kernels.chapters.gemm.fp16_tolerance).
"""
from __future__ import annotations

import numpy as np
import pytest

from kernels.chapters import gemm as g

pytestmark = pytest.mark.gpu

SHAPES = [(1, 1, 1), (1, 7, 3), (5, 1, 9), (2, 3, 1), (17, 19, 23), (33, 65, 17), (64, 64, 64),
          (127, 129, 131), (128, 128, 128), (130, 68, 64), (129, 257, 8), (264, 136, 72),
          (1000, 1001, 999), (300, 40, 1024)]
ALPHA_BETA = [(1.0, 0.0), (0.75, -0.5), (-2.0, 1.0)]
SWEEP_CONFIGS = {
    "2d": [{"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4}, {"BM": 64, "BN": 32, "BK": 16, "TM": 8, "TN": 4}],
    "vec4": [{**g.DEFAULTS["vec4"], "SPLIT": s, "LAYOUT": lay} for s in (0, 1) for lay in (0, 1, 2)]
            + [{"BM": 64, "BN": 128, "BK": 32, "TM": 8, "TN": 4, "SPLIT": 1, "LAYOUT": 2}],
    "double_buffered": [{"BM": 128, "BN": 128, "BK": bk, "TM": 8, "TN": 8} for bk in (8, 16, 32)]
                       + [{"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4},
                          {"BM": 128, "BN": 64, "BK": 32, "TM": 8, "TN": 4},
                          {"BM": 256, "BN": 128, "BK": 16, "TM": 16, "TN": 8}],
    "cp_async": [{"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "STAGES": s} for s in (2, 3, 4)]
                + [{"BM": 64, "BN": 128, "BK": 8, "TM": 4, "TN": 8, "STAGES": 3}],
    "warp_tiled": [g.DEFAULTS["warp_tiled"],
                   {"BM": 128, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "TM": 8, "TN": 8},
                   {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8},
                   {"BM": 128, "BN": 64, "BK": 32, "WM": 128, "WN": 16, "TM": 16, "TN": 4}],
    "wmma": [g.DEFAULTS["wmma"], {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32},
             {"BM": 32, "BN": 64, "BK": 16, "WM": 16, "WN": 32}],
    "wmma_cp_async": [g.DEFAULTS["wmma_cp_async"], {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32, "STAGES": 2},
                      {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32, "STAGES": 4},
                      {"BM": 256, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 4}],
    "warp_pipelined": [g.DEFAULTS["warp_pipelined"],
                       {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "TM": 8, "TN": 8, "BLOCKS": 2},
                       {"BM": 128, "BN": 128, "BK": 16, "WM": 32, "WN": 64, "TM": 8, "TN": 8, "BLOCKS": 1},
                       {"BM": 128, "BN": 256, "BK": 8, "WM": 64, "WN": 64, "TM": 8, "TN": 16, "BLOCKS": 1},
                       {"BM": 256, "BN": 128, "BK": 16, "WM": 64, "WN": 64, "TM": 16, "TN": 8, "BLOCKS": 1},
                       {"BM": 64, "BN": 64, "BK": 8, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "BLOCKS": 2}],
    "wmma_pipelined": [g.DEFAULTS["wmma_pipelined"], g.FALLBACKS["wmma_pipelined"],
                       {"BM": 128, "BN": 128, "BK": 64, "WM": 64, "WN": 64, "STAGES": 3},
                       {"BM": 256, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 4},
                       {"BM": 64, "BN": 128, "BK": 16, "WM": 32, "WN": 64, "STAGES": 2},
                       {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 64, "STAGES": 6}],
}
# Shapes with interior blocks for every tile above (the unchecked paths) and K % BK != 0.
INTERIOR_SHAPES = [(520, 528, 200), (512, 512, 64), (1024, 512, 1000)]


def _skip_if_unsupported(k, family: str) -> None:
    cc = k.device_info().compute_capability
    if g._cc_tuple(cc) < g.FAMILIES[family].min_cc:
        pytest.skip(f"{family} needs a newer GPU than compute capability {cc}")


def _dtype(family: str):
    return np.float16 if g.FAMILIES[family].input_dtype == "float16" else np.float32


@pytest.mark.parametrize("rung", range(10))
def test_ladder_rungs(k, rung):
    rungs = g.ladder(k.device_info().compute_capability)
    if rung >= len(rungs):
        pytest.skip("this GPU's ladder has fewer rungs (no cp.async)")
    r = rungs[rung]
    kernel = g.GemmKernel(r.family, r.params)
    pairs = ALPHA_BETA if g.FAMILIES[r.family].alpha_beta else ALPHA_BETA[:1]
    for M, N, K in SHAPES:
        for alpha, beta in pairs:
            g.check_gemm(kernel, M, N, K, alpha=alpha, beta=beta)


def test_tensor_core_rung(k):
    r = g.tensor_core_rung(k.device_info().compute_capability)
    kernel = g.GemmKernel(r.family, r.params)
    for M, N, K in SHAPES:
        for alpha, beta in ALPHA_BETA:
            g.check_gemm(kernel, M, N, K, alpha=alpha, beta=beta, dtype=np.float16)


@pytest.mark.parametrize("family, index", [(f, i) for f, cs in SWEEP_CONFIGS.items() for i in range(len(cs))])
def test_configurations(k, family, index):
    _skip_if_unsupported(k, family)
    params = SWEEP_CONFIGS[family][index]
    limits = k.GpuLimits.from_device()
    problems = g.FAMILIES[family].problems(params, limits)
    if problems:
        pytest.skip("; ".join(problems))
    kernel = g.GemmKernel(family, params, limits=limits)
    for M, N, K in SHAPES[:-2] + [(520, 264, 200)] + INTERIOR_SHAPES:
        for alpha, beta in ALPHA_BETA[:2]:
            g.check_gemm(kernel, M, N, K, alpha=alpha, beta=beta, dtype=_dtype(family))


@pytest.mark.parametrize("family", ["vec4", "double_buffered", "warp_tiled", "warp_pipelined", "wmma", "cp_async",
                                    "wmma_cp_async", "wmma_pipelined"])
def test_misaligned_operands_take_the_scalar_path(k, family):
    """A, B and C that start 4 (or 2) bytes into an allocation: the kernels must notice and avoid
    16-byte accesses, even though K and N are multiples of 8."""
    import cupy as cp

    _skip_if_unsupported(k, family)
    params = g.default_params("conflict_free" if family == "vec4" else family, k.GpuLimits.from_device())
    kernel = g.GemmKernel(family, params)
    dtype = _dtype(family)
    M, N, K = 136, 264, 72
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (M, K)).astype(dtype)
    b = rng.uniform(-1, 1, (K, N)).astype(dtype)
    A_buf = cp.empty(M * K + 1, dtype=dtype)
    B_buf = cp.empty(K * N + 1, dtype=dtype)
    C_buf = cp.full(M * N + 1, np.nan, dtype=cp.float32)
    A = A_buf[1:].reshape(M, K)
    B = B_buf[1:].reshape(K, N)
    C = C_buf[1:].reshape(M, N)
    A[...] = cp.asarray(a)
    B[...] = cp.asarray(b)
    kernel(A, B, C, M, N, K)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(C.get() - ref).max() / np.abs(ref).max()
    tol = g.fp16_tolerance(K) if dtype == np.float16 else g.fp32_tolerance(K)
    assert np.isfinite(err) and err <= tol


@pytest.mark.parametrize("splits", [1, 2, 3, 8, 40])
def test_split_k(k, splits):
    for params in ({"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}, {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}):
        run = g.SplitKGemm(params, splits)
        for M, N, K in [(1, 1, 1), (33, 65, 17), (64, 68, 1000), (127, 129, 4099), (256, 256, 8192)]:
            for alpha, beta in ALPHA_BETA[:2]:
                g.check_gemm(run, M, N, K, alpha=alpha, beta=beta)


def test_split_k_is_deterministic(k):
    import cupy as cp

    run = g.SplitKGemm({"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}, 16)
    M, N, K = 128, 128, 65536
    A = cp.random.random((M, K), dtype=cp.float32)
    B = cp.random.random((K, N), dtype=cp.float32)
    results = set()
    for _ in range(3):
        C = cp.empty((M, N), dtype=cp.float32)
        run(A, B, C, M, N, K)
        results.add(C.tobytes())
    assert len(results) == 1


def test_fp16_errors_against_rounded_and_unrounded_inputs(k):
    """The tensor-core result matches the product of the fp16-rounded inputs to fp32-accumulation
    accuracy, and differs from the product of the unrounded inputs by about the fp16 input rounding."""
    import cupy as cp

    r = g.tensor_core_rung(k.device_info().compute_capability)
    kernel = g.GemmKernel(r.family, r.params)
    M, N, K = 512, 384, 1024
    rng = np.random.default_rng(7)
    a32 = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b32 = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    a16, b16 = a32.astype(np.float16), b32.astype(np.float16)
    C = cp.full((M, N), np.nan, dtype=cp.float32)
    kernel(cp.asarray(a16), cp.asarray(b16), C, M, N, K)
    got = C.get().astype(np.float64)
    rounded = a16.astype(np.float64) @ b16.astype(np.float64)
    exact = a32.astype(np.float64) @ b32.astype(np.float64)
    rel_rounded = np.linalg.norm(got - rounded) / np.linalg.norm(rounded)
    rel_exact = np.linalg.norm(got - exact) / np.linalg.norm(exact)
    input_only = g.input_rounding_errors(M, N, K, seed=7)["fp16"]
    assert rel_rounded < 1e-5
    assert 0.5 * input_only < rel_exact < 2 * input_only


def test_cublas_fp32_is_not_tf32(k):
    import cupy as cp

    assert g.cublas_fp32_compute_type() == "fp32"
    rng = np.random.default_rng(11)
    a = rng.uniform(-1, 1, (1024, 1024)).astype(np.float32)
    b = rng.uniform(-1, 1, (1024, 1024)).astype(np.float32)
    c = cp.matmul(cp.asarray(a), cp.asarray(b)).get()
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - exact) / np.linalg.norm(exact) < 1e-5     # tf32 would give ~3e-4


def test_im2col_convolution(k):
    import cupy as cp

    im2col = k.load_kernel("gemm/im2col.cu", "im2col")
    gemm = g.GemmKernel("warp_tiled")
    rng = np.random.default_rng(2)
    for C_in, H, W, F, R, S, stride, pad in [(3, 11, 13, 5, 3, 3, 1, 1), (8, 16, 16, 12, 3, 3, 2, 1),
                                             (4, 9, 7, 6, 1, 1, 1, 0), (2, 10, 10, 3, 5, 5, 2, 2)]:
        P, Q = (H + 2 * pad - R) // stride + 1, (W + 2 * pad - S) // stride + 1
        x = rng.uniform(-1, 1, (C_in, H, W)).astype(np.float32)
        w = rng.uniform(-1, 1, (F, C_in, R, S)).astype(np.float32)
        cols = cp.full((C_in * R * S, P * Q), np.nan, dtype=cp.float32)
        im2col((k.ceil_div(cols.size, 256),), (256,),
               (cp.asarray(x), cols, C_in, H, W, R, S, stride, pad, P, Q))
        y = cp.full((F, P * Q), np.nan, dtype=cp.float32)
        gemm(cp.asarray(w.reshape(F, -1)), cols, y, F, P * Q, C_in * R * S)
        xp = np.pad(x.astype(np.float64), ((0, 0), (pad, pad), (pad, pad)))
        ref = np.zeros((F, P, Q))
        for r in range(R):
            for s in range(S):
                patch = xp[:, r:r + stride * P:stride, s:s + stride * Q:stride]
                ref += np.einsum("fc,cpq->fpq", w[:, :, r, s].astype(np.float64), patch)
        err = np.abs(y.get().reshape(F, P, Q) - ref).max() / np.abs(ref).max()
        assert err < g.fp32_tolerance(C_in * R * S)


def test_a_wrong_kernel_fails_the_check(k):
    """check_gemm catches a kernel that ignores the last column of C."""
    kernel = g.GemmKernel("double_buffered")

    def wrong(A, B, C, M, N, K, alpha, beta):
        kernel(A, B, C, M, N, K, alpha, beta)
        C[:, -1] = 0.0

    with pytest.raises(AssertionError):
        g.check_gemm(wrong, 130, 67, 75)
