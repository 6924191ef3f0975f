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
    those products are done. Step k uses stage k % STAGES, with barrier parity (k / STAGES) % 2.
    Narrow, with the stages two to a row and the steps as numbered lines below, so that the words
    stay readable at phone width."""
    fig, ax = plt.subplots(figsize=(5.0, 6.6))
    plt.close(fig)
    green, red = "#1F6F3F", "#8B1A1A"
    _box(ax, 1.0, 8.7, 8.0, 1.0, "producer warpgroup: one thread\nissues every TMA load", "#F3E0C7", fontsize=11)
    per_row = 2
    rows = -(-stages // per_row)
    top = 8.3
    height = (top - 3.0) / rows
    for s in range(stages):
        row, col = divmod(s, per_row)
        x, y = 1.6 + col * 3.5, top - (row + 1) * height + 0.15
        _box(ax, x, y, 3.3, height - 0.3, f"stage {s}\nA and B^T tiles\nfull[{s}] · empty[{s}]", "#DDE8F5",
             fontsize=10)
    width = 8.0 / consumers
    for c in range(consumers):
        _box(ax, 1.0 + c * width + 0.1, 1.4, width - 0.2, 1.3, f"consumer\nwarpgroup {c}\n(64 rows of the tile)",
             "#D9EAD3", fontsize=10)
    for (start, end), number, colour, side in ((((1.3, 8.7), (1.3, 2.75)), "1", green, "right"),
                                               (((8.7, 2.75), (8.7, 8.7)), "3", red, "left")):
        _arrow(ax, start, end, colour=colour)
        x = start[0] + (-0.2 if side == "right" else 0.2)
        ax.text(x, 5.7, number, color=colour, fontsize=12, fontweight="bold", ha=side, va="center")
    ax.text(1.1, 3.0, "2", color=green, fontsize=12, fontweight="bold", ha="right", va="center")
    ax.text(8.9, 8.4, "4", color=red, fontsize=12, fontweight="bold", ha="left", va="center")
    steps = [("1 producer: expect_tx on full[s], TMA loads into s", green),
             ("2 consumers: wait on full[s], then wgmma on s", green),
             ("3 consumers: arrive on empty[s] when done", red),
             ("4 producer: wait on empty[s] before refilling s", red),
             (f"a barrier's phase flips every round: step k\nwaits with parity (k / {stages}) % 2", "black")]
    for n, (text, colour) in enumerate(steps):
        ax.text(0.0, 0.95 - 0.42 * n, text, color=colour, fontsize=10, ha="left", va="top")
    ax.set_title(f"A ring of {stages} stages: step k uses stage k % {stages}", fontsize=11)
    ax.set_xlim(0, 10)
    ax.set_ylim(-1.6, 9.8)
    ax.axis("off")
    fig.tight_layout()
    return fig


def ladder_figure(rows: Sequence[tuple[str, dict[str, float]]], sizes: Sequence[str], baseline: str,
                  title: str) -> Figure:
    """One narrow panel, readable at phone width: each rung's share of the ``baseline`` row (cuBLAS,
    the same run) at every size, one bar per size (``rows``: label, {size: TFLOP/s}); 100 % is the
    library. Each rung's name sits above its bars, so the bars get the figure's whole width."""
    base = dict(rows).get(baseline, {})
    rungs = [(label, values) for label, values in rows if label != baseline]
    per_rung = len(sizes) + 1.3                       # bar slots per rung, with room for its name
    fig, ax = plt.subplots(figsize=(4.8, 0.3 * per_rung * len(rungs) + 1.5))
    plt.close(fig)
    colours = ("#9DB4CE", "#4C72B0", "#1B3A6B")
    tops = np.arange(len(rungs)) * per_rung
    for top, (label, _) in zip(tops, rungs):
        ax.text(0, top + 0.35, label, fontsize=10, fontweight="bold", va="center", ha="left")
    for k, size in enumerate(sizes):
        shares = [100 * values[size] / base[size] if size in values and base.get(size) else np.nan
                  for _, values in rungs]
        ax.barh(tops + 1.1 + k, shares, height=0.85, color=colours[k % len(colours)], label=size_title(size))
        for y, share in zip(tops + 1.1 + k, shares):
            if not np.isnan(share):
                ax.text(share + 1.5, y, f"{share:.0f} %", va="center", fontsize=10)
    ax.axvline(100, color="#C44E52", ls="--", lw=1.2, label=baseline)
    ax.set_yticks([])
    ax.set_ylim(per_rung * len(rungs) - 0.2, -0.4)
    ax.set_xlim(0, 118)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_xlabel("share of cuBLAS fp16, same run (%)", fontsize=10)
    ax.tick_params(axis="x", labelsize=10)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    below = 0.75 / (fig.get_figheight() - 1.0)            # the legend ~0.75 inch under the axis, any height
    ax.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.45, -below), ncol=2, frameon=False)
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
