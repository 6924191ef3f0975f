"""The roofline: how fast a kernel *could* be, given how many FLOPs it does per byte it moves.

A kernel doing I FLOPs per byte of DRAM traffic can go no faster than I x bandwidth (the slope) and
no faster than the arithmetic peak (the roof). Both lines here come from the measured ceilings, so
a point's percentage says how close the kernel is to what this GPU can actually do.

On the CPU backend the ceilings are the processor's and the points CPU timings: the plot says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from kernels.ceilings import Ceilings

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from kernels.timing import Timing


def attainable_tflops(ai_flop_per_byte: float | np.ndarray, c: Ceilings) -> float | np.ndarray:
    """min(roof, intensity x bandwidth) in TFLOP/s, for a scalar or an array of intensities."""
    ai = np.asarray(ai_flop_per_byte, dtype=np.float64)
    result = np.minimum(c.fma_tflops, ai * c.copy_gbps * 1e9 / 1e12)
    return float(result) if result.ndim == 0 else result


def ridge_point(c: Ceilings) -> float:
    """Intensity (FLOP/byte) below which a kernel is memory-bound and above which compute-bound."""
    return c.fma_tflops * 1e12 / (c.copy_gbps * 1e9)


@dataclass(frozen=True)
class RooflinePoint:
    """One measured kernel: its FLOPs, the DRAM bytes it must move, and its (median) time."""

    label: str
    flops: float
    nbytes: float
    seconds: float

    @classmethod
    def from_timing(cls, label: str, flops: float, nbytes: float, timing: "Timing") -> "RooflinePoint":
        return cls(label, flops, nbytes, timing.seconds)

    @property
    def intensity(self) -> float:
        """FLOPs per byte of DRAM traffic."""
        return self.flops / self.nbytes

    @property
    def achieved_tflops(self) -> float:
        return self.flops / self.seconds / 1e12

    @property
    def achieved_gbps(self) -> float:
        return self.nbytes / self.seconds / 1e9

    def fraction_of_roof(self, c: Ceilings) -> float:
        """Achieved / attainable at this intensity: 1.0 means on the roofline."""
        return self.achieved_tflops / attainable_tflops(self.intensity, c)


def _check_point(p: RooflinePoint) -> None:
    if p.flops <= 0 or p.nbytes <= 0 or p.seconds <= 0:
        raise ValueError(f"{p.label!r}: flops, nbytes and seconds must all be > 0 to sit on a log-log "
                         "roofline (a pure copy has no FLOPs: compare it with copy_gbps instead)")


def point_label(p: RooflinePoint, c: Ceilings) -> str:
    """"label: N % of roof", or "label: above its roof" when the point beats the roof at the intensity
    it was given: its bytes were counted (requested, say), and caches kept some of them from DRAM, so
    its real intensity is higher than the one it is plotted at."""
    pct = 100 * p.fraction_of_roof(c)
    return f"{p.label}: above its roof" if pct > 100.5 else f"{p.label}: {pct:.0f} % of roof"


def _label_points(ax: "Axes", points: list[RooflinePoint], c: Ceilings, fontsize: float = 8) -> bool:
    """Label every point without overlaps: a label that would cover a text already there (placed from
    the fastest point down) moves to the nearest clear height, alternately below and above its point,
    joined to it by a thin line. Returns whether any point is above its roof."""
    from matplotlib.text import Text

    renderer = ax.figure.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)

    def words(label: Any) -> Any:
        """The extent of a label's words in pixels (an annotation's own extent includes its line)."""
        if hasattr(label, "update_positions"):
            label.update_positions(renderer)
        return Text.get_window_extent(label, renderer)

    placed = [words(t) for t in ax.texts]                              # e.g. the ridge's label
    above = False
    for p in sorted(points, key=lambda q: -q.achieved_tflops):
        text = point_label(p, c)
        above |= text.endswith("above its roof")
        label = ax.annotate(text, (p.intensity, p.achieved_tflops), xytext=(6, 3), textcoords="offset points",
                            fontsize=fontsize, va="center", arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "gray"})
        step = words(label).height * 72 / ax.figure.dpi + 1            # one line, in points
        for k in range(60):
            offset = 3.0 + step * ((k + 1) // 2) * (-1 if k % 2 else 1)   # 0, -1, +1, -2, +2, ... lines
            label.set_position((6, offset))
            box = words(label)
            inside = frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(other) for other in placed):
                break
        label.arrow_patch.set_visible(offset != 3.0)                   # beside its point: no line needed
        placed.append(words(label))
    return above


def roofline_plot(c: Ceilings, points: Iterable[RooflinePoint] = (), ax: "Axes | None" = None,
                  title: str | None = None) -> "Figure":
    """Log-log roofline from measured ceilings, with each point labelled by % of its attainable roof."""
    import matplotlib.pyplot as plt

    points = list(points)
    for p in points:
        _check_point(p)
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
    else:
        fig = ax.figure
    ridge = ridge_point(c)
    intensities = [p.intensity for p in points] + [ridge]
    x_lo = 10 ** np.floor(np.log10(min(intensities) / 4))
    x_hi = 10 ** np.ceil(np.log10(max(intensities) * 4))
    # Both roofs are straight lines on log-log axes, so their end points draw them exactly.
    ax.plot([x_lo, ridge], attainable_tflops(np.array([x_lo, ridge]), c), color="tab:blue", lw=2,
            label=f"copy bandwidth {c.copy_gbps:.0f} GB/s", gid="bandwidth")
    ax.plot([ridge, x_hi], [c.fma_tflops, c.fma_tflops], color="tab:red", lw=2,
            label=f"FP32 FMA {c.fma_tflops:.1f} TFLOP/s", gid="compute")
    ax.axvline(ridge, color="gray", ls=":", lw=1)
    ax.plot([ridge], [c.fma_tflops], "D", color="gray", ms=5, gid="ridge")
    ax.annotate(f"ridge {ridge:.1f} FLOP/B", (ridge, c.fma_tflops), xytext=(-6, 6), ha="right",
                textcoords="offset points", fontsize=8, color="gray")   # above the slope, clear of the points
    for p in points:
        ax.plot([p.intensity], [p.achieved_tflops], "o", color="black", gid=f"point:{p.label}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    y_lo = min([attainable_tflops(x_lo, c)] + [p.achieved_tflops for p in points]) / 2
    ax.set_ylim(y_lo, c.fma_tflops * 2)
    above = _label_points(ax, points, c)
    if above:   # the roof at a counted intensity: reaching above it means fewer bytes reached DRAM
        ax.plot([], [], " ", label="above its roof: caches served some\nof the bytes counted for it")
    ax.set_xlabel("arithmetic intensity (FLOP / byte of DRAM traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title if title is not None else f"Roofline: {c.device} (measured ceilings)")
    if c.on_cpu_backend:
        from kernels.timing import label_cpu_axes, note_cpu_timing

        label_cpu_axes(ax)
        note_cpu_timing()
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(loc="lower right", fontsize=8)
    return fig
