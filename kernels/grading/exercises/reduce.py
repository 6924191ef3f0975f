"""Exercises of the "Reduce" chapter: argmax with ties, an exact integer sum at speed, a buggy dot product."""
from __future__ import annotations

import numpy as np

from ..cases import integers, off_multiple, random_prime, uniform
from ..spec import Case, Exercise, Expected, KernelSpec, LaunchContext, PerfSpec, Points
from . import U32, blocks

RED_BLOCK = 256

# --------------------------------------------------------------------------------------------------
# Argmax: per-block (max, first index), finished on the host
# --------------------------------------------------------------------------------------------------


def argmax_grid(n: int) -> int:
    return min(blocks(n, 4 * RED_BLOCK), 64)


def _argmax_values(rng, n: int, kind: str) -> np.ndarray:
    if kind == "ties":
        return integers(rng, n, -2, 2).astype(np.float32)
    if kind == "negative":
        return uniform(rng, n, -1e6, -1)
    if kind == "very negative":  # below the finite stand-ins for minus infinity kernels use (-1e30f, -1e38f)
        return uniform(rng, n, -3.4e38, -1e38)
    if kind == "-inf":
        return np.full(n, -np.inf, dtype=np.float32)
    if kind == "max at the end":
        x = uniform(rng, n, -1, 1)
        x[-1] = 2.0
        return x
    return uniform(rng, n, -1e3, 1e3)


def _argmax_case(rng, n: int, kind: str, why: str, vis: str) -> Case:
    g = argmax_grid(n)
    return Case(f"n = {n:,}, {kind}", vis, {"x": _argmax_values(rng, n, kind)},
                {"block_max": ((g,), np.float32), "block_arg": ((g,), np.int32)}, {"n": n}, why=why,
                large=n > 3_000_000)


def _argmax_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, "spread", "one element"), (5, "-inf", "every element is -infinity: the answer is index 0"),
                (33, "very negative", "every element below -1e38: a finite stand-in for -infinity is no identity"),
                (300, "negative", "all negative: 0 is not the identity"),
                (1_000, "ties", "ties: the smallest index wins"),
                (1_025, "-inf", "every element is -infinity, two blocks: still index 0"),
                (4_099, "max at the end", "the last element"),
                (100_003, "ties", "ties across blocks"), (1_000_003, "spread", "many elements per thread"),
                (5_000_011, "ties", "large")]
    else:
        spec = [(int(rng.integers(2, 64)), "ties", "few, with ties"),
                (off_multiple(rng, 2_000, 60_000, 1024), "negative", "negative, ragged"),
                (int(rng.integers(2, 5_000)), "-inf", "every element is -infinity"),
                (int(rng.integers(2, 3_000)), "very negative", "every element below -1e38"),
                (random_prime(rng, 100_000, 900_000), "ties", "a prime, ties"),
                (random_prime(rng, 1_000, 90_000), "max at the end", "the last element")]
    return [_argmax_case(rng, n, kind, why, vis) for n, kind, why in spec]


def _argmax_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    ctx.kernel()((argmax_grid(n),), (RED_BLOCK,), (ctx["x"], n, ctx["block_max"], ctx["block_arg"]))


