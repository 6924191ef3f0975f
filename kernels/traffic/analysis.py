"""``kernels.analyze``: run one launch on the CPU backend and report its memory traffic.

It takes the kernels the chapters use (from ``kernels.load_kernel``, on a GPU or on the CPU backend,
or a ``kernels.cpu.RawKernel``) and always runs on the CPU backend, also when a GPU is present:
CuPy arrays are copied to the host first (results are then not copied back to the GPU).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..compile import DEFAULT_OPTIONS, LaunchConfigError, LaunchLimits, check_launch
from ..signature import KernelArgumentError, KernelNotFoundError, convert_args, parse_signature
from .record import DEFAULT_MAX_ACCESSES, KernelSource, record_launch
from .report import TrafficReport


def _source_name(code: str) -> str:
    """The path under kernels/cuda/ of the file whose text is ``code`` ("kernel.cu" if none is)."""
    from ..sources import CUDA_DIR, all_sources

    for path in all_sources():
        try:
            if path.suffix == ".cu" and path.read_text(encoding="utf-8") == code:
                return path.relative_to(CUDA_DIR).as_posix()
        except OSError:
            continue
    return "kernel.cu"


def source_of(code: str, name: str, filename: str | None = None, options: tuple[str, ...] = ()) -> KernelSource:
    """A kernel given by its CUDA C and name (or name expression), compiled with the course's options."""
    from ..sources import include_options

    try:
        params = parse_signature(code, name)
    except (KernelNotFoundError, ValueError, IndexError):
        params = None
    return KernelSource(code=code, filename=filename or _source_name(code),
                        options=(*DEFAULT_OPTIONS, *include_options(), *options), entries=(name,), name=name,
                        params=params)


def kernel_source(kernel: Any) -> KernelSource:
    """What the traced launch of ``kernel`` needs, whatever kind of kernel object it is."""
    from ..compile import Kernel
    from ..cpu.raw import RawKernel

    if isinstance(kernel, KernelSource):
        return kernel
    if isinstance(kernel, RawKernel):
        return KernelSource.of(kernel)
    if isinstance(kernel, Kernel):
        if kernel.backend == "cpu":
            return KernelSource.of(kernel.raw)
        return source_of(kernel.code, kernel.expression or kernel.name)  # a GPU kernel: no CPU build needed
    code, name = getattr(kernel, "code", None), getattr(kernel, "name", None)
    if isinstance(code, str) and isinstance(name, str):  # a cupy.RawKernel
        return source_of(code, name, options=tuple(getattr(kernel, "options", ()) or ()))
    raise TypeError(f"analyze needs a kernel from kernels.load_kernel (or a kernels.cpu.RawKernel), "
                    f"not {type(kernel).__name__}")


def _host(value: Any) -> Any:
    """NumPy arrays stay; CuPy arrays (anything with .get() and a shape) are copied to the host."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "get") and hasattr(value, "shape") and hasattr(value, "dtype"):
        return np.ascontiguousarray(value.get())
    return value


def analyze(kernel: Any, grid: Any, block: Any, args: Any, shared_mem: int = 0, *,
            max_accesses: int = DEFAULT_MAX_ACCESSES, time_limit: float | None = None,
            warp_fences: str = "syncwarp") -> TrafficReport:
    """Launch ``kernel`` once on the CPU backend, recording every global and shared memory access.

    ``grid``, ``block``, ``args`` and ``shared_mem`` are those of a normal launch; keep the launch
    small (the analysis records up to ``max_accesses`` accesses, four million by default).
    ``warp_fences`` decides what orders two lanes of one warp for the race check: "syncwarp" (only
    ``__syncwarp()``, as compute-sanitizer's racecheck) or "collectives" (any warp collective).
    Returns a ``TrafficReport``: print it, display it, or ask it for ``lines``, ``metrics()``,
    ``races`` and pictures (``plot_warp``, ``plot_banks``, ``plot_sectors``, ``plot_threads``).
    """
    from ..cpu.raw import MAX_SHARED_OPTIN, _launch_bounds

    source = kernel_source(kernel)
    name = source.kernel_name
    limits = LaunchLimits(max_shared_optin=MAX_SHARED_OPTIN, name="the CPU backend")
    try:
        g, b = check_launch(grid, block, shared_mem, limits, kernel=name,
                            kernel_max_threads=_launch_bounds(source.code, source.name) or 1024,
                            max_dynamic_shared=MAX_SHARED_OPTIN)
        if not isinstance(args, (tuple, list)):
            raise KernelArgumentError(f"{name}: pass the kernel arguments as a tuple, e.g. (x, y, n)")
        host = tuple(_host(a) for a in args)
        converted = (convert_args(source.params, host, kernel=name, array_types=(np.ndarray,))
                     if source.params is not None else host)
    except (LaunchConfigError, KernelArgumentError) as exc:
        raise exc.with_traceback(None) from None
    if warp_fences not in ("syncwarp", "collectives"):
        raise ValueError(f"warp_fences must be 'syncwarp' or 'collectives', not {warp_fences!r}")
    recording = record_launch(source, g, b, converted, int(shared_mem), time_limit=time_limit,
                              max_accesses=max_accesses)
    return TrafficReport(recording, warp_fences=warp_fences)


__all__ = ["analyze", "kernel_source", "source_of"]
