"""Drop-ins for CuPy's ``RawModule`` and ``RawKernel`` that run the same CUDA C on the CPU.

``RawModule(code=..., options=..., name_expressions=[...])``, ``.get_function(name)``,
``.get_global(name)`` and ``RawKernel(code, name)(grid, block, args, shared_mem=...)`` behave as in
CuPy, over NumPy arrays (and the arrays of ``kernels.cpu.xp``). Arguments are checked against the
kernel's C signature with ``kernels.signature.convert_args``, as ``kernels.load_kernel`` does on
the GPU; launches also accept ``time_limit=<seconds>``.
"""
from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..declarations import global_kernels  # noqa: F401  (exported here too)
from ..errors import GlobalNotFoundError, KernelArgumentError, KernelNotFoundError, LaunchConfigError
from ..launch import LaunchLimits, check_launch
from ..signature import (Param, convert_args, find_functions, mask_code, parse_name_expression, parse_signature,
                         split_top_level)
from . import compile as cpu_compile
from . import launch, toolchain, trace

MAX_SHARED_OPTIN = 232448  # 227 KB, the largest per-block shared memory of current GPUs
DEFAULT_DYNAMIC_SHARED = 48 * 1024
CPU_LIMITS = LaunchLimits(max_shared_optin=MAX_SHARED_OPTIN, name="the CPU backend")


def _launch_bounds(code: str, name: str) -> int | None:
    """The first argument of the kernel's __launch_bounds__, when it is a number the source gives."""
    base, args = parse_name_expression(name)
    spans = [s for s in find_functions(code) if s.name == base]
    if not spans:
        return None
    span = next((s for s in spans if s.is_definition), spans[0])
    header = mask_code(code)[span.start:span.params_open]
    m = re.search(r"__launch_bounds__\s*\(", header)
    if not m:
        return None
    inner = header[m.end():]
    depth, end = 1, 0
    for end, ch in enumerate(inner):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            break
    parts = split_top_level(inner[:end])
    if not parts:
        return None
    expr = parts[0].strip()
    bound = {t: v for (t, _d), v in zip(span.template_params, args)}
    expr = bound.get(expr, expr)
    macro = re.search(rf"^\s*#\s*define\s+{re.escape(expr)}\s+\(?\s*(\d+)\s*\)?\s*$", code, re.MULTILINE)
    if macro:
        expr = macro.group(1)
    try:
        return int(expr, 0)
    except ValueError:
        return None


class MemoryPointer:
    """The address of a ``__device__`` or ``__constant__`` variable (CuPy's MemoryPointer, simplified)."""

    def __init__(self, ptr: int, size: int, owner: Any):
        self.ptr = int(ptr)
        self.size = int(size)
        self.owner = owner
        self.device_id = 0

    @property
    def mem(self) -> "MemoryPointer":
        return self

    def __int__(self) -> int:
        return self.ptr

    def __add__(self, offset: int) -> "MemoryPointer":
        return MemoryPointer(self.ptr + int(offset), self.size - int(offset), self.owner)

    def _check(self, size: int) -> None:
        if size < 0 or size > self.size:
            raise ValueError(f"{size} bytes do not fit in the {self.size} bytes of this global")

    def copy_from_host(self, mem: Any, size: int, stream: Any = None) -> None:
        self._check(size)
        ctypes.memmove(self.ptr, _host_address(mem), size)

    def copy_to_host(self, mem: Any, size: int, stream: Any = None) -> None:
        self._check(size)
        ctypes.memmove(_host_address(mem), self.ptr, size)

    def memset(self, value: int, size: int, stream: Any = None) -> None:
        self._check(size)
        ctypes.memset(self.ptr, int(value), size)

    def __repr__(self) -> str:
        return f"<MemoryPointer {self.ptr:#x} ({self.size} bytes, CPU backend)>"


def _host_address(mem: Any) -> int:
    if isinstance(mem, np.ndarray):
        return int(mem.__array_interface__["data"][0])
    if isinstance(mem, ctypes.c_void_p):
        return int(mem.value or 0)
    return int(mem)


