"""Exercises of the "GPU architecture" chapter: a grid-stride loop, 2-D indexing, occupancy by hand."""
from __future__ import annotations

import numpy as np

from ..cases import near_multiple, off_multiple, random_prime, uniform
from ..spec import Case, Exercise, Expected, KernelSpec, LaunchContext, PerfSpec, Points, Question
from . import U32, blocks

# --------------------------------------------------------------------------------------------------
# axpby with a grid-stride loop
# --------------------------------------------------------------------------------------------------

AXPBY_BLOCK = 256


def axpby_grid(n: int) -> int:
    """The grid the harness launches: about four elements per thread, at most 1024 blocks."""
    return min(blocks(n, 4 * AXPBY_BLOCK), 1024)


def _axpby_case(rng, n: int, why: str, vis: str, large: bool = False) -> Case:
    a = float(np.float32(rng.uniform(-3, 3)))
    b = float(np.float32(rng.uniform(-3, 3)))
    return Case(f"n = {n:,}", vis, {"x": uniform(rng, n), "y": uniform(rng, n)}, {"out": ((n,), np.float32)},
                {"a": a, "b": b, "n": n}, why=why, large=large)


def _axpby_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, "a single element"), (33, "one warp and one element"), (255, "one block, not full"),
                (256, "exactly one block"), (1_000, "more elements than threads: the loop must stride"),
                (1_025, "one element past a block's four per thread: a second block"), (4_099, "a prime"),
                (65_537, "a prime, many blocks"), (300_007, "a prime, four elements per thread"),
                (2 ** 20 + 1, "2^20 + 1: the grid stops at 1024 blocks, so a thread needs more than four elements"),
                (2_000_003, "large")]
    else:
        spec = [(random_prime(rng, 2, 300), "a small prime"),
                (off_multiple(rng, 1_000, 60_000, 256), "not a multiple of the block"),
                (near_multiple(rng, 4_096, 400_000, 1_024), "one off a multiple of 4 x 256"),
                (random_prime(rng, 100_000, 900_000), "a large prime"),
                (int(rng.integers(2 ** 20 + 1, 1_400_000)), "past the 1024-block cap: more than four elements "
                                                            "per thread"),
                (int(rng.integers(3_000_000, 5_000_000)), "the 1024-block cap: many elements per thread")]
    return [_axpby_case(rng, n, why, vis, large=n > 1_500_000) for n, why in spec]


def _axpby_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    ctx.kernel()((axpby_grid(n),), (AXPBY_BLOCK,), (ctx["x"], ctx["y"], ctx["out"], ctx["a"], ctx["b"], n))


def _axpby_reference(case: Case) -> dict:
    x = case.inputs["x"].astype(np.float64)
    y = case.inputs["y"].astype(np.float64)
    a, b = case.scalars["a"], case.scalars["b"]
    return {"out": Expected(a * x + b * y, atol=4 * U32 * (abs(a * x) + abs(b * y)) + 1e-30)}


def _axpby_perf_case(rng, sm_count: int) -> Case:
    return _axpby_case(rng, 1 << 26, "2^26 elements", "perf", large=True)


AXPBY = Exercise(
    id="gpu_architecture/axpby_grid_stride",
    title="axpby with a grid-stride loop",
    kind="write",
    kernels=(KernelSpec("axpby", "(const float* x, const float* y, float* out, float a, float b, int n)"),),
    launch_text=("blocks of 256 threads, and a grid of min(ceil(n / 1024), 1024) blocks: about four elements "
                 "per thread, and many more once n passes 2^20. The grid never covers n with one element "
                 "per thread."),
    make_cases=_axpby_cases, launch=_axpby_launch, reference=_axpby_reference,
    perf=PerfSpec(case=_axpby_perf_case, metric="GB/s", work=lambda c: 12 * c.scalars["n"], baseline="copy",
                  target=0.75, describe="12 bytes per element (read x and y, write out)",
                  roofline=lambda c: (3 * c.scalars["n"], 12 * c.scalars["n"])),
)

# --------------------------------------------------------------------------------------------------
# 2-D indexing
# --------------------------------------------------------------------------------------------------

TILE_X, TILE_Y = 32, 8


def _scale_case(rng, rows: int, cols: int, why: str, vis: str) -> Case:
    return Case(f"{rows} x {cols}", vis,
                {"a": uniform(rng, (rows, cols)), "row_scale": uniform(rng, rows, -2, 2),
                 "col_bias": uniform(rng, cols, -1, 1)},
                {"out": ((rows, cols), np.float32)}, {"rows": rows, "cols": cols}, why=why,
                large=rows * cols > 3_000_000)


