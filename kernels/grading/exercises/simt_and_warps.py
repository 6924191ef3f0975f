"""Exercises of the "SIMT and warps" chapter: shuffles, ballots, and the warp-synchronous trap."""
from __future__ import annotations

import numpy as np

from ..cases import integers, off_multiple, random_prime, uniform
from ..spec import Case, Exercise, KernelSpec, LaunchContext, Points, Tolerance
from . import blocks

# --------------------------------------------------------------------------------------------------
# Warp max and argmax with shuffles
# --------------------------------------------------------------------------------------------------


def _groups(n: int) -> int:
    return -(-n // 32)


def _argmax_values(rng, n: int, kind: str) -> np.ndarray:
    if kind == "ties":
        return integers(rng, n, -3, 3).astype(np.float32)
    if kind == "negative":
        return uniform(rng, n, -1000, -1)
    if kind == "very negative":  # below the finite stand-ins for minus infinity kernels use (-1e30f, -1e38f)
        return uniform(rng, n, -3.4e38, -1e38)
    if kind == "-inf":
        # minus infinity in many places, and two groups made of nothing else: the first one and the last
        # (partial) one, where the lanes past n tie with the real elements and must lose the tie
        x = integers(rng, n, -3, 3).astype(np.float32)
        x[rng.random(n) < 0.5] = -np.inf
        x[:32] = -np.inf
        x[32 * ((n - 1) // 32):] = -np.inf
        return x
    return uniform(rng, n, -1e4, 1e4)


def _argmax_case(rng, n: int, kind: str, why: str, vis: str) -> Case:
    g = _groups(n)
    return Case(f"n = {n:,}, {kind}", vis, {"x": _argmax_values(rng, n, kind)},
                {"wmax": ((g,), np.float32), "warg": ((g,), np.int32)}, {"n": n}, why=why,
                large=n > 2_000_000)


def _argmax_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, "spread", "one element, one lane"), (31, "negative", "all negative: 0 is not the identity"),
                (32, "ties", "ties: the smallest index wins"), (33, "ties", "a warp with one element"),
                (33, "-inf", "groups of minus infinity, the last one a single element: the padding must lose the tie"),
                (65, "very negative", "every element below -1e38: padding with a finite stand-in for -infinity wins"),
                (1_000, "spread", "many warps, the last one partial"), (100_003, "ties", "ties in every warp"),
                (3_000_017, "spread", "large")]
    else:
        spec = [(int(rng.integers(2, 31)), "negative", "a partial warp of negatives"),
                (off_multiple(rng, 100, 5_000, 32), "ties", "ties, ragged"),
                (off_multiple(rng, 40, 3_000, 32), "-inf", "minus infinity, a last group of nothing else"),
                (off_multiple(rng, 2, 200, 32), "very negative", "every element below -1e38, a partial last group"),
                (random_prime(rng, 10_000, 400_000), "spread", "a prime"),
                (off_multiple(rng, 1_000, 100_000, 128), "negative", "negatives, ragged")]
    return [_argmax_case(rng, n, kind, why, vis) for n, kind, why in spec]


def _argmax_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    ctx.kernel()((blocks(n, 128),), (128,), (ctx["x"], ctx["wmax"], ctx["warg"], n))


def _argmax_reference(case: Case) -> dict:
    x = case.inputs["x"].astype(np.float64)
    n = x.size
    padded = np.full(_groups(n) * 32, -np.inf)
    padded[:n] = x
    groups = padded.reshape(-1, 32)
    return {"wmax": groups.max(axis=1), "warg": groups.argmax(axis=1) + 32 * np.arange(groups.shape[0])}


WARP_ARGMAX = Exercise(
    id="simt_and_warps/warp_argmax",
    title="Warp maximum and argmax with shuffles",
    kind="write",
    kernels=(KernelSpec("warp_argmax", "(const float* x, float* wmax, int* warg, int n)"),),
    launch_text="blocks of 128 threads (4 warps) and a grid of ceil(n / 128) blocks: one element per thread.",
    make_cases=_argmax_cases, launch=_argmax_launch, reference=_argmax_reference,
    points=Points(public=4, hidden=6, perf=0),
)

# --------------------------------------------------------------------------------------------------
# Warp compaction with a ballot
# --------------------------------------------------------------------------------------------------


def _compact_values(rng, n: int, kind: str) -> np.ndarray:
    if kind == "ties":  # multiples of 1/4 in [-1, 1], zeros of both signs: many elements equal the threshold
        k = integers(rng, n, -4, 4)
        x = (k / 4).astype(np.float32)
        x[(k == 0) & (rng.random(n) < 0.5)] = np.float32(-0.0)
        return x
    return uniform(rng, n, -1, 1)


def _compact_case(rng, n: int, threshold: float, why: str, vis: str, kind: str = "spread") -> Case:
    g = _groups(n)
    label = ", ties" if kind == "ties" else ""
    return Case(f"n = {n:,}, threshold {threshold:g}{label}", vis, {"x": _compact_values(rng, n, kind)},
                {"out": ((32 * g,), np.float32), "counts": ((g,), np.int32)},
                {"threshold": float(np.float32(threshold)), "n": n}, why=why, large=n > 2_000_000)


def _compact_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, 0.0, "one element", "spread"), (31, 2.0, "nothing selected", "spread"),
                (32, 0.25, "elements equal to the threshold are not greater: they stay out", "ties"),
                (33, -2.0, "everything selected", "spread"),
                (100, 0.0, "about half; zeros of both signs equal the threshold 0", "ties"),
                (1_000, 0.9, "few selected", "spread"), (100_003, 0.25, "many warps", "spread"),
                (2_500_001, -0.5, "large", "spread")]
    else:
        spec = [(int(rng.integers(2, 31)), float(rng.uniform(-1, 1)), "a partial warp", "spread"),
                (off_multiple(rng, 200, 9_000, 32), float(rng.uniform(-1, 1)), "ragged", "spread"),
                (off_multiple(rng, 40, 3_000, 32), float(rng.integers(-3, 4)) / 4, "elements equal to the threshold",
                 "ties"),
                (random_prime(rng, 20_000, 300_000), float(rng.uniform(-1, 1)), "a prime", "spread")]
    return [_compact_case(rng, n, t, why, vis, kind) for n, t, why, kind in spec]


