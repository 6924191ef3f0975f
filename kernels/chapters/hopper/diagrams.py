"""Diagrams for the Hopper chapter, drawn from the same functions the kernels are checked against.

Each returns a closed :class:`matplotlib.figure.Figure` (displayed once when a cell ends with the call),
sized to stay readable from a phone (400 px) to a desktop column (1400 px):

- :func:`swizzle_figure`: where TMA's 128-byte swizzle puts the 16-byte chunks of eight 128-byte rows
  (``kernels.chapters.hopper.swizzled_offset_128b``), beside the unswizzled tile;
- :func:`accumulator_figure`: which thread and register of a warpgroup hold each element of wgmma's
  64 x N fp32 accumulator (``kernels.chapters.hopper.accumulator_position``);
- :func:`ring_figure`: the warp-specialised pipeline: a producer, consumer warpgroups and a ring of
  stages guarded by full and empty mbarriers;
- :func:`ladder_figure`: the GEMM ladder's TFLOP/s at each size beside cuBLAS fp16.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

from . import accumulator_position, swizzled_offset_128b
from .bench import size_title

CHUNK_COLOURS = plt.get_cmap("tab10").colors[:8]
WARP_COLOURS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52")


def swizzle_grid(rows: int = 8) -> np.ndarray:
    """grid[row, slot] = the logical 16-byte chunk that the 128-byte swizzle stores in ``slot`` of ``row``."""
    grid = np.zeros((rows, 8), dtype=int)
    for row in range(rows):
        for chunk in range(8):
            slot = (swizzled_offset_128b(row, 16 * chunk) - 128 * row) // 16
            grid[row, slot] = chunk
    return grid


def _chunk_panel(ax: Any, grid: np.ndarray, title: str) -> None:
    rows = grid.shape[0]
    for row in range(rows):
        for slot in range(8):
            chunk = int(grid[row, slot])
            ax.add_patch(Rectangle((slot, row), 1, 1, facecolor=CHUNK_COLOURS[chunk], edgecolor="white", lw=1.5))
            ax.text(slot + 0.5, row + 0.5, str(chunk), ha="center", va="center", fontsize=11, color="white",
                    fontweight="bold")
    ax.set_xlim(0, 8)
    ax.set_ylim(rows, 0)
    ax.set_xticks(np.arange(8) + 0.5, [f"{4 * s}-{4 * s + 3}" for s in range(8)], fontsize=8, rotation=45)
    ax.set_yticks(np.arange(rows) + 0.5, [str(r) for r in range(rows)], fontsize=9)
    ax.set_xlabel("16-byte slot of shared memory (its 4 banks)", fontsize=9)
    ax.set_ylabel("row of the tile (128 bytes)", fontsize=9)
    ax.set_title(title, fontsize=10)
    ax.set_aspect("equal")


def swizzle_figure(rows: int = 8) -> Figure:
    """Two panels, one above the other: a tile of 128-byte rows stored as it is, and as TMA's 128-byte
    swizzle stores it.
    The number in a cell is the logical 16-byte chunk of the row (8 fp16 values); a column of cells is
    one group of 4 banks. Unswizzled, chunk c of every row sits in the same banks, so a read of one
    chunk column (what the tensor cores do for a k-slice) hits one bank group 8 times; swizzled, the
    eight rows' chunk c sit in eight different bank groups."""
    fig, axes = plt.subplots(2, 1, figsize=(6, 10.5))  # stacked: readable at phone width too
    plt.close(fig)
    plain = np.tile(np.arange(8), (rows, 1))
    _chunk_panel(axes[0], plain, "no swizzle: chunk c in slot c")
    _chunk_panel(axes[1], swizzle_grid(rows), "128-byte swizzle: slot = c XOR (row % 8)")
    fig.suptitle("Where the 16-byte chunks of a 128-byte-wide\ntile land in shared memory", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def accumulator_grid(n: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """(thread, register) arrays of shape 64 x n: who holds each accumulator element of m64nNk16."""
    thread = np.full((64, n), -1, dtype=int)
    register = np.full((64, n), -1, dtype=int)
    for t in range(128):
        for r in range(n // 2):
            row, col = accumulator_position(t, r, n)
            thread[row, col], register[row, col] = t, r
    return thread, register


def accumulator_figure(n: int = 16) -> Figure:
    """Top: the 64 x n accumulator coloured by warp (each warp of the warpgroup owns 16 rows).
    Bottom: rows 0-7 and columns 0-7 with the thread (T) and register (d) that hold each element:
    a thread holds pairs of adjacent columns, 8 rows apart, repeated every 8 columns."""
    thread, register = accumulator_grid(n)
    fig, (left, right) = plt.subplots(2, 1, figsize=(6.4, 11), gridspec_kw={"height_ratios": [1, 1.1]})
    plt.close(fig)
    warps = thread // 32
    for row in range(64):
        for col in range(n):
            left.add_patch(Rectangle((col, row), 1, 1, facecolor=WARP_COLOURS[warps[row, col]], edgecolor="white",
                                     lw=0.3))
    left.set_xlim(0, n)
    left.set_ylim(64, 0)
    left.set_xlabel(f"column (of {n})", fontsize=9)
    left.set_ylabel("row (of 64)", fontsize=9)
    left.set_title("which warp holds it", fontsize=10)
    for w in range(4):
        left.text(n + 0.5, 16 * w + 8, f"warp {w}", va="center", fontsize=9, color=WARP_COLOURS[w])
    left.set_aspect("auto")
    for row in range(8):
        for col in range(8):
            t, r = thread[row, col], register[row, col]
            right.add_patch(Rectangle((col, row), 1, 1, facecolor=plt.get_cmap("Pastel1")(t % 4),
                                      edgecolor="grey", lw=0.5))
            right.text(col + 0.5, row + 0.5, f"T{t}\nd{r}", ha="center", va="center", fontsize=10)
    right.set_xlim(0, 8)
    right.set_ylim(8, 0)
    right.set_xticks(np.arange(8) + 0.5, [str(c) for c in range(8)], fontsize=8)
    right.set_yticks(np.arange(8) + 0.5, [str(r) for r in range(8)], fontsize=8)
    right.set_title("rows 0-7, columns 0-7: thread T, register d", fontsize=10)
    fig.suptitle(f"wgmma m64n{n}k16: the fp32 accumulator\nin the registers of 128 threads", fontsize=12)
    fig.tight_layout()
    return fig


def _box(ax: Any, x: float, y: float, w: float, h: float, text: str, colour: str, fontsize: int = 10) -> None:
    ax.add_patch(Rectangle((x, y), w, h, facecolor=colour, edgecolor="black", lw=1))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], text: str = "", colour: str = "black",
           offset: tuple[float, float] = (0, 0)) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=colour, lw=1.2))
    if text:
        ax.text((start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1], text, fontsize=8,
                color=colour, ha="center", va="center")


