"""Exercises of the "Coalescing" chapter: the misaligned transpose, a tiled transpose from scratch, a GEMV for
short rows, strides by hand."""
from __future__ import annotations

import numpy as np

from ..cases import near_multiple, off_multiple, random_prime, uniform
from ..spec import Case, Exercise, Expected, KernelSpec, LaunchContext, PerfSpec, Question
from . import U32, blocks

# --------------------------------------------------------------------------------------------------
# Fix the bug: a commonly copied transpose (float2 into a pitch-65 tile, no bounds checks)
# --------------------------------------------------------------------------------------------------

T_ROWS, T_COLS = 32, 64


def _transpose_case(rng, rows: int, cols: int, why: str, vis: str, large: bool | None = None) -> Case:
    return Case(f"{rows} x {cols}", vis, {"inp": uniform(rng, (rows, cols))}, {"out": ((cols, rows), np.float32)},
                {"rows": rows, "cols": cols}, why=why,
                large=rows * cols > 3_000_000 if large is None else large)


def _transpose_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        shapes = [(32, 64, "exactly one tile"), (64, 128, "whole tiles"), (1, 1, "one element"),
                  (32, 65, "an odd number of columns"), (33, 64, "one row past a tile"),
                  (31, 63, "one short of a tile in both directions"), (33, 65, "one past a tile in both directions"),
                  (1000, 777, "ragged on both sides"), (31, 4097, "one long row of tiles"),
                  (4097, 33, "one tall column of tiles"), (2048, 2050, "large")]
    else:
        shapes = [(off_multiple(rng, 2, 200, 32), off_multiple(rng, 2, 300, 2), "ragged, odd columns"),
                  (random_prime(rng, 100, 900), random_prime(rng, 100, 900), "prime sides"),
                  (near_multiple(rng, 64, 1024, 32), near_multiple(rng, 64, 1024, 64), "one off the tile"),
                  (int(rng.integers(1, 4)), int(rng.integers(3000, 9000)), "a few long rows")]
    return [_transpose_case(rng, r, c, why, vis) for r, c, why in shapes]


def _transpose_launch(ctx: LaunchContext) -> None:
    rows, cols = ctx["rows"], ctx["cols"]
    ctx.kernel()((blocks(cols, T_COLS), blocks(rows, T_ROWS)), (32, 8), (ctx["inp"], ctx["out"], rows, cols))


def _transpose_reference(case: Case) -> dict:
    return {"out": case.inputs["inp"].T.astype(np.float64)}


def _transpose_perf_case(rng, sm_count: int) -> Case:
    return _transpose_case(rng, 8192, 8192, "8192 x 8192", "perf", large=True)


# Both transpose exercises: at least 65 % of the copy bandwidth measured in the same run, at 8192 x 8192
# (benchmarks/results/exercise_targets_*.txt: the references reach 82-85 % on an H200, a valid
# XOR-swizzled tile 74 %; the unpadded tile, with its 32-way bank conflicts, stays far below).
TRANSPOSE_PERF = PerfSpec(case=_transpose_perf_case, metric="GB/s",
                          work=lambda c: 8 * c.scalars["rows"] * c.scalars["cols"], baseline="copy", target=0.65,
                          describe="8 bytes per element (one read, one write)", repeat=10)


TRANSPOSE = Exercise(
    id="coalescing/transpose_fix",
    title="Fix the bug: the misaligned transpose",
    kind="fix",
    kernels=(KernelSpec("transpose_tile", "(const float* in, float* out, int rows, int cols)"),),
    launch_text=("blocks of 32 x 8 threads and a grid of ceil(cols / 64) x ceil(rows / 32) blocks: each block "
                 "transposes a tile of 32 rows and 64 columns of `in`."),
    make_cases=_transpose_cases, launch=_transpose_launch, reference=_transpose_reference,
    perf=TRANSPOSE_PERF,
)

# --------------------------------------------------------------------------------------------------
# Write a kernel: the tiled, bank-conflict-free transpose (one 32 x 32 tile per block of 32 x 8 threads)
# --------------------------------------------------------------------------------------------------

TILE = 32


