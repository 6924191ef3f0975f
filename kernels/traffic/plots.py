"""Pictures of recorded memory traffic for the book (matplotlib figures, rendered as static PNGs).

- ``warp_sectors``: one warp's global request, each lane's bytes laid over the 32-byte sectors and
  128-byte lines it touches (only the lines touched are drawn, one row each);
- ``bank_grid``: one warp's shared-memory request as a lane-by-bank grid, the words of one bank in
  different colours, so a k-way conflict shows as k colours in a column;
- ``sectors_heatmap``: per source line, how many requests touched 1, 2, ... 32 sectors;
- ``thread_map``: for a small launch, which thread read and which wrote every element of an array
  (in the manner of GPU Puzzles).

Each function returns a ``matplotlib.figure.Figure`` (not registered with pyplot, so a notebook
shows it once, where it is returned), or draws into ``ax`` when one is given.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..cpu import abi
from .banks import BANKS, lanes_per_phase

if TYPE_CHECKING:
    from .report import TrafficReport

LANE_COLORS = "viridis"
WORD_COLORS = ("#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6",
               "#9d755d", "#bab0ac")


def _figure(ax: Any, width: float, height: float) -> tuple[Any, Any]:
    if ax is not None:
        return ax.figure, ax
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def _lane_text(lanes: list[int]) -> str:
    """"0-7, 9" for a sorted list of lanes."""
    parts, i = [], 0
    while i < len(lanes):
        j = i
        while j + 1 < len(lanes) and lanes[j + 1] == lanes[j] + 1:
            j += 1
        parts.append(str(lanes[i]) if i == j else f"{lanes[i]}-{lanes[j]}")
        i = j + 1
    return ", ".join(parts)


def _request_title(report: "TrafficReport", rid: int) -> str:
    rec, req = report.recording, report.requests
    line = next(r for r in report.lines if r.site == rec.site(int(req.pc[rid])) and r.op == _op_name(req, rid)
                and r.names == report._request_names[rid])
    return (f"{line.site.short} ({line.names}, {line.op}): warp {int(req.warp[rid])} of block "
            f"{rec.block_index(int(req.block[rid]))}")


def _op_name(req: Any, rid: int) -> str:
    from .requests import OP_NAMES

    return OP_NAMES[int(req.op[rid])]


def warp_sectors(report: "TrafficReport", rid: int, ax: Any = None) -> Any:
    """One global request: lanes' bytes over 32-byte sectors, one row per 128-byte line touched."""
    from matplotlib import colormaps
    from matplotlib.patches import Rectangle

    req, acc = report.requests, report.recording.accesses
    members = req.members(rid)
    addr = report.recording.gpu_addresses()[members]
    size = acc["size"][members].astype(np.int64)
    lane = acc["thread"][members].astype(np.int64) & 31
    lines = np.unique(np.concatenate([addr >> 7, (addr + size - 1) >> 7]))
    row = {int(l): i for i, l in enumerate(lines)}
    fig, ax = _figure(ax, 9.0, 0.9 + 0.42 * len(lines))
    touched = set()
    for a, s in zip(addr, size):
        for sec in range(int(a) >> 5, (int(a) + int(s) - 1 >> 5) + 1):
            touched.add(sec)
    for line, y in row.items():
        for k in range(4):
            sec = line * 4 + k
            ax.add_patch(Rectangle((32 * k, y - 0.4), 32, 0.8, facecolor="#dbe8f5" if sec in touched else "white",
                                   edgecolor="#6a7f99", linewidth=1.0))
    cmap = colormaps[LANE_COLORS]
    groups: dict[tuple[int, int], list[int]] = {}
    for a, s, l in zip(addr.tolist(), size.tolist(), lane.tolist()):
        groups.setdefault((a, s), []).append(l)
    for (a, s), ls in groups.items():
        y = row[a >> 7]
        x = a & 127
        ax.add_patch(Rectangle((x, y - 0.25), min(s, 128 - x), 0.5, facecolor=cmap(min(ls) / 32), edgecolor="black",
                               linewidth=0.4))
        if len(groups) <= 40 or len(ls) > 1:
            ax.text(x + min(s, 128 - x) / 2, y, _lane_text(sorted(ls)), ha="center", va="center", fontsize=6,
                    rotation=90 if s < 8 and len(ls) == 1 else 0, color="white" if min(ls) < 20 else "black")
    ax.set_xlim(0, 128)
    ax.set_ylim(len(lines) - 0.5, -0.5)
    ax.set_xticks(range(0, 129, 32))
    ax.set_xlabel("byte within the 128-byte line (boxes: 32-byte sectors; shaded: moved)")
    first = int(lines[0])
    ax.set_yticks(range(len(lines)))
    ax.set_yticklabels([f"line +{(int(l) - first) * 128}" for l in lines], fontsize=7)
    gt = report.global_traffic
    ax.set_title(f"{_request_title(report, rid)}\n{int(req.lanes[rid])} lanes, {int(gt.sectors[rid])} sectors in "
                 f"{int(gt.lines[rid])} lines: {int(gt.bytes_moved[rid])} bytes moved for "
                 f"{int(gt.bytes_unique[rid])} used", fontsize=9)
    return fig


