"""The built website (``_build/html``, made by ``make book``), checked the way a reader sees it.

Static checks read the HTML; the rest open pages in headless Chromium (tests/browser.py), because only
a browser tells whether plots load and the recorded explorers respond without a kernel or network.
Expectations come from the chapter notebooks themselves: a page must show every plot, explorer and
GPU name that its .ipynb holds.
"""
from __future__ import annotations

import html
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))

import notebooks as nbtools  # noqa: E402
from browser import open_page, require_chromium  # noqa: E402

CONFIG = nbtools.read_config()
CHAPTERS = [pair for pair in nbtools.find_pairs() if pair.ipynb.exists()]
IDS = [pair.name for pair in CHAPTERS]
WIDGET_VIEW_SCRIPT = re.compile(r'<script[^>]*type="application/vnd\.jupyter\.widget-view\+json"', re.I)


def _site() -> Path:
    if not (SITE / "index.html").exists():
        pytest.fail(f"no built website in {SITE}: run `make book` first")
    return SITE


def _page(pair: nbtools.Pair) -> Path:
    page = _site() / "book" / f"{pair.name}.html"
    assert page.exists(), f"{pair.name} has a notebook but no page: is it in _toc.yml?"
    return page


def _outputs(pair: nbtools.Pair) -> list[dict]:
    nb = nbtools.read_notebook(pair.ipynb)
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]


def _count_images(pair: nbtools.Pair) -> int:
    return sum(any(k.startswith("image/") for k in out.get("data", {})) for out in _outputs(pair))


def _has_explorer(pair: nbtools.Pair) -> bool:
    return any("course-explorer" in "".join(out.get("data", {}).get("text/html", "")) for out in _outputs(pair))


def test_site_was_built_with_the_landing_page() -> None:
    text = (_site() / "book" / "intro.html").read_text(encoding="utf-8")
    assert "GPU Kernels from the Hardware Up" in text


def test_no_page_keeps_a_widget_view_without_its_fallback() -> None:
    """Widget views need a live kernel; the site must show the recorded text/html fallback instead."""
    offenders = [str(p.relative_to(SITE)) for p in _site().rglob("*.html")
                 if WIDGET_VIEW_SCRIPT.search(p.read_text(encoding="utf-8", errors="replace"))]
    assert offenders == [], f"widget-view outputs rendered without fallback in {offenders}"


def test_every_widget_output_in_the_notebooks_has_an_html_fallback() -> None:
    missing = [pair.name for pair in CHAPTERS for out in _outputs(pair)
               if "application/vnd.jupyter.widget-view+json" in out.get("data", {})
               and "text/html" not in out["data"]]
    assert missing == [], f"widget outputs with no text/html fallback (blank on the website): {missing}"


def _colab_base() -> str:
    owner, repo = urlparse(CONFIG["repository"]["url"]).path.strip("/").split("/")[:2]
    branch = CONFIG["repository"].get("branch", "main")
    return f"https://colab.research.google.com/github/{owner}/{repo}/blob/{branch}/"


# The launch button in the page header opens a new tab; links written in the text (the chapter's
# exercise list) are rendered by Sphinx as "reference external" and stay in the tab.
LAUNCH_BUTTON = re.compile(r'<a href="(https://colab\.research\.google\.com/[^"]+)" target="_blank"')
TEXT_LINK = re.compile(r'<a class="reference external" href="(https://colab\.research\.google\.com/[^"]+)"')


@pytest.mark.parametrize("pair", CHAPTERS, ids=IDS)
def test_colab_button_opens_the_notebook_on_main(pair: nbtools.Pair) -> None:
    buttons = LAUNCH_BUTTON.findall(_page(pair).read_text(encoding="utf-8"))
    assert buttons == [f"{_colab_base()}book/{pair.name}.ipynb"], buttons


