"""The grader's side of a submission's run: start the judged process, send it cases, judge what
comes back.

The judge keeps everything that decides a grade: the secret seed, the cases it makes, the
references, the comparisons, the verdicts. The judged process (``judged.py``) gets a case's whole
buffers and sends them back after the launch; a message that is not exactly the buffers it was
sent, in shape and type, ends the submission's run as a crash. Nothing the judged process writes
anywhere else is read.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import sys
import tempfile
import weakref
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import sandbox
from . import verdicts as V
from . import wire
from .harness import NOT_RUN_MESSAGE, RunOutcome, host_buffers, run_cases
from .isolate import Limited, ProcessOutcome
from .judged import buffers_header, case_header
from .perf import PerfResult, not_measured
from .report import Report
from .session import make_cases, perf_seed
from .spec import Case, Exercise

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory that holds the kernels package
SMALL_ANSWER_BYTES = 1 << 20
# Variables the judged process may inherit; everything else (the seed among them) stays behind.
PASSED_VARIABLES = ("PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_PATH", "CUDA_HOME", "CXX", "LANG",
                    "LC_ALL", "COURSE_BACKEND", "COURSE_CPU_CACHE", "COURSE_CPU_TIME_LIMIT", "XDG_CACHE_HOME",
                    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUPY_ACCELERATORS",
                    "CUPY_NVRTC_SEARCH_PATH", "NUMBA_CUDA_DRIVER", "COURSE_GPU_PROFILE")
SEED_VARIABLE = "COURSE_GRADING_SEED"
JUDGED_SCRATCH = "/tmp/course-judged"  # inside the namespaces, /tmp is an empty file system of its own
EMPTY_KERNEL = 'extern "C" __global__ void course_empty_kernel(int* x) { if (x) x[0] = 0; }\n'


class JudgedDied(Exception):
    """The judged process ended, broke the protocol, or ran out of time or memory."""

    def __init__(self, outcome: ProcessOutcome, why: str = ""):
        super().__init__(why)
        self.outcome, self.why = outcome, why

    def verdict_and_message(self, timeout: float, memory_mb: int) -> tuple[str, str]:
        proc = self.outcome
        if proc.timed_out:
            return V.TIMEOUT, f"stopped after {timeout:.0f} s"
        if proc.memory_exceeded:
            return V.MEMORY_LIMIT, f"killed above {memory_mb} MB of memory"
        if proc.signal == 31:  # SIGSYS: the seccomp filter of the judged process
            return V.CRASH, ("the process running the kernel was stopped by the grader's sandbox (a system call "
                             "graded code may not make)")
        how = proc.signal_name or f"exit code {proc.returncode}"
        why = f"the process running the kernel died ({how})"
        if self.why and not proc.signal_name:
            why += f": {self.why}"
        tail = [line for line in proc.stderr.strip().splitlines()[-3:] if line.strip()]
        if tail:
            why += ": " + " | ".join(tail)
        return V.CRASH, why


@dataclasses.dataclass
class SandboxPlan:
    """Which layers the judged process gets, decided once per grading run."""

    launch_filter: bool = True
    process_filter: bool = True
    namespaces: bool = True
    notes: tuple[str, ...] = ()


def plan_sandbox(mode: str) -> SandboxPlan:
    """``strict``: every layer or nothing; ``standard``: seccomp required, namespaces where the system
    has them; ``off``: none (for testing the grader itself; never for grading students).
    Raises RuntimeError naming what is missing when a required layer is not available."""
    if mode == "off":
        return SandboxPlan(False, False, False, ("the sandbox was turned off (--sandbox off)",))
    if mode not in ("strict", "standard"):
        raise ValueError(f"--sandbox must be strict, standard or off, not {mode!r}")
    problem = sandbox.seccomp_problem()
    if problem is not None:
        raise RuntimeError(f"the grader refuses to run submissions without its sandbox: {problem}")
    namespaces = sandbox.namespace_problem()
    if namespaces is not None and mode == "strict":
        raise RuntimeError(f"--sandbox strict needs every layer: {namespaces}")
    notes = (f"sandbox without namespaces ({namespaces.reason})",) if namespaces else ()
    return SandboxPlan(True, True, namespaces is None, notes)


@functools.lru_cache(maxsize=2)
def _empty_library(traced: bool) -> Path | None:
    """The CPU-backend library of an empty kernel: the initialisers every library of its kind has."""
    from kernels.compile import _load_cpu
    from kernels.cpu import compile as cpu_compile

    with cpu_compile.build_only():
        try:
            _load_cpu(EMPTY_KERNEL, "kernel.cu", "course_empty_kernel", (), None)
        except cpu_compile.LibraryBuilt as built:
            if not traced:
                return built.path
            try:
                cpu_compile.compile_module(built.code, built.entries, built.options, built.filename, traced=True)
            except cpu_compile.LibraryBuilt as traced_build:
                return traced_build.path
    return None


def inspect_libraries(libraries: list[dict[str, Any]]) -> list[str]:
    """Why the compiled libraries may not be loaded (empty when they may)."""
    found: list[str] = []
    for entry in libraries:
        library = Path(str(entry.get("path", "")))
        found += sandbox.symbol_findings(library)
        baseline = _empty_library(bool(entry.get("traced")))
        if baseline is not None:
            found += sandbox.initializer_findings(library, baseline)
    return list(dict.fromkeys(found))


def judged_environment(on_gpu: bool) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED_VARIABLES if k in os.environ}
    if on_gpu:
        env["COURSE_BACKEND"] = "cupy"  # never a silent fall-back to the CPU backend
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    # the package, and wherever the grader's own packages were found (a --target folder, say)
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(PACKAGE_ROOT), *inherited]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["HOME"] = "/nonexistent"
    env["CUDA_CACHE_DISABLE"] = "1"  # the driver's JIT cache would write files
    env["CUPY_CACHE_IN_MEMORY"] = "1"
    # CuPy creates its cache folder when imported, even with the cache in memory: give it one where
    # nothing is kept (replaced per process by JudgedProcess: the sandbox's own /tmp, or a fresh
    # temporary folder removed afterwards)
    env["CUPY_CACHE_DIR"] = JUDGED_SCRATCH
    from kernels.cpu import toolchain

    env["COURSE_CPU_CACHE"] = str(toolchain.cache_root())  # the libraries the judge inspected
    return env


class JudgedProcess:
    """One judged process and the conversation with it."""

    def __init__(self, options: Any, on_gpu: bool, plan: SandboxPlan, hide: tuple[Path, ...] = ()):
        self.options, self.on_gpu, self.plan = options, on_gpu, plan
        req_r, self._req_w = os.pipe()
        self._ans_r, ans_w = os.pipe()
        argv = [options.python, "-s", "-B", "-m", "kernels.grading.judged", str(req_r), str(ans_w)]
        if options.judged_command is not None:
            argv = options.judged_command(argv)
        if plan.namespaces:
            from kernels.cpu import toolchain

            keep = [PACKAGE_ROOT, Path(sys.prefix), Path(sys.base_prefix), *[Path(p) for p in sys.path if p]]
            homes = [Path("/home"), Path("/root"), Path.home()]
            argv = sandbox.namespace_command(argv, gpu=on_gpu, hide=[*homes, *hide], keep=_outermost(keep),
                                             writable=[toolchain.cache_root()])
        env = {**judged_environment(on_gpu), **{k: v for k, v in options.env.items() if k != SEED_VARIABLE}}
        if not plan.namespaces:  # the real /tmp: a folder of this process's own, removed when it is done
            scratch = tempfile.mkdtemp(prefix="course-judged-")
            weakref.finalize(self, shutil.rmtree, scratch, True)
            env["CUPY_CACHE_DIR"] = scratch
        self.limited = Limited(argv, timeout=options.timeout, memory_mb=options.memory_mb, address_space=not on_gpu,
                               env=env, cwd="/", pass_fds=(req_r, ans_w))
        os.close(req_r)
        os.close(ans_w)
        self.requests = os.fdopen(self._req_w, "wb")
        self.answers = wire.Reader(self._ans_r)
        self.dead: JudgedDied | None = None

    def ask(self, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None, *,
            max_bytes: int = SMALL_ANSWER_BYTES) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        if self.dead is not None:
            raise self.dead
        try:
            wire.send(self.requests, header, arrays)
            return self.answers.receive(max_bytes=max_bytes, deadline=self.limited.deadline + 1.0)
        except (wire.ProtocolError, BrokenPipeError, OSError) as exc:
            self.limited.kill()
            self.dead = JudgedDied(self.limited.finish(), str(exc))
            raise self.dead from None

    def close(self) -> ProcessOutcome:
        if self.dead is not None:
            return self.dead.outcome
        try:
            wire.send(self.requests, {"do": "bye"})
        except OSError:
            pass
        outcome = self.limited.finish(wait=10.0)
        try:
            self.requests.close()
        except OSError:
            pass
        os.close(self._ans_r)
        return outcome


def _outermost(paths: list[Path]) -> list[Path]:
    """The paths with every one inside another left out (binding the outer one is enough)."""
    resolved = sorted({p.resolve() for p in paths if p.exists()}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for p in resolved:
        if not any(p == k or k in p.parents for k in kept):
            kept.append(p)
    return kept


class RemoteExecutor:
    """``executor.run`` of the harness, through the judged process."""

    def __init__(self, ex: Exercise, process: JudgedProcess, is_gpu: bool):
        self.ex, self.process, self.is_gpu = ex, process, is_gpu
        self.not_run_message = NOT_RUN_MESSAGE

    def run(self, case: Case, fill: str = "poison", trace: int = 0) -> RunOutcome:
        buffers = host_buffers(case, fill)
        c_header, c_arrays = case_header(case)
        b_header, b_arrays = buffers_header(buffers)
        limit = sum(b.initial.nbytes for b in buffers.values())
        outcome = RunOutcome(buffers=buffers)
        try:
            header, arrays = self.process.ask({"do": "run", "case": c_header, "buffers": b_header, "trace": trace},
                                              {**c_arrays, **b_arrays}, max_bytes=limit)
        except JudgedDied as died:
            verdict, message = died.verdict_and_message(self.process.options.timeout, self.process.options.memory_mb)
            self.not_run_message = "not run: the process running the kernel ended at an earlier case"
            outcome.error_verdict, outcome.error_text, outcome.fatal = verdict, message, True
            return outcome
        outcome.error_verdict = str(header.get("error_verdict") or "")
        outcome.error_text = str(header.get("error_text") or "")[:2000]
        outcome.fatal = bool(header.get("fatal"))
        if outcome.error_verdict:
            if outcome.error_verdict not in V.MESSAGES or not V.is_failure(outcome.error_verdict):
                outcome.error_verdict = V.CRASH  # a run that failed cannot claim to have passed
            return outcome
        outcome.races = [str(r)[:1000] for r in header.get("races", [])][:20]
        outcome.shared_unwritten = [str(r)[:300] for r in header.get("shared_unwritten", [])][:5]
        for name, b in buffers.items():
            final = arrays.get(f"final:{name}")
            if final is None or final.shape != b.initial.shape or final.dtype != b.initial.dtype:
                outcome.error_verdict, outcome.fatal = V.CRASH, True
                outcome.error_text = f"the process running the kernel did not send back {name} as it was sent"
                return outcome
            outcome.finals[name] = final
        for name in self.ex.output_names(case):
            outcome.outputs[name] = buffers[name].view_of(outcome.finals[name])
        return outcome


def _smallest_public(cases: list[Case]) -> Case | None:
    public = [c for c in cases if c.visibility == "public" and not c.large]
    return min(public, key=lambda c: sum(a.size for a in c.inputs.values()), default=None)


def judge_kernel(ex: Exercise, kernel: str, options: Any, plan: SandboxPlan, on_gpu: bool,
                 hide: tuple[Path, ...] = (),
                 on_start: Callable[[Case], None] | None = None) -> Report:
    """Run ``kernel`` on the public and hidden cases in a judged process, and judge it."""
    report = Report(ex.id, ex.title)
    report.notes += list(plan.notes)
    process = JudgedProcess(options, on_gpu, plan, hide)
    try:
        return _converse(ex, kernel, options, plan, process, report, on_gpu, on_start)
    except JudgedDied as died:
        report.stage_verdict, report.stage_message = died.verdict_and_message(options.timeout, options.memory_mb)
        report.stage_message += " (before the first case started)"
        return report
    finally:
        process.close()


def _converse(ex: Exercise, kernel: str, options: Any, plan: SandboxPlan, process: JudgedProcess, report: Report,
              on_gpu: bool, on_start: Callable[[Case], None] | None) -> Report:
    header, _ = process.ask({"do": "setup", "exercise": ex.id, "kernel": kernel,
                             "gpu_memory_mb": options.gpu_memory_mb})
    if header.get("event") == "stage_error":
        return _stage(report, header)
    libraries = header.get("libraries", [])
    findings = inspect_libraries(libraries if isinstance(libraries, list) else [])
    if findings:
        report.stage_verdict, report.stage_message = V.FORBIDDEN, "\n".join(findings)
        return report
    header, _ = process.ask({"do": "load", "launch_filter": plan.launch_filter, "process_filter": plan.process_filter})
    if header.get("event") == "stage_error":
        return _stage(report, header)
    is_gpu = bool(header.get("is_gpu")) and on_gpu
    report.backend = "cupy" if is_gpu else "cpu"
    report.device = str(header.get("device", ""))[:200]
    visibilities = ("public", "hidden")
    cases = make_cases(ex, visibilities, options.seed)
    executor = RemoteExecutor(ex, process, is_gpu)
    report.cases = run_cases(ex, cases, kernel, executor, on_start=on_start)
    if process.dead is not None:
        return report
    if any(c.verdict not in (V.CRASH, V.TIMEOUT, V.MEMORY_LIMIT, V.ENVIRONMENT) for c in report.cases):
        report.feedback = _hints(process, _smallest_public(cases))
    if ex.perf is not None and options.perf:
        report.perf = _perf(ex, process, options, is_gpu, report)
    return report


def _stage(report: Report, header: dict[str, Any]) -> Report:
    verdict = str(header.get("verdict", V.CRASH))
    report.stage_verdict = verdict if verdict in V.MESSAGES and V.is_failure(verdict) else V.CRASH
    report.stage_message = str(header.get("message", ""))[:6000]
    return report


def _hints(process: JudgedProcess, case: Case | None) -> list[str]:
    if case is None:
        return []
    c_header, c_arrays = case_header(case)
    b_header, b_arrays = buffers_header(host_buffers(case, "poison"))
    try:
        header, _ = process.ask({"do": "hints", "case": c_header, "buffers": b_header}, {**c_arrays, **b_arrays})
    except JudgedDied:
        return []
    return [str(h)[:500] for h in header.get("hints", [])][:12]


def _perf(ex: Exercise, process: JudgedProcess, options: Any, is_gpu: bool, report: Report) -> PerfResult:
    target = options.perf_target if options.perf_target is not None else ex.perf.target
    if not is_gpu:
        return dataclasses.replace(not_measured(ex), target=target)
    if any(V.is_failure(c.verdict) for c in report.cases):
        return PerfResult(V.NOT_RUN, ex.perf.metric, target=target,
                          message="not timed: the kernel must pass every case first")
    try:
        header, _ = process.ask({"do": "perf", "seed": perf_seed(ex, ("public", "hidden"), options.seed)})
    except JudgedDied as died:
        verdict, message = died.verdict_and_message(options.timeout, options.memory_mb)
        return PerfResult(verdict, ex.perf.metric, target=target, message=f"while timed: {message}")
    result = PerfResult.from_dict(header.get("result", {}))
    result.target = target
    if result.verdict in (V.PASSED, V.TOO_SLOW) and result.achieved is not None and result.baseline:
        result.verdict = V.PASSED if result.achieved >= target * result.baseline else V.TOO_SLOW
    elif result.verdict not in V.MESSAGES or not V.is_failure(result.verdict):
        result.verdict = V.CRASH
    return result
