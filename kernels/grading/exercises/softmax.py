"""Exercises of the "Softmax" chapter: a safe row softmax, the NaN softmaxes to fix, and LayerNorm."""
from __future__ import annotations

import numpy as np

from ..cases import off_multiple, random_prime, uniform
from ..spec import Case, Exercise, KernelSpec, LaunchContext, PerfSpec, Points, Tolerance
from . import blocks

ROW_BLOCK = 256
SOFTMAX_TOL = Tolerance(atol=1e-12, rtol=1e-4)


def softmax_reference(z: np.ndarray) -> np.ndarray:
    """Row softmax in float64; a row whose entries are all -inf gives zeros (the exercises' convention)."""
    z = np.asarray(z, dtype=np.float64)
    m = z.max(axis=1, keepdims=True)
    empty = ~np.isfinite(m) & (m < 0)
    e = np.exp(z - np.where(empty, 0.0, m))
    s = e.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.where(empty, 0.0, e / np.where(s == 0, 1.0, s))
    return y


def _logits(rng, rows: int, cols: int, kind: str) -> np.ndarray:
    x = uniform(rng, (rows, cols), -5, 5)
    if kind == "large":
        x += np.float32(1e4)
    elif kind == "negative":  # the row's maximum far below 0: exp(x) underflows to 0 for every entry
        x -= np.float32(1e4)
    elif kind == "masked":
        x[rng.random((rows, cols)) < 0.3] = -np.inf
        x[0, :] = -np.inf  # a fully masked row
        if rows > 1:
            x[1, 1:] = -np.inf
    elif kind == "equal":
        x[:] = np.float32(0.25)
    return x


def _softmax_case(rng, rows: int, cols: int, kind: str, why: str, vis: str, large: bool | None = None,
                  extra_scalars: dict | None = None) -> Case:
    return Case(f"{rows} x {cols}, {kind}", vis, {"x": _logits(rng, rows, cols, kind)},
                {"y": ((rows, cols), np.float32)}, {"rows": rows, "cols": cols, **(extra_scalars or {})},
                tol=SOFTMAX_TOL, why=why, large=rows * cols > 3_000_000 if large is None else large)


SOFTMAX_PUBLIC = [(3, 1, "normal", "rows of one element"), (5, 7, "normal", "rows shorter than a warp"),
                  (4, 32, "masked", "-inf entries and a fully masked row"), (9, 33, "large", "logits near 10^4"),
                  (5, 257, "negative", "logits near -10^4: the row maximum is far below 0, so 0 is no identity"),
                  (6, 256, "equal", "all equal"), (17, 1000, "normal", "long rows"),
                  (3, 4097, "masked", "long masked rows"), (8, 1000, "large", "long rows near 10^4"),
                  (1024, 4096, "normal", "large")]


def _softmax_hidden(rng) -> list[tuple[int, int, str, str]]:
    return [(int(rng.integers(1, 9)), int(rng.integers(2, 32)), "masked", "short masked rows"),
            (int(rng.integers(2, 20)), off_multiple(rng, 33, 3000, 32), "large", "large logits, ragged"),
            (int(rng.integers(2, 20)), int(rng.integers(1, 600)), "negative", "logits near -10^4"),
            (int(rng.integers(2, 20)), random_prime(rng, 300, 5000), "normal", "prime row length")]


# --------------------------------------------------------------------------------------------------
# Write a log-softmax (the chapter's online state, another output)
# --------------------------------------------------------------------------------------------------

LOG_SOFTMAX_TOL = Tolerance(atol=2e-5, rtol=2e-6)


def _softmax_launch(ctx: LaunchContext) -> None:
    rows, cols = ctx["rows"], ctx["cols"]
    ctx.kernel()((rows,), (ROW_BLOCK,), (ctx["x"], ctx["y"], rows, cols))


def _softmax_ref(case: Case) -> dict:
    return {"y": softmax_reference(case.inputs["x"])}


def log_softmax_reference(z: np.ndarray) -> np.ndarray:
    """Row log-softmax in float64; a row whose entries are all -inf gives -inf everywhere (log 0)."""
    z = np.asarray(z, dtype=np.float64)
    m = z.max(axis=1, keepdims=True)
    empty = ~np.isfinite(m) & (m < 0)
    shifted = z - np.where(empty, 0.0, m)
    with np.errstate(divide="ignore", invalid="ignore"):  # the masked rows: log 0, then -inf - -inf
        lse = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        return np.where(empty, -np.inf, shifted - lse)


