"""Pure helpers of the "Reduce" chapter: pass counts of the multi-pass ladder, the head/body/tail
split of the vectorised kernel, shared-memory bank conflicts of the interleaved tree, error bounds
of float summation, and the chapter's bar chart. Nothing here needs a GPU.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from ...numerics import gamma, sum_error_bound  # noqa: F401  (the chapter's red.gamma, red.sum_error_bound)
from ...traffic.banks import conflict_ways


def pass_grids(n: int, per_block: int) -> list[int]:
    """Grid sizes of the launches that reduce n values when each block turns `per_block` values
    into one partial sum, launching again on the partials until one value is left."""
    if n < 1 or per_block < 2:
        raise ValueError("need n >= 1 and per_block >= 2")
    grids = []
    while True:
        g = -(-n // per_block)
        grids.append(g)
        if g == 1:
            return grids
        n = g


def vec4_split(address: int, n: int, itemsize: int = 4) -> tuple[int, int, int]:
    """(head, vectors, tail) as sum_vec4_* splits n elements that start at byte `address`:
    `head` single elements up to the first 16-byte boundary, `vectors` whole 16-byte vectors,
    and `tail` single elements after them."""
    if address % itemsize:
        raise ValueError("the address must be aligned to the element size")
    head = min(((16 - address % 16) % 16) // itemsize, n)
    per_vector = 16 // itemsize
    vectors = (n - head) // per_vector
    return head, vectors, n - head - per_vector * vectors


def strided_tree_conflicts(block: int) -> list[tuple[int, int, int]]:
    """Per step of reduce_interleaved_strided (block a power of two): (s, active threads in warp 0,
    conflict ways of warp 0's read of buf[2 s t])."""
    steps = []
    s = 1
    while s < block:
        active = min(32, max(block // (2 * s), 0))
        steps.append((s, active, conflict_ways([2 * s * lane for lane in range(active)])))
        s *= 2
    return steps


def vec4_depth(n: int, grid: int, block: int) -> int:
    """Most additions any element goes through in sum_vec4_single_pass: the thread's running sum
    (one of four), combining the four sums, the block's shuffle tree, the last block's loop over
    the partial sums, and its tree again."""
    per_accumulator = -(-n // (4 * grid * block)) + 1          # +1 for a head or tail element
    tree = 2 + int(math.log2(block))                          # (a0 + a1) + (a2 + a3), then the block
    return per_accumulator + tree + -(-grid // block) + tree


def ladder_chart(gbps: Mapping[str, float], copy_gbps: float, library_gbps: float,
                 library: str = "cupy.sum", title: str = ""):
    """Bar chart of GB/s per rung, with the copy ceiling and the library routine as lines."""
    import matplotlib.pyplot as plt

    names = list(gbps)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    bars = ax.bar(range(len(names)), [gbps[k] for k in names], color="#0072B2")
    for bar, name in zip(bars, names):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{gbps[name]:.0f}",
                ha="center", va="bottom", fontsize=7)
    ax.axhline(copy_gbps, color="#D55E00", ls="--", lw=1.2, label=f"copy ceiling ({copy_gbps:.0f} GB/s)")
    ax.axhline(library_gbps, color="#009E73", ls=":", lw=1.5, label=f"{library} ({library_gbps:.0f} GB/s)")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("GB/s (bytes read / time)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
