"""What one kernel launch may ask for, and the check that says in one sentence what is wrong.

A wrong grid or block makes CUDA fail with a terse status code or, worse, compute garbage. Both
backends run ``check_launch`` before every launch: the GPU path with the device's ``LaunchLimits``,
the CPU backend with its own (``kernels.cpu.raw.CPU_LIMITS``). Nothing here needs a GPU or CuPy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import LaunchConfigError

STATIC_SMEM_LIMIT = 48 * 1024  # dynamic shared memory above this needs an explicit opt-in


def ceil_div(a: int, b: int) -> int:
    """Smallest integer >= a / b: the number of blocks of size ``b`` that cover ``a`` items."""
    if b <= 0:
        raise ValueError(f"ceil_div: the divisor must be positive, got {b}")
    return -(-a // b)


@dataclass(frozen=True)
class LaunchLimits:
    """What the device allows for one launch (CUDA's limits for all current GPUs by default)."""

    max_threads_per_block: int = 1024
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_optin: int = 48 * 1024
    name: str = "this GPU"


def is_int(v: Any) -> bool:
    """A Python or NumPy integer, not a bool: what a grid, a block or a byte count must be."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def launch_dims(value: Any, what: str, kernel: str) -> tuple[int, int, int]:
    """``value`` (an int or 1 to 3 ints) as a 3-tuple, or LaunchConfigError naming ``what``."""
    if is_int(value) or isinstance(value, (float, np.floating)):
        value = (value,)  # a lone float is then reported per axis, with the ceil_div hint
    if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3:
        raise LaunchConfigError(f"{kernel}: {what} must be an int or a tuple of 1 to 3 ints, got {value!r}")
    dims = []
    for axis, v in zip("xyz", value):
        if not is_int(v):
            hint = ""
            if isinstance(v, (float, np.floating)):
                hint = " (use ceil_div(n, block) for a whole number of blocks)"
            raise LaunchConfigError(
                f"{kernel}: {what}.{axis} must be an int, got {type(v).__name__} {v!r}{hint}")
        if v < 1:
            raise LaunchConfigError(
                f"{kernel}: {what}.{axis} is {v}; every {what} dimension must be at least 1")
        dims.append(int(v))
    return tuple(dims + [1] * (3 - len(dims)))  # type: ignore[return-value]


def check_launch(grid: Any, block: Any, shared_mem: int, limits: LaunchLimits, *,
                 kernel: str = "kernel", kernel_max_threads: int | None = None, static_shared: int = 0,
                 max_dynamic_shared: int | None = None) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Normalise grid and block to 3-tuples, or raise LaunchConfigError saying what is wrong.

    ``kernel_max_threads`` is the kernel's own limit (registers or ``__launch_bounds__``);
    ``max_dynamic_shared`` is its current ``max_dynamic_shared_size_bytes`` attribute.
    """
    g = launch_dims(grid, "grid", kernel)
    b = launch_dims(block, "block", kernel)
    for axis, v, most in zip("xyz", g, limits.max_grid):
        if v > most:
            fix = "; put the large dimension in x" if axis != "x" else ""
            raise LaunchConfigError(
                f"{kernel}: grid.{axis} is {v} but at most {most} blocks are allowed along {axis}{fix}")
    for axis, v, most in zip("xyz", b, limits.max_block):
        if v > most:
            raise LaunchConfigError(
                f"{kernel}: block.{axis} is {v} but at most {most} threads are allowed along {axis}")
    threads = b[0] * b[1] * b[2]
    if threads > limits.max_threads_per_block:
        raise LaunchConfigError(
            f"{kernel}: a block of {b[0]}x{b[1]}x{b[2]} = {threads} threads exceeds the limit of "
            f"{limits.max_threads_per_block} threads per block on {limits.name}")
    if kernel_max_threads is not None and threads > kernel_max_threads:
        raise LaunchConfigError(
            f"{kernel}: a block of {threads} threads is more than this kernel can run ({kernel_max_threads}, "
            f"limited by its registers per thread or __launch_bounds__); use a smaller block")
    if not is_int(shared_mem) or shared_mem < 0:
        raise LaunchConfigError(f"{kernel}: shared_mem must be a number of bytes >= 0, got {shared_mem!r}")
    if shared_mem + static_shared > limits.max_shared_optin:
        raise LaunchConfigError(
            f"{kernel}: {shared_mem} bytes of dynamic shared memory (+{static_shared} static) exceed the "
            f"{limits.max_shared_optin} bytes one block can have on {limits.name}")
    allowed = STATIC_SMEM_LIMIT - static_shared if max_dynamic_shared is None else max_dynamic_shared
    if shared_mem > allowed:
        raise LaunchConfigError(
            f"{kernel}: {shared_mem} bytes of dynamic shared memory is more than the {allowed} this kernel "
            f"allows now (48 KB per block unless you opt in); opt in first with "
            f"kernel.max_dynamic_shared_memory = {int(shared_mem)}")
    return g, b


__all__ = ["ceil_div", "LaunchLimits", "check_launch", "launch_dims", "is_int", "LaunchConfigError",
           "STATIC_SMEM_LIMIT"]
