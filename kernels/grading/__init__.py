"""Graded exercises: the student-side check, the exercises' cases, and the instructor's grader.

    from kernels.grading import check
    check("reduce/sum_int64", KERNEL)          # in an exercise notebook

    python -m kernels.grading grade SUBMISSIONS --exercise reduce/sum_int64 --seed SEED --out OUT

Importing this package is cheap and needs neither CuPy nor a GPU; names load on first use.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "check": "student_check",
    "exercise": "registry", "exercise_ids": "registry", "all_exercises": "registry",
    "Exercise": "spec", "Case": "spec", "Report": "report",
    "register_probe": "race",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernels.grading' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
