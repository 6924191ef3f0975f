"""Is the kernel right? Run it on fresh random inputs and compare with a float64 NumPy reference.

What makes a check trustworthy, and what this module does about it:
- fresh inputs every call (the seed is recorded, so a failure can be replayed; COURSE_CHECK_SEED
  fixes the default seed, as the course's tests do);
- outputs filled with NaN (or an integer sentinel) before the launch, so an element the kernel never
  wrote cannot pass by accident;
- a relative error over the whole output for floats (float32 rounding is expected), exact equality
  for integers;
- the inputs are compared bit for bit after the launch, because a kernel must not scribble on them.
"""
from __future__ import annotations

import html
import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

MAX_LISTED = 5
SEED_ENV = "COURSE_CHECK_SEED"   # an integer: the seed of every check that is given none (tests set it)


@dataclass(frozen=True)
class Rand:
    """A recipe for a random input: shape, dtype and range. Integers are drawn from [low, high]."""

    shape: tuple[int, ...]
    dtype: np.dtype
    low: float = -1.0
    high: float = 1.0

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        if np.issubdtype(self.dtype, np.integer):
            info = np.iinfo(self.dtype)
            low = max(int(np.ceil(self.low)), info.min)
            high = min(int(np.floor(self.high)), info.max)
            return rng.integers(low, high, size=self.shape, dtype=self.dtype, endpoint=True)
        if np.issubdtype(self.dtype, np.floating):
            return rng.uniform(self.low, self.high, size=self.shape).astype(self.dtype)
        raise TypeError(f"rand() supports integer and floating dtypes, not {self.dtype}")


def rand(shape: int | tuple[int, ...], dtype: Any = np.float32, low: float = -1.0,
         high: float = 1.0) -> Rand:
    """Describe a random input for check(): uniform in [low, high) (floats) or [low, high] (integers)."""
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
    if low > high:
        raise ValueError(f"low ({low}) must not exceed high ({high})")
    return Rand(shape, np.dtype(dtype), float(low), float(high))


@dataclass
class OutputCheck:
    """The verdict on one output array."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    tol: float
    exact: bool  # integers: compared for equality
    rel_error: float  # ||got - ref|| / ||ref|| over the finite elements (absolute norm if ref is 0)
    unwritten: int  # poison left in place, or NaN/Inf where the reference is finite
    mismatched: int  # elements that differ (integers) or fall outside tol (floats)
    first_mismatches: list[tuple[tuple[int, ...], Any, Any]] = field(default_factory=list)
    problem: str = ""  # e.g. a shape the reference disagrees with

    @property
    def ok(self) -> bool:
        if self.problem or self.unwritten:
            return False
        if self.exact:
            return self.mismatched == 0
        return bool(self.rel_error <= self.tol)

    def error_text(self) -> str:
        if self.exact:
            return "exact" if self.mismatched == 0 else f"{self.mismatched} differ"
        return f"{self.rel_error:.2e}" if np.isfinite(self.rel_error) else "n/a"

    def mismatch_text(self) -> str:
        return "; ".join(f"[{', '.join(map(str, idx))}] got {got!r}, expected {exp!r}"
                         for idx, got, exp in self.first_mismatches)


@dataclass
class CheckReport:
    """Per-output verdicts of one check() call, with the seed that reproduces it."""

    outputs: list[OutputCheck]
    seed: int
    modified_inputs: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.modified_inputs and all(o.ok for o in self.outputs)

    def __bool__(self) -> bool:  # so that `assert check(...)` means what it says
        return self.ok

    def __str__(self) -> str:
        lines = [f"check {'PASSED' if self.ok else 'FAILED'} (seed={self.seed})"]
        for o in self.outputs:
            tol = "exact" if o.exact else f"tol {o.tol:.0e}"
            line = (f"  {o.name} {o.shape} {o.dtype}: {'ok' if o.ok else 'FAIL'}; "
                    f"rel. error {o.error_text()} ({tol}), unwritten {o.unwritten}")
            if o.problem:
                line += f"; {o.problem}"
            lines.append(line)
            if not o.ok and o.first_mismatches:
                lines.append(f"    first mismatches: {o.mismatch_text()}")
        if self.modified_inputs:
            lines.append(f"  inputs modified by the kernel: {', '.join(self.modified_inputs)}")
        if not self.ok:
            lines.append(f"  reproduce with check(..., seed={self.seed})")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = ("<tr><th>output</th><th>shape</th><th>rel. error</th><th>tol</th><th>unwritten</th>"
                "<th>verdict</th><th>first mismatches</th></tr>")
        rows = []
        for o in self.outputs:
            verdict = "&#10004; ok" if o.ok else "&#10008; FAIL"
            color = "green" if o.ok else "crimson"
            detail = o.problem or (o.mismatch_text() if not o.ok else "")
            rows.append(
                f"<tr><td><code>{html.escape(o.name)}</code></td><td>{o.shape}</td>"
                f"<td>{o.error_text()}</td><td>{'exact' if o.exact else f'{o.tol:.0e}'}</td>"
                f"<td>{o.unwritten}</td><td style='color:{color}'><b>{verdict}</b></td>"
                f"<td>{html.escape(detail)}</td></tr>")
        notes = [f"seed {self.seed}"]
        if self.modified_inputs:
            notes.append("<b style='color:crimson'>inputs modified by the kernel: "
                         f"{html.escape(', '.join(self.modified_inputs))}</b>")
        return (f"<table>{head}{''.join(rows)}</table>"
                f"<div style='font-size:smaller'>{'; '.join(notes)}</div>")

    def raise_if_failed(self) -> "CheckReport":
        """Raise AssertionError with the report's text unless every check passed."""
        if not self.ok:
            raise AssertionError(str(self))
        return self


