"""Drive every live panel and the chapters' numba code headless, with whatever versions this Python has.

    python tests/colab_versions_drive.py        # prints one JSON line: the versions and the checks passed

tests/test_colab_versions.py runs it with the project's packages (ipywidgets 8) and in the student
environment (Colab's ipywidgets 7.7.1 and numba, tools/student-env-requirements.txt). No pytest here:
the student environment does not have it. A failed check raises, so the process exits non-zero with
the traceback.
"""
from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("COURSE_BACKEND", "cpu")

import numpy as np  # noqa: E402

MARKER = "COLAB_VERSIONS_RESULT"


def _widgets(root, kind) -> list:
    found, todo = [], [root]
    while todo:
        widget = todo.pop(0)
        if isinstance(widget, kind):
            found.append(widget)
        todo += list(getattr(widget, "children", ()))
    return found


class Captured:
    """Stands in for display_live and IPython's display: keeps what would have been shown."""

    def __init__(self) -> None:
        self.live: list = []
        self.shown: list = []

    def display_live(self, widget, fallback_html, text="") -> None:
        self.live.append((widget, fallback_html, text))

    def display(self, *objects, **kwargs) -> None:
        self.shown.extend(objects)


def check_display_live_bundle(captured: Captured) -> None:
    """The one output a live panel makes: the widget view beside its recorded HTML, in both versions."""
    import ipywidgets as w
    import IPython.display

    from kernels import sweep

    real_display = IPython.display.display
    IPython.display.display = captured.display
    try:
        slider = w.IntSlider(value=1, min=0, max=3)
        sweep.display_live(slider, "<b>recorded</b>", "text")
    finally:
        IPython.display.display = real_display
    bundle = captured.shown[-1]
    view = bundle[sweep.WIDGET_MIME]
    assert (view["version_major"], view["version_minor"]) == (2, 0), view
    assert view["model_id"] == slider.model_id and len(slider.model_id) >= 16, view
    assert bundle["text/html"] == "<b>recorded</b>"


def check_sweep_panel(captured: Captured) -> None:
    import ipywidgets as w

    from kernels import sweep as sweep_module
    from kernels.sweep import Sweep, live_panel

    def measure(n, kind):
        return {"time_ms": float(n) * (2.0 if kind == "b" else 1.0)}

    s = Sweep("test sweep", {"n": [1, 2, 4], "kind": ["a", "b"]}, measure, x="n", y="time_ms", series="kind")
    s.run(progress=False)
    drawn = []
    sweep_module._plot = lambda sweep, point: drawn.append(dict(point))
    sweep_module._gpu_name = lambda: "Fake GPU"
    panel = live_panel(s)
    (slider,), (dropdown,), (button,) = (_widgets(panel, w.SelectionSlider), _widgets(panel, w.Dropdown),
                                         _widgets(panel, w.Button))
    status = next(label for label in _widgets(panel, w.Label))
    assert drawn == [{"n": 1, "kind": "a"}] and not button.disabled
    slider.value = 4                                                   # a slider move redraws
    dropdown.value = "b"
    assert drawn[-1] == {"n": 4, "kind": "b"} and len(drawn) == 3, drawn
    s.measure = lambda n, kind: {"time_ms": 99.0}
    button.click()                                                     # what a click in the notebook does
    assert status.value == "Fake GPU: time_ms = 99", status.value
    assert any(r["time_ms"] == 99.0 and r["n"] == 4 and r["kind"] == "b" for r in s.records)
    assert not button.disabled


def check_occupancy_panel(captured: Captured) -> None:
    import importlib

    import ipywidgets as w

    from kernels import sweep as sweep_module

    occ = importlib.import_module("kernels.occupancy")  # the package's `occupancy` is the function

    sweep_module.display_live = captured.display_live
    occ._bar_chart = lambda result, lim: None
    occ.occupancy_panel("7.5")
    panel, html, text = captured.live[-1]
    threads, regs, smem = _widgets(panel, w.IntSlider)
    (result,) = _widgets(panel, w.HTML)
    assert "course-explorer" in html and "7.5" in text
    lim = occ.GpuLimits.for_compute_capability("7.5")
    assert (threads.max, smem.max) == (1024, 64)
    threads.value, regs.value, smem.value = 1024, 64, 0
    expected = occ.occupancy(1024, 64, 0, lim)
    assert f"{expected.blocks_per_sm} blocks/SM" in result.value, result.value
    smem.value = 40
    expected = occ.occupancy(1024, 64, 40 * 1024, lim)
    assert f"{expected.blocks_per_sm} blocks/SM" in result.value and "limited by" in result.value


def check_timeline_panel(captured: Captured) -> None:
    import ipywidgets as w

    import kernels.backend
    from kernels.chapters import asynchrony as ay
    from kernels import sweep as sweep_module

    sweep_module.display_live = captured.display_live
    kernels.backend.gpu_available = lambda: True
    drawn = []
    ay.timeline_plot = lambda intervals, title="", engines=True: drawn.append(title) or "figure"
    interval = {"stream": 0, "stage": "kernel", "chunk": 0, "start": 0.0, "end": 1.0}
    timelines = {(1, 1): ([interval], {"time_ms": 1.0, "speedup": 1.0})}
    calls = []

    def measure(streams, chunks):
        calls.append((streams, chunks))
        return [interval], {"time_ms": 0.5, "speedup": 2.0}

    ay.timeline_panel(measure, [1, 2], [1, 4], timelines, fallback_html="<p>recorded</p>", text="t")
    panel, html, _ = captured.live[-1]
    streams, chunks = _widgets(panel, w.SelectionSlider)
    (button,) = _widgets(panel, w.Button)
    assert html == "<p>recorded</p>" and len(drawn) == 1 and not button.disabled
    streams.value, chunks.value = 2, 4
    button.click()
    assert calls == [(2, 4)] and (2, 4) in timelines and len(drawn) == 2, (calls, drawn)


def check_numba() -> None:
    """What the chapters do with numba, on the CPU: @njit loops (one thread and prange), the GEMM
    triple loop, and numba.cuda imported or declined in one sentence."""
    from numba import njit, prange

    from kernels.compat import import_numba_cuda
    from kernels.chapters.gemm import numba_gemm

    @njit(parallel=False)
    def add(x, y, out):
        for i in range(x.size):
            out[i] = x[i] + y[i]

    @njit(parallel=True)
    def add_parallel(x, y, out):
        for i in prange(x.size):
            out[i] = x[i] + y[i]

    x = np.arange(1000, dtype=np.float32)
    for fn in (add, add_parallel):
        out = np.empty_like(x)
        fn(x, 2 * x, out)
        assert np.array_equal(out, 3 * x)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((33, 17)), rng.standard_normal((17, 20))
    c = np.empty((33, 20))
    numba_gemm()(a, b, c)
    assert np.allclose(c, a @ b, rtol=1e-12, atol=1e-12)
    cuda, why = import_numba_cuda()
    assert (cuda is None) == bool(why), (cuda, why)


def main() -> int:
    import ipywidgets
    import numba

    captured = Captured()
    checks = [("display_live", lambda: check_display_live_bundle(captured)),
              ("sweep live_panel", lambda: check_sweep_panel(captured)),
              ("occupancy_panel", lambda: check_occupancy_panel(captured)),
              ("timeline_panel", lambda: check_timeline_panel(captured)),
              ("numba", check_numba)]
    passed = []
    for name, check in checks:
        check()
        passed.append(name)
    print(MARKER, json.dumps({"ipywidgets": ipywidgets.__version__, "numba": numba.__version__,
                              "numpy": np.__version__, "passed": passed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
