"""The judged process: compile one submission and run the cases the judge sends, nothing more.

    python -m kernels.grading.judged REQUESTS_FD ANSWERS_FD

It is started by the grader (``judge.py``) with an empty environment and speaks only through the
two descriptors (``wire.py``). It never sees the secret seed, a reference or a verdict: the judge
sends a case's whole buffers, this process launches the kernel on them and sends every buffer back.

1. ``setup`` (exercise, kernel source): compile. On the CPU backend the kernel libraries are built
   but not loaded, and their paths go back to the judge, which inspects them (``sandbox.py``).
2. ``load``: load the kernels, start the device, install the seccomp filters; answer ``ready``.
3. ``run`` (a case and its buffers), ``hints`` (the memory-traffic feedback) and ``perf`` (the timed
   case, GPU only), any number of times; ``bye`` ends the process.
"""
from __future__ import annotations

import os
import sys
import traceback
from typing import Any, BinaryIO

import numpy as np

from . import verdicts as V
from . import wire
from .harness import HostBuffer, StageError, arch_problem, execute, launch_macros, load_kernel_spec
from .spec import Case, Exercise

MAX_REQUEST_BYTES = 1 << 34  # the judge is trusted; this only guards against a broken pipe


def case_header(case: Case) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """What the judged process needs of a case to launch it (never its tolerance or reference)."""
    extra, arrays = {}, {}
    for key, value in case.extra.items():
        if isinstance(value, np.ndarray):
            arrays[f"extra:{key}"] = value
        else:
            extra[key] = value
    header = {"name": case.name, "scalars": case.scalars, "extra": extra, "offset": case.offset,
              "outputs": {n: [list(shape), np.dtype(dt).str] for n, (shape, dt) in case.outputs.items()},
              "inputs": list(case.inputs), "inout": list(case.inout), "large": case.large}
    return header, arrays