def bank_grid(report: "TrafficReport", rid: int, ax: Any = None) -> Any:
    """One shared request: a cell per (lane, bank) it uses, coloured by which word of the bank it is."""
    from matplotlib.colors import ListedColormap

    rec, req, acc = report.recording, report.requests, report.recording.accesses
    members = req.members(rid)
    addr = acc["addr"][members].astype(np.int64)
    # banks counted from the start of the shared array, as on a GPU (where it starts on a bank-0 word)
    addr = addr - next((s.lo for s in rec.shared if s.lo <= int(addr.min()) < s.hi), 0)
    size = acc["size"][members].astype(np.int64)
    lane = acc["thread"][members].astype(np.int64) & 31
    width = int(req.size[rid])
    per_phase = int(lanes_per_phase(width))
    grid = np.full((32, BANKS), np.nan)
    words_of: dict[tuple[int, int], list[int]] = {}
    cells = []
    for a, s, l in zip(addr.tolist(), size.tolist(), lane.tolist()):
        phase = l // per_phase
        for w in range(a >> 2, (a + max(s, 1) - 1 >> 2) + 1):
            bank = w % BANKS
            seen = words_of.setdefault((phase, bank), [])
            if w not in seen:
                seen.append(w)
            cells.append((l, bank, seen.index(w)))
    for l, bank, k in cells:
        grid[l, bank] = k
    fig, ax = _figure(ax, 7.5, 7.0)
    colors = ListedColormap(WORD_COLORS)
    ax.imshow(np.where(np.isnan(grid), np.nan, grid % len(WORD_COLORS)), cmap=colors, vmin=0,
              vmax=len(WORD_COLORS) - 1, aspect="equal", interpolation="nearest")
    for l, bank, k in cells:
        if k:
            ax.text(bank, l, str(k + 1), ha="center", va="center", fontsize=6, color="white")
    for p in range(1, 32 // per_phase):
        ax.axhline(p * per_phase - 0.5, color="black", linewidth=1.2)
    ax.set_xticks(range(0, BANKS, 4))
    ax.set_yticks(range(0, 32, 4))
    ax.set_xticks(np.arange(-0.5, BANKS, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, 32, 1), minor=True)
    ax.grid(which="minor", color="#dddddd", linewidth=0.4)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("bank (4-byte word index in the array, mod 32)")
    ax.set_ylabel("lane" + (f" ({32 // per_phase} phases of {per_phase} lanes)" if per_phase < 32 else ""))
    bt = report.bank_traffic
    ax.set_title(f"{_request_title(report, rid)}\n{int(bt.ways[rid])}-way: {int(bt.wavefronts[rid])} wavefronts, "
                 f"ideal {int(bt.ideal[rid])} (colour and number: which different word of the bank)", fontsize=9)
    return fig


def sectors_heatmap(report: "TrafficReport", ax: Any = None) -> Any:
    """Rows: global source lines; columns: sectors per request; colour: how many requests."""
    from matplotlib.colors import LogNorm

    req, gt = report.requests, report.global_traffic
    rows = [r for r in report.lines if r.space == "global" and r.op != "atomic"]
    if not rows:
        raise ValueError("this launch made no global loads or stores")
    counts = np.zeros((len(rows), 32), dtype=np.int64)
    sites = np.array([report.recording.site(int(pc)) for pc in req.pc], dtype=object)
    names = np.array(report._request_names, dtype=object)
    from .requests import OP_NAMES

    for i, r in enumerate(rows):
        m = (req.space == abi.SPACE_GLOBAL) & (req.op == OP_NAMES.index(r.op)) & (names == r.names)
        m &= np.array([s == r.site for s in sites])
        counts[i] = np.bincount(np.clip(gt.sectors[m], 1, 32) - 1, minlength=32)[:32]
    fig, ax = _figure(ax, 9.0, 1.2 + 0.35 * len(rows))
    shown = np.where(counts > 0, counts, np.nan)
    image = ax.imshow(shown, aspect="auto", cmap="viridis", norm=LogNorm(vmin=1, vmax=max(2, counts.max())),
                      interpolation="nearest", extent=(0.5, 32.5, len(rows) - 0.5, -0.5))
    for i, r in enumerate(rows):
        ideal = r.ideal_sectors_per_request
        ax.plot([ideal], [i], marker="|", markersize=14, color="crimson", markeredgewidth=2)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r.site.short} {r.names} {r.op}" for r in rows], fontsize=8)
    ax.set_xticks([1, 4, 8, 12, 16, 20, 24, 28, 32])
    ax.set_xlabel("32-byte sectors per request (red mark: the fewest that hold the bytes asked for)")
    fig.colorbar(image, ax=ax, label="requests")
    ax.set_title(f"{report.recording.kernel}: sectors per request, by source line", fontsize=9)
    return fig


