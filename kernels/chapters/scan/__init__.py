"""Helpers of the "Scan" chapter: NumPy references, work/depth counts, the error bound of a float
scan, step-by-step models of the Hillis-Steele and Blelloch scans (for the diagrams and the tests),
and host drivers that launch the chapter's kernels from ``kernels/cuda/scan/``.

The host drivers take their arrays from the backend's array module (CuPy, or kernels.cpu.xp on the
CPU backend) only when called, so this module imports (and its pure parts are
tested) on machines without a GPU.
"""
from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np

from ...backend import array_module as _array_module  # cupy on a GPU, kernels.cpu.xp on the CPU backend
from ...numerics import gamma
from ...traffic.banks import conflict_ways as bank_conflict_ways

SCAN_FILE = "scan/large_scan.cu"
STP_TILE = 256 * 8          # tile of tile_scan / add_tile_offsets (STP_THREADS * STP_ITEMS)
SORT_TILE = 256 * 8         # keys per block in radix_sort.cu
RADIX_BITS = 4
# (threads, items) instantiated for single_pass_scan_v2 (its name_expressions lines)
SINGLE_PASS_V2_CONFIGS = [(t, i) for t in (128, 256) for i in (8, 16, 24, 32)] + [(512, 8), (512, 16)]
# (threads, items, wait_ns, poll_ns) instantiated for single_pass_scan_backoff (its name_expressions lines)
SINGLE_PASS_BACKOFF_CONFIGS = [(256, 32, 0, 0), (256, 32, 2400, 0), (256, 32, 3200, 650), (128, 32, 3200, 650)]


# ----------------------------------------------------------------------------- pure helpers

def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def wrap_int32(a: Any) -> np.ndarray:
    """Integers reduced to int32 the way 32-bit two's-complement addition wraps."""
    a = np.asarray(a, dtype=np.int64)
    return ((a + 2**31) % 2**32 - 2**31).astype(np.int64)


def inclusive_scan(x: Any) -> np.ndarray:
    """Inclusive sum scan; integers as int64 wrapped to int32, floats in float64."""
    x = np.asarray(x)
    if np.issubdtype(x.dtype, np.integer):
        return wrap_int32(np.cumsum(x.astype(np.int64)))
    return np.cumsum(x.astype(np.float64))


def exclusive_scan(x: Any) -> np.ndarray:
    """Exclusive sum scan: y[0] = 0, y[i] = x[0] + ... + x[i-1]."""
    inc = inclusive_scan(x)
    out = np.zeros_like(inc)
    out[1:] = inc[:-1]
    return out


