"""Record every global and shared memory access of one launch on the CPU backend.

The kernel's traced build (``kernels.cpu.compile_module(..., traced=True)``, cached apart from the
normal one) runs the grid in the usual child process; each load and store calls a runtime hook that
appends (address, size, read or write, thread, block, return address, barrier and warp epochs) to
a shared buffer. The result is a ``Recording``: the accesses as a NumPy structured array, what each
address range is (argument arrays, ``__constant__`` and ``__device__`` variables, shared arrays) and
the source line of every return address.

``__constant__`` and ``__device__`` variables live in the kernel library, and the traced build is a
second library: their contents are copied into it before the launch and back afterwards, so a
traced launch computes and leaves behind exactly what a normal launch would.
"""
from __future__ import annotations

import ctypes
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from ..cpu import abi
from ..cpu import compile as cpu_compile
from ..cpu import launch as cpu_launch
from ..cpu import trace as cpu_trace
from ..cpu.trace import TraceBuffer, TracedRange
from ..signature import Param, mask_code, parse_name_expression
from .lines import Site, Variable, sites_for, variables

DEFAULT_MAX_ACCESSES = cpu_trace.DEFAULT_CAPACITY


class TraceTooLarge(RuntimeError):
    """The launch made more memory accesses than the analysis records; analyse a smaller launch."""


@dataclass(frozen=True)
class SharedSymbol:
    """A __shared__ array (or the dynamic shared memory) and where it lies during the launch."""

    name: str
    lo: int
    hi: int