def _tiled_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        shapes = [(1, 1, "one element"), (2, 3, "smaller than a tile"), (32, 32, "exactly one tile"),
                  (1, 1000, "a single row"), (1000, 1, "a single column"), (97, 61, "prime sides"),
                  (33, 31, "one past and one short of a tile"), (31, 33, "one short and one past a tile"),
                  (65, 65, "one past two tiles in both directions"), (1000, 777, "ragged on both sides"),
                  (31, 4097, "one long row of tiles"), (4097, 33, "one tall column of tiles"),
                  (2047, 2053, "large, ragged")]
    else:
        shapes = [(random_prime(rng, 100, 900), random_prime(rng, 100, 900), "prime sides"),
                  (off_multiple(rng, 2, 300, 32), off_multiple(rng, 2, 300, 32), "ragged on both sides"),
                  (near_multiple(rng, 64, 1024, 32), near_multiple(rng, 64, 1024, 32), "one off the tile"),
                  (1, int(rng.integers(2000, 9000)), "a single row"),
                  (int(rng.integers(2000, 9000)), 1, "a single column"),
                  (int(rng.integers(2, 32)), off_multiple(rng, 1000, 5000, 32), "a few long rows")]
    return [_transpose_case(rng, r, c, why, vis) for r, c, why in shapes]


def _tiled_launch(ctx: LaunchContext) -> None:
    rows, cols = ctx["rows"], ctx["cols"]
    ctx.kernel()((blocks(cols, TILE), blocks(rows, TILE)), (32, 8), (ctx["inp"], ctx["out"], rows, cols))


TRANSPOSE_TILED = Exercise(
    id="coalescing/transpose_tiled",
    title="Write the tiled, conflict-free transpose",
    kind="write",
    kernels=(KernelSpec("transpose_tiled", "(const float* in, float* out, int rows, int cols)"),),
    launch_text=("blocks of 32 x 8 threads and a grid of ceil(cols / 32) x ceil(rows / 32) blocks: block "
                 "(bx, by) transposes the tile of 32 x 32 elements of `in` that starts at row 32 * by and "
                 "column 32 * bx."),
    make_cases=_tiled_cases, launch=_tiled_launch, reference=_transpose_reference,
    perf=TRANSPOSE_PERF,
)

# --------------------------------------------------------------------------------------------------
# GEMV for any row length
# --------------------------------------------------------------------------------------------------

GEMV_BLOCK = 256


def _gemv_case(rng, rows: int, cols: int, why: str, vis: str, large: bool | None = None) -> Case:
    return Case(f"{rows:,} x {cols:,}", vis, {"A": uniform(rng, (rows, cols)), "x": uniform(rng, cols)},
                {"y": ((rows,), np.float32)}, {"rows": rows, "cols": cols}, why=why,
                large=rows * cols > 4_000_000 if large is None else large)


def _gemv_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        shapes = [(1, 1, "one element"), (1, 1000, "one long row"), (1000, 1, "rows of one element"),
                  (1000, 3, "very short rows"), (257, 24, "short rows, ragged"), (31, 32, "rows of one warp"),
                  (100, 33, "one past a warp"), (3, 1025, "one past four warps of four elements"),
                  (64, 4097, "long rows"), (1000, 777, "ragged"), (262_147, 24, "large, short rows")]
    else:
        shapes = [(off_multiple(rng, 100, 5000, 8), int(rng.integers(2, 9)), "very short rows"),
                  (off_multiple(rng, 100, 3000, 8), int(rng.integers(9, 70)), "short rows"),
                  (int(rng.integers(1, 40)), random_prime(rng, 1000, 9000), "long rows"),
                  (random_prime(rng, 100, 900), random_prime(rng, 100, 900), "prime sides")]
    return [_gemv_case(rng, r, c, why, vis) for r, c, why in shapes]


def _gemv_launch(ctx: LaunchContext) -> None:
    rows, cols = ctx["rows"], ctx["cols"]
    per_block = ctx.macros["ROWS_PER_BLOCK"]
    ctx.kernel()((blocks(rows, per_block),), (GEMV_BLOCK,), (ctx["A"], ctx["x"], ctx["y"], rows, cols))


def _gemv_reference(case: Case) -> dict:
    a = case.inputs["A"].astype(np.float64)
    x = case.inputs["x"].astype(np.float64)
    cols = a.shape[1]
    return {"y": Expected(a @ x, atol=(cols + 2) * U32 * (np.abs(a) @ np.abs(x)) + 1e-30)}


