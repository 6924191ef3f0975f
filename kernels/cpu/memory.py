"""Arrays for the CPU backend: shared memory between inaccessible guard pages, with canaries.

Every array a kernel may touch lives in its own ``MAP_SHARED`` mapping, so that the child process
that runs a launch writes straight into the memory the notebook sees. The data sits just before an
inaccessible guard region and just after another one: the first access past either end of the
array stops the kernel with a fault that names the argument. The data starts on a 16-byte boundary
(like cudaMalloc's 256-byte alignment, enough for float4), so up to 15 bytes may lie between its
end and the guard; those bytes, and the ones before the data, hold a canary pattern that is
checked after every launch.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap
from dataclasses import dataclass
from typing import Any

import numpy as np

PAGE = mmap.PAGESIZE
GUARD = max(PAGE, 64 * 1024)  # bytes of inaccessible memory on each side
ALIGN = 16
CANARY = 0xA5

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mprotect.restype = ctypes.c_int


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def address_of(buffer: Any) -> int:
    """Address of the first byte of a writable buffer (mmap, bytearray ...)."""
    holder = ctypes.c_char.from_buffer(buffer)
    address = ctypes.addressof(holder)
    del holder
    return address


class GuardedBuffer(mmap.mmap):
    """One shared mapping: [guard][front canary][data][back canary][guard].

    Attributes: ``base`` (address of the mapping), ``data_offset`` and ``nbytes`` (where the data is),
    ``back_guard`` (offset of the trailing guard).
    """

    base: int
    data_offset: int
    nbytes: int
    back_guard: int

    @classmethod
    def allocate(cls, nbytes: int) -> "GuardedBuffer":
        nbytes = int(nbytes)
        padded = _round_up(max(nbytes, 0), ALIGN)
        data_span = _round_up(max(padded, 1), PAGE)
        total = GUARD + data_span + GUARD
        buf = cls(-1, total, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        buf.base = address_of(buf)
        buf.back_guard = GUARD + data_span
        buf.data_offset = buf.back_guard - padded
        buf.nbytes = nbytes
        for start in (0, buf.back_guard):
            if _libc.mprotect(ctypes.c_void_p(buf.base + start), GUARD, 0) != 0:  # PROT_NONE
                raise MemoryError(f"mprotect failed (errno {ctypes.get_errno()}) while allocating {nbytes} bytes")
        buf.fill_canaries()
        return buf

    @property
    def data_address(self) -> int:
        return self.base + self.data_offset

    def _canary_spans(self) -> list[tuple[int, int]]:
        end = self.data_offset + self.nbytes
        return [(GUARD, self.data_offset), (end, self.back_guard)]

    def fill_canaries(self) -> None:
        for lo, hi in self._canary_spans():
            if hi > lo:
                self[lo:hi] = bytes([CANARY]) * (hi - lo)

    def broken_canaries(self) -> list[tuple[int, int]]:
        """Byte ranges (relative to the end of the data, negative before its start) that changed."""
        broken = []
        end = self.data_offset + self.nbytes
        for lo, hi in self._canary_spans():
            if hi <= lo:
                continue
            chunk = self[lo:hi]
            if chunk.count(CANARY) == len(chunk):
                continue
            changed = [i for i, b in enumerate(chunk) if b != CANARY]
            first, last = lo + changed[0], lo + changed[-1]
            rel = end if lo >= end else self.data_offset
            broken.append((first - rel, last - rel))
        return broken

    def guard_hit(self, address: int) -> str | None:
        """"before" or "after" when ``address`` is in one of the guards, else None."""
        off = address - self.base
        if 0 <= off < GUARD:
            return "before"
        if self.back_guard <= off < self.back_guard + GUARD:
            return "after"
        return None


def array_in(buffer: GuardedBuffer, shape: tuple[int, ...], dtype: Any, cls: type = np.ndarray) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` over the data of ``buffer``."""
    return np.ndarray.__new__(cls, shape, dtype, buffer=buffer, offset=buffer.data_offset)


def allocate_array(shape: tuple[int, ...], dtype: Any, cls: type = np.ndarray) -> np.ndarray:
    """A new array in its own guarded shared mapping (contents: zero)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return array_in(GuardedBuffer.allocate(nbytes), shape, dtype, cls)


def owner(array: np.ndarray) -> Any:
    """The object that owns ``array``'s memory (a GuardedBuffer for the backend's own arrays)."""
    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base


@dataclass
class ArgumentMemory:
    """Where a pointer argument's data is during a launch."""

    address: int  # what the kernel receives
    buffer: GuardedBuffer | None  # its guarded mapping (None: a kernel library's global)
    copy_back: tuple[int, int] | None = None  # (host address, nbytes) of a foreign array to update
    host: np.ndarray | None = None
    allocation: int = 0  # where the array's whole allocation would start, as the kernel sees addresses


def data_address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])
