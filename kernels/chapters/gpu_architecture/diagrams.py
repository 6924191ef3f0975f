"""Diagrams for the "GPU architecture" chapter, drawn with matplotlib.

Every function returns a :class:`matplotlib.figure.Figure` and shows nothing by itself: the figure is
closed in pyplot before it is returned, so a notebook cell that ends with the call displays it exactly
once, and a script can ``fig.savefig(...)`` it. No function needs a GPU.

- :func:`thread_hierarchy`: grid -> blocks -> warps -> threads, with the linear thread index.
- :func:`gpu_chip`: a GH100 chip as GPCs, TPCs and SMs around the L2 cache and the HBM stacks.
- :func:`block_scheduling`: how the blocks of a grid are handed out to SMs, several per SM.
- :func:`sm_diagram`: one H100 SM with its four sub-partitions and their units.
- :func:`memory_hierarchy`: registers, L1/shared memory, L2 and device memory with H100, H200 and T4 sizes.

The hardware figures come from NVIDIA's documents (cited in the chapter): the NVIDIA H100 Tensor Core
GPU Architecture whitepaper, the H200 and T4 datasheets, the Turing architecture whitepaper and the
CUDA C++ Programming Guide's compute-capability tables.
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Polygon, Rectangle

__all__ = [
    "MemorySizes",
    "MEMORY_SIZES",
    "thread_hierarchy",
    "gpu_chip",
    "block_scheduling",
    "sm_diagram",
    "memory_hierarchy",
]

# Colours shared by the figures (colour-blind-friendly Okabe-Ito palette).
_BLUE = "#0072B2"
_SKY = "#56B4E9"
_GREEN = "#009E73"
_ORANGE = "#E69F00"
_VERMILION = "#D55E00"
_PURPLE = "#CC79A7"
_YELLOW = "#F0E442"
_GREY = "#999999"
_LIGHT = "#F2F2F2"
_WARP_COLOURS = (_SKY, _ORANGE, _GREEN, _PURPLE)


@dataclass(frozen=True)
class MemorySizes:
    """Sizes of one GPU's memory levels, as NVIDIA documents them (strings, ready to print)."""

    name: str
    sms: int
    registers_per_sm: str
    l1_shared_per_sm: str
    l2: str
    dram: str
    dram_bandwidth: str


#: The three GPUs the course talks about. Sources: H100 whitepaper and datasheet, H200 datasheet,
#: T4 datasheet, Turing whitepaper, CUDA C++ Programming Guide (compute capabilities 7.5 and 9.0).
MEMORY_SIZES: dict[str, MemorySizes] = {
    "H100 SXM": MemorySizes("H100 SXM", 132, "256 KB (64 K x 32-bit)",
                            "256 KB (up to 228 KB shared)", "50 MB", "80 GB HBM3", "3.35 TB/s"),
    "H200": MemorySizes("H200", 132, "256 KB (64 K x 32-bit)",      # L2: as its CUDA runtime reports it
                        "256 KB (up to 228 KB shared)", "60 MB", "141 GB HBM3e", "4.8 TB/s"),
    "T4": MemorySizes("T4", 40, "256 KB (64 K x 32-bit)",
                      "96 KB (up to 64 KB shared)", "4 MB", "16 GB GDDR6", "320 GB/s"),
}


def _new_figure(width: float, height: float) -> tuple[Figure, "matplotlib.axes.Axes"]:
    """A figure with one axis-free drawing area in data coordinates 0..width x 0..height."""
    fig, ax = plt.subplots(figsize=(width, height))
    plt.close(fig)  # never auto-displayed by pyplot; the caller gets it as a return value
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.subplots_adjust(left=0.01, right=0.99, top=0.99, bottom=0.01)
    return fig, ax


