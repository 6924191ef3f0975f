"""Parameter sweeps: measure a kernel over a grid of settings and show the result as one figure
with two faces, a live panel that re-measures on the reader's GPU and a recorded explorer for the web.

Both faces go out in one MIME bundle: a notebook with a kernel renders the widget view, the website
(which has no kernel) renders the ``text/html`` recorded explorer.

A sweep whose measurements were timed on the CPU backend (no GPU) says so in its progress line,
its explorer caption and its summary, and a cell that reads its records prints the CPU-timing note.
"""
from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import timing
from .explorer import Explorer, HtmlFragment, _clean, _esc

__all__ = ["Sweep", "display_live", "live_panel"]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def display_live(widget: Any, fallback_html: str, text: str = "") -> None:
    """Display a widget and its recorded HTML fallback as ONE output.

    The widget-view dict is built by hand so the same call works with ipywidgets 7.7.1 (Colab) and
    8.x; ``widget`` may be None when ipywidgets is missing, and then only the fallback is shown.
    """
    from IPython.display import display

    bundle: dict[str, Any] = {"text/html": str(fallback_html), "text/plain": text or "(interactive figure)"}
    if widget is not None:
        bundle[WIDGET_MIME] = {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}
    display(bundle, raw=True)


_TIME_WORDS = ("time", "latency", "clock", "cycle", "µs", "us", "ns", "ms", "seconds")


def _is_time(y: str) -> bool:
    """True for a quantity where less is better: a time or latency ("time_ms", "µs per kernel")."""
    import re

    words = re.split(r"[^a-zµ]+", y.lower())
    return any(w in _TIME_WORDS or w.startswith(("time", "latenc", "clock", "cycle")) for w in words if w)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


