"""How many registers, how much shared memory and whether a kernel spills, as ptxas reports it.

Occupancy and spilling explain many of the course's speed differences, and ptxas prints exactly these
numbers when asked (``-v``). ``resource_report`` compiles with NVRTC, which needs no GPU; on a machine
with a GPU but without the NVRTC bindings it falls back to the attributes CuPy reads from the driver,
and with neither it says so in one line and returns a report whose numbers are unknown (None).
"""
from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")


@dataclass
class ResourceReport:
    """One kernel's resource use for one architecture; None means "not known from this source"."""

    kernel: str
    arch: str
    registers: int | None = None
    shared_bytes: int | None = None  # static shared memory per block
    constant_bytes: int | None = None  # all constant banks (parameters included)
    stack_frame_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    barriers: int | None = None
    mangled: str = ""
    origin: str = "ptxas -v"
    note: str = ""

    @property
    def spills(self) -> bool | None:
        """True when ptxas had to spill registers to local memory (None if unknown)."""
        if self.spill_store_bytes is None or self.spill_load_bytes is None:
            return None
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0

    def _rows(self) -> list[tuple[str, str]]:
        def b(v: int | None) -> str:
            return "unknown" if v is None else f"{v} B"

        spill = ("unknown" if self.spills is None else
                 f"{self.spill_store_bytes} B stored, {self.spill_load_bytes} B loaded")
        return [("registers per thread", "unknown" if self.registers is None else str(self.registers)),
                ("static shared memory per block", b(self.shared_bytes)),
                ("constant memory", b(self.constant_bytes)),
                ("stack frame (local memory)", b(self.stack_frame_bytes)),
                ("register spills", spill),
                ("barriers", "unknown" if self.barriers is None else str(self.barriers))]

    def __str__(self) -> str:
        head = f"{self.kernel} ({self.arch}, from {self.origin})"
        body = "; ".join(f"{k}: {v}" for k, v in self._rows())
        return f"{head}: {body}" + (f". {self.note}" if self.note else "")

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td style='text-align:left'>{html.escape(k)}</td>"
                       f"<td style='text-align:right'>{html.escape(v)}</td></tr>" for k, v in self._rows())
        note = f"<p><em>{html.escape(self.note)}</em></p>" if self.note else ""
        return (f"<table><caption><code>{html.escape(self.kernel)}</code> on {html.escape(self.arch)} "
                f"({html.escape(self.origin)})</caption>{rows}</table>{note}")


def demangle(mangled: str) -> str:
    """The plain name of an Itanium-mangled function (``_Z3fooPf`` -> ``foo``); others unchanged."""
    if not mangled.startswith("_Z"):
        return mangled
    rest = mangled[2:]
    nested = rest.startswith("N")
    rest = rest[1:] if nested else rest
    parts = []
    while rest and rest[0].isdigit():
        digits = re.match(r"\d+", rest).group()  # type: ignore[union-attr]
        length = int(digits)
        parts.append(rest[len(digits):len(digits) + length])
        rest = rest[len(digits) + length:]
        if not nested:
            break
    return "::".join(parts) if parts else mangled


def parse_ptxas_log(log: str, names: Mapping[str, str] | None = None) -> dict[str, ResourceReport]:
    """Every entry function in a ``ptxas -v`` log, keyed by a readable name.

    ``names`` maps mangled names to the names to use (NVRTC's lowered names of name expressions);
    other names are demangled, and a name that would repeat keeps its mangled spelling.
    """
    names = dict(names or {})
    entries: dict[str, ResourceReport] = {}
    props: dict[str, tuple[int, int, int]] = {}
    current: str | None = None
    target: str | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current, target = m.group(1), None
            entries[current] = ResourceReport(kernel=current, arch=m.group(2), mangled=current)
        elif m := _PROPS.search(line):
            target = m.group(1)
        elif m := _STACK.search(line):
            if target is not None:
                props[target] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := _USED.search(line)) and current is not None:
            r = entries[current]
            r.registers = int(m.group(1))
            r.barriers = int(b.group(1)) if (b := _BARRIERS.search(line)) else 0
            r.shared_bytes = int(s.group(1)) if (s := _SMEM.search(line)) else 0
            r.constant_bytes = sum(int(c) for c in _CMEM.findall(line))
    result: dict[str, ResourceReport] = {}
    for mangled, report in entries.items():
        stack, stores, loads = props.get(mangled, (0, 0, 0))
        report.stack_frame_bytes, report.spill_store_bytes, report.spill_load_bytes = stack, stores, loads
        key = names.get(mangled) or demangle(mangled)
        if key in result:
            key = mangled
        report.kernel = key
        result[key] = report
    return result


def default_arch() -> str:
    """The GPU's ``sm_XX`` when there is one, else sm_90 (the H100 the course's numbers come from)."""
    from .backend import gpu_available

    if gpu_available():
        import cupy

        return f"sm_{cupy.cuda.Device().compute_capability}"
    return "sm_90"


def resource_report(code_or_path: str, name: str, arch: str | None = None, options: Sequence[str] = (),
                    name_expression: str | None = None) -> ResourceReport:
    """Registers, shared memory, stack and spills of kernel ``name`` as compiled for ``arch``.

    ``code_or_path`` is CUDA C, or a ``chapter/kernel.cu`` path under ``kernels/cuda/``.
    """
    report = _report(code_or_path, name, arch, tuple(options), name_expression)
    if report.origin == NO_COMPILER:  # said in every cell that asks, also when the report is cached
        from .nvrtc import NVRTC_INSTALL
        from .portable import missing

        missing("NVRTC (for ptxas's report of registers, shared memory and spills)", NVRTC_INSTALL,
                "the numbers show as unknown, and the course website shows them from its GPU run")
    return report


@functools.lru_cache(maxsize=256)
def _report(code_or_path: str, name: str, arch: str | None, options: tuple[str, ...],
            name_expression: str | None) -> ResourceReport:
    from .backend import gpu_available
    from .nvrtc import compile_cuda, nvrtc_available
    from .signature import _find_kernel, template_kernels
    from .sources import source

    is_path = code_or_path.endswith(".cu")
    code = source(code_or_path) if is_path else code_or_path
    filename = code_or_path if is_path else "kernel.cu"
    expression = name_expression or (name if "<" in name else None)
    key = expression or name
    _find_kernel(code, key.split("<")[0].strip())  # a clear error when there is no such kernel
    if not expression and name in template_kernels(code):
        raise ValueError(f"{name} is a template kernel: pass name_expression, e.g. '{name}<float>'")
    if nvrtc_available():
        result = compile_cuda(code, arch or default_arch(), options,
                              [expression] if expression else [], filename).raise_for_errors()
        if key in result.resources:
            return result.resources[key]
        if not gpu_available():
            raise ValueError(f"ptxas reported no kernel {key!r} (it reported "
                             f"{', '.join(result.resources) or 'nothing'})")
        # Some NVRTC versions print no ptxas report for a program; the driver still knows.
    if gpu_available():
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
    from .compile import load_kernel

    kernel = load_kernel(code_or_path, name, options=options, name_expression=expression)
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