def _log_softmax_cases(rng, vis: str) -> list[Case]:
    spec = SOFTMAX_PUBLIC if vis == "public" else _softmax_hidden(rng)
    cases = [_softmax_case(rng, r, c, kind, why, vis) for r, c, kind, why in spec]
    for case in cases:
        case.tol = LOG_SOFTMAX_TOL
    return cases


def _log_softmax_ref(case: Case) -> dict:
    return {"y": log_softmax_reference(case.inputs["x"])}


def _log_softmax_perf_case(rng, sm_count: int) -> Case:
    case = _softmax_case(rng, 8192, 4096, "normal", "8192 x 4096", "perf", large=True)
    case.tol = LOG_SOFTMAX_TOL
    return case


LOG_SOFTMAX = Exercise(
    id="softmax/log_softmax_rows",
    title="Log-softmax, one block per row",
    kind="write",
    kernels=(KernelSpec("log_softmax_rows", "(const float* x, float* y, int rows, int cols)"),),
    launch_text="blocks of 256 threads and a grid of rows blocks: block r computes row r, whatever its length.",
    make_cases=_log_softmax_cases, launch=_softmax_launch, reference=_log_softmax_ref,
    perf=PerfSpec(case=_log_softmax_perf_case, metric="GB/s", work=lambda c: 8 * c.scalars["rows"] * c.scalars["cols"],
                  baseline="copy", target=0.5, describe="8 bytes per element (x read once, y written once)",
                  repeat=10),
)

# --------------------------------------------------------------------------------------------------
# Fix the bug: softmax with a temperature, and no maximum subtracted
# --------------------------------------------------------------------------------------------------


def _temperature_cases(rng, vis: str) -> list[Case]:
    # (rows, cols, 1/T, why, logits): "negative" logits lie in [-3, -1.2], so with 1/T >= 100 every scaled
    # logit is below -120 and exp(x / T) underflows to 0 for every entry of the row
    if vis == "public":
        spec = [(4, 7, 1.0, "temperature 1", "spread"), (6, 33, 0.5, "temperature 2", "spread"),
                (3, 1, 100.0, "one element, T = 0.01", "spread"),
                (5, 100, 100.0, "T = 0.01: logits of +-300", "spread"),
                (7, 1000, 1000.0, "T = 0.001: logits of +-3000", "spread"),
                (4, 33, 100.0, "every scaled logit below -120: the maximum is far below 0, so 0 is no identity",
                 "negative"),
                (3, 257, 1000.0, "T = 0.001, every scaled logit below -1200", "negative"),
                (2, 4097, 30.0, "long rows, T = 1/30", "spread"), (2048, 2048, 100.0, "large", "spread")]
    else:
        spec = [(int(rng.integers(1, 8)), int(rng.integers(2, 64)), float(rng.uniform(50, 500)), "a small T", "spread"),
                (int(rng.integers(2, 8)), random_prime(rng, 300, 3000), float(rng.uniform(0.1, 2)), "an ordinary T",
                 "spread"),
                (int(rng.integers(2, 8)), off_multiple(rng, 100, 2000, 32), float(rng.uniform(500, 2000)),
                 "a tiny T", "spread"),
                (int(rng.integers(1, 8)), int(rng.integers(1, 600)), float(rng.uniform(100, 1000)),
                 "every scaled logit below -120", "negative")]
    cases = []
    for rows, cols, inv_t, why, kind in spec:
        inv_t = float(np.float32(inv_t))
        x = uniform(rng, (rows, cols), -3, -1.2) if kind == "negative" else uniform(rng, (rows, cols), -3, 3)
        cases.append(Case(f"{rows} x {cols}, 1/T = {inv_t:g}{', negative' if kind == 'negative' else ''}", vis,
                          {"x": x}, {"y": ((rows, cols), np.float32)}, {"rows": rows, "cols": cols, "inv_t": inv_t},
                          tol=temperature_tolerance(float(np.abs(x).max()) * inv_t), why=why,
                          large=rows * cols > 3_000_000))
    return cases