class Sweep:
    """Measure ``measure(**point)`` for every combination of ``params`` and plot ``y`` against ``x``.

    A point whose measurement raises is recorded with no ``y`` and a ``note`` (the error's first
    line): a launch that breaks a hardware limit is something to see, not a crash.
    """

    def __init__(
        self,
        title: str,
        params: Mapping[str, Sequence[Any]],
        measure: Callable[..., Mapping[str, Any]] | None,
        x: str,
        y: str,
        *,
        series: str | None = None,
        hlines: Mapping[str, float] | None = None,
        ceilings: Mapping[str, float] | None = None,
        readout: Sequence[str] = (),
        log_x: bool = False,
        log_y: bool = False,
        lower_is_better: bool | None = None,
    ) -> None:
        if x not in params:
            raise ValueError(f"x={x!r} must be one of the params: {list(params)}")
        if series is not None and series not in params:
            raise ValueError(f"series={series!r} must be one of the params: {list(params)}")
        self.title = title
        self.params = {k: list(v) for k, v in params.items()}
        self.measure = measure
        self.x, self.y, self.series = x, y, series
        # times and latencies are best when small, rates when large; the summary must not call the
        # slowest point "best"
        self.lower_is_better = _is_time(y) if lower_is_better is None else lower_is_better
        self.hlines = {**(hlines or {}), **(ceilings or {})}
        self.readout = list(readout)
        self.log_x, self.log_y = log_x, log_y
        self.cpu_timed = False  # True once a measurement was timed on the CPU backend
        self.records = []

    @property
    def records(self) -> list[dict[str, Any]]:
        """The measured points; reading CPU-backend timings from them labels the cell."""
        if self.cpu_timed:
            timing.note_cpu_timing()
        return self._records

    @records.setter
    def records(self, records: list[dict[str, Any]]) -> None:
        self._records = records

    # --- measuring ---------------------------------------------------------------------------------

    def points(self) -> list[dict[str, Any]]:
        """Every combination of the parameter values (itertools.product order)."""
        names = list(self.params)
        return [dict(zip(names, combo)) for combo in itertools.product(*self.params.values())]

    def measure_point(self, point: Mapping[str, Any]) -> dict[str, Any]:
        """One record: the point's parameters plus its metrics, or plus a ``note`` if it failed."""
        if self.measure is None:
            raise RuntimeError("this Sweep was loaded from JSON without a measure function")
        record = dict(point)
        cpu_timings_before = timing.cpu_timings_made
        try:
            metrics = self.measure(**point)
        except Exception as error:  # noqa: BLE001 -- any failure is recorded, not raised
            record["note"] = _first_line(error)
            return record
        finally:
            if timing.cpu_timings_made != cpu_timings_before:
                self.cpu_timed = True
        record.update({k: _clean(v) for k, v in dict(metrics).items()})
        if record.get(self.y) is None and "note" not in record:
            record["note"] = f"no {self.y} measured"
        return record

    def run(self, points: Sequence[Mapping[str, Any]] | None = None, progress: bool = True) -> list[dict[str, Any]]:
        """Measure every point (all combinations by default); keeps and returns the records."""
        todo = [dict(p) for p in points] if points is not None else self.points()
        records = []
        show = _progress_line() if progress and todo else (lambda text: None)
        for i, point in enumerate(todo, 1):
            label = ", ".join(f"{k}={v}" for k, v in point.items())
            show(f"[{i}/{len(todo)}] {self.title}: {label}")
            records.append(self.measure_point(point))
        failed = sum(1 for r in records if r.get(self.y) is None)
        self.device = _device_name()
        where = f"the CPU backend ({timing.CPU_TIMING_LABEL})" if self.cpu_timed else self.device
        show(f"[{len(todo)}/{len(todo)}] {self.title}: measured on {where or 'this machine'}"
             + (f"; {failed} point(s) without {self.y}" if failed else ""))
        self.records = records
        return records

    def update(self, record: Mapping[str, Any]) -> None:
        """Replace the record measured at the same parameters (or add it)."""
        key = tuple(record.get(k) for k in self.params)
        self.records = [r for r in self._records if tuple(r.get(k) for k in self.params) != key]
        self._records.append(dict(record))

    # --- showing -----------------------------------------------------------------------------------

    def metric_fields(self) -> list[str]:
        """Fields the measure function returned, besides the parameters."""
        seen: dict[str, None] = {}
        for r in self._records:
            for k in r:
                if k not in self.params and k != "note":
                    seen[k] = None
        return list(seen)

    def explorer(self) -> Explorer:
        """The recorded face of the figure."""
        controls = [p for p in self.params if p not in (self.x, self.series)]
        readout = self.readout or [m for m in self.metric_fields() if m != self.y]
        device = getattr(self, "device", None)
        if self.cpu_timed:
            caption = (f"Measured on the CPU backend ({timing.CPU_TIMING_LABEL}): the times say nothing "
                       "about a GPU; run the notebook on a GPU to measure it.")
        elif device:
            caption = f"Recorded on {device}; run the notebook on a GPU to measure live."
        else:
            caption = "Recorded measurements; run the notebook on a GPU to measure live."
        return Explorer(self._records, x=self.x, y=self.y, controls=controls, series=self.series,
                        title=self.title, log_x=self.log_x, log_y=self.log_y, hlines=self.hlines,
                        readout=readout, caption=caption)

    def summary(self) -> str:
        """The text/plain face: the best point and the failures, in one or two lines."""
        good = [r for r in self._records if isinstance(r.get(self.y), (int, float))]
        lines = [f"{self.title}: {len(self._records)} points"]
        if good:
            pick = min if self.lower_is_better else max
            best = pick(good, key=lambda r: r[self.y])
            where = ", ".join(f"{k}={best[k]}" for k in self.params)
            lines.append(f"best ({'lowest' if self.lower_is_better else 'highest'}) {self.y} = {best[self.y]:g} "
                         f"at {where}")
        failed = len(self._records) - len(good)
        if failed:
            lines.append(f"{failed} point(s) without {self.y}")
        if self.cpu_timed:
            lines.append(timing.CPU_TIMING_LABEL)
        return "; ".join(lines)

    def table(self) -> HtmlFragment:
        """The records as a small HTML table (also a plain string)."""
        fields = list(self.params) + self.metric_fields() + (
            ["note"] if any("note" in r for r in self.records) else [])
        head = "".join(f"<th>{_esc(f)}</th>" for f in fields)
        rows = "".join(
            "<tr>" + "".join(f"<td>{_esc(_cell(r.get(f)))}</td>" for f in fields) + "</tr>" for r in self.records)
        return HtmlFragment(f'<table class="course-sweep-table"><thead><tr>{head}</tr></thead>'
                            f"<tbody>{rows}</tbody></table>")

    def show(self) -> None:
        """Display the figure: live panel + recorded explorer + text, as one output."""
        if not self._records:
            self.run()
        try:
            widget = live_panel(self)
        except ImportError:  # no ipywidgets / matplotlib: the recorded face alone
            widget = None
        display_live(widget, self.explorer().html(), self.summary())

    # --- saving ------------------------------------------------------------------------------------

    def to_json(self, path: str | Path | None = None) -> str:
        """Everything but the measure function, so a sweep can be re-shown without a GPU."""
        text = json.dumps({
            "title": self.title, "params": self.params, "x": self.x, "y": self.y, "series": self.series,
            "hlines": self.hlines, "readout": self.readout, "log_x": self.log_x, "log_y": self.log_y,
            "records": self._records,
        }, indent=1, default=_clean)
        if path is not None:
            Path(path).write_text(text)
        return text

    @classmethod
    def from_json(cls, text_or_path: str | Path, measure: Callable[..., Mapping[str, Any]] | None = None) -> "Sweep":
        """A sweep saved with :meth:`to_json`; pass ``measure`` to be able to re-measure."""
        text = str(text_or_path)
        if isinstance(text_or_path, Path) or not text.lstrip().startswith("{"):
            text = Path(text_or_path).read_text()
        data = json.loads(text)
        sweep = cls(data["title"], data["params"], measure, data["x"], data["y"], series=data.get("series"),
                    hlines=data.get("hlines"), readout=data.get("readout", ()),
                    log_x=data.get("log_x", False), log_y=data.get("log_y", False))
        sweep.records = [dict(r) for r in data.get("records", [])]
        return sweep


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# --- the live face ---------------------------------------------------------------------------------

