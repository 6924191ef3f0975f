"""Grade a folder of submissions: one sandboxed process per submission, hidden cases from a secret seed.

For every submission the grader
1. takes out the kernel (the string assigned to KERNEL) and the predictions, by parsing only;
2. screens the kernel (no #include, no host code, no asm, no global state), checks the kernel's name
   and parameters, and compiles it with NVRTC (no GPU needed) for a clear compile error;
3. runs it in a fresh Python process (``kernels.grading.child``) with a wall-clock limit and a memory
   limit, on the public cases and the hidden ones, then times it (on a GPU), re-checking every timed
   launch;
4. writes ``<out>/<submission>/results.json`` (Gradescope's format) and ``<out>/grades.csv``.

Whatever a submission does (hang, crash, fault, eat memory), the grader records a verdict and moves
on to the next one.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import gradescope, predict
from . import verdicts as V
from .extract import ExtractionError, Submission, extract, find_submission_files
from .harness import CaseResult, StageError, launch_macros, signature_problems
from .isolate import ProcessOutcome, run_limited
from .report import Report
from .screen import screen
from .spec import Exercise

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory that holds the kernels package


@dataclass
class GradeOptions:
    exercise: Exercise
    seed: str
    timeout: float = 300.0
    memory_mb: int = 8192
    gpu_memory_mb: int = 0
    perf: bool = True
    perf_target: float | None = None  # replaces the exercise's target (a fraction of its baseline)
    archs: tuple[str, ...] = ("sm_75",)
    hidden_visibility: str = "after_due_date"
    unmeasured_perf: str = "exclude"
    show_expected: bool = False
    python: str = sys.executable
    child_command: Callable[[Path, "GradeOptions"], list[str]] | None = None  # tests replace the child
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Graded:
    name: str
    file: str
    report: Report
    result: dict[str, Any]
    seconds: float


# --------------------------------------------------------------------------------------------------
# Finding submissions
# --------------------------------------------------------------------------------------------------

def discover(folder: Path) -> list[tuple[str, Path | None]]:
    """(name, file) for every submission: files directly in ``folder``, or one per sub-folder."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder of submissions")
    found: list[tuple[str, Path | None]] = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            files = find_submission_files(entry)
            found.append((entry.name, files[0] if files else None))
        elif entry.suffix in (".ipynb", ".cu", ".py"):
            found.append((entry.stem, entry))
    names = [n for n, _ in found]
    duplicates = {n for n in names if names.count(n) > 1}
    return [(f"{n}{f.suffix}" if n in duplicates and f else n, f) for n, f in found]


# --------------------------------------------------------------------------------------------------
# Stages that need no backend
# --------------------------------------------------------------------------------------------------

def precheck(sub: Submission, ex: Exercise, archs: tuple[str, ...]) -> tuple[str, str]:
    """(verdict, message) of the stages before running; ("", "") when the kernel may run."""
    if not ex.has_kernel:
        return "", ""
    if not sub.kernel or not sub.kernel.strip():
        return V.NO_KERNEL, ("no kernel found: the notebook must keep the cell that assigns KERNEL = r\"\"\"...\"\"\" "
                             "(a .cu file is graded as a whole)" + ("; " + "; ".join(sub.notes) if sub.notes else ""))
    findings = screen(sub.kernel, ex.allowed_includes)
    if findings:
        return V.FORBIDDEN, "\n".join(str(f) for f in findings)
    problems = signature_problems(sub.kernel, ex)
    if problems:
        return V.WRONG_SIGNATURE, "\n".join(problems)
    try:
        launch_macros(sub.kernel, ex)
    except StageError as exc:
        return exc.verdict, exc.message
    try:
        from kernels.nvrtc import compile_cuda, nvrtc_available
    except ImportError:
        return "", ""
    if nvrtc_available():
        from kernels.compile import DEFAULT_OPTIONS

        for arch in archs:
            result = compile_cuda(sub.kernel, arch, options=DEFAULT_OPTIONS, filename="kernel.cu")
            if not result.ok:
                return V.COMPILE_ERROR, f"does not compile for {arch}:\n{result.log.strip()}"
    return "", ""


# --------------------------------------------------------------------------------------------------
# The sandboxed run
# --------------------------------------------------------------------------------------------------

def child_argv(workdir: Path, options: GradeOptions) -> list[str]:
    argv = [options.python, "-m", "kernels.grading.child", "--exercise", options.exercise.id,
            "--seed", str(options.seed), "--events", str(workdir / "events.jsonl")]
    if (workdir / "kernel.cu").exists():
        argv += ["--kernel", str(workdir / "kernel.cu")]
    if (workdir / "prediction.json").exists():
        argv += ["--prediction", str(workdir / "prediction.json")]
    if not options.perf:
        argv.append("--no-perf")
    if options.gpu_memory_mb:
        argv += ["--gpu-memory-mb", str(options.gpu_memory_mb)]
    if options.perf_target is not None:
        argv += ["--perf-target", str(options.perf_target)]
    return argv