def ring_figure(stages: int = 4, consumers: int = 2) -> Figure:
    """The warp-specialised pipeline of wgmma_pipelined.cu: the producer (one thread) waits on
    empty[s], announces the stage's bytes on full[s] and issues two TMA loads into stage s; each
    consumer warpgroup waits on full[s], issues its wgmma on stage s and arrives on empty[s] once
    those products are done. Step k uses stage k % STAGES, with barrier parity (k / STAGES) % 2."""
    fig, ax = plt.subplots(figsize=(9, 5))
    plt.close(fig)
    green, red = "#1F6F3F", "#8B1A1A"
    _box(ax, 2.0, 4.4, 5.0, 0.8, "producer warpgroup: one thread issues every TMA load\n(its other threads leave)",
         "#F3E0C7")
    width = 8.0 / stages
    for s in range(stages):
        x = 0.5 + s * width
        _box(ax, x + 0.1, 2.3, width - 0.2, 1.0, f"stage {s}\nA 128 x 64\nB^T BN x 64", "#DDE8F5", fontsize=8)
        ax.text(x + width / 2, 3.4, f"full[{s}]", ha="center", fontsize=8, color=green)
        ax.text(x + width / 2, 2.2, f"empty[{s}]", ha="center", va="top", fontsize=8, color=red)
    for c in range(consumers):
        x = 0.5 + c * 8.0 / consumers
        _box(ax, x + 0.1, 0.1, 8.0 / consumers - 0.2, 0.9, f"consumer warpgroup {c}\nwgmma on 64 rows of the tile",
             "#D9EAD3", fontsize=8)
    _arrow(ax, (3.0, 4.4), (3.0, 3.6), colour=green)
    ax.text(2.9, 4.0, "1. expect_tx(bytes) on full[s],\n    two TMA loads into stage s", fontsize=8, color=green, ha="right",
            va="center")
    _arrow(ax, (3.0, 2.0), (3.0, 1.05), colour=green)
    ax.text(2.9, 1.55, "2. wait full[s] (parity of the round),\n    then wgmma on stage s", fontsize=8, color=green,
            ha="right", va="center")
    _arrow(ax, (6.0, 1.05), (6.0, 2.0), colour=red)
    ax.text(6.1, 1.55, "3. arrive on empty[s]\n    when those wgmma are done", fontsize=8, color=red, ha="left",
            va="center")
    _arrow(ax, (6.0, 3.6), (6.0, 4.4), colour=red)
    ax.text(6.1, 4.0, "4. the producer waits on empty[s]\n    before it refills stage s", fontsize=8, color=red,
            ha="left", va="center")
    ax.set_xlim(0, 9)
    ax.set_ylim(0, 5.4)
    ax.axis("off")
    ax.set_title(f"A ring of {stages} stages: step k uses stage k % {stages}", fontsize=11)
    fig.tight_layout()
    return fig


