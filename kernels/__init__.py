"""The course's Python package: compile, launch, check, time and sweep CUDA C kernels from Python.

Names are imported lazily, so ``import kernels`` is cheap and works on machines without CuPy or a GPU;
a name's module is loaded the first time the name is used.

The chapters' own modules live in ``kernels/chapters/<chapter>/`` and keep the flat names that the
executed notebooks import (``from kernels import scan``): see ``LEGACY_NAMES`` below.
"""
from __future__ import annotations

import importlib
import importlib.machinery  # loaded by the interpreter already (importlib.abc would cost ~9 ms)
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

#: The old flat names of the chapters' modules -> their modules in kernels/chapters/. The chapters'
#: code cells (hashed, executed on a GPU) import them so: ``from kernels import scan``, ``import
#: kernels.hopper_bench``, ``from kernels.coalescing import strip_launch``. ``__getattr__`` below
#: (``kernels.scan``) and ``_LegacyNames`` on ``sys.meta_path`` (``import kernels.scan``) give the new
#: module itself, loaded on first use: ``sys.modules["kernels.scan"] is
#: sys.modules["kernels.chapters.scan"]``, so a monkeypatch through either name reaches both. New code
#: uses the new names, and so does ``python -m`` (``python -m kernels.chapters.hopper.bench``).
LEGACY_NAMES: dict[str, str] = {
    "asynchrony": "chapters.asynchrony",
    "coalescing": "chapters.coalescing",
    "diagrams_coalescing": "chapters.coalescing.diagrams",
    "diagrams_dram_bursts": "chapters.dram_bursts.diagrams",
    "gemm": "chapters.gemm",
    "diagrams": "chapters.gpu_architecture.diagrams",
    "hopper": "chapters.hopper",
    "hopper_bench": "chapters.hopper.bench",
    "hopper_recorded": "chapters.hopper.recorded",
    "diagrams_hopper": "chapters.hopper.diagrams",
    "memory_hierarchy": "chapters.memory_hierarchy",
    "reduce": "chapters.reduce",
    "scan": "chapters.scan",
    "diagrams_simt_and_warps": "chapters.simt_and_warps.diagrams",
    "softmax": "chapters.softmax",
}


class _LegacyNames:
    """Meta path finder and loader (importlib's protocol) of ``kernels.<old name>``: ``create_module``
    imports and returns the new module, and ``exec_module`` runs nothing, so no second copy exists."""

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> Any:
        package, _, name = fullname.rpartition(".")
        if package == __name__ and name in LEGACY_NAMES:
            return importlib.machinery.ModuleSpec(fullname, _LegacyNames)
        return None

    @staticmethod
    def create_module(spec: Any) -> ModuleType:
        module = importlib.import_module(f"{__name__}.{LEGACY_NAMES[spec.name.rpartition('.')[2]]}")
        spec.loader_state = module.__spec__  # the import system sets module.__spec__ = spec next
        return module

    @staticmethod
    def exec_module(module: ModuleType) -> None:
        module.__spec__ = module.__spec__.loader_state  # the module's own spec back


# First on the path, before any finder that searches a folder (an editable install's) and could find
# a stale file of an old name; once, also when the package is imported again.
sys.meta_path[:] = [_LegacyNames, *(f for f in sys.meta_path if getattr(f, "__qualname__", "") != "_LegacyNames")]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None and name in LEGACY_NAMES:  # kernels.scan: the module kernels.chapters.scan
        return importlib.import_module(f"{__name__}.{name}")
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