def buffers_header(buffers: dict[str, HostBuffer]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    return ({n: {"start": b.start, "count": b.count, "shape": list(b.shape)} for n, b in buffers.items()},
            {f"buffer:{n}": b.initial for n, b in buffers.items()})


def _case_from(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple[Case, dict[str, HostBuffer]]:
    buffers = {}
    for name, b in header["buffers"].items():
        buffers[name] = HostBuffer(name, np.array(arrays[f"buffer:{name}"]), int(b["start"]), int(b["count"]),
                                   tuple(int(d) for d in b["shape"]))
    c = header["case"]
    extra = dict(c["extra"])
    extra.update({k[len("extra:"):]: v for k, v in arrays.items() if k.startswith("extra:")})
    inputs = {n: buffers[n].view_of(buffers[n].initial).copy() for n in c["inputs"]}
    outputs = {n: (tuple(shape), np.dtype(dt)) for n, (shape, dt) in c["outputs"].items()}
    case = Case(c["name"], "judged", inputs, outputs, scalars=dict(c["scalars"]), offset=int(c["offset"]),
                inout=tuple(c["inout"]), extra=extra, large=bool(c["large"]))
    return case, buffers


class Judged:
    """One submission in this process: its exercise, its source, its compiled kernels."""

    def __init__(self, answers: BinaryIO, requests: wire.Reader):
        self.answers, self.requests = answers, requests
        self.ex: Exercise | None = None
        self.code = ""
        self.runtime: Any = None
        self.loaded: dict[str, Any] = {}
        self.macros: dict[str, int] = {}

    def send(self, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
        wire.send(self.answers, header, arrays)

    def stage_error(self, verdict: str, message: str) -> None:
        self.send({"event": "stage_error", "verdict": verdict, "message": message[:6000]})

    # ---------------------------------------------------------------------------------------------

    def setup(self, header: dict[str, Any]) -> bool:
        from .registry import exercise
        from .runtime import CourseRuntime

        self.ex = exercise(header["exercise"])
        self.code = header["kernel"]
        if header.get("gpu_memory_mb"):
            try:
                import cupy

                cupy.get_default_memory_pool().set_limit(size=int(header["gpu_memory_mb"]) << 20)
            except Exception:
                pass
        try:
            self.runtime = CourseRuntime()
        except Exception as exc:
            self.stage_error(V.ENVIRONMENT, f"no backend to run kernels on: {type(exc).__name__}: {exc}")
            return False
        problem = arch_problem(self.ex, self.runtime)
        if problem:
            self.stage_error(V.ENVIRONMENT, f"{problem}. The grader compiled it for {self.ex.arch}; the cases run "
                                            f"only on such a GPU.")
            return False
        try:
            self.macros = launch_macros(self.code, self.ex)
            libraries = self._build_cpu_libraries()
        except StageError as exc:
            self.stage_error(exc.verdict, exc.message)
            return False
        self.send({"event": "built", "libraries": libraries})
        return True

    def _build_cpu_libraries(self) -> list[dict[str, Any]]:
        """Build, without loading, every CPU-backend library this submission will use: the kernels
        (CPU backend), their traced builds (race probe, traffic feedback). Nothing of the source runs."""
        from kernels.compile import _load_cpu
        from kernels.cpu import compile as cpu_compile
        from kernels.cpu import toolchain

        try:
            cxx = toolchain.compiler()
        except Exception:
            if not self.runtime.is_gpu:
                raise StageError(V.ENVIRONMENT, "the CPU backend needs a C++ compiler (g++), and none was found")
            return []
        built: list[cpu_compile.LibraryBuilt] = []
        for spec in self.ex.kernels:
            with cpu_compile.build_only():
                try:
                    if self.runtime.is_gpu:
                        _load_cpu(self.code, "kernel.cu", spec.name, (), None)
                    else:
                        load_kernel_spec(self.code, spec, self.runtime)
                except cpu_compile.LibraryBuilt as b:
                    built.append(b)
                except Exception:  # on a GPU the CPU build only serves the feedback: best effort
                    if not self.runtime.is_gpu:
                        raise
        found = {str(b.path): {"path": str(b.path), "traced": False} for b in built}
        if cxx.kind == "gcc":
            for b in built:
                with cpu_compile.build_only():
                    try:
                        cpu_compile.compile_module(b.code, b.entries, b.options, b.filename, traced=True)
                    except cpu_compile.LibraryBuilt as t:
                        found[str(t.path)] = {"path": str(t.path), "traced": True}
                    except Exception:
                        pass  # the race probe and the feedback are best effort
        return list(found.values())

    def load(self, header: dict[str, Any]) -> bool:
        from .harness import load_kernels
        from .sandbox import install_process_filter, launch_filter_bpf

        try:
            self.loaded = load_kernels(self.code, self.ex, self.runtime)
            info = {"backend": self.runtime.name, "device": self.runtime.device_name(),
                    "sm_count": self.runtime.sm_count(), "is_gpu": self.runtime.is_gpu}
            self._warm_up()
            if header.get("launch_filter"):
                from kernels.cpu import launch as cpu_launch

                cpu_launch.set_sandbox(launch_filter_bpf())
            if header.get("process_filter"):
                install_process_filter()
        except StageError as exc:
            self.stage_error(exc.verdict, exc.message)
            return False
        except Exception as exc:
            self.stage_error(V.ENVIRONMENT, f"the judged process could not start: {type(exc).__name__}: {exc}")
            return False
        self.send({"event": "ready", **info})
        return True

    def _warm_up(self) -> None:
        """Open now what a later step would open (device files, temporary files, compiled helpers),
        since the filter refuses to open anything for writing afterwards."""
        if self.runtime.is_gpu:
            import kernels

            xp = self.runtime.xp
            a = xp.arange(1024, dtype=xp.float32)
            (a * 2).sum()
            self.runtime.synchronize()
            if self.ex.perf is not None:
                kernels.ceilings()
        else:
            from kernels.cpu import launch as cpu_launch

            cpu_launch.launcher()

    # ---------------------------------------------------------------------------------------------

    def run(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        case, buffers = _case_from(header, arrays)
        outcome = execute(self.ex, case, buffers, self.loaded, self.runtime, self.macros, int(header.get("trace", 0)))
        self.send({"event": "ran", "error_text": outcome.error_text, "error_verdict": outcome.error_verdict,
                   "fatal": outcome.fatal, "races": outcome.races, "shared_unwritten": outcome.shared_unwritten},
                  {f"final:{n}": a for n, a in outcome.finals.items()})

    def hints(self, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        from kernels.traffic.feedback import traffic_hints

        case, _ = _case_from(header, arrays)
        case.visibility = "public"
        try:
            found = traffic_hints(self.ex, self.code, [case])
        except Exception:
            found = []
        self.send({"event": "hints", "hints": found})

    def perf(self, header: dict[str, Any]) -> None:
        from .perf import measure as measure_perf

        rng = np.random.default_rng(int(header["seed"]))
        try:
            result = measure_perf(self.ex, self.loaded, self.runtime, rng, self.macros).to_dict()
        except StageError as exc:
            result = {"verdict": exc.verdict, "message": exc.message}
        self.send({"event": "perf", "result": result})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    requests = wire.Reader(int(argv[0]))
    answers = os.fdopen(int(argv[1]), "wb", buffering=1 << 20)
    judged = Judged(answers, requests)
    try:
        while True:
            header, arrays = requests.receive(max_bytes=MAX_REQUEST_BYTES)
            what = header.get("do")
            if what == "setup":
                if not judged.setup(header):
                    return 0
            elif what == "load":
                if not judged.load(header):
                    return 0
            elif what == "run":
                judged.run(header, arrays)
            elif what == "hints":
                judged.hints(header, arrays)
            elif what == "perf":
                judged.perf(header)
            elif what == "bye":
                return 0
            else:
                raise wire.ProtocolError(f"unknown request {what!r}")
    except wire.ProtocolError:
        return 3  # the judge went away
    except Exception:
        traceback.print_exc(limit=5)
        return 4


if __name__ == "__main__":
    sys.exit(main())
