"""Figures and small pure helpers for the "DRAM bursts" chapter.

The helpers are plain arithmetic (no GPU): which 32-byte sectors and 128-byte lines a warp's request
touches, and Little's law for memory (bytes in flight = bandwidth x latency). The figures are drawn
with matplotlib: a DRAM bank with its row buffer and the ACTIVATE -> READ -> PRECHARGE sequence, and
a warp request cut into sectors.
"""
from __future__ import annotations

from collections.abc import Sequence

from ...traffic import sectors as sector_model
from ...traffic.sectors import LINE_BYTES, SECTOR_BYTES

__all__ = ["SECTOR_BYTES", "LINE_BYTES", "WARP", "sectors_touched", "lines_touched",
           "bytes_in_flight_needed", "littles_law_gbps", "implied_latency_ns",
           "dram_bank_figure", "warp_sectors_figure"]

WARP = 32


def _request(start_byte: int, bytes_per_thread: int, threads: int) -> list[int]:
    """Byte addresses of a contiguous request: thread ``t`` starts at ``start + t * bytes_per_thread``."""
    if bytes_per_thread <= 0 or threads <= 0:
        raise ValueError("bytes_per_thread and threads must be positive")
    if start_byte < 0:
        raise ValueError("start_byte must not be negative")
    return [start_byte + t * bytes_per_thread for t in range(threads)]


def sectors_touched(start_byte: int, bytes_per_thread: int, threads: int = WARP) -> list[int]:
    """Indices of the 32-byte sectors that ``threads`` consecutive threads touch when thread ``t``
    accesses bytes ``[start + t*w, start + (t+1)*w)`` (a contiguous, coalesced warp request; the
    sector model of ``kernels.traffic.sectors``)."""
    return sector_model.sectors_touched(_request(start_byte, bytes_per_thread, threads), bytes_per_thread)


def lines_touched(start_byte: int, bytes_per_thread: int, threads: int = WARP) -> list[int]:
    """Indices of the 128-byte cache lines the same request touches."""
    return sector_model.lines_touched(_request(start_byte, bytes_per_thread, threads), bytes_per_thread)


def bytes_in_flight_needed(gbps: float, latency_ns: float) -> float:
    """Little's law: bytes that must be requested and not yet returned to sustain ``gbps`` when
    each request takes ``latency_ns``. (1 GB/s x 1 ns = 1 byte.)"""
    if gbps < 0 or latency_ns < 0:
        raise ValueError("bandwidth and latency must not be negative")
    return gbps * latency_ns


def littles_law_gbps(bytes_in_flight_per_sm: float, sm_count: int, latency_ns: float,
                     ceiling_gbps: float | None = None, copy: bool = True) -> float:
    """Bandwidth that ``bytes_in_flight_per_sm`` outstanding load bytes on each SM can sustain.

    Loads are what a thread waits for; a copy writes as many bytes as it reads, so with
    ``copy=True`` the result counts read + write (twice the read rate), like ``kernels.gbps`` does
    for a copy. Capped at ``ceiling_gbps`` when given.
    """
    if latency_ns <= 0:
        raise ValueError("latency must be positive")
    rate = sm_count * bytes_in_flight_per_sm / latency_ns * (2 if copy else 1)
    return min(rate, ceiling_gbps) if ceiling_gbps is not None else rate


def implied_latency_ns(gbps: float, bytes_in_flight_per_sm: float, sm_count: int,
                       copy: bool = True) -> float:
    """The latency for which Little's law gives the measured ``gbps`` (inverse of littles_law_gbps)."""
    if gbps <= 0:
        raise ValueError("bandwidth must be positive")
    return sm_count * bytes_in_flight_per_sm / gbps * (2 if copy else 1)


# --------------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------------