def thread_map(report: "TrafficReport", arrays: str | list[str] | None = None, *,
               block: int | tuple[int, ...] = 0, max_cells: int = 4096) -> Any:
    """For one block, which thread read and which wrote every element of the argument arrays: one panel
    per array and kind of access (reads, writes), cells coloured by warp and labelled by thread."""
    from matplotlib import colormaps

    rec = report.recording
    acc = rec.accesses
    known = [r for r in rec.ranges if r.argument >= 0]
    if not known:
        raise ValueError("this launch has no array arguments")
    wanted = [arrays] if isinstance(arrays, str) else arrays
    if wanted is not None:
        missing = [n for n in wanted if n not in {r.name for r in known}]
        if missing:
            raise ValueError(f"no array argument named {', '.join(map(repr, missing))}; the arrays are "
                             f"{', '.join(r.name for r in known)}")
        known = [r for r in known if r.name in wanted]
    bid = block if isinstance(block, (int, np.integer)) else _linear_block(rec, tuple(block))
    if not 0 <= bid < rec.blocks:
        raise ValueError(f"block {block} is outside the grid {rec.grid}")
    panels = []
    for target in known:
        rindex = rec.ranges.index(target)
        count = (target.hi - target.lo) // max(target.itemsize, 1)
        shape = rec.shapes.get(target.argument, (count,))
        if len(shape) != 2:
            cols = min(count, 32)
            shape = (-(-count // cols), cols)
        if shape[0] * shape[1] > max_cells:
            raise ValueError(f"{target.name} has {shape[0] * shape[1]} elements; a thread map draws at most "
                             f"{max_cells} (analyse a smaller launch, or pass max_cells=)")
        m = (acc["range"] == rindex) & (acc["space"] != abi.SPACE_SHARED) & (acc["block"] == bid)
        element = (acc["addr"][m].astype(np.int64) - target.lo) // max(target.itemsize, 1)
        thread = acc["thread"][m].astype(np.int64)
        write = (acc["flags"][m] & abi.ACCESS_WRITE) != 0
        for title, sel in (("read by", ~write), ("written by", write)):
            if sel.any():
                panels.append((target.name, title, shape, element[sel], thread[sel]))
    if not panels:
        raise ValueError(f"block {rec.block_index(bid)} touches none of these arrays")
    fig, axes, fontsize = _thread_map_layout([p[2] for p in panels])
    cmap = colormaps["tab20"]
    for ax, (name, title, shape, element, thread) in zip(axes, panels):
        cells = shape[0] * shape[1]
        first = np.full(cells, -1, dtype=np.int64)
        many = np.zeros(cells, dtype=np.int64)
        for e, t in zip(element.tolist(), thread.tolist()):
            if 0 <= e < cells:
                if first[e] < 0:
                    first[e] = t
                elif first[e] != t:
                    many[e] += 1
        image = np.where(first >= 0, (first >> 5) % 20, np.nan).reshape(shape)
        ax.imshow(image, cmap=cmap, vmin=0, vmax=19, aspect="equal", interpolation="nearest")
        if cells <= 512:
            for e in np.flatnonzero(first >= 0):
                r, c = divmod(int(e), shape[1])
                label = _thread_label(rec, int(first[e])) + (f"\n+{int(many[e])}" if many[e] else "")
                ax.text(c, r, label, ha="center", va="center", fontsize=fontsize)
        ax.set_title(f"{name}: {title}" + (" (+n: n more threads)" if many.any() else ""), fontsize=9)
        if shape[0] == 1:                                        # one row: number the elements
            ax.set_xticks(range(shape[1]), [str(c) for c in range(shape[1])], fontsize=fontsize - 1)
            ax.tick_params(axis="x", length=0, pad=2)
        else:
            ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"{rec.kernel}, block {rec.block_index(bid)}:\nthe thread that touched each element "
                 f"(colour: its warp)", fontsize=10)
    return fig


def _thread_map_layout(shapes: list[tuple[int, int]]) -> tuple[Any, list[Any], float]:
    """A figure with one panel per (rows, cols) shape, cells large enough to read a thread number in.

    Short arrays (a few rows, as a 1-D array wraps into rows of 32) are stacked one above the other, so
    that the figure is not a thin strip as wide as the page; 2-D arrays sit side by side, three to a row.
    Returns the figure, its panels in order and a font size that fits a cell."""
    from matplotlib.figure import Figure

    if all(rows <= 4 for rows, _ in shapes):
        cols = max(c for _, c in shapes)
        cell = min(0.42, 9.0 / cols)                                  # inches per cell
        heights = [rows for rows, _ in shapes]
        fig = Figure(figsize=(max(cell * cols + 0.6, 4.8), cell * sum(heights) + 0.5 * len(shapes) + 0.6),
                     layout="constrained")
        axes = fig.subplots(len(shapes), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
    else:
        per_row = min(3, len(shapes))
        rows_of_panels = -(-len(shapes) // per_row)
        cols = max(c for _, c in shapes)
        cell = min(0.42, 4.2 / cols)
        tallest = max(rows / max(c, 1) for rows, c in shapes)
        fig = Figure(figsize=(min(4.2 * per_row, 14), rows_of_panels * (1.0 + min(4.2 * tallest, 9)) + 0.5),
                     layout="constrained")
        grid = fig.subplots(rows_of_panels, per_row, squeeze=False)
        axes = list(grid.ravel())
        for unused in axes[len(shapes):]:
            unused.set_visible(False)
        axes = axes[:len(shapes)]
    return fig, list(axes), max(5.0, min(9.0, cell * 72 * 0.35))


def _linear_block(rec: Any, index: tuple[int, ...]) -> int:
    x, y, z = (tuple(index) + (0, 0, 0))[:3]
    return x + rec.grid[0] * (y + rec.grid[1] * z)


def _thread_label(rec: Any, linear: int) -> str:
    x, y, z = rec.thread_index(linear)
    if rec.block[1] == 1 and rec.block[2] == 1:
        return str(x)
    return f"{x},{y}" if rec.block[2] == 1 else f"{x},{y},{z}"
