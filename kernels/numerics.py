"""Float rounding: the unit roundoff of each format and Higham's bounds built on it.

Every tolerance in the course comes from these: a float format with a p-bit significand, rounding to
nearest, stores any real number in its range with a relative error of at most u = 2^-p, half the
spacing of the numbers just above 1.0 (so u is half of NumPy's ``finfo(dtype).eps``). A chain of k
roundings stays within gamma_k = k u / (1 - k u) (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., section 3.1), and a sum whose elements go through at most d additions is within
gamma_d of the sum of the magnitudes (section 4.2).
"""
from __future__ import annotations

import math

FLOAT32_U = 2.0**-24   # float32: 24-bit significand (23 stored bits)
FLOAT16_U = 2.0**-11   # fp16: 11-bit significand
BFLOAT16_U = 2.0**-8   # bf16: 8-bit significand, float32's exponent range
TF32_U = 2.0**-11      # tf32: 11-bit significand (10 stored bits), float32's exponent range
UNIT_ROUNDOFF = {"float32": FLOAT32_U, "float16": FLOAT16_U, "bfloat16": BFLOAT16_U, "tf32": TF32_U}


def gamma(k: int, u: float = FLOAT32_U) -> float:
    """gamma_k = k u / (1 - k u): the bound on the relative error of a chain of k roundings of unit
    roundoff u (Higham, section 3.1); infinite once k u reaches 1."""
    if k < 0:
        raise ValueError(f"the number of roundings must be >= 0, not {k}")
    if k * u >= 1:
        return math.inf
    return k * u / (1 - k * u)


def sum_error_bound(depth: int, u: float = FLOAT32_U) -> float:
    """Worst-case |computed - exact| / sum|x_i| of a summation in which no element goes through more
    than `depth` additions (Higham, section 4.2): depth = n - 1 for a sequential loop, about log2 n for a
    balanced tree."""
    return gamma(depth, u)
