"""The recorded explorer's HTML: structure, embedded data, ids, labels, and points without a value."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernels.explorer import (FIELD_LABELS, Explorer, decode_columns, encode_columns, field_label,
                              site_script)

ROOT = Path(__file__).resolve().parents[1]
SITE_SCRIPT = ROOT / "book" / "_static" / "course-explorer.js"


def records() -> list[dict]:
    out = []
    for block in (64, 128, 256):
        for n in (1 << 10, 1 << 14, 1 << 18, 1 << 22):
            for dtype in ("float", "double"):
                rec = {"block": block, "n": n, "dtype": dtype, "GB/s": n / 1e3 * block / 100, "ms": n / 1e7}
                if block == 256 and n == 1 << 22:
                    rec = {"block": block, "n": n, "dtype": dtype,
                           "note": "CUDARuntimeError: too many resources requested for launch"}
                out.append(rec)
    return out


def make(**kw) -> Explorer:
    args = dict(x="n", y="GB/s", controls=["block"], series="dtype", log_x=True,
                hlines={"copy bandwidth": 2950.0}, readout=["ms"], title="copy")
    args.update(kw)
    return Explorer(records(), **args)


def embedded(html: str) -> dict:
    match = re.search(r'<script type="application/json" class="course-explorer-data">(.*?)</script>', html, re.S)
    assert match, "data script missing"
    return json.loads(match.group(1))


def test_structure_has_the_hooks_browser_tests_use():
    html = make().html()
    assert html.count('class="course-explorer"') == 1
    assert 'class="course-explorer-data"' in html and 'class="course-explorer-caption"' in html
    assert "<script>" in html and "function render(root" in html
    # self-contained: nothing fetched from anywhere
    assert not re.search(r"<(script|img|link|iframe)[^>]*\b(src|href)=", html)
    assert not re.search(r"https?://", html.replace("http://www.w3.org/2000/svg", ""))  # only the SVG namespace


def test_slider_ranges_cover_distinct_sorted_values():
    e = make()
    assert e.values("block") == [64, 128, 256]
    assert e.values("n") == [1 << 10, 1 << 14, 1 << 18, 1 << 22]
    assert embedded(e.html())["config"]["start"] == {"block": 0, "n": 0}


def test_recorded_settings_are_the_combinations_with_a_record():
    sparse = [{"a": 1, "b": 1, "x": 1, "y": 2.0}, {"a": 2, "b": 2, "x": 1, "note": "spills"}]
    e = Explorer(sparse, x="x", y="y", controls=["a", "b"])
    assert e.recorded_settings() == [(1, 1), (2, 2)]   # (1, 2) and (2, 1) are never shown


def test_axis_labels_are_words_with_units():
    e = Explorer([{"size_mib": 1, "time_us": 2.0, "flush": True}], x="size_mib", y="time_us", series="flush")
    config = embedded(e.html())["config"]
    assert config["xlabel"] == "working set (MiB)" and config["ylabel"] == "time (µs)"
    assert config["labels"]["flush"] == "flush"          # a word already: shown as it is
    assert Explorer([{"x": 1, "y": 2}], x="x", y="y", xlabel="own words").xlabel == "own words"
    assert all("_" not in label for label in FIELD_LABELS.values())


def test_every_recorded_explorer_axis_has_a_label_in_words():
    """The labels come from this package at build time (the site script redraws recorded explorers),
    so every field a chapter plots must read as words, with a unit where it has one."""
    bare_units = {"GB/s", "GFLOP/s", "TFLOP/s", "ms", "us", "µs", "ns"}
    found = {}
    for notebook in sorted((ROOT / "book").glob("*.ipynb")):
        for match in re.finditer(r'class=\\"course-explorer-data\\">(.*?)</script>', notebook.read_text()):
            config = json.loads(json.loads(f'"{match.group(1)}"').replace("<\\/", "</"))["config"]
            for field in (config["x"], config["y"]):
                found[field] = notebook.name
    assert found, "no recorded explorer found in book/*.ipynb"
    unlabelled = {f: nb for f, nb in found.items() if "_" in field_label(f) or field_label(f) in bare_units}
    assert unlabelled == {}


def test_the_website_copy_of_the_renderer_is_current():
    assert SITE_SCRIPT.read_text(encoding="utf-8") == site_script(), \
        "book/_static/course-explorer.js is stale: run `python -m kernels.explorer book/_static/course-explorer.js`"


def test_data_round_trip():
    e = make()
    payload = embedded(e.html())
    assert payload["config"]["x"] == "n" and payload["config"]["controls"] == ["block"]
    assert payload["config"]["hlines"] == [["copy bandwidth", 2950.0]]
    back = decode_columns(payload["data"])
    assert len(back) == len(records())
    for got, want in zip(back, records()):
        for key in ("block", "n", "dtype", "GB/s", "ms", "note"):
            if isinstance(want.get(key), float):
                assert got[key] == pytest.approx(want[key], rel=1e-5)
            else:
                assert got.get(key) == want.get(key)


def test_columns_are_compressed_for_grids():
    grid = [{"a": a, "b": b, "v": a * b} for a in range(40) for b in range(40)]
    data = encode_columns(grid, ["a", "b", "v"])
    assert isinstance(data["cols"]["a"], dict)  # repeated values are not spelled out
    assert len(json.dumps(data)) < len(json.dumps(grid)) / 2
    assert decode_columns(data) == grid


def test_ids_are_unique_per_instance_and_per_call():
    a, b = make(), make()
    ids = {re.search(r'id="(course-explorer-[0-9a-f]+)"', h).group(1) for h in (a.html(), b.html(), a.html())}
    assert len(ids) == 3
    html = a.html()
    assert f'getElementById("{a.id}")' in html


def test_missing_values_are_null_with_a_note():
    payload = embedded(make().html())
    back = decode_columns(payload["data"])
    failed = [r for r in back if r["block"] == 256 and r["n"] == 1 << 22]
    assert failed and all(r["GB/s"] is None for r in failed)
    assert all("too many resources" in r["note"] for r in failed)


def test_nan_and_numpy_values_become_json():
    np = pytest.importorskip("numpy")
    e = Explorer([{"x": np.int64(1), "y": np.float64("nan")}, {"x": 2, "y": np.float32(2.5)}], x="x", y="y")
    back = decode_columns(embedded(e.html())["data"])
    assert back == [{"x": 1, "y": None}, {"x": 2, "y": 2.5}]


def test_script_cannot_be_closed_by_data():
    e = Explorer([{"x": 1, "y": 2, "label": "</script><b>"}], x="x", y="y", readout=["label"])
    html = e.html()
    assert html.count("</script>") == 2
    assert decode_columns(embedded(html)["data"])[0]["label"] == "</script><b>"


def test_repr_html_is_the_fragment():
    e = make()
    assert 'class="course-explorer"' in e._repr_html_()


def test_initial_values_pick_slider_positions():
    e = make(initial={"block": 128, "n": 1 << 18})
    assert embedded(e.html())["config"]["start"] == {"block": 1, "n": 2}
