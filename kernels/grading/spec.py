"""What an exercise is, as data: its kernels, its cases, how the harness launches them, what is right.

An exercise module (``kernels/grading/exercises/<chapter>.py``) builds ``Exercise`` objects; the
student check, the grader and the notebook generator all read them, so the cases a student runs in
Colab and the ones the grader runs come from the same code. Nothing here touches a GPU.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

KINDS = ("write", "fix", "predict")


@dataclass(frozen=True)
class Tolerance:
    """An element passes when ``|got - expected| <= atol + rtol * |expected|``; integers are exact."""

    atol: float = 0.0
    rtol: float = 0.0

    def text(self) -> str:
        if not self.atol and not self.rtol:
            return "exact"
        parts = [f"atol {self.atol:.0e}"] if self.atol else []
        parts += [f"rtol {self.rtol:.0e}"] if self.rtol else []
        return ", ".join(parts)


EXACT = Tolerance()


@dataclass
class Expected:
    """A reference output with its own per-element absolute tolerance (e.g. GEMM's error bound)."""

    value: np.ndarray
    atol: np.ndarray | float | None = None


@dataclass
class Case:
    """One run of the kernel: its inputs, the outputs it must produce, and what the case is for.

    ``inputs`` holds the host arrays of the input (and in-out) arguments; ``outputs`` the shape and
    dtype of each output argument, which the harness allocates poisoned with guard bands around.
    ``scalars`` are the kernel's scalar arguments and sizes; ``extra`` anything else the launch or
    the reference needs. ``offset`` moves every array view that many elements past a 256-byte
    boundary (for exercises about alignment).
    """

    name: str
    visibility: str  # "public", "hidden" or "random"
    inputs: dict[str, np.ndarray]
    outputs: dict[str, tuple[tuple[int, ...], Any]]
    scalars: dict[str, Any] = field(default_factory=dict)
    tol: Tolerance = EXACT
    why: str = ""
    large: bool = False
    offset: int = 0
    inout: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    probe: bool = True  # run the race / out-of-bounds-read probes (skipped for large cases)

    def __post_init__(self) -> None:
        self.outputs = {name: (tuple(int(s) for s in shape), np.dtype(dtype))
                        for name, (shape, dtype) in self.outputs.items()}

    @property
    def label(self) -> str:
        return f"{self.visibility} {self.name}"

    def all_arrays(self) -> list[str]:
        return list(self.inputs) + [name for name in self.outputs if name not in self.inputs]


@dataclass(frozen=True)
class KernelSpec:
    """A kernel the student writes: its name and the C parameter list it must have."""

    name: str
    params: str  # "(const float* x, float* y, int n)"

    @property
    def declaration(self) -> str:
        return f'extern "C" __global__ void {self.name}{self.params}'


@dataclass
class LaunchContext:
    """What a launch function gets: the compiled kernels, the device arrays and the case."""

    kernels: dict[str, Callable[..., Any]]
    arrays: dict[str, Any]
    case: Case
    macros: dict[str, int]
    xp: Any
    sm_count: int = 0  # 0 on the CPU backend
    stream: Any = None

    def kernel(self, name: str | None = None) -> Callable[..., Any]:
        if name is None:
            if len(self.kernels) != 1:
                raise ValueError("this exercise has several kernels; name the one to launch")
            return next(iter(self.kernels.values()))
        return self.kernels[name]

    def __getitem__(self, name: str) -> Any:
        if name in self.arrays:
            return self.arrays[name]
        return self.case.scalars[name]


@dataclass(frozen=True)
class PerfSpec:
    """How fast the kernel must be: a metric measured on the GPU against a baseline of the same run.

    ``work(case)`` is the bytes (GB/s) or FLOPs (TFLOP/s) one launch must do; ``roofline(case)`` the
    (FLOPs, bytes) pair that places it on the roofline. ``baseline`` is "copy" (the measured copy
    ceiling), "cublas" (``cupy.matmul`` on the same shapes) or "ideal" (set by ``measure``, which
    replaces the standard measurement).
    """

    case: Callable[[np.random.Generator, int], Case]  # (rng, sm_count) -> the large case
    metric: str  # "GB/s", "TFLOP/s" or "speedup"
    work: Callable[[Case], float]
    baseline: str
    target: float
    describe: str
    roofline: Callable[[Case], tuple[float, float]] | None = None
    measure: Callable[..., Any] | None = None
    repeat: int = 20


@dataclass(frozen=True)
class Question:
    """One prediction: a number (with a tolerance) or a word (compared case-insensitively; a tuple of
    words accepts any of them)."""

    key: str
    text: str
    answer: Any
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    points: float = 1.0

    def accepts(self, value: Any) -> bool:
        if isinstance(self.answer, (str, tuple)):
            words = (self.answer,) if isinstance(self.answer, str) else self.answer
            return isinstance(value, str) and value.strip().lower() in {w.strip().lower() for w in words}
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            return False
        value = float(value)
        if not np.isfinite(value):
            return False
        allowed = max(self.abs_tol, self.rel_tol * abs(float(self.answer)))
        return abs(value - float(self.answer)) <= allowed + 1e-12 * max(1.0, abs(float(self.answer)))


@dataclass(frozen=True)
class Points:
    """Points of the public cases, the hidden cases and the performance target (split evenly)."""

    public: float = 3.0
    hidden: float = 5.0
    perf: float = 2.0


@dataclass(frozen=True)
class Exercise:
    """A graded exercise. ``id`` is "<chapter>/<name>", the same as its notebook's path."""

    id: str
    title: str
    kind: str
    kernels: tuple[KernelSpec, ...] = ()
    launch_text: str = ""  # how the harness launches the kernel, for the statement
    make_cases: Callable[[np.random.Generator, str], list[Case]] | None = None
    launch: Callable[[LaunchContext], None] | None = None
    reference: Callable[[Case], dict[str, Any]] | None = None
    derive: Callable[[Case, dict[str, np.ndarray]], dict[str, np.ndarray]] | None = None
    launch_macros: tuple[str, ...] = ()
    check_macros: Callable[[dict[str, int]], str | None] | None = None
    perf: PerfSpec | None = None
    questions: tuple[Question, ...] = ()
    measure: Callable[[dict[str, Any]], Any] | None = None  # predict: what the GPU says
    deterministic: bool = True
    allowed_includes: tuple[str, ...] = ()
    points: Points = Points()
    #: The NVRTC target the kernels need ("sm_90a"), when only some GPUs can run them: they are compiled for
    #: it, graded only on a GPU of its compute capability, and refused elsewhere (the CPU backend included)
    #: with a sentence saying so. Empty: the T4 and every later GPU, and the CPU backend.
    arch: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.id}: kind must be one of {KINDS}, not {self.kind!r}")
        if "/" not in self.id:
            raise ValueError(f"exercise id {self.id!r} must be '<chapter>/<name>'")
        if self.kind == "predict":
            if not self.questions:
                raise ValueError(f"{self.id}: a predict exercise needs questions")
        elif not (self.kernels and self.make_cases and self.launch and self.reference):
            raise ValueError(f"{self.id}: a kernel exercise needs kernels, make_cases, launch and reference")
        if self.arch and not re.fullmatch(r"sm_\d+a?", self.arch):
            raise ValueError(f"{self.id}: arch is an NVRTC target like 'sm_90a', not {self.arch!r}")

    @property
    def chapter(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.id.split("/", 1)[1]

    @property
    def has_kernel(self) -> bool:
        return bool(self.kernels)

    def output_names(self, case: Case) -> list[str]:
        """The raw arrays the kernel writes (outputs and in-out arrays)."""
        return list(dict.fromkeys(list(case.outputs) + list(case.inout)))
