"""Run an exercise's cases against a kernel and judge every run.

For every case the harness
1. allocates each array inside a larger buffer whose guard bands (4 KB before and after) hold a
   known pattern, and passes the kernel a view of the middle; outputs start poisoned (a NaN with a
   recognisable payload, or an odd integer), so an element the kernel never writes is seen;
2. launches the kernel the way the exercise says and waits for it;
3. checks that the inputs are bit-for-bit unchanged, that no guard band changed (an out-of-bounds
   write), and compares the outputs with the float64 reference;
4. reruns the case through the probes of ``race.py`` (the same run again: a race; other guard-band
   values: an out-of-bounds read).

A fault that kills the CUDA context (illegal or misaligned address) ends the run: the remaining
cases are reported as not run. Large cases are skipped on the CPU backend.
"""
from __future__ import annotations

import re
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import race
from . import verdicts as V
from .compare import Comparison, alternate_scalar, compare, guard_scalar, is_poison, poison_scalar
from .runtime import classify_error
from .spec import Case, Exercise, LaunchContext

GUARD_BYTES = 4096  # per side; large enough to catch most stray writes of small cases whole


# --------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------

@dataclass
class CaseResult:
    """The verdict on one case, with what the student needs to find the bug."""

    name: str
    visibility: str
    verdict: str
    message: str = ""
    why: str = ""
    comparisons: list[Comparison] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.verdict == V.PASSED

    @property
    def max_error(self) -> float | None:
        errors = [c.max_error for c in self.comparisons]
        return max(errors) if errors else None

    @property
    def first_wrong(self) -> str:
        for c in self.comparisons:
            if c.first_wrong is not None:
                return f"{c.name}[{', '.join(map(str, c.first_wrong))}]"
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "visibility": self.visibility, "verdict": self.verdict,
                "message": self.message, "why": self.why, "seconds": round(self.seconds, 4),
                "comparisons": [c.to_dict() for c in self.comparisons]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CaseResult":
        comps = []
        for c in d.get("comparisons", []):
            comps.append(Comparison(c["name"], tuple(c["shape"]), c["verdict"], c.get("wrong", 0),
                                    c.get("unwritten", 0), c.get("nonfinite", 0), float(c.get("max_error", 0.0)),
                                    tuple(c["first_wrong"]) if c.get("first_wrong") is not None else None,
                                    [(tuple(i), g, e) for i, g, e in c.get("samples", [])], c.get("problem", "")))
        return cls(d["name"], d["visibility"], d["verdict"], d.get("message", ""), d.get("why", ""), comps,
                   float(d.get("seconds", 0.0)))


class StageError(Exception):
    """A stage before the cases failed (compile, signature, launch macros); carries the verdict."""

    def __init__(self, verdict: str, message: str):
        super().__init__(message)
        self.verdict = verdict
        self.message = message


# --------------------------------------------------------------------------------------------------
# Guarded device arrays
# --------------------------------------------------------------------------------------------------

@dataclass
class HostBuffer:
    """One array of a case as the judge prepares it: the whole buffer with its guard bands (host), and
    where the kernel's view lies in it. The judge keeps it to find every byte the run changed."""

    name: str
    initial: np.ndarray
    start: int
    count: int
    shape: tuple[int, ...]

    def view_of(self, full: Any) -> Any:
        # full[start:][:count], not full[start:start + count]: NumPy points an empty slice at the start
        # of its parent, and an empty output must still sit between its guard bands
        return full[self.start:][:self.count].reshape(self.shape)


@dataclass
class Guarded:
    """A device buffer with guard bands and the view into its middle that the kernel gets."""

    name: str
    full: Any
    view: Any
    start: int
    count: int
    initial: np.ndarray  # the whole buffer as uploaded (host), to find any changed byte


def _fill_of(dtype: np.dtype, fill: str, output: bool) -> np.ndarray:
    if fill == "alternate":
        return alternate_scalar(dtype)
    return guard_scalar(dtype) if output else poison_scalar(dtype)


