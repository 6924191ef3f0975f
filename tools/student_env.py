"""Run the notebooks the way a student without a GPU does: in Colab's packages, outside a clone.

    python tools/student_env.py                         # every chapter and every exercise notebook
    python tools/student_env.py book/gemm.ipynb exercises/reduce/sum_int64.ipynb   # just these
    python tools/student_env.py book/gemm.md            # a chapter's source, before `sync`
    python tools/student_env.py --prepare               # only build the environment and install the package

The student environment is a virtual environment in ``.venv-student`` (``STUDENT_VENV`` moves it),
built from ``tools/student-env-requirements.txt`` alone: Colab's CPU runtime's versions of what the
course uses, with no CuPy, no cuda-bindings and no NVRTC. It is rebuilt only when that file (or the
Python it is built with) changes. Before every run the course package is installed into it the way
the setup cell installs it in Colab: ``pip install --no-deps`` of the repository (a copy of this
working tree's files, so uncommitted work is what runs). Each notebook is then copied into a fresh
folder outside the clone, so its setup cell finds no ``../kernels`` and imports the installed
package, and executed top to bottom with nbclient, against a kernel whose Python is the student
environment's, with no COURSE_BACKEND and no PYTHONPATH: with no CuPy, it runs on the CPU backend.

tests/test_chapters_on_cpu.py runs every notebook this way; this command prints one line per
notebook and, for a failure, the cell and the error.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "tools" / "student-env-requirements.txt"
VENV_ENV = "STUDENT_VENV"
STAMP = ".requirements-sha256"
PACKAGE_STAMP = ".package-sha256"  # the repository files the installed package was built from
CELL_TIMEOUT_S = 600
#: What Colab's CPU runtime lacks and a plain Jupyter usually lacks too; the environment must not have them.
ABSENT = ("cupy", "cuda.bindings", "torch")
#: Variables of this (developer's or CI's) shell that a student's kernel would not have.
DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "COURSE_BACKEND", "MPLBACKEND",
               "JUPYTER_PATH", "JUPYTER_CONFIG_DIR", "IPYTHONDIR", "PIP_REQUIRE_VIRTUALENV")

sys.path.insert(0, str(ROOT / "tools"))


class StudentEnvError(RuntimeError):
    """The student environment could not be built or the package not installed; one-line message."""


# --------------------------------------------------------------------------- the environment


def venv_dir() -> Path:
    return Path(os.environ.get(VENV_ENV) or ROOT / ".venv-student").resolve()


def venv_python(venv: Path | None = None) -> Path:
    return (venv or venv_dir()) / "bin" / "python"


def base_python() -> str:
    """The interpreter the environment is made from: the one this (project) environment was made from."""
    return getattr(sys, "_base_executable", None) or sys.executable


def environment_key(requirements: Path = REQUIREMENTS, python: str | None = None) -> str:
    """sha256 of the pin file and the base interpreter's version: the environment is rebuilt when it changes."""
    python = python or base_python()
    version = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True,
                             text=True).stdout.strip()
    return hashlib.sha256(requirements.read_bytes() + b"\0" + version.encode()).hexdigest()


def _tail(text: str, lines: int = 3) -> str:
    """The lines of a tool's output that say what went wrong, joined into one line (pip's errors
    rather than its warnings)."""
    useful = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in useful if "error" in line.lower()]
    return " | ".join((errors or [line for line in useful if not line.startswith("WARNING:")] or useful)[-lines:])


def _pip(python: Path, *args: str, what: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
                          capture_output=True, text=True, cwd=tempfile.gettempdir())
    if done.returncode != 0:
        raise StudentEnvError(f"{what} failed (pip exit {done.returncode}): {_tail(done.stderr + done.stdout)}")


def present_modules(python: Path, names: Iterable[str] = ABSENT) -> list[str]:
    """Which of ``names`` the interpreter can import (found, not imported: torch is slow to import)."""
    code = ("import importlib.util, json, sys\n"
            "def found(name):\n"
            "    try:\n"
            "        return importlib.util.find_spec(name) is not None\n"
            "    except ImportError:\n"
            "        return False\n"
            "print(json.dumps([n for n in sys.argv[1:] if found(n)]))")
    done = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True,
                          cwd=tempfile.gettempdir(), env=kernel_env(python.parent.parent))
    if done.returncode != 0:
        raise StudentEnvError(f"{python} does not run: {_tail(done.stderr)}")
    return json.loads(done.stdout)


