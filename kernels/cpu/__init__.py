"""The CPU execution backend: the course's CUDA C kernels, compiled by the system's C++ compiler.

The same source that CuPy compiles for a GPU is compiled here with g++ or clang++ and a small runtime
(``runtime/``): every CUDA thread is a fiber, barriers and warp collectives switch between them, and
every launch runs in a child process so that out-of-bounds accesses, deadlocks, endless loops and
crashes come back as a ``KernelFault`` naming the kernel, block, thread and line. Results are those
of the CUDA semantics; timings are not those of any GPU. A second, traced build of a source records
every memory access of a launch (``trace``, ``runtime/src/trace.cpp``); ``kernels.traffic`` turns
that into the traffic a GPU would see.

Public names: ``RawKernel``, ``RawModule`` (drop-ins for CuPy's), ``xp`` (the array module),
``KernelFault`` and its subclasses, ``set_time_limit``/``time_limit``, ``CompileError``,
``UnsupportedFeatureError``.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RawKernel": "raw", "RawModule": "raw", "MemoryPointer": "raw",
    "set_time_limit": "launch", "time_limit": "launch",
    "CompileError": "compile", "UnsupportedFeatureError": "compile",
    "KernelFault": "faults", "OutOfBoundsAccess": "faults", "InvalidAddress": "faults",
    "MisalignedAccess": "faults",
    "StackOverflow": "faults", "BarrierDeadlock": "faults", "WarpCollectiveError": "faults",
    "KernelTimeout": "faults", "DeviceAssertion": "faults", "KernelTrap": "faults", "KernelCrash": "faults",
}

__all__ = sorted([*_EXPORTS, "xp"])


def __getattr__(name: str) -> Any:
    if name == "xp":
        return importlib.import_module(f"{__name__}.xp")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernels.cpu' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
