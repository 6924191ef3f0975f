"""Exercises of the "DRAM bursts" chapter: a float4 kernel for any alignment, and Little's law by hand."""
from __future__ import annotations

import math

import numpy as np

from ..cases import random_prime, uniform
from ..spec import Case, Exercise, KernelSpec, LaunchContext, PerfSpec, Question, Tolerance
from . import U32, blocks

# --------------------------------------------------------------------------------------------------
# y = a * x with 16-byte accesses, for any starting address
# --------------------------------------------------------------------------------------------------

V4_BLOCK = 256


def vec4_grid(n: int) -> int:
    return min(blocks(n, 4 * V4_BLOCK), 1024)


def _vec4_case(rng, n: int, offset: int, why: str, vis: str, large: bool | None = None) -> Case:
    return Case(f"n = {n:,}, offset {offset}", vis, {"x": uniform(rng, n, -10, 10)}, {"y": ((n,), np.float32)},
                {"a": float(np.float32(rng.uniform(-3, 3))), "n": n}, tol=Tolerance(rtol=2 * U32), why=why,
                offset=offset, large=n > 2_000_000 if large is None else large)


def _vec4_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(0, 0, "nothing to do"), (1, 0, "one element"), (1, 1, "one element, misaligned"),
                (2, 3, "shorter than the head"), (3, 1, "head only"), (4, 2, "head and tail"),
                (5, 3, "head, no body, tail"), (7, 1, "one vector and a head"), (64, 0, "aligned, no tail"),
                (67, 0, "aligned, a tail"), (64, 1, "misaligned by 4 bytes"),
                (33, 2, "a head of 2, a body of 7 float4, a tail of 3"), (1_000, 2, "misaligned by 8 bytes"),
                (100_003, 3, "misaligned by 12 bytes, a tail"),
                (2 ** 20 + 13, 1, "a body of more float4 than the 1024 x 256 threads of the grid: it needs the "
                                  "grid-stride loop"),
                (3_000_001, 1, "large")]
    else:
        spec = [(int(rng.integers(1, 9)), int(rng.integers(0, 4)), "tiny"),
                (int(rng.integers(9, 200)), int(rng.integers(1, 4)), "short, misaligned"),
                (random_prime(rng, 10_000, 900_000), int(rng.integers(1, 4)), "a prime, misaligned"),
                (int(rng.integers(1000, 100_000)) * 4, 0, "aligned, a multiple of 4"),
                (int(rng.integers(1_050_000, 1_400_000)), int(rng.integers(0, 4)),
                 "more float4 than threads in the grid")]
    return [_vec4_case(rng, n, off, why, vis) for n, off, why in spec]


def _vec4_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    ctx.kernel()((vec4_grid(n),), (V4_BLOCK,), (ctx["x"], ctx["y"], ctx["a"], n))


def _vec4_reference(case: Case) -> dict:
    return {"y": case.scalars["a"] * case.inputs["x"].astype(np.float64)}


def _vec4_perf_case(rng, sm_count: int) -> Case:
    return _vec4_case(rng, (1 << 26) + 1, 1, "2^26 + 1 elements, misaligned by 4 bytes", "perf", large=True)


SCALE_VEC4 = Exercise(
    id="dram_bursts/scale_vec4",
    title="16-byte accesses from any starting address",
    kind="write",
    kernels=(KernelSpec("scale_vec4", "(const float* x, float* y, float a, int n)"),),
    launch_text=("blocks of 256 threads and a grid of min(ceil(n / 1024), 1024) blocks (at least one). x and y "
                 "always have the same alignment: their addresses leave the same remainder modulo 16."),
    make_cases=_vec4_cases, launch=_vec4_launch, reference=_vec4_reference,
    perf=PerfSpec(case=_vec4_perf_case, metric="GB/s", work=lambda c: 8 * c.scalars["n"], baseline="copy",
                  target=0.7, describe="8 bytes per element (read x, write y)",
                  roofline=lambda c: (c.scalars["n"], 8 * c.scalars["n"])),
)

# --------------------------------------------------------------------------------------------------
# Little's law and sectors, by hand
# --------------------------------------------------------------------------------------------------

BW_GBPS, LATENCY_NS, SMS, MAX_WARPS = 320.0, 450.0, 40, 32


def _little_questions() -> tuple[Question, ...]:
    gpu = BW_GBPS * 1e9 * LATENCY_NS * 1e-9
    per_sm = gpu / SMS
    return (
        Question("bytes_in_flight_gpu", "bytes in flight the whole GPU needs", gpu, rel_tol=0.02),
        Question("bytes_in_flight_per_sm", "bytes in flight per SM", per_sm, rel_tol=0.02),
        Question("warps_per_sm_float", "warps per SM needed with one 4-byte load in flight per thread",
                 math.ceil(per_sm / 128)),
        Question("warps_per_sm_float4", "warps per SM needed with one 16-byte load in flight per thread",
                 math.ceil(per_sm / 512)),
        Question("loads_per_thread_8_warps", "4-byte loads in flight per thread needed with 8 warps per SM",
                 math.ceil(per_sm / (8 * 128))),
        Question("sectors_aligned", "sectors of a warp reading 32 consecutive floats from a 128-byte boundary", 4),
        Question("sectors_offset_1", "sectors of the same read starting one float later", 5),
        Question("sectors_float2", "sectors of a warp reading 32 consecutive float2 (aligned)", 8),
        Question("sectors_float4", "sectors of a warp reading 32 consecutive float4 (aligned)", 16),
        Question("sectors_stride_2", "sectors of a warp reading every second float (aligned)", 8),
    )


def _little_measure(prediction: dict) -> list:
    import cupy

    import kernels

    from ..predict import MeasuredRow

    info = kernels.device_info()
    c = kernels.ceilings()
    n = 1 << 26
    x = cupy.ones(n, dtype=cupy.float32)
    y = cupy.empty_like(x)
    rows = []
    per_sm = prediction.get("bytes_in_flight_per_sm")
    for label, expr, count, bytes_per_warp in (("float, 1 load per thread", "copy_batched<float, 1>", n, 128),
                                               ("float, 4 loads per thread", "copy_batched<float, 4>", n, 512),
                                               ("float4, 1 load per thread", "copy_batched<float4, 1>", n // 4, 512)):
        kernel = kernels.load_kernel("dram_bursts/copy_batched.cu", expr)
        grid = info.sm_count  # one block of 8 warps per SM
        t = kernels.benchmark(lambda k=kernel, m=count: k((grid,), (256,), (x, y, m)), warmup=2, repeat=10)
        fraction = kernels.gbps(8 * n, t) / c.copy_gbps
        predicted = None
        if isinstance(per_sm, (int, float)) and per_sm > 0:
            predicted = round(min(1.0, 8 * bytes_per_warp / per_sm), 2)
        rows.append(MeasuredRow(f"{label}, 8 warps per SM: fraction of the copy ceiling", predicted, round(fraction, 2),
                                "predicted from your bytes in flight per SM (for the stated GPU)"))
    return rows


LITTLE = Exercise(
    id="dram_bursts/little_law_predict",
    title="Bytes in flight and sectors",
    kind="predict",
    questions=_little_questions(),
    measure=_little_measure,
)

EXERCISES = [SCALE_VEC4, LITTLE]
