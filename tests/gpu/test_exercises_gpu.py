"""The graded exercises on a real GPU (``pytest -m gpu``): solutions pass and meet their speed targets,
starters fail, the corpus gets its GPU verdicts, and the predict exercises measure without error.

Run on the machine with the GPU: ``make gpu-test`` (or ``python -m pytest -q -m gpu tests/gpu/test_exercises_gpu.py``).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))

import exercises as extool  # noqa: E402
from test_exercises_corpus import CORPUS, corpus_entries, verdict_set  # noqa: E402

from kernels.grading import verdicts as V  # noqa: E402
from kernels.grading.extract import extract_text  # noqa: E402
from kernels.grading.registry import all_exercises, exercise  # noqa: E402

pytestmark = pytest.mark.gpu

EXERCISES = all_exercises()
KERNEL_IDS = [i for i, ex in EXERCISES.items() if ex.has_kernel]
PERF_IDS = [i for i, ex in EXERCISES.items() if ex.perf is not None]
PREDICT_IDS = [i for i, ex in EXERCISES.items() if ex.questions]
SEED = "gpu tests"


def skip_where_it_cannot_run(exercise_id: str) -> None:
    """An exercise for one kind of GPU (Exercise.arch, e.g. sm_90a) is graded only on such a GPU."""
    from kernels.grading.harness import arch_problem
    from kernels.grading.runtime import CourseRuntime

    problem = arch_problem(EXERCISES[exercise_id], CourseRuntime())
    if problem:
        pytest.skip(problem)


@pytest.mark.parametrize("exercise_id", KERNEL_IDS)
def test_solution_passes_every_case_on_the_gpu(k, exercise_id: str) -> None:
    skip_where_it_cannot_run(exercise_id)
    from kernels.grading.session import evaluate

    report = evaluate(EXERCISES[exercise_id], kernel=extool.solution(exercise_id), visibilities=("public", "hidden"),
                      secret=SEED, perf=False)
    assert report.backend == "cupy"
    assert report.verdict == V.PASSED, str(report)
    assert not any(c.verdict == V.SKIPPED for c in report.cases), "large cases run on a GPU"


@pytest.mark.parametrize("exercise_id", PERF_IDS)
def test_solution_meets_the_speed_target(k, exercise_id: str) -> None:
    from kernels.grading.session import evaluate

    report = evaluate(EXERCISES[exercise_id], kernel=extool.solution(exercise_id), visibilities=("public",),
                      secret=SEED, perf=True)
    print(f"{exercise_id}: {report.perf.summary() if report.perf else report.verdict}")
    assert report.perf is not None and report.perf.verdict == V.PASSED, str(report)


@pytest.mark.parametrize("exercise_id", KERNEL_IDS)
def test_starter_fails_on_the_gpu(k, exercise_id: str, tmp_path: Path) -> None:
    skip_where_it_cannot_run(exercise_id)
    from kernels.grading.grader import GradeOptions, grade_file

    path = tmp_path / "starter.cu"
    path.write_text(extool.starter(exercise_id), encoding="utf-8")
    graded = grade_file("starter", path, GradeOptions(exercise=exercise(exercise_id), seed=SEED, timeout=300,
                                                      perf=False))
    assert V.is_failure(graded.report.verdict) and graded.report.verdict != V.ENVIRONMENT, str(graded.report)


@pytest.mark.parametrize("entry", corpus_entries(), ids=lambda e: str(e[0].relative_to(CORPUS)))
def test_corpus_entry_gets_its_gpu_verdict(k, entry) -> None:
    from kernels.grading.grader import GradeOptions, grade_file

    path, exercise_id, expect, _ = entry
    skip_where_it_cannot_run(exercise_id)
    timeout = 60.0 if V.TIMEOUT in verdict_set(expect) else 600.0
    graded = grade_file(path.stem, path, GradeOptions(exercise=exercise(exercise_id), seed=SEED, timeout=timeout))
    assert graded.report.verdict in verdict_set(expect), str(graded.report)


@pytest.mark.parametrize("exercise_id", PREDICT_IDS)
def test_predict_exercises_measure_on_the_gpu(k, exercise_id: str) -> None:
    from kernels.grading.session import evaluate

    prediction = extract_text(extool.solution(exercise_id), ".py").prediction
    report = evaluate(EXERCISES[exercise_id], prediction=prediction)
    assert report.ok, str(report)
    assert report.measured and not report.measure_note, str(report)


def test_check_shows_speed_and_roofline_on_the_gpu(k) -> None:
    from kernels.grading import check

    report = check("gemm/gemm_bias_relu", extool.solution("gemm/gemm_bias_relu"), seed=1)
    html = report._repr_html_()
    assert report.perf is not None and report.perf.achieved and "cuBLAS" in report.perf.baseline_name
    assert report.perf.intensity is not None and "roofline" in html
