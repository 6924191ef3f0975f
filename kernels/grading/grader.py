"""Grade a folder of submissions: one sandboxed process per submission, hidden cases from a secret seed.

For every submission the grader
1. takes out the kernel (the string assigned to KERNEL) and the predictions, by parsing only;
2. screens the kernel (no #include, no host code, no asm, no global state), checks the kernel's name
   and parameters, and compiles it with NVRTC (no GPU needed) for a clear compile error;
3. runs it in a separate, sandboxed process (``judge.py`` starts ``judged.py``; ``sandbox.py`` says
   what walls it has) that holds no seed, no reference and no verdict: this process makes the public
   and hidden cases, sends their buffers, and judges the buffers that come back; then the kernel is
   timed (on a GPU), every timed launch re-checked;
4. writes ``<out>/<submission>/results.json`` (Gradescope's format) and ``<out>/grades.csv``.

Whatever a submission does (hang, crash, fault, eat memory), the grader records a verdict and moves
on to the next one.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import gradescope, predict
from . import verdicts as V
from .extract import ExtractionError, Submission, extract, find_submission_files
from .harness import StageError, launch_macros, signature_problems
from .report import Report
from .screen import screen
from .spec import Exercise

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
    sandbox: str = "standard"  # strict | standard | off (see kernels/grading/sandbox.py)
    submissions_root: Path | None = None  # hidden from the judged process
    results_root: Path | None = None
    hidden_paths: tuple[Path, ...] = ()  # more folders it must not see (where the seed file is, say)
    judged_command: Callable[[list[str]], list[str]] | None = None  # tests replace the judged process
    env: dict[str, str] = field(default_factory=dict)  # more variables for the judged process (COURSE_BACKEND)
    _plan: Any = field(default=None, repr=False)

    def plan(self) -> Any:
        """The sandbox's layers (checked once; RuntimeError when a required one is missing)."""
        if self._plan is None:
            from .judge import plan_sandbox

            self._plan = plan_sandbox(self.sandbox)
        return self._plan


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

        for arch in (ex.arch,) if ex.arch else archs:  # an exercise for one kind of GPU: its own target
            result = compile_cuda(sub.kernel, arch, options=DEFAULT_OPTIONS, filename="kernel.cu")
            if not result.ok:
                return V.COMPILE_ERROR, f"does not compile for {arch}:\n{result.log.strip()}"
    return "", ""


# --------------------------------------------------------------------------------------------------
# The sandboxed run
# --------------------------------------------------------------------------------------------------

def run_submission(sub: Submission, options: GradeOptions) -> Report:
    """Run one extracted submission in a judged process under the sandbox, and judge it here."""
    from .judge import judge_kernel

    backend = options.env.get("COURSE_BACKEND", os.environ.get("COURSE_BACKEND", ""))
    on_gpu = backend.lower() != "cpu" and _gpu_present()
    hide = tuple(p for p in (options.submissions_root, options.results_root, *options.hidden_paths) if p is not None)
    report = judge_kernel(options.exercise, sub.kernel or "", options, options.plan(), on_gpu, hide)
    if options.exercise.questions:
        report.answers = predict.grade_answers(options.exercise, sub.prediction)
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
    options.submissions_root = options.submissions_root or folder.resolve()
    options.results_root = options.results_root or out.resolve()
    if options.exercise.has_kernel:
        options.plan()  # fail before the first submission when the sandbox is not available
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