def poison_value(dtype: np.dtype) -> Any:
    """What unwritten elements hold: NaN for floats, an unlikely extreme for integers."""
    if np.issubdtype(dtype, np.inexact):
        return np.nan
    if np.issubdtype(dtype, np.signedinteger):
        return np.iinfo(dtype).min
    if np.issubdtype(dtype, np.unsignedinteger):
        return np.iinfo(dtype).max
    raise TypeError(f"check() outputs must be integer or floating arrays, not {dtype}")


def _to_host(a: Any) -> np.ndarray:
    if hasattr(a, "get") and not isinstance(a, np.ndarray):
        return np.asarray(a.get())
    return np.array(a, copy=True)


def _reference_input(a: Any) -> Any:
    """float64 for floats, 64-bit for integers (exact, and still usable as indices)."""
    if isinstance(a, np.ndarray) or isinstance(a, np.generic):
        if np.issubdtype(a.dtype, np.floating):
            return np.array(a, dtype=np.float64) if isinstance(a, np.ndarray) else np.float64(a)
        if np.issubdtype(a.dtype, np.signedinteger):
            return a.astype(np.int64)
        if np.issubdtype(a.dtype, np.unsignedinteger):
            return a.astype(np.uint64)
    return a


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _scalar(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def compare(name: str, got: np.ndarray, ref: Any, tol: float) -> OutputCheck:
    """Compare one output with its reference (see the module docstring for the rules)."""
    with np.errstate(invalid="ignore", over="ignore"):  # Inf - Inf and friends are expected here
        return _compare(name, got, ref, tol)


def _compare(name: str, got: np.ndarray, ref: Any, tol: float) -> OutputCheck:
    dtype, shape = got.dtype, got.shape
    exact = bool(np.issubdtype(dtype, np.integer))
    try:
        ref = np.broadcast_to(np.asarray(ref), shape)
    except ValueError:
        return OutputCheck(name, shape, dtype, tol, exact, float("nan"), 0, 0,
                           problem=f"reference has shape {np.shape(ref)}, output has {shape}")
    flat_got, flat_ref = got.reshape(-1), ref.reshape(-1)
    if exact:
        poison = poison_value(dtype)
        unwritten_mask = (flat_got == poison) & (flat_ref != poison)
        bad = flat_got.astype(np.int64 if np.issubdtype(dtype, np.signedinteger) else np.uint64) != flat_ref
        rel = _rel_error(flat_got.astype(np.float64), flat_ref.astype(np.float64))
    else:
        g, r = flat_got.astype(np.float64), flat_ref.astype(np.float64)
        unwritten_mask = ~np.isfinite(g) & ~(g == r)  # NaN never equals anything
        finite = np.isfinite(g) & np.isfinite(r)
        rel = _rel_error(g[finite], r[finite])
        if np.any(np.isfinite(g) & ~np.isfinite(r)):  # reference is Inf/NaN where the kernel is not
            rel = float("inf")
        scale = max(float(np.sqrt(np.mean(r[finite] ** 2))) if finite.any() else 0.0, np.finfo(float).tiny)
        bad = ~finite | (np.abs(g - r) > tol * np.maximum(np.abs(r), scale))
        bad &= ~(g == r)
        if not bad.any() and rel > tol:  # error spread thinly over many elements: show the largest
            worst = np.argsort(-np.where(finite, np.abs(g - r), -1.0), kind="stable")[:MAX_LISTED]
            listed = np.sort(worst)
            first = [(_unravel(int(i), shape), _scalar(flat_got[i]), _scalar(flat_ref[i])) for i in listed]
            return OutputCheck(name, shape, dtype, tol, exact, rel, int(unwritten_mask.sum()), 0, first)
    listed = np.flatnonzero(bad)[:MAX_LISTED]
    first = [(_unravel(int(i), shape), _scalar(flat_got[i]), _scalar(flat_ref[i])) for i in listed]
    return OutputCheck(name, shape, dtype, tol, exact, rel, int(unwritten_mask.sum()), int(bad.sum()), first)


def _rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    if got.size == 0:
        return 0.0
    diff = float(np.linalg.norm(got - ref))
    norm = float(np.linalg.norm(ref))
    return diff / norm if norm > 0 else diff


def _reference_outputs(result: Any, names: list[str]) -> dict[str, Any]:
    if isinstance(result, Mapping):
        missing = [n for n in names if n not in result]
        if missing:
            raise ValueError(f"the reference returned no value for output(s) {', '.join(missing)}")
        return {n: result[n] for n in names}
    if len(names) == 1:
        return {names[0]: result}
    if isinstance(result, (tuple, list)) and len(result) == len(names):
        return dict(zip(names, result))
    raise ValueError(f"with {len(names)} outputs the reference must return a dict keyed by "
                     f"{', '.join(names)} (or a tuple in that order)")


def default_seed() -> int:
    """The seed of a check called without one: fresh from the operating system, so that every call
    tries new inputs, unless the environment variable COURSE_CHECK_SEED fixes it. The course's test
    suite fixes it per test, so that a test run is reproducible; a fuzz run leaves it unset."""
    fixed = os.environ.get(SEED_ENV, "").strip()
    if not fixed:
        return random.SystemRandom().randrange(2**32)
    try:
        return int(fixed) % 2**32
    except ValueError:
        raise ValueError(f"{SEED_ENV} must be an integer seed, not {fixed!r}; unset it for fresh inputs") from None


def check_tolerance(reference: Any, bound: Any) -> float:
    """The ``tol`` for :func:`check` that admits every element error within ``bound`` (an array of
    absolute error bounds, e.g. from kernels.numerics): check measures an element's error against
    max(|reference|, rms(reference)) and the whole output's norm-wise, so the largest bound in those
    units, doubled. This lets an error bound, not a guess, set a test's tolerance, also where
    terms cancel and the result is tiny."""
    ref = np.asarray(reference, dtype=np.float64)
    scale = np.maximum(np.abs(ref), max(float(np.sqrt(np.mean(ref ** 2))), np.finfo(float).tiny))
    return max(2.0 * float(np.max(np.asarray(bound, dtype=np.float64) / scale)), np.finfo(np.float32).eps)


def _default_xp() -> Any:
    from kernels.backend import array_module

    return array_module()


def check(launch: Callable[..., Any], reference: Callable[..., Any], inputs: Mapping[str, Any],
          outputs: Mapping[str, tuple[Any, Any]], *, tol: float = 1e-6, seed: int | None = None,
          xp: Any = None) -> CheckReport:
    """Run ``launch`` on fresh random inputs and compare its outputs with ``reference``.

    ``inputs`` maps argument names to ``rand(...)`` recipes, NumPy arrays (copied to the device
    as they are) or scalars (passed unchanged). ``outputs`` maps names to ``(shape, dtype)``; they
    are allocated poisoned on the device. ``launch(**inputs, **outputs)`` runs the kernel;
    ``reference(**inputs)`` gets the inputs as float64 (integers as 64-bit) NumPy values and returns
    an array (one output) or a dict of arrays. Returns a CheckReport; call ``.raise_if_failed()``
    to stop a notebook on failure.
    """
    xp = _default_xp() if xp is None else xp
    if seed is None:
        seed = default_seed()
    rng = np.random.default_rng(seed)
    overlap = set(inputs) & set(outputs)
    if overlap:
        raise ValueError(f"names used as both input and output: {', '.join(sorted(overlap))}")

    host_inputs: dict[str, Any] = {}
    for name, spec in inputs.items():
        if isinstance(spec, Rand):
            host_inputs[name] = spec.draw(rng)
        elif isinstance(spec, np.ndarray) or hasattr(spec, "__cuda_array_interface__"):
            host_inputs[name] = _to_host(spec)
        else:
            host_inputs[name] = spec
    device_inputs = {name: xp.array(a, copy=True) if isinstance(a, np.ndarray) else a
                     for name, a in host_inputs.items()}
    device_outputs = {}
    for name, (shape, dtype) in outputs.items():
        dtype = np.dtype(dtype)
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        device_outputs[name] = xp.full(shape, poison_value(dtype), dtype=dtype)

    launch(**device_inputs, **device_outputs)

    got = {name: _to_host(a) for name, a in device_outputs.items()}
    modified = [name for name, a in host_inputs.items()
                if isinstance(a, np.ndarray) and _to_host(device_inputs[name]).tobytes() != a.tobytes()]
    expected = _reference_outputs(reference(**{k: _reference_input(v) for k, v in host_inputs.items()}),
                                  list(outputs))
    results = [compare(name, got[name], expected[name], tol) for name in outputs]
    return CheckReport(results, seed, modified)