def ladder_figure(rows: Sequence[tuple[str, dict[str, float]]], sizes: Sequence[str], baseline: str,
                  title: str) -> Figure:
    """One panel, readable at phone width: each rung's share of the ``baseline`` row (cuBLAS, the same
    run) at every size, one bar per size (``rows``: label, {size: TFLOP/s}); 100 % is the library."""
    base = dict(rows).get(baseline, {})
    rungs = [(label, values) for label, values in rows if label != baseline]
    fig, ax = plt.subplots(figsize=(6.4, 0.62 * len(rungs) + 1.6))
    plt.close(fig)
    height = 0.8 / max(1, len(sizes))
    colours = ("#9DB4CE", "#4C72B0", "#1B3A6B")
    y = np.arange(len(rungs))
    for k, size in enumerate(sizes):
        shares = [100 * values[size] / base[size] if size in values and base.get(size) else np.nan
                  for _, values in rungs]
        offset = (k - (len(sizes) - 1) / 2) * height
        ax.barh(y + offset, shares, height=height, color=colours[k % len(colours)], label=size_title(size))
        for yi, share in zip(y + offset, shares):
            if not np.isnan(share):
                ax.text(share + 1, yi, f"{share:.0f}", va="center", fontsize=8)
    ax.axvline(100, color="#C44E52", ls="--", lw=1.2, label=baseline)
    ax.set_yticks(y, [label for label, _ in rungs], fontsize=10)
    ax.invert_yaxis()
    ax.set_xlim(0, 112)
    ax.set_xlabel("share of cuBLAS fp16 in the same run (%)", fontsize=10)
    ax.tick_params(axis="x", labelsize=9)
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.4, -0.1), ncol=2, frameon=False)
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    return fig


def ladder_rows(records: Sequence[dict[str, Any]], ladder: Sequence[tuple[str, str]],
                sizes: Sequence[str]) -> list[tuple[str, dict[str, float]]]:
    """(label, {size: TFLOP/s}) of each rung of ``ladder`` found in ``records`` (ok and timed)."""
    rows = []
    for label, kernel in ladder:
        values = {r["size"]: r["tflops"] for r in records if r.get("kernel") == kernel and r.get("status") == "ok"
                  and r.get("tflops") and r.get("size") in sizes and not r.get("probe")}
        if values:
            rows.append((label, values))
    return rows
