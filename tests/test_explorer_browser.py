"""The recorded explorer in a real (headless) browser: it draws, and its sliders change what it shows."""
from __future__ import annotations

import pytest

from browser import open_page, require_chromium
from kernels.explorer import Explorer

from test_explorer import records


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
    assert s["untimed"] == [] and "not timed" not in s["legend"]
    move(driver, first.id, 'input[data-control="block"]', 2)
    s = state(driver, first.id)
    assert sorted(m.split(":")[0] for m in s["untimed"]) == ["double", "float"]
    assert all("too many resources" in m for m in s["untimed"])
    assert "not timed" in s["legend"]