class RawModule:
    """CUDA C compiled for the CPU backend; same constructor and methods as ``cupy.RawModule``."""

    def __init__(self, code: str | None = None, *, path: str | None = None, options: Sequence[str] = (),
                 backend: str = "nvrtc", translate_cucomplex: bool = False,
                 enable_cooperative_groups: bool = False, name_expressions: Sequence[str] | None = None,
                 jitify: bool = False, filename: str | None = None):
        if (code is None) == (path is None):
            raise TypeError("RawModule needs exactly one of code=... or path=...")
        if path is not None:
            code = Path(path).read_text(encoding="utf-8")
            filename = filename or Path(path).name
        if not isinstance(code, str):
            raise TypeError(f"RawModule: code must be a string of CUDA C, not {type(code).__name__}")
        self.code = code
        self.options = tuple(options)
        self.name_expressions = tuple(name_expressions or ())
        self.filename = filename or "kernel.cu"
        requested = list(dict.fromkeys(self.name_expressions))
        automatic = [k for k in global_kernels(code) if k not in requested]
        try:
            self._module = _compile_dropping_bad_automatic(code, requested, automatic, self.options, self.filename)
        except (cpu_compile.CompileError, toolchain.CompilerNotFoundError, cpu_compile.UnsupportedPlatformError) as exc:
            raise exc.with_traceback(None) from None  # one message, not a traceback through the package
        self._kernels: dict[str, RawKernel] = {}

    @property
    def entries(self) -> list[str]:
        return list(self._module.entries)

    def compile(self, log_stream: Any = None) -> None:
        """Already compiled (kept for CuPy compatibility)."""

    def get_function(self, name: str) -> "RawKernel":
        if name not in self._module.entries:
            kernels = ", ".join(self._module.entries) or "none"
            base = parse_name_expression(name)[0]
            hint = ""
            if "<" in name or base in {s.name for s in find_functions(self.code) if s.template_params}:
                hint = f" (a template kernel needs name_expressions=[{name!r}] when the module is created)"
            raise KernelNotFoundError(f"{self.filename}: no kernel {name!r} in this module{hint}; kernels: {kernels}")
        kernel = self._kernels.get(name)
        if kernel is None:
            kernel = RawKernel._from_module(self, name)
            self._kernels[name] = kernel
        return kernel

    def get_global(self, name: str) -> MemoryPointer:
        """The address and size of a ``__device__`` or ``__constant__`` variable."""
        lib = self._module.lib
        try:
            address = ctypes.addressof(ctypes.c_char.in_dll(lib, name))
        except ValueError:
            raise GlobalNotFoundError(f"{self.filename}: no __device__ or __constant__ variable named {name!r} "
                                      f"(only variables at namespace scope, not static, can be looked up)") from None
        size = int(cpu_compile.runtime().lib.cudacpu_symbol_size(ctypes.c_void_p(address)))
        return MemoryPointer(address, size, self)


def _compile_dropping_bad_automatic(code: str, requested: list[str], automatic: list[str], options: Sequence[str],
                                    filename: str) -> cpu_compile.CompiledModule:
    """Compile with entry points for the requested expressions and every kernel found at namespace
    scope; an automatic one the compiler rejects (inside #if 0, say) is dropped and the rest kept."""
    while True:
        entries = requested + automatic
        try:
            return cpu_compile.compile_module(code, entries, options, filename)
        except cpu_compile.UnsupportedFeatureError:
            raise
        except cpu_compile.CompileError as exc:
            bad = list(exc.failing_entries)
            dropped = [e for e in bad if e in automatic]
            if not dropped or any(e in requested for e in bad):
                raise exc.with_traceback(None) from None
            automatic = [e for e in automatic if e not in dropped]


