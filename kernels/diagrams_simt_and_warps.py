"""Figures and small models for the "SIMT and warps" chapter. No function needs a GPU.

- :func:`warp_of`: the warp and lane of a thread of a 1-, 2- or 3-D block (linear index, x fastest).
- :func:`warp_layout`: a 2-D block drawn thread by thread, coloured by warp.
- :func:`simulate_scheduler`: a toy warp scheduler (one issue per cycle, loads with a fixed latency).
- :func:`scheduler_timeline`: two runs of that model side by side, few warps and many warps.
- :func:`issue_utilization`: the closed form the toy model follows, ``min(1, W (c + 1) / (c + L))``.

The scheduling model is a teaching model, not a simulator of a real SM: one scheduler, one
instruction per cycle, every instruction taking one issue cycle, and a load whose result is needed
``latency`` cycles after it was issued. Real schedulers (four per SM on the T4 and the H100, up to 8
and 16 resident warps each) have many more reasons to stall; the chapter says which.
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch

__all__ = ["warp_of", "warp_layout", "SchedulerRun", "simulate_scheduler", "scheduler_timeline",
           "issue_utilization"]

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
