"""The buffer a traced launch records its memory accesses into (see runtime/src/trace.cpp).

One shared mapping: a header (``abi.TraceHeader``) with the address ranges to record, then the
records (``abi.TRACE_RECORD``). The child that runs the launch writes into it, the parent reads it
afterwards. Only launches of a traced build (``compile_module(..., traced=True)``) fill it; the
analysis of what was recorded lives in ``kernels.traffic``.
"""
from __future__ import annotations

import mmap
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from . import abi, memory

DEFAULT_CAPACITY = 4_000_000  # records (32 bytes each); pages are only touched as records are written


@dataclass(frozen=True)
class TracedRange:
    """An address range whose accesses are recorded: an argument array, a __constant__ or __device__ variable."""

    name: str
    space: int  # abi.SPACE_GLOBAL or abi.SPACE_CONSTANT
    lo: int
    hi: int
    itemsize: int = 1
    argument: int = -1  # index of the kernel argument, -1 for a variable of the kernel library
    base: int = 0  # start of the allocation it belongs to (on a GPU: a multiple of 256); 0 means lo

    @property
    def allocation(self) -> int:
        return self.base or self.lo


@dataclass
class TraceBuffer:
    """Where a traced launch writes; ``records()`` and the counters read it back afterwards."""

    capacity: int = DEFAULT_CAPACITY
    library_ranges: list[TracedRange] = field(default_factory=list)  # __constant__/__device__ variables
    ranges: list[TracedRange] = field(default_factory=list)  # all of them, as the last launch used them

    def __post_init__(self) -> None:
        if not isinstance(self.capacity, int) or self.capacity < 1:
            raise ValueError(f"the trace capacity must be a positive number of accesses, got {self.capacity!r}")
        size = abi.TRACE_HEADER_BYTES + self.capacity * np.dtype(abi.TRACE_RECORD).itemsize
        self._map = mmap.mmap(-1, memory._round_up(size, mmap.PAGESIZE), flags=mmap.MAP_SHARED)
        self.header = abi.TraceHeader.from_buffer(self._map)
        self.address = memory.address_of(self._map)

    def prepare(self, pc_base: int, ranges: list[TracedRange]) -> None:
        """Empty the buffer and set the ranges to record (the first match wins, so specific ones first)."""
        if len(ranges) > abi.TRACE_MAX_RANGES:
            raise ValueError(f"a traced launch can follow at most {abi.TRACE_MAX_RANGES} arrays and variables, "
                             f"this one has {len(ranges)}")
        h = self.header
        h.capacity, h.count, h.local, h.unclassified, h.pc_base = self.capacity, 0, 0, 0, pc_base
        h.nranges = len(ranges)
        for i, r in enumerate(ranges):
            h.range_lo[i], h.range_hi[i], h.range_space[i] = r.lo, r.hi, r.space
        self.ranges = list(ranges)

    @property
    def count(self) -> int:
        """Accesses recorded, plus one when the buffer overflowed (the launch then stops there)."""
        return int(self.header.count)

    @property
    def truncated(self) -> bool:
        return self.count > self.capacity

    @property
    def local_accesses(self) -> int:
        return int(self.header.local)

    @property
    def unclassified_accesses(self) -> int:
        return int(self.header.unclassified)

    def records(self) -> np.ndarray:
        """A copy of the recorded accesses, in the order the CPU ran them."""
        n = min(self.count, self.capacity)
        view = np.frombuffer(self._map, dtype=np.dtype(abi.TRACE_RECORD), count=n, offset=abi.TRACE_HEADER_BYTES)
        return view.copy()

    def close(self) -> None:
        del self.header
        self._map.close()


# A capture makes every CPU-backend launch in its context go to a handler instead (kernels.traffic
# records them, running the traced build); raw.RawKernel.launch_converted asks for it.
_capture: ContextVar[Callable[..., Any] | None] = ContextVar("kernels_cpu_capture", default=None)


@contextmanager
def capturing(handler: Callable[..., Any] | None) -> Iterator[None]:
    """Send launches to ``handler(raw_kernel, grid, block, args, shared_mem, time_limit)`` (None: launch normally)."""
    token = _capture.set(handler)
    try:
        yield
    finally:
        _capture.reset(token)


def capture_handler() -> Callable[..., Any] | None:
    return _capture.get()
