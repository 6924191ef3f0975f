"""Sweeps: every combination measured, failures recorded as notes, saved and shown as one bundle."""
from __future__ import annotations

import json

import pytest

from kernels.explorer import decode_columns
from kernels.sweep import WIDGET_MIME, Sweep, display_live

PARAMS = {"block": [128, 256, 1024], "n": [1000, 100000], "dtype": ["float", "double"]}


def fake_measure(block: int, n: int, dtype: str) -> dict:
    if block == 1024 and dtype == "double":
        raise RuntimeError("too many resources requested for launch\n(details on a second line)")
    size = 4 if dtype == "float" else 8
    return {"GB/s": n * size * block / 1e5, "ms": n / 1e6}


def make() -> Sweep:
    return Sweep("copy", PARAMS, fake_measure, x="n", y="GB/s", series="dtype",
                 hlines={"copy bandwidth": 2950.0}, log_x=True)


def test_run_measures_the_product_of_params(capsys):
    s = make()
    records = s.run()
    assert records is s.records and len(records) == 3 * 2 * 2
    assert [(r["block"], r["n"], r["dtype"]) for r in records] == [
        (b, n, d) for b in PARAMS["block"] for n in PARAMS["n"] for d in PARAMS["dtype"]]
    good = next(r for r in records if r["block"] == 256 and r["n"] == 1000 and r["dtype"] == "float")
    assert good["GB/s"] == pytest.approx(1000 * 4 * 256 / 1e5) and "note" not in good
    assert "12/12" in capsys.readouterr().out


def test_errors_are_recorded_with_their_first_line():
    s = make()
    s.run(progress=False)
    failed = [r for r in s.records if "note" in r]
    assert len(failed) == 2
    assert all(r["block"] == 1024 and r["dtype"] == "double" and "GB/s" not in r for r in failed)
    assert failed[0]["note"] == "RuntimeError: too many resources requested for launch"
    assert "2 point(s) without GB/s" in s.summary()


def test_run_given_points_only():
    s = make()
    s.run(points=[{"block": 128, "n": 1000, "dtype": "float"}], progress=False)
    assert len(s.records) == 1 and s.records[0]["GB/s"] > 0


def test_update_replaces_the_point_just_measured():
    s = make()
    s.run(progress=False)
    s.update({"block": 128, "n": 1000, "dtype": "float", "GB/s": 1.0})
    same = [r for r in s.records if (r["block"], r["n"], r["dtype"]) == (128, 1000, "float")]
    assert same == [{"block": 128, "n": 1000, "dtype": "float", "GB/s": 1.0}]
    assert len(s.records) == 12


def test_json_round_trip(tmp_path):
    s = make()
    s.run(progress=False)
    back = Sweep.from_json(s.to_json())
    assert back.records == s.records and back.params == s.params
    assert (back.x, back.y, back.series, back.hlines, back.log_x) == ("n", "GB/s", "dtype", s.hlines, True)
    path = tmp_path / "sweep.json"
    s.to_json(path)
    again = Sweep.from_json(path, measure=fake_measure)
    assert again.records == s.records and again.measure is fake_measure
    assert json.loads(path.read_text())["title"] == "copy"


def test_loaded_sweep_without_measure_cannot_measure():
    s = make()
    s.run(progress=False)
    back = Sweep.from_json(s.to_json())
    with pytest.raises(RuntimeError, match="without a measure"):
        back.measure_point({"block": 128, "n": 1000, "dtype": "float"})


def test_explorer_uses_the_other_params_as_controls():
    s = make()
    s.run(progress=False)
    e = s.explorer()
    assert (e.x, e.y, e.series, e.controls) == ("n", "GB/s", "dtype", ["block"])
    assert e.readout == ["ms"] and e.hlines == {"copy bandwidth": 2950.0}


def test_table_lists_every_record():
    s = make()
    s.run(progress=False)
    html = s.table()
    assert html.count("<tr>") == 1 + 12 and "too many resources" in html
    assert s.table()._repr_html_() == str(html)


def test_unknown_x_is_refused():
    with pytest.raises(ValueError):
        Sweep("t", PARAMS, fake_measure, x="nope", y="GB/s")


@pytest.fixture
def displayed(monkeypatch):
    import IPython.display

    calls = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: calls.append((a, k)))
    return calls


