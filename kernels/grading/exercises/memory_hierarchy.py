"""Exercises of the "Memory hierarchy" chapter: a shared-memory stencil, and bank conflicts by hand."""
from __future__ import annotations

import numpy as np

from ...traffic.banks import conflict_ways
from ..cases import off_multiple, random_prime, uniform
from ..spec import Case, Exercise, Expected, KernelSpec, LaunchContext, Points, Question
from . import U32, blocks

# --------------------------------------------------------------------------------------------------
# A 7-point stencil through shared memory
# --------------------------------------------------------------------------------------------------

RADIUS = 3
ST_BLOCK = 256


def _stencil_case(rng, n: int, why: str, vis: str) -> Case:
    w = uniform(rng, 2 * RADIUS + 1, -1, 1)
    return Case(f"n = {n:,}", vis, {"x": uniform(rng, n, -10, 10), "w": w}, {"y": ((n,), np.float32)}, {"n": n},
                why=why, large=n > 2_000_000)


def _stencil_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, "one element: every neighbour is clamped to it"), (2, "two elements"),
                (3, "as long as the radius: both halos clamped in every thread"),
                (7, "shorter than the stencil"), (255, "one partial block"), (256, "exactly one block"),
                (257, "a halo that reaches into the next block"),
                (513, "one element past two blocks: its left halo is in the block before"), (10_007, "a prime"),
                (1_000_003, "many blocks"), (4_000_037, "large")]
    else:
        spec = [(int(rng.integers(3, 6)), "shorter than the stencil"),
                (off_multiple(rng, 300, 50_000, 256), "ragged"), (random_prime(rng, 50_000, 700_000), "a prime")]
    return [_stencil_case(rng, n, why, vis) for n, why in spec]


def _stencil_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    ctx.kernel()((blocks(n, ST_BLOCK),), (ST_BLOCK,), (ctx["x"], ctx["w"], ctx["y"], n),
                 shared_mem=(ST_BLOCK + 2 * RADIUS) * 4)


def _stencil_reference(case: Case) -> dict:
    x = case.inputs["x"].astype(np.float64)
    w = case.inputs["w"].astype(np.float64)
    n = x.size
    idx = np.clip(np.arange(n)[:, None] + np.arange(-RADIUS, RADIUS + 1)[None, :], 0, n - 1)
    terms = w[None, :] * x[idx]
    return {"y": Expected(terms.sum(axis=1), atol=(2 * RADIUS + 3) * U32 * np.abs(terms).sum(axis=1) + 1e-30)}


STENCIL = Exercise(
    id="memory_hierarchy/stencil_shared",
    title="A 7-point stencil through shared memory",
    kind="write",
    kernels=(KernelSpec("stencil7", "(const float* x, const float* w, float* y, int n)"),),
    launch_text=("blocks of 256 threads, a grid of ceil(n / 256) blocks, and (256 + 6) * 4 bytes of dynamic shared "
                 "memory per block (declare it as extern __shared__ float tile[]; or use a static array)."),
    make_cases=_stencil_cases, launch=_stencil_launch, reference=_stencil_reference,
    points=Points(public=4, hidden=6, perf=0),
)

# --------------------------------------------------------------------------------------------------
# Bank conflicts by hand
# --------------------------------------------------------------------------------------------------


LANES = range(32)
# (key, the access, the words that lanes 0..31 read)
BANK_PATTERNS = (
    ("a", "s[lane]", [l for l in LANES]),
    ("b", "s[2 * lane]", [2 * l for l in LANES]),
    ("c", "s[3 * lane]", [3 * l for l in LANES]),
    ("d", "s[16 * lane]", [16 * l for l in LANES]),
    ("e", "s[32 * lane]", [32 * l for l in LANES]),
    ("f", "s[lane / 2]  (integer division)", [l // 2 for l in LANES]),
    ("g", "s[(8 * lane) % 32]", [(8 * l) % 32 for l in LANES]),
    ("h", "tile[lane][5] with float tile[32][32]", [32 * l + 5 for l in LANES]),
    ("i", "tile[lane][5] with float tile[32][33]", [33 * l + 5 for l in LANES]),
    ("j", "tile[lane][5] with float tile[32][34]", [34 * l + 5 for l in LANES]),
)
MEASURED_STRIDES = {"a": 1, "b": 2, "c": 3, "d": 16, "e": 32}


def _bank_questions() -> tuple[Question, ...]:
    return tuple(Question(f"{key}_ways", f"{access}: conflict degree (1 = conflict-free)", conflict_ways(words))
                 for key, access, words in BANK_PATTERNS)


def _bank_measure(prediction: dict) -> list:
    import cupy

    import kernels

    from ..predict import MeasuredRow

    kernel = kernels.load_kernel("memory_hierarchy/bank_stride.cu", "bank_stride")
    table = cupy.arange(1024, dtype=cupy.float32)
    blocks_, threads, iters = 4 * kernels.device_info().sm_count, 256, 4096
    out = cupy.empty(blocks_ * threads, dtype=cupy.float32)
    times = {}
    for key, stride in MEASURED_STRIDES.items():
        t = kernels.benchmark(lambda s=stride: kernel((blocks_,), (threads,), (table, s, iters, out)),
                              warmup=2, repeat=10, flush_l2=False)
        times[key] = t.median_ms
    return [MeasuredRow(f"{key}: time relative to s[lane] (bank_stride, stride {MEASURED_STRIDES[key]})",
                        prediction.get(f"{key}_ways"), round(times[key] / times["a"], 2),
                        "a k-way conflict takes about k times as long") for key in MEASURED_STRIDES]


BANK_CONFLICTS = Exercise(
    id="memory_hierarchy/bank_conflicts_predict",
    title="Predict shared-memory bank conflicts",
    kind="predict",
    questions=_bank_questions(),
    measure=_bank_measure,
)

EXERCISES = [STENCIL, BANK_CONFLICTS]
