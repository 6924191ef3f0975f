"""The recorded explorer in a real (headless) browser: it draws, its sliders change what it shows and
reach only recorded settings, its labels do not collide, and it stays readable at phone width."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from browser import load, open_page, require_chromium, set_viewport
from kernels.explorer import Explorer

from test_explorer import records

SITE_SCRIPT = Path(__file__).resolve().parents[1] / "book" / "_static" / "course-explorer.js"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    require_chromium()
    first = Explorer(records(), x="n", y="GB/s", controls=["block"], series="dtype", log_x=True,
                     hlines={"copy bandwidth": 2950.0}, readout=["ms"], title="first")
    second = Explorer(records(), x="n", y="ms", controls=["block", "dtype"], title="second")
    path = tmp_path_factory.mktemp("explorer") / "page.html"
    path.write_text(f"<!doctype html><html><body>{first.html()}{second.html()}</body></html>")
    with open_page(path) as driver:
        yield driver, first, second


def state(driver, explorer_id):
    return driver.execute_script(
        """var r=document.getElementById(arguments[0]);
        return {paths: Array.prototype.map.call(r.querySelectorAll('path.course-explorer-line'),
                   function(p){return p.getAttribute('d');}),
                readout: r.querySelector('.course-explorer-readout').textContent,
                hlines: r.querySelectorAll('.course-explorer-hline').length,
                selected: r.querySelectorAll('circle.course-explorer-selected').length,
                untimed: Array.prototype.map.call(r.querySelectorAll('g.course-explorer-untimed'),
                   function(g){return g.getAttribute('data-series') + ': ' + g.textContent;}),
                legend: r.querySelector('.course-explorer-legend').textContent};""", explorer_id)


def move(driver, explorer_id, selector, value):
    driver.execute_script(
        """var s=document.getElementById(arguments[0]).querySelector(arguments[1]); s.value=arguments[2];
        s.dispatchEvent(new Event('input',{bubbles:true})); s.dispatchEvent(new Event('change',{bubbles:true}));""",
        explorer_id, selector, str(value))


def test_no_script_errors(page):
    driver, _, _ = page
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert errors == []


def test_draws_one_line_per_series_with_reference_line(page):
    driver, first, _ = page
    s = state(driver, first.id)
    assert len(s["paths"]) == 2 and all(p.startswith("M") and "L" in p for p in s["paths"])
    assert s["hlines"] == 1
    assert s["selected"] == 2
    assert "dtype = float" in s["readout"] and "GB/s" in s["readout"] and "ms =" in s["readout"]


def test_control_slider_changes_plot_and_readout(page):
    driver, first, _ = page
    before = state(driver, first.id)
    move(driver, first.id, 'input[data-control="block"]', 1)
    after = state(driver, first.id)
    assert after["paths"] != before["paths"]
    assert after["readout"] != before["readout"]
    label = driver.execute_script(
        "return document.getElementById(arguments[0]).querySelector('output[data-for=\"block\"]').textContent",
        first.id)
    assert label == "128"


def test_point_slider_moves_readout_and_missing_value_is_explained(page):
    driver, first, _ = page
    move(driver, first.id, 'input[data-control="block"]', 2)
    move(driver, first.id, "input[data-point]", 3)
    s = state(driver, first.id)
    assert "no value" in s["readout"] and "too many resources" in s["readout"]
    # the failed point is not drawn: each line stops before the last x
    assert all(p.count("L") == 2 for p in s["paths"])


def test_two_explorers_on_one_page_are_independent(page):
    driver, first, second = page
    before = state(driver, first.id)
    move(driver, second.id, 'input[data-control="dtype"]', 1)
    assert state(driver, first.id) == before
    s = state(driver, second.id)
    assert len(s["paths"]) == 1 and "ms =" in s["readout"]


def test_untimed_points_are_marked_with_their_note(page):
    """The points without a value (block 256 at the largest n) get an x per series whose tooltip
    carries the note, and the legend says what the x means; other blocks have none."""
    driver, first, _ = page
    move(driver, first.id, 'input[data-control="block"]', 0)
    s = state(driver, first.id)
    assert s["untimed"] == [] and "no value" not in s["legend"]
    move(driver, first.id, 'input[data-control="block"]', 2)
    s = state(driver, first.id)
    assert sorted(m.split(":")[0] for m in s["untimed"]) == ["double", "float"]
    assert all("too many resources" in m for m in s["untimed"])
    assert "no value" in s["legend"]


# --- readable at any width, no empty settings, no overlapping labels -------------------------------

def _boxes(driver, explorer_id, selector):
    """Bounding boxes (left, top, right, bottom, text) of the explorer's elements matching selector."""
    return driver.execute_script(
        """return Array.prototype.map.call(document.getElementById(arguments[0]).querySelectorAll(arguments[1]),
           function(e){var b=e.getBoundingClientRect();return [b.left,b.top,b.right,b.bottom,e.textContent];});""",
        explorer_id, selector)


