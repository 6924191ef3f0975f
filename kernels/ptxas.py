"""What ``ptxas -v`` reports for each kernel (registers, shared and constant memory, stack, spills), parsed.

NVRTC prints this report when a kernel is compiled with ``--ptxas-options=-v`` (``kernels.nvrtc``);
``kernels.resources`` chooses how to get one for a kernel. ``ResourceReport`` is one kernel's numbers.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Mapping

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


__all__ = ["ResourceReport", "parse_ptxas_log", "demangle"]
