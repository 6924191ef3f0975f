"""Probes that rerun a case to find bugs a single run hides: races and out-of-bounds reads.

Each probe gets the outputs of the first run and a way to run the case again (``rerun(fill, trace=0)``,
where ``fill`` chooses what the guard bands around every array hold and ``trace`` asks the CPU
backend to record that many memory accesses; it returns the run's ``RunOutcome``) and returns a
Finding or None. A Finding whose verdict is empty adds its message to a failed case's message
without changing the verdict (evidence for a hint).

- ``RepeatProbe``: the same inputs, the same fill; different output bits mean the result depends on
  timing: a race (a missing ``__syncthreads()``, an unsynchronised warp tail).
- ``GuardReadProbe``: the same inputs, a different fill of the guard bands; different output bits
  mean the kernel reads memory outside its arrays.
- ``TraceRaceProbe`` (runs first, so that a race explains the wrong values that come with it): on the
  CPU backend, the same run with every memory access recorded (``kernels.traffic``); a race between
  two threads of a block becomes a ``race`` verdict that names both lines and both threads.

On a GPU a race shows up only when the schedule happens to expose it; on the CPU backend, whose
threads switch only at barriers, a missing barrier usually gives a wrong result on every run, and
only the recorded accesses tell a race from any other wrong result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from ..backend import backend_name
from ..cpu.toolchain import CompilerNotFoundError, compiler
from . import verdicts as V
from .compare import same_bits

Outputs = dict[str, np.ndarray]


@dataclass(frozen=True)
class Finding:
    verdict: str
    message: str


class Probe(Protocol):
    """A probe; it may also have ``begin(code)``, which the harness calls before a submission's cases."""

    name: str

    def applies(self, deterministic: bool) -> bool: ...

    def run(self, first: Outputs, rerun: Callable[..., Any]) -> Finding | None: ...


def _differences(a: Outputs, b: Outputs) -> list[str]:
    names = []
    for name in a:
        if not same_bits(a[name], b.get(name, np.empty(0))):
            differing = int(np.count_nonzero(np.ascontiguousarray(a[name]).view(np.uint8).reshape(a[name].size, -1)
                                             != np.ascontiguousarray(b[name]).view(np.uint8).reshape(b[name].size, -1))) \
                if a[name].shape == b[name].shape and a[name].size else -1
            names.append(name if differing < 0 else f"{name} ({differing} bytes)")
    return names


class RepeatProbe:
    """Run again with everything identical; a deterministic kernel must give identical bits."""

    name = "repeat"

    def __init__(self, repeats: int = 1):
        self.repeats = repeats

    def applies(self, deterministic: bool) -> bool:
        return deterministic

    def run(self, first: Outputs, rerun: Callable[..., Any]) -> Finding | None:
        for _ in range(self.repeats):
            again = rerun("poison").outputs
            diff = _differences(first, again)
            if diff:
                return Finding(V.RACE, f"a second run on the same inputs changed {', '.join(diff)}: the result "
                                       f"depends on thread timing or on memory it never wrote (a missing __syncthreads() or "
                                       f"__syncwarp(), or shared memory read where nothing was stored?)")
        return None


class GuardReadProbe:
    """Run again with other values in the guard bands; the outputs must not notice."""

    name = "guard-read"

    def applies(self, deterministic: bool) -> bool:
        return deterministic

    def run(self, first: Outputs, rerun: Callable[..., Any]) -> Finding | None:
        again = rerun("alternate").outputs
        diff = _differences(first, again)
        if diff:
            return Finding(V.OOB_READ, f"changing only the memory around the arrays changed {', '.join(diff)}: "
                                       f"the kernel reads outside its inputs (a missing bounds check on a load?)")
        return None


TRACE_PROBE_NAME = "cpu-race-trace"
MAX_TRACED_ACCESSES = 1_000_000  # per launch; a larger case stops early and is left to the other probes
TRACED_CASES_PER_SUBMISSION = 6  # the first cases (public ones first, small edge cases among them) are traced
BARRIER_HINT = ("shared memory was read before any thread of the block stored to it (at {where}): a missing "
                "__syncthreads() between the stores and the loads, or an index that reads an element no thread "
                "writes?")


class TraceRaceProbe:
    """Runs a case again on the CPU backend's traced build and reports the first race it finds.

    Only the first ``cases`` cases of a submission are traced (the harness calls ``begin`` before a
    submission's cases): a race between threads of a block shows in any case with a few warps, and
    tracing every hidden case would multiply the grading time.
    """

    name = TRACE_PROBE_NAME

    def __init__(self, max_accesses: int = MAX_TRACED_ACCESSES, cases: int = TRACED_CASES_PER_SUBMISSION):
        self.max_accesses = max_accesses
        self.cases = cases
        self._left = cases

    def begin(self, code: str) -> None:
        self._left = self.cases

    def applies(self, deterministic: bool) -> bool:
        """On the CPU backend built with g++ (a race is a race whether or not the result is
        deterministic). The traced build needs GCC's instrumentation: under Clang it is refused, and
        the probe must not turn that refusal into a verdict on the submission."""
        if backend_name() != "cpu":
            return False
        try:
            return compiler().kind == "gcc"
        except CompilerNotFoundError:
            return False

    def run(self, first: Outputs, rerun: Callable[..., Any]) -> Finding | None:
        if self._left <= 0:
            return None
        self._left -= 1
        again = rerun("poison", self.max_accesses)
        if again.races:
            others = len(again.races) - 1
            more = f" (and {others} more race{'s' if others != 1 else ''} between other lines)" if others else ""
            return Finding(V.RACE, f"data race on {again.races[0]}{more}")
        if again.shared_unwritten:  # evidence for the barrier hint; the verdict stays what it is
            return Finding("", BARRIER_HINT.format(where="; ".join(again.shared_unwritten)))
        return None


_PROBES: list[Probe] = [TraceRaceProbe(), RepeatProbe(), GuardReadProbe()]


def probes() -> list[Probe]:
    """The probes the harness runs, in order (the first finding wins)."""
    return list(_PROBES)


def register_probe(probe: Probe, *, first: bool = False) -> None:
    """Add a probe (e.g. the CPU backend's race detector) to every later harness run."""
    if any(p.name == probe.name for p in _PROBES):
        raise ValueError(f"a probe named {probe.name!r} is already registered")
    _PROBES.insert(0, probe) if first else _PROBES.append(probe)


def unregister_probe(name: str) -> None:
    _PROBES[:] = [p for p in _PROBES if p.name != name]