def tile_scans(x: Any, tile: int, exclusive: bool) -> tuple[np.ndarray, np.ndarray]:
    """Scan every tile of `tile` elements on its own; also return the tiles' totals."""
    x = np.asarray(x)
    tiles = max(1, -(-len(x) // tile))
    y = np.zeros(len(x), dtype=np.int64 if np.issubdtype(x.dtype, np.integer) else np.float64)
    sums = np.zeros(tiles, dtype=y.dtype)
    for t in range(tiles):
        part = x[t * tile:(t + 1) * tile]
        y[t * tile:t * tile + len(part)] = exclusive_scan(part) if exclusive else inclusive_scan(part)
        sums[t] = wrap_int32(part.astype(np.int64).sum()) if y.dtype == np.int64 else part.sum()
    return y, sums


def compact_positive(x: Any, fill: int) -> tuple[np.ndarray, int]:
    """The elements > 0 in order, padded with `fill` to len(x), and how many there are."""
    x = np.asarray(x)
    kept = x[x > 0]
    out = np.full(len(x), fill, dtype=np.int64)
    out[:len(kept)] = kept
    return out, len(kept)


def work_depth(n: int) -> dict[str, tuple[int, int]]:
    """(additions, steps) of three scans of n elements (n a power of two for the parallel ones)."""
    levels = int(math.log2(n)) if n > 1 else 0
    return {
        "sequential": (max(n - 1, 0), max(n - 1, 0)),
        "Hillis-Steele": (sum(n - 2**d for d in range(levels)), levels),
        "Blelloch": (2 * (n - 1), 2 * levels),   # n - 1 additions in each sweep
    }


def hillis_steele_steps(x: Any) -> list[np.ndarray]:
    """The array after each step of the Hillis-Steele inclusive scan (the input first)."""
    a = np.array(x, dtype=np.int64)
    steps, d = [a.copy()], 1
    while d < len(a):
        b = a.copy()
        b[d:] = a[d:] + a[:-d]
        a, d = b, 2 * d
        steps.append(a.copy())
    return steps


def blelloch_steps(x: Any) -> list[tuple[str, np.ndarray]]:
    """The array after each step of the Blelloch exclusive scan (len(x) a power of two)."""
    a = np.array(x, dtype=np.int64)
    n = len(a)
    if n & (n - 1):
        raise ValueError("the Blelloch model needs a power-of-two length")
    steps = [("input", a.copy())]
    offset = 1
    while offset < n:                                        # up-sweep
        for i in range(2 * offset - 1, n, 2 * offset):
            a[i] += a[i - offset]
        steps.append((f"up, offset {offset}", a.copy()))
        offset *= 2
    a[n - 1] = 0
    steps.append(("root = 0", a.copy()))
    offset = n // 2
    while offset >= 1:                                       # down-sweep
        for i in range(2 * offset - 1, n, 2 * offset):
            left = a[i - offset]
            a[i - offset] = a[i]
            a[i] += left
        steps.append((f"down, offset {offset}", a.copy()))
        offset //= 2
    return steps


def blelloch_upsweep_conflicts(tile: int, padded: bool) -> list[tuple[int, int]]:
    """(offset, ways) of the first warp's shared-memory reads in each up-sweep step of a tile."""
    rows, offset, d = [], 1, tile // 2
    while d > 0:
        t = np.arange(min(32, d))
        ai = offset * (2 * t + 1) - 1
        if padded:
            ai = ai + ai // 32
        rows.append((offset, bank_conflict_ways(ai)))
        offset, d = offset * 2, d // 2
    return rows


def float_scan_tolerance(n: int, threads: int, items: int) -> float:
    """A bound on |computed - exact| / sum(|x|) for single_pass_scan<float, threads, items>.

    Every input reaches an output through at most m float additions: `items` in its thread's
    serial sum and running prefix, 2 log2(32) + 2 in the block scan (two warp scans, the warp's
    prefix, the thread's prefix), and at most 2 per earlier tile in the look-back (an aggregate
    added into a sum, that sum added into a prefix). By the standard bound for summation in any
    order (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 4) the error is at most
    gamma_m = m u / (1 - m u) times the sum of the magnitudes, u = 2^-24.
    """
    tiles = max(1, -(-n // (threads * items)))
    return gamma(items + 2 * 5 + 2 + 2 * tiles)


# ----------------------------------------------------------------------------- figures

def scan_networks(n: int = 8):
    """Hillis-Steele and Blelloch on n elements, one row per step, one arrow per addition."""
    import matplotlib.pyplot as plt

    x = np.arange(1, n + 1)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    hs = hillis_steele_steps(x)
    bl = blelloch_steps(x)
    for ax, title, rows, arrows in (
        (axes[0], f"Hillis-Steele (inclusive): {work_depth(n)['Hillis-Steele'][0]} additions, "
                  f"{len(hs) - 1} steps", [("input", hs[0])] + [(f"d = {2**k}", a) for k, a in enumerate(hs[1:])],
         [[(i - 2**k, i) for i in range(2**k, n)] for k in range(len(hs) - 1)]),
        (axes[1], f"Blelloch (exclusive): {work_depth(n)['Blelloch'][0]} additions, "
                  f"{len(bl) - 2} steps + the root", bl, _blelloch_arrows(n)),
    ):
        for r, (label, a) in enumerate(rows):
            y = -r
            ax.text(-0.9, y, label, ha="right", va="center", fontsize=8)
            for i, v in enumerate(a):
                ax.text(i, y, str(v), ha="center", va="center", fontsize=8,
                        bbox=dict(boxstyle="round,pad=0.25", fc="#EEF3FA", ec="#0072B2", lw=0.6))
            if r + 1 < len(rows):
                for src, dst in arrows[r]:
                    ax.annotate("", xy=(dst, y - 0.72), xytext=(src, y - 0.28),
                                arrowprops=dict(arrowstyle="->", color="#D55E00", lw=0.8))
        ax.set_xlim(-3.2, n - 0.4)
        ax.set_ylim(-len(rows) + 0.4, 0.6)
        ax.axis("off")
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def _blelloch_arrows(n: int) -> list[list[tuple[int, int]]]:
    arrows, offset = [], 1
    while offset < n:                                        # up: a[i] += a[i - offset]
        arrows.append([(i - offset, i) for i in range(2 * offset - 1, n, 2 * offset)])
        offset *= 2
    arrows.append([])                                        # root = 0
    offset = n // 2
    while offset >= 1:                                       # down: swap and add
        arrows.append([p for i in range(2 * offset - 1, n, 2 * offset)
                       for p in ((i - offset, i), (i, i - offset))])
        offset //= 2
    return arrows


def show_python(obj: Any) -> None:
    """Display the source of a Python function or class of this module as a code block."""
    from IPython.display import Markdown, display

    display(Markdown(f"```python\n{inspect.getsource(obj).rstrip()}\n```"))


# ----------------------------------------------------------------------------- host drivers (CuPy)

def _ctype(dtype: Any) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.int32:
        return "int"
    if dtype == np.float32:
        return "float"
    raise TypeError(f"the scans here take int32 or float32 arrays, not {dtype}")


class SinglePassScan:
    """Inclusive scan of an int32 or float32 array with single_pass_scan<T, threads, items>.

    The status words (plus the tile counter) are allocated once; every call zeroes them (one
    memset) before the launch, because the kernel's flags must start INVALID.
    """

    def __init__(self, n: int, dtype: Any = np.int32, threads: int = 256, items: int = 8):
        cp = _array_module()
        from kernels import load_kernel

        self.n, self.threads, self.items = int(n), threads, items
        self.tiles = max(1, -(-self.n // (threads * items)))
        self.kernel = load_kernel(SCAN_FILE, f"single_pass_scan<{_ctype(dtype)}, {threads}, {items}>")
        self.state = cp.zeros(1 + self.tiles, dtype=cp.uint64)

    def __call__(self, x: Any, y: Any) -> None:
        if self.n == 0:
            return
        self.state.fill(0)
        self.kernel((self.tiles,), (self.threads,), (x, y, self.state, self.n))


class SinglePassScanV2:
    """Inclusive scan of an int32 array with single_pass_scan_v2<int, threads, items>: the same
    decoupled look-back as SinglePassScan (same status words, zeroed by one memset before every
    launch) with warp-striped 16-byte staging, three block-wide barriers per tile and an early,
    fence-free aggregate. Configurations: those on the kernel's name_expressions lines.
    """

    def __init__(self, n: int, dtype: Any = np.int32, threads: int = 256, items: int = 16):
        cp = _array_module()
        from kernels import load_kernel

        self.n, self.threads, self.items = int(n), threads, items
        self.tiles = max(1, -(-self.n // (threads * items)))
        self.kernel = load_kernel(SCAN_FILE, f"single_pass_scan_v2<{_ctype(dtype)}, {threads}, {items}>")
        self.state = cp.zeros(1 + self.tiles, dtype=cp.uint64)

    def __call__(self, x: Any, y: Any) -> None:
        if self.n == 0:
            return
        self.state.fill(0)
        self.kernel((self.tiles,), (self.threads,), (x, y, self.state, self.n))


class SinglePassScanBackoff(SinglePassScanV2):
    """Inclusive scan of an int32 array with single_pass_scan_backoff<int, threads, items, wait_ns,
    poll_ns>: single_pass_scan_v2 that sleeps ``wait_ns`` nanoseconds between publishing a tile's
    aggregate and its first poll (``poll_ns`` after each poll that must be repeated), and keeps the
    tile in shared memory, not registers, during the look-back. Configurations:
    SINGLE_PASS_BACKOFF_CONFIGS.
    """

    # Its own __init__ rather than a shared one: the scan chapter shows SinglePassScanV2's source
    # (show_python) as its recorded run printed it.
    def __init__(self, n: int, dtype: Any = np.int32, threads: int = 256, items: int = 32, wait_ns: int = 3200,
                 poll_ns: int = 650):
        cp = _array_module()
        from kernels import load_kernel

        self.n, self.threads, self.items = int(n), threads, items
        self.wait_ns, self.poll_ns = wait_ns, poll_ns
        self.tiles = max(1, -(-self.n // (threads * items)))
        self.kernel = load_kernel(
            SCAN_FILE, f"single_pass_scan_backoff<{_ctype(dtype)}, {threads}, {items}, {wait_ns}, {poll_ns}>")
        self.state = cp.zeros(1 + self.tiles, dtype=cp.uint64)


class ScanThenPropagate:
    """Inclusive int32 scan in three kernels per level: tile_scan, a scan of the tile totals
    (the same method, recursively), add_tile_offsets. The buffers of every level are allocated
    once, here, and nothing synchronizes: kernels on one stream run in order.
    """

    def __init__(self, n: int):
        cp = _array_module()
        from kernels import load_kernel

        self.tile_scan = load_kernel(SCAN_FILE, "tile_scan")
        self.add_offsets = load_kernel(SCAN_FILE, "add_tile_offsets")
        self.n = int(n)
        self.levels = []                 # (tiles, tile_sums, scanned tile_sums) per level
        m = self.n
        while m > STP_TILE:
            tiles = -(-m // STP_TILE)
            self.levels.append((tiles, cp.empty(tiles, cp.int32), cp.empty(tiles, cp.int32)))
            m = tiles
        self.last_sums = cp.empty(1, cp.int32)

    def __call__(self, x: Any, y: Any) -> None:
        self._scan(x, y, self.n, 0)

    def _scan(self, x: Any, y: Any, n: int, level: int) -> None:
        if n == 0:
            return
        if level == len(self.levels):                        # fits in one tile
            self.tile_scan((1,), (256,), (x, y, self.last_sums, n))
            return
        tiles, sums, scanned = self.levels[level]
        self.tile_scan((tiles,), (256,), (x, y, sums, n))
        self._scan(sums, scanned, tiles, level + 1)
        self.add_offsets((tiles - 1,), (256,), (y, scanned, n))


class Compactor:
    """Keep the elements > 0 of an int32 array: flags, an inclusive scan, a scatter."""

    def __init__(self, n: int, blocks: int):
        cp = _array_module()
        from kernels import load_kernel

        self.n, self.blocks = int(n), blocks
        self.flag = load_kernel("scan/compact.cu", "flag_positive")
        self.scatter = load_kernel("scan/compact.cu", "scatter_kept")
        self.flags = cp.empty(max(self.n, 1), cp.int32)
        self.positions = cp.empty(max(self.n, 1), cp.int32)
        self.scan = SinglePassScan(self.n, np.int32)

    def __call__(self, x: Any, out: Any, count: Any) -> None:
        self.flag((self.blocks,), (256,), (x, self.flags, self.n))
        self.scan(self.flags, self.positions)
        self.scatter((self.blocks,), (256,), (x, self.positions, out, count, self.n))


class RadixSort:
    """LSD radix sort of uint32 keys, 4 bits per pass: per pass, count the digits of every tile,
    scan the counts (SinglePassScan), scatter. 8 passes ping-pong between `out` and a scratch
    array; the last pass writes `out`.
    """

    def __init__(self, n: int):
        cp = _array_module()
        from kernels import load_kernel

        self.n = int(n)
        self.tiles = max(1, -(-self.n // SORT_TILE))
        self.count = load_kernel("scan/radix_sort.cu", "radix_tile_counts")
        self.scatter = load_kernel("scan/radix_sort.cu", "radix_scatter")
        self.counts = cp.empty(16 * self.tiles, cp.int32)
        self.scanned = cp.empty(16 * self.tiles, cp.int32)
        self.tmp = cp.empty(max(self.n, 1), cp.uint32)
        self.scan = SinglePassScan(16 * self.tiles, np.int32)

    def __call__(self, keys: Any, out: Any) -> None:
        if self.n == 0:
            return
        passes = 32 // RADIX_BITS
        src = keys
        for p in range(passes):
            dst = out if (passes - 1 - p) % 2 == 0 else self.tmp     # the last pass writes out
            shift = p * RADIX_BITS
            self.count((self.tiles,), (256,), (src, self.counts, self.n, shift, self.tiles))
            self.scan(self.counts, self.scanned)
            self.scatter((self.tiles,), (256,),
                         (src, dst, self.counts, self.scanned, self.n, shift, self.tiles))
            src = dst