def _gemv_macros(macros: dict[str, int]) -> str | None:
    per_block = macros["ROWS_PER_BLOCK"]
    if not 1 <= per_block <= 65536:
        return f"ROWS_PER_BLOCK is {per_block}; it must be between 1 and 65536"
    return None


def _gemv_perf_case(rng, sm_count: int) -> Case:
    return _gemv_case(rng, 1 << 21, 24, "2^21 rows of 24 floats", "perf", large=True)


GEMV = Exercise(
    id="coalescing/gemv_rows",
    title="A GEMV that handles short rows",
    kind="write",
    kernels=(KernelSpec("gemv", "(const float* A, const float* x, float* y, int rows, int cols)"),),
    launch_text=("blocks of 256 threads and a grid of ceil(rows / ROWS_PER_BLOCK) blocks, where ROWS_PER_BLOCK is "
                 "a #define of your source: block b computes rows b * ROWS_PER_BLOCK and the following ones."),
    launch_macros=("ROWS_PER_BLOCK",), check_macros=_gemv_macros,
    make_cases=_gemv_cases, launch=_gemv_launch, reference=_gemv_reference,
    perf=PerfSpec(case=_gemv_perf_case, metric="GB/s",
                  work=lambda c: 4 * (c.scalars["rows"] * c.scalars["cols"] + c.scalars["rows"] + c.scalars["cols"]),
                  baseline="copy", target=0.45, describe="4 bytes per element of A, x and y",
                  roofline=lambda c: (2.0 * c.scalars["rows"] * c.scalars["cols"],
                                      4.0 * (c.scalars["rows"] * c.scalars["cols"] + c.scalars["rows"]
                                             + c.scalars["cols"]))),
)

# --------------------------------------------------------------------------------------------------
# Strides and structs, by hand
# --------------------------------------------------------------------------------------------------


def _sectors(stride: int) -> int:
    return min(32, 4 * stride)


def _copy_fraction(stride: int) -> float:
    """Useful GB/s of copy_strided relative to stride 1: DRAM bytes per element read + 4 written."""
    return (4 + 4) / (_sectors(stride) * 32 / 32 + 4)


def _stride_questions() -> tuple[Question, ...]:
    qs = [Question(f"sectors_stride_{s}", f"sectors of one warp load of x[{s} * i] (aligned)", _sectors(s))
          for s in (1, 2, 4, 8, 32)]
    qs.append(Question("sectors_offset_3", "sectors of one warp load of x[i + 3] (x aligned to 128 bytes)", 5))
    qs += [Question(f"fraction_stride_{s}", f"useful bandwidth of y[i] = x[{s} * i] relative to stride 1",
                    _copy_fraction(s), rel_tol=0.05) for s in (2, 8)]
    qs.append(Question("sectors_aos", "sectors when a warp reads p[i].x of an array of struct {float x, y, z, w;}",
                       16))
    qs.append(Question("sectors_soa", "sectors when a warp reads x[i] of the struct-of-arrays layout", 4))
    return tuple(qs)


def _stride_measure(prediction: dict) -> list:
    import cupy

    import kernels

    from ..predict import MeasuredRow

    kernel = kernels.load_kernel("coalescing/access_patterns.cu", "copy_strided")
    n = 1 << 22
    x = cupy.ones(32 * n, dtype=cupy.float32)
    y = cupy.empty(n, dtype=cupy.float32)
    grid = 8 * kernels.device_info().sm_count
    useful = {}
    for s in (1, 2, 8):
        t = kernels.benchmark(lambda s=s: kernel((grid,), (256,), (x, y, n, s)), warmup=2, repeat=10)
        useful[s] = kernels.gbps(8 * n, t)
    return [MeasuredRow(f"stride {s}: useful GB/s relative to stride 1", prediction.get(f"fraction_stride_{s}"),
                        round(useful[s] / useful[1], 3), "") for s in (2, 8)]


STRIDES = Exercise(
    id="coalescing/stride_predict",
    title="Predict sectors and bandwidth of strided access",
    kind="predict",
    questions=_stride_questions(),
    measure=_stride_measure,
)

EXERCISES = [TRANSPOSE, TRANSPOSE_TILED, GEMV, STRIDES]
