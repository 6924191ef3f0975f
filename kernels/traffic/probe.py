"""The grader's race probe for the CPU backend: rerun a case with every access recorded, look for races.

On a GPU a missing ``__syncthreads()`` shows only when the schedule happens to expose it; the CPU
backend runs the threads of a block one after another, so the result is usually wrong every time
and the case would get ``wrong_result``. Recording the rerun's accesses finds the race itself:
two threads of a block touching the same bytes with no barrier between them. The finding becomes
the case's ``race`` verdict and names both lines and both threads.

``install()`` registers the probe with ``kernels.grading.race.register_probe`` (first, so that a race
explains the wrong values that come with it); the grading package calls it when it loads.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

NAME = "cpu-race-trace"
MAX_ACCESSES = 1_000_000  # per launch; a larger case stops early and is left to the other probes
CASES_PER_SUBMISSION = 6  # the first cases (public ones first, small edge cases among them) are traced


class TraceRaceProbe:
    """Runs a case again on the CPU backend's traced build and reports the first race it finds.

    Only the first ``cases`` cases of a submission are traced (the harness calls ``begin`` before a
    submission's cases): a race between threads of a block shows in any case with a few warps, and
    tracing every hidden case would multiply the grading time.
    """

    name = NAME

    def __init__(self, max_accesses: int = MAX_ACCESSES, cases: int = CASES_PER_SUBMISSION):
        self.max_accesses = max_accesses
        self.cases = cases
        self._left = cases

    def begin(self, code: str) -> None:
        self._left = self.cases

    def applies(self, deterministic: bool) -> bool:
        """On the CPU backend built with g++ (a race is a race whether or not the result is
        deterministic). The traced build needs GCC's instrumentation: under Clang it is refused, and
        the probe must not turn that refusal into a verdict on the submission."""
        from ..backend import backend_name
        from ..cpu.toolchain import CompilerNotFoundError, compiler

        if backend_name() != "cpu":
            return False
        try:
            return compiler().kind == "gcc"
        except CompilerNotFoundError:
            return False

    def run(self, first: dict[str, np.ndarray], rerun: Callable[..., Any]) -> Any:
        from ..grading import verdicts as V
        from ..grading.harness import BARRIER_HINT
        from ..grading.race import Finding

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


def traced_findings(launch: Callable[[], None], max_accesses: int = MAX_ACCESSES) -> tuple[list[str], list[str]]:
    """Run ``launch`` on the CPU backend's traced builds: (the races it has, as sentences, and the
    shared-memory loads of never-stored addresses)."""
    from .races import find_races, unwritten_shared_reads
    from .record import capture

    with capture(max_accesses=max_accesses) as recorded:
        launch()
    races = [str(r) for rec in recorded.recordings for r in find_races(rec)]
    unwritten = [w for rec in recorded.recordings for w in unwritten_shared_reads(rec)]
    return races, unwritten


def install() -> None:
    """Register the probe once (a no-op when it is registered already)."""
    from ..grading.race import probes, register_probe

    if not any(p.name == NAME for p in probes()):
        register_probe(TraceRaceProbe(), first=True)
