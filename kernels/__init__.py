"""The course's Python package: compile, launch, check, time and sweep CUDA C kernels from Python.

Names are imported lazily, so ``import kernels`` is cheap and works on machines without CuPy or a GPU;
a name's module is loaded the first time the name is used.
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

_EXPORTS: dict[str, str] = {
    # backend switch point
    "backend_name": "backend", "gpu_available": "backend", "array_module": "backend",
    "require_gpu": "backend", "NoGPUError": "backend",
    # one chapter cell for both backends
    "on_gpu": "portable", "problem_size": "portable", "gpu_only": "portable",
    # CUDA C sources
    "source": "sources", "show_source": "sources", "all_sources": "sources",
    # compile and launch
    "load_kernel": "compile", "load_module": "compile", "Kernel": "compile", "Module": "compile",
    "ceil_div": "launch",
    "parse_signature": "signature", "KernelArgumentError": "signature",
    "compile_cuda": "nvrtc", "CudaCompileError": "nvrtc",
    "resource_report": "resources", "ResourceReport": "resources",
    # the device and its ceilings
    "device_info": "device", "provenance": "device",
    "use_profile": "profile", "gpu_profile": "profile",  # run a big GPU as a T4 (COURSE_GPU_PROFILE)
    "benchmark": "timing", "Timing": "timing", "gbps": "timing", "tflops": "timing",
    "ceilings": "ceilings", "Ceilings": "ceilings",
    "roofline_plot": "roofline", "attainable_tflops": "roofline", "ridge_point": "roofline",
    # correctness
    "check": "check", "rand": "check", "CheckReport": "check",
    # interactive figures
    "Explorer": "explorer", "Sweep": "sweep", "display_live": "sweep",
    "occupancy": "occupancy", "GpuLimits": "occupancy",
    "occupancy_explorer": "occupancy", "occupancy_panel": "occupancy",
    # memory traffic recorded on the CPU backend (sectors, bank conflicts, races)
    "analyze": "traffic.analysis",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernels' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


class _Package(ModuleType):
    """The package object, keeping ``kernels.ceilings`` (and ``check``, ``occupancy``) the function.

    Importing a submodule (``from kernels.ceilings import Ceilings``) makes Python bind the submodule
    as an attribute of its package, which would replace the exported function of the same name and
    make a later ``kernels.ceilings()`` fail with "'module' object is not callable".
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if (isinstance(value, ModuleType) and _EXPORTS.get(name) == name
                and value.__name__ == f"{__name__}.{name}"):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
