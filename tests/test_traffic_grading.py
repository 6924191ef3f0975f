"""The grader on the CPU backend: a missing barrier is a ``race`` naming both lines; memory exercises get
traffic feedback ("... sectors per request where ... suffice") that never changes a verdict."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kernels.grading.harness import RunOutcome

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import exercises as extool  # noqa: E402

from kernels.grading import race  # noqa: E402
from kernels.grading import verdicts as V  # noqa: E402
from kernels.grading.gradescope import results_json  # noqa: E402
from kernels.grading.registry import exercise  # noqa: E402
from kernels.grading.report import Report  # noqa: E402
from kernels.grading.session import evaluate  # noqa: E402
from kernels.grading.race import TRACE_PROBE_NAME, TraceRaceProbe  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("kernels.cpu") is None, reason="needs the CPU backend")
CORPUS = ROOT / "exercises" / "corpus"


@pytest.fixture(autouse=True)
def cpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_BACKEND", "cpu")


def test_the_race_probe_is_registered_first():
    assert race.probes()[0].name == TRACE_PROBE_NAME
    probe = TraceRaceProbe(cases=1)
    probe.begin("code")
    assert probe.run({}, lambda fill, trace=0: RunOutcome()) is None  # nothing recorded: no race, no hint
    assert probe.run({}, lambda fill, trace=0: pytest.fail("the budget of one case is spent")) is None
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


STENCIL_HEAD = '''#define RADIUS 3
#define BLOCK 256
extern "C" __global__ void stencil7(const float* x, const float* w, float* y, int n)
{
    extern __shared__ float tile[];
    const int t = threadIdx.x;
    const int base = blockIdx.x * BLOCK - RADIUS;
'''
STENCIL_TAIL = '''    __syncthreads();
    const int i = blockIdx.x * BLOCK + t;
    if (i < n) {
        float acc = 0.0f;
        for (int k = 0; k <= 2 * RADIUS; ++k) acc += w[k] * tile[t + k];
        y[i] = SCALE * acc;
    }
}
'''
FULL_LOAD = '''    for (int j = t; j < BLOCK + 2 * RADIUS; j += BLOCK) tile[j] = x[min(max(base + j, 0), n - 1)];
'''
NO_HALO = '''    tile[t + RADIUS] = x[min(max(base + t + RADIUS, 0), n - 1)];   // the halo is never loaded
'''


def test_the_barrier_hint_comes_only_with_evidence_of_unwritten_shared_memory():
    ex = exercise("memory_hierarchy/stencil_shared")
    no_halo = evaluate(ex, kernel="#define SCALE 1.0f\n" + STENCIL_HEAD + NO_HALO + STENCIL_TAIL,
                       visibilities=("public",), secret="s", perf=False)
    failed = [c for c in no_halo.cases if c.verdict in (V.WRONG, V.NAN)]
    assert failed and "read before any thread of the block stored to it" in failed[0].message, str(no_halo)
    assert "tile[" in failed[0].message
    wrong_scale = evaluate(ex, kernel="#define SCALE 2.0f\n" + STENCIL_HEAD + FULL_LOAD + STENCIL_TAIL,
                           visibilities=("public",), secret="s", perf=False)
    assert wrong_scale.verdict == V.WRONG
    assert all("__syncthreads" not in c.message for c in wrong_scale.cases), str(wrong_scale)