def temperature_tolerance(max_logit: float) -> Tolerance:
    """SOFTMAX_TOL widened by the rounding of the scaled logits.

    A kernel may compute ``x * inv_t - m`` with one fused multiply-add (NVRTC contracts it by
    default), which skips the rounding of ``x * inv_t`` that the reference does. That changes each
    exponent by up to half an ulp of the logit, eps32 / 2 * |z|, and each probability by up to twice
    that relative to its value (its own exponent and the sum's). At 1/T = 1000 and |x| <= 3 this is
    3.6e-4, larger than SOFTMAX_TOL's rtol, so the bound grows with the largest logit.
    """
    eps32 = float(np.finfo(np.float32).eps)
    return Tolerance(atol=SOFTMAX_TOL.atol, rtol=SOFTMAX_TOL.rtol + 2 * eps32 * max_logit)


def _temperature_launch(ctx: LaunchContext) -> None:
    rows, cols = ctx["rows"], ctx["cols"]
    ctx.kernel()((rows,), (ROW_BLOCK,), (ctx["x"], ctx["y"], ctx["inv_t"], rows, cols))


def _temperature_ref(case: Case) -> dict:
    z = case.inputs["x"] * np.float32(case.scalars["inv_t"])  # the kernel scales in float32, as the reference does
    return {"y": softmax_reference(z.astype(np.float32))}


SOFTMAX_TEMPERATURE = Exercise(
    id="softmax/softmax_overflow_fix",
    title="Fix the bug: softmax with a low temperature",
    kind="fix",
    kernels=(KernelSpec("softmax_temperature", "(const float* x, float* y, float inv_t, int rows, int cols)"),),
    launch_text="blocks of 256 threads and a grid of rows blocks: block r computes row r.",
    make_cases=_temperature_cases, launch=_temperature_launch, reference=_temperature_ref,
    points=Points(public=4, hidden=6, perf=0),
)

# --------------------------------------------------------------------------------------------------
# Fix the bugs: online softmax, one warp per row
# --------------------------------------------------------------------------------------------------

WARPS_PER_BLOCK = 8


def _online_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(3, 1, "normal", "one element per row: 31 empty lanes"),
                (9, 8, "normal", "8 elements: most lanes empty"), (5, 31, "masked", "-inf entries, a masked row"),
                (8, 32, "large", "logits near 10^4"), (10, 33, "normal", "one lane with two elements"),
                (9, 64, "negative", "logits near -10^4: the row maximum is far below 0, so 0 is no identity"),
                (11, 100, "masked", "masked, ragged"), (16, 1000, "large", "long rows"),
                (4, 4097, "normal", "long rows, the maximum moving"), (4099, 1000, "masked", "large")]
    else:
        spec = [(int(rng.integers(1, 20)), int(rng.integers(1, 31)), "masked", "short masked rows"),
                (int(rng.integers(1, 20)), off_multiple(rng, 33, 4000, 32), "large", "large logits"),
                (int(rng.integers(1, 20)), int(rng.integers(1, 600)), "negative", "logits near -10^4"),
                (int(rng.integers(9, 40)), random_prime(rng, 40, 900), "normal", "a prime")]
    return [_softmax_case(rng, r, c, kind, why, vis) for r, c, kind, why in spec]


def _online_launch(ctx: LaunchContext) -> None:
    rows, cols = ctx["rows"], ctx["cols"]
    ctx.kernel()((blocks(rows, WARPS_PER_BLOCK),), (32 * WARPS_PER_BLOCK,), (ctx["x"], ctx["y"], rows, cols))


ONLINE_SOFTMAX = Exercise(
    id="softmax/online_softmax_fix",
    title="Fix the bugs: the online softmax that returns NaN",
    kind="fix",
    kernels=(KernelSpec("online_softmax", "(const float* x, float* y, int rows, int cols)"),),
    launch_text="blocks of 256 threads (8 warps) and a grid of ceil(rows / 8) blocks: warp w of block b computes "
                "row 8 b + w.",
    make_cases=_online_cases, launch=_online_launch, reference=_softmax_ref,
    points=Points(public=4, hidden=6, perf=0),
)

# --------------------------------------------------------------------------------------------------
# LayerNorm that reads its row once, with Welford
# --------------------------------------------------------------------------------------------------

EPS = 1e-5
MAX_COLS = 4096  # 256 threads x 16 values in registers