@pytest.mark.parametrize("pair", CHAPTERS, ids=IDS)
def test_colab_links_in_the_text_open_notebooks_of_this_repository(pair: nbtools.Pair) -> None:
    base = _colab_base()
    links = TEXT_LINK.findall(_page(pair).read_text(encoding="utf-8"))
    broken = [link for link in links
              if not link.startswith(base) or not (ROOT / link[len(base):]).is_file()]
    assert broken == [], f"Colab links to notebooks that are not in this repository: {broken}"


@pytest.mark.parametrize("pair", CHAPTERS, ids=IDS)
def test_page_names_the_gpu_its_numbers_came_from(pair: nbtools.Pair) -> None:
    provenance = nbtools.get_provenance(nbtools.read_notebook(pair.ipynb))
    assert provenance, f"{pair.ipynb.name} has no GPU provenance"
    text = html.unescape(re.sub(r"<[^>]+>", " ", _page(pair).read_text(encoding="utf-8")))
    assert f"GPU: {provenance['gpu']}" in text


@pytest.mark.parametrize("pair", CHAPTERS, ids=IDS)
def test_plots_are_present_and_load(pair: nbtools.Pair) -> None:
    expected = _count_images(pair)
    if pair.name == "gpu_architecture":
        assert expected > 0, "the architecture chapter's notebook holds no plots"
    page = _page(pair)
    require_chromium()
    with open_page(page) as driver:
        images = driver.execute_script(
            "return Array.from(document.querySelectorAll('article img, .bd-article img'))"
            ".map(i => [i.getAttribute('src'), i.complete, i.naturalWidth]);")
    unique = {src: (done, width) for src, done, width in images}
    broken = [src for src, (done, width) in unique.items() if not (done and width > 0)]
    assert broken == [], f"images that did not load: {broken}"
    assert len([src for src in unique if "_images/" in src]) >= expected, unique


@pytest.mark.parametrize("pair", [p for p in CHAPTERS if _has_explorer(p)] or
                         [pytest.param(None, marks=pytest.mark.skip(reason="no recorded explorer in any chapter yet"))])
def test_recorded_explorer_responds_to_its_sliders(pair: nbtools.Pair | None) -> None:
    assert pair is not None
    page = _page(pair)
    require_chromium()
    with open_page(page) as driver:
        result = driver.execute_script("""
            const box = document.querySelector('.course-explorer');
            if (!box) return {error: 'no .course-explorer on the page'};
            const readout = box.querySelector('.course-explorer-readout');
            if (!readout) return {error: 'no .course-explorer-readout'};
            const movable = sel => Array.from(box.querySelectorAll(sel)).find(s => Number(s.max) > Number(s.min));
            const slider = movable('input[type=range][data-control]') || movable('input[type=range][data-point]');
            if (!slider) return {error: 'no slider with more than one position'};
            const before = readout.textContent;
            const target = slider.value === slider.max ? slider.min : slider.max;
            slider.value = target;
            slider.dispatchEvent(new Event('input', {bubbles: true}));
            slider.dispatchEvent(new Event('change', {bubbles: true}));
            return {before: before, after: readout.textContent, control: slider.dataset.control || slider.dataset.point};
        """)
    assert "error" not in result, result["error"]
    assert result["before"].strip(), "the readout is empty before any interaction"
    assert result["after"] != result["before"], f"moving {result['control']!r} did not change the readout"


def test_cpu_backend_page_shows_the_traffic_pictures_made_at_build_time() -> None:
    """The page on running without a GPU is executed by the build (CPU backend, no GPU): its analysis
    prints the strided copy's report and draws the warp, heat-map and per-thread pictures."""
    text = (_site() / "book" / "cpu_backend.html").read_text(encoding="utf-8")
    images = re.findall(r'<img [^>]*src="\.\./_images/[^"]+\.png"', text)
    assert len(images) >= 3, images
    assert "8 per request; 4 would do" in html.unescape(text)
