"""Compile CUDA C into a module of kernels and globals; launch its kernels with checked arguments.

A wrong argument type or an impossible grid makes CUDA fail with a terse status code or, worse,
compute garbage. ``load_module`` compiles a source (once; later calls hit a cache) into a ``Module``
shaped like CuPy's ``RawModule``: ``get_function(name)`` gives a ``Kernel`` whose call checks all of
that first and says in one sentence what is wrong, and ``get_global(name)`` gives an array over a
``__device__`` or ``__constant__`` variable. ``load_kernel`` is ``load_module(...).get_function(...)``.
Compile errors come back as the compiler's ``file(line): error``. Without a GPU (or with
COURSE_BACKEND=cpu) the same source is compiled for the CPU backend (``kernels.cpu``): one compile
path, in which only ``_compile_cupy`` and ``_compile_cpu`` differ, and the same checks before every launch.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Sequence

import numpy as np

from .backend import backend_name, require_gpu
from .declarations import global_kernels, module_globals
from .errors import (CudaCompileError, GlobalNotFoundError, KernelArgumentError, KernelNotFoundError,
                     LaunchConfigError, NoGPUError)
from .launch import STATIC_SMEM_LIMIT, LaunchLimits, ceil_div, check_launch, is_int, launch_dims
from .profile import apply_to_launch_limits
from .signature import Param, convert_args, parse_name_expression, parse_signature, template_kernels
from .sources import include_options, name_expressions_in, source

DEFAULT_OPTIONS = ("-std=c++17",)


@functools.lru_cache(maxsize=16)
def device_limits(device_id: int) -> LaunchLimits:
    """The launch limits of CUDA device ``device_id``, read once."""
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(device_id)
    name = props.get("name", b"this GPU")
    name = name.decode() if isinstance(name, bytes) else str(name)
    limits = LaunchLimits(max_threads_per_block=int(props["maxThreadsPerBlock"]),
                          max_block=tuple(int(v) for v in props["maxThreadsDim"]),  # type: ignore[arg-type]
                          max_grid=tuple(int(v) for v in props["maxGridSize"]),  # type: ignore[arg-type]
                          max_shared_optin=int(props.get("sharedMemPerBlockOptin") or props["sharedMemPerBlock"]),
                          name=name)
    return apply_to_launch_limits(limits)  # a GPU profile (COURSE_GPU_PROFILE=t4) reports its own


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

    def blocks_per_sm(self, block: Any, shared_mem: int = 0) -> int:
        """Blocks of ``block`` threads (with ``shared_mem`` bytes of dynamic shared memory) that one SM
        holds at once: CUDA's occupancy calculator, which counts registers, shared memory and threads.
        GPU only: raises kernels.NoGPUError for a kernel of the CPU backend, which has no SMs."""
        if self.backend == "cpu":
            raise NoGPUError(f"{self.name}.blocks_per_sm asks CUDA's occupancy calculator, which needs a GPU; "
                             f"this kernel runs on the CPU backend, which has no SMs")
        import cupy

        x, y, z = launch_dims(block, "block", self.name)
        return int(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(self.raw.kernel.ptr, x * y * z,
                                                                            int(shared_mem)))

    def _fixed_attributes(self) -> tuple[int, int]:
        """(max threads per block, static shared bytes): fixed once compiled, so read once."""
        if self._fixed is None:
            attrs = self.raw.attributes
            self._fixed = (int(attrs["max_threads_per_block"]), int(attrs["shared_size_bytes"]))
        return self._fixed

    def __call__(self, grid: Any, block: Any, args: Any, *, shared_mem: int = 0, stream: Any = None,
                 time_limit: float | None = None) -> None:
        """Launch. ``time_limit`` (seconds) applies to the CPU backend only (kernels.cpu.set_time_limit)."""
        try:
            if self.backend == "cpu":  # kernels.cpu.RawKernel runs check_launch and convert_args itself
                self.raw(grid, block, args, shared_mem=shared_mem, time_limit=time_limit)
                return
            g, b, converted = self._checked_for_gpu(grid, block, args, shared_mem)
        except (LaunchConfigError, KernelArgumentError) as exc:
            raise exc.with_traceback(None) from None  # the student's call, not our internals
        if stream is None:
            self.raw(g, b, converted, shared_mem=int(shared_mem))
        else:
            with stream:
                self.raw(g, b, converted, shared_mem=int(shared_mem))

    def _checked_for_gpu(self, grid: Any, block: Any, args: Any,
                         shared_mem: int) -> tuple[tuple[int, int, int], tuple[int, int, int], tuple[Any, ...]]:
        """check_launch with this GPU's limits and this kernel's, then convert_args for CuPy arrays."""
        import cupy

        limits = device_limits(cupy.cuda.Device().id)
        max_threads, static = self._fixed_attributes()
        dynamic_limit = None
        if is_int(shared_mem) and shared_mem + static > STATIC_SMEM_LIMIT:
            dynamic_limit = self.max_dynamic_shared_memory  # a driver call, only when it matters
        g, b = check_launch(grid, block, shared_mem, limits, kernel=self.name, kernel_max_threads=max_threads,
                            static_shared=static, max_dynamic_shared=dynamic_limit)
        return g, b, convert_args(self.params, args, kernel=self.name, array_types=(cupy.ndarray,))


class Module:
    """CUDA C compiled as one module, shaped like ``cupy.RawModule``: its kernels and its globals.

    ``get_function(name)`` gives kernel ``name`` (a name expression such as ``"reduce<float, 256>"``
    for a template) as a ``Kernel`` that checks its launches; ``get_global(name)`` gives an array over
    the ``__device__`` or ``__constant__`` variable ``name``. ``raw`` is the backend's module: a
    ``cupy.RawModule``, or a ``kernels.cpu.RawModule`` when ``backend`` is "cpu".
    """

    def __init__(self, code: str, filename: str, options: Sequence[str], raw: Any, kernel_names: Sequence[str],
                 backend: str):
        self.code = code
        self.filename = filename
        self.options = tuple(options)
        self.raw = raw
        self.kernel_names = tuple(kernel_names)  # what get_function finds: names and name expressions
        self.backend = backend
        self.globals = module_globals(code)  # what get_global finds by its declaration: name -> ModuleGlobal
        self._kernels: dict[str, Kernel] = {}

    def __repr__(self) -> str:
        return (f"<Module {self.filename}: kernels {', '.join(self.kernel_names) or 'none'}; "
                f"globals {', '.join(self.globals) or 'none'}>")

    def get_function(self, name: str) -> Kernel:
        """Kernel ``name`` of this module, with the course's argument and launch checks (one per name)."""
        kernel = self._kernels.get(name)
        if kernel is None:
            kernel = self._kernels[name] = self._kernel(name)
        return kernel

    def _kernel(self, name: str) -> Kernel:
        base = parse_name_expression(name)[0]
        if name not in self.kernel_names:
            hint = ""
            if base in template_kernels(self.code):
                hint = (f" ({base} is a template kernel: name its instantiation when loading, e.g. "
                        f"load_module(..., name_expressions=['{base}<float>']))")
            raise KernelNotFoundError(f"{self.filename}: no kernel {name!r} in this module{hint}; kernels: "
                                      f"{', '.join(self.kernel_names) or 'none'}")
        try:
            params = parse_signature(self.code, name)
        except KernelNotFoundError as exc:
            raise KernelNotFoundError(f"{self.filename}: {exc}") from None
        return Kernel(base, self.code, params, self.raw.get_function(name), name if name != base else None,
                      backend=self.backend)

    def get_global(self, name: str, dtype: Any = None, shape: Any = None) -> Any:
        """An array over the ``__device__`` or ``__constant__`` variable ``name``, on the module's device.

        Assign to it to fill the variable from the host (``table[...] = values``), read it with
        ``.get()``. Its dtype and shape are the declaration's (a vector type such as ``float4`` adds a
        last axis of its width); pass ``dtype`` and ``shape`` for a type or bound the source does not
        spell out (a struct, a size from a header).
        """
        pointer = self._global_pointer(name)
        if pointer is None:
            raise GlobalNotFoundError(f"{self.filename}: no __device__ or __constant__ variable {name!r} in this "
                                      f"module; globals: {', '.join(self.globals) or 'none'}")
        dtype, shape = self._view(name, dtype, shape)
        return self._array_module().ndarray(shape, dtype, memptr=pointer)

    def _view(self, name: str, dtype: Any, shape: Any) -> tuple[np.dtype, tuple[int, ...]]:
        """The dtype and shape to see global ``name`` as: the declaration's, or those asked for if they fit."""
        declared = self.globals.get(name)
        declared_dtype = declared.dtype if declared else None
        if dtype is None and declared_dtype is None:
            what = f"a {declared.ctype}" if declared else "declared where this source does not show it"
            raise ValueError(f"{self.filename}: {name} is {what}; say how to view it, e.g. "
                             f"get_global({name!r}, dtype=np.uint8, shape=(nbytes,))")
        dtype = np.dtype(dtype if dtype is not None else declared_dtype)
        declared_shape = declared.shape(self.code, self.options) if declared else None
        declared_bytes = None
        if declared_shape is not None and declared_dtype is not None:
            declared_bytes = int(np.prod(declared_shape, dtype=np.int64)) * np.dtype(declared_dtype).itemsize
        if shape is None:
            if declared_shape is not None and dtype == declared_dtype:
                shape = declared_shape
            elif declared_bytes is not None and declared_bytes % dtype.itemsize == 0:
                shape = (declared_bytes // dtype.itemsize,)  # the same bytes, seen as another type
            else:
                raise ValueError(f"{self.filename}: the size of {name} is not a number this source spells out; "
                                 f"pass shape=, e.g. get_global({name!r}, shape=(256,))")
        shape = (int(shape),) if is_int(shape) else tuple(int(d) for d in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if declared_bytes is not None and nbytes > declared_bytes:  # on a GPU nothing else would catch it
            raise ValueError(f"{self.filename}: {name} has {declared_bytes} bytes; an array of shape {shape} "
                             f"and dtype {dtype} needs {nbytes}")
        return dtype, shape

    def _global_pointer(self, name: str) -> Any:
        """The backend's pointer to global ``name`` (CuPy's MemoryPointer or the CPU backend's), or None."""
        if self.backend == "cpu":
            try:
                return self.raw.get_global(name)
            except GlobalNotFoundError:
                return None
        import cupy

        try:
            return self.raw.get_global(name)
        except cupy.cuda.driver.CUDADriverError:  # CUDA_ERROR_NOT_FOUND
            return None

    def _array_module(self) -> Any:
        if self.backend == "cpu":
            from .cpu import xp  # here, not at the top: the CPU backend is Linux-only (fcntl)

            return xp
        import cupy

        return cupy


def load_module(path_or_code: str, options: Sequence[str] = (), name_expressions: Sequence[str] = ()) -> Module:
    """Compile CUDA C (once; later calls hit a cache) into a Module of kernels and globals.

    ``path_or_code`` is CUDA C, or a path ending in ``.cu`` under ``kernels/cuda/``. The module has
    every non-template kernel of the source; a template kernel's instantiations are those named in
    ``name_expressions`` (e.g. ``["reduce<float, 256>"]``) and on the source's ``// name_expressions:`` lines.
    """
    for what, value in (("options", options), ("name_expressions", name_expressions)):
        if isinstance(value, str):
            raise TypeError(f"load_module: {what} is a list of strings, e.g. {what}=[{value!r}], not one string")
    return _load_module(path_or_code, tuple(options), tuple(name_expressions), True, None, "load_module")


def load_kernel(code_or_path: str, name: str, *, options: Sequence[str] = (),
                name_expression: str | None = None) -> Kernel:
    """Compile (once; later calls hit a cache) and return kernel ``name``: ``load_module(...).get_function(name)``.

    ``code_or_path`` is CUDA C, or a path ending in ``.cu`` under ``kernels/cuda/``. Template kernels
    need ``name_expression`` (e.g. ``"reduce<float, 256>"``), or pass that as ``name``.
    """
    return _load_kernel(code_or_path, name, tuple(options), name_expression, None)


def _load_cpu(code: str, filename: str, name: str, options: tuple[str, ...],
              name_expression: str | None) -> Kernel:
    """load_kernel on the CPU backend whatever the current backend is (the grader's judged process).

    ``filename`` names CUDA C given as ``code`` in compiler messages.
    """
    return _load_kernel(code, name, options, name_expression, "cpu", filename)


def _load_kernel(code_or_path: str, name: str, options: tuple[str, ...], name_expression: str | None,
                 backend: str | None, filename: str | None = None) -> Kernel:
    backend = backend or backend_name()
    what = f"load_kernel({name!r})"
    if backend != "cpu":
        require_gpu(what)
    expression = name_expression or (name if "<" in name else None)
    base = parse_name_expression(expression)[0] if expression else name
    try:
        code = _code_of(code_or_path)
        if expression is None and base in template_kernels(code):
            raise ValueError(f"{base} is a template kernel; choose its template arguments with name_expression, "
                             f"e.g. load_kernel(..., {base!r}, name_expression='{base}<float>')")
        # One module per file serves all its kernels: every kernel at namespace scope is in it anyway
        # (a name the scan misses is asked for), and a template instantiation comes with the others
        # the file lists on its ``// name_expressions:`` lines.
        asked = (expression,) if expression else (() if base in global_kernels(code) else (base,))
        module = _load_module(code_or_path, options, asked, bool(expression), backend, what, filename)
        return module.get_function(expression or base)
    except (FileNotFoundError, ValueError) as exc:
        raise exc.with_traceback(None) from None  # one message, not a traceback through the package


def _is_path(path_or_code: str) -> bool:
    return path_or_code.endswith(".cu") and "\n" not in path_or_code


def _code_of(path_or_code: str) -> str:
    return source(path_or_code) if _is_path(path_or_code) else path_or_code  # by content: edits recompile


def _load_module(path_or_code: str, options: tuple[str, ...], name_expressions: tuple[str, ...], with_listed: bool,
                 backend: str | None, what: str, filename: str | None = None) -> Module:
    """The one compile path: which backend, which source, which entries; then the cached compile."""
    backend = backend or backend_name()
    if backend != "cpu":
        require_gpu(what)
    try:
        code = _code_of(path_or_code)
        filename = path_or_code if _is_path(path_or_code) else (filename or "kernel.cu")
        requested = tuple(dict.fromkeys(name_expressions))
        listed = name_expressions_in(code) if with_listed else ()
        together = (*listed, *(e for e in requested if e not in listed))  # one order: one cache entry
        all_options = (*DEFAULT_OPTIONS, *include_options(), *options)
        try:
            return _load(code, filename, all_options, together, backend)
        except CudaCompileError:
            if together == requested:
                raise
            return _load(code, filename, all_options, requested, backend)  # a listed one this backend refuses
    except (FileNotFoundError, ValueError, CudaCompileError) as exc:
        raise exc.with_traceback(None) from None  # one message, not a traceback through the package


@functools.lru_cache(maxsize=None)
def _load(code: str, filename: str, options: tuple[str, ...], name_expressions: tuple[str, ...],
          backend: str) -> Module:
    """Compile once per source, options, entries and backend (kernels.profile clears this on a switch)."""
    compile_step = _compile_cpu if backend == "cpu" else _compile_cupy
    raw, kernel_names = compile_step(code, filename, options, name_expressions)
    return Module(code, filename, options, raw, kernel_names, backend)


def _compile_cupy(code: str, filename: str, options: tuple[str, ...],
                  name_expressions: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
    """NVRTC through CuPy. Every kernel goes in as a name expression: that also finds C++ (not
    extern "C") kernels under their mangled names. Compiled now, not at the first launch."""
    import cupy
    from cupy.cuda.compiler import CompileException

    entries = tuple(dict.fromkeys([*name_expressions, *global_kernels(code)]))
    raw = cupy.RawModule(code=code, options=options, name_expressions=list(entries) or None)
    try:
        raw.compile()
    except CompileException as exc:
        raise CudaCompileError(f"{filename} does not compile:\n{_clean_log(str(exc), filename)}") from None
    return raw, entries


def _compile_cpu(code: str, filename: str, options: tuple[str, ...],
                 name_expressions: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
    """The system's C++ compiler through kernels.cpu, which adds every kernel at namespace scope itself."""
    from .cpu.raw import RawModule  # here, not at the top: the CPU backend is Linux-only (fcntl)

    raw = RawModule(code=code, options=options, name_expressions=list(name_expressions), filename=filename)
    return raw, tuple(raw.entries)


_TMP_PATH = re.compile(r"[^\s\"']*?([^/\s\"']+\.cu)\((\d+)\)")
_TMP_QUOTED = re.compile(r"\"[^\"\n]*\.cu\"")


def _clean_log(message: str, filename: str) -> str:
    """The compiler log with CuPy's temporary file path replaced by the source's name."""
    message = _TMP_PATH.sub(lambda m: f"{filename}({m.group(2)})", message)
    return _TMP_QUOTED.sub(f'"{filename}"', message).strip()


__all__ = ["load_module", "load_kernel", "Module", "Kernel", "ceil_div", "LaunchConfigError", "LaunchLimits",
           "check_launch", "device_limits", "DEFAULT_OPTIONS"]
