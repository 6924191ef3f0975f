"""How many registers, how much shared memory and whether a kernel spills, as ptxas reports it.

Occupancy and spilling explain many of the course's speed differences, and ptxas prints exactly these
numbers when asked (``-v``). ``resource_report`` compiles with NVRTC, which needs no GPU; on a machine
with a GPU but without the NVRTC bindings it falls back to the attributes CuPy reads from the driver,
and with neither it says so in one line and returns a report whose numbers are unknown (None).
"""
from __future__ import annotations

import functools
from typing import Sequence

from . import backend, nvrtc  # modules, not names: tests swap backend.gpu_available, nvrtc.nvrtc_available ...
from . import compile as kernel_compile
from .portable import missing
from .profile import compile_arch
from .ptxas import ResourceReport, demangle, parse_ptxas_log  # noqa: F401  (exported here too)
from .signature import _find_kernel, template_kernels
from .sources import source


def default_arch() -> str:
    """The GPU's ``sm_XX`` when there is one, else sm_90 (the H100 the course's numbers come from)."""
    if backend.gpu_available():
        import cupy

        return compile_arch(f"sm_{cupy.cuda.Device().compute_capability}")  # sm_75 under the T4 profile
    return "sm_90"


def resource_report(code_or_path: str, name: str, arch: str | None = None, options: Sequence[str] = (),
                    name_expression: str | None = None) -> ResourceReport:
    """Registers, shared memory, stack and spills of kernel ``name`` as compiled for ``arch``.

    ``code_or_path`` is CUDA C, or a ``chapter/kernel.cu`` path under ``kernels/cuda/``.
    """
    report = _report(code_or_path, name, arch, tuple(options), name_expression)
    if report.origin == NO_COMPILER:  # said in every cell that asks, also when the report is cached
        missing("NVRTC (for ptxas's report of registers, shared memory and spills)", nvrtc.NVRTC_INSTALL,
                "the numbers show as unknown, and the course website shows them from its GPU run")
    return report


@functools.lru_cache(maxsize=256)
def _report(code_or_path: str, name: str, arch: str | None, options: tuple[str, ...],
            name_expression: str | None) -> ResourceReport:
    is_path = code_or_path.endswith(".cu")
    code = source(code_or_path) if is_path else code_or_path
    filename = code_or_path if is_path else "kernel.cu"
    expression = name_expression or (name if "<" in name else None)
    key = expression or name
    _find_kernel(code, key.split("<")[0].strip())  # a clear error when there is no such kernel
    if not expression and name in template_kernels(code):
        raise ValueError(f"{name} is a template kernel: pass name_expression, e.g. '{name}<float>'")
    if nvrtc.nvrtc_available():
        result = nvrtc.compile_cuda(code, arch or default_arch(), options,
                              [expression] if expression else [], filename).raise_for_errors()
        if key in result.resources:
            return result.resources[key]
        if not backend.gpu_available():
            raise ValueError(f"ptxas reported no kernel {key!r} (it reported "
                             f"{', '.join(result.resources) or 'nothing'})")
        # Some NVRTC versions print no ptxas report for a program; the driver still knows.
    if backend.gpu_available():
        return _from_cupy(code_or_path, name, options, expression, arch)
    return _unknown(key, arch or default_arch())


#: The ``origin`` of a report made with neither NVRTC nor a GPU: every number is unknown (None).
NO_COMPILER = "no compiler report: NVRTC is not installed"


def _unknown(kernel: str, arch: str) -> ResourceReport:
    """No NVRTC and no GPU (a plain Jupyter without the ``[cpu]`` extra): a report whose numbers are
    all unknown, which prints as such and which the occupancy calculator and the sweeps accept
    (``resource_report`` says in one line what is missing)."""
    return ResourceReport(kernel=kernel, arch=arch, origin=NO_COMPILER)


def _from_cupy(code_or_path: str, name: str, options: tuple[str, ...], expression: str | None,
               arch: str | None) -> ResourceReport:
    """Fallback without NVRTC bindings: the driver's view of the compiled kernel (no spill counts)."""
    kernel = kernel_compile.load_kernel(code_or_path, name, options=options, name_expression=expression)
    attrs = kernel.attributes
    gpu_arch = default_arch()
    note = "Spills are unknown without the NVRTC bindings (pip install cuda-bindings); the stack " \
           "frame is the local memory per thread the driver reports."
    if arch and arch != gpu_arch:
        note += f" Compiled for this GPU ({gpu_arch}), not {arch}."
    return ResourceReport(kernel=expression or name, arch=gpu_arch, registers=attrs.get("num_regs"),
                          shared_bytes=attrs.get("shared_size_bytes"),
                          constant_bytes=attrs.get("const_size_bytes"),
                          stack_frame_bytes=attrs.get("local_size_bytes"),
                          origin="CuPy kernel attributes", note=note)


__all__ = ["ResourceReport", "parse_ptxas_log", "resource_report", "demangle", "default_arch"]
