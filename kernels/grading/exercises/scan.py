"""Exercises of the "Scan" chapter: the float scan of ints, and a scan of every row of a matrix."""
from __future__ import annotations

import numpy as np

from ..cases import integers, off_multiple, random_prime
from ..spec import Case, Exercise, KernelSpec, LaunchContext, Points
from . import blocks

SCAN_BLOCK = 256

# --------------------------------------------------------------------------------------------------
# Fix the bug: a shuffle scan that carries ints in a float
# --------------------------------------------------------------------------------------------------


SMALL, BIG = (-100, 100), (999_000, 1_001_000)
HUGE = (2**24 + 1, 2**24 + 4096)  # magnitudes past 2^24: a float holds only the even ones exactly


def _tile_values(rng, n: int, values: tuple[int, int]) -> np.ndarray:
    if values == HUGE:
        # alternating signs keep every prefix sum of a tile within about 2^24 + 2^20, far from the ends of an
        # int, while each element on its own is already too large to pass through a float unchanged
        signs = np.where((np.arange(n) + int(rng.integers(0, 2))) % 2 == 0, 1, -1)
        return (signs * integers(rng, n, *values, dtype=np.int64)).astype(np.int32)
    return integers(rng, n, *values)


def _tile_case(rng, n: int, values: tuple[int, int], why: str, vis: str) -> Case:
    g = blocks(n, SCAN_BLOCK)
    label = f"values ±{values[0]:,}..{values[1]:,}" if values == HUGE else f"values {values[0]:,}..{values[1]:,}"
    return Case(f"n = {n:,}, {label}", vis, {"x": _tile_values(rng, n, values)},
                {"y": ((n,), np.int32), "block_sums": ((g,), np.int32)}, {"n": n}, why=why, large=n > 3_000_000)


def _tile_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, SMALL, "one element"), (31, SMALL, "less than a warp"),
                (33, HUGE, "elements past 2^24, signs alternating: each value is exact only in an int"),
                (256, SMALL, "exactly one tile"), (257, SMALL, "one element in a second tile"),
                (513, HUGE, "elements past 2^24 in three tiles"), (1_000, BIG, "sums past 2^24"),
                (100_003, BIG, "many tiles, sums past 2^24"), (4_000_037, BIG, "large")]
    else:
        spec = [(int(rng.integers(2, 256)), BIG, "one tile, large values"),
                (off_multiple(rng, 300, 30_000, 256), SMALL, "ragged, small values"),
                (int(rng.integers(2, 2_000)), HUGE, "elements past 2^24"),
                (random_prime(rng, 30_000, 600_000), BIG, "a prime, large values")]
    return [_tile_case(rng, n, v, why, vis) for n, v, why in spec]


def _tile_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    ctx.kernel()((blocks(n, SCAN_BLOCK),), (SCAN_BLOCK,), (ctx["x"], ctx["y"], ctx["block_sums"], n))


def _tile_reference(case: Case) -> dict:
    x = case.inputs["x"].astype(np.int64)
    n = x.size
    g = blocks(n, SCAN_BLOCK)
    padded = np.zeros(g * SCAN_BLOCK, dtype=np.int64)
    padded[:n] = x
    scans = np.cumsum(padded.reshape(g, -1), axis=1)
    return {"y": scans.reshape(-1)[:n], "block_sums": scans[:, -1]}


BLOCK_SCAN = Exercise(
    id="scan/block_scan_fix",
    title="Fix the bug: a scan of ints that goes through float",
    kind="fix",
    kernels=(KernelSpec("block_inclusive_scan", "(const int* x, int* y, int* block_sums, int n)"),),
    launch_text=("blocks of 256 threads and a grid of ceil(n / 256) blocks: block b scans x[256 b] .. x[256 b + 255] "
                 "(an inclusive scan of its own tile) and writes the tile's total to block_sums[b]."),
    make_cases=_tile_cases, launch=_tile_launch, reference=_tile_reference,
    points=Points(public=4, hidden=6, perf=0),
)

# --------------------------------------------------------------------------------------------------
# An exclusive scan of every row
# --------------------------------------------------------------------------------------------------


def _rows_case(rng, rows: int, cols: int, values: tuple[int, int], why: str, vis: str) -> Case:
    return Case(f"{rows:,} x {cols:,}", vis, {"a": integers(rng, (rows, cols), *values)},
                {"out": ((rows, cols), np.int32)}, {"rows": rows, "cols": cols}, why=why,
                large=rows * cols > 3_000_000)


FULL = (-2**31, 2**31 - 1)


def _rows_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, 1, SMALL, "one element: the answer is 0"), (1, 1000, SMALL, "one long row"),
                (4, 31, FULL, "rows shorter than a warp, wrapping sums"),
                (3, 33, FULL, "one element past a warp, wrapping sums"),
                (3, 255, SMALL, "rows shorter than the block"), (5, 256, SMALL, "rows of exactly one block"),
                (7, 257, SMALL, "one element past the block"), (2, 512, SMALL, "rows of exactly two chunks"),
                (2, 513, FULL, "one element past two chunks"), (100, 1000, SMALL, "many rows"),
                (2, 100_003, FULL, "long rows, sums that wrap around 2^32"), (1000, 4097, SMALL, "large")]
    else:
        spec = [(int(rng.integers(1, 20)), off_multiple(rng, 2, 255, 32), FULL, "short rows, wrapping sums"),
                (int(rng.integers(2, 50)), off_multiple(rng, 257, 5000, 256), SMALL, "ragged rows"),
                (int(rng.integers(1, 4)), random_prime(rng, 30_000, 200_000), FULL, "long prime rows")]
    return [_rows_case(rng, r, c, v, why, vis) for r, c, v, why in spec]


def _rows_launch(ctx: LaunchContext) -> None:
    rows, cols = ctx["rows"], ctx["cols"]
    ctx.kernel()((rows,), (SCAN_BLOCK,), (ctx["a"], ctx["out"], rows, cols))


def _rows_reference(case: Case) -> dict:
    a = case.inputs["a"].astype(np.int64)
    exclusive = np.cumsum(a, axis=1) - a
    wrapped = (exclusive + 2**31) % 2**32 - 2**31  # int32 arithmetic wraps around
    return {"out": wrapped}


ROW_SCAN = Exercise(
    id="scan/row_exclusive_scan",
    title="An exclusive scan of every row",
    kind="write",
    kernels=(KernelSpec("row_exclusive_scan", "(const int* a, int* out, int rows, int cols)"),),
    launch_text="blocks of 256 threads and a grid of rows blocks: block r scans row r, whatever its length.",
    make_cases=_rows_cases, launch=_rows_launch, reference=_rows_reference,
    points=Points(public=4, hidden=6, perf=0),
)

EXERCISES = [BLOCK_SCAN, ROW_SCAN]
