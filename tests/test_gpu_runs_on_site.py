"""A chapter run on several GPUs: the website embeds the other runs' explorer data in the page
(book/_ext/course_site.py), so a reader can switch an explorer between the recorded GPUs."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest

from kernels.explorer import Explorer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

pytest.importorskip("sphinx.application", reason="the site extension needs Sphinx (the book's requirements)")
import course_site  # noqa: E402


def _notebook(gpu: str, explorers: list[Explorer]) -> dict:
    cells = [nbformat.v4.new_code_cell("show()", outputs=[
        nbformat.v4.new_output("display_data", data={"text/html": str(e.html()), "text/plain": "x"})])
        for e in explorers]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("prose"), *cells])
    nb.metadata["course"] = {"provenance": {"gpu": gpu, "date": "2026-11-29"}}
    return nb


def _records(scale: float) -> list[dict]:
    return [{"threads": t, "GB/s": scale * t, "note": "</script><!-- a hostile string"} for t in (32, 64, 128)]


def test_payloads_are_found_in_page_order_and_unescaped() -> None:
    nb = _notebook("GPU A", [Explorer(_records(1.0), "threads", "GB/s", title="first"),
                             Explorer(_records(2.0), "threads", "GB/s", title="second")])
    found = course_site.explorer_payloads(json.loads(nbformat.writes(nb)))
    assert [p["config"]["title"] for p in found] == ["first", "second"]
    assert found[1]["data"] == Explorer(_records(2.0), "threads", "GB/s").payload()["data"]


def test_other_runs_are_aligned_with_the_page_s_explorers(tmp_path: Path) -> None:
    main = tmp_path / "ch.ipynb"
    nbformat.write(_notebook("GPU A", [Explorer(_records(1.0), "threads", "GB/s"),
                                       Explorer(_records(1.0), "threads", "GB/s", controls=["note"])]), main)
    (tmp_path / "runs" / "gpu-b").mkdir(parents=True)
    nbformat.write(_notebook("GPU B", [Explorer(_records(3.0), "threads", "GB/s"),
                                       Explorer(_records(3.0), "GB/s", "threads")]),  # another figure
                   tmp_path / "runs" / "gpu-b" / "ch.ipynb")
    runs = course_site.recorded_runs(main)
    assert runs is not None and runs["main"]["gpu"] == "GPU A"
    (other,) = runs["runs"]
    assert other["gpu"] == "GPU B" and other["explorers"][1] is None
    assert other["explorers"][0]["data"] == Explorer(_records(3.0), "threads", "GB/s").payload()["data"]
    script = course_site.runs_script(runs)
    assert "</script>" not in script[:-len("</script>")] and "<!--" not in script
    assert json.loads(script[script.index(">") + 1:-len("</script>")]) == runs


def test_a_chapter_without_other_runs_embeds_nothing(tmp_path: Path) -> None:
    main = tmp_path / "ch.ipynb"
    nbformat.write(_notebook("GPU A", [Explorer(_records(1.0), "threads", "GB/s")]), main)
    assert course_site.recorded_runs(main) is None


def test_every_kept_run_of_this_book_aligns_with_its_chapter() -> None:
    """The runs kept in book/runs/ are of the chapters' code, so every explorer has its twin."""
    kept = sorted((ROOT / "book" / "runs").glob("*/*.ipynb"))
    assert kept, "no second GPU run is kept"
    for run in kept:
        runs = course_site.recorded_runs(ROOT / "book" / run.name)
        if runs is None:  # a chapter with no explorer
            continue
        for other in runs["runs"]:
            assert all(e is not None for e in other["explorers"]), (run, other["gpu"])


def test_the_switch_redraws_an_explorer_from_the_other_gpu_s_run(tmp_path: Path) -> None:
    """In a browser: the site script puts a 'Recorded on' row above each explorer with a twin, and a
    click redraws the explorer from that run's data and names that run's GPU in its caption (and back)."""
    from browser import console_errors, open_page, require_chromium

    require_chromium()
    mine, theirs, lonely = (Explorer(_records(1.0), "threads", "GB/s", readout=["GB/s"],
                                     caption="Recorded on GPU A; run the notebook on a GPU to measure live."),
                            Explorer(_records(5.0), "threads", "GB/s", readout=["GB/s"]),
                            Explorer(_records(1.0), "GB/s", "threads"))
    runs = {"main": {"gpu": "GPU A", "date": "2026-11-27"},
            "runs": [{"gpu": "GPU B", "date": "2026-11-29", "explorers": [theirs.payload(), None]}]}
    script = (ROOT / "book" / "_static" / "course-explorer.js").read_text(encoding="utf-8")
    page = tmp_path / "page.html"
    page.write_text(f"<!doctype html><html><body>{mine.html()}{lonely.html()}{course_site.runs_script(runs)}"
                    f"<script>{script}</script></body></html>", encoding="utf-8")
    read = """var r=document.getElementById(arguments[0]);
        return {lines: Array.prototype.map.call(r.querySelectorAll('path.course-explorer-line'),
                    function(p){return p.getAttribute('d');}),
                readout: r.querySelector('.course-explorer-readout').textContent,
                caption: r.querySelector('.course-explorer-caption').textContent,
                bars: document.querySelectorAll('.course-explorer-gpus').length,
                pressed: Array.prototype.map.call(document.querySelectorAll('.course-explorer-gpus button'),
                    function(b){return b.textContent + '=' + b.getAttribute('aria-pressed');})};"""
    with open_page(page) as driver:
        before = driver.execute_script(read, mine.id)
        assert before["bars"] == 1, "only the explorer with a twin gets a switch"
        assert before["pressed"] == ["GPU A (2026-11-27)=true", "GPU B (2026-11-29)=false"]
        driver.execute_script("document.querySelectorAll('.course-explorer-gpus button')[1].click();")
        after = driver.execute_script(read, mine.id)
        assert after["pressed"] == ["GPU A (2026-11-27)=false", "GPU B (2026-11-29)=true"]
        assert after["readout"] != before["readout"]  # the same shape, five times the values
        assert before["caption"] == "Recorded on GPU A; run the notebook on a GPU to measure live."
        assert after["caption"] == "Recorded on GPU B; run the notebook on a GPU to measure live."
        driver.execute_script("document.querySelectorAll('.course-explorer-gpus button')[0].click();")
        back = driver.execute_script(read, mine.id)
        assert back["readout"] == before["readout"] and back["caption"] == before["caption"]
        assert console_errors(driver) == []
