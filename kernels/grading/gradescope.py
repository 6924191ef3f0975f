"""Scores and files: a Gradescope ``results.json`` per submission and one CSV for the whole class.

Gradescope's autograder format (https://gradescope-autograders.readthedocs.io/en/latest/specs/):
a top-level ``score`` and ``tests``, each test with ``name``, ``score``, ``max_score``, ``output``,
``visibility`` and ``status``. Public cases are visible at once; hidden cases are listed
``after_due_date`` (configurable), so students learn which hidden case failed, and why, only then.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import verdicts as V
from .report import Report
from .spec import Exercise


@dataclass
class Test:
    name: str
    score: float
    max_score: float
    output: str
    visibility: str = "visible"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "score": round(self.score, 4), "max_score": round(self.max_score, 4),
                "output": self.output, "visibility": self.visibility, "output_format": "text",
                "status": "passed" if self.score >= self.max_score - 1e-9 else "failed"}


def _case_output(c: Any) -> str:
    text = V.message(c.verdict)
    if c.why:
        text = f"{c.why}: {text}"
    if c.message and not c.passed:
        text += f"\n{c.message}"
    if c.max_error is not None and not c.passed:
        text += f"\nmax error {c.max_error:.3g}" + (f", first wrong {c.first_wrong}" if c.first_wrong else "")
    return text


def tests_for(ex: Exercise, report: Report, *, hidden_visibility: str = "after_due_date",
              unmeasured_perf: str = "exclude") -> list[Test]:
    """The Gradescope tests of one report. ``unmeasured_perf``: "exclude" (max 0) or "zero"."""
    tests: list[Test] = []
    if ex.questions:
        for a in report.answers:
            out = V.message(a.verdict) if a.verdict != V.PASSED else "correct"
            if a.verdict == V.WRONG_ANSWER and report.show_expected:
                out += f" (expected {a.expected!r})"
            tests.append(Test(f"prediction {a.key}: {a.text}", a.points, a.max_points, out))
    if not ex.has_kernel:
        return tests
    stage_ok = not report.stage_verdict
    tests.append(Test("kernel screens, matches the signature and compiles", 0.0, 0.0,
                      "ok" if stage_ok else f"{V.message(report.stage_verdict)}\n{report.stage_message}"))
    for visibility, total in (("public", ex.points.public), ("hidden", ex.points.hidden)):
        cases = [c for c in report.cases if c.visibility == visibility and c.verdict != V.SKIPPED]
        if not stage_ok or not cases:
            tests.append(Test(f"{visibility} cases", 0.0, total,
                              "not run: " + (V.message(report.stage_verdict) if not stage_ok else "no cases ran"),
                              "visible" if visibility == "public" else hidden_visibility))
            continue
        each = total / len(cases)
        for c in cases:
            tests.append(Test(f"{visibility}: {c.name}", each if c.passed else 0.0, each, _case_output(c),
                              "visible" if visibility == "public" else hidden_visibility))
        skipped = [c for c in report.cases if c.visibility == visibility and c.verdict == V.SKIPPED]
        if skipped:
            tests.append(Test(f"{visibility}: {len(skipped)} large case(s) skipped", 0.0, 0.0,
                              "skipped: the grader ran on the CPU backend; large cases need a GPU"))
    if ex.perf is not None:
        perf = report.perf
        if perf is None or not stage_ok:
            tests.append(Test("performance", 0.0, ex.points.perf, "not timed: the kernel did not pass its cases"))
        elif perf.verdict == V.NOT_MEASURED:
            max_score = 0.0 if unmeasured_perf == "exclude" else ex.points.perf
            tests.append(Test("performance", 0.0, max_score, perf.summary()))
        else:
            tests.append(Test("performance", ex.points.perf if perf.verdict == V.PASSED else 0.0, ex.points.perf,
                              f"{V.message(perf.verdict)}: {perf.summary()}"))
    return tests


def results_json(ex: Exercise, report: Report, seconds: float, **options: Any) -> dict[str, Any]:
    tests = tests_for(ex, report, **options)
    if report.feedback:
        tests.append(Test("memory traffic (feedback, not graded)", 0.0, 0.0,
                          "\n".join(report.feedback), "visible"))
    score = sum(t.score for t in tests)
    summary = f"{ex.title}: {V.message(report.verdict)}"
    if report.device:
        summary += f" (graded on {report.device})"
    return {"score": round(score, 4), "execution_time": round(seconds, 2), "output": summary,
            "output_format": "text", "visibility": "visible", "stdout_visibility": "hidden",
            "tests": [t.to_dict() for t in tests]}


CSV_FIELDS = ("submission", "file", "exercise", "verdict", "score", "max_score", "public_passed", "public_total",
              "hidden_passed", "hidden_total", "perf_verdict", "perf_percent_of_baseline", "seconds", "detail")


def csv_row(name: str, file: str, ex: Exercise, report: Report, result: dict[str, Any], seconds: float) -> dict[str, Any]:
    pub = report.counts("public")
    hid = report.counts("hidden")
    frac = report.perf.fraction if report.perf is not None else None
    return {"submission": name, "file": file, "exercise": ex.id, "verdict": report.verdict,
            "score": result["score"], "max_score": round(sum(t["max_score"] for t in result["tests"]), 2),  # each was rounded
            "public_passed": pub[0], "public_total": pub[1], "hidden_passed": hid[0], "hidden_total": hid[1],
            "perf_verdict": report.perf.verdict if report.perf else "",
            "perf_percent_of_baseline": f"{100 * frac:.1f}" if frac is not None else "",
            "seconds": f"{seconds:.1f}", "detail": report.detail().replace("\n", " ")}


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow(row)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