def ensure_venv(log: Callable[[str], None] = print) -> Path:
    """The student environment's python, built from the pin file when missing or out of date."""
    venv = venv_dir()
    key = environment_key()
    stamp = venv / STAMP
    if venv_python(venv).exists() and stamp.exists() and stamp.read_text().strip() == key:
        return venv_python(venv)
    started = time.perf_counter()
    log(f"Building the student environment in {venv} from {REQUIREMENTS.relative_to(ROOT)}")
    shutil.rmtree(venv, ignore_errors=True)
    done = subprocess.run([base_python(), "-m", "venv", str(venv)], capture_output=True, text=True)
    if done.returncode != 0:
        raise StudentEnvError(f"`{base_python()} -m venv {venv}` failed: {_tail(done.stderr)} "
                              "(on Debian: apt-get install python3-venv)")
    python = venv_python(venv)
    _pip(python, "install", "--quiet", "-r", str(REQUIREMENTS),
         what=f"installing {REQUIREMENTS.relative_to(ROOT)} from PyPI into {venv.name}")
    unwanted = present_modules(python)
    if unwanted:
        raise StudentEnvError(f"the student environment must not have {', '.join(unwanted)}, but pip installed it "
                              f"(a dependency of a package in {REQUIREMENTS.name}?)")
    stamp.write_text(key + "\n")
    log(f"  built in {time.perf_counter() - started:.0f} s")
    return python


def repository_files(root: Path = ROOT) -> list[Path]:
    """The files a clone of this working tree has: tracked ones and untracked ones git does not ignore."""
    done = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise StudentEnvError(f"{root} is not a git checkout, so the files a clone has are unknown: {_tail(done.stderr)}")
    return [Path(name) for name in done.stdout.split("\0") if name and (root / name).is_file()]


def install_package(python: Path, root: Path = ROOT) -> Path:
    """``pip install --no-deps`` of (a copy of) the repository, as the setup cell does in Colab; the
    installed package's folder.

    The copy holds exactly the files a clone would have, so a file that packaging misses (a kernel
    source, a runtime header) is missing here too. The build uses the environment's own setuptools
    (``--no-build-isolation``), so a cached environment installs without reaching PyPI. Skipped when
    the package was last installed from exactly these files.
    """
    files = repository_files(root)
    digest = hashlib.sha256()
    for relative in files:
        digest.update(relative.as_posix().encode() + b"\0" + (root / relative).read_bytes() + b"\0")
    stamp = python.parent.parent / PACKAGE_STAMP
    if not (stamp.exists() and stamp.read_text().strip() == digest.hexdigest()):  # else installed already
        stamp.unlink(missing_ok=True)
        with tempfile.TemporaryDirectory(prefix="course-repository-") as folder:
            copy = Path(folder) / "repository"
            for relative in files:
                target = copy / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / relative, target)
            _pip(python, "install", "--quiet", "--no-deps", "--no-build-isolation", "--force-reinstall", str(copy),
                 what="pip install --no-deps of the repository into the student environment")
        stamp.write_text(digest.hexdigest() + "\n")
    code = "import kernels, os; print(os.path.dirname(kernels.__file__))"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=tempfile.gettempdir(),
                          env=kernel_env(python.parent.parent))
    if done.returncode != 0:
        raise StudentEnvError(f"the installed package does not import: {_tail(done.stderr)}")
    installed = Path(done.stdout.strip())
    if python.parent.parent not in installed.parents:
        raise StudentEnvError(f"the student environment imports kernels from {installed}, "
                              "not from the package installed into it")
    return installed


def prepare(log: Callable[[str], None] = print) -> Path:
    """Build (or reuse) the environment and install the package; the environment's python."""
    python = ensure_venv(log)
    install_package(python)
    return python


# --------------------------------------------------------------------------- the notebooks


def chapter_notebooks() -> list[Path]:
    import notebooks as nbtools

    return [pair.ipynb for pair in nbtools.find_pairs()]


def exercise_notebooks() -> list[Path]:
    return sorted(p for p in (ROOT / "exercises").glob("*/*.ipynb"))


def all_notebooks() -> list[Path]:
    return chapter_notebooks() + exercise_notebooks()


def label(path: Path) -> str:
    """``book/gemm.ipynb``: the path relative to the repository."""
    path = Path(path).resolve()
    return path.relative_to(ROOT).as_posix() if ROOT in path.parents else str(path)


def pins(requirements: Path = REQUIREMENTS) -> dict[str, str]:
    """The pin file as {normalised name: version}; ValueError for a line not pinned with ==."""
    found = {}
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            if not version:
                raise ValueError(f"{requirements.name}: {line!r} is not pinned with ==")
            found[re.sub(r"[-_.]+", "-", name).lower()] = version
    return found