def _scale_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        shapes = [(1, 1, "one element"), (1, 1000, "a single row"), (1000, 1, "a single column"),
                  (8, 32, "exactly one block"), (9, 31, "one row past a block, one column short of it"),
                  (33, 65, "one past a block in both directions"),
                  (257, 129, "not square: rows and columns must not be swapped"),
                  (1000, 777, "many blocks, ragged edges"), (2049, 2047, "large")]
    else:
        shapes = [(int(rng.integers(2, 9)), off_multiple(rng, 40, 3000, 32), "a few long rows"),
                  (off_multiple(rng, 40, 3000, 8), int(rng.integers(2, 31)), "many short rows"),
                  (random_prime(rng, 100, 700), random_prime(rng, 100, 700), "prime sides"),
                  (near_multiple(rng, 512, 1500, 8), near_multiple(rng, 512, 1500, 32), "one off the tile")]
    return [_scale_case(rng, r, c, why, vis) for r, c, why in shapes]


def _scale_launch(ctx: LaunchContext) -> None:
    rows, cols = ctx["rows"], ctx["cols"]
    ctx.kernel()((blocks(cols, TILE_X), blocks(rows, TILE_Y)), (TILE_X, TILE_Y),
                 (ctx["a"], ctx["row_scale"], ctx["col_bias"], ctx["out"], rows, cols))


def _scale_reference(case: Case) -> dict:
    a = case.inputs["a"].astype(np.float64)
    s = case.inputs["row_scale"].astype(np.float64)[:, None]
    b = case.inputs["col_bias"].astype(np.float64)[None, :]
    return {"out": Expected(a * s + b, atol=4 * U32 * (abs(a * s) + abs(b)) + 1e-30)}


SCALE_2D = Exercise(
    id="gpu_architecture/scale_rows_2d",
    title="A 2-D kernel: scale every row, shift every column",
    kind="write",
    kernels=(KernelSpec("scale_rows_add_cols", "(const float* a, const float* row_scale, const float* col_bias, "
                                               "float* out, int rows, int cols)"),),
    launch_text=("blocks of 32 x 8 threads (blockDim.x = 32 along the columns, blockDim.y = 8 along the rows) and "
                 "a grid of ceil(cols / 32) x ceil(rows / 8) blocks: one thread per element."),
    make_cases=_scale_cases, launch=_scale_launch, reference=_scale_reference,
    points=Points(public=4, hidden=6, perf=0),
)

# --------------------------------------------------------------------------------------------------
# Occupancy by hand, then CUDA's own answer
# --------------------------------------------------------------------------------------------------

# (label, threads per block, registers per thread, shared memory per block in bytes)
OCCUPANCY_CONFIGS = (
    ("A", 256, 32, 0),
    ("B", 32, 16, 0),
    ("C", 256, 128, 0),
    ("D", 128, 32, 20 * 1024),
    ("E", 1024, 64, 0),
)


def _occupancy_questions() -> tuple[Question, ...]:
    from kernels.occupancy import occupancy

    questions = []
    for label, threads, regs, smem in OCCUPANCY_CONFIGS:
        occ = occupancy(threads, regs, smem, "7.5")
        what = f"{threads} threads/block, {regs} registers/thread" + (f", {smem // 1024} KB shared" if smem else "")
        questions.append(Question(f"{label}_blocks", f"{label} ({what}): resident blocks per SM",
                                  occ.blocks_per_sm))
        questions.append(Question(f"{label}_occupancy_percent", f"{label}: occupancy in percent",
                                  round(100 * occ.occupancy, 2), abs_tol=0.6))
        limits = occ.block_limits
        if list(limits.values()).count(occ.blocks_per_sm) == 1:  # ask only where one resource decides
            synonyms = {"warps": ("warps", "threads", "warp slots", "thread slots"),
                        "blocks": ("blocks", "block slots", "blocks per sm"),
                        "registers": ("registers", "regs", "register file"),
                        "shared memory": ("shared memory", "shared", "smem")}[occ.limiter]
            questions.append(Question(f"{label}_limiter", f"{label}: which resource limits it", synonyms))
    return tuple(questions)


def _occupancy_measure(prediction: dict) -> list:
    from kernels.device import device_info
    from kernels.occupancy import check_against_cuda

    from ..predict import MeasuredRow

    cc = str(device_info().compute_capability)
    rows = check_against_cuda(cases=tuple((t, r, s) for _, t, r, s in OCCUPANCY_CONFIGS))
    note = "" if cc == "7.5" else f"this GPU has compute capability {cc}, not the T4's 7.5: expect differences"
    out = []
    for (label, threads, regs, smem), row in zip(OCCUPANCY_CONFIGS, rows):
        out.append(MeasuredRow(f"{label}: blocks per SM (CUDA's occupancy calculator, {row['registers']} registers "
                               f"as compiled)", prediction.get(f"{label}_blocks"), row["cuda blocks/SM"], note))
    return out


OCCUPANCY = Exercise(
    id="gpu_architecture/occupancy_predict",
    title="Predict occupancy on a T4, then ask CUDA",
    kind="predict",
    questions=_occupancy_questions(),
    measure=_occupancy_measure,
)

EXERCISES = [AXPBY, SCALE_2D, OCCUPANCY]
