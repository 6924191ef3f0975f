"""The "GEMM" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every FP32 rung of kernels/cuda/gemm/ (and the naive kernel the chapter starts from), at the
ladder's defaults and at smaller tiles, is checked with kernels.chapters.gemm.check_gemm: kernels.check
against the float64 NumPy product on fresh inputs, C poisoned with NaN, the tolerance the
rounding-error bound of the drawn inputs. Shapes mix 1, 7, 33 and 65 (primes, sizes just past
multiples of 4, 8, 16 and 32, non-square), plus one shape of multiples of 4 (the 16-byte path) and
one with interior blocks for the 64 x 64 tiles (130 x 136, K = 37). Each runs with alpha = 1,
beta = 0 and alpha = -1.5, beta = 0 (C stays NaN: a kernel that reads C anyway fails), and with a
general alpha and beta (C starts as a random C0). Split-K, im2col and a convolution through im2col
and a GEMM are checked the same way, and a wrong kernel is shown to fail the check.

The tensor-core kernels (WMMA) and the cp.async kernel use PTX, which the CPU backend refuses by
design: cp.async runs on the GPU variant only; the WMMA kernels are checked on a GPU in
tests/gpu/test_gemm_gpu.py and with CPU stand-ins for their PTX in tests/test_gemm.py. The GPU
variant also runs larger shapes (interior blocks of the large tiles, K in the hundreds).
"""
from __future__ import annotations

import numpy as np
import pytest
from kernel_backends import gpu_only, gpu_only_case

from kernels.chapters import gemm as g

SHAPES = [(1, 1, 1), (1, 65, 7), (65, 1, 33), (7, 33, 65), (33, 7, 1), (65, 33, 7), (36, 68, 44),
          (130, 136, 37), *gpu_only((127, 129, 131), (520, 528, 200), (1000, 1001, 999))]
ALPHA_BETA = [(1.0, 0.0), (-1.5, 0.0), (0.75, -0.5)]

# (family, params): every rung the CPU backend can run, at the ladder's defaults and at smaller tiles
# (more blocks, so edge and interior blocks at these shapes); cp.async on a GPU only.
RUNGS = [("naive", {}), ("smem", {"TILE": 16}), ("smem", g.DEFAULTS["smem"]), ("1d", g.DEFAULTS["1d"]),
         ("2d", {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4}), ("2d", g.DEFAULTS["2d"]),
         *[("vec4", {**g.DEFAULTS["vec4"], "SPLIT": s, "LAYOUT": lay}) for s in (0, 1) for lay in (0, 1, 2)],
         ("vec4", {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "SPLIT": 1, "LAYOUT": 2}),
         ("double_buffered", g.DEFAULTS["double_buffered"]),
         ("double_buffered", {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}),
         ("warp_tiled", g.DEFAULTS["warp_tiled"]),
         ("warp_tiled", {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8}),
         ("warp_pipelined", g.DEFAULTS["warp_pipelined"]),
         ("warp_pipelined", {"BM": 64, "BN": 64, "BK": 8, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "BLOCKS": 2}),
         gpu_only_case("cp_async", g.FALLBACKS["cp_async"]),
         gpu_only_case("cp_async", {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "STAGES": 3})]


def _id(value) -> str:
    if isinstance(value, dict):
        return "-".join(map(str, value.values())) or "default"
    if isinstance(value, tuple):
        return "x".join(map(str, value))
    return str(value)


def kernel_for(k, family: str, params: dict) -> g.GemmKernel:
    fam = g.FAMILIES[family]
    if not k.on_cpu:
        cc = k.device_info().compute_capability
        if g._cc_tuple(cc) < fam.min_cc:
            pytest.skip(f"{family} needs compute capability {fam.min_cc}, this GPU has {cc}")
    return g.GemmKernel(family, params)


@pytest.mark.parametrize("shape", SHAPES, ids=_id)
@pytest.mark.parametrize("family, params", RUNGS, ids=_id)
def test_rung(k, family, params, shape):
    kernel = kernel_for(k, family, params)
    for alpha, beta in ALPHA_BETA if kernel.family.alpha_beta else ALPHA_BETA[:1]:
        g.check_gemm(kernel, *shape, alpha=alpha, beta=beta)