class RawKernel:
    """One kernel; ``RawKernel(code, name, options=())`` compiles like ``cupy.RawKernel``."""

    def __init__(self, code: str, name: str, options: Sequence[str] = (), backend: str = "nvrtc",
                 translate_cucomplex: bool = False, enable_cooperative_groups: bool = False,
                 jitify: bool = False, *, filename: str | None = None):
        expressions = [name] if "<" in name else []
        module = RawModule(code=code, options=options, name_expressions=expressions or None, filename=filename)
        if name not in module._module.entries:
            module = RawModule(code=code, options=options, name_expressions=[name], filename=filename)
        self._init(module, name)

    @classmethod
    def _from_module(cls, module: RawModule, name: str) -> "RawKernel":
        kernel = cls.__new__(cls)
        kernel._init(module, name)
        return kernel

    def _init(self, module: RawModule, name: str) -> None:
        self.module = module
        self.name = name
        self.code = module.code
        self.options = module.options
        try:
            self.params: list[Param] | None = parse_signature(module.code, name)
        except (KernelNotFoundError, ValueError, IndexError):
            self.params = None
        sizes = module._module.param_sizes[name]
        if self.params is not None and len(self.params) != len(sizes):
            self.params = None  # the text parser was fooled (macros): rely on the compiler's sizes
        self.max_threads_per_block = _launch_bounds(module.code, name) or 1024
        self._max_dynamic_shared = DEFAULT_DYNAMIC_SHARED

    @property
    def kernel_name(self) -> str:
        return parse_name_expression(self.name)[0]

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        return self._max_dynamic_shared

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, nbytes: int) -> None:
        if not isinstance(nbytes, (int, np.integer)) or nbytes < 0 or nbytes > MAX_SHARED_OPTIN:
            raise LaunchConfigError(f"{self.kernel_name}: max_dynamic_shared_size_bytes must be 0 to "
                                    f"{MAX_SHARED_OPTIN}, got {nbytes!r}")
        self._max_dynamic_shared = int(nbytes)

    @property
    def attributes(self) -> dict[str, int]:
        """CuPy's attribute names; registers and local memory are GPU facts (0 here)."""
        return {"max_threads_per_block": self.max_threads_per_block,
                "shared_size_bytes": self.module._module.static_shared_bytes,
                "const_size_bytes": 0, "local_size_bytes": 0, "num_regs": 0, "ptx_version": 0,
                "binary_version": 0, "cache_mode_ca": 0,
                "max_dynamic_shared_size_bytes": self._max_dynamic_shared,
                "preferred_shared_memory_carveout": -1}

    @property
    def num_regs(self) -> int:
        return 0

    @property
    def shared_size_bytes(self) -> int:
        return self.module._module.static_shared_bytes

    def compile(self, log_stream: Any = None) -> None:
        """Already compiled (kept for CuPy compatibility)."""

    def __repr__(self) -> str:
        return f"<RawKernel {self.name} (CPU backend)>"

    def __call__(self, grid: Any, block: Any, args: Any, *, shared_mem: int = 0, stream: Any = None,
                 enable_cooperative_groups: bool = False, time_limit: float | None = None) -> None:
        try:
            g, b = check_launch(grid, block, shared_mem, CPU_LIMITS, kernel=self.kernel_name,
                                kernel_max_threads=self.max_threads_per_block,
                                max_dynamic_shared=self._max_dynamic_shared)
            if self.params is not None:
                converted = convert_args(self.params, args, kernel=self.kernel_name, array_types=(np.ndarray,))
            else:
                if not isinstance(args, (tuple, list)):
                    raise KernelArgumentError(f"{self.kernel_name}: pass the kernel arguments as a tuple, "
                                              f"e.g. (x, y, n)")
                converted = tuple(args)
        except (LaunchConfigError, KernelArgumentError) as exc:
            raise exc.with_traceback(None) from None
        self.launch_converted(g, b, converted, int(shared_mem), time_limit)

    def launch_converted(self, grid: tuple[int, int, int], block: tuple[int, int, int], args: Sequence[Any],
                         shared_mem: int = 0, time_limit: float | None = None) -> None:
        """Launch with arguments already checked and converted (kernels.compile.Kernel does that)."""
        handler = trace.capture_handler()
        if handler is not None:  # kernels.traffic is recording the launches of this context
            handler(self, grid, block, args, shared_mem, time_limit)
            return
        try:
            launch.run(self.module._module, self.name, self.kernel_name, grid, block, shared_mem, args,
                       self.params, time_limit)
        except launch.faults.KernelFault as exc:
            raise exc.with_traceback(None) from None
