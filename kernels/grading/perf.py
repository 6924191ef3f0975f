"""Performance of a graded kernel on a GPU, with every timed launch checked.

The kernel runs a large case under ``kernels.benchmark`` (CUDA events, warm-up, L2 flushed, median).
Between two timed launches, outside the timed interval, the harness checks the output of the launch
that just ran against the reference (on the device, without synchronising) and poisons the output
again. A kernel that computes the right answer only sometimes, or only when it is not being timed,
fails here even if its first run was right. The result is compared with a baseline of the same run
on the same GPU: the measured copy ceiling for memory-bound kernels, ``cupy.matmul`` (cuBLAS) for a
GEMM. On the CPU backend nothing is measured, and the report says so.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from . import verdicts as V
from .compare import poison_scalar
from .harness import RunOutcome, guarded, judge, _error_text
from .spec import Case, Exercise, Expected, LaunchContext


@dataclass
class PerfResult:
    verdict: str
    metric: str = ""
    achieved: float | None = None
    baseline: float | None = None
    baseline_name: str = ""
    target: float = 0.0
    message: str = ""
    size: str = ""
    intensity: float | None = None  # FLOP/byte
    attainable_tflops: float | None = None
    achieved_tflops: float | None = None
    device: str = ""

    @property
    def fraction(self) -> float | None:
        if self.achieved is None or not self.baseline:
            return None
        return self.achieved / self.baseline

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PerfResult":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def summary(self) -> str:
        if self.verdict == V.NOT_MEASURED:
            return self.message or "not measured on the CPU backend: run the check on a GPU to measure speed"
        if self.achieved is None:
            return self.message
        text = f"{self.achieved:.3g} {self.metric}"
        if self.fraction is not None:
            text += (f" = {100 * self.fraction:.1f} % of {self.baseline_name} ({self.baseline:.3g} {self.metric}); "
                     f"target {100 * self.target:.0f} %")
        if self.message:
            text += f"; {self.message}"
        return text


def not_measured(ex: Exercise) -> PerfResult:
    assert ex.perf is not None
    return PerfResult(V.NOT_MEASURED, ex.perf.metric, target=ex.perf.target,
                      message="not measured on the CPU backend (it checks correctness only; the speed "
                              "target is graded on a GPU)")


class _Verifier:
    """Checks outputs on the device between timed launches, and poisons them again."""

    def __init__(self, ex: Exercise, case: Case, outputs: dict[str, Any], expected: dict[str, Any], xp: Any):
        self.ex, self.case, self.outputs, self.xp = ex, case, outputs, xp
        self.bad = xp.zeros((), dtype=xp.int64)
        self.checked = 0
        self.snapshots: list[dict[str, Any]] = []
        self.device_expected: dict[str, tuple[Any, Any]] = {}
        if ex.derive is None:
            for name, value in expected.items():
                atol = None
                if isinstance(value, Expected):
                    atol, value = value.atol, value.value
                ref = xp.asarray(np.asarray(value, dtype=np.float64))
                limit = None
                if np.issubdtype(outputs[name].dtype, np.floating):
                    limit = case.tol.atol + case.tol.rtol * xp.abs(ref)
                    if atol is not None:
                        limit = limit + xp.asarray(np.asarray(atol, dtype=np.float64))
                self.device_expected[name] = (ref, limit)

    def check_and_poison(self) -> None:
        xp = self.xp
        if self.ex.derive is None:
            for name, (ref, limit) in self.device_expected.items():
                out = self.outputs[name].astype(xp.float64)
                if limit is None:
                    wrong = xp.count_nonzero(out != ref)
                else:
                    wrong = xp.count_nonzero(~(xp.abs(out - ref) <= limit))
                self.bad += wrong
        else:
            self.snapshots.append({name: a.copy() for name, a in self.outputs.items()})
        self.checked += 1
        for a in self.outputs.values():
            a.view(_uint(a.dtype, xp)).fill(int(poison_scalar(a.dtype).view(_uint(a.dtype, np))[0]))

    def wrong_launches(self, runtime: Any, expected: dict[str, Any]) -> int:
        wrong = int(self.bad.get()) if hasattr(self.bad, "get") else int(self.bad)
        if self.ex.derive is not None:
            from .compare import compare

            for snap in self.snapshots:
                host = {n: runtime.to_host(a) for n, a in snap.items()}
                derived = self.ex.derive(self.case, host)
                if any(not compare(n, derived[n], v, self.case.tol).ok for n, v in expected.items()):
                    wrong += 1
        return wrong


def _uint(dtype: Any, xp: Any) -> Any:
    return xp.dtype(f"u{np.dtype(dtype).itemsize}")


def _baseline(ex: Exercise, case: Case, arrays: dict[str, Any], runtime: Any) -> tuple[float, str]:
    import kernels

    perf = ex.perf
    assert perf is not None
    if perf.baseline == "copy":
        return kernels.ceilings().copy_gbps, "the measured copy ceiling"
    if perf.baseline == "cublas":
        xp = runtime.xp
        a, b = arrays["A"], arrays["B"]
        c = xp.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
        t = kernels.benchmark(lambda: xp.matmul(a, b, out=c), warmup=2, repeat=perf.repeat)
        return perf.work(case) / t.seconds / 1e12, "cupy.matmul (cuBLAS) on the same matrices"
    raise ValueError(f"{ex.id}: unknown performance baseline {perf.baseline!r}")


def measure(ex: Exercise, loaded: dict[str, Callable[..., Any]], runtime: Any, rng: np.random.Generator,
            macros: dict[str, int]) -> PerfResult:
    """Time the exercise's large case on the GPU and compare it with the target (GPU only)."""
    perf = ex.perf
    if perf is None:
        raise ValueError(f"{ex.id} has no performance target")
    if not runtime.is_gpu:
        return not_measured(ex)
    if perf.measure is not None:
        return perf.measure(ex, loaded, runtime, rng, macros)
    import kernels
    from kernels.timing import CupyEvents

    xp = runtime.xp
    case = perf.case(rng, runtime.sm_count())
    expected = ex.reference(case)
    outcome = RunOutcome()
    try:
        for name, data in case.inputs.items():
            outcome.buffers[name] = guarded(xp, name, data, data.shape, data.dtype, case.offset, "poison")
        for name, (shape, dtype) in case.outputs.items():
            if name not in outcome.buffers:
                outcome.buffers[name] = guarded(xp, name, None, shape, dtype, case.offset, "poison")
        arrays = {n: g.view for n, g in outcome.buffers.items()}
        ctx = LaunchContext(loaded, arrays, case, macros, xp, runtime.sm_count())
        ex.launch(ctx)
        runtime.synchronize()
        outcome.outputs = {n: runtime.to_host(arrays[n]) for n in ex.output_names(case)}
    except Exception as exc:
        return PerfResult(V.CRASH, perf.metric, target=perf.target, size=case.name,
                          message=f"the large case failed: {_error_text(exc)}", device=runtime.device_name())
    verdict, message, _ = judge(ex, case, outcome, expected, runtime)
    if verdict != V.PASSED:
        return PerfResult(verdict, perf.metric, target=perf.target, size=case.name,
                          message=f"wrong on the large case: {message}", device=runtime.device_name())
    outputs = {n: arrays[n] for n in ex.output_names(case)}
    verifier = _Verifier(ex, case, outputs, expected, xp)

    class CheckingEvents(CupyEvents):
        def flush_l2(self) -> None:  # runs before each repetition's start event: untimed
            verifier.check_and_poison()
            super().flush_l2()

    try:
        timing = kernels.benchmark(lambda: ex.launch(ctx), warmup=2, repeat=perf.repeat,
                                   events=CheckingEvents())
        verifier.check_and_poison()
        runtime.synchronize()
        wrong = verifier.wrong_launches(runtime, expected)
        baseline, baseline_name = _baseline(ex, case, arrays, runtime)
    except Exception as exc:
        return PerfResult(V.CRASH, perf.metric, target=perf.target, size=case.name,
                          message=f"failed while timed: {_error_text(exc)}", device=runtime.device_name())
    if wrong:
        return PerfResult(V.WRONG, perf.metric, target=perf.target, size=case.name,
                          message=f"{wrong} of the {verifier.checked} timed launches gave a wrong result",
                          device=runtime.device_name())
    work = perf.work(case)
    achieved = work / timing.seconds / (1e9 if perf.metric == "GB/s" else 1e12)
    result = PerfResult(V.PASSED, perf.metric, achieved, baseline, baseline_name, perf.target,
                        f"median of {timing.n} timed launches, every one checked", case.name,
                        device=runtime.device_name())
    if achieved < perf.target * baseline:
        result.verdict = V.TOO_SLOW
    if perf.roofline is not None:
        flops, nbytes = perf.roofline(case)
        try:
            from kernels.roofline import attainable_tflops

            ceilings = kernels.ceilings()
            result.intensity = flops / nbytes
            result.attainable_tflops = float(attainable_tflops(result.intensity, ceilings))
            result.achieved_tflops = flops / timing.seconds / 1e12
        except Exception:
            pass
    return result