def _gpu_name() -> str | None:
    """The GPU's name, or None when there is no GPU to measure on."""
    try:
        from .backend import gpu_available
        if not gpu_available():
            return None
    except ImportError:
        pass
    try:
        from .device import device_info
        return str(device_info().name)
    except Exception:  # noqa: BLE001 -- no device module or no GPU: nothing to measure on
        return None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def live_panel(sweep: Sweep) -> Any:
    """The ipywidgets face: one control per parameter, a measure button, a plot and a status line.

    Uses only widgets that exist in ipywidgets 7.7.1 and 8.x.
    """
    import ipywidgets as w

    controls: dict[str, Any] = {}
    for name, values in sweep.params.items():
        options = [(str(v), v) for v in values]
        style = {"description_width": "initial"}
        if len(values) > 1 and all(_is_number(v) for v in values):
            controls[name] = w.SelectionSlider(options=options, value=values[0], description=name,
                                               continuous_update=False, style=style)
        else:
            controls[name] = w.Dropdown(options=options, value=values[0], description=name, style=style)
    button = w.Button(description="Measure on this GPU", button_style="primary",
                      layout=w.Layout(width="auto"))
    status = w.Label()
    plot = w.Output()
    gpu = _gpu_name()
    if gpu is None or sweep.measure is None:
        button.disabled = True
        if gpu is None and sweep.cpu_timed:
            status.value = (f"No GPU here: these values were timed on the CPU backend ({timing.CPU_TIMING_LABEL}). "
                            "In Colab: Runtime > Change runtime type > GPU.")
        elif gpu is None:
            status.value = "No GPU here: showing the recorded values. In Colab: Runtime > Change runtime type > GPU."
        else:
            status.value = "Recorded values only (no measure function)."
    else:
        status.value = f"GPU: {gpu}. Pick a point and measure it."

    def current() -> dict[str, Any]:
        return {name: c.value for name, c in controls.items()}

    def redraw(_change: Any = None) -> None:
        with plot:
            plot.clear_output(wait=True)
            _plot(sweep, current())

    def on_measure(_button: Any) -> None:
        button.disabled = True
        point = current()
        status.value = f"Measuring {', '.join(f'{k}={v}' for k, v in point.items())} ..."
        try:
            record = sweep.measure_point(point)
            sweep.update(record)
            value = record.get(sweep.y)
            status.value = (f"{gpu}: {sweep.y} = {value:.4g}" if _is_number(value)
                            else f"{gpu}: no {sweep.y} ({record.get('note', 'not measured')})")
            redraw()
        finally:
            button.disabled = False

    for c in controls.values():
        c.observe(redraw, names="value")
    button.on_click(on_measure)
    redraw()
    return w.VBox([w.HTML(f"<b>{_esc(sweep.title)}</b>"), *controls.values(), w.HBox([button, status]), plot])


