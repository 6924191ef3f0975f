"""Global-memory sectors and lines: which 32-byte sectors and 128-byte lines one warp's request touches.

The model, for the GPUs of compute capability 6.0 and newer: the L1 and L2 caches and DRAM move
32-byte sectors, four to a 128-byte cache line; a warp's request moves every sector that one of its
active lanes touches, once, however many lanes share it (CUDA C++ Best Practices Guide, "Coalesced
Access to Global Memory"; CUDA C++ Programming Guide, "Global Memory" for compute capabilities 5.x
and later).

This is the course's one sector model. ``requests.global_traffic`` applies it to every request of a
traced launch (and is what the Nsight Compute comparison checks); :func:`sectors_touched` and
:func:`lines_touched` apply it to one warp given as its lanes' byte addresses, the form the chapters
and their figures use.
"""
from __future__ import annotations

from collections.abc import Iterable

SECTOR_BYTES = 32   # the unit L1, L2 and DRAM move
LINE_BYTES = 128    # an L1 / L2 cache line: 4 sectors


def units_touched(addresses: Iterable[int], elem_bytes: int, unit: int) -> list[int]:
    """Indices of the ``unit``-byte blocks that accesses of ``elem_bytes`` at ``addresses`` touch, sorted."""
    if elem_bytes < 1:
        raise ValueError(f"elem_bytes must be positive, not {elem_bytes}")
    touched: set[int] = set()
    for a in addresses:
        if a < 0:
            raise ValueError(f"byte addresses must be >= 0, not {a}")
        touched.update(range(a // unit, (a + elem_bytes - 1) // unit + 1))
    return sorted(touched)


def sectors_touched(addresses: Iterable[int], elem_bytes: int = 4) -> list[int]:
    """Indices of the 32-byte sectors that accesses of ``elem_bytes`` at ``addresses`` touch."""
    return units_touched(addresses, elem_bytes, SECTOR_BYTES)


def lines_touched(addresses: Iterable[int], elem_bytes: int = 4) -> list[int]:
    """Indices of the 128-byte cache lines that accesses of ``elem_bytes`` at ``addresses`` touch."""
    return units_touched(addresses, elem_bytes, LINE_BYTES)
