"""The check a student runs in the exercise notebook: ``check("reduce/sum_int64", KERNEL)``.

It runs the exercise's public cases (the same ones the grader runs) and a few fresh random cases of
the kind the grader hides, on the GPU when there is one and on the CPU backend otherwise, and shows
a table: one row per case, what it tests, pass or fail, the largest error and the first wrong index.
On a GPU it then times the kernel against the exercise's target. Predict-then-measure exercises pass
``prediction=PREDICTION``: the check says which answers are right (not what the right answers are)
and, on a GPU, what the hardware measures.
"""
from __future__ import annotations

import os
from typing import Any

from ..check import SEED_ENV  # fixes the random cases of every check (a test run must repeat itself)
from . import verdicts as V
from .registry import exercise as find_exercise
from .report import Report
from .session import evaluate


def check(exercise_id: str, kernel: str | None = None, prediction: dict[str, Any] | None = None, *,
          random_cases: bool = True, perf: bool = True, seed: int | None = None) -> Report:
    """Check a kernel (or predictions) for the exercise ``exercise_id``; returns a Report.

    The report displays itself as a table in a notebook; ``bool(report)`` is True when everything
    passed. ``seed`` fixes the random cases (they are new on every call otherwise).
    """
    try:
        ex = find_exercise(exercise_id)
        problem = None
        if kernel is not None and not isinstance(kernel, str):
            problem = f"the kernel must be CUDA C source as a str, not {type(kernel).__name__}"
        elif prediction is not None and not isinstance(prediction, dict):
            problem = f"prediction must be a dict like PREDICTION = {{...}}, not {type(prediction).__name__}"
        elif ex.has_kernel and kernel is None:
            problem = f"{ex.id} is a kernel exercise: call check({ex.id!r}, KERNEL)"
        elif not ex.has_kernel and prediction is None:
            problem = f"{ex.id} asks for predictions: call check({ex.id!r}, prediction=PREDICTION)"
        if problem:
            raise TypeError(problem)
    except (TypeError, KeyError) as exc:
        raise exc.with_traceback(None) from None  # the student's call is wrong, not our internals
    import secrets

    if seed is None and os.environ.get(SEED_ENV, "").strip().isdigit():
        seed = int(os.environ[SEED_ENV])  # a test run that must repeat itself
    secret = seed if seed is not None else secrets.randbelow(2**31)
    visibilities = ("public", "random") if random_cases else ("public",)
    report = evaluate(ex, kernel=kernel, prediction=prediction, visibilities=visibilities, secret=secret, perf=perf)
    if ex.has_kernel and not report.stage_verdict:
        if random_cases:
            report.notes.append(f"The random cases used seed={secret}; check(..., seed={secret}) repeats them. "
                                f"The grader runs the public cases and hidden cases like the random ones.")
        if any(c.verdict == V.SKIPPED for c in report.cases):
            report.notes.append("Large cases are skipped on the CPU backend; they run when you check on a GPU.")
    return report
