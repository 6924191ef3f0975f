"""Figures and small models for the "SIMT and warps" chapter. No function needs a GPU.

- :func:`warp_of`: the warp and lane of a thread of a 1-, 2- or 3-D block (linear index, x fastest).
- :func:`warp_layout`: a 2-D block drawn thread by thread, coloured by warp.
- :func:`simulate_scheduler`: a toy warp scheduler (one issue per cycle, loads with a fixed latency).
- :func:`scheduler_timeline`: two runs of that model side by side, few warps and many warps.
- :func:`issue_utilization`: the closed form the toy model follows, ``min(1, W (c + 1) / (c + L))``.
- :func:`occupancy_dials`: measured bandwidth against resident warps per SM, occupancy set by shared
  memory and by registers, on one axis.

The scheduling model is a teaching model, not a simulator of a real SM: one scheduler, one
instruction per cycle, every instruction taking one issue cycle, and a load whose result is needed
``latency`` cycles after it was issued. Real schedulers (four per SM on the T4 and the H100, up to 8
and 16 resident warps each) have many more reasons to stall; the chapter says which.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

__all__ = ["warp_of", "warp_layout", "SchedulerRun", "simulate_scheduler", "scheduler_timeline",
           "issue_utilization", "occupancy_dials"]

_COLOURS = ("#56B4E9", "#E69F00", "#009E73", "#CC79A7", "#F0E442", "#0072B2", "#D55E00", "#999999")
WARP_SIZE = 32


def warp_of(tx: int, ty: int = 0, tz: int = 0, block: tuple[int, ...] = (32,)) -> tuple[int, int]:
    """(warp, lane) of thread (tx, ty, tz) in a block of shape ``block`` = (x, y, z) (y, z optional)."""
    bx, by, bz = (tuple(block) + (1, 1))[:3]
    if not (0 <= tx < bx and 0 <= ty < by and 0 <= tz < bz):
        raise ValueError(f"thread ({tx}, {ty}, {tz}) is outside a block of {bx} x {by} x {bz}")
    tid = tx + ty * bx + tz * bx * by
    return tid // WARP_SIZE, tid % WARP_SIZE


def warp_layout(block: tuple[int, int] = (24, 4), second: tuple[int, int] | None = (20, 5)) -> Figure:
    """One (or two) 2-D blocks, one square per thread, coloured by the warp the thread belongs to.

    With ``blockDim.x`` not a multiple of 32 a warp spans rows, and the last warp of a block whose
    size is not a multiple of 32 is partly empty.
    """
    blocks = [block] + ([second] if second else [])
    fig, axes = plt.subplots(1, len(blocks), figsize=(5.2 * len(blocks), 3.4), squeeze=False)
    for ax, (bx, by) in zip(axes[0], blocks):
        warps = np.array([[warp_of(x, y, 0, (bx, by))[0] for x in range(bx)] for y in range(by)])
        n_warps = -(-(bx * by) // WARP_SIZE)
        cmap = ListedColormap([_COLOURS[w % len(_COLOURS)] for w in range(n_warps)])
        ax.imshow(warps, cmap=cmap, vmin=-0.5, vmax=n_warps - 0.5, aspect="equal")
        for y in range(by):
            for x in range(bx):
                lane = warp_of(x, y, 0, (bx, by))[1]
                ax.text(x, y, str(lane), ha="center", va="center", fontsize=6)
        ax.set_xticks(range(0, bx, 4))
        ax.set_yticks(range(by))
        ax.set_xlabel("threadIdx.x")
        ax.set_ylabel("threadIdx.y")
        idle = n_warps * WARP_SIZE - bx * by
        ax.set_title(f"blockDim = ({bx}, {by}): {bx * by} threads, {n_warps} warps"
                     + (f", {idle} idle lanes" if idle else ""), fontsize=9)
        ax.legend(handles=[Patch(color=_COLOURS[w % len(_COLOURS)], label=f"warp {w}") for w in range(n_warps)],
                  loc="upper center", bbox_to_anchor=(0.5, -0.42), ncol=n_warps, fontsize=7, frameon=False)
    fig.suptitle("Numbers are lanes; colours are warps (linear index, threadIdx.x fastest)", fontsize=10)
    fig.tight_layout()
    plt.close(fig)
    return fig


@dataclass
class SchedulerRun:
    """The outcome of :func:`simulate_scheduler`.

    ``states[w, t]`` is 0 when warp ``w`` waits for a load in cycle ``t``, 1 when it is eligible but
    not chosen, 2 when the scheduler issues its instruction, 3 when it has finished.
    """

    warps: int
    latency: int
    compute: int
    states: np.ndarray

    @property
    def cycles(self) -> int:
        return self.states.shape[1]

    @property
    def issued(self) -> int:
        return int((self.states == 2).sum())

    @property
    def utilization(self) -> float:
        """Fraction of cycles in which the scheduler issued an instruction."""
        return self.issued / self.cycles if self.cycles else 0.0


def simulate_scheduler(warps: int, latency: int, compute: int = 3, cycles: int = 60,
                       loads: int | None = None) -> SchedulerRun:
    """A toy scheduler: each warp repeats (``compute`` arithmetic instructions, then one load whose
    result the next instruction needs ``latency`` cycles later). Every cycle the scheduler issues
    one instruction: of the same warp as in the previous cycle if it can issue, else of the eligible warp
    that has waited longest (a "greedy, then oldest" policy). With
    ``loads`` set, every warp stops after that many loads (plus the final compute block).
    """
    if warps < 1 or latency < 1 or compute < 0 or cycles < 1:
        raise ValueError("warps and latency must be >= 1, compute >= 0, cycles >= 1")
    ready_at = np.zeros(warps, dtype=int)      # first cycle the warp may issue again
    position = np.zeros(warps, dtype=int)      # instructions issued in the current (compute + load) round
    done_loads = np.zeros(warps, dtype=int)
    last_issue = np.full(warps, -1, dtype=int)
    finished = np.zeros(warps, dtype=bool)
    states = np.zeros((warps, cycles), dtype=int)
    previous = None
    for t in range(cycles):
        eligible = [w for w in range(warps) if not finished[w] and ready_at[w] <= t]
        if previous in eligible:                      # greedy: stay with the warp issued last cycle
            chosen = previous
        else:                                         # then the one that has waited longest
            chosen = min(eligible, key=lambda w: (last_issue[w], w)) if eligible else None
        previous = chosen
        for w in range(warps):
            states[w, t] = 3 if finished[w] else (1 if w in eligible else 0)
        if chosen is None:
            continue
        states[chosen, t] = 2
        last_issue[chosen] = t
        if position[chosen] < compute:                 # an arithmetic instruction
            position[chosen] += 1
            ready_at[chosen] = t + 1
            if loads is not None and done_loads[chosen] >= loads and position[chosen] == compute:
                finished[chosen] = True
        else:                                          # the load: the next instruction waits for it
            position[chosen] = 0
            done_loads[chosen] += 1
            ready_at[chosen] = t + latency
    return SchedulerRun(warps, latency, compute, states)


def issue_utilization(warps: int, latency: int, compute: int = 3) -> float:
    """Steady-state issue rate of the toy model: a warp's round is ``compute + 1`` instructions
    and lasts ``compute + latency`` cycles when it never has to wait for the scheduler, so ``W`` warps
    keep it busy a fraction ``min(1, W (compute + 1) / (compute + latency))`` of the cycles."""
    return min(1.0, warps * (compute + 1) / (compute + latency))


def scheduler_timeline(few: int = 2, many: int = 8, latency: int = 20, compute: int = 3,
                       cycles: int = 60) -> Figure:
    """Two runs of :func:`simulate_scheduler` with ``few`` and ``many`` warps, one row per warp."""
    cmap = ListedColormap(["#D55E00", "#F0E442", "#009E73", "#FFFFFF"])
    runs = [simulate_scheduler(w, latency, compute, cycles) for w in (few, many)]
    fig, axes = plt.subplots(2, 1, figsize=(10, 1.2 + 0.33 * (few + many)),
                             gridspec_kw={"height_ratios": [few + 1, many + 1]})
    for ax, run in zip(axes, runs):
        ax.imshow(run.states, cmap=cmap, vmin=-0.5, vmax=3.5, aspect="auto", interpolation="nearest")
        ax.set_yticks(range(run.warps))
        ax.set_yticklabels([f"warp {w}" for w in range(run.warps)], fontsize=7)
        ax.set_title(f"{run.warps} warps, load latency {latency} cycles, {compute} arithmetic "
                     f"instructions per load: the scheduler issues in {100 * run.utilization:.0f} % "
                     f"of the cycles", fontsize=9)
    axes[-1].set_xlabel("cycle")
    fig.legend(handles=[Patch(color="#009E73", label="issues this cycle"),
                        Patch(color="#F0E442", label="eligible, not chosen"),
                        Patch(color="#D55E00", label="waiting for its load")],
               loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    plt.close(fig)
    return fig


def _measured(records: Sequence[Mapping[str, Any]], x: str, y: str) -> list[Mapping[str, Any]]:
    """The records that have a number for both ``x`` and ``y``, in order of ``x``."""
    good = [r for r in records if isinstance(r.get(x), (int, float)) and isinstance(r.get(y), (int, float))]
    return sorted(good, key=lambda r: r[x])


def occupancy_dials(shared: Sequence[Mapping[str, Any]], registers: Sequence[Mapping[str, Any]],
                    ceiling: float | None = None, y: str = "GB/s") -> Figure:
    """Bandwidth against resident warps per SM for the two ways the chapter sets occupancy.

    ``shared``: records with ``warps_per_sm`` and ``y`` (occupancy set by unused dynamic shared
    memory), drawn as a line. ``registers``: records with ``warps/SM``, ``registers/thread`` and
    ``y`` (occupancy set by registers per thread), drawn as points labelled with their register
    counts; points at the same number of warps share one label. Records without a value (a note
    instead) are left out. ``ceiling``: a horizontal line, such as the copy ceiling.
    """
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    line = _measured(shared, "warps_per_sm", y)
    if line:
        ax.plot([r["warps_per_sm"] for r in line], [r[y] for r in line], "-o", color=_COLOURS[5],
                markersize=5, label="occupancy set by shared memory")
    points = _measured(registers, "warps/SM", y)
    if points:
        ax.plot([r["warps/SM"] for r in points], [r[y] for r in points], "D", color=_COLOURS[6],
                markersize=7, markerfacecolor="none", markeredgewidth=1.5, label="occupancy set by registers")
        by_warps: dict[float, list[Mapping[str, Any]]] = {}
        for r in points:
            by_warps.setdefault(r["warps/SM"], []).append(r)
        for warps, group in by_warps.items():
            regs = sorted({r.get("registers/thread") for r in group if r.get("registers/thread") is not None})
            if not regs:
                continue
            text = f"{regs[0]}" if len(regs) == 1 else f"{regs[0]}-{regs[-1]}"
            ax.annotate(f"{text} regs", (warps, max(r[y] for r in group)), textcoords="offset points",
                        xytext=(6, -12), fontsize=7, color=_COLOURS[6])
    if ceiling:
        ax.axhline(ceiling, color="#999999", linestyle="--", linewidth=1)
        ax.annotate("copy ceiling", (0, ceiling), xycoords=("axes fraction", "data"), textcoords="offset points",
                    xytext=(4, 3), fontsize=8, color="#666666")
    ax.set_xlabel("resident warps per SM")
    ax.set_ylabel(y)
    ax.set_ylim(bottom=0)
    widest = max([r["warps_per_sm"] for r in line] + [r["warps/SM"] for r in points], default=0)
    ax.set_xlim(0, widest * 1.12 if widest else None)  # room for the labels of the last points
    ax.grid(alpha=0.3)
    ax.set_title("Bandwidth follows the resident warps, whichever resource limits them", fontsize=10)
    if line or points:
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    plt.close(fig)
    return fig
