"""Predict, then measure: grade the numbers a student predicts, and show what the GPU says.

The graded part is deterministic: each question has one answer worked out from the chapter's
formulas (occupancy rules, sector counts, Little's law, the roofline) for stated hardware numbers.
The measurement (on a GPU only) runs the chapter's kernels and prints the measured value beside the
prediction, so that the student sees where the model holds and where the hardware differs.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from . import verdicts as V
from .spec import Exercise


@dataclass
class Answer:
    key: str
    text: str
    given: Any
    verdict: str
    points: float
    max_points: float
    expected: Any = None  # filled in for the instructor, never shown by the student check

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Answer":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass
class MeasuredRow:
    """One line of the measurement table: what was predicted and what the GPU did."""

    label: str
    predicted: Any
    measured: Any
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def grade_answers(ex: Exercise, prediction: dict[str, Any] | None) -> list[Answer]:
    """One Answer per question of ``ex``; missing and None answers are 'not answered'."""
    prediction = prediction or {}
    answers = []
    for q in ex.questions:
        given = prediction.get(q.key)
        if given is None or (isinstance(given, str) and not given.strip()):
            verdict = V.NOT_ANSWERED
        else:
            verdict = V.PASSED if q.accepts(given) else V.WRONG_ANSWER
        answers.append(Answer(q.key, q.text, given, verdict, q.points if verdict == V.PASSED else 0.0,
                              q.points, q.answer))
    return answers


def unknown_keys(ex: Exercise, prediction: dict[str, Any] | None) -> list[str]:
    known = {q.key for q in ex.questions}
    return sorted(k for k in (prediction or {}) if k not in known)


def measure(ex: Exercise, prediction: dict[str, Any] | None, runtime: Any) -> tuple[list[MeasuredRow], str]:
    """The GPU's side of the story (rows, note); on the CPU backend no rows and a note saying why."""
    if ex.measure is None:
        return [], ""
    if not runtime.is_gpu:
        return [], "not measured on the CPU backend: run this notebook on a GPU to compare with the hardware"
    try:
        rows = ex.measure(prediction or {})
    except Exception as exc:  # a measurement problem must not hide the graded answers
        return [], f"the measurement failed: {type(exc).__name__}: {exc}"
    return list(rows), ""
