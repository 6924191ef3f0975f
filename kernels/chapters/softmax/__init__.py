"""Helpers of the "Softmax" chapter: float64 references (softmax with this course's convention for
rows of -inf, LayerNorm, attention), NumPy models of the online-softmax recurrence and of Welford's
and Chan's variance updates, byte counts, launch plans and the dispatch rule for the kernels in
``kernels/cuda/softmax/``, and launchers, library baselines, the sweep's measure function and
the chapter's chart.

The pure parts (everything above "launchers") need neither CuPy nor a GPU. The launchers run on
either backend: arrays come from ``kernels.array_module()`` (CuPy on a GPU, the CPU backend's
module without one). Only ``Softmax.blocks_per_sm`` (CUDA's occupancy calculator) and the torch
baseline need a GPU; torch is imported only inside the functions that use it, so this module
imports anywhere.

Convention for rows with no finite element (every entry -inf, e.g. a fully masked attention row):
the softmax is written as a row of zeros. Mathematically it is 0/0; torch.softmax returns NaN for
such a row; attention kernels usually return zeros, which is what a fully masked query should
contribute.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...numerics import UNIT_ROUNDOFF, gamma
from ...portable import on_gpu

# ----------------------------------------------------------------------------- kernel sources

THREE_KERNELS_FILE = "softmax/three_kernels.cu"
BLOCK_FILE = "softmax/block_per_row.cu"
WARP_FILE = "softmax/warp_per_row.cu"
LAYERNORM_FILE = "softmax/layernorm.cu"
FLASH_FILE = "softmax/flash_attention.cu"

KINDS = ("three_kernels", "block_3pass", "block_online", "block_cached", "block_smem",
         "warp_online", "warp_cached")
FLOAT_ONLY = {"three_kernels", "block_3pass"}
C_TYPE = {"float32": "float", "float16": "unsigned short"}     # fp16 travels as its 16-bit pattern
STATIC_SHARED_BYTES = 256          # block_merge's 32 (m, d) pairs, beside a dynamic row cache
DEFAULT_SHARED_LIMIT = 48 * 1024   # shared memory per block without the opt-in

# Template instantiations compiled in the .cu files (their "// name_expressions:" lines).
BLOCK_CACHED = {   # dtype -> (THREADS, ITEMS)
    "float32": [(128, 16), (256, 16), (512, 16), (1024, 16), (1024, 32), (128, 32), (512, 8), (1024, 4)],
    "float16": [(128, 16), (256, 16), (512, 16), (1024, 16), (1024, 32)],
}
WARP_CACHED = {    # dtype -> (ITEMS, ROWS per warp)
    "float32": [(4, 1), (4, 2), (4, 4), (8, 1), (8, 2), (16, 1), (32, 1)],
    "float16": [(8, 1), (8, 2), (16, 1), (32, 1)],
}
FLASH_HEAD_DIMS = (32, 64, 128)
FLASH_WARPS = 8


def dtype_name(dtype: Any) -> str:
    """"float32" or "float16"; anything else is refused with the reason."""
    name = np.dtype(dtype).name
    if name not in C_TYPE:
        raise TypeError(f"the softmax kernels take float32 or float16 matrices, not {name}")
    return name


def pack_elements(dtype: Any) -> int:
    """Elements in one 16-byte pack: 4 floats or 8 halves."""
    return 16 // np.dtype(dtype_name(dtype)).itemsize


@dataclass(frozen=True)
class Config:
    """One kernel and its launch parameters.

    threads: threads per block. items: elements per thread (the cached kernels). rows_per_warp:
    rows each warp of softmax_warp_cached keeps in registers.
    """

    kind: str
    threads: int = 256
    items: int = 0
    rows_per_warp: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown kernel kind {self.kind!r}; choose one of {', '.join(KINDS)}")
        if self.threads % 32 or not 32 <= self.threads <= 1024:
            raise ValueError(f"threads per block must be a multiple of 32 from 32 to 1024, not {self.threads}")

    @property
    def label(self) -> str:
        if self.kind == "block_cached":
            return f"block_cached {self.threads}x{self.items}"
        if self.kind == "warp_cached":
            return f"warp_cached {self.items}/lane, {self.rows_per_warp} row/warp, {self.threads} thr"
        return f"{self.kind} {self.threads} thr"

    def capacity(self) -> int | None:
        """The longest row the configuration handles (None: any length)."""
        if self.kind == "block_cached":
            return self.threads * self.items
        if self.kind == "warp_cached":
            return 32 * self.items
        return None


@dataclass(frozen=True)
class Plan:
    """One launch: which kernel, its grid and block, dynamic shared memory and argument names.

    Argument names: x, y (the matrices), rows, cols, and row_max, row_sum (the three-kernel
    version's per-row scratch arrays).
    """

    file: str
    name: str
    grid: int
    block: int
    shared_mem: int
    args: tuple[str, ...]


def _require_capacity(config: Config, cols: int) -> None:
    cap = config.capacity()
    if cap is not None and cols > cap:
        raise ValueError(f"{config.label} holds rows of at most {cap} elements; this row has {cols}")


def plan(config: Config, rows: int, cols: int, dtype: Any = np.float32,
         smem_limit: int | None = None) -> list[Plan]:
    """The launches that compute the softmax of a rows x cols matrix with ``config``.

    ``smem_limit`` is the device's shared memory per block with opt-in (bytes); the shared-memory
    kernel is refused when the row does not fit. Raises ValueError, with the reason, for a
    configuration that cannot handle the shape.
    """
    if rows < 1 or cols < 1:
        raise ValueError(f"need at least one row and one column, got {rows} x {cols}")
    if rows > 2**31 - 1 or cols > 2**31 - 1:
        raise ValueError("rows and cols must each fit in a 32-bit int")
    name = dtype_name(dtype)
    ctype = C_TYPE[name]
    kind, threads = config.kind, config.threads
    if kind in FLOAT_ONLY and name != "float32":
        raise ValueError(f"{kind} is written for float32 only")
    if kind == "three_kernels":
        return [Plan(THREE_KERNELS_FILE, "row_max", rows, threads, 0, ("x", "row_max", "cols")),
                Plan(THREE_KERNELS_FILE, "row_sum_exp", rows, threads, 0, ("x", "row_max", "row_sum", "cols")),
                Plan(THREE_KERNELS_FILE, "normalise", rows, threads, 0,
                     ("x", "row_max", "row_sum", "y", "cols"))]
    if kind == "block_3pass":
        return [Plan(BLOCK_FILE, "softmax_block_3pass", rows, threads, 0, ("x", "y", "cols"))]
    if kind == "block_online":
        return [Plan(BLOCK_FILE, f"softmax_block_online<{ctype}>", rows, threads, 0, ("x", "y", "cols"))]
    if kind == "block_smem":
        shared = smem_bytes(cols, name)
        if smem_limit is not None and shared + STATIC_SHARED_BYTES > smem_limit:
            raise ValueError(f"a row of {cols} {name} needs {shared} bytes of shared memory; this GPU gives "
                             f"a block at most {smem_limit - STATIC_SHARED_BYTES} besides the reduction's")
        return [Plan(BLOCK_FILE, f"softmax_block_smem<{ctype}>", rows, threads, shared, ("x", "y", "cols"))]
    if kind == "block_cached":
        if (threads, config.items) not in BLOCK_CACHED[name]:
            raise ValueError(f"softmax_block_cached is compiled for (threads, items) in {BLOCK_CACHED[name]} "
                             f"({name}), not ({threads}, {config.items})")
        _require_capacity(config, cols)
        return [Plan(BLOCK_FILE, f"softmax_block_cached<{ctype}, {threads}, {config.items}>", rows, threads, 0,
                     ("x", "y", "cols"))]
    warps = threads // 32
    if kind == "warp_online":
        return [Plan(WARP_FILE, f"softmax_warp_online<{ctype}>", -(-rows // warps), threads, 0,
                     ("x", "y", "rows", "cols"))]
    # warp_cached
    if (config.items, config.rows_per_warp) not in WARP_CACHED[name]:
        raise ValueError(f"softmax_warp_cached is compiled for (items, rows per warp) in {WARP_CACHED[name]} "
                         f"({name}), not ({config.items}, {config.rows_per_warp})")
    _require_capacity(config, cols)
    per_block = warps * config.rows_per_warp
    return [Plan(WARP_FILE, f"softmax_warp_cached<{ctype}, {config.items}, {config.rows_per_warp}>",
                 -(-rows // per_block), threads, 0, ("x", "y", "rows", "cols"))]


def smem_bytes(cols: int, dtype: Any) -> int:
    """Dynamic shared memory of softmax_block_smem: the row, rounded up to whole 16-byte packs."""
    return -(-cols * np.dtype(dtype_name(dtype)).itemsize // 16) * 16


def threads_per_row(config: Config) -> int:
    """How many threads share one row."""
    return 32 if config.kind.startswith("warp") else config.threads


# ----------------------------------------------------------------------------- kernel families and the dispatch rule

FAMILIES = ("three_kernels", "block_3pass", "block_online", "block_smem", "block_cached", "warp_online",
            "warp_cached")


def block_threads(cols: int) -> int:
    """Threads per block of the kernels that stride over a row: 128 for rows up to 128 elements,
    256 up to 4096, 1024 beyond (more threads, fewer elements each, for long rows)."""
    return 128 if cols <= 128 else 256 if cols <= 4096 else 1024


def family_config(family: str, cols: int, dtype: Any = np.float32, smem_limit: int | None = None) -> Config:
    """The configuration of a kernel family for rows of ``cols`` elements (ValueError if it cannot).

    block_cached: 16 elements per thread and the smallest block of at least 128 threads that holds
    the row, 32 per thread with 1024 threads beyond 16384. warp_cached: the fewest elements per
    lane that hold the row, two rows per warp up to 128 elements. warp kernels use 256-thread blocks.
    """
    name = dtype_name(dtype)
    if cols < 1:
        raise ValueError("a row needs at least one element")
    if family in ("three_kernels", "block_3pass", "block_online", "block_smem"):
        config = Config(family, threads=block_threads(cols))
    elif family == "block_cached":
        fits = [(t, i) for t, i in ((128, 16), (256, 16), (512, 16), (1024, 16), (1024, 32)) if t * i >= cols]
        if not fits:
            raise ValueError(f"softmax_block_cached holds rows of at most 32768 elements, not {cols}")
        config = Config("block_cached", threads=fits[0][0], items=fits[0][1])
    elif family == "warp_online":
        config = Config("warp_online", threads=256)
    elif family == "warp_cached":
        if cols > 1024:
            raise ValueError(f"softmax_warp_cached holds rows of at most 1024 elements, not {cols}")
        per_lane = max(-(-cols // 32), pack_elements(dtype))
        items = min(i for i, _ in WARP_CACHED[name] if i >= per_lane)
        rows_per_warp = 2 if cols <= 128 and (items, 2) in WARP_CACHED[name] else 1
        config = Config("warp_cached", threads=256, items=items, rows_per_warp=rows_per_warp)
    else:
        raise ValueError(f"unknown kernel family {family!r}; choose one of {', '.join(FAMILIES)}")
    plan(config, 1, cols, name, smem_limit)            # raises if the shape does not fit
    return config


def choose_config(cols: int, dtype: Any = np.float32, smem_limit: int | None = None) -> Config:
    """The kernel a library would launch for rows of ``cols`` elements: the row in registers
    whenever it fits, the fewest threads that hold it, and one read of the matrix.

    - up to 1024 elements: one warp per row (warp_cached);
    - up to 32768 elements: one block per row (block_cached);
    - longer: the row in shared memory if it fits (block_smem), else the two-read online kernel
      (block_online).
    """
    for family in ("warp_cached", "block_cached", "block_smem"):
        try:
            return family_config(family, cols, dtype, smem_limit)
        except ValueError:
            pass
    return family_config("block_online", cols, dtype, smem_limit)


def bench_configs(rows: int, cols: int, dtype: Any = np.float32, smem_limit: int | None = None) -> list[Config]:
    """Every configuration worth timing on a rows x cols matrix: each kernel with several block
    sizes, the register-cached kernels with every compiled (threads, items) or (items, rows per
    warp) that holds the row without leaving most slots empty. Only configurations that plan()
    accepts are returned."""
    name = dtype_name(dtype)
    short = cols < 256
    thread_counts = (128,) if short else (256, 512, 1024)
    found: list[Config] = []
    if name == "float32":
        found.append(Config("three_kernels", threads=128 if short else 256))
        found += [Config("block_3pass", threads=t) for t in ((128,) if short else (256, 1024))]
    found += [Config("block_online", threads=t) for t in thread_counts]
    found += [Config("block_smem", threads=t) for t in thread_counts]
    found += [Config("block_cached", threads=t, items=i) for t, i in BLOCK_CACHED[name] if cols <= t * i < 8 * cols]
    found += [Config("warp_online", threads=t) for t in (128, 256)]
    found += [Config("warp_cached", threads=t, items=i, rows_per_warp=r)
              for i, r in WARP_CACHED[name] if cols <= 32 * i < 4 * max(cols, 32) for t in (128, 256, 512)]
    usable = []
    for config in found:
        try:
            plan(config, rows, cols, name, smem_limit)
        except ValueError:
            continue
        usable.append(config)
    return usable


# ----------------------------------------------------------------------------- bytes

def min_bytes(rows: int, cols: int, itemsize: int = 4) -> int:
    """Bytes any softmax must move: read the matrix once and write it once."""
    return 2 * rows * cols * itemsize


ROW_READS = {"three_kernels": 3, "block_3pass": 3, "block_online": 2, "warp_online": 2,
             "block_cached": 1, "block_smem": 1, "warp_cached": 1}


def requested_bytes(kind: str, rows: int, cols: int, itemsize: int = 4) -> int:
    """Bytes a kernel asks the memory system for (some re-reads may be served by L2).

    The matrix is read ROW_READS[kind] times and written once; the three-kernel version also
    writes and reads its per-row max and sum (4 bytes each): 2 writes and 3 reads per row.
    """
    total = (ROW_READS[kind] + 1) * rows * cols * itemsize
    if kind == "three_kernels":
        total += 5 * 4 * rows
    return total


# ----------------------------------------------------------------------------- references

def softmax_reference(x: Any, xp: Any = np) -> Any:
    """Softmax along the last axis in float64, with rows of only -inf written as zeros.

    ``xp`` is numpy (the default) or the backend's array module (cupy), for large matrices checked
    where they are.
    """
    x = xp.asarray(x, dtype=xp.float64)
    m = x.max(axis=-1, keepdims=True)
    m = xp.where(m == -xp.inf, 0.0, m)          # a row of -inf: exp(-inf - 0) = 0 everywhere
    e = xp.exp(x - m)
    d = e.sum(axis=-1, keepdims=True)
    return xp.where(d > 0, e / xp.where(d > 0, d, 1.0), 0.0)


def lowest(dtype: Any = np.float32) -> float:
    """The lowest finite value of ``dtype``: the identity of the running max in the kernels."""
    return -float(np.finfo(dtype).max)


def online_state(values: Iterable[float], dtype: Any = np.float64) -> tuple[float, float]:
    """(m, d) of the online recurrence, one element at a time, in ``dtype`` arithmetic:
    m' = max(m, x), d' = d * exp(m - m') + exp(x - m'), from (lowest finite, 0)."""
    t = np.dtype(dtype).type
    m, d = t(lowest(dtype)), t(0)
    with np.errstate(over="ignore"):
        for x in values:
            x = t(x)
            m_new = max(m, x)
            d = t(d * t(np.exp(t(m - m_new)))) + t(np.exp(t(x - m_new)))
            m = m_new
    return float(m), float(d)


def merge(a: tuple[float, float], b: tuple[float, float], dtype: Any = np.float64) -> tuple[float, float]:
    """The state of the union of two disjoint sets (the kernels' merge):
    (m, d_a exp(m_a - m) + d_b exp(m_b - m)) with m = max(m_a, m_b)."""
    t = np.dtype(dtype).type
    (ma, da), (mb, db) = (t(a[0]), t(a[1])), (t(b[0]), t(b[1]))
    m = max(ma, mb)
    with np.errstate(over="ignore"):
        return float(m), float(t(da * t(np.exp(t(ma - m)))) + t(db * t(np.exp(t(mb - m)))))


def lane_states(row: Sequence[float], lanes: int = 32, dtype: Any = np.float64) -> list[tuple[float, float]]:
    """The state of each lane when lane l takes elements l, l + lanes, l + 2 lanes, ..."""
    row = np.asarray(row)
    return [online_state(row[lane::lanes], dtype) for lane in range(lanes)]


def butterfly(states: Sequence[tuple[float, float]], dtype: Any = np.float64) -> list[tuple[float, float]]:
    """Every lane's state after warp_merge: in step o (16, 8, 4, 2, 1) lane l merges with lane l ^ o."""
    states = list(states)
    n = len(states)
    if n & (n - 1):
        raise ValueError("the butterfly needs a power-of-two number of lanes")
    o = n // 2
    while o:
        states = [merge(states[lane], states[lane ^ o], dtype) for lane in range(n)]
        o //= 2
    return states


def softmax_from_state(row: Sequence[float], state: tuple[float, float]) -> np.ndarray:
    """y = exp(x - m) / d from a row's state (zeros when d is 0), in float64."""
    m, d = state
    with np.errstate(over="ignore"):
        e = np.exp(np.asarray(row, dtype=np.float64) - m)
    return e / d if d > 0 else np.zeros_like(e)


def naive_softmax(x: Any, dtype: Any = np.float32) -> np.ndarray:
    """exp(x) / sum(exp(x)) without subtracting the max, in ``dtype``: what overflows."""
    x = np.asarray(x, dtype=dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=-1, keepdims=True, dtype=dtype)


# ----------------------------------------------------------------------------- LayerNorm and attention

def welford(values: Iterable[float], dtype: Any = np.float64) -> tuple[float, float, float]:
    """(n, mean, M2) by Welford's recurrence: mean += (x - mean) / n, M2 += (x - mean_old)(x - mean_new)."""
    t = np.dtype(dtype).type
    n, mean, m2 = t(0), t(0), t(0)
    for x in values:
        x = t(x)
        n = t(n + 1)
        delta = t(x - mean)
        mean = t(mean + t(delta / n))
        m2 = t(m2 + t(delta * t(x - mean)))
    return float(n), float(mean), float(m2)


def welford_merge(a: tuple[float, float, float], b: tuple[float, float, float],
                  dtype: Any = np.float64) -> tuple[float, float, float]:
    """Chan, Golub and LeVeque's merge of two (n, mean, M2) states, as layernorm.cu does it."""
    t = np.dtype(dtype).type
    if b[0] == 0:
        return a
    if a[0] == 0:
        return b
    na, ma, m2a = (t(v) for v in a)
    nb, mb, m2b = (t(v) for v in b)
    n = t(na + nb)
    delta = t(mb - ma)
    share = t(nb / n)
    return float(n), float(t(ma + t(delta * share))), float(t(t(m2a + m2b) + t(t(t(delta * delta) * na) * share)))


def naive_variance(values: Any, dtype: Any = np.float32) -> float:
    """E[x^2] - E[x]^2 in ``dtype``: the formula that cancels when |mean| >> std."""
    x = np.asarray(values, dtype=dtype)
    n = x.dtype.type(x.size)
    mean = x.sum(dtype=dtype) / n
    return float((x * x).sum(dtype=dtype) / n - mean * mean)


def layernorm_reference(x: Any, gamma: Any, beta: Any, eps: float) -> np.ndarray:
    """LayerNorm over the last axis in float64, biased variance (as torch.nn.LayerNorm)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)


def attention_reference(q: Any, k: Any, v: Any, causal: bool = False) -> np.ndarray:
    """softmax(Q K^T / sqrt(D)) V in float64; causal: query i sees keys j <= i."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[1])
    if causal:
        s = np.where(np.arange(k.shape[0])[None, :] <= np.arange(q.shape[0])[:, None], s, -np.inf)
    return softmax_reference(s) @ v


# ----------------------------------------------------------------------------- tolerances

def softmax_tolerance(cols: int, threads: int, dtype: Any = np.float32) -> float:
    """A bound on the relative error of the kernels' output (float32 arithmetic throughout).

    A thread adds up to ceil(cols / threads) exponentials in sequence, each step with at most 6
    roundings (the exponential of up to 2 ulp, the rescale factor's exponential and its product,
    the addition: even a row that raises the max at every element stays inside); the warp and
    block trees add log2(threads) levels of 4 roundings; the final rescale and division a few
    more. fp16 outputs add their own rounding: 2^-11 relative, but at least 2^-25 absolute, since
    outputs below 2^-14 (6.1e-5) are subnormal in fp16. Because a row sums to 1, its 2-norm is at
    least 1 / sqrt(cols), so the absolute part adds at most cols * 2^-25 to the relative error.
    """
    per_thread = -(-cols // threads)
    levels = max(1, math.ceil(math.log2(max(threads, 2))))
    bound = gamma(6 * per_thread + 4 * levels + 16)
    if dtype_name(dtype) == "float16":
        bound += UNIT_ROUNDOFF["float16"] + cols * 2.0**-25
    return bound


def layernorm_tolerance(cols: int, threads: int, mean_over_std: float = 0.0) -> float:
    """A bound on the relative error of layernorm_welford's output.

    The mean and M2 go through about ceil(cols / threads) Welford steps and 2 log2(threads) merges;
    the error of the mean is then multiplied by |mean| / std when x - mean is formed, so inputs far
    from zero lose digits in float32 whatever the algorithm (the input itself is only known to
    2^-24 of |x|).
    """
    per_thread = -(-cols // threads)
    levels = max(1, math.ceil(math.log2(max(threads, 2))))
    return gamma(2 * per_thread + 4 * levels + 16) * (1.0 + abs(mean_over_std))


def attention_tolerance(n_k: int, d: int) -> float:
    """A bound on the relative error of flash_attention_forward: a dot product of d terms per
    score, and per output a running sum over all n_k keys with a rescaling per tile of 32."""
    return gamma(2 * n_k + 2 * d + 64)


# ----------------------------------------------------------------------------- awkward inputs

AWKWARD_KINDS = ("random", "equal", "large", "neg_inf", "all_masked", "spikes")


def awkward_matrix(kind: str, rows: int, cols: int, dtype: Any = np.float32,
                   rng: np.random.Generator | None = None) -> np.ndarray:
    """Test matrices that catch the usual softmax bugs.

    random      uniform in [-1, 1)
    equal       every row constant (a different constant per row): y = 1 / cols exactly
    large       uniform in [-1e4, 1e4): exp(x) overflows without the max subtraction (fp16: +-6e4)
    neg_inf     random with about a quarter of the entries -inf (never a whole row)
    all_masked  random, but every third row entirely -inf (written as zeros)
    spikes      one 0 per row at the first, last or a random position, the rest in [-40, -30):
                a kernel that drops an element from the sum or misses it in the max fails by far
    """
    rng = rng or np.random.default_rng()
    big = 6e4 if dtype_name(dtype) == "float16" else 1e4
    if kind == "random":
        x = rng.uniform(-1, 1, (rows, cols))
    elif kind == "equal":
        x = np.repeat(rng.uniform(-5, 5, (rows, 1)), cols, axis=1)
    elif kind == "large":
        x = rng.uniform(-big, big, (rows, cols))
    elif kind == "neg_inf":
        x = rng.uniform(-1, 1, (rows, cols))
        x[rng.random((rows, cols)) < 0.25] = -np.inf
        x[np.arange(rows), rng.integers(0, cols, rows)] = rng.uniform(-1, 1, rows)   # one finite each
    elif kind == "all_masked":
        x = rng.uniform(-1, 1, (rows, cols))
        x[::3] = -np.inf
    elif kind == "spikes":
        x = rng.uniform(-40, -30, (rows, cols))
        where = np.array([(0, cols - 1)[r % 2] if r % 3 else rng.integers(0, cols) for r in range(rows)])
        x[np.arange(rows), where] = 0.0
    else:
        raise ValueError(f"unknown input kind {kind!r}; choose one of {', '.join(AWKWARD_KINDS)}")
    return x.astype(dtype)


# ============================================================================= launchers
# Everything below launches kernels on the current backend: a CUDA GPU through CuPy or, without one,
# the CPU backend (kernels.cpu), whose arrays come from the same array module. The exceptions say
# so: blocks_per_sm asks CUDA's occupancy calculator, and torch is compared on a GPU only.


def _xp() -> Any:
    """The backend's array module: cupy on a GPU, kernels.cpu.xp on the CPU backend."""
    from ...backend import array_module

    return array_module()


def max_shared_per_block() -> int:
    """Shared memory one block may use on the current device, with the opt-in (bytes)."""
    from ...device import device_info

    return int(device_info().shared_per_block_optin)


class Softmax:
    """A softmax kernel configuration, ready to launch: ``Softmax(config)(x, y)``.

    x and y are C-contiguous 2-D arrays of the backend's array module (CuPy on a GPU) of the same
    shape, float32 or float16. Compiled kernels and the three-kernel version's scratch arrays are
    kept, so a call only launches.
    """

    def __init__(self, config: Config) -> None:
        self.config = config
        self._kernels: dict[str, Any] = {}
        self._opted_in: dict[str, int] = {}
        self._scratch: dict[int, tuple[Any, Any]] = {}
        self._limit: int | None = None

    @property
    def label(self) -> str:
        return self.config.label

    def _kernel(self, p: Plan) -> Any:
        kernel = self._kernels.get(p.name)
        if kernel is None:
            from ...compile import load_kernel

            kernel = self._kernels[p.name] = load_kernel(p.file, p.name)
            self._opted_in[p.name] = DEFAULT_SHARED_LIMIT - STATIC_SHARED_BYTES
        if p.shared_mem > self._opted_in[p.name]:                       # above 48 KB: opt in first
            kernel.max_dynamic_shared_memory = p.shared_mem
            self._opted_in[p.name] = p.shared_mem
        return kernel

    def blocks_per_sm(self, rows: int, cols: int, dtype: Any = np.float32) -> int:
        """Blocks of this configuration's (last) kernel that one SM holds at once, from CUDA's
        occupancy calculator (registers, shared memory and threads all count). GPU only: raises
        kernels.NoGPUError on the CPU backend, which has no SMs."""
        from ...backend import require_gpu

        require_gpu("Softmax.blocks_per_sm (CUDA's occupancy calculator)")
        cp = _xp()                                                      # cupy: a GPU is there

        p = self.plans(rows, cols, dtype)[-1]
        kernel = self._kernel(p)
        return int(cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.raw.kernel.ptr, p.block,
                                                                            p.shared_mem))

    def plans(self, rows: int, cols: int, dtype: Any) -> list[Plan]:
        if self._limit is None:
            self._limit = max_shared_per_block()
        return plan(self.config, rows, cols, dtype, self._limit)

    def __call__(self, x: Any, y: Any) -> None:
        if x.ndim != 2 or x.shape != y.shape or x.dtype != y.dtype:
            raise ValueError(f"x and y must be 2-D arrays of the same shape and dtype, got {x.shape} "
                             f"{x.dtype} and {y.shape} {y.dtype}")
        rows, cols = (int(s) for s in x.shape)
        plans = self.plans(rows, cols, x.dtype)
        half = dtype_name(x.dtype) == "float16"
        values = {"x": x.view(np.uint16) if half else x, "y": y.view(np.uint16) if half else y,
                  "rows": rows, "cols": cols}
        if self.config.kind == "three_kernels":
            if rows not in self._scratch:
                xp = _xp()
                self._scratch[rows] = (xp.empty(rows, xp.float32), xp.empty(rows, xp.float32))
            values["row_max"], values["row_sum"] = self._scratch[rows]
        for p in plans:
            self._kernel(p)((p.grid,), (p.block,), tuple(values[a] for a in p.args), shared_mem=p.shared_mem)


class LayerNorm:
    """layernorm_welford on a rows x cols float32 matrix: ``LayerNorm(threads)(x, gamma, beta, y, eps)``."""

    def __init__(self, threads: int = 256) -> None:
        self.threads = threads
        self._kernel: Any = None

    def __call__(self, x: Any, gamma: Any, beta: Any, y: Any, eps: float = 1e-5) -> None:
        if self._kernel is None:
            from ...compile import load_kernel

            self._kernel = load_kernel(LAYERNORM_FILE, "layernorm_welford")
        rows, cols = (int(s) for s in x.shape)
        self._kernel((rows,), (self.threads,), (x, gamma, beta, y, cols, float(eps)))


class FlashAttention:
    """flash_attention_forward on float32 Q (n_q x D), K, V (n_k x D): ``FlashAttention()(q, k, v, o)``."""

    def __init__(self) -> None:
        self._kernels: dict[int, Any] = {}

    def __call__(self, q: Any, k: Any, v: Any, o: Any, causal: bool = False) -> None:
        n_q, d = (int(s) for s in q.shape)
        n_k = int(k.shape[0])
        if d not in FLASH_HEAD_DIMS:
            raise ValueError(f"flash_attention_forward is compiled for head dimensions {FLASH_HEAD_DIMS}, not {d}")
        if k.shape != (n_k, d) or v.shape != (n_k, d) or o.shape != (n_q, d):
            raise ValueError("shapes must be q (n_q, D), k and v (n_k, D), o (n_q, D)")
        if d not in self._kernels:
            from ...compile import load_kernel

            self._kernels[d] = load_kernel(FLASH_FILE, f"flash_attention_forward<{d}, {FLASH_WARPS}>")
        self._kernels[d]((-(-n_q // FLASH_WARPS),), (32 * FLASH_WARPS,),
                         (q, k, v, o, n_q, n_k, 1.0 / math.sqrt(d), int(bool(causal))))


def naive_attention(q: Any, k: Any, v: Any, causal: bool = False,
                    softmax: Callable[[Any, Any], None] | None = None) -> Any:
    """O = softmax(Q K^T / sqrt(D)) V with the n_q x n_k score matrix in memory (the array module's
    matmuls: cuBLAS through CuPy on a GPU)."""
    xp = _xp()
    s = (q @ k.T) * np.float32(1.0 / math.sqrt(q.shape[1]))
    if causal:
        s = xp.where(xp.arange(k.shape[0])[None, :] <= xp.arange(q.shape[0])[:, None], s, xp.float32(-xp.inf))
    p = xp.empty_like(s)
    (softmax or Softmax(choose_config(s.shape[1], s.dtype)))(s, p)
    return p @ v


# ----------------------------------------------------------------------------- library baselines

def cupy_softmax(x: Any) -> Any:
    """The softmax composed of array operations (CuPy's on a GPU): max, subtract and exp, sum, divide."""
    xp = _xp()
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def torch_available() -> bool:
    """True when kernels run on a GPU and torch imports and sees it (torch is the GPU yardstick;
    the CPU backend compares with the composed softmax instead)."""
    if not on_gpu():
        return False
    try:
        import torch
    except Exception:
        return False
    return bool(torch.cuda.is_available())


def on_cupy_stream(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` (which launches torch work) wrapped to run on CuPy's current stream.

    kernels.benchmark records its CUDA events on CuPy's current stream, and torch launches on
    torch's current stream. By default both are the legacy default stream (handle 0), and work in
    one stream runs in order, so the events bracket torch's kernels exactly as they bracket ours:
    then ``fn`` is called as it is. If the two differ (someone made another stream current), the
    call is made under torch.cuda.ExternalStream on CuPy's stream, so the same holds. GPU only.
    """
    from ...backend import require_gpu

    require_gpu("on_cupy_stream (torch on CuPy's CUDA stream)")
    import torch

    cp = _xp()                                                          # cupy: a GPU is there

    def run() -> Any:
        ptr = cp.cuda.get_current_stream().ptr
        if torch.cuda.current_stream().cuda_stream == ptr:
            return fn()
        with torch.cuda.stream(torch.cuda.ExternalStream(ptr)):
            return fn()
    return run


def library_softmax(x: Any) -> tuple[str, Callable[[], Any]]:
    """(name, fn): torch.softmax on a zero-copy torch view of x when torch is there (on a GPU), else
    the composed softmax of the array module. ``fn()`` queues the work and returns the result."""
    if torch_available():
        import torch

        xt = torch.from_dlpack(x)
        return "torch.softmax", on_cupy_stream(lambda: torch.softmax(xt, dim=1))
    return "cupy (composed)", lambda: cupy_softmax(x)


def torch_on_all_masked_row() -> str:
    """What torch.softmax returns for a row of four -inf (text), or why it cannot say."""
    if not torch_available():
        return "torch is not available here" if on_gpu() else "torch is compared on a GPU only"
    import torch

    row = torch.full((1, 4), float("-inf"), device="cuda")
    return str(torch.softmax(row, dim=1).cpu().numpy().tolist()[0])


# ----------------------------------------------------------------------------- checking large matrices

def _row_steps(shape: tuple[int, ...], chunk_elements: int) -> tuple[int, int]:
    rows = int(shape[0])
    cols = max(1, int(np.prod(shape[1:])))
    return rows, max(1, chunk_elements // cols)


def reference_on_gpu(x: Any, out_dtype: Any = np.float32, chunk_elements: int = 2**24) -> Any:
    """softmax_reference of a device matrix, computed in float64 where the matrix is (on the GPU,
    or in the CPU backend's memory) a slice of rows at a time (so the float64 temporaries stay
    small) and stored as ``out_dtype``."""
    xp = _xp()
    out = xp.empty(x.shape, dtype=out_dtype)
    rows, step = _row_steps(x.shape, chunk_elements)
    for r in range(0, rows, step):
        out[r:r + step] = softmax_reference(x[r:r + step], xp)
    return out


def relative_error(y: Any, reference: Any, chunk_elements: int = 2**24) -> float:
    """||y - ref|| / ||ref|| (2-norms over the whole matrix) in float64 where the arrays are, a slice
    of rows at a time; NaN anywhere in y makes it NaN."""
    xp = _xp()
    num = den = 0.0
    rows, step = _row_steps(y.shape, chunk_elements)
    for r in range(0, rows, step):
        a = y[r:r + step].astype(xp.float64)
        b = reference[r:r + step].astype(xp.float64)
        num += float(xp.sum((a - b) ** 2))
        den += float(xp.sum(b * b))
    return math.sqrt(num) / math.sqrt(den) if den > 0 else math.sqrt(num)


def check_on_gpu(run: Callable[[Any, Any], None], x: Any, reference: Any, tol: float) -> float:
    """Run ``run(x, y)`` into a NaN-filled y and compare with a reference where the arrays are.

    For matrices too large for a NumPy reference (use reference_on_gpu); on the CPU backend it
    works the same on its arrays. Raises AssertionError unless every element was written and the
    relative error is at most ``tol``; returns the error.
    """
    xp = _xp()
    y = xp.full(x.shape, xp.nan, dtype=x.dtype)
    run(x, y)
    unwritten = int(xp.count_nonzero(xp.isnan(y)))
    err = relative_error(y, reference)
    if unwritten or not err <= tol:
        raise AssertionError(f"wrong result: {unwritten} elements NaN or unwritten, relative error {err:.2e} "
                             f"(tolerance {tol:.1e})")
    return err


# ----------------------------------------------------------------------------- timing

def interleaved(candidates: Mapping[str, Callable[[], Any]], rounds: int = 3, warmup: int = 2,
                repeat: int = 10, progress: Callable[[str], None] | None = None) -> dict[str, list[float]]:
    """Median time (ms) of every candidate in every round, with kernels.benchmark.

    Each round times every candidate once, starting from a different one, so that a drift of
    clocks or temperature during the run affects all candidates alike.
    """
    from ...timing import benchmark

    names = list(candidates)
    medians: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            medians[name].append(benchmark(candidates[name], warmup=warmup, repeat=repeat).median_ms)
        if progress:
            progress(f"round {r + 1}/{rounds} done")
    return medians


# ----------------------------------------------------------------------------- the sweep

def sweep_measure(copy_gbps: float, dtype: Any = np.float32, max_elements: int = 2**27,
                  repeat: int = 10) -> Callable[..., dict[str, Any]]:
    """The measure function of the chapter's rows x cols sweep: ``measure(kernel, rows, cols)``.

    ``kernel`` is a family of FAMILIES (its configuration for this row length from
    family_config), "dispatch" (the kernel choose_config picks) or "library" (torch.softmax,
    else the CuPy composition). Each point first checks the kernel on min(rows, 33) rows of the same
    length against the float64 reference (NaN-poisoned output, fresh random input), then times it
    on the full rows x cols matrix with kernels.benchmark: GB/s = min_bytes / time.
    """
    from ...check import check, rand
    from ...timing import benchmark, gbps

    launchers: dict[str, Softmax] = {}
    itemsize = np.dtype(dtype_name(dtype)).itemsize
    limit = max_shared_per_block()

    def launcher(kernel: str, cols: int) -> Softmax | None:
        """The launcher of a series at this row length (None for the library)."""
        if kernel == "library":
            return None
        config = (choose_config(cols, dtype, limit) if kernel == "dispatch"
                  else family_config(kernel, cols, dtype, limit))
        if config.label not in launchers:
            launchers[config.label] = Softmax(config)
        return launchers[config.label]

    def measure(kernel: str, rows: int, cols: int) -> dict[str, Any]:
        if rows * cols > max_elements:
            raise ValueError(f"{rows} x {cols} is more than the sweep's {max_elements} elements")
        cp = _xp()
        run = launcher(kernel, cols)
        x = cp.random.uniform(-1, 1, (rows, cols), dtype=cp.float32).astype(dtype)
        if run is None:
            label, fn = library_softmax(x)
            t = benchmark(fn, warmup=2, repeat=repeat)
        else:
            label, small = run.label, min(rows, 33)
            check(run, softmax_reference, inputs={"x": rand((small, cols), dtype, -1, 1)},
                  outputs={"y": ((small, cols), dtype)},
                  tol=softmax_tolerance(cols, threads_per_row(run.config), dtype)).raise_if_failed()
            y = cp.empty_like(x)
            t = benchmark(lambda: run(x, y), warmup=2, repeat=repeat)
        rate = gbps(min_bytes(rows, cols, itemsize), t)
        return {"GB/s": rate, "time_ms": t.median_ms, "config": label, "% of copy": 100 * rate / copy_gbps}

    return measure


# ----------------------------------------------------------------------------- the chart

def shapes_chart(gbps_by_shape: Mapping[str, Mapping[str, float]], copy_gbps: float, title: str = ""):
    """Grouped bars: one group per shape, one bar per kernel (and library), the copy ceiling as a line.

    ``gbps_by_shape`` maps a shape label to {kernel label: GB/s}; a kernel missing for a shape
    (it cannot handle it) leaves a gap.
    """
    import matplotlib.pyplot as plt

    shapes = list(gbps_by_shape)
    names: list[str] = []
    for rates in gbps_by_shape.values():
        names += [n for n in rates if n not in names]
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(9, 3.8))
    colors = plt.get_cmap("tab10")
    for i, name in enumerate(names):
        xs = [s + (i - (len(names) - 1) / 2) * width for s in range(len(shapes))]
        hs = [gbps_by_shape[shape].get(name, 0.0) for shape in shapes]
        ax.bar(xs, hs, width, label=name, color=colors(i % 10))
    ax.axhline(copy_gbps, color="#D55E00", ls="--", lw=1.2, label=f"copy ceiling ({copy_gbps:.0f} GB/s)")
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels(shapes)
    ax.set_ylabel("GB/s (2 x matrix bytes / time)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if not on_gpu():                                  # the speeds are CPU-backend timings: say so
        from ...timing import label_cpu_axes, note_cpu_timing

        label_cpu_axes(ax)
        note_cpu_timing()
    fig.tight_layout()
    return fig

