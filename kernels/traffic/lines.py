"""Where a recorded access comes from: the return address of a hook, turned into the reader's source line.

A traced library is built with ``-g``, so ``addr2line -i`` gives, for every address, the chain of
inlined functions down to the reader's source (``__ldg`` inside ``cuda_cpu.h`` is reported at the
line of the kernel that called it). Each distinct address is looked up once per library, in one
batch. The library's symbol table (``nm``) also names its variables: the ``__shared__`` arrays (to
say ``tile`` rather than an address) and the ``__constant__`` and ``__device__`` variables.
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..cpu import toolchain
from ..cpu.faults import is_reader_file
from ..signature import find_functions

_DISPLAY = re.compile(r"^(?:.*/cudacpu-[^/]+/|\./)")


@dataclass(frozen=True, order=True)
class Site:
    """A place in the reader's source: file, line and the function the line belongs to."""

    file: str
    line: int
    function: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where} ({self.function})" if self.function else where

    @property
    def short(self) -> str:
        """``line 12`` in a kernel's own source, ``gemm_common.cuh:18`` in a header it includes."""
        if not self.line:
            return "unknown line"
        return f"line {self.line}" if self.file.endswith(".cu") else f"{Path(self.file).name}:{self.line}"


UNKNOWN = Site("?", 0, "")

_SITES: dict[str, dict[int, Site]] = {}  # library -> return address -> site


def sites_for(library: Path, addresses: Iterable[int], code: str = "", filename: str = "") -> dict[int, Site]:
    """The reader's source site for each library-relative return address (cached per library).

    ``code`` and ``filename`` (the main source) name the function each of its lines belongs to.
    """
    known = _SITES.setdefault(str(library), {})
    addresses = [int(a) for a in addresses]
    wanted = sorted(set(addresses) - set(known))
    tool = toolchain.addr2line()
    for start in range(0, len(wanted), 2000):
        chunk = wanted[start:start + 2000]
        out = ""
        if tool is not None:
            # a return address points just after the call: one byte back is inside it
            try:
                out = subprocess.run([tool, "-e", str(library), "-i", "-a", *[hex(a - 1) for a in chunk]],
                                     capture_output=True, text=True, timeout=120).stdout
            except (OSError, subprocess.TimeoutExpired):
                out = ""
        known.update(_parse(out, chunk))
    functions = _function_lines(code) if code else []
    found = {}
    for a in addresses:
        site = known.get(a, UNKNOWN)
        if site.file == filename and functions:
            site = Site(site.file, site.line, next((f for lo, hi, f in functions if lo <= site.line <= hi), ""))
        found[a] = site
    return found


def _parse(out: str, chunk: list[int]) -> dict[int, Site]:
    """addr2line -a -i output: per address a 0x line, then file:line rows, innermost inlined frame first."""
    blocks: list[list[str]] = []
    for row in out.splitlines():
        if row.startswith("0x"):
            blocks.append([])
        elif blocks:
            blocks[-1].append(row.strip())
    found: dict[int, Site] = {}
    for address, rows in zip(chunk, blocks):
        site = UNKNOWN
        for where in rows:
            m = re.match(r"^(.*):(\d+)(?: \(discriminator \d+\))?$", where)
            if m and is_reader_file(m.group(1)) and int(m.group(2)) > 0:
                site = Site(_shown(m.group(1)), int(m.group(2)))
                break
        found[address] = site
    for address in chunk:
        found.setdefault(address, UNKNOWN)
    return found


def _shown(path: str) -> str:
    """A file as the course names it: ``gemm/gemm_common.cuh`` for a file under kernels/cuda/."""
    from ..sources import CUDA_DIR

    path = _DISPLAY.sub("", path)
    prefix = str(CUDA_DIR) + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


@functools.lru_cache(maxsize=64)
def _function_lines(code: str) -> list[tuple[int, int, str]]:
    """(first line, last line, name) of every __global__ and __device__ function defined in ``code``."""
    spans = [f for f in find_functions(code, ("__global__", "__device__")) if f.is_definition]
    return [(code.count("\n", 0, f.start) + 1, code.count("\n", 0, f.end) + 1, f.name) for f in spans]


@dataclass(frozen=True)
class Variable:
    """A variable of a kernel library: its (demangled) name, library-relative address and size."""

    name: str
    offset: int
    size: int


@functools.lru_cache(maxsize=64)
def variables(library: Path) -> tuple[Variable, ...]:
    """Data objects of the library (``nm``): __shared__, __constant__ and __device__ variables among them."""
    nm = shutil.which("nm") or shutil.which("llvm-nm")
    if nm is None:
        return ()
    try:
        out = subprocess.run([nm, "-S", "-C", "--defined-only", str(library)], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    found = []
    for row in out.splitlines():
        parts = row.split(maxsplit=3)
        if len(parts) != 4 or parts[2] not in "bBdDgGsSuvV":
            continue
        name = parts[3]
        if name.startswith(("cudacpu_", "__", "_GLOBAL_", "guard variable", "completed.", "_DYNAMIC")):
            continue
        found.append(Variable(name, int(parts[0], 16), int(parts[1], 16)))
    return tuple(found)
