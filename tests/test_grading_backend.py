"""The exercises run for real, on the CPU backend: every solution passes, every starter fails, every
corpus entry gets its verdict, the valid alternatives pass, and the command line grades a folder.

These tests need the CPU execution backend (``kernels.cpu``) and skip when it is absent; they force it
with COURSE_BACKEND=cpu, so they also run on a machine with a GPU. Starters and corpus entries are
graded through the grader, each in its own sandboxed process, because a wrong kernel may crash.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))

pytestmark = pytest.mark.skipif(importlib.util.find_spec("kernels.cpu") is None,
                                reason="needs the CPU execution backend (kernels.cpu)")

import exercises as extool  # noqa: E402
from test_exercises_corpus import CORPUS, corpus_entries, verdict_set  # noqa: E402

from kernels.grading import verdicts as V  # noqa: E402
from kernels.grading.grader import GradeOptions, Graded, grade_file  # noqa: E402
from kernels.grading.registry import all_exercises, exercise  # noqa: E402

EXERCISES = all_exercises()
# an exercise for one kind of GPU (Exercise.arch) is refused on the CPU backend: tests/test_exercises_hopper.py
KERNEL_IDS = [i for i, ex in EXERCISES.items() if ex.has_kernel and not ex.arch]
SEED = "the tests' secret"
HANG_TIMEOUT = 20.0
WORKERS = max(2, min(6, (os.cpu_count() or 2)))


@pytest.fixture(autouse=True)
def cpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_BACKEND", "cpu")


def _grade(exercise_id: str, path: Path, timeout: float = 120.0) -> Graded:
    options = GradeOptions(exercise=exercise(exercise_id), seed=SEED, timeout=timeout, memory_mb=4096,
                           env={"COURSE_BACKEND": "cpu"})
    return grade_file(path.stem, path, options)


@pytest.fixture(scope="module")
def starters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Graded]:
    folder = tmp_path_factory.mktemp("starters")
    jobs = []
    for exercise_id in KERNEL_IDS:
        path = folder / f"{exercise_id.replace('/', '__')}.cu"
        path.write_text(extool.starter(exercise_id), encoding="utf-8")
        jobs.append((exercise_id, path))
    with ThreadPoolExecutor(WORKERS) as pool:
        graded = list(pool.map(lambda job: _grade(*job), jobs))
    return {exercise_id: g for (exercise_id, _), g in zip(jobs, graded)}


@pytest.fixture(scope="module")
def corpus() -> dict[str, Graded]:
    entries = corpus_entries()

    def one(entry) -> Graded:
        path, exercise_id, expect, cpu = entry
        timeout = HANG_TIMEOUT if V.TIMEOUT in verdict_set(cpu) else 120.0
        return _grade(exercise_id, path, timeout)

    with ThreadPoolExecutor(WORKERS) as pool:
        graded = list(pool.map(one, entries))
    return {str(e[0].relative_to(CORPUS)): g for e, g in zip(entries, graded)}


@pytest.mark.parametrize("exercise_id", KERNEL_IDS)
def test_solution_passes_public_and_hidden_cases(exercise_id: str) -> None:
    from kernels.grading.session import evaluate

    report = evaluate(EXERCISES[exercise_id], kernel=extool.solution(exercise_id), visibilities=("public", "hidden"),
                      secret=SEED)
    assert report.verdict == V.PASSED, str(report)
    assert report.backend == "cpu"
    if EXERCISES[exercise_id].perf is not None:
        assert report.perf.verdict == V.NOT_MEASURED


@pytest.mark.parametrize("exercise_id", KERNEL_IDS)
def test_starter_fails(exercise_id: str, starters: dict[str, Graded]) -> None:
    report = starters[exercise_id].report
    assert V.is_failure(report.verdict), str(report)
    assert report.verdict not in (V.ENVIRONMENT, V.COMPILE_ERROR, V.WRONG_SIGNATURE, V.FORBIDDEN), str(report)


@pytest.mark.parametrize("entry", corpus_entries(), ids=lambda e: str(e[0].relative_to(CORPUS)))
def test_corpus_entry_gets_its_verdict(entry, corpus: dict[str, Graded]) -> None:
    path, exercise_id, expect, cpu = entry
    graded = corpus[str(path.relative_to(CORPUS))]
    assert graded.report.verdict in verdict_set(cpu), str(graded.report)
    if graded.report.verdict == V.PASSED:
        public = [t for t in graded.result["tests"] if t["name"].startswith(("public", "hidden"))]
        assert all(t["status"] == "passed" for t in public)


def test_student_check_on_the_cpu_backend() -> None:
    from kernels.grading import check

    report = check("dram_bursts/scale_vec4", extool.solution("dram_bursts/scale_vec4"), seed=3)
    assert report.ok and report.backend == "cpu"
    text = str(report)
    assert "not measured on the CPU backend" in text and "random" in text and "seed=3" in text
    assert any(c.verdict == V.SKIPPED for c in report.cases)
    html = report._repr_html_()
    assert "<table>" in html and "first wrong" in html
    broken = check("dram_bursts/scale_vec4", extool.starter("dram_bursts/scale_vec4"), seed=3)
    assert not broken.ok and broken.perf.verdict == V.NOT_MEASURED  # never "passed" without a GPU


def test_check_of_a_kernel_that_does_not_compile() -> None:
    from kernels.grading import check

    report = check("gpu_architecture/axpby_grid_stride",
                   extool.solution("gpu_architecture/axpby_grid_stride").replace("i += stride", "i += strde"))
    assert report.verdict == V.COMPILE_ERROR and "strde" in report.stage_message


def test_cli_grades_a_folder(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "good.cu").write_text(extool.solution("reduce/sum_int64"), encoding="utf-8")
    (subs / "overflow.cu").write_text((CORPUS / "reduce/sum_int64/int_accumulator.cu").read_text(), encoding="utf-8")
    (subs / "forbidden.cu").write_text((CORPUS / "reduce/sum_int64/launch_counter.cu").read_text(), encoding="utf-8")
    out = tmp_path / "out"
    env = dict(os.environ, COURSE_BACKEND="cpu", COURSE_GRADING_SEED=SEED)
    run = subprocess.run([sys.executable, "-m", "kernels.grading", "grade", str(subs), "--exercise", "reduce/sum_int64",
                          "--out", str(out), "--timeout", "120"], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=600)
    assert run.returncode == 0, run.stderr
    rows = {r["submission"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert rows["good"]["verdict"] == V.PASSED
    assert rows["overflow"]["verdict"] == V.WRONG
    assert rows["forbidden"]["verdict"] == V.FORBIDDEN
    results = json.loads((out / "good" / "results.json").read_text())
    assert results["score"] > 0 and any(t["name"] == "performance" for t in results["tests"])


def test_gradescope_command(tmp_path: Path) -> None:
    submission = tmp_path / "submission"
    submission.mkdir()
    notebook = ROOT / "exercises" / "reduce" / "sum_int64.ipynb"
    text = notebook.read_text(encoding="utf-8").replace(
        json.dumps(extool.starter("reduce/sum_int64")), json.dumps(extool.solution("reduce/sum_int64")))
    (submission / "sum_int64.ipynb").write_text(text, encoding="utf-8")
    results = tmp_path / "results" / "results.json"
    env = dict(os.environ, COURSE_BACKEND="cpu")
    run = subprocess.run([sys.executable, "-m", "kernels.grading", "gradescope", "--exercise", "reduce/sum_int64",
                          "--seed", SEED, "--submission", str(submission), "--results", str(results)],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert run.returncode == 0, run.stderr
    data = json.loads(results.read_text())
    assert data["tests"] and all("visibility" in t for t in data["tests"])