def kernel_env(venv: Path) -> dict[str, str]:
    """The environment of a student's kernel: this one without the project's variables, the
    student environment's bin first on PATH (as an activated environment or Colab has it)."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "/usr/bin:/bin")])
    env.setdefault("COURSE_CHECK_SEED", "2026")  # the exercises' random cases, the same on every run
    return env


def _read(path: Path):
    import nbformat

    import notebooks as nbtools

    if path.suffix == ".md":
        return nbtools.read_markdown(path)
    return nbformat.read(str(path), as_version=4)


def execute(path: Path, python: Path, result_path: Path, keep: Path | None = None) -> None:
    """Run one notebook in a fresh folder outside the clone with the student's python; write a JSON result.

    Runs in its own process (``--one``), so that each notebook gets a fresh nbclient and kernel.
    """
    import nbformat
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    import notebooks as nbtools

    nb = _read(path)
    for cell in nb.cells:  # start from a blank notebook, as "Restart and run all" does
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None

    class StudentKernel(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(argv=[str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                              display_name="Python 3 (ipykernel)", language="python")

    started = time.perf_counter()
    error = None
    with tempfile.TemporaryDirectory(prefix=f"{path.stem}-student-") as folder:
        where = Path(folder) / path.stem  # two levels down, like book/ and exercises/<chapter>/
        where.mkdir()
        nbformat.write(nb, str(where / f"{path.stem}.ipynb"))  # the copy a student opens
        client = NotebookClient(nb, km=KernelManager(kernel_name="python3", kernel_spec_manager=StudentKernel()),
                                timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=False,
                                store_widget_state=True, record_timing=False,
                                resources={"metadata": {"path": str(where)}})
        try:
            client.execute()
        except CellExecutionError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 -- a dead kernel or a timeout is a failure too
            error = f"{type(exc).__name__}: {exc}"
    if keep is not None:  # the executed notebook, for reading what a student sees
        nb.metadata.pop("widgets", None)
        target = keep / label(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(target.with_suffix(".ipynb")))
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    failed = next((i for i, cell in enumerate(code, 1)
                   if any(o.get("output_type") == "error" for o in cell.get("outputs", []))), None)
    if error is not None and failed is None:  # a timeout leaves no error output: the first unfinished cell
        failed = next((i for i, cell in enumerate(code, 1) if cell.get("execution_count") is None), None)
    result = {
        "notebook": label(path),
        "seconds": round(time.perf_counter() - started, 1),
        "error": error,
        "failed_cell": failed,
        "failed_source": code[failed - 1].source if failed else None,
        "outputs": [nbtools.stream_text(cell) for cell in code],
        "sources": [cell.source for cell in code],
    }
    result_path.write_text(json.dumps(result))


@dataclass(frozen=True)
class Job:
    """One notebook to execute, and the Python whose kernel runs it."""

    path: Path
    python: Path

    @property
    def label(self) -> str:
        return label(self.path)


def _execute_in_subprocess(job: Job, folder: Path, keep: Path | None = None) -> dict:
    result_path = folder / (re.sub(r"\W+", "_", job.label) + ".json")
    done = subprocess.run([sys.executable, __file__, "--one", str(job.path), "--python", str(job.python),
                           "--result", str(result_path), *(["--keep", str(keep)] if keep else [])],
                          env=kernel_env(job.python.parent.parent), capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    if result_path.exists():
        return json.loads(result_path.read_text())
    return {"notebook": job.label, "seconds": None, "failed_cell": None, "failed_source": None,
            "error": f"the runner failed:\n{done.stdout}\n{done.stderr}", "outputs": [], "sources": []}


def run_jobs(jobs: Sequence[Job], workers: int | None = None, keep: Path | None = None) -> list[dict]:
    """Execute the jobs in parallel processes (one per core, at least 2); one result per job, in order.

    ``keep``: a folder to write the executed notebooks into (``<keep>/book/gemm.ipynb`` ...).
    """
    workers = workers or max(2, os.cpu_count() or 2)
    keep = keep.resolve() if keep else None
    with tempfile.TemporaryDirectory(prefix="student-runs-") as folder, ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: _execute_in_subprocess(job, Path(folder), keep), jobs))


def run(paths: Iterable[Path], python: Path, workers: int | None = None, keep: Path | None = None) -> dict[str, dict]:
    """Execute the notebooks in the student environment; results keyed by ``label``."""
    jobs = [Job(Path(p).resolve(), python) for p in paths]
    return {job.label: result for job, result in zip(jobs, run_jobs(jobs, workers, keep))}


def describe_failure(result: dict) -> str:
    where = ""
    if result["failed_cell"]:
        first = "\n".join(result["failed_source"].splitlines()[:6])
        where = f" in code cell {result['failed_cell']}:\n{first}\n..."
    return f"{result['notebook']} fails in the student environment{where}\n\n{result['error'][-4000:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (.ipynb, or a chapter's .md); default: all")
    parser.add_argument("--prepare", action="store_true", help="only build the environment and install the package")
    parser.add_argument("--jobs", type=int, default=None, help="notebooks run at once (default: one per core, at least 2)")
    parser.add_argument("--keep", type=Path, default=None, help="write the executed notebooks into this folder")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--python", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        execute(args.one, args.python, args.result, args.keep)
        return 0
    try:
        python = prepare()
    except StudentEnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.prepare:
        print(f"student environment ready: {python}")
        return 0
    paths = args.paths or all_notebooks()
    started = time.perf_counter()
    results = run(paths, python, args.jobs, args.keep)
    failures = [r for r in results.values() if r["error"]]
    for name, result in results.items():
        print(f"{'FAILED' if result['error'] else 'ok':6}  {result['seconds'] or 0:6.1f} s  {name}")
    for result in failures:
        print("\n" + describe_failure(result))
    print(f"\n{len(results) - len(failures)} of {len(results)} notebooks ran to the end "
          f"in {time.perf_counter() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
