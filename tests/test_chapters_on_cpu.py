"""Every chapter and every exercise notebook runs top to bottom where students open it without a GPU.

The student environment (tools/student_env.py) is the student: Colab's CPU runtime's versions of
what the course uses (tools/student-env-requirements.txt), no CuPy, no cuda-bindings, no NVRTC, the
package installed the way the setup cell installs it (``pip install --no-deps`` of the repository),
each notebook copied into a folder outside the clone and executed with nbclient, with no
COURSE_BACKEND: it runs on the CPU backend because there is no GPU, as a student's does. Every
chapter and every exercise notebook must run to the end there; its checks run at CPU sizes and must
pass, its timings say they are CPU timings, and cells that need what is absent (a GPU, NVRTC, torch)
say so in one line and the notebook goes on.

All notebooks share one pool of processes (one per core).

Run notebooks by hand: ``python tools/student_env.py book/reduce.ipynb`` (or a chapter's ``.md``)
prints each one's time and, for a failure, the cell and the error.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kernels.portable import NEEDS, SKIPPED

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import notebooks as nbtools  # noqa: E402  (tools/ is not a package)
import student_env  # noqa: E402

CHAPTERS = {pair.name: pair.ipynb for pair in nbtools.find_pairs()}
EXERCISES = {student_env.label(path): path for path in student_env.exercise_notebooks()}
# Notebooks still being written: they join this test when they are finished.
NOT_YET: dict[str, str] = {}
NOTE = "[CPU backend]"
TIMES_KERNELS = re.compile(r"\bbenchmark\(|\bSweep\(")
PRINTS_A_SPEED = re.compile(r"\d\s*(ms|µs|GB/s|[GT]FLOP/s)\b")
NEEDS_NVRTC = NEEDS.split("{what}")[0] + "NVRTC"


def _code(path: Path) -> list[str]:
    return [cell.source for cell in nbtools.read_notebook(path).cells if cell.cell_type == "code"]


def _reads_ptxas(path: Path) -> bool:
    return any("resource_report" in source for source in _code(path))


NVRTC_CHAPTERS = [name for name, path in CHAPTERS.items() if name not in NOT_YET and _reads_ptxas(path)]


@pytest.fixture(scope="session")
def runs(student_python: Path) -> dict[str, dict]:
    """Every notebook executed once, in parallel processes; keyed by its path (book/gemm.ipynb)."""
    chapters = [path for name, path in CHAPTERS.items() if name not in NOT_YET]
    exercises = [path for name, path in EXERCISES.items() if name not in NOT_YET]
    jobs = [student_env.Job(path, student_python) for path in chapters + exercises]  # the short exercises last
    results = student_env.run_jobs(jobs)
    return {job.label: result for job, result in zip(jobs, results)}


def _chapter(runs: dict, name: str) -> dict:
    return runs[f"book/{name}.ipynb"]


def _params(names) -> list:
    return [pytest.param(name, marks=pytest.mark.skip(reason=NOT_YET[name])) if name in NOT_YET else name
            for name in names]


def _fail_unless_it_ran(run: dict) -> None:
    if run["error"]:
        pytest.fail(student_env.describe_failure(run), pytrace=False)


# --------------------------------------------------------------------------- every notebook runs


@pytest.mark.parametrize("name", _params(CHAPTERS))
def test_chapter_runs_for_a_student_without_a_gpu(name: str, runs: dict) -> None:
    _fail_unless_it_ran(_chapter(runs, name))


@pytest.mark.parametrize("name", _params(EXERCISES))
def test_exercise_runs_for_a_student_without_a_gpu(name: str, runs: dict) -> None:
    run = runs[name]
    _fail_unless_it_ran(run)
    assert "runs on the CPU backend" in run["outputs"][0]
    check = next(i for i, source in enumerate(run["sources"]) if "check(" in source)
    assert run["outputs"][check].strip(), f"{name}: the check cell showed nothing"


@pytest.mark.parametrize("name", [n for n in CHAPTERS if n not in NOT_YET])
def test_chapter_says_it_runs_on_the_cpu_backend(name: str, runs: dict) -> None:
    """The setup cell says so, and every cell that times a kernel says that it is a CPU timing
    (or that it is skipped: it measures something only a GPU has)."""
    run = _chapter(runs, name)
    if run["error"] or not run["outputs"]:
        pytest.skip("the chapter did not run to the end")
    assert "runs on the CPU backend" in run["outputs"][0]
    skipped = SKIPPED.split("{what}")[0]
    for index, (source, text) in enumerate(zip(run["sources"], run["outputs"]), 1):
        if TIMES_KERNELS.search(source) and PRINTS_A_SPEED.search(text):
            assert NOTE in text or skipped in text, (
                f"code cell {index} of book/{name}.ipynb times kernels but does not say they are CPU timings:\n"
                f"{text[:600]}")


# --------------------------------------------------------------------------- what is missing is said


@pytest.mark.parametrize("name", NVRTC_CHAPTERS)
def test_a_cell_that_reads_ptxas_without_nvrtc_says_so_in_one_line(name: str, runs: dict) -> None:
    """No NVRTC (Colab's CPU runtime, a plain Jupyter without the [cpu] extra): every cell that asks
    for a resource report says once what it needs, how to install it and what the reader sees."""
    run = _chapter(runs, name)
    if run["error"]:
        pytest.skip("the chapter did not run to the end")
    cells = [i for i, source in enumerate(run["sources"]) if "resource_report(" in source]
    assert cells, f"book/{name}.ipynb calls resource_report in no cell"
    for i in cells:
        said = re.findall(re.escape(NEEDS_NVRTC) + r"[^\n]*", run["outputs"][i])
        assert len(said) == 1, (f"code cell {i + 1} of book/{name}.ipynb reads ptxas's report without NVRTC but "
                                f"says so {len(said)} times:\n{run['outputs'][i][:800]}")
        assert "pip install" in said[0] and "unknown" in said[0] and "website" in said[0]


def test_only_the_chapters_that_read_ptxas_need_nvrtc(runs: dict) -> None:
    needing = sorted(name for name in CHAPTERS if name not in NOT_YET
                     and any(NEEDS_NVRTC in text for text in _chapter(runs, name)["outputs"]))
    assert needing == sorted(NVRTC_CHAPTERS)


# --------------------------------------------------------------------------- the environment is the student's


def test_the_student_environment_has_colabs_versions_and_no_gpu_packages(student_python: Path) -> None:
    done = subprocess.run([str(student_python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
                          capture_output=True, text=True, check=True)
    installed = {re.sub(r"[-_.]+", "-", p["name"]).lower(): p["version"] for p in json.loads(done.stdout)}
    wrong = {name: (version, installed.get(name)) for name, version in student_env.pins().items()
             if installed.get(name) != version}
    assert wrong == {}, f"pinned version, installed version: {wrong}"
    assert student_env.present_modules(student_python) == []  # no CuPy, no cuda-bindings, no torch
    assert installed.get("gpu-kernels-course") == "0.1.0"
    # The package's declared dependencies hold at Colab's versions: `pip install .` would add nothing.
    check = subprocess.run([str(student_python), "-m", "pip", "check", "--disable-pip-version-check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_installed_package_has_every_file_of_the_repositorys_package(student_python: Path) -> None:
    """``pip install --no-deps`` of the repository installs every file under kernels/ (the CUDA sources,
    the CPU runtime's sources and headers, the traffic data), not just the Python modules."""
    done = subprocess.run([str(student_python), "-c", "import kernels, os; print(os.path.dirname(kernels.__file__))"],
                          capture_output=True, text=True, cwd=tempfile.gettempdir(),
                          env=student_env.kernel_env(student_python.parent.parent))
    assert done.returncode == 0, done.stderr
    installed = Path(done.stdout.strip())
    assert student_python.parent.parent in installed.parents, installed
    files = [p for p in student_env.repository_files() if p.parts[0] == "kernels"]
    assert len(files) > 100
    missing = [p.as_posix() for p in files if not (installed.parent / p).is_file()]
    assert missing == [], f"not installed by pip install --no-deps (pyproject.toml package-data): {missing[:10]}"


# --------------------------------------------------------------------------- the runner itself


def _notebook(tmp_path: Path, *cells: str) -> Path:
    import nbformat

    path = tmp_path / "probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), str(path))
    return path


def test_the_runner_reports_the_failing_cell_and_what_the_students_kernel_sees(
        student_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A student's kernel: the student environment's python, the installed package, a folder outside
    the clone, none of the project's variables; and a cell that raises stops the notebook there."""
    monkeypatch.setenv("COURSE_BACKEND", "cupy")  # what a developer's shell may have: the student has none
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    probe = _notebook(tmp_path,
                      "import os, sys, kernels\n"
                      "print(sys.executable, os.getcwd(), kernels.__file__, os.environ.get('COURSE_BACKEND'),"
                      " os.environ.get('PYTHONPATH'), kernels.backend_name(), sep='\\n')",
                      "1 / 0",
                      "print('never reached')")
    [run] = student_env.run_jobs([student_env.Job(probe, student_python)])
    executable, cwd, package, course_backend, pythonpath, backend = run["outputs"][0].splitlines()
    assert Path(executable) == student_python
    assert ROOT not in Path(cwd).parents and not (Path(cwd).parent / "kernels").exists()
    assert student_python.parent.parent in Path(package).parents
    assert (course_backend, pythonpath, backend) == ("None", "None", "cpu")
    assert run["failed_cell"] == 2 and "ZeroDivisionError" in run["error"]
    assert run["outputs"][2] == ""
    assert "fails in the student environment in code cell 2:\n1 / 0" in student_env.describe_failure(run)


def test_the_environment_is_rebuilt_when_the_pin_file_changes(tmp_path: Path) -> None:
    pins = tmp_path / "pins.txt"
    pins.write_text(student_env.REQUIREMENTS.read_text())
    same = student_env.environment_key(pins)
    assert same == student_env.environment_key(student_env.REQUIREMENTS)
    pins.write_text(pins.read_text().replace("numpy==", "numpy==0"))
    assert student_env.environment_key(pins) != same