def host_buffer(name: str, data: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype, offset: int,
                fill: str) -> HostBuffer:
    """The whole buffer for ``data`` (or poison, for an output) with guard bands around it.

    Guard bands of inputs hold the poison (a read past an input's end then poisons the result);
    those of outputs hold another pattern, so a poisoned value written past an output's end shows.
    With ``fill="alternate"`` every band holds a finite value instead (the out-of-bounds-read probe).
    """
    dtype = np.dtype(dtype)
    guard = max(1, GUARD_BYTES // dtype.itemsize)
    count = int(np.prod(shape)) if shape else 1
    start = guard + offset
    host = np.empty(start + count + guard, dtype=dtype)
    host[:] = _fill_of(dtype, fill, output=data is None)[0]
    if data is None:
        host[start:start + count] = poison_scalar(dtype)[0]
    else:
        host[start:start + count] = np.ascontiguousarray(data, dtype=dtype).reshape(-1)
    return HostBuffer(name, host, start, count, tuple(shape))


def host_buffers(case: Case, fill: str) -> dict[str, HostBuffer]:
    """Every array of ``case``: inputs (and in-out arrays) with their data, outputs poisoned."""
    buffers = {}
    for name, data in case.inputs.items():
        buffers[name] = host_buffer(name, data, data.shape, data.dtype, case.offset, fill)
    for name, (shape, dtype) in case.outputs.items():
        if name not in buffers:
            buffers[name] = host_buffer(name, None, shape, dtype, case.offset, fill)
    return buffers


def guarded(xp: Any, name: str, data: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype,
            offset: int, fill: str) -> Guarded:
    """``host_buffer`` uploaded with ``xp``; the view is what the kernel gets."""
    b = host_buffer(name, data, shape, dtype, offset, fill)
    full = xp.array(b.initial, copy=True)  # a copy: `initial` must keep what was uploaded
    return Guarded(name, full, b.view_of(full), b.start, b.count, b.initial)


# --------------------------------------------------------------------------------------------------
# Launch macros (#define NAME value in the student's source)
# --------------------------------------------------------------------------------------------------

def parse_macros(code: str, names: tuple[str, ...]) -> dict[str, int]:
    """The integer values of the ``#define`` launch parameters an exercise reads from the source."""
    values: dict[str, int] = {}
    for name in names:
        pattern = re.compile(rf"^[ \t]*#[ \t]*define[ \t]+{re.escape(name)}[ \t]+\(?[ \t]*(-?\d+)[uUlL]*[ \t]*\)?"
                             rf"[ \t]*(?://.*|/\*.*\*/[ \t]*)?$", re.M)
        found = pattern.findall(code)
        if not found:
            raise StageError(V.LAUNCH_ERROR, f"the source must define {name} as a whole number, with a line "
                                             f"like '#define {name} 64' (the harness reads it to size the launch)")
        if len(set(found)) > 1:
            raise StageError(V.LAUNCH_ERROR, f"{name} is defined more than once with different values")
        values[name] = int(found[0])
    return values


# --------------------------------------------------------------------------------------------------
# One run of one case
# --------------------------------------------------------------------------------------------------

@dataclass
class RunOutcome:
    outputs: dict[str, np.ndarray] = field(default_factory=dict)  # raw outputs, host
    buffers: dict[str, Any] = field(default_factory=dict)  # HostBuffer (or Guarded) per array
    finals: dict[str, np.ndarray] = field(default_factory=dict)  # whole buffers after the run, host
    error: BaseException | None = None
    error_text: str = ""
    error_verdict: str = ""  # the verdict the error means (crash, oob_read, timeout, ...)
    fatal: bool = False  # the device is unusable after this error
    races: list[str] = field(default_factory=list)  # races a traced run found
    shared_unwritten: list[str] = field(default_factory=list)  # shared memory read before any write

    @property
    def failed(self) -> bool:
        return bool(self.error_verdict)


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


def execute(ex: Exercise, case: Case, buffers: dict[str, HostBuffer], loaded: dict[str, Callable[..., Any]],
            runtime: Any, macros: dict[str, int], trace: int = 0) -> RunOutcome:
    """Upload, launch, wait, copy every whole buffer back. Errors are returned, not raised.

    ``trace`` > 0 records up to that many memory accesses per launch (CPU backend) and reports the
    races between threads of a block and the shared memory read before anything was stored there.
    """
    xp = runtime.xp
    outcome = RunOutcome(buffers=dict(buffers))
    fulls: dict[str, Any] = {}
    try:
        views = {}
        for name, b in buffers.items():
            fulls[name] = xp.array(b.initial, copy=True)
            views[name] = b.view_of(fulls[name])
        ctx = LaunchContext(loaded, views, case, macros, xp, runtime.sm_count())
        if trace:
            from kernels.traffic.probe import traced_findings  # the traced build: CPU backend, Linux only

            outcome.races, outcome.shared_unwritten = traced_findings(lambda: ex.launch(ctx), trace)
        else:
            ex.launch(ctx)
        runtime.synchronize()
        for name in buffers:
            outcome.finals[name] = runtime.to_host(fulls[name])
        for name in ex.output_names(case):
            outcome.outputs[name] = buffers[name].view_of(outcome.finals[name])
    except Exception as exc:  # the student's kernel may fail in any way; report it, do not die
        outcome.error = exc
        outcome.error_text = _error_text(exc)
        outcome.fatal = runtime.is_fatal(exc)
        verdict = classify_error(exc)  # a kernel still running when given up on stays a timeout
        outcome.error_verdict = V.CRASH if outcome.fatal and verdict != V.TIMEOUT else verdict
    return outcome


class LocalExecutor:
    """Runs cases in this process (the student's own check in a notebook)."""

    def __init__(self, ex: Exercise, loaded: dict[str, Callable[..., Any]], runtime: Any, macros: dict[str, int]):
        self.ex, self.loaded, self.runtime, self.macros = ex, loaded, runtime, macros
        self.is_gpu = runtime.is_gpu

    def run(self, case: Case, fill: str = "poison", trace: int = 0) -> RunOutcome:
        return execute(self.ex, case, host_buffers(case, fill), self.loaded, self.runtime, self.macros, trace)


def _changed_region(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Flat indices of the elements whose bytes differ between two copies of a buffer."""
    a = before.view(np.uint8).reshape(before.size, -1)
    b = after.view(np.uint8).reshape(after.size, -1)
    return np.flatnonzero(np.any(a != b, axis=1))


def _memory_findings(case: Case, outcome: RunOutcome, runtime: Any) -> tuple[str, str]:
    """(verdict, message) for guard-band writes and changed inputs; ("", "") when all is well."""
    oob: list[str] = []
    modified: list[str] = []
    for name, g in outcome.buffers.items():
        now = outcome.finals[name] if name in outcome.finals else runtime.to_host(g.full)
        if now.shape != g.initial.shape or now.dtype != g.initial.dtype:
            oob.append(f"{name} (its whole buffer came back with another shape or type)")
            continue
        changed = _changed_region(g.initial, now)
        if changed.size == 0:
            continue
        before = changed[changed < g.start]
        after = changed[changed >= g.start + g.count]
        for side in (before, after):
            if side.size:
                lo, hi = int(side.min()) - g.start, int(side.max()) - g.start
                where = f"{name}[{lo}]" + (f" .. {name}[{hi}]" if hi != lo else "")
                oob.append(f"{where} ({name} has {g.count} element{'s' if g.count != 1 else ''})")
        inside = changed[(changed >= g.start) & (changed < g.start + g.count)]
        if inside.size and name in case.inputs and name not in case.inout:
            first = int(inside[0]) - g.start
            modified.append(f"{name} ({inside.size} elements, first at flat index {first})")
    if oob:
        return V.OOB_WRITE, "wrote outside its arrays, at " + ", ".join(oob)
    if modified:
        return V.INPUT_MODIFIED, "changed the input " + ", ".join(modified) + "; inputs must stay as they were"
    return "", ""


def _required_written(ex: Exercise, case: Case, outcome: RunOutcome) -> list[Comparison]:
    """With a derived output (a host finish), the raw outputs must still be written everywhere."""
    found = []
    if ex.derive is None:
        return found
    for name in ex.output_names(case):
        raw = outcome.outputs[name]
        if name in case.inout or raw.size == 0:
            continue
        left = is_poison(raw.reshape(-1))
        if left.any():
            first = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(left)[0]), raw.shape))
            found.append(Comparison(name, tuple(raw.shape), V.UNWRITTEN, unwritten=int(left.sum()),
                                    first_wrong=first,
                                    problem=f"{name}: {int(left.sum())} of {raw.size} elements never written "
                                            f"(first at {list(first)})"))
    return found


def judge(ex: Exercise, case: Case, outcome: RunOutcome, expected: dict[str, Any], runtime: Any
          ) -> tuple[str, str, list[Comparison]]:
    """Verdict, message and per-output comparisons of a run that did not raise."""
    verdict, message = _memory_findings(case, outcome, runtime)
    outputs = ex.derive(case, outcome.outputs) if ex.derive else outcome.outputs
    comparisons = _required_written(ex, case, outcome)
    for name, value in expected.items():
        if name not in outputs:
            comparisons.append(Comparison(name, (), V.WRONG, problem=f"no output named {name}"))
            continue
        comparisons.append(compare(name, outputs[name], value, case.tol))
    worst = V.worst([c.verdict for c in comparisons])
    if not verdict:
        verdict = worst
        message = "; ".join(c.describe() for c in comparisons if not c.ok)
    return verdict, message, comparisons


NOT_RUN_MESSAGE = "not run: an earlier case crashed and took the GPU context with it"


def run_case(ex: Exercise, case: Case, executor: Any, probes: bool = True) -> tuple[CaseResult, bool]:
    """Run and judge one case. Returns the result and whether the device is still usable.

    ``executor.run(case, fill, trace)`` runs the kernel (in this process, or in the judged process
    of the grader) and returns the whole buffers; everything else, the reference, the comparison
    and the verdict, happens here.
    """
    t0 = time.perf_counter()
    expected = ex.reference(case)
    first = executor.run(case, "poison")
    if first.failed:
        return CaseResult(case.name, case.visibility, first.error_verdict, first.error_text, case.why,
                          seconds=time.perf_counter() - t0), not first.fatal
    verdict, message, comparisons = judge(ex, case, first, expected, None)
    if probes and case.probe and not case.large and verdict not in (V.OOB_WRITE, V.INPUT_MODIFIED):
        def rerun(fill: str, trace: int = 0) -> RunOutcome:
            again = executor.run(case, fill, trace)
            if again.failed:
                raise _RerunFailed(again)
            return again

        for probe in race.probes():
            if not probe.applies(ex.deterministic):
                continue
            try:
                finding = probe.run(first.outputs, rerun)
            except _RerunFailed as exc:
                return CaseResult(case.name, case.visibility, exc.outcome.error_verdict,
                                  f"crashed when run again: {exc.outcome.error_text}", case.why, comparisons,
                                  time.perf_counter() - t0), not exc.outcome.fatal
            if finding is not None and not finding.verdict:
                if V.is_failure(verdict):
                    message = f"{message}; {finding.message}" if message else finding.message
                continue
            if finding is not None:
                verdict, message = finding.verdict, finding.message + (f"; {message}" if message else "")
                break
    return CaseResult(case.name, case.visibility, verdict, message, case.why, comparisons,
                      time.perf_counter() - t0), True


class _RerunFailed(Exception):
    def __init__(self, outcome: RunOutcome):
        super().__init__(outcome.error_text)
        self.outcome = outcome


# --------------------------------------------------------------------------------------------------
# Stages before the cases
# --------------------------------------------------------------------------------------------------

def signature_problems(code: str, ex: Exercise) -> list[str]:
    """Why the kernels in ``code`` do not have the exercise's names and parameter types (or [])."""
    from kernels.signature import KernelNotFoundError, format_signature, parse_signature

    problems = []
    for spec in ex.kernels:
        expected = parse_signature(spec.declaration + " {}", spec.name)
        try:
            got = parse_signature(code, spec.name)
        except KernelNotFoundError as exc:
            problems.append(f"{exc}; the exercise needs {spec.declaration}")
            continue
        if len(got) != len(expected):
            problems.append(f"{spec.name} takes {len(got)} parameters {format_signature(got)}, the exercise "
                            f"needs {len(expected)}: {format_signature(expected)}")
            continue
        for i, (g, e) in enumerate(zip(got, expected)):
            if g.is_pointer != e.is_pointer or g.base != e.base:
                problems.append(f"{spec.name}: parameter {i + 1} is '{g.short} {g.name}', the exercise needs "
                                f"'{e.short} {e.name}' (full signature {format_signature(expected)})")
    return problems


def nvrtc_errors(code: str, arch: str = "sm_75") -> str | None:
    """The CUDA compiler's log when ``code`` does not compile with NVRTC (None if it does, or no NVRTC)."""
    try:
        from kernels.compile import DEFAULT_OPTIONS
        from kernels.nvrtc import compile_cuda, nvrtc_available

        if not nvrtc_available():
            return None
        result = compile_cuda(code, arch, options=DEFAULT_OPTIONS, filename="kernel.cu")
    except Exception:
        return None
    return None if result.ok else result.log.strip()


def load_kernel_spec(code: str, spec: Any, runtime: Any, options: tuple[str, ...] = ()) -> Callable[..., Any]:
    """Compile one of the exercise's kernels from ``code`` (with the compiler ``options`` an exercise's
    ``arch`` asks for); StageError when the compiler refuses it."""
    try:
        return runtime.load(code, spec.name, options=options) if options else runtime.load(code, spec.name)
    except Exception as exc:
        name = type(exc).__name__
        if name == "LibraryBuilt":  # the grader's build-only step: not an error
            raise
        if name == "KernelNotFoundError":
            raise StageError(V.WRONG_SIGNATURE, str(exc)) from None
        if name == "NoGPUError":
            raise StageError(V.ENVIRONMENT, str(exc)) from None
        # the CUDA compiler's own words when it rejects the code too; else the backend's
        log = None if runtime.is_gpu else nvrtc_errors(code)
        message = f"kernel.cu does not compile:\n{log}" if log else str(exc).strip()
        raise StageError(V.COMPILE_ERROR, message[:6000]) from None


def load_kernels(code: str, ex: Exercise, runtime: Any) -> dict[str, Callable[..., Any]]:
    """Compile the exercise's kernels from ``code``; StageError on a compile or signature problem."""
    problems = signature_problems(code, ex)
    if problems:
        raise StageError(V.WRONG_SIGNATURE, "\n".join(problems))
    options = (f"-arch={ex.arch}",) if ex.arch else ()
    return {spec.name: load_kernel_spec(code, spec, runtime, options) for spec in ex.kernels}


# --------------------------------------------------------------------------------------------------
# Exercises that only some GPUs can run (Exercise.arch)
# --------------------------------------------------------------------------------------------------

#: The GPUs of a compute capability, for the sentence that says where an exercise runs.
GPUS_OF_CAPABILITY = {"9.0": "an H100 or H200"}


def required_capability(arch: str) -> str:
    """The compute capability an NVRTC target runs on: "sm_90a" -> "9.0"."""
    digits = arch.removeprefix("sm_").rstrip("a")
    return f"{digits[:-1]}.{digits[-1]}"


def _capability_number(capability: str) -> tuple[int, ...]:
    return tuple(int(part) for part in capability.split("."))


def arch_problem(ex: Exercise, runtime: Any) -> str | None:
    """Why ``runtime`` cannot run the kernels of ``ex``, or None when it can. An exercise with an ``arch``
    runs only on a GPU of that compute capability (that one exactly for an "a" target, whose features
    later GPUs lack), never on the CPU backend."""
    if not ex.arch:
        return None
    needed = required_capability(ex.arch)
    gpus = GPUS_OF_CAPABILITY.get(needed)
    exact = ex.arch.endswith("a")
    needs = (f"{ex.id} runs only on a GPU of compute capability {needed}{'' if exact else ' or later'}"
             f"{f' ({gpus})' if gpus else ''}, its kernel compiled for {ex.arch}")
    if not runtime.is_gpu:
        return f"{needs}; here it would run on the {runtime.device_name()}, which cannot run it"
    have = str(runtime.compute_capability())
    if have == needed or (not exact and _capability_number(have) >= _capability_number(needed)):
        return None
    return f"{needs}; this GPU ({runtime.device_name()}) has compute capability {have}"


def unrunnable(ex: Exercise, code: str, runtime: Any) -> tuple[str, str]:
    """(verdict, message) for a kernel that ``runtime`` cannot run (``arch_problem``) after the checks that
    need no such GPU: its signature and NVRTC for the exercise's ``arch``; ("", "") when it can run."""
    problem = arch_problem(ex, runtime)
    if problem is None:
        return "", ""
    problems = signature_problems(code, ex)
    if problems:
        return V.WRONG_SIGNATURE, "\n".join(problems)
    from kernels.nvrtc import nvrtc_available

    if not nvrtc_available():
        return V.ENVIRONMENT, (f"{problem}. Checked here: the screen and the signature (NVRTC is not installed, so "
                               f"the kernel was not compiled).")
    log = nvrtc_errors(code, ex.arch)
    if log:
        return V.COMPILE_ERROR, f"kernel.cu does not compile for {ex.arch}:\n{log}"[:6000]
    return V.ENVIRONMENT, (f"{problem}. Checked here: the screen, the signature, and that the kernel compiles for "
                           f"{ex.arch} with NVRTC; the cases run only on such a GPU.")


def launch_macros(code: str, ex: Exercise) -> dict[str, int]:
    macros = parse_macros(code, ex.launch_macros) if ex.launch_macros else {}
    if ex.check_macros is not None:
        problem = ex.check_macros(macros)
        if problem:
            raise StageError(V.LAUNCH_ERROR, problem)
    return macros


def load_executor(ex: Exercise, code: str, runtime: Any) -> LocalExecutor:
    """Compile ``code`` for an in-process run; StageError if it cannot be compiled or launched."""
    macros = launch_macros(code, ex)
    return LocalExecutor(ex, load_kernels(code, ex, runtime), runtime, macros)


def run_cases(ex: Exercise, cases: list[Case], code: str, executor: Any, *, probes: bool = True,
              on_start: Callable[[Case], None] | None = None,
              on_result: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:
    """Run every case through ``executor`` and judge it. ``executor`` may also be a runtime, in which
    ``code`` is compiled to run in this process (StageError if it cannot be)."""
    if not hasattr(executor, "run"):
        executor = load_executor(ex, code, executor)
    for probe in race.probes():  # probes that keep state per submission start afresh
        begin = getattr(probe, "begin", None)
        if begin is not None:
            begin(code)
    results: list[CaseResult] = []
    usable = True
    for case in cases:
        if not usable:
            result = CaseResult(case.name, case.visibility, V.NOT_RUN,
                                getattr(executor, "not_run_message", NOT_RUN_MESSAGE), case.why)
        elif case.large and not executor.is_gpu:
            result = CaseResult(case.name, case.visibility, V.SKIPPED, V.message(V.SKIPPED), case.why)
        else:
            if on_start:
                on_start(case)
            try:
                result, usable = run_case(ex, case, executor, probes)
            except Exception as exc:  # a bug in the exercise's own code: say so, never blame the student
                result = CaseResult(case.name, case.visibility, V.ENVIRONMENT,
                                    f"the harness failed on this case: {_error_text(exc)}\n"
                                    f"{traceback.format_exc(limit=3)}", case.why)
        results.append(result)
        if on_result:
            on_result(result)
    return results
