"""Exercises of the "Measuring kernels" chapter: the roofline by hand, and a bug that only guard bands see."""
from __future__ import annotations

import numpy as np

from ..cases import off_multiple, random_prime, uniform
from ..spec import Case, Exercise, KernelSpec, LaunchContext, Points, Question, Tolerance
from . import U32, blocks

# --------------------------------------------------------------------------------------------------
# Roofline predictions
# --------------------------------------------------------------------------------------------------

B_GBPS, P_TFLOPS = 250.0, 8.0  # the hardware numbers the statement gives (T4-like)
RIDGE = P_TFLOPS * 1e12 / (B_GBPS * 1e9)
GEMM_N = 4096
POLY_N = 1 << 24


def _attainable(intensity: float) -> float:
    return min(P_TFLOPS, intensity * B_GBPS / 1e3)


def _roofline_questions() -> tuple[Question, ...]:
    kernels = {
        "axpby": 3 / 12,                          # a*x + b*y: a multiply and an FMA per 12 bytes
        "poly16": 2 * 16 / 8,                     # 16 FMAs per 4 bytes read + 4 written
        "poly256": 2 * 256 / 8,
        "gemm": 2 * GEMM_N ** 3 / (3 * GEMM_N ** 2 * 4),   # minimal bytes: read A and B, write C once
    }
    qs = [Question("ridge", "ridge point of the stated GPU, FLOP/byte", RIDGE, rel_tol=0.02)]
    for name, ai in kernels.items():
        qs.append(Question(f"{name}_intensity", f"{name}: arithmetic intensity, FLOP/byte", ai, rel_tol=0.02))
        qs.append(Question(f"{name}_bound", f"{name}: 'memory' or 'compute' bound",
                           ("memory", "memory-bound", "memory bound") if ai < RIDGE
                           else ("compute", "compute-bound", "compute bound")))
        qs.append(Question(f"{name}_attainable_tflops", f"{name}: attainable TFLOP/s on the roofline",
                           _attainable(ai), rel_tol=0.02))
    flops = 2 * 256 * POLY_N
    qs.append(Question("poly256_min_ms", "poly256 on 2^24 elements: the least time in ms the roofline allows",
                       flops / (_attainable(kernels["poly256"]) * 1e12) * 1e3, rel_tol=0.03))
    return tuple(qs)


def _roofline_measure(prediction: dict) -> list:
    import cupy

    import kernels
    from kernels.roofline import attainable_tflops

    from ..predict import MeasuredRow

    c = kernels.ceilings()
    poly = kernels.load_kernel("measuring_kernels/poly.cu", "poly_horner")
    n = POLY_N
    x = cupy.random.uniform(-0.9, 0.9, n).astype(cupy.float32)
    y = cupy.empty_like(x)
    rows = [MeasuredRow("ridge point of this GPU (FLOP/byte)", prediction.get("ridge"),
                        round(c.ridge_flop_per_byte, 2), f"measured ceilings: {c}")]
    for k in (16, 256):
        t = kernels.benchmark(lambda: poly((blocks(n, 256),), (256,), (x, y, n, k)), warmup=2, repeat=10)
        achieved = 2 * k * n / t.seconds / 1e12
        roof = float(attainable_tflops(2 * k / 8, c))
        rows.append(MeasuredRow(f"poly{k}: achieved TFLOP/s on this GPU (roof {roof:.3g})",
                                prediction.get(f"poly{k}_attainable_tflops"), round(achieved, 3),
                                f"{100 * achieved / roof:.0f} % of this GPU's roof"))
    return rows


ROOFLINE = Exercise(
    id="measuring_kernels/roofline_predict",
    title="Place four kernels on the roofline",
    kind="predict",
    questions=_roofline_questions(),
    measure=_roofline_measure,
)

# --------------------------------------------------------------------------------------------------
# Fix the bug: adjacent differences one element too far
# --------------------------------------------------------------------------------------------------


def _diff_case(rng, n: int, why: str, vis: str) -> Case:
    return Case(f"n = {n:,}", vis, {"x": uniform(rng, n, -100, 100)}, {"d": ((n - 1,), np.float32)}, {"n": n},
                tol=Tolerance(rtol=2 * U32), why=why, large=n > 1_500_000)


def _diff_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, "one element: no differences at all"), (2, "one difference"), (33, "one warp and one element"),
                (256, "exactly one block"), (257, "one past a block"), (513, "one past two blocks"),
                (1_000, "several blocks"), (65_537, "a prime"),
                (1_000_003, "many blocks"), (4_000_037, "large")]
    else:
        spec = [(int(rng.integers(3, 40)), "a few elements"), (off_multiple(rng, 300, 20_000, 256), "ragged"),
                (random_prime(rng, 100_000, 800_000), "a large prime")]
    return [_diff_case(rng, n, why, vis) for n, why in spec]


def _diff_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    ctx.kernel()((blocks(n, 256),), (256,), (ctx["x"], ctx["d"], n))


def _diff_reference(case: Case) -> dict:
    x = case.inputs["x"].astype(np.float64)
    return {"d": np.diff(x)}


ADJACENT_DIFFERENCE = Exercise(
    id="measuring_kernels/adjacent_difference_fix",
    title="Fix the bug: adjacent differences",
    kind="fix",
    kernels=(KernelSpec("adjacent_difference", "(const float* x, float* d, int n)"),),
    launch_text="blocks of 256 threads and a grid of ceil(n / 256) blocks: one thread per element of x.",
    make_cases=_diff_cases, launch=_diff_launch, reference=_diff_reference,
    points=Points(public=4, hidden=6, perf=0),
)

EXERCISES = [ROOFLINE, ADJACENT_DIFFERENCE]
