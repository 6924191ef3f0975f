"""Helpers and diagrams for the "Coalescing" chapter.

Pure helpers (no GPU, no matplotlib), used by the chapter and tested in ``tests/test_coalescing.py``:

- :func:`warp_addresses`: the byte addresses the 32 lanes of a warp access for a stride and an offset;
- :func:`sectors_touched` / :func:`lines_touched`: the 32-byte sectors and 128-byte lines they fall in
  (the sector model of ``kernels.traffic.sectors``);
- :func:`copy_model_fraction`: the fraction of the copy ceiling a copy can reach when every warp-wide
  read touches ``read_sectors`` sectors and every write touches 4 (no reuse between warps);
- :func:`bank_conflict_ways`: how many different 4-byte words one shared-memory bank must deliver when
  a warp reads the given words (1 = conflict-free; the bank model's ``conflict_ways``, from
  ``kernels.traffic.banks``);
- :func:`tile_column_words`: the shared-memory words a warp reads when it reads a column of a tile.

Diagrams (each returns a closed :class:`matplotlib.figure.Figure`, displayed once when a cell ends
with the call):

- :func:`warp_sectors_figure`: a warp's 32 addresses laid over 32-byte sectors and 128-byte lines;
- :func:`matmul_access_figure`: which elements of A and B one warp of a naive matrix multiplication
  reads at one step k, for the two thread mappings.

The 32-byte sector and the 128-byte line are the units of the L1 and L2 caches of NVIDIA GPUs of
compute capability 6.0 and later (CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory";
CUDA C++ Programming Guide, "Global Memory" for compute capabilities 5.x and later).
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ...traffic.banks import conflict_ways as bank_conflict_ways
from ...traffic.sectors import LINE_BYTES, SECTOR_BYTES, lines_touched, sectors_touched

__all__ = [
    "SECTOR_BYTES",
    "LINE_BYTES",
    "WARP",
    "warp_addresses",
    "sectors_touched",
    "lines_touched",
    "copy_model_fraction",
    "bank_conflict_ways",
    "tile_column_words",
    "warp_sectors_figure",
    "matmul_access_figure",
]

WARP = 32

_BLUE = "#0072B2"
_ORANGE = "#E69F00"
_GREEN = "#009E73"
_VERMILION = "#D55E00"
_GREY = "#DDDDDD"


def warp_addresses(stride: int, offset: int = 0, elem_bytes: int = 4, lanes: int = WARP) -> list[int]:
    """Byte addresses of ``x[offset + lane * stride]`` for lanes 0..lanes-1 (x starts at address 0)."""
    if stride < 0 or offset < 0:
        raise ValueError("stride and offset must be non-negative")
    return [(offset + lane * stride) * elem_bytes for lane in range(lanes)]


def copy_model_fraction(read_sectors: int, write_sectors: int = 4, useful_bytes_per_lane: int = 8) -> float:
    """Fraction of the copy ceiling that a one-float-in, one-float-out kernel can reach.

    A warp moves 32 x 8 useful bytes; the memory system moves 32 bytes per sector touched by the
    warp's read and its write. Assumes no sector is reused by another warp (no cache hits).
    """
    if read_sectors < 1 or write_sectors < 1:
        raise ValueError("a warp-wide access touches at least one sector")
    moved = SECTOR_BYTES * (read_sectors + write_sectors)
    return WARP * useful_bytes_per_lane / moved


def tile_column_words(tile: int, pad: int, column: int = 0, lanes: int = WARP) -> list[int]:
    """Word indices of ``tile_array[lane][column]`` in a ``float[tile][tile + pad]`` array, for each lane.

    With blockDim.x = tile, lane l of a warp has threadIdx.x = l % tile and threadIdx.y one higher for
    every tile lanes, which the transpose kernel turns into column ``column + l // tile``.
    """
    pitch = tile + pad
    return [(lane % tile) * pitch + column + lane // tile for lane in range(lanes)]


# ----------------------------------------------------------------------------------------- figures


def _panel(ax, addresses: Sequence[int], title: str, elem_bytes: int = 4) -> None:
    """Rows = touched 128-byte lines, columns = byte offset inside the line; sectors shaded."""
    lines = lines_touched(addresses, elem_bytes)
    sectors = set(sectors_touched(addresses, elem_bytes))
    row_of = {line: i for i, line in enumerate(lines)}
    n = len(lines)
    for line, row in row_of.items():
        y = n - 1 - row
        for s in range(LINE_BYTES // SECTOR_BYTES):
            sector = line * (LINE_BYTES // SECTOR_BYTES) + s
            ax.add_patch(Rectangle((s * SECTOR_BYTES, y + 0.1), SECTOR_BYTES, 0.8,
                                   fc=_ORANGE if sector in sectors else "white", ec="black", lw=0.8,
                                   alpha=0.55 if sector in sectors else 1.0))
        ax.text(-3, y + 0.5, f"line {line}", ha="right", va="center", fontsize=7)
    for lane, a in enumerate(addresses):
        line, within = divmod(a, LINE_BYTES)
        y = n - 1 - row_of[line]
        ax.add_patch(Rectangle((within + 0.4, y + 0.3), elem_bytes - 0.8, 0.4, fc=_BLUE, ec="none"))
    useful = len(set(addresses)) * elem_bytes
    fetched = len(sectors) * SECTOR_BYTES
    ax.set_title(f"{title}:  {len(sectors)} sectors in {n} line{'s' if n > 1 else ''}, "
                 f"{useful} of {fetched} bytes used ({100 * useful / fetched:.0f} %)", fontsize=9, loc="left")
    ax.set_xlim(-30, LINE_BYTES + 1)
    ax.set_ylim(0, n)
    ax.set_xticks(range(0, LINE_BYTES + 1, SECTOR_BYTES))
    ax.tick_params(axis="x", labelsize=7)
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)


def warp_sectors_figure(cases: Sequence[tuple[int, int]] = ((1, 0), (2, 0), (32, 0), (1, 1))) -> Figure:
    """One panel per (stride, offset): the warp's 32 float addresses over sectors and lines.

    Blue marks are the 4 bytes each lane reads; orange boxes are the 32-byte sectors the warp's
    request touches; each row is one 128-byte cache line (only touched lines are drawn).
    """
    heights = [max(1.0, 0.28 * len(lines_touched(warp_addresses(s, o)))) + 0.6 for s, o in cases]
    fig, axes = plt.subplots(len(cases), 1, figsize=(8.5, sum(heights) + 0.4),
                             gridspec_kw={"height_ratios": heights})
    plt.close(fig)
    axes = [axes] if len(cases) == 1 else list(axes)
    for ax, (stride, offset) in zip(axes, cases):
        label = f"stride {stride}" + (f", offset {offset}" if offset else "")
        _panel(ax, warp_addresses(stride, offset), label)
    axes[-1].set_xlabel("byte offset inside a 128-byte line (ticks mark the 32-byte sectors)", fontsize=8)
    fig.suptitle("One warp-wide load of 32 floats, x[offset + lane * stride]", fontsize=10)
    fig.tight_layout()
    return fig


def matmul_access_figure(size: int = 40, row: int = 12, col0: int = 4, k: int = 20) -> Figure:
    """Elements of A and B that one warp reads at one k, for the two naive matmul mappings."""
    fig, axes = plt.subplots(2, 2, figsize=(8, 8))
    plt.close(fig)
    cases = [
        ("threadIdx.x -> col (matmul_naive)", [(row, k)], [(k, col0 + l) for l in range(WARP)],
         "A[row][k]: 1 address, broadcast", "B[k][col..col+31]: contiguous, 4 sectors"),
        ("threadIdx.x -> row (matmul_swapped)", [(row - 8 + l, k) for l in range(WARP) if row - 8 + l < size],
         [(k, col0)], "A[row..row+31][k]: 32 rows apart, 32 sectors", "B[k][col]: 1 address, broadcast"),
    ]
    for r, (mapping, a_cells, b_cells, a_note, b_note) in enumerate(cases):
        for c, (name, cells, note, color) in enumerate([("A", a_cells, a_note, _VERMILION),
                                                        ("B", b_cells, b_note, _GREEN)]):
            ax = axes[r][c]
            ax.add_patch(Rectangle((0, 0), size, size, fc="white", ec="black", lw=1))
            for y, x in cells:
                ax.add_patch(Rectangle((x, size - 1 - y), 1, 1, fc=color, ec="none"))
            ax.set_xlim(-1, size + 1)
            ax.set_ylim(-1, size + 1)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
            for side in ax.spines.values():
                side.set_visible(False)
            ax.set_title(f"{name} (row-major; a row runs left to right)\n{note}", fontsize=8)
        axes[r][0].set_ylabel(mapping, fontsize=9)
    fig.suptitle("What one warp reads at one step k of the naive matrix multiplication", fontsize=10)
    fig.tight_layout()
    return fig