def test_show_emits_one_bundle_with_both_faces(displayed):
    pytest.importorskip("ipywidgets")
    s = make()
    s.show()  # runs first, since there are no records
    assert len(s.records) == 12
    bundles = [(a[0], k) for a, k in displayed if a and isinstance(a[0], dict)]
    assert len(bundles) == 1
    bundle, kwargs = bundles[0]
    assert kwargs == {"raw": True}
    assert set(bundle) == {WIDGET_MIME, "text/html", "text/plain"}
    view = bundle[WIDGET_MIME]
    assert view["version_major"] == 2 and view["version_minor"] == 0 and len(view["model_id"]) >= 16
    assert 'class="course-explorer"' in bundle["text/html"]
    assert "copy: 12 points" in bundle["text/plain"]
    data = bundle["text/html"].split('class="course-explorer-data">')[1].split("</script>")[0]
    assert len(decode_columns(json.loads(data)["data"])) == 12


def test_live_panel_has_controls_button_and_plot(displayed):
    ipywidgets = pytest.importorskip("ipywidgets")
    from kernels.sweep import live_panel

    s = make()
    s.run(progress=False)
    panel = live_panel(s)
    flat = []

    def walk(w):
        flat.append(w)
        for child in getattr(w, "children", ()):
            walk(child)

    walk(panel)
    kinds = [type(w).__name__ for w in flat]
    assert kinds.count("SelectionSlider") == 2 and kinds.count("Dropdown") == 1
    button = next(w for w in flat if isinstance(w, ipywidgets.Button))
    assert button.description == "Measure on this GPU"
    assert any(isinstance(w, ipywidgets.Output) for w in flat)


def test_display_live_without_widget_shows_the_recorded_face(displayed):
    display_live(None, "<b>recorded</b>", "text")
    (args, kwargs), = displayed
    assert args[0] == {"text/html": "<b>recorded</b>", "text/plain": "text"} and kwargs == {"raw": True}


def test_summary_calls_the_smallest_time_best_and_the_largest_rate_best():
    from kernels.sweep import Sweep

    times = Sweep("t", {"n": [1, 2, 3]}, None, x="n", y="time_ms")
    times.records = [{"n": 1, "time_ms": 3.0}, {"n": 2, "time_ms": 1.0}, {"n": 3, "time_ms": 2.0}]
    assert "best (lowest) time_ms = 1 at n=2" in times.summary()
    rates = Sweep("r", {"n": [1, 2]}, None, x="n", y="GB/s")
    rates.records = [{"n": 1, "GB/s": 5.0}, {"n": 2, "GB/s": 9.0}]
    assert "best (highest) GB/s = 9 at n=2" in rates.summary()
    latency = Sweep("l", {"n": [1, 2]}, None, x="n", y="ns_per_load", lower_is_better=False)
    latency.records = [{"n": 1, "ns_per_load": 5.0}, {"n": 2, "ns_per_load": 9.0}]
    assert "best (highest) ns_per_load = 9" in latency.summary()


def test_plot_marks_untimed_points_at_the_bottom(displayed):
    """A failed or rejected point (a note, no y) gets an x on the floor of the plot, in its series'
    colour, and a legend entry; timed points are drawn as lines and never as x marks."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from kernels.sweep import _plot

    s = make()
    s.run(progress=False)
    figures = []
    import matplotlib.pyplot as plt
    monkey_close = plt.close
    try:
        plt.close = lambda fig=None: figures.append(fig)      # keep the figure to inspect it
        _plot(s, {"block": 1024, "n": 1000, "dtype": "float"})
        _plot(s, {"block": 128, "n": 1000, "dtype": "float"})
    finally:
        plt.close = monkey_close
    marked, clean = (f.axes[0] for f in figures)
    xs = [line for line in marked.get_lines() if line.get_marker() == "x" and len(line.get_xdata())]
    assert len(xs) == 1 and sorted(xs[0].get_xdata()) == [1000, 100000]   # the two double points
    assert "not timed (invalid or spills)" in [t.get_text() for t in marked.get_legend().get_texts()]
    assert not [line for line in clean.get_lines() if line.get_marker() == "x" and len(line.get_xdata())]
    assert "not timed (invalid or spills)" not in [t.get_text() for t in clean.get_legend().get_texts()]