def _box(ax, x, y, w, h, label="", *, fc=_LIGHT, ec="black", lw=1.0, fontsize=9, color="black",
         rounded=True, weight="normal", va="center", ha="center", pad=0.0, zorder=1, alpha=1.0):
    """A (rounded) rectangle with an optional centred label."""
    if rounded:
        patch = FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.08",
                               fc=fc, ec=ec, lw=lw, zorder=zorder, alpha=alpha)
    else:
        patch = Rectangle((x, y), w, h, fc=fc, ec=ec, lw=lw, zorder=zorder, alpha=alpha)
    ax.add_patch(patch)
    if label:
        tx = x + w / 2 if ha == "center" else x + pad
        ty = y + h / 2 if va == "center" else y + h - pad
        ax.text(tx, ty, label, ha=ha, va=va, fontsize=fontsize, color=color, weight=weight,
                zorder=zorder + 1)
    return patch


def _arrow(ax, start, end, *, color="black", lw=1.2, style="-|>", mutation_scale=12, **kw):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, color=color, lw=lw,
                                 mutation_scale=mutation_scale, **kw))


# --------------------------------------------------------------------------------------------------
# Thread hierarchy
# --------------------------------------------------------------------------------------------------

def thread_hierarchy(n_blocks: int = 3, block_dim: int = 64, highlight: tuple[int, int] = (1, 37),
                     block_2d: tuple[int, int] = (16, 4)) -> Figure:
    """Grid -> blocks -> warps -> threads, and how a thread finds its element.

    Top: a 1-D grid of ``n_blocks`` blocks of ``block_dim`` threads (a multiple of 32). Each block is
    cut into warps of 32 consecutive threads; the thread ``highlight = (blockIdx.x, threadIdx.x)`` is
    marked with its global index ``i = blockIdx.x * blockDim.x + threadIdx.x``.
    Bottom: a 2-D block of ``block_2d = (blockDim.x, blockDim.y)`` threads, numbered with the linear
    thread index (x fastest) and coloured by the warp each thread belongs to.
    """
    if block_dim % 32 or block_dim <= 0:
        raise ValueError("block_dim must be a positive multiple of 32")
    bx, by = block_2d
    if (bx * by) % 32:
        raise ValueError("block_2d must hold a multiple of 32 threads")
    hb, ht = highlight
    if not (0 <= hb < n_blocks and 0 <= ht < block_dim):
        raise ValueError("highlight must name a thread of the grid")

    warps = block_dim // 32
    cell = 0.105                       # one thread in the 1-D picture
    block_w = 32 * cell + 0.5
    width = max(n_blocks * (block_w + 0.35) + 0.9, 12.0)
    top_h = 1.0 + warps * 0.42
    cell2 = min(0.52, 7.5 / bx)          # one thread in the 2-D picture
    bottom_h = by * cell2 + 1.2
    note_h = 0.9                       # room above the grid for the highlighted thread's note
    height = top_h + bottom_h + note_h + 0.3
    fig, ax = _new_figure(width, height)

    # ---- top: a 1-D grid ----
    gy0 = bottom_h + 0.2
    _box(ax, 0.2, gy0, width - 0.4, top_h, fc="#FAFAFA", ec=_BLUE, lw=1.5)
    ax.text(0.4, gy0 + top_h - 0.2, f"grid: gridDim.x = {n_blocks} blocks", fontsize=10,
            color=_BLUE, weight="bold", va="center")
    for b in range(n_blocks):
        x0 = 0.55 + b * (block_w + 0.35)
        y0 = gy0 + 0.12
        bh = warps * 0.42 + 0.4
        _box(ax, x0, y0, block_w, bh, fc="white", ec=_GREEN, lw=1.3)
        ax.text(x0 + 0.12, y0 + bh - 0.17, f"block: blockIdx.x = {b}  (i = {b * block_dim}..{(b + 1) * block_dim - 1})",
                fontsize=8, color=_GREEN, va="center")
        for w in range(warps):
            wy = y0 + bh - 0.42 - w * 0.42 - 0.12
            ax.text(x0 + 0.12, wy + cell * 0.8, f"warp {w}", fontsize=7, va="center")
            for t in range(32):
                tid = w * 32 + t
                tx = x0 + 0.48 + t * cell
                hit = (b == hb and tid == ht)
                ax.add_patch(Rectangle((tx, wy), cell * 0.9, cell * 1.6,
                                       fc=_VERMILION if hit else _WARP_COLOURS[w % 4],
                                       ec="none", zorder=2))
        if b == hb:
            w, lane = divmod(ht, 32)
            wy = y0 + bh - 0.42 - w * 0.42 - 0.12
            tx = x0 + 0.48 + lane * cell + cell * 0.45
            gi = hb * block_dim + ht
            ny = gy0 + top_h + note_h / 2
            _arrow(ax, (tx, ny - 0.3), (tx, wy + cell * 1.7), color=_VERMILION)
            ax.text(tx + 0.15, ny,
                    f"blockIdx.x = {hb}, threadIdx.x = {ht}  (warp {w}, lane {lane}):  "
                    f"i = blockIdx.x * blockDim.x + threadIdx.x = {hb} * {block_dim} + {ht} = {gi}",
                    fontsize=8.5, color=_VERMILION, va="center")

    # ---- bottom: a 2-D block, linear index with x fastest ----
    ax.text(0.3, 0.55 + by * cell2 + 0.3,
            f"one 2-D block, blockDim = ({bx}, {by}): linear index "
            f"tid = threadIdx.x + threadIdx.y * blockDim.x;  warp = tid / 32, lane = tid % 32",
            fontsize=9, va="center", weight="bold")
    ox = 1.2
    oy = 0.55
    for y in range(by):
        for x in range(bx):
            tid = x + y * bx
            w = tid // 32
            cx = ox + x * cell2
            cy = oy + (by - 1 - y) * cell2
            ax.add_patch(Rectangle((cx, cy), cell2 * 0.95, cell2 * 0.95, fc=_WARP_COLOURS[w % 4],
                                   ec="white", zorder=2))
            ax.text(cx + cell2 * 0.475, cy + cell2 * 0.475, str(tid), fontsize=6.5, ha="center",
                    va="center", zorder=3)
    for y in range(by):
        ax.text(ox - 0.1, oy + (by - 1 - y) * cell2 + cell2 / 2, f"y={y}", fontsize=7, ha="right",
                va="center")
    ax.text(ox, oy - 0.25, "threadIdx.x = 0, 1, 2, ...  (varies fastest)", fontsize=7.5, va="center")
    _arrow(ax, (ox, oy - 0.42), (ox + bx * cell2, oy - 0.42), lw=1.0, mutation_scale=9)
    # legend for warps
    lx = ox + bx * cell2 + 0.4
    for w in range((bx * by) // 32):
        ly = oy + by * cell2 - 0.3 - w * 0.35
        ax.add_patch(Rectangle((lx, ly), 0.25, 0.25, fc=_WARP_COLOURS[w % 4], ec="none"))
        ax.text(lx + 0.35, ly + 0.12, f"warp {w}: tid {32 * w}..{32 * w + 31}", fontsize=8,
                va="center")
    ax.text(lx, oy + 0.1,
            "A warp is 32 threads with consecutive linear index.\n"
            "The warp, not the thread, is what a scheduler issues.",
            fontsize=8, va="bottom")
    return fig


# --------------------------------------------------------------------------------------------------
# Chip: GPCs, TPCs, SMs
# --------------------------------------------------------------------------------------------------

def gpu_chip(disabled_tpcs: tuple[tuple[int, int], ...] = ((0, 8), (1, 4), (2, 8), (5, 0), (6, 4),
                                                            (7, 0))) -> Figure:
    """A GH100 chip: 8 GPCs x 9 TPCs x 2 SMs = 144 SMs around the L2 cache, with six HBM sites.

    ``disabled_tpcs`` lists (GPC, TPC) pairs drawn greyed out: the H100 SXM5 enables 66 of the 72
    TPCs (132 SMs) and five of the six HBM3 stacks. Which TPCs are fused off differs from chip to chip;
    the default positions are only an illustration.
    """
    width, height = 13.4, 7.6
    fig, ax = _new_figure(width, height)
    disabled = set(disabled_tpcs)
    gw, gh = 2.6, 2.75
    for g in range(8):
        row, col = divmod(g, 4)
        gx = 1.3 + col * (gw + 0.15)
        gy = 4.35 if row == 0 else 0.75
        _box(ax, gx, gy, gw, gh, fc="#FAFAFA", ec=_BLUE, lw=1.3)
        ax.text(gx + 0.1, gy + gh - 0.2, f"GPC {g}", fontsize=8.5, color=_BLUE, weight="bold",
                va="center")
        for t in range(9):
            tr, tc = divmod(t, 3)
            tx = gx + 0.15 + tc * 0.8
            ty = gy + gh - 0.55 - (tr + 1) * 0.68
            off = (g, t) in disabled
            _box(ax, tx, ty, 0.72, 0.6, fc="white" if not off else "#E0E0E0",
                 ec=_GREEN if not off else _GREY, lw=0.9)
            for s in range(2):
                ax.add_patch(Rectangle((tx + 0.07 + s * 0.31, ty + 0.08), 0.27, 0.3,
                                       fc=_SKY if not off else "#CCCCCC", ec="none"))
                ax.text(tx + 0.205 + s * 0.31, ty + 0.23, "SM", fontsize=5.5, ha="center",
                        va="center", color="black" if not off else "#777777")
            ax.text(tx + 0.36, ty + 0.49, "TPC", fontsize=5.5, ha="center", va="center",
                    color=_GREEN if not off else "#777777")
    # L2 between the two rows of GPCs
    _box(ax, 1.3, 3.55, 4 * gw + 3 * 0.15, 0.65, "L2 cache (50 MB on H100; 60 MB on the full die), "
         "shared by all SMs", fc=_YELLOW, ec="black", fontsize=9)
    # HBM sites: three on each side
    for side in (0, 1):
        for k in range(3):
            hx = 0.15 if side == 0 else width - 1.0
            hy = 0.9 + k * 2.2
            active = not (side == 1 and k == 2)
            _box(ax, hx, hy, 0.85, 1.8, "HBM3\nstack" if active else "unused\nsite",
                 fc=_ORANGE if active else "#E0E0E0", ec="black" if active else _GREY, fontsize=7.5,
                 color="black" if active else "#777777")
    ax.text(width / 2, 0.3,
            "Full GH100: 8 GPCs x 9 TPCs x 2 SMs = 144 SMs.  H100 SXM5: 66 TPCs = 132 SMs enabled "
            "(grey: disabled; positions vary per chip), 5 HBM3 stacks = 80 GB.",
            fontsize=8.5, ha="center", va="center")
    ax.text(width / 2, height - 0.2, "GPU  (a grid runs on the whole chip)", fontsize=10,
            ha="center", va="center", weight="bold")
    return fig


def block_scheduling(n_sms: int = 4, n_blocks: int = 14, blocks_per_sm: int = 3) -> Figure:
    """How a grid's blocks land on SMs: each block runs whole on one SM; an SM holds several blocks.

    The first ``n_sms * blocks_per_sm`` blocks become resident at once; the others wait and start as
    resident blocks finish. Which block goes to which SM is up to the hardware.
    """
    if n_sms < 1 or blocks_per_sm < 1 or n_blocks < 1:
        raise ValueError("n_sms, n_blocks and blocks_per_sm must be positive")
    width = 12.5
    height = max(2.0 + n_sms * 1.05, 4.6)
    width = max(width, 4.2 + 0.9 + blocks_per_sm * 2.1 + 0.5)
    fig, ax = _new_figure(width, height)
    # the grid as a queue of blocks
    cols = 2
    rows = -(-n_blocks // cols)
    bw, bh = 1.05, min(0.5, (height - 1.6) / rows - 0.08)
    ax.text(0.25, height - 0.35, f"grid of {n_blocks} blocks", fontsize=10, weight="bold",
            color=_BLUE, va="center")
    resident = n_sms * blocks_per_sm
    for b in range(n_blocks):
        r, c = divmod(b, cols)
        x = 0.3 + c * (bw + 0.12)
        y = height - 0.85 - (r + 1) * (bh + 0.08)
        waiting = b >= resident
        _box(ax, x, y, bw, bh, f"block {b}", fc="white" if waiting else _SKY,
             ec=_GREY if waiting else "black", fontsize=7.5, color="#666666" if waiting else "black")
    ax.text(0.3, 0.25, "blue: resident now; white: waiting", fontsize=8, va="center")
    # the SMs
    sx = 4.2
    sw = width - sx - 0.3
    sh = (height - 1.2) / n_sms - 0.15
    for s in range(n_sms):
        y = height - 0.8 - (s + 1) * (sh + 0.15)
        _box(ax, sx, y, sw, sh, fc="#FAFAFA", ec=_GREEN, lw=1.3)
        ax.text(sx + 0.1, y + sh - 0.18, f"SM {s}", fontsize=8.5, color=_GREEN, weight="bold",
                va="center")
        for k in range(blocks_per_sm):
            b = k * n_sms + s           # round-robin, just for the picture
            if b >= n_blocks:
                continue
            kx = sx + 0.9 + k * 2.1
            _box(ax, kx, y + 0.08, 1.95, sh - 0.16, fc=_SKY)
            ax.text(kx + 0.1, y + sh - 0.25, f"block {b}", fontsize=7.5, va="center")
            for w in range(4):          # its warps
                ax.add_patch(Rectangle((kx + 0.1 + w * 0.45, y + 0.16), 0.38, max(sh - 0.62, 0.12),
                                       fc="white", ec=_BLUE, lw=0.6))
                ax.text(kx + 0.29 + w * 0.45, y + 0.16 + max(sh - 0.62, 0.12) / 2, f"w{w}",
                        fontsize=6, ha="center", va="center")
    ax.text(sx, 0.3,
            "Each SM splits its registers, shared memory and warp slots among its resident blocks. "
            f"Blocks {resident} and up start as resident blocks finish." if n_blocks > resident else
            "Each SM splits its registers, shared memory and warp slots among its resident blocks.",
            fontsize=8, va="center")
    _arrow(ax, (2.75, height / 2), (sx - 0.1, height / 2), lw=1.5)
    ax.text((2.75 + sx) / 2, height / 2 + 0.25, "hardware\nassigns", fontsize=8, ha="center",
            va="bottom")
    ax.text(sx, height - 0.35,
            f"{n_sms} SMs, at most {blocks_per_sm} blocks resident per SM (set by the block's resources)",
            fontsize=9.5, weight="bold", va="center")
    return fig


# --------------------------------------------------------------------------------------------------
# One H100 SM
# --------------------------------------------------------------------------------------------------

def sm_diagram() -> Figure:
    """One H100 (GH100) SM: four sub-partitions, each with its own L0 instruction cache, warp scheduler,
    dispatch unit, 64 KB register file, 16 INT32 + 32 FP32 + 16 FP64 lanes, a tensor core, 8 LD/ST
    units and an SFU; the SM shares an L1 instruction cache, 256 KB of L1 data cache / shared memory,
    the Tensor Memory Accelerator and four texture units.
    """
    width, height = 12.0, 12.1
    fig, ax = _new_figure(width, height)
    _box(ax, 0.1, 0.1, width - 0.2, height - 0.2, fc="white", ec="black", lw=1.6)
    ax.text(width / 2, height - 0.38, "H100 streaming multiprocessor (SM)", fontsize=12,
            weight="bold", ha="center", va="center")
    _box(ax, 0.4, height - 1.05, width - 0.8, 0.42, "L1 instruction cache (per SM)", fc="#D9D9D9",
         fontsize=9)

    pw, ph = 5.5, 4.45
    for p in range(4):
        r, c = divmod(p, 2)
        px = 0.4 + c * (pw + 0.2)
        py = height - 1.3 - (r + 1) * (ph + 0.15)
        _box(ax, px, py, pw, ph, fc="#FAFAFA", ec=_BLUE, lw=1.3)
        ax.text(px + 0.12, py + ph - 0.2, f"sub-partition {p}", fontsize=8.5, color=_BLUE,
                weight="bold", va="center")
        y = py + ph - 0.72
        _box(ax, px + 0.15, y, pw - 0.3, 0.3, "L0 instruction cache", fc="#D9D9D9", fontsize=7.5)
        y -= 0.38
        _box(ax, px + 0.15, y, pw - 0.3, 0.3, "warp scheduler (issues 1 warp-instruction / clock)",
             fc=_YELLOW, fontsize=7.5)
        y -= 0.38
        _box(ax, px + 0.15, y, pw - 0.3, 0.3, "dispatch unit (32 threads / clock)", fc=_YELLOW,
             fontsize=7.5)
        y -= 0.45
        _box(ax, px + 0.15, y, pw - 0.3, 0.37, "register file: 16,384 x 32-bit = 64 KB",
             fc=_PURPLE, fontsize=7.5)
        # lanes: 8 rows; columns INT32 x2, FP32 x4, FP64 x2
        lane = 0.24
        ly0 = y - 0.12 - 8 * lane
        groups = (("INT32", 2, _SKY), ("FP32", 4, _GREEN), ("FP64", 2, _ORANGE))
        gx = px + 0.2
        for name, ncol, colour in groups:
            for cc in range(ncol):
                for rr in range(8):
                    ax.add_patch(Rectangle((gx + cc * lane, ly0 + rr * lane), lane * 0.9,
                                           lane * 0.9, fc=colour, ec="none"))
            gx += ncol * lane + 0.12
        _box(ax, gx + 0.05, ly0, pw - (gx - px) - 0.25, 8 * lane - 0.02,
             "tensor core\n(4th generation)", fc=_VERMILION, fontsize=8, color="white",
             weight="bold")
        # LD/ST and SFU
        sy = py + 0.08
        for k in range(8):
            _box(ax, px + 0.2 + k * 0.47, sy, 0.42, 0.28, "LD/ST", fc=_LIGHT, fontsize=5.5,
                 rounded=False)
        _box(ax, px + 0.2 + 8 * 0.47 + 0.1, sy, pw - (8 * 0.47 + 0.55), 0.28, "SFU (4 lanes)",
             fc=_LIGHT, fontsize=6.5, rounded=False)

    by = 0.25
    lx = 0.45
    for name, n, colour in (("INT32 lane", 16, _SKY), ("FP32 lane (a \"CUDA core\")", 32, _GREEN),
                            ("FP64 lane", 16, _ORANGE)):
        ax.add_patch(Rectangle((lx, by + 1.08), 0.22, 0.22, fc=colour, ec="none"))
        ax.text(lx + 0.3, by + 1.19, f"{name}: {n} per sub-partition, {4 * n} per SM", fontsize=7.5,
                va="center")
        lx += 3.85
    _box(ax, 0.4, by + 0.55, width - 0.8, 0.42, "Tensor Memory Accelerator (TMA)", fc=_LIGHT,
         fontsize=8.5)
    _box(ax, 0.4, by, 8.6, 0.48, "256 KB L1 data cache / shared memory (up to 228 KB as shared memory)",
         fc=_SKY, fontsize=8.5)
    for k in range(4):
        _box(ax, 9.15 + k * 0.6, by, 0.52, 0.48, "Tex", fc=_LIGHT, fontsize=7)
    return fig


# --------------------------------------------------------------------------------------------------
# Memory hierarchy
# --------------------------------------------------------------------------------------------------

def memory_hierarchy(gpus: tuple[str, ...] = ()) -> Figure:
    """The data memory hierarchy as a pyramid, with each level's scope, and its size on ``gpus``.

    Registers and L1/shared memory are per SM; L2 and device memory (HBM or GDDR DRAM) are per GPU.
    The L0 (per sub-partition) and L1 instruction caches hold instructions, not data, and are noted
    beside the pyramid. Without ``gpus`` the figure is narrow enough to read on a phone; the chapter
    gives the sizes in a table beside it.
    """
    unknown = [g for g in gpus if g not in MEMORY_SIZES]
    if unknown:
        raise ValueError(f"unknown GPU(s) {unknown}; known: {sorted(MEMORY_SIZES)}")
    width = 7.6 + 2.3 * len(gpus)
    height = 6.6
    fig, ax = _new_figure(width, height)
    levels = (
        ("registers", "per thread (private);\nfile is per SM", "registers_per_sm", _PURPLE),
        ("L1 data cache /\nshared memory", "per SM; shared memory\nis split among its blocks",
         "l1_shared_per_sm", _SKY),
        ("L2 cache", "whole GPU, on the chip", "l2", _YELLOW),
        ("device memory\n(global, local)", "whole GPU; DRAM off the\nchip (HBM: in the package,\nGDDR: on the board)", "dram", _ORANGE),
    )
    apex_x, base_half = 2.75, 1.95
    top, bottom = height - 0.9, 0.5
    lh = (top - bottom) / len(levels)
    for k, (name, scope, attr, colour) in enumerate(levels):
        y1 = top - k * lh
        y0 = y1 - lh
        def half(y):
            return base_half * (top - y) / (top - bottom) + 0.35
        poly = Polygon([(apex_x - half(y0), y0), (apex_x + half(y0), y0),
                        (apex_x + half(y1), y1), (apex_x - half(y1), y1)],
                       closed=True, fc=colour, ec="white", lw=2)
        ax.add_patch(poly)
        ax.text(apex_x, (y0 + y1) / 2, name, ha="center", va="center", fontsize=10, weight="bold")
        ax.text(5.2, (y0 + y1) / 2, scope, ha="left", va="center", fontsize=10)
        for j, g in enumerate(gpus):
            spec = MEMORY_SIZES[g]
            text = getattr(spec, attr)
            if attr == "registers_per_sm":
                text = text.replace(" (", "\n(") + "\nper SM"
            elif attr == "l1_shared_per_sm":
                text = text.replace(" (", "\n(") + "\nper SM"
            elif attr == "dram":
                text = f"{text}\n{spec.dram_bandwidth}"
            ax.text(7.75 + 2.3 * j, (y0 + y1) / 2, text, ha="left", va="center", fontsize=9)
        ax.plot([5.15, width - 0.1], [y0, y0], color="#DDDDDD", lw=0.8)
    for j, g in enumerate(gpus):
        ax.text(7.75 + 2.3 * j, top + 0.25, f"{g}\n({MEMORY_SIZES[g].sms} SMs)", ha="left",
                va="bottom", fontsize=10, weight="bold")
    ax.text(5.2, top + 0.25, "scope", ha="left", va="bottom", fontsize=10, weight="bold")
    _arrow(ax, (0.25, bottom), (0.25, top), lw=1.3)
    ax.text(0.12, (top + bottom) / 2, "smaller, faster, closer to the lanes", rotation=90,
            ha="center", va="center", fontsize=9.5)
    ax.text(0.3, 0.05,
            "Instruction caches (L0 per sub-partition, L1 per SM) hold\ninstructions, not data, "
            "so they are not part of this pyramid.",
            ha="left", va="center", fontsize=9.5, style="italic")
    return fig