def _compact_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    ctx.kernel()((blocks(n, 256),), (256,), (ctx["x"], ctx["out"], ctx["counts"], ctx["threshold"], n))


def _compact_reference(case: Case) -> dict:
    x = case.inputs["x"]
    t = case.scalars["threshold"]
    g = _groups(x.size)
    out = np.zeros(32 * g)
    counts = np.zeros(g, dtype=np.int64)
    for w in range(g):
        chunk = x[32 * w:32 * w + 32]
        chosen = chunk[chunk > np.float32(t)]
        out[32 * w:32 * w + chosen.size] = chosen
        counts[w] = chosen.size
    return {"out": out, "counts": counts}


WARP_COMPACT = Exercise(
    id="simt_and_warps/warp_compact",
    title="Keep the big ones: compaction inside a warp with a ballot",
    kind="write",
    kernels=(KernelSpec("warp_compact", "(const float* x, float* out, int* counts, float threshold, int n)"),),
    launch_text="blocks of 256 threads and a grid of ceil(n / 256) blocks: one element per thread.",
    make_cases=_compact_cases, launch=_compact_launch, reference=_compact_reference,
    points=Points(public=4, hidden=6, perf=0),
)

# --------------------------------------------------------------------------------------------------
# Fix the bug: the warp-synchronous tail of a block reduction
# --------------------------------------------------------------------------------------------------

SQ_BLOCK = 256


def _squares_case(rng, n: int, why: str, vis: str) -> Case:
    g = blocks(n, 2 * SQ_BLOCK)
    return Case(f"n = {n:,}", vis, {"x": uniform(rng, n, -2, 2)}, {"partial": ((g,), np.float32)}, {"n": n},
                tol=Tolerance(atol=1e-30, rtol=2e-6), why=why, large=n > 3_000_000)


def _squares_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, "one element"), (33, "one warp and one element"), (64, "less than a block"),
                (511, "one short of a block's slice"), (512, "exactly one block's slice"),
                (513, "one element into a second block"), (10_000, "several blocks"),
                (1_000_003, "many blocks"), (5_000_011, "large")]
    else:
        spec = [(int(rng.integers(2, 500)), "one block"), (off_multiple(rng, 600, 90_000, 512), "ragged"),
                (random_prime(rng, 100_000, 900_000), "a prime")]
    return [_squares_case(rng, n, why, vis) for n, why in spec]


def _squares_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    ctx.kernel()((blocks(n, 2 * SQ_BLOCK),), (SQ_BLOCK,), (ctx["x"], ctx["partial"], n))


def _squares_reference(case: Case) -> dict:
    x = case.inputs["x"].astype(np.float64)
    g = blocks(x.size, 2 * SQ_BLOCK)
    padded = np.zeros(g * 2 * SQ_BLOCK)
    padded[:x.size] = x
    return {"partial": (padded.reshape(g, -1) ** 2).sum(axis=1)}


BLOCK_SUM_SQUARES = Exercise(
    id="simt_and_warps/block_sum_squares_fix",
    title="Fix the bug: the warp-synchronous tail",
    kind="fix",
    kernels=(KernelSpec("block_sum_squares", "(const float* x, float* partial, int n)"),),
    launch_text=("blocks of 256 threads and a grid of ceil(n / 512) blocks: block b adds up the squares of "
                 "x[512 b] .. x[512 b + 511] (two elements per thread) into partial[b]."),
    make_cases=_squares_cases, launch=_squares_launch, reference=_squares_reference,
    points=Points(public=4, hidden=6, perf=0),
)

EXERCISES = [WARP_ARGMAX, WARP_COMPACT, BLOCK_SUM_SQUARES]
