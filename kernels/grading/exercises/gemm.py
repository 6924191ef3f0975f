"""Exercises of the "GEMM" chapter: a GEMM with a fused epilogue for any M, N, K, and the GEMM that breaks
on ragged sizes."""
from __future__ import annotations

import numpy as np

from ..cases import near_multiple, off_multiple, random_prime, uniform
from ..spec import Case, Exercise, Expected, KernelSpec, LaunchContext, PerfSpec, Points
from . import U32, blocks


def _gemm_case(rng, m: int, n: int, k: int, why: str, vis: str, large: bool | None = None,
               bias: bool = False) -> Case:
    inputs = {"A": uniform(rng, (m, k)), "B": uniform(rng, (k, n))}
    if bias:
        inputs["bias"] = uniform(rng, n, -2, 2)
    return Case(f"M={m}, N={n}, K={k}", vis, inputs, {"C": ((m, n), np.float32)}, {"M": m, "N": n, "K": k}, why=why,
                large=m * n * k > 40_000_000 if large is None else large)


def _gemm_reference(case: Case) -> dict:
    a = case.inputs["A"].astype(np.float64)
    b = case.inputs["B"].astype(np.float64)
    k = a.shape[1]
    return {"C": Expected(a @ b, atol=(k + 2) * U32 * (np.abs(a) @ np.abs(b)) + 1e-30)}


PUBLIC_SHAPES = [(1, 1, 1, "1 x 1 x 1"), (1, 1000, 3, "a single row of C"), (1000, 1, 7, "a single column of C"),
                 (64, 64, 64, "whole tiles"), (17, 19, 23, "smaller than a tile, all prime"),
                 (33, 31, 17, "one past and one short of 32, K one past 16"),
                 (100, 129, 257, "ragged in M, N and K"), (255, 257, 256, "one off the tile"),
                 (300, 200, 500, "not square"), (1000, 999, 1001, "large")]


def _gemm_cases(rng, vis: str, bias: bool = False) -> list[Case]:
    if vis == "public":
        return [_gemm_case(rng, m, n, k, why, vis, bias=bias) for m, n, k, why in PUBLIC_SHAPES]
    shapes = [(random_prime(rng, 2, 60), random_prime(rng, 2, 60), random_prime(rng, 2, 60), "small primes"),
              (off_multiple(rng, 65, 400, 16), off_multiple(rng, 65, 400, 16), off_multiple(rng, 65, 400, 16),
               "ragged"),
              (near_multiple(rng, 128, 384, 64), near_multiple(rng, 128, 384, 64), int(rng.integers(1, 9)),
               "a very short K"),
              (int(rng.integers(1, 5)), random_prime(rng, 300, 900), random_prime(rng, 300, 900), "a few rows")]
    return [_gemm_case(rng, m, n, k, why, vis, bias=bias) for m, n, k, why in shapes]


def _bias_relu_reference(case: Case) -> dict:
    a = case.inputs["A"].astype(np.float64)
    b = case.inputs["B"].astype(np.float64)
    bias = case.inputs["bias"].astype(np.float64)
    k = a.shape[1]
    bound = (k + 3) * U32 * (np.abs(a) @ np.abs(b) + np.abs(bias)) + 1e-30
    return {"C": Expected(np.maximum(a @ b + bias, 0.0), atol=bound)}  # ReLU never increases an error


# --------------------------------------------------------------------------------------------------
# Write a tiled GEMM with a fused bias and ReLU
# --------------------------------------------------------------------------------------------------


def _tiled_macros(m: dict[str, int]) -> str | None:
    threads, bm, bn = m["THREADS"], m["BLOCK_M"], m["BLOCK_N"]
    if not 32 <= threads <= 1024 or threads % 32:
        return f"THREADS is {threads}; it must be a multiple of 32 between 32 and 1024"
    if not 1 <= bm <= 512 or not 1 <= bn <= 512:
        return f"BLOCK_M = {bm} and BLOCK_N = {bn} must each be between 1 and 512"
    return None


def _tiled_launch(ctx: LaunchContext) -> None:
    m, n, k = ctx["M"], ctx["N"], ctx["K"]
    mac = ctx.macros
    ctx.kernel()((blocks(n, mac["BLOCK_N"]), blocks(m, mac["BLOCK_M"])), (mac["THREADS"],),
                 (ctx["A"], ctx["B"], ctx["bias"], ctx["C"], m, n, k))


def _tiled_perf_case(rng, sm_count: int) -> Case:
    return _gemm_case(rng, 2048, 2048, 2048, "2048 x 2048 x 2048", "perf", large=True, bias=True)


BIAS_RELU_GEMM = Exercise(
    id="gemm/gemm_bias_relu",
    title="A tiled GEMM with a fused bias and ReLU, for any M, N, K",
    kind="write",
    kernels=(KernelSpec("sgemm_bias_relu", "(const float* A, const float* B, const float* bias, float* C, "
                                           "int M, int N, int K)"),),
    launch_text=("a grid of ceil(N / BLOCK_N) x ceil(M / BLOCK_M) blocks of THREADS threads (1-D), where BLOCK_M, "
                 "BLOCK_N and THREADS are #defines of your source: block (bx, by) computes the tile of C with rows "
                 "by * BLOCK_M .. and columns bx * BLOCK_N .."),
    launch_macros=("BLOCK_M", "BLOCK_N", "THREADS"), check_macros=_tiled_macros,
    make_cases=lambda rng, vis: _gemm_cases(rng, vis, bias=True), launch=_tiled_launch,
    reference=_bias_relu_reference,
    perf=PerfSpec(case=_tiled_perf_case, metric="TFLOP/s",
                  work=lambda c: 2.0 * c.scalars["M"] * c.scalars["N"] * c.scalars["K"], baseline="cublas",
                  target=0.5, describe="2 M N K floating-point operations (cuBLAS does the GEMM without the "
                  "bias and ReLU, so the fused epilogue must be nearly free)", repeat=10,
                  roofline=lambda c: (2.0 * c.scalars["M"] * c.scalars["N"] * c.scalars["K"],
                                      4.0 * (c.scalars["M"] * c.scalars["K"] + c.scalars["K"] * c.scalars["N"]
                                             + c.scalars["M"] * c.scalars["N"]))),
)

# --------------------------------------------------------------------------------------------------
# Fix the bugs: a 16 x 16 tiled GEMM that is right only for multiples of 16
# --------------------------------------------------------------------------------------------------


def _fix_launch(ctx: LaunchContext) -> None:
    m, n, k = ctx["M"], ctx["N"], ctx["K"]
    ctx.kernel()((blocks(n, 16), blocks(m, 16)), (16, 16), (ctx["A"], ctx["B"], ctx["C"], m, n, k))


GEMM_EDGES = Exercise(
    id="gemm/gemm_fix_edges",
    title="Fix the bugs: the GEMM that breaks on ragged sizes",
    kind="fix",
    kernels=(KernelSpec("sgemm_tiled16", "(const float* A, const float* B, float* C, int M, int N, int K)"),),
    launch_text="blocks of 16 x 16 threads and a grid of ceil(N / 16) x ceil(M / 16) blocks: one thread per element of C.",
    make_cases=_gemm_cases, launch=_fix_launch, reference=_gemm_reference,
    points=Points(public=4, hidden=6, perf=0),
)

EXERCISES = [BIAS_RELU_GEMM, GEMM_EDGES]
