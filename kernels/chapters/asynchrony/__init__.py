"""Helpers for the "Asynchrony" chapter: pipeline arithmetic, timelines drawn from CUDA events,
PCIe link figures, the per-launch plot and the live timeline panel.

Everything here except :func:`timeline_panel` (ipywidgets) runs without a GPU:

- :func:`chunk_bounds`: split ``n`` elements into chunks whose sizes differ by at most one.
- :func:`ideal_pipeline_ms`, :func:`pipeline_summary`: what a perfect H2D -> kernel -> D2H pipeline
  over ``chunks`` chunks would take, and how close a measured one came.
- :func:`pcie_gbps`: the theoretical bandwidth of a PCIe link in one direction.
- :func:`intervals_from_events`: turn recorded (stream, chunk, stage, start event, end event) tuples
  into millisecond intervals relative to a start event (the only GPU-facing function; it only reads
  events that have completed).
- :func:`engine_view`: the same intervals, per stage instead of per stream, with each bar starting no
  earlier than the previous one of its kind ended (an estimate of when each engine was busy).
- :func:`timeline_plot`: both views as one figure.
- :func:`launch_overhead_plot`: microseconds per kernel against the chain length, stream vs graph.
- :func:`timeline_panel`: a live panel (pick streams x chunks, measure, see the timeline) with a
  recorded explorer as the web page's version of the same figure.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Patch

STAGES = ("H2D", "kernel", "D2H")
COLORS = {"H2D": "#1f77b4", "kernel": "#2ca02c", "D2H": "#ff7f0e"}

# PCIe transfer rate per lane (GT/s) and line-code efficiency, by generation (PCI-SIG).
_PCIE = {1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130), 5: (32.0, 128 / 130)}


def chunk_bounds(n: int, chunks: int) -> list[tuple[int, int]]:
    """``chunks`` half-open ranges (start, stop) covering 0..n, sizes differing by at most one.

    The first ``n % chunks`` chunks get one extra element, so any ``n`` works (no chunk is empty
    as long as ``chunks <= n``).
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if not 1 <= chunks <= n:
        raise ValueError(f"chunks must be between 1 and n={n}, got {chunks}")
    base, extra = divmod(n, chunks)
    bounds, start = [], 0
    for c in range(chunks):
        stop = start + base + (1 if c < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def _totals(stage_totals_ms: Mapping[str, float] | Sequence[float]) -> list[float]:
    values = list(stage_totals_ms.values()) if isinstance(stage_totals_ms, Mapping) else list(stage_totals_ms)
    if not values or any(v < 0 for v in values):
        raise ValueError(f"stage times must be non-negative and not empty, got {values}")
    return [float(v) for v in values]


def ideal_pipeline_ms(stage_totals_ms: Mapping[str, float] | Sequence[float], chunks: int) -> float:
    """The time of a perfect pipeline over ``chunks`` equal chunks.

    ``stage_totals_ms`` are the times of each stage for the *whole* data (e.g. H2D, kernel, D2H).
    The slowest stage runs without a break from its first chunk to its last; before it starts and
    after it ends, one chunk passes through each of the other stages. So the ideal is the largest
    total plus the other stages' totals divided by ``chunks``. With one chunk it is the serial time.
    """
    if chunks < 1:
        raise ValueError(f"chunks must be at least 1, got {chunks}")
    totals = _totals(stage_totals_ms)
    longest = max(totals)
    return longest + (sum(totals) - longest) / chunks


def pipeline_summary(serial_ms: float, pipelined_ms: float,
                     stage_totals_ms: Mapping[str, float] | Sequence[float], chunks: int) -> dict[str, float]:
    """Speedup of a measured pipeline, the ideal speedup, and the first as a percentage of the second."""
    if serial_ms <= 0 or pipelined_ms <= 0:
        raise ValueError("times must be positive")
    ideal = ideal_pipeline_ms(stage_totals_ms, chunks)
    speedup = serial_ms / pipelined_ms
    ideal_speedup = serial_ms / ideal
    return {"speedup": speedup, "ideal speedup": ideal_speedup, "ideal_ms": ideal,
            "% of ideal": 100.0 * speedup / ideal_speedup}


def pcie_gbps(gen: int, lanes: int = 16) -> float:
    """Theoretical data rate of a PCIe link in ONE direction, in GB/s (10^9 bytes per second).

    Transfer rate per lane x lanes x line-code efficiency / 8 bits. Packet headers and flow control
    take a further few per cent, so measured copies stay below this.
    """
    if gen not in _PCIE:
        raise ValueError(f"PCIe generation {gen} is not tabulated (1 to 5 are)")
    if lanes not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"a PCIe link has 1, 2, 4, 8, 16 or 32 lanes, not {lanes}")
    rate, efficiency = _PCIE[gen]
    return rate * lanes * efficiency / 8


