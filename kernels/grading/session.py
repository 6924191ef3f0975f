"""One evaluation of a kernel (or a set of predictions) against an exercise, in this process: the
student's own check in a notebook. The grader judges the same cases the same way, but runs the
kernel in a separate, sandboxed process (``kernels.grading.judge``)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from . import predict
from . import verdicts as V
from .cases import rng_for, seed_for
from .harness import CaseResult, StageError, launch_macros, load_executor, load_kernels, run_cases, unrunnable
from .perf import measure as measure_perf, not_measured
from .report import Report
from .screen import screen
from .spec import Case, Exercise


def make_cases(ex: Exercise, visibilities: tuple[str, ...], secret: int | str | None) -> list[Case]:
    """The cases of each visibility, in order (public first)."""
    cases: list[Case] = []
    for vis in visibilities:
        rng = rng_for(ex.id, vis, secret)
        made = ex.make_cases(rng, vis) if ex.make_cases else []
        for case in made:
            case.visibility = vis
        cases += made
    return cases


def perf_seed(ex: Exercise, visibilities: tuple[str, ...], secret: int | str | None) -> int:
    """The seed of the timed case's inputs: derived from the secret (never the secret itself)."""
    vis = "hidden" if secret is not None and "hidden" in visibilities else "public"
    return seed_for(ex.id + "#perf", vis, secret)


def _runtime() -> Any:
    from .runtime import CourseRuntime

    return CourseRuntime()


def evaluate(ex: Exercise, *, kernel: str | None = None, prediction: dict[str, Any] | None = None,
             visibilities: tuple[str, ...] = ("public",), secret: int | str | None = None,
             perf: bool = True, probes: bool = True, runtime: Any = None,
             on_start: Callable[[Case], None] | None = None,
             on_result: Callable[[CaseResult], None] | None = None) -> Report:
    """Screen, compile and run ``kernel`` on the exercise's cases (and time it), or grade ``prediction``."""
    report = Report(ex.id, ex.title)
    if ex.questions:
        report.answers = predict.grade_answers(ex, prediction)
        extra = predict.unknown_keys(ex, prediction)
        if extra:
            report.notes.append(f"PREDICTION has keys this exercise does not ask for: {', '.join(extra)}")
    if not ex.has_kernel:
        if ex.measure is not None:
            try:
                runtime = runtime or _runtime()
                report.backend, report.device = runtime.name, runtime.device_name()
                report.measured, report.measure_note = predict.measure(ex, prediction, runtime)
            except Exception as exc:
                report.measure_note = f"no measurement: {type(exc).__name__}: {exc}"
        return report
    if not isinstance(kernel, str) or not kernel.strip():
        report.stage_verdict = V.NO_KERNEL
        report.stage_message = ("no kernel source: pass the CUDA C as a string, e.g. check(..., KERNEL) after the "
                                "cell that defines KERNEL = r\"\"\"...\"\"\"")
        return report
    findings = screen(kernel, ex.allowed_includes)
    if findings:
        report.stage_verdict = V.FORBIDDEN
        report.stage_message = "\n".join(str(f) for f in findings)
        return report
    try:
        runtime = runtime or _runtime()
    except Exception as exc:
        report.stage_verdict = V.ENVIRONMENT
        report.stage_message = f"no backend to run kernels on: {type(exc).__name__}: {exc}"
        return report
    report.backend, report.device = runtime.name, runtime.device_name()
    verdict, message = unrunnable(ex, kernel, runtime)
    if verdict:  # a GPU of another kind, or the CPU backend: say what it needs and what was checked
        report.stage_verdict, report.stage_message = verdict, message
        return report
    try:
        cases = make_cases(ex, visibilities, secret)
        executor = load_executor(ex, kernel, runtime)
        report.cases = run_cases(ex, cases, kernel, executor, probes=probes, on_start=on_start, on_result=on_result)
    except StageError as exc:
        report.stage_verdict, report.stage_message = exc.verdict, exc.message
        return report
    if any(c.verdict not in (V.CRASH, V.TIMEOUT, V.MEMORY_LIMIT, V.ENVIRONMENT) for c in report.cases):
        from kernels.traffic.feedback import traffic_hints

        report.feedback = traffic_hints(ex, kernel, cases)
    if ex.perf is not None and perf:
        if not runtime.is_gpu:
            report.perf = not_measured(ex)
        elif all(not V.is_failure(c.verdict) for c in report.cases):
            rng = np.random.default_rng(perf_seed(ex, visibilities, secret))
            try:
                loaded = load_kernels(kernel, ex, runtime)
                report.perf = measure_perf(ex, loaded, runtime, rng, launch_macros(kernel, ex))
            except StageError as exc:
                report.stage_verdict, report.stage_message = exc.verdict, exc.message
        else:
            from .perf import PerfResult

            report.perf = PerfResult(V.NOT_RUN, ex.perf.metric, target=ex.perf.target,
                                     message="not timed: the kernel must pass every case first")
    return report
