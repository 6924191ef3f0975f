"""What went wrong in a kernel on the CPU backend, said the way a reader needs it.

Every fault is a ``KernelFault`` (a RuntimeError) whose message is one paragraph: the kernel, the
block and thread, the source line where possible, what happened and what usually causes it. The
attributes (``kernel``, ``block``, ``thread``, ``file``, ``line``) let tests and tools check them.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import toolchain


class KernelFault(RuntimeError):
    """A kernel stopped with an error (the Python process and later launches are unaffected)."""

    def __init__(self, message: str, *, kernel: str = "", block: tuple[int, int, int] | None = None,
                 thread: tuple[int, int, int] | None = None, file: str = "", line: int = 0):
        super().__init__(message)
        self.kernel = kernel
        self.block = block
        self.thread = thread
        self.file = file
        self.line = line


class OutOfBoundsAccess(KernelFault):
    """A read or write past the start or end of an argument array (or of dynamic shared memory)."""


class InvalidAddress(KernelFault):
    """A memory access to an address that belongs to no array (null, wild or misaligned pointer)."""


class MisalignedAccess(InvalidAddress):
    """An access at an address that is not a multiple of the value's size (a float4 from x + 1)."""


class StackOverflow(KernelFault):
    """A thread used more stack than the CPU backend gives it (large local arrays, deep recursion)."""


class BarrierDeadlock(KernelFault):
    """A __syncthreads() that not every thread of the block reaches."""


class WarpCollectiveError(KernelFault):
    """A warp collective (__shfl_sync, __ballot_sync, __syncwarp ...) called with a wrong mask."""


class KernelTimeout(KernelFault):
    """The kernel ran longer than the time limit."""


class DeviceAssertion(KernelFault):
    """assert() failed in device code."""


class KernelTrap(KernelFault):
    """The kernel executed __trap()."""


class KernelCrash(KernelFault):
    """The kernel stopped with a signal: integer division by zero, an illegal instruction, abort()."""


@dataclass
class SourceLine:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


_BUILD_DIR = re.compile(r"^(?:.*/cudacpu-[^/]+/|\./)")


def _display(name: str) -> str:
    """A source name as the reader wrote it (debug info joins it to the temporary build directory)."""
    return _BUILD_DIR.sub("", name)


def is_reader_file(name: str) -> bool:
    """True for the reader's sources, False for the CPU backend's headers and system headers."""
    if not name or name.startswith("??") or name.startswith("<"):
        return False
    include = str(toolchain.INCLUDE_DIR)
    if name.startswith(include) or name.startswith("/usr/") or "/bits/" in name:
        return False
    return True


def source_line(library: Path, base: int, candidates: Sequence[tuple[int, bool]],
                executable: Sequence[tuple[int, int]]) -> SourceLine | None:
    """The reader's source line for the first address in ``candidates`` that addr2line can map.

    ``candidates`` are (run-time address, is_return_address) pairs; only addresses inside the
    kernel library's code are tried, return addresses one byte back (inside their call).
    """
    tool = toolchain.addr2line()
    inside = []
    for address, is_return in candidates:
        if any(lo <= address < lo + n for lo, n in executable):
            inside.append(address - base - (1 if is_return else 0))
    inside = list(dict.fromkeys(inside))[:40]
    if not tool or not inside:
        return None
    try:
        out = subprocess.run([tool, "-e", str(library), "-i", "-a", *[hex(a) for a in inside]],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    blocks: list[list[str]] = []
    for row in out.splitlines():
        if row.startswith("0x"):
            blocks.append([])
        elif blocks:
            blocks[-1].append(row.strip())
    for frames in blocks:
        for frame in frames:  # innermost first; inlined callers follow
            m = re.match(r"^(.*):(\d+)(?: \(discriminator \d+\))?$", frame)
            if m and is_reader_file(m.group(1)) and int(m.group(2)) > 0:
                return SourceLine(_display(m.group(1)), int(m.group(2)))
    return None


def where(block: tuple[int, int, int] | None, thread: tuple[int, int, int] | None,
          line: SourceLine | None) -> str:
    parts = []
    if block is not None:
        parts.append(f"block ({block[0]}, {block[1]}, {block[2]})")
    if thread is not None:
        parts.append(f"thread ({thread[0]}, {thread[1]}, {thread[2]})")
    text = ", ".join(parts)
    if line is not None:
        text += f" at {line}"
    return text