def intervals_from_events(recorded: Sequence[tuple[int, int, str, Any, Any]], start: Any,
                          elapsed_ms: Callable[[Any, Any], float] | None = None) -> list[dict[str, Any]]:
    """Millisecond intervals from recorded events: one dict (stream, chunk, stage, start, end) each.

    ``recorded`` holds (stream index, chunk index, stage name, event before, event after); times are
    measured from ``start``. ``elapsed_ms`` defaults to ``cupy.cuda.get_elapsed_time``; the events
    must have completed (synchronise first).
    """
    if elapsed_ms is None:
        import cupy

        elapsed_ms = cupy.cuda.get_elapsed_time
    out = []
    for stream, chunk, stage, before, after in recorded:
        out.append({"stream": int(stream), "chunk": int(chunk), "stage": str(stage),
                    "start": float(elapsed_ms(start, before)), "end": float(elapsed_ms(start, after))})
    return out


def engine_view(intervals: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The intervals per stage, each starting no earlier than the previous one of its stage ended.

    An event before a copy fires when its *stream* reaches the copy, which can be long before a copy
    engine is free to start it. If each stage runs one operation at a time (true for a copy engine;
    roughly true for kernels big enough to fill the GPU), clipping every bar to the end of the
    previous bar of the same stage estimates when the engine actually worked on it.
    """
    out = []
    for stage in sorted({str(r["stage"]) for r in intervals}, key=_stage_order):
        mine = sorted((r for r in intervals if r["stage"] == stage), key=lambda r: (r["end"], r["start"]))
        previous_end = float("-inf")
        for r in mine:
            start = max(float(r["start"]), previous_end)
            if start < r["end"]:
                out.append({**r, "start": start})
            previous_end = max(previous_end, float(r["end"]))
    return out


def _stage_order(stage: str) -> tuple[int, str]:
    return (STAGES.index(stage) if stage in STAGES else len(STAGES), stage)


def stage_busy_ms(intervals: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Total time each stage kept its engine busy, from :func:`engine_view` (overlaps counted once)."""
    busy: dict[str, float] = {}
    for r in engine_view(intervals):
        busy[r["stage"]] = busy.get(r["stage"], 0.0) + float(r["end"]) - float(r["start"])
    return busy


def _bars(ax: Any, rows: Sequence[tuple[float, Sequence[Mapping[str, Any]]]], label_chunks: bool) -> None:
    for y, records in rows:
        for r in records:
            width = float(r["end"]) - float(r["start"])
            ax.barh(y, width, left=r["start"], height=0.7, color=COLORS.get(r["stage"], "0.5"),
                    edgecolor="white", linewidth=0.4)
            if label_chunks and width > 0:
                ax.text(float(r["start"]) + width / 2, y, str(r["chunk"]), ha="center", va="center",
                        fontsize=8, color="white", clip_on=True)


def timeline_plot(intervals: Sequence[Mapping[str, Any]], title: str = "", engines: bool = True) -> Figure:
    """A timeline of a pipeline run: one row per stream, and (``engines``) one row per stage below it.

    Bars are coloured by stage and labelled with their chunk number when there are few of them.
    """
    if not intervals:
        raise ValueError("no intervals to draw")
    streams = sorted({int(r["stream"]) for r in intervals})
    stages = sorted({str(r["stage"]) for r in intervals}, key=_stage_order)
    label = len(intervals) <= 3 * 24
    n_axes = 2 if engines else 1
    heights = [max(len(streams), 1) * 0.45 + 0.6] + ([len(stages) * 0.45 + 0.6] if engines else [])
    fig, axes = plt.subplots(n_axes, 1, figsize=(10, sum(heights) + 0.9), sharex=True,
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    ax = axes[0][0]
    _bars(ax, [(i, [r for r in intervals if int(r["stream"]) == s]) for i, s in enumerate(streams)], label)
    ax.set_yticks(range(len(streams)))
    ax.set_yticklabels([f"stream {s}" for s in streams], fontsize=9)
    ax.invert_yaxis()
    ax.set_title(title or "pipeline timeline", fontsize=10)
    if engines:
        ae = axes[1][0]
        view = engine_view(intervals)
        _bars(ae, [(i, [r for r in view if r["stage"] == st]) for i, st in enumerate(stages)], label)
        ae.set_yticks(range(len(stages)))
        ae.set_yticklabels([f"{st} (busy)" for st in stages], fontsize=9)
        ae.invert_yaxis()
    bottom = axes[-1][0]
    bottom.set_xlabel("time since the start event (ms)")
    handles = [Patch(color=COLORS.get(st, "0.5"), label=st) for st in stages]
    # the legend gets its own row under the time axis, so that it never covers the title
    legend_inches = 0.45
    fig.set_figheight(fig.get_figheight() + legend_inches)
    fig.legend(handles=handles, fontsize=9, ncol=len(stages), loc="lower center", frameon=False)
    for a in axes[:, 0]:
        a.grid(axis="x", alpha=0.3)
    fig.tight_layout(rect=(0, legend_inches / fig.get_figheight(), 1, 1))
    plt.close(fig)  # shown once, as the cell's value
    return fig


def launch_overhead_plot(records: Sequence[Mapping[str, Any]], x: str = "chain", y: str = "µs per kernel",
                         series: str = "mode", panel: str = "elements", title: str = "") -> Figure:
    """``y`` against ``x`` (log scale), one line per ``series``, one panel per value of ``panel``."""
    good = [r for r in records if isinstance(r.get(y), (int, float))]
    if not good:
        raise ValueError(f"no records with a value for {y!r}")
    panels = sorted({r.get(panel) for r in good}, key=lambda v: (v is None, v))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.6), squeeze=False)
    for ax, value in zip(axes[0], panels):
        mine = [r for r in good if r.get(panel) == value]
        for name in sorted({str(r.get(series)) for r in mine}):
            pts = sorted((r[x], r[y]) for r in mine if str(r.get(series)) == name)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(f"{x} (kernels launched one after another)")
        ax.set_ylabel(y)
        ax.set_title(f"{panel} = {value}", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    plt.close(fig)
    return fig


def _timeline_title(key: tuple[int, int], summary: Mapping[str, Any]) -> str:
    streams, chunks = key
    parts = [f"{streams} stream(s), {chunks} chunk(s)"]
    if isinstance(summary.get("time_ms"), (int, float)):
        parts.append(f"{summary['time_ms']:.2f} ms")
    if isinstance(summary.get("speedup"), (int, float)):
        parts.append(f"speedup {summary['speedup']:.2f}x")
    if isinstance(summary.get("% of ideal"), (int, float)):
        parts.append(f"{summary['% of ideal']:.0f} % of the ideal speedup")
    return ", ".join(parts)


def timeline_panel(measure: Callable[[int, int], tuple[list[dict[str, Any]], dict[str, Any]]] | None,
                   streams: Sequence[int], chunks: Sequence[int],
                   timelines: dict[tuple[int, int], tuple[list[dict[str, Any]], dict[str, Any]]],
                   sweep: Any = None, fallback_html: str = "", text: str = "",
                   start: tuple[int, int] | None = None) -> None:
    """One output: in a notebook, sliders for streams x chunks that redraw that point's timeline
    (from ``timelines``, or measured on this GPU with the button); on the website, ``fallback_html``.

    ``measure(streams, chunks)`` returns (intervals, summary) and its result is stored in
    ``timelines``. With ``sweep`` (a measured :class:`kernels.Sweep` over the same streams and
    chunks), its live panel comes first and its recorded explorer is the fallback, unless
    ``fallback_html`` is given. Only widgets that exist in ipywidgets 7.7.1 and 8.x are used.
    """
    from ...sweep import display_live, live_panel

    if sweep is not None:
        fallback_html = fallback_html or sweep.explorer().html()
        text = text or sweep.summary()
    if not fallback_html:
        raise ValueError("timeline_panel needs a sweep or a fallback_html for the website")

    try:
        import ipywidgets as w
    except ImportError:
        display_live(None, fallback_html, text)
        return
    from IPython.display import display

    first = start or (streams[0], chunks[0])
    style = {"description_width": "initial"}
    s_ctl = w.SelectionSlider(options=[(str(v), v) for v in streams], value=first[0], description="streams",
                              continuous_update=False, style=style)
    c_ctl = w.SelectionSlider(options=[(str(v), v) for v in chunks], value=first[1], description="chunks",
                              continuous_update=False, style=style)
    button = w.Button(description="Measure on this GPU", button_style="primary", layout=w.Layout(width="auto"))
    status = w.Label()
    out = w.Output()
    try:
        from ...backend import gpu_available

        has_gpu = bool(gpu_available())
    except Exception:  # noqa: BLE001 -- no backend: nothing to measure on
        has_gpu = False
    if measure is None or not has_gpu:
        button.disabled = True
        status.value = "No GPU here: showing the timelines recorded when the notebook ran."
    else:
        status.value = "Pick a point; measure it to (re)draw its timeline on this GPU."

    def redraw(_change: Any = None) -> None:
        key = (s_ctl.value, c_ctl.value)
        with out:
            out.clear_output(wait=True)
            if key in timelines:
                intervals, summary = timelines[key]
                display(timeline_plot(intervals, _timeline_title(key, summary)))
            else:
                print(f"{key[0]} stream(s) x {key[1]} chunk(s) has no timeline yet: press the button.")

    def on_measure(_button: Any) -> None:
        key = (s_ctl.value, c_ctl.value)
        button.disabled = True
        status.value = f"Measuring {key[0]} stream(s) x {key[1]} chunk(s) ..."
        try:
            timelines[key] = measure(*key)  # type: ignore[misc]
            status.value = _timeline_title(key, timelines[key][1])
        except Exception as error:  # noqa: BLE001 -- shown to the reader, not swallowed
            status.value = f"failed: {type(error).__name__}: {error}"
        finally:
            button.disabled = False
        redraw()

    s_ctl.observe(redraw, names="value")
    c_ctl.observe(redraw, names="value")
    button.on_click(on_measure)
    redraw()
    parts = [live_panel(sweep)] if sweep is not None else []
    panel = w.VBox(parts + [w.HTML("<b>Pipeline timeline: streams x chunks</b>"), s_ctl, c_ctl,
                            w.HBox([button, status]), out])
    display_live(panel, fallback_html, text)


__all__ = ["STAGES", "COLORS", "chunk_bounds", "ideal_pipeline_ms", "pipeline_summary", "pcie_gbps",
           "intervals_from_events", "engine_view", "stage_busy_ms", "timeline_plot", "launch_overhead_plot",
           "timeline_panel"]