def _layernorm_case(rng, rows: int, cols: int, offset: float, why: str, vis: str, constant: bool = False,
                    large: bool | None = None, spread: float = 1.7) -> Case:
    x = uniform(rng, (rows, cols), -spread, spread) + np.float32(offset)
    if constant:
        x[:] = np.float32(0.5)
    label = f", spread {spread:g}" if spread != 1.7 else ""
    return Case(f"{rows} x {cols}, offset {offset:g}{label}", vis,
                {"x": x.astype(np.float32), "gamma": uniform(rng, cols, 0.5, 1.5), "beta": uniform(rng, cols, -1, 1)},
                {"y": ((rows, cols), np.float32)}, {"rows": rows, "cols": cols, "eps": EPS},
                tol=Tolerance(atol=1e-4 + 4e-6 * abs(offset), rtol=1e-4), why=why,
                large=rows * cols > 3_000_000 if large is None else large)


def _layernorm_cases(rng, vis: str) -> list[Case]:
    # (rows, cols, offset, why, constant rows, spread: x is uniform in offset +- spread)
    if vis == "public":
        spec = [(3, 1, 0.0, "one element: the variance is 0", False, 1.7), (4, 7, 0.0, "short rows", False, 1.7),
                (5, 32, 0.0, "one warp", False, 1.7), (6, 33, 0.0, "one past a warp", False, 1.7),
                (4, 256, 0.0, "constant rows", True, 1.7),
                (4, 257, 0.0, "a spread of 0.003: the variance is below eps, which belongs inside the square root",
                 False, 0.003),
                (8, 768, 0.0, "a transformer width", False, 1.7),
                (4, 1000, 1000.0, "mean 1000, spread 1: cancellation", False, 1.7),
                (3, 4095, 0.0, "one short of the limit", False, 1.7),
                (2, 4096, 300.0, "the longest rows, mean 300", False, 1.7), (1024, 4096, 0.0, "large", False, 1.7)]
    else:
        spec = [(int(rng.integers(1, 9)), int(rng.integers(2, 40)), 0.0, "short rows", False, 1.7),
                (int(rng.integers(2, 9)), off_multiple(rng, 300, MAX_COLS, 32), float(rng.uniform(2000, 10000)),
                 "a large mean", False, 1.7),
                (int(rng.integers(2, 9)), int(rng.integers(32, 2000)), 0.0, "a variance below eps", False,
                 float(rng.uniform(0.001, 0.004))),
                (int(rng.integers(2, 9)), random_prime(rng, 100, MAX_COLS), 0.0, "a prime width", False, 1.7)]
    return [_layernorm_case(rng, r, c, off, why, vis, const, spread=sp) for r, c, off, why, const, sp in spec]


def _layernorm_launch(ctx: LaunchContext) -> None:
    rows, cols = ctx["rows"], ctx["cols"]
    ctx.kernel()((rows,), (ROW_BLOCK,), (ctx["x"], ctx["gamma"], ctx["beta"], ctx["y"], rows, cols, ctx["eps"]))


def _layernorm_ref(case: Case) -> dict:
    x = case.inputs["x"].astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    eps = float(np.float32(case.scalars["eps"]))
    y = (x - mean) / np.sqrt(var + eps)
    return {"y": y * case.inputs["gamma"].astype(np.float64) + case.inputs["beta"].astype(np.float64)}


def _layernorm_perf_case(rng, sm_count: int) -> Case:
    return _layernorm_case(rng, 8192, MAX_COLS, 0.0, "8192 x 4096", "perf", large=True)


LAYERNORM = Exercise(
    id="softmax/layernorm_welford",
    title="LayerNorm that reads each row once (Welford in registers)",
    kind="write",
    kernels=(KernelSpec("layernorm", "(const float* x, const float* gamma, const float* beta, float* y, int rows, "
                                     "int cols, float eps)"),),
    launch_text=(f"blocks of 256 threads and a grid of rows blocks: block r normalises row r. Rows have at most "
                 f"{MAX_COLS} elements (16 per thread)."),
    make_cases=_layernorm_cases, launch=_layernorm_launch, reference=_layernorm_ref,
    perf=PerfSpec(case=_layernorm_perf_case, metric="GB/s", work=lambda c: 8 * c.scalars["rows"] * c.scalars["cols"],
                  baseline="copy", target=0.6, describe="8 bytes per element (x read once, y written once)",
                  repeat=10),
)

EXERCISES = [LOG_SOFTMAX, SOFTMAX_TEMPERATURE, ONLINE_SOFTMAX, LAYERNORM]