def _argmax_finish(case: Case, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The host's last step: the best block wins; a block's answer must be a real element."""
    x = case.inputs["x"]
    vals, args = raw["block_max"].astype(np.float64), raw["block_arg"].astype(np.int64)
    inconsistent = 0
    best_v, best_i = -np.inf, -1
    for v, i in zip(vals, args):
        if i < 0:
            inconsistent += int(not (v == -np.inf))
            continue
        if i >= x.size or x[i] != v:
            inconsistent += 1
            continue
        if best_i < 0 or v > best_v or (v == best_v and i < best_i):
            best_v, best_i = v, i
    return {"max": np.array([best_v]), "argmax": np.array([best_i]), "inconsistent_blocks": np.array([inconsistent])}


def _argmax_reference(case: Case) -> dict:
    x = case.inputs["x"].astype(np.float64)
    i = int(np.argmax(x))
    return {"max": np.array([x[i]]), "argmax": np.array([i]), "inconsistent_blocks": np.array([0])}


BLOCK_ARGMAX = Exercise(
    id="reduce/block_argmax",
    title="Argmax: the largest element and where it is",
    kind="write",
    kernels=(KernelSpec("block_argmax", "(const float* x, int n, float* block_max, int* block_arg)"),),
    launch_text=("blocks of 256 threads and a grid of min(ceil(n / 1024), 64) blocks; block_max and block_arg have "
                 "one element per block. The host then picks the best block (largest value, then smallest index)."),
    make_cases=_argmax_cases, launch=_argmax_launch, reference=_argmax_reference, derive=_argmax_finish,
    points=Points(public=4, hidden=6, perf=0),
)

# --------------------------------------------------------------------------------------------------
# An exact sum of int32 values with 64-bit partial sums, at the copy ceiling
# --------------------------------------------------------------------------------------------------


def sum_grid(n: int) -> int:
    return min(blocks(n, 8 * RED_BLOCK), 1024)


def _sum_values(rng, n: int, kind: str) -> np.ndarray:
    if kind == "small":
        return integers(rng, n, -1000, 1000)
    if kind == "int32 max":
        return np.full(n, 2**31 - 1, dtype=np.int32)
    if kind == "int32 min":
        return np.full(n, -2**31, dtype=np.int32)
    return integers(rng, n, -2**31, 2**31 - 1)


def _sum_case(rng, n: int, kind: str, why: str, vis: str, large: bool | None = None) -> Case:
    return Case(f"n = {n:,}, {kind}", vis, {"x": _sum_values(rng, n, kind)}, {"partial": ((sum_grid(n),), np.int64)},
                {"n": n}, why=why, large=n > 3_000_000 if large is None else large)


def _sum_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, "small", "one element"), (2, "int32 max", "a sum past 2^31 already"),
                (33, "int32 min", "every value -2^31: a sum below -2^31"),
                (1_000, "small", "small values"), (4_099, "full range", "values up to 2^31"),
                (65_537, "int32 max", "a sum near 2^47"), (1_000_003, "full range", "many elements per thread"),
                (2_100_003, "full range", "past 2^21: the grid stops at 1024 blocks, so a thread needs more than "
                                          "eight elements"),
                (16_777_259, "full range", "large")]
    else:
        spec = [(int(rng.integers(3, 300)), "full range", "a few large values"),
                (off_multiple(rng, 5_000, 200_000, 2048), "int32 max", "ragged, every value 2^31 - 1"),
                (off_multiple(rng, 100, 5_000, 4), "int32 min", "every value -2^31"),
                (random_prime(rng, 300_000, 2_000_000), "full range", "a prime"),
                (int(rng.integers(2_100_000, 2_900_000)), "full range", "past the 1024-block cap")]
    return [_sum_case(rng, n, kind, why, vis) for n, kind, why in spec]


def _sum_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    ctx.kernel()((sum_grid(n),), (RED_BLOCK,), (ctx["x"], n, ctx["partial"]))


def _sum_finish(case: Case, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"sum": np.array([int(raw["partial"].astype(np.int64).sum())], dtype=np.int64)}


def _sum_reference(case: Case) -> dict:
    return {"sum": np.array([int(case.inputs["x"].astype(np.int64).sum())], dtype=np.int64)}


def _sum_perf_case(rng, sm_count: int) -> Case:
    return _sum_case(rng, 1 << 26, "full range", "2^26 elements", "perf", large=True)


SUM_INT64 = Exercise(
    id="reduce/sum_int64",
    title="Sum of int32 values, exact, at the copy ceiling",
    kind="write",
    kernels=(KernelSpec("sum_partials", "(const int* x, int n, long long* partial)"),),
    launch_text=("blocks of 256 threads and a grid of min(ceil(n / 2048), 1024) blocks; partial has one element "
                 "per block, and the host adds the partial sums (as 64-bit integers)."),
    make_cases=_sum_cases, launch=_sum_launch, reference=_sum_reference, derive=_sum_finish,
    perf=PerfSpec(case=_sum_perf_case, metric="GB/s", work=lambda c: 4 * c.scalars["n"], baseline="copy",
                  target=0.7, describe="4 bytes per element read (the partial sums are negligible)",
                  roofline=lambda c: (float(c.scalars["n"]), 4.0 * c.scalars["n"])),
)

# --------------------------------------------------------------------------------------------------
# Fix the bugs: a dot product with three common bugs
# --------------------------------------------------------------------------------------------------


def dot_grid(n: int) -> int:
    return min(blocks(n, RED_BLOCK), 128)


def _dot_case(rng, n: int, why: str, vis: str) -> Case:
    return Case(f"n = {n:,}", vis, {"x": uniform(rng, n, -1, 1), "y": uniform(rng, n, -1, 1)},
                {"partial": ((dot_grid(n),), np.float32)}, {"n": n}, why=why, large=n > 3_000_000)


def _dot_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, "one element"), (33, "one warp and one element"), (200, "less than a block"),
                (256, "exactly one block"), (257, "one element into a second block"),
                (32_769, "one element past the 128 x 256 threads of the grid"), (33_000, "past the 128-block grid"),
                (1_000_003, "many elements per thread"), (8_000_009, "large")]
    else:
        spec = [(int(rng.integers(2, 256)), "one block"), (off_multiple(rng, 300, 30_000, 256), "ragged"),
                (random_prime(rng, 40_000, 900_000), "a prime")]
    return [_dot_case(rng, n, why, vis) for n, why in spec]


def _dot_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    ctx.kernel()((dot_grid(n),), (RED_BLOCK,), (ctx["x"], ctx["y"], n, ctx["partial"]))


def _dot_finish(case: Case, raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"dot": np.array([raw["partial"].astype(np.float64).sum()])}


def _dot_reference(case: Case) -> dict:
    x = case.inputs["x"].astype(np.float64)
    y = case.inputs["y"].astype(np.float64)
    n = x.size
    depth = n / (dot_grid(n) * RED_BLOCK) + 2 * 8 + 2
    return {"dot": Expected(np.array([x @ y]), atol=depth * U32 * float(np.abs(x * y).sum()) + 1e-30)}


DOT = Exercise(
    id="reduce/dot_fix",
    title="Fix the bugs: a dot product",
    kind="fix",
    kernels=(KernelSpec("dot_partials", "(const float* x, const float* y, int n, float* partial)"),),
    launch_text=("blocks of 256 threads and a grid of min(ceil(n / 256), 128) blocks; partial has one element per "
                 "block, and the host adds them up."),
    make_cases=_dot_cases, launch=_dot_launch, reference=_dot_reference, derive=_dot_finish,
    points=Points(public=4, hidden=6, perf=0),
)

EXERCISES = [BLOCK_ARGMAX, SUM_INT64, DOT]
