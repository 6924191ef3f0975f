"""Seeds and sizes for test cases: reproducible public cases, unpredictable hidden ones.

Public cases come from a seed fixed by the exercise id, so the notebook check and the grader run
exactly the same public cases. Hidden cases come from the instructor's secret seed mixed with the
exercise id: every student gets the same hidden cases, and nobody who lacks the seed can know them
(the generating code is public; its seed is not). Sizes favour the awkward: 1, primes, values just
off a multiple of the block or tile.
"""
from __future__ import annotations

import hashlib
import secrets

import numpy as np

VISIBILITIES = ("public", "hidden", "random")


def seed_for(exercise_id: str, visibility: str, secret: int | str | None = None) -> int:
    """A 64-bit seed for ``exercise_id``'s cases of one visibility.

    Public cases ignore ``secret``; hidden cases need it; random cases (the notebook's extra cases)
    use ``secret`` when given and fresh entropy otherwise.
    """
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {VISIBILITIES}, not {visibility!r}")
    if visibility == "public":
        material = f"public|{exercise_id}"
    else:
        if secret is None:
            if visibility == "hidden":
                raise ValueError("hidden cases need the instructor's seed (--seed)")
            secret = secrets.randbits(63)
        material = f"{visibility}|{exercise_id}|{secret}"
    return int.from_bytes(hashlib.sha256(material.encode()).digest()[:8], "little")


def rng_for(exercise_id: str, visibility: str, secret: int | str | None = None) -> np.random.Generator:
    return np.random.default_rng(seed_for(exercise_id, visibility, secret))


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


def random_prime(rng: np.random.Generator, low: int, high: int) -> int:
    """A prime in [low, high], found by walking up from a random start (wrapping to low)."""
    if high < 2 or low > high:
        raise ValueError(f"no primes in [{low}, {high}]")
    start = int(rng.integers(max(low, 2), high + 1))
    for n in list(range(start, high + 1)) + list(range(max(low, 2), start)):
        if is_prime(n):
            return n
    raise ValueError(f"no primes in [{low}, {high}]")


def off_multiple(rng: np.random.Generator, low: int, high: int, of: int) -> int:
    """A number in [low, high] that is not a multiple of ``of`` (``of`` > 1)."""
    for _ in range(100):
        n = int(rng.integers(low, high + 1))
        if n % of:
            return n
    return low + 1 if (low + 1) % of else low + 2


def near_multiple(rng: np.random.Generator, low: int, high: int, of: int) -> int:
    """One more or one less than a random multiple of ``of`` in [low, high]."""
    k = int(rng.integers(max(1, low // of), max(2, high // of) + 1))
    return max(1, k * of + int(rng.choice([-1, 1])))


def uniform(rng: np.random.Generator, shape, low: float = -1.0, high: float = 1.0,
            dtype=np.float32) -> np.ndarray:
    return rng.uniform(low, high, size=shape).astype(dtype)


def integers(rng: np.random.Generator, shape, low: int, high: int, dtype=np.int32) -> np.ndarray:
    """Integers in [low, high] (both ends included)."""
    return rng.integers(low, high, size=shape, dtype=np.int64, endpoint=True).astype(dtype)
