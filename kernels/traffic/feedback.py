"""Memory-traffic feedback for the exercises of the memory chapters.

After the cases have run, the kernel is launched once more on a small public case, on the CPU
backend's traced build (also when grading on a GPU), and every source line that moves more than it
needs gets one sentence: "line 12 (A, load): 16 sectors per request where 4 suffice, 25 % of the
bytes moved are used; consecutive lanes are 64 bytes apart", or a bank conflict with its ways.
This is coaching, not grading: it never changes a verdict or a score.
"""
from __future__ import annotations

from typing import Any

CHAPTERS = ("memory_hierarchy", "dram_bursts", "coalescing")
MAX_ACCESSES = 1_000_000
MAX_HINTS = 6


def applies(exercise: Any) -> bool:
    """Kernel exercises of the chapters about memory traffic."""
    return exercise.has_kernel and exercise.chapter in CHAPTERS


def _smallest_public(exercise: Any, cases: list[Any]) -> Any:
    public = [c for c in cases if c.visibility == "public" and not c.large]
    if not public:
        return None
    # the largest case that is still quick to record: traffic patterns need a few full warps
    sized = sorted(public, key=lambda c: sum(a.size for a in c.inputs.values()))
    fitting = [c for c in sized if sum(a.size for a in c.inputs.values()) <= 200_000]
    return (fitting or sized)[-1]


def traffic_hints(exercise: Any, code: str, cases: list[Any]) -> list[str]:
    """Sentences about the lines of ``code`` that move more than they need (empty when none, or when
    the kernel cannot be recorded: too large, or it faults)."""
    if not applies(exercise):
        return []
    case = _smallest_public(exercise, cases)
    if case is None:
        return []
    try:
        reports = _record(exercise, code, case)
    except Exception:  # feedback is best effort: the verdicts already say what is wrong
        return []
    many = len(reports) > 1
    found = []
    for report in reports:
        for line in report.lines:
            hint = line.advice()
            if hint:
                found.append(f"{report.recording.kernel}: {hint}" if many else hint)
    found = list(dict.fromkeys(found))
    if len(found) > MAX_HINTS:
        found = found[:MAX_HINTS] + [f"... and {len(found) - MAX_HINTS} more lines"]
    return found


def _record(exercise: Any, code: str, case: Any) -> list[Any]:
    from ..compile import _load_cpu
    from ..cpu import xp
    from ..grading.harness import guarded, launch_macros
    from ..grading.spec import LaunchContext
    from .record import capture
    from .report import TrafficReport

    macros = launch_macros(code, exercise)
    loaded = {spec.name: _load_cpu(code, "kernel.cu", spec.name, (), None) for spec in exercise.kernels}
    arrays = {}
    for name, data in case.inputs.items():
        arrays[name] = guarded(xp, name, data, data.shape, data.dtype, case.offset, "poison").view
    for name, (shape, dtype) in case.outputs.items():
        if name not in arrays:
            arrays[name] = guarded(xp, name, None, shape, dtype, case.offset, "poison").view
    ctx = LaunchContext(loaded, arrays, case, macros, xp, 0)
    with capture(max_accesses=MAX_ACCESSES) as recorded:
        exercise.launch(ctx)
    return [TrafficReport(r) for r in recorded.recordings]