def _plot(sweep: Sweep, point: Mapping[str, Any]) -> None:
    """y against x for the records matching the other controls, the selected point circled.

    Points that were not timed (a record with a note and no y: invalid or spilling configurations)
    are marked with an x at the bottom of the axes, so a gap in a curve says why it is there.
    """
    import matplotlib.pyplot as plt
    from IPython.display import display

    fixed = {k: v for k, v in point.items() if k not in (sweep.x, sweep.series)}
    rows = [r for r in sweep._records if all(r.get(k) == v for k, v in fixed.items())]
    groups = sweep.params[sweep.series] if sweep.series else [None]
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    marked_untimed = False
    for group in groups:
        mine = [r for r in rows if group is None or r.get(sweep.series) == group]
        pts = sorted((r[sweep.x], r[sweep.y]) for r in mine if _is_number(r.get(sweep.y)))
        label = f"{sweep.series} = {group}" if sweep.series else None
        line = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=label)[0]
        chosen = [r for r in mine if r.get(sweep.x) == point[sweep.x] and _is_number(r.get(sweep.y))]
        if chosen:
            ax.plot([r[sweep.x] for r in chosen], [r[sweep.y] for r in chosen], "o", ms=10,
                    mfc="none", mec=line.get_color(), mew=2)
        untimed = [r[sweep.x] for r in mine if not _is_number(r.get(sweep.y)) and r.get("note")]
        if untimed:                                   # invalid or spilling: an x on the floor, never a value
            ax.plot(untimed, [0.03] * len(untimed), "x", ms=8, mew=2, color=line.get_color(),
                    transform=ax.get_xaxis_transform(), clip_on=False)
            marked_untimed = True
    if marked_untimed:
        ax.plot([], [], "x", ms=8, mew=2, color="0.3", label="not timed (invalid or spills)")
    for name, value in sweep.hlines.items():
        ax.axhline(value, ls="--", color="0.4", lw=1)
        ax.annotate(f"{name} {value:g}", (1.0, value), xycoords=("axes fraction", "data"),
                    ha="right", va="bottom", fontsize=8, color="0.3")
    if sweep.log_x:
        ax.set_xscale("log")
    if sweep.log_y:
        ax.set_yscale("log")
    ax.set_xlabel(sweep.x)
    ax.set_ylabel(sweep.y)
    ax.set_title(", ".join(f"{k} = {v}" for k, v in fixed.items()), fontsize=9)
    if sweep.cpu_timed:
        timing.label_cpu_axes(ax)
    if sweep.series or marked_untimed:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    display(fig)
    plt.close(fig)


def _progress_line() -> Callable[[str], None]:
    """One progress line that rewrites itself: a display handle in a notebook (so the saved
    notebook keeps only the last state), a carriage return on a terminal."""
    try:
        from IPython import get_ipython
        from IPython.display import Pretty, display
    except ImportError:
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is not None and get_ipython() is not None:
        handle = display(Pretty(""), display_id=True)
        return lambda text: handle.update(Pretty(text))
    return lambda text: print(f"\r{text}".ljust(80), end="", file=sys.stdout, flush=True)


def _device_name() -> str | None:
    """The GPU's name for the record, or None where there is none (tests, CPU-only machines)."""
    try:
        from .backend import gpu_available
        from .device import device_info

        return device_info().name if gpu_available() else None
    except Exception:
        return None