def _overlapping(boxes):
    return [(a[4], b[4]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]


def _sparse_records():
    """A tile sweep recorded for 3 of the 8 combinations of (BM, BN, TN), one of them only failures."""
    out = []
    for bm, bn, tn in ((128, 128, 4), (128, 128, 8), (128, 256, 8)):
        for bk in (8, 16, 32):
            out.append({"BM": bm, "BN": bn, "TN": tn, "TM": 8, "BK": bk, "GFLOP/s": 1000.0 * bk + bm + tn})
    out.append({"BM": 256, "BN": 256, "TN": 8, "TM": 8, "BK": 16, "note": "spills 6012 B to local memory"})
    return out


def _launch_records():
    """Times spread over a decade and a half on a log axis, with the series of the CUDA-graph figure."""
    return [{"chain": c, "mode": m, "µs per kernel": base * (1 + 4 / c)}
            for c in (1, 2, 4, 8, 16, 32, 64, 128, 256)
            for m, base in (("stream", 40.0), ("stream, raw CuPy", 9.0), ("graph", 1.2))]


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    require_chromium()
    tiles = Explorer(_sparse_records(), x="BK", y="GFLOP/s", controls=["BM", "BN", "TN"], series="TM", log_x=True)
    ceilings = Explorer(records(), x="n", y="GB/s", series="dtype", log_x=True,
                        hlines={"copy ceiling": 2982.0, "cupy.sum": 2997.0, "copy (same run)": 2990.0})
    launches = Explorer(_launch_records(), x="chain", y="µs per kernel", series="mode", log_x=True, log_y=True)
    path = tmp_path_factory.mktemp("figures") / "page.html"
    path.write_text("<!doctype html><html><body style='margin:0'>"
                    f"{tiles.html()}{ceilings.html()}{launches.html()}</body></html>", encoding="utf-8")
    with open_page(path) as driver:
        yield driver, tiles, ceilings, launches, path


def test_every_slider_position_shows_a_recorded_setting(figures):
    """Moving any control to any position shows data (a line, or marks saying why there is none):
    settings that were never recorded are skipped by moving the other sliders."""
    driver, tiles, *_ = figures
    empty = []
    for control in tiles.controls:
        for position in range(len(tiles.values(control))):
            move(driver, tiles.id, f'input[data-control="{control}"]', position)
            s = state(driver, tiles.id)
            if not s["paths"] and not s["untimed"]:
                empty.append((control, position))
            settings = driver.execute_script(
                """var r=document.getElementById(arguments[0]);return arguments[1].map(function(f){
                   return Number(r.querySelector('output[data-for="'+f+'"]').textContent);});""",
                tiles.id, tiles.controls)
            assert tuple(settings) in tiles.recorded_settings()
    assert empty == []


def test_moved_slider_keeps_its_value_when_that_value_was_recorded(figures):
    driver, tiles, *_ = figures
    move(driver, tiles.id, 'input[data-control="BM"]', 0)
    move(driver, tiles.id, 'input[data-control="BN"]', 1)      # BN 256 was recorded only with BM 128, TN 8
    value = lambda f: driver.execute_script(
        "return document.getElementById(arguments[0]).querySelector('output[data-for=\"'+arguments[1]+'\"]').textContent",
        tiles.id, f)
    assert (value("BM"), value("BN"), value("TN")) == ("128", "256", "8")


def test_reference_line_labels_do_not_overlap(figures):
    driver, _, ceilings, *_ = figures
    labels = _boxes(driver, ceilings.id, ".course-explorer-hline-label")
    assert len(labels) == 3
    assert _overlapping(labels) == []


@pytest.mark.parametrize("axis", ["xtick", "ytick"])
def test_log_axis_tick_labels_do_not_collide(figures, axis):
    driver, *_, launches, _ = figures
    ticks = _boxes(driver, launches.id, f".course-explorer-{axis}")
    assert len(ticks) >= 3, ticks
    assert _overlapping(ticks) == []


def test_axis_labels_are_words_with_units(figures):
    driver, *_, launches, _ = figures
    text = _boxes(driver, launches.id, ".course-explorer-xlabel, .course-explorer-ylabel")
    assert [t[4] for t in text] == ["kernels in the chain, log scale", "wall time per kernel (µs), log scale"]


def test_series_colours_match_the_matplotlib_twin(figures):
    """The launch-overhead figure draws graph, stream and raw CuPy in matplotlib's first three
    colours, in name order; the explorer uses the same colour for the same series."""
    driver, *_, launches, _ = figures
    colours = driver.execute_script(
        """var o={};document.getElementById(arguments[0]).querySelectorAll('path.course-explorer-line')
           .forEach(function(p){o[p.getAttribute('data-series')]=p.getAttribute('stroke');});return o;""", launches.id)
    assert colours == {"graph": "#1f77b4", "stream": "#ff7f0e", "stream, raw CuPy": "#2ca02c"}


def test_at_phone_width_the_plot_keeps_its_proportions_and_readable_text(figures):
    """At 400 px the plot is redrawn for its width: not squeezed into a strip, text at full size."""
    driver, _, ceilings, _, path = figures
    set_viewport(driver, 400)
    load(driver, path)
    plot = driver.execute_script(
        """var r=document.getElementById(arguments[0]),s=r.querySelector('svg.course-explorer-plot').getBoundingClientRect();
           var t=r.querySelector('.course-explorer-ytick').getBoundingClientRect();
           return {w:s.width,h:s.height,text:t.height,root:r.getBoundingClientRect().right,win:window.innerWidth};""",
        ceilings.id)
    assert plot["root"] <= plot["win"]
    assert plot["h"] >= 0.55 * plot["w"], plot       # 720 x 320 at full width; taller than that, relatively, on a phone
    assert plot["text"] >= 11, plot                  # 11 px tick labels stay 11 px, not scaled down
    assert _overlapping(_boxes(driver, ceilings.id, ".course-explorer-hline-label")) == []


def test_site_script_redraws_an_explorer_recorded_by_an_older_version(tmp_path):
    """The website loads book/_static/course-explorer.js: an explorer recorded in a notebook output
    before the labels existed is redrawn with them, and its sliders still work."""
    require_chromium()
    recorded = Explorer([{"size_mib": m, "GB/s": 100.0 * m, "flush": f} for m in (1, 4, 16) for f in (True, False)],
                        x="size_mib", y="GB/s", series="flush", log_x=True).html()
    payload = re.search(r'class="course-explorer-data">(.*?)</script>', recorded).group(1)
    config = json.loads(payload.replace("<\\/", "</"))
    for key in ("labels", "colors"):
        config["config"].pop(key)                                 # as an older recording has it
    config["config"]["xlabel"], config["config"]["ylabel"] = "size_mib", "GB/s"
    old = recorded.replace(payload, json.dumps(config)).replace("function render(root", "function unused(root")
    old = re.sub(r"<script>\(function\(\)\{.*?</script>", "<script></script>", old, flags=re.S)
    page = tmp_path / "page.html"
    page.write_text(f'<!doctype html><html><head><script src="{SITE_SCRIPT.as_uri()}"></script></head>'
                    f"<body>{old}</body></html>", encoding="utf-8")
    with open_page(page) as driver:
        root = driver.find_element("css selector", ".course-explorer").get_attribute("id")
        labels = _boxes(driver, root, ".course-explorer-xlabel, .course-explorer-ylabel")
        assert [t[4] for t in labels] == ["working set (MiB), log scale", "bandwidth (GB/s)"]
        before = state(driver, root)["readout"]
        move(driver, root, "input[data-point]", 2)
        assert state(driver, root)["readout"] != before
        assert [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"] == []
