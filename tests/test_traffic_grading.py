"""The grader on the CPU backend: a missing barrier is a ``race`` naming both lines; memory exercises get
traffic feedback ("... sectors per request where ... suffice") that never changes a verdict."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import exercises as extool  # noqa: E402

from kernels.grading import race  # noqa: E402
from kernels.grading import verdicts as V  # noqa: E402
from kernels.grading.gradescope import results_json  # noqa: E402
from kernels.grading.registry import exercise  # noqa: E402
from kernels.grading.report import Report  # noqa: E402
from kernels.grading.session import evaluate  # noqa: E402
from kernels.traffic.probe import NAME, TraceRaceProbe  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("kernels.cpu") is None, reason="needs the CPU backend")
CORPUS = ROOT / "exercises" / "corpus"


@pytest.fixture(autouse=True)
def cpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_BACKEND", "cpu")


def test_the_race_probe_is_registered_first():
    assert race.probes()[0].name == NAME
    probe = TraceRaceProbe(cases=1)
    probe.begin("code")
    assert probe.run({}, lambda fill: {}) is None  # nothing launched: nothing recorded, no race
    assert probe.run({}, lambda fill: pytest.fail("the budget of one case is spent")) is None
    probe.begin("other code")
    assert probe._left == 1


def test_missing_syncthreads_is_a_race_with_both_lines():
    ex = exercise("memory_hierarchy/stencil_shared")
    code = (CORPUS / "memory_hierarchy/stencil_shared/missing_syncthreads.cu").read_text()
    report = evaluate(ex, kernel=code, visibilities=("public",), secret="s", perf=False)
    assert report.verdict == V.RACE, str(report)
    first = next(c for c in report.cases if c.verdict == V.RACE)
    assert "data race on shared memory tile[" in first.message
    assert "writes it at kernel.cu:13 (stencil7)" in first.message and "reads it at kernel.cu:18" in first.message


def test_the_solution_has_no_race_and_no_advice():
    ex = exercise("memory_hierarchy/stencil_shared")
    report = evaluate(ex, kernel=extool.solution(ex.id), visibilities=("public",), secret="s", perf=False)
    assert report.verdict == V.PASSED, str(report)
    assert report.feedback == []  # its halo load is misaligned by RADIUS floats: 1.3 times the ideal, no advice


def test_uncoalesced_gemv_passes_with_feedback():
    ex = exercise("coalescing/gemv_rows")
    code = (CORPUS / "coalescing/gemv_rows/thread_per_row.cu").read_text()
    report = evaluate(ex, kernel=code, visibilities=("public",), secret="s", perf=False)
    assert report.verdict == V.PASSED
    assert report.feedback and "sectors per request where" in report.feedback[0]
    assert "consecutive lanes are 96 bytes apart" in report.feedback[0]
    assert "memory traffic (not graded" in str(report) and "Memory traffic" in report._repr_html_()
    again = Report.from_dict(report.to_dict())
    assert again.feedback == report.feedback
    tests = results_json(ex, report, 1.0)["tests"]
    extra = [t for t in tests if t["name"].startswith("memory traffic")]
    assert extra and extra[0]["max_score"] == 0 and "sectors per request" in extra[0]["output"]


def test_no_feedback_outside_the_memory_chapters():
    ex = exercise("reduce/sum_int64")
    report = evaluate(ex, kernel=extool.solution(ex.id), visibilities=("public",), secret="s", perf=False)
    assert report.verdict == V.PASSED and report.feedback == []