def _read_events(path: Path) -> tuple[Report | None, list[CaseResult], dict[str, Any] | None]:
    """The final report if the child got that far, the cases it finished, and the case it was in."""
    report, cases, running = None, [], None
    if not path.exists():
        return None, [], None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = event.get("event")
        if kind == "start":
            running = event
        elif kind == "case":
            cases.append(CaseResult.from_dict(event["result"]))
            running = None
        elif kind == "report":
            report = Report.from_dict(event["report"])
    return report, cases, running


def _died(ex: Exercise, cases: list[CaseResult], running: dict[str, Any] | None, proc: ProcessOutcome,
          options: GradeOptions) -> Report:
    """A report for a child that never finished: a timeout, a memory kill, or a crash of the process."""
    report = Report(ex.id, ex.title, cases=list(cases))
    if proc.timed_out:
        verdict, why = V.TIMEOUT, f"stopped after {options.timeout:.0f} s"
    elif proc.memory_exceeded:
        verdict, why = V.MEMORY_LIMIT, f"killed above {options.memory_mb} MB of memory"
    else:
        signal_name = proc.signal_name or f"exit code {proc.returncode}"
        verdict, why = V.CRASH, f"the process died ({signal_name})"
        tail = proc.stderr.strip().splitlines()[-3:]
        if tail:
            why += ": " + " | ".join(tail)
    if running is not None:
        report.cases.append(CaseResult(running.get("case", "?"), running.get("visibility", "public"), verdict, why,
                                       running.get("why", "")))
    else:
        report.stage_verdict, report.stage_message = verdict, why + " (before the first case started)"
    return report


def run_submission(sub: Submission, options: GradeOptions) -> Report:
    """Run one extracted submission in a sandboxed process and return its report."""
    ex = options.exercise
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        workdir = Path(tmp)
        if sub.kernel is not None:
            (workdir / "kernel.cu").write_text(sub.kernel, encoding="utf-8")
        if sub.prediction is not None:
            (workdir / "prediction.json").write_text(json.dumps(sub.prediction, default=str), encoding="utf-8")
        argv = (options.child_command or child_argv)(workdir, options)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(PACKAGE_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(options.env)
        on_gpu = env.get("COURSE_BACKEND", "").lower() != "cpu" and _gpu_present()
        proc = run_limited(argv, timeout=options.timeout, memory_mb=options.memory_mb,
                           address_space=not on_gpu, env=env, cwd=workdir)
        report, cases, running = _read_events(workdir / "events.jsonl")
    if report is None:
        report = _died(ex, cases, running, proc, options)
    return report


def _gpu_present() -> bool:
    try:
        from kernels.backend import gpu_available

        return gpu_available()
    except Exception:
        return False


# --------------------------------------------------------------------------------------------------
# One submission, a folder
# --------------------------------------------------------------------------------------------------

def grade_file(name: str, path: Path | None, options: GradeOptions) -> Graded:
    ex = options.exercise
    start = time.monotonic()
    notes: list[str] = []
    if path is None:
        report = Report(ex.id, ex.title, stage_verdict=V.NO_KERNEL,
                        stage_message="no .ipynb, .cu or .py file in this submission")
    else:
        try:
            sub = extract(path)
            notes += sub.notes
            declared = sub.declared_exercise
            if ex.has_kernel and declared and declared != ex.id:
                notes.append(f"the kernel says it is for {declared}; it was graded as {ex.id}")
            verdict, message = precheck(sub, ex, options.archs)
            if verdict:
                report = Report(ex.id, ex.title, stage_verdict=verdict, stage_message=message)
                if ex.questions:
                    report.answers = predict.grade_answers(ex, sub.prediction)
            elif ex.has_kernel:
                report = run_submission(sub, options)
            else:
                report = Report(ex.id, ex.title, answers=predict.grade_answers(ex, sub.prediction))
        except ExtractionError as exc:
            report = Report(ex.id, ex.title, stage_verdict=V.NO_KERNEL, stage_message=str(exc))
    report.notes += notes
    report.show_expected = options.show_expected
    seconds = time.monotonic() - start
    result = gradescope.results_json(ex, report, seconds, hidden_visibility=options.hidden_visibility,
                                     unmeasured_perf=options.unmeasured_perf)
    return Graded(name, path.name if path else "", report, result, seconds)


def grade_folder(folder: Path, options: GradeOptions, out: Path,
                 progress: Callable[[str], None] | None = None) -> list[Graded]:
    """Grade every submission in ``folder``; write results.json files and grades.csv under ``out``."""
    graded: list[Graded] = []
    rows = []
    for name, path in discover(folder):
        if progress:
            progress(f"grading {name} ...")
        g = grade_file(name, path, options)
        graded.append(g)
        gradescope.write_json(out / name / "results.json", g.result)
        (out / name / "feedback.txt").write_text(str(g.report) + "\n", encoding="utf-8")
        rows.append(gradescope.csv_row(name, g.file, options.exercise, g.report, g.result, g.seconds))
        if progress:
            progress(f"  {name}: {g.report.verdict}, {g.result['score']} points ({g.seconds:.1f} s)")
    gradescope.write_csv(out / "grades.csv", rows)
    return graded
