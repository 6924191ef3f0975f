"""Compare a kernel's output with the reference, element by element, and say what went wrong.

Floats pass when ``|got - expected| <= atol + rtol * |expected|`` (or a per-element atol supplied by
the reference); NaN and Inf must match exactly where the reference has them. Integers must be equal.
An element that still holds the harness's poison bit pattern was never written; one that is NaN or
Inf where the answer is finite was computed badly. The report gives the largest error and the first
wrong index, which is usually enough to see the bug (the last block, a row boundary, element n).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import verdicts as V
from .spec import Expected, Tolerance

MAX_SAMPLES = 5

# Bit patterns the harness fills outputs with: a quiet NaN with a recognisable payload for floats,
# an unlikely value for integers. An element with exactly these bits was never written.
_POISON_BITS = {
    np.dtype(np.float32): np.uint32(0x7FC0DEAD),
    np.dtype(np.float64): np.uint64(0x7FF80000DEADBEEF),
    np.dtype(np.float16): np.uint16(0x7E5A),
}
_ALTERNATE_FLOAT = -12345.678  # a finite fill for the second out-of-bounds-read probe
# Output guard bands hold another NaN, so that a value read from an input's guard band (the poison)
# and written past the end of an output still changes the output's band.
_GUARD_BITS = {
    np.dtype(np.float32): np.uint32(0x7FC0BEEF),
    np.dtype(np.float64): np.uint64(0x7FF80000BAADBEEF),
    np.dtype(np.float16): np.uint16(0x7E3B),
}


def _uint_of(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def poison_scalar(dtype: Any) -> np.ndarray:
    """The poison of ``dtype`` as a one-element array (bits preserved)."""
    dtype = np.dtype(dtype)
    if dtype in _POISON_BITS:
        return np.array([_POISON_BITS[dtype]]).view(dtype)
    if np.issubdtype(dtype, np.integer):
        bits = np.array([0xDEADBEEFDEADBEEF], dtype=np.uint64).view(np.uint8)[:dtype.itemsize]
        return bits.view(dtype)
    raise TypeError(f"no poison for dtype {dtype}")


def guard_scalar(dtype: Any) -> np.ndarray:
    """What the guard bands around outputs hold (different from the poison of inputs and outputs)."""
    dtype = np.dtype(dtype)
    if dtype in _GUARD_BITS:
        return np.array([_GUARD_BITS[dtype]]).view(dtype)
    bits = np.array([0xBEEFCAFEBEEFCAFE], dtype=np.uint64).view(np.uint8)[:dtype.itemsize]
    return bits.view(dtype)


def alternate_scalar(dtype: Any) -> np.ndarray:
    """A second, different fill: finite for floats, another odd pattern for integers."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return np.array([_ALTERNATE_FLOAT], dtype=dtype)
    bits = np.array([0x5A5A5A5A5A5A5A5A], dtype=np.uint64).view(np.uint8)[:dtype.itemsize]
    return bits.view(dtype)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def is_poison(a: np.ndarray) -> np.ndarray:
    """Elementwise: does ``a`` hold the poison bits?"""
    p = poison_scalar(a.dtype)
    u = _uint_of(a.dtype)
    return np.ascontiguousarray(a).view(u) == p.view(u)[0]


