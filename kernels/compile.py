"""Compile CUDA C with CuPy and launch it with checked arguments and a checked launch configuration.

A wrong argument type or an impossible grid makes CUDA fail with a terse status code or, worse,
compute garbage. ``load_kernel`` returns a ``Kernel`` whose call checks all of that first and says
in one sentence what is wrong; compile errors come back as the compiler's ``file(line): error``.
Without a GPU (or with COURSE_BACKEND=cpu) the same source is compiled for the CPU backend
(``kernels.cpu``) and the same checks run before every launch.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .backend import backend_name, require_gpu
from .nvrtc import CudaCompileError
from .signature import (KernelArgumentError, KernelNotFoundError, Param, convert_args, parse_name_expression, parse_signature,
                        template_kernels)

DEFAULT_OPTIONS = ("-std=c++17",)
STATIC_SMEM_LIMIT = 48 * 1024  # dynamic shared memory above this needs an explicit opt-in


class LaunchConfigError(ValueError):
    """The grid, block or shared memory size cannot be launched; the message says why."""


def ceil_div(a: int, b: int) -> int:
    """Smallest integer >= a / b: the number of blocks of size ``b`` that cover ``a`` items."""
    if b <= 0:
        raise ValueError(f"ceil_div: the divisor must be positive, got {b}")
    return -(-a // b)


@dataclass(frozen=True)
class LaunchLimits:
    """What the device allows for one launch (CUDA's limits for all current GPUs by default)."""

    max_threads_per_block: int = 1024
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_optin: int = 48 * 1024
    name: str = "this GPU"


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _dims(value: Any, what: str, kernel: str) -> tuple[int, int, int]:
    if _is_int(value) or isinstance(value, (float, np.floating)):
        value = (value,)  # a lone float is then reported per axis, with the ceil_div hint
    if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3:
        raise LaunchConfigError(f"{kernel}: {what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    dims = []
    for axis, v in zip("xyz", value):
        if not _is_int(v):
            hint = ""
            if isinstance(v, (float, np.floating)):
                hint = " (use ceil_div(n, block) for a whole number of blocks)"
            raise LaunchConfigError(
                f"{kernel}: {what}.{axis} must be an int, got {type(v).__name__} {v!r}{hint}")
        if v < 1:
            raise LaunchConfigError(
                f"{kernel}: {what}.{axis} is {v}; every {what} dimension must be at least 1")
        dims.append(int(v))
    return tuple(dims + [1] * (3 - len(dims)))  # type: ignore[return-value]


def check_launch(grid: Any, block: Any, shared_mem: int, limits: LaunchLimits, *,
                 kernel: str = "kernel", kernel_max_threads: int | None = None, static_shared: int = 0,
                 max_dynamic_shared: int | None = None) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Normalise grid and block to 3-tuples, or raise LaunchConfigError saying what is wrong.

    ``kernel_max_threads`` is the kernel's own limit (registers or ``__launch_bounds__``);
    ``max_dynamic_shared`` is its current ``max_dynamic_shared_size_bytes`` attribute.
    """
    g = _dims(grid, "grid", kernel)
    b = _dims(block, "block", kernel)
    for axis, v, most in zip("xyz", g, limits.max_grid):
        if v > most:
            fix = "; put the large dimension in x" if axis != "x" else ""
            raise LaunchConfigError(
                f"{kernel}: grid.{axis} is {v} but at most {most} blocks are allowed along {axis}{fix}")
    for axis, v, most in zip("xyz", b, limits.max_block):
        if v > most:
            raise LaunchConfigError(
                f"{kernel}: block.{axis} is {v} but at most {most} threads are allowed along {axis}")
    threads = b[0] * b[1] * b[2]
    if threads > limits.max_threads_per_block:
        raise LaunchConfigError(
            f"{kernel}: a block of {b[0]}x{b[1]}x{b[2]} = {threads} threads exceeds the limit of "
            f"{limits.max_threads_per_block} threads per block on {limits.name}")
    if kernel_max_threads is not None and threads > kernel_max_threads:
        raise LaunchConfigError(
            f"{kernel}: a block of {threads} threads is more than this kernel can run ({kernel_max_threads}, "
            f"limited by its registers per thread or __launch_bounds__); use a smaller block")
    if not _is_int(shared_mem) or shared_mem < 0:
        raise LaunchConfigError(f"{kernel}: shared_mem must be a number of bytes >= 0, got {shared_mem!r}")
    if shared_mem + static_shared > limits.max_shared_optin:
        raise LaunchConfigError(
            f"{kernel}: {shared_mem} bytes of dynamic shared memory (+{static_shared} static) exceed the "
            f"{limits.max_shared_optin} bytes one block can have on {limits.name}")
    allowed = STATIC_SMEM_LIMIT - static_shared if max_dynamic_shared is None else max_dynamic_shared
    if shared_mem > allowed:
        raise LaunchConfigError(
            f"{kernel}: {shared_mem} bytes of dynamic shared memory is more than the {allowed} this kernel "
            f"allows now (48 KB per block unless you opt in); opt in first with "
            f"kernel.max_dynamic_shared_memory = {int(shared_mem)}")
    return g, b


@functools.lru_cache(maxsize=16)
def device_limits(device_id: int) -> LaunchLimits:
    """The launch limits of CUDA device ``device_id``, read once."""
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(device_id)
    name = props.get("name", b"this GPU")
    name = name.decode() if isinstance(name, bytes) else str(name)
    return LaunchLimits(max_threads_per_block=int(props["maxThreadsPerBlock"]),
                        max_block=tuple(int(v) for v in props["maxThreadsDim"]),  # type: ignore[arg-type]
                        max_grid=tuple(int(v) for v in props["maxGridSize"]),  # type: ignore[arg-type]
                        max_shared_optin=int(props.get("sharedMemPerBlockOptin")
                                             or props["sharedMemPerBlock"]),
                        name=name)


class Kernel:
    """A compiled kernel: call it as ``kernel(grid, block, args, shared_mem=0, stream=None)``.

    ``raw`` is a ``cupy.RawKernel``, or a ``kernels.cpu.RawKernel`` when ``backend`` is "cpu".
    """

    def __init__(self, name: str, code: str, params: list[Param], raw: Any, expression: str | None = None,
                 backend: str = "cupy"):
        self.name = name
        self.code = code
        self.params = params
        self.raw = raw
        self.expression = expression
        self.backend = backend  # "cupy", or "cpu" for kernels.cpu
        self._fixed: tuple[int, int] | None = None

    def __repr__(self) -> str:
        args = ", ".join(f"{p.short} {p.name}" for p in self.params)
        return f"<Kernel {self.expression or self.name}({args})>"

    @property
    def attributes(self) -> dict[str, int]:
        """The driver's view of the compiled kernel: num_regs, local_size_bytes, shared_size_bytes ..."""
        return dict(self.raw.attributes)

    @property
    def max_dynamic_shared_memory(self) -> int:
        """Bytes of dynamic shared memory a launch may ask for (set it to go beyond 48 KB)."""
        return int(self.raw.max_dynamic_shared_size_bytes)

    @max_dynamic_shared_memory.setter
    def max_dynamic_shared_memory(self, nbytes: int) -> None:
        if self.backend == "cpu":
            self.raw.max_dynamic_shared_size_bytes = nbytes
            return
        import cupy

        limits = device_limits(cupy.cuda.Device().id)
        static = self._fixed_attributes()[1]
        if nbytes < 0 or nbytes + static > limits.max_shared_optin:
            raise LaunchConfigError(
                f"{self.name}: cannot allow {nbytes} bytes of dynamic shared memory: with {static} static "
                f"bytes that exceeds the {limits.max_shared_optin} bytes per block of {limits.name}")
        self.raw.max_dynamic_shared_size_bytes = int(nbytes)

    def _fixed_attributes(self) -> tuple[int, int]:
        """(max threads per block, static shared bytes): fixed once compiled, so read once."""
        if self._fixed is None:
            attrs = self.raw.attributes
            self._fixed = (int(attrs["max_threads_per_block"]), int(attrs["shared_size_bytes"]))
        return self._fixed

    def __call__(self, grid: Any, block: Any, args: Any, *, shared_mem: int = 0, stream: Any = None,
                 time_limit: float | None = None) -> None:
        """Launch. ``time_limit`` (seconds) applies to the CPU backend only (kernels.cpu.set_time_limit)."""
        if self.backend == "cpu":
            self._call_cpu(grid, block, args, shared_mem, time_limit)
            return
        import cupy

        limits = device_limits(cupy.cuda.Device().id)
        max_threads, static = self._fixed_attributes()
        dynamic_limit = None
        if _is_int(shared_mem) and shared_mem + static > STATIC_SMEM_LIMIT:
            dynamic_limit = self.max_dynamic_shared_memory  # a driver call, only when it matters
        try:
            g, b = check_launch(grid, block, shared_mem, limits, kernel=self.name,
                                kernel_max_threads=max_threads, static_shared=static,
                                max_dynamic_shared=dynamic_limit)
            converted = convert_args(self.params, args, kernel=self.name, array_types=(cupy.ndarray,))
        except (LaunchConfigError, KernelArgumentError) as exc:
            raise exc.with_traceback(None) from None  # the student's call, not our internals
        if stream is None:
            self.raw(g, b, converted, shared_mem=int(shared_mem))
        else:
            with stream:
                self.raw(g, b, converted, shared_mem=int(shared_mem))

    def _call_cpu(self, grid: Any, block: Any, args: Any, shared_mem: int, time_limit: float | None) -> None:
        from .cpu.raw import CPU_LIMITS

        try:
            # Static shared memory is not checked here: the CPU backend knows it per module, not per kernel.
            g, b = check_launch(grid, block, shared_mem, CPU_LIMITS, kernel=self.name,
                                kernel_max_threads=self.raw.max_threads_per_block,
                                max_dynamic_shared=self.raw.max_dynamic_shared_size_bytes)
            converted = convert_args(self.params, args, kernel=self.name, array_types=(np.ndarray,))
        except (LaunchConfigError, KernelArgumentError) as exc:
            raise exc.with_traceback(None) from None
        self.raw.launch_converted(g, b, converted, int(shared_mem), time_limit)


_TMP_PATH = re.compile(r"[^\s\"']*?([^/\s\"']+\.cu)\((\d+)\)")
_TMP_QUOTED = re.compile(r"\"[^\"\n]*\.cu\"")


def _clean_log(message: str, filename: str) -> str:
    """The compiler log with CuPy's temporary file path replaced by the source's name."""
    message = _TMP_PATH.sub(lambda m: f"{filename}({m.group(2)})", message)
    return _TMP_QUOTED.sub(f'"{filename}"', message).strip()


def load_kernel(code_or_path: str, name: str, *, options: Sequence[str] = (),
                name_expression: str | None = None) -> Kernel:
    """Compile (once; later calls hit a cache) and return kernel ``name``.

    ``code_or_path`` is CUDA C, or a path ending in ``.cu`` under ``kernels/cuda/``. Template kernels
    need ``name_expression`` (e.g. ``"reduce<float, 256>"``), or pass that as ``name``.
    """
    on_cpu = backend_name() == "cpu"
    if not on_cpu:
        require_gpu(f"load_kernel({name!r})")
    from .sources import source

    if name_expression is None and "<" in name:
        name_expression = name
    is_path = code_or_path.endswith(".cu") and "\n" not in code_or_path
    try:
        code = source(code_or_path) if is_path else code_or_path  # by content: edits recompile
        filename = code_or_path if is_path else "kernel.cu"
        if on_cpu:
            return _load_cpu(code, filename, name, tuple(options), name_expression)
        return _load(code, filename, name, tuple(options), name_expression)
    except (FileNotFoundError, ValueError, CudaCompileError) as exc:
        raise exc.with_traceback(None) from None  # one message, not a traceback through the package


@functools.lru_cache(maxsize=None)
def _load(code: str, filename: str, name: str, options: tuple[str, ...],
          name_expression: str | None) -> Kernel:
    import cupy
    from cupy.cuda.compiler import CompileException

    from .sources import include_options

    base = parse_name_expression(name_expression)[0] if name_expression else name
    if name_expression is None and base in template_kernels(code):
        raise ValueError(f"{base} is a template kernel; choose its template arguments with "
                         f"name_expression, e.g. load_kernel(..., {base!r}, name_expression='{base}<float>')")
    try:
        params = parse_signature(code, name_expression or base)
    except KernelNotFoundError as exc:
        raise KernelNotFoundError(f"{filename}: {exc}") from None
    all_options = (*DEFAULT_OPTIONS, *include_options(), *options)
    try:
        # a name expression also finds C++ (not extern "C") kernels under their mangled names
        expression = name_expression or base
        module = cupy.RawModule(code=code, options=all_options, name_expressions=[expression])
        raw = module.get_function(expression)  # compiles and loads now, not at the first launch
    except CompileException as exc:
        raise CudaCompileError(f"{filename} does not compile:\n{_clean_log(str(exc), filename)}") from None
    return Kernel(base, code, params, raw, name_expression)


@functools.lru_cache(maxsize=None)
def _load_cpu(code: str, filename: str, name: str, options: tuple[str, ...],
              name_expression: str | None) -> Kernel:
    """load_kernel on the CPU backend: the same checks, compiled by kernels.cpu.

    A template instantiation is compiled together with the others the file lists on its
    ``// name_expressions:`` lines, so one compile serves all of them.
    """
    from .cpu.compile import CompileError
    from .cpu.raw import RawModule
    from .kernel_scan import name_expressions_in
    from .sources import include_options

    base = parse_name_expression(name_expression)[0] if name_expression else name
    if name_expression is None and base in template_kernels(code):
        raise ValueError(f"{base} is a template kernel; choose its template arguments with "
                         f"name_expression, e.g. load_kernel(..., {base!r}, name_expression='{base}<float>')")
    try:
        params = parse_signature(code, name_expression or base)
    except KernelNotFoundError as exc:
        raise KernelNotFoundError(f"{filename}: {exc}") from None
    all_options = (*DEFAULT_OPTIONS, *include_options(), *options)
    expression = name_expression or base
    listed = list(name_expressions_in(code)) if name_expression else []
    together = listed if expression in listed else [expression, *listed]  # one order: one cache entry
    try:
        module = RawModule(code=code, options=all_options, name_expressions=together, filename=filename)
    except CompileError:
        if together == [expression]:
            raise
        module = RawModule(code=code, options=all_options, name_expressions=[expression], filename=filename)
    return Kernel(base, code, params, module.get_function(expression), name_expression, backend="cpu")


__all__ = ["load_kernel", "Kernel", "ceil_div", "LaunchConfigError", "LaunchLimits", "check_launch",
           "device_limits"]