@pytest.mark.parametrize("shape", [*SHAPES, (7, 33, 301), (65, 7, 600)], ids=_id)
def test_split_k(k, shape):
    """Partial products of up to 5 slices of K (a multiple of BK each, the last one short), then the
    reduction kernel with alpha and beta."""
    run = g.SplitKGemm({"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}, 5)
    for alpha, beta in ALPHA_BETA:
        g.check_gemm(run, *shape, alpha=alpha, beta=beta)


def test_a_wrong_kernel_fails_the_check(k):
    """check_gemm catches a kernel that leaves the last column unwritten, and one that reads C when
    beta = 0 (0 * NaN is NaN): the NaN poison is what makes the beta = 0 checks above able to fail."""
    kernel = g.GemmKernel("double_buffered", {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4})

    def skips_a_column(A, B, C, M, N, K, alpha, beta):
        kernel(A, B, C, M, N, K, alpha, beta)
        C[:, -1] = np.nan

    def reads_c(A, B, C, M, N, K, alpha, beta):
        kernel(A, B, C, M, N, K, alpha, beta if beta else 1e-30)

    for wrong in (skips_a_column, reads_c):
        with pytest.raises(AssertionError):
            g.check_gemm(wrong, 33, 7, 65)
    g.check_gemm(kernel, 33, 7, 65)


# --------------------------------------------------------------------------- im2col

CONVOLUTIONS = [(3, 11, 13, 5, 3, 3, 1, 1), (2, 10, 10, 3, 5, 5, 2, 2), (4, 9, 7, 6, 1, 1, 1, 0),
                (1, 1, 1, 1, 1, 1, 1, 0), (5, 7, 33, 7, 3, 2, 3, 1)]


def im2col_reference(x, C, H, W, R, S, stride, pad, P, Q):
    padded = np.pad(np.asarray(x, dtype=np.float64).reshape(C, H, W), ((0, 0), (pad, pad), (pad, pad)))
    cols = np.empty((C, R, S, P, Q))
    for r in range(R):
        for s in range(S):
            cols[:, r, s] = padded[:, r:r + stride * (P - 1) + 1:stride, s:s + stride * (Q - 1) + 1:stride]
    return cols.reshape(C * R * S, P * Q)


@pytest.mark.parametrize("conv", CONVOLUTIONS, ids=_id)
def test_im2col_and_convolution(k, conv):
    C, H, W, F, R, S, stride, pad = conv
    P, Q = (H + 2 * pad - R) // stride + 1, (W + 2 * pad - S) // stride + 1
    im2col = k.load_kernel("gemm/im2col.cu", "im2col")
    geometry = {"C": C, "H": H, "W": W, "R": R, "S": S, "stride": stride, "pad": pad, "P": P, "Q": Q}
    rows, n = C * R * S, P * Q

    def unfold(x, cols, blocks=None):
        im2col((blocks or k.ceil_div(cols.size, 128),), (128,), (x, cols, C, H, W, R, S, stride, pad, P, Q))

    for blocks in (None, 1):                     # one thread per element, and a grid-stride loop
        k.check(lambda x, cols, **_: unfold(x, cols, blocks), lambda x, **_: im2col_reference(x, **geometry),
                inputs={"x": k.rand((C, H, W), np.float32), **geometry},
                outputs={"cols": ((rows, n), np.float32)}, tol=0.0).raise_if_failed()

    # The convolution as one GEMM: y (F x PQ) = w (F x CRS) cols (CRS x PQ), tolerance from the bound.
    rng = np.random.default_rng(sum(conv))
    x = rng.uniform(-1, 1, (C, H, W)).astype(np.float32)
    w = rng.uniform(-1, 1, (F, rows)).astype(np.float32)
    cols_ref = im2col_reference(x, **geometry)
    tol = g.check_tolerance(w.astype(np.float64) @ cols_ref,
                            g.gemm_error_bound(w, cols_ref, None, 1.0, 0.0, rows + 2))
    gemm = g.GemmKernel("warp_tiled", {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8})

    def convolve(x, w, y):
        cols = k.xp.full((rows, n), np.nan, dtype=np.float32)
        unfold(x, cols)
        gemm(w, cols, y, F, n, rows)

    k.check(convolve, lambda x, w: w @ im2col_reference(x, **geometry), inputs={"x": x, "w": w},
            outputs={"y": ((F, n), np.float32)}, tol=tol).raise_if_failed()