@dataclass
class Comparison:
    """The verdict on one output."""

    name: str
    shape: tuple[int, ...]
    verdict: str
    wrong: int = 0
    unwritten: int = 0
    nonfinite: int = 0
    max_error: float = 0.0
    first_wrong: tuple[int, ...] | None = None
    samples: list[tuple[tuple[int, ...], Any, Any]] = field(default_factory=list)
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == V.PASSED

    def describe(self) -> str:
        if self.problem:
            return self.problem
        if self.ok:
            return ""
        parts = []
        if self.unwritten:
            parts.append(f"{self.unwritten} never written")
        if self.nonfinite:
            parts.append(f"{self.nonfinite} NaN/Inf")
        if self.wrong:
            parts.append(f"{self.wrong} wrong")
        text = f"{self.name}: " + ", ".join(parts) + f" of {int(np.prod(self.shape))}"
        if self.samples:
            shown = "; ".join(f"[{', '.join(map(str, i))}] got {_fmt(g)}, expected {_fmt(e)}"
                              for i, g, e in self.samples[:3])
            text += f" (first: {shown})"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "verdict": self.verdict, "wrong": self.wrong,
                "unwritten": self.unwritten, "nonfinite": self.nonfinite,
                "max_error": _json_float(self.max_error),
                "first_wrong": list(self.first_wrong) if self.first_wrong is not None else None,
                "samples": [[list(i), _json_value(g), _json_value(e)] for i, g, e in self.samples],
                "problem": self.problem}


def _json_float(v: float) -> float | str:
    return float(v) if np.isfinite(v) else str(v)


def _json_value(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return _json_float(float(v))
    if isinstance(v, np.integer):
        return int(v)
    return v


def _fmt(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.7g}"
    return str(v)


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def compare(name: str, got: np.ndarray, expected: Any, tol: Tolerance) -> Comparison:
    """Compare ``got`` (the kernel's output on the host) with ``expected`` (array or Expected)."""
    atol_array = None
    if isinstance(expected, Expected):
        atol_array = expected.atol
        expected = expected.value
    got = np.asarray(got)
    shape = tuple(got.shape)
    try:
        ref = np.broadcast_to(np.asarray(expected), shape)
    except ValueError:
        return Comparison(name, shape, V.WRONG,
                          problem=f"{name}: the output has shape {shape}, the reference {np.shape(expected)}")
    if got.size == 0:
        return Comparison(name, shape, V.PASSED)
    flat_got = got.reshape(-1)
    flat_ref = np.asarray(ref, dtype=np.float64 if np.issubdtype(got.dtype, np.floating) else None).reshape(-1)
    unwritten = is_poison(flat_got)
    if np.issubdtype(got.dtype, np.integer):
        ref_int = flat_ref.astype(np.int64) if flat_ref.dtype.kind in "iub" else flat_ref
        bad = flat_got.astype(np.int64) != ref_int
        unwritten &= bad  # the poison value may be a correct answer
        nonfinite = np.zeros_like(bad)
        diff = np.abs(flat_got.astype(np.float64) - flat_ref.astype(np.float64))
    else:
        g = flat_got.astype(np.float64)
        r = flat_ref
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(g - r)
            limit = tol.atol + tol.rtol * np.abs(r)
            if atol_array is not None:
                limit = limit + np.broadcast_to(np.asarray(atol_array, dtype=np.float64), shape).reshape(-1)
            finite_ref = np.isfinite(r)
            ok = np.where(finite_ref, np.isfinite(g) & (diff <= limit),
                          (np.isnan(r) & np.isnan(g)) | (g == r))
        bad = ~ok
        nonfinite = bad & finite_ref & ~np.isfinite(g) & ~unwritten
        unwritten &= bad
    wrong_only = bad & ~unwritten & ~nonfinite
    finite = np.isfinite(diff)
    max_error = float(diff[finite].max()) if finite.any() else 0.0
    if (bad & ~finite).any() or (unwritten.any() or nonfinite.any()):
        max_error = float("inf") if (bad & ~finite).any() else max_error
    listed = np.flatnonzero(bad)[:MAX_SAMPLES]
    samples = [(_unravel(int(i), shape), flat_got[i].item(), flat_ref[i].item()) for i in listed]
    first = _unravel(int(listed[0]), shape) if listed.size else None
    if unwritten.any():
        verdict = V.UNWRITTEN
    elif nonfinite.any():
        verdict = V.NAN
    elif bad.any():
        verdict = V.WRONG
    else:
        verdict = V.PASSED
    return Comparison(name, shape, verdict, int(wrong_only.sum()), int(unwritten.sum()), int(nonfinite.sum()),
                      max_error, first, samples)
