"""The races of one launch, from the CPU backend's traced build: what the grader's race probe reads.

On a GPU a missing ``__syncthreads()`` shows only when the schedule happens to expose it; the CPU
backend runs the threads of a block one after another, so the result is usually wrong every time.
Recording every access of the launch finds the race itself: two threads of a block touching the
same bytes with no barrier between them. ``kernels.grading.race.TraceRaceProbe`` turns the first
race into the case's ``race`` verdict, naming both lines and both threads.
"""
from __future__ import annotations

from typing import Callable

from .races import find_races, unwritten_shared_reads
from .record import capture

MAX_ACCESSES = 1_000_000  # per launch; a larger launch stops recording early


def traced_findings(launch: Callable[[], None], max_accesses: int = MAX_ACCESSES) -> tuple[list[str], list[str]]:
    """Run ``launch`` on the CPU backend's traced builds: (the races it has, as sentences, and the
    shared-memory loads of never-stored addresses)."""
    with capture(max_accesses=max_accesses) as recorded:
        launch()
    races = [str(r) for rec in recorded.recordings for r in find_races(rec)]
    unwritten = [w for rec in recorded.recordings for w in unwritten_shared_reads(rec)]
    return races, unwritten
