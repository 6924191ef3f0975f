"""The exercises of each chapter, one module per chapter (see ``kernels.grading.registry``).

Small helpers shared by the chapter modules live here: how many blocks a launch needs, the float32
rounding unit, and a reference error bound for sums and dot products.
"""
from __future__ import annotations

import numpy as np

from ...numerics import FLOAT32_U as U32  # the float32 unit roundoff, under the exercises' short name


def blocks(n: int, per_block: int) -> int:
    """ceil(n / per_block), at least 1 (a grid needs one block even for empty input)."""
    return max(1, -(-int(n) // int(per_block)))


def f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def sum_bound(abs_sum, depth: float) -> np.ndarray:
    """Worst-case error of a float32 sum of depth ``depth`` over terms whose |values| add to ``abs_sum``."""
    return np.asarray(abs_sum, dtype=np.float64) * (depth + 2) * U32 + 1e-30