def dram_bank_figure():
    """A DRAM bank (cell array, row decoder, row buffer, column mux) and a command timeline."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Rectangle

    fig, (ax, at) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [1, 1.35]})

    # --- the bank ---------------------------------------------------------------------------------
    rows, cols, open_row = 8, 16, 5
    x0, y0, cw, ch = 2.0, 3.0, 0.42, 0.42
    for r in range(rows):
        for c in range(cols):
            face = "#f4b183" if r == open_row else "#dde7f3"
            ax.add_patch(Rectangle((x0 + c * cw, y0 + (rows - 1 - r) * ch), cw, ch, fc=face, ec="white", lw=0.8))
    ax.text(x0 + cols * cw / 2, y0 + rows * ch + 0.25, "cell array (1 transistor + 1 capacitor per bit)",
            ha="center", fontsize=9)
    ax.add_patch(Rectangle((0.3, y0), 1.4, rows * ch, fc="#e2e2e2", ec="black"))
    ax.text(1.0, y0 + rows * ch / 2, "row\ndecoder", ha="center", va="center", fontsize=9)
    ax.add_patch(FancyArrowPatch((-1.5, y0 + (rows - 1 - open_row) * ch + ch / 2),
                                 (0.3, y0 + (rows - 1 - open_row) * ch + ch / 2), arrowstyle="-|>", mutation_scale=12))
    ax.text(-1.7, y0 + (rows - 1 - open_row) * ch + ch / 2 + 0.2, "row\naddress", fontsize=8, ha="left", va="bottom")
    # row buffer
    ax.add_patch(Rectangle((x0, 1.9), cols * cw, 0.7, fc="#f4b183", ec="black"))
    ax.text(x0 + 0.1, 2.25, "row buffer\n(sense amps)", ha="left", va="center", fontsize=8)
    ax.add_patch(FancyArrowPatch((x0 + 1.5 * cw, y0), (x0 + 1.5 * cw, 2.6), arrowstyle="<|-|>",
                                 mutation_scale=12, color="#c55a11"))
    ax.text(x0 + cols * cw + 0.15, 2.85, "ACTIVATE: row -> buffer\nPRECHARGE: restore,\nclose the row",
            fontsize=7.5, color="#c55a11", va="center")
    # column mux
    ax.add_patch(Rectangle((x0 + 2 * cw, 0.9), (cols - 4) * cw, 0.6, fc="#e2e2e2", ec="black"))
    ax.text(x0 + cols * cw / 2, 1.2, "column select (mux)", ha="center", va="center", fontsize=9)
    ax.add_patch(Rectangle((x0 + 6 * cw, 1.9), 4 * cw, 0.7, fill=False, ec="#1f4e79", lw=2.2))
    ax.add_patch(FancyArrowPatch((x0 + 8 * cw, 1.9), (x0 + 8 * cw, 1.5), arrowstyle="-|>", mutation_scale=10, color="#1f4e79"))
    ax.add_patch(FancyArrowPatch((x0 + cols * cw / 2, 0.9), (x0 + cols * cw / 2, 0.15), arrowstyle="-|>",
                                 mutation_scale=12, color="#1f4e79"))
    ax.text(x0 + cols * cw / 2 + 0.15, 0.35, "one burst on the pins\n(e.g. 16 bits x 16 beats = 32 B)", fontsize=8,
            color="#1f4e79", va="center")
    ax.text(x0 + cols * cw + 0.1, 1.2, "column\naddress", fontsize=8, va="center")
    ax.set_xlim(-1.8, x0 + cols * cw + 1.9)
    ax.set_ylim(0, y0 + rows * ch + 0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("one bank: only the open row can be read or written", fontsize=10)

    # --- the timeline -----------------------------------------------------------------------------
    cmd_y, data_y = 1.6, 0.6
    cmds = [(0, "ACT\nrow r", "#c55a11"), (4, "RD\ncol a", "#1f4e79"), (6, "RD\ncol b", "#1f4e79"),
            (10, "PRE", "#7f7f7f"), (13, "ACT\nrow s", "#c55a11"), (17, "RD\ncol c", "#1f4e79")]
    for t, label, color in cmds:
        at.add_patch(Rectangle((t, cmd_y), 1.6, 0.55, fc=color, ec="black", alpha=0.85))
        at.text(t + 0.8, cmd_y + 0.27, label, ha="center", va="center", fontsize=7.5, color="white")
    for t in (4, 6, 17):   # data appears CL after each READ; each burst is one column access
        at.add_patch(Rectangle((t + 3, data_y), 2.0, 0.5, fc="#9dc3e6", ec="black"))
        at.text(t + 4, data_y + 0.25, "burst", ha="center", va="center", fontsize=7.5)

    def span(a, b, y, text):
        at.annotate("", xy=(a, y), xytext=(b, y), arrowprops=dict(arrowstyle="<->", lw=0.9))
        at.text((a + b) / 2, y + 0.08, text, ha="center", va="bottom", fontsize=7.5)

    span(0, 4, 2.25, "tRCD")
    span(4, 7, 2.25, "CL")
    span(10, 13, 2.25, "tRP")
    at.text(-3.0, 3.05, "row hit: the second READ uses the open row, no new ACTIVATE", fontsize=8, ha="left")
    at.text(-3.0, 2.8, "row miss: PRECHARGE closes row r, ACTIVATE opens row s, then READ", fontsize=8, ha="left")
    at.text(-0.3, cmd_y + 0.27, "commands", ha="right", va="center", fontsize=8)
    at.text(-0.3, data_y + 0.25, "data pins", ha="right", va="center", fontsize=8)
    at.set_xlim(-3.2, 22.5)
    at.set_ylim(0.2, 3.35)
    at.set_yticks([])
    at.set_xticks([])
    for side in ("left", "right", "top"):
        at.spines[side].set_visible(False)
    at.set_xlabel("time (not to scale)")
    at.set_title("the order of commands to one bank", fontsize=10)
    fig.tight_layout()
    plt.close(fig)  # shown once, as the cell's value
    return fig


def warp_sectors_figure(cases: Sequence[tuple[str, int, int]] | None = None):
    """For each (label, start byte, bytes per thread): the bytes a warp requests, the 32-byte
    sectors and the 128-byte lines it touches."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if cases is None:
        cases = [("float, aligned", 0, 4), ("float, start 4 B late", 4, 4),
                 ("char, aligned", 0, 1), ("float4, aligned", 0, 16)]
    span_bytes = max(s + WARP * w for _, s, w in cases)
    span_bytes = -(-span_bytes // LINE_BYTES) * LINE_BYTES
    fig, ax = plt.subplots(figsize=(12, 0.95 * len(cases) + 1.0))
    for row, (label, start, width) in enumerate(cases):
        y = len(cases) - 1 - row
        sectors = sectors_touched(start, width)
        lines = lines_touched(start, width)
        for s in sectors:
            ax.add_patch(Rectangle((s * SECTOR_BYTES, y + 0.05), SECTOR_BYTES, 0.6, fc="#fbe5d6", ec="#c55a11", lw=1))
        ax.add_patch(Rectangle((start, y + 0.2), WARP * width, 0.3, fc="#2e75b6", ec="none"))
        for line in range(span_bytes // LINE_BYTES + 1):
            ax.plot([line * LINE_BYTES] * 2, [y - 0.02, y + 0.72], color="black", lw=1.4)
        ax.text(-8, y + 0.35, label, ha="right", va="center", fontsize=9)
        ax.text(span_bytes + 8, y + 0.35,
                f"{WARP * width} B asked for: {len(sectors)} sector{'s' if len(sectors) > 1 else ''} "
                f"({len(sectors) * SECTOR_BYTES} B), {len(lines)} line{'s' if len(lines) > 1 else ''}",
                va="center", fontsize=8.5)
    for b in range(0, span_bytes + 1, SECTOR_BYTES):
        ax.plot([b, b], [-0.05, len(cases)], color="#bfbfbf", lw=0.5, zorder=0)
    ax.set_xlim(-150, span_bytes + 330)
    ax.set_ylim(-0.3, len(cases))
    ax.set_yticks([])
    ax.set_xticks(range(0, span_bytes + 1, LINE_BYTES))
    ax.set_xlabel("byte address (thin lines: 32-byte sectors; thick lines: 128-byte cache lines)")
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title("one warp-wide load: blue = bytes the 32 threads ask for, orange = the 32-byte sectors "
                 "it requests", fontsize=10)
    fig.tight_layout()
    plt.close(fig)  # shown once, as the cell's value
    return fig