@dataclass
class Recording:
    """Every recorded access of one launch, with what is needed to name addresses and lines."""

    kernel: str
    filename: str
    code: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    accesses: np.ndarray  # abi.TRACE_RECORD, in the order the CPU ran them
    ranges: list[TracedRange]  # record["range"] indexes this list (255: shared memory)
    sites: dict[int, Site]  # record["pc"] -> source site
    shared: list[SharedSymbol] = field(default_factory=list)
    shapes: dict[int, tuple[int, ...]] = field(default_factory=dict)  # argument index -> array shape
    local_accesses: int = 0
    unclassified_accesses: int = 0
    _gpu: np.ndarray | None = field(default=None, repr=False)

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def thread_index(self, linear: int) -> tuple[int, int, int]:
        bx, by, _ = self.block
        return int(linear % bx), int(linear // bx % by), int(linear // (bx * by))

    def block_index(self, linear: int) -> tuple[int, int, int]:
        gx, gy, _ = self.grid
        return int(linear % gx), int(linear // gx % gy), int(linear // (gx * gy))

    def site(self, pc: int) -> Site:
        return self.sites[int(pc)]

    def gpu_addresses(self) -> np.ndarray:
        """The address of every access as a GPU would see it, for sectors and lines.

        cudaMalloc (and CuPy) start every allocation at a multiple of 256 bytes; the CPU backend's
        arrays start at a multiple of 16. So each global or constant address is taken relative to
        the start of its allocation (a view keeps its offset into the array it views) and moved to
        a 256-byte aligned base of its own. Shared-memory addresses are kept: banks only depend on
        differences of word addresses.
        """
        if self._gpu is None:
            acc = self.accesses
            addr = acc["addr"].astype(np.int64)
            bases = sorted({r.allocation for r in self.ranges})
            slot = {b: i for i, b in enumerate(bases)}
            start = np.array([r.allocation for r in self.ranges] + [0], dtype=np.int64)
            moved = np.array([(slot[r.allocation] + 1) << 40 for r in self.ranges] + [0], dtype=np.int64)
            rng = np.minimum(acc["range"].astype(np.int64), len(self.ranges))
            ranged = (acc["space"] != abi.SPACE_SHARED) & (rng < len(self.ranges))
            self._gpu = np.where(ranged, addr - start[rng] + moved[rng], addr)
        return self._gpu

    def shared_name(self, address: int) -> tuple[str, int]:
        """(name of the shared array, byte offset in it) for a shared-memory address."""
        for s in self.shared:
            if s.lo <= address < s.hi:
                return s.name, address - s.lo
        return "shared memory", 0

    def describe_address(self, address: int, space: int, range_index: int, size: int = 0) -> str:
        """``x[12]`` for an argument, ``tile[9]`` for shared memory (elements of ``size`` bytes)."""
        if space == abi.SPACE_SHARED:
            name, offset = self.shared_name(address)
            return f"{name}[{offset // size}]" if size and offset % size == 0 else f"{name}[+{offset} bytes]"
        if 0 <= range_index < len(self.ranges):
            r = self.ranges[range_index]
            return f"{r.name}[{(address - r.lo) // max(r.itemsize, 1)}]"
        return hex(address)


# --------------------------------------------------------------------------------------------------
# The traced build and its variables
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelSource:
    """What a traced launch needs: the source, its compiler options, the module's entry points (one
    traced build serves them all), the entry to launch and its parameters, and the normal build if
    there is one (its __constant__ and __device__ variables are mirrored into the traced build)."""

    code: str
    filename: str
    options: tuple[str, ...]
    entries: tuple[str, ...]
    name: str
    params: list[Param] | None
    plain: cpu_compile.CompiledModule | None = None

    @property
    def kernel_name(self) -> str:
        return parse_name_expression(self.name)[0]

    @classmethod
    def of(cls, raw: Any) -> "KernelSource":
        """The source of a ``kernels.cpu.RawKernel``."""
        module = raw.module
        return cls(code=module.code, filename=module.filename, options=tuple(module.options),
                   entries=tuple(module._module.entries), name=raw.name, params=raw.params, plain=module._module)


def traced_module(source: KernelSource) -> cpu_compile.CompiledModule:
    """The traced build of a kernel's module (compiled once, then cached on disk)."""
    entries = list(dict.fromkeys([*source.entries, source.name]))
    return cpu_compile.compile_module(source.code, entries, source.options, source.filename, traced=True)


_CONSTANT = re.compile(r"\b__constant__\b[^;{}()=]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*(?:=|;|\{)")
_SHARED = re.compile(r"\b__shared__\b[^;{}()=]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*(?:=|;|\{)")
_EXTERN_SHARED = re.compile(r"\bextern\s+__shared__\b[^;]*?\b([A-Za-z_]\w*)\s*\[\s*\]\s*;")


def constant_names(code: str) -> set[str]:
    """Names the source declares ``__constant__`` (they are read through the constant cache on a GPU)."""
    return set(_CONSTANT.findall(mask_code(code)))


def shared_names(code: str) -> set[str]:
    """Names the source declares ``__shared__`` (static shared arrays)."""
    return set(_SHARED.findall(mask_code(code)))


def _in_shared_section(module: cpu_compile.CompiledModule, address: int) -> bool:
    lay = module.layout
    return bool(lay.shared_begin) and lay.shared_begin <= address < lay.shared_end


def _is_shared(module: cpu_compile.CompiledModule, v: Variable, names: set[str]) -> bool:
    """A __shared__ array: in the shared section, or (inside a template function, where the compiler
    ignores the section) a function-local static of a name the source declares __shared__."""
    if _in_shared_section(module, module.layout.base + v.offset):
        return True
    return "::" in v.name and ")" in v.name and v.name.split("::")[-1] in names


def library_ranges(module: cpu_compile.CompiledModule, code: str) -> list[TracedRange]:
    """__constant__ variables (constant memory) and the other variables of the library (global memory)."""
    constants, shared = constant_names(code), shared_names(code)
    ranges: list[TracedRange] = []
    for v in variables(module.path):
        address = module.layout.base + v.offset
        if v.size <= 0 or _in_shared_section(module, address):
            continue  # the runtime knows the shared section itself
        short = v.name.split("::")[-1]
        if _is_shared(module, v, shared):
            space = abi.SPACE_SHARED
        else:
            space = abi.SPACE_CONSTANT if short in constants else abi.SPACE_GLOBAL
        ranges.append(TracedRange(short if space != abi.SPACE_GLOBAL else v.name, space, address,
                                  address + v.size, 1))
    ranges.sort(key=lambda r: r.space == abi.SPACE_GLOBAL)  # the more specific first
    return ranges[:abi.TRACE_MAX_RANGES - 24]  # leave room for the arguments


def shared_symbols(module: cpu_compile.CompiledModule, code: str) -> list[SharedSymbol]:
    """The static __shared__ arrays of the traced library, and the dynamic shared memory."""
    found = []
    names = shared_names(code)
    for v in variables(module.path):
        address = module.layout.base + v.offset
        if v.size > 0 and _is_shared(module, v, names):
            found.append(SharedSymbol(v.name.split("::")[-1], address, address + v.size))
    names = _EXTERN_SHARED.findall(mask_code(code))
    dynamic = cpu_launch.launcher().dynamic_base
    if dynamic:
        label = " / ".join(dict.fromkeys(names)) or "extern __shared__"
        found.append(SharedSymbol(label, dynamic, dynamic + cpu_launch.launcher().dynamic_len))
    return sorted(found, key=lambda s: s.lo)


def _matching_variables(a: cpu_compile.CompiledModule, b: cpu_compile.CompiledModule
                        ) -> list[tuple[int, int, int]]:
    """(address in a, address in b, size) of the variables both libraries have (same name and size)."""
    theirs = {v.name: v for v in variables(b.path)}
    pairs = []
    for v in variables(a.path):
        w = theirs.get(v.name)
        address = a.layout.base + v.offset
        if w is None or w.size != v.size or v.size <= 0 or _in_shared_section(a, address):
            continue
        pairs.append((address, b.layout.base + w.offset, v.size))
    return pairs


def _copy_variables(pairs: list[tuple[int, int, int]], forward: bool) -> None:
    for a, b, size in pairs:
        if forward:
            ctypes.memmove(b, a, size)
        else:
            ctypes.memmove(a, b, size)


# --------------------------------------------------------------------------------------------------
# Recording one launch
# --------------------------------------------------------------------------------------------------

def record_launch(source: KernelSource, grid: tuple[int, int, int], block: tuple[int, int, int],
                  args: Sequence[Any], shared_mem: int = 0, *, time_limit: float | None = None,
                  max_accesses: int = DEFAULT_MAX_ACCESSES) -> Recording:
    """Run the traced build of ``source`` once with converted ``args`` and record its accesses.

    Raises TraceTooLarge when the launch makes more than ``max_accesses`` global and shared accesses,
    and the launch's own ``KernelFault`` when the kernel fails.
    """
    if not isinstance(max_accesses, (int, np.integer)) or isinstance(max_accesses, bool) or max_accesses < 1:
        raise ValueError(f"max_accesses must be a positive whole number, got {max_accesses!r}")
    traced = traced_module(source)
    pairs = _matching_variables(source.plain, traced) if source.plain is not None else []
    buffer = TraceBuffer(capacity=int(max_accesses))
    buffer.library_ranges = library_ranges(traced, source.code)
    _copy_variables(pairs, forward=True)
    try:
        cpu_launch.run(traced, source.name, source.kernel_name, grid, block, shared_mem, args, source.params,
                       time_limit, trace=buffer)
    except cpu_launch.faults.KernelFault as exc:
        if not buffer.truncated:
            raise exc.with_traceback(None) from None
    finally:
        _copy_variables(pairs, forward=False)
    if buffer.truncated:  # the runtime stopped the launch when the buffer was full
        buffer.close()
        raise TraceTooLarge(
            f"{source.kernel_name}: the launch makes more than {int(max_accesses):,} global and shared memory "
            f"accesses, the most the analysis records; its results are incomplete. Analyse a smaller launch "
            f"(fewer blocks or a smaller problem: the access pattern of a warp rarely depends on the size), or "
            f"pass a larger max_accesses=.") from None
    accesses = buffer.records()
    sites = sites_for(traced.path, np.unique(accesses["pc"]).tolist(), source.code, source.filename)
    shapes = {i: tuple(a.shape) for i, a in enumerate(args) if isinstance(a, np.ndarray)}
    recording = Recording(kernel=source.name, filename=source.filename, code=source.code, grid=tuple(grid),
                          block=tuple(block), shared_mem=int(shared_mem), accesses=accesses,
                          ranges=list(buffer.ranges), sites=sites, shared=shared_symbols(traced, source.code),
                          shapes=shapes, local_accesses=buffer.local_accesses,
                          unclassified_accesses=buffer.unclassified_accesses)
    buffer.close()
    return recording


# --------------------------------------------------------------------------------------------------
# Capturing the launches of other code (the grader's race probe)
# --------------------------------------------------------------------------------------------------

@dataclass
class Capture:
    """Launches recorded while ``capture()`` was active; ``skipped`` counts those too large to record."""

    max_accesses: int = DEFAULT_MAX_ACCESSES
    recordings: list[Recording] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def __call__(self, raw: Any, grid: tuple[int, int, int], block: tuple[int, int, int], args: Sequence[Any],
                 shared_mem: int, time_limit: float | None) -> None:
        try:
            self.recordings.append(record_launch(KernelSource.of(raw), grid, block, args, shared_mem,
                                                 time_limit=time_limit, max_accesses=self.max_accesses))
        except TraceTooLarge as exc:
            self.skipped.append(str(exc))
            with cpu_trace.capturing(None):  # run it normally instead
                raw.launch_converted(grid, block, args, shared_mem, time_limit)


@contextmanager
def capture(max_accesses: int = DEFAULT_MAX_ACCESSES) -> Iterator[Capture]:
    """Record every CPU-backend launch made inside the ``with`` block (each runs its traced build)."""
    recorder = Capture(max_accesses=max_accesses)
    with cpu_trace.capturing(recorder):
        yield recorder


__all__ = ["Recording", "SharedSymbol", "TraceTooLarge", "KernelSource", "record_launch", "capture", "Capture",
           "Variable",
           "constant_names", "DEFAULT_MAX_ACCESSES"]
