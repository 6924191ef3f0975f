"""The built website (``_build/html``, made by ``make book``; ``COURSE_SITE`` points to another build),
checked the way a reader sees it.

Static checks read the HTML; the rest open pages in headless Chromium (tests/browser.py), because only
a browser tells whether plots load and the recorded explorers respond without a kernel or network.
Expectations come from the chapter notebooks themselves: a page must show every plot, explorer and
GPU name that its .ipynb holds.
"""
from __future__ import annotations

import html
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("COURSE_SITE", ROOT / "_build" / "html"))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))

import exercises as extool  # noqa: E402
import notebooks as nbtools  # noqa: E402
from browser import browser, console_errors, favicon_problem, load, open_page, require_chromium  # noqa: E402

from kernels.grading.registry import all_exercises  # noqa: E402

CONFIG = nbtools.read_config()
CHAPTERS = [pair for pair in nbtools.find_pairs() if pair.ipynb.exists()]
IDS = [pair.name for pair in CHAPTERS]
EXERCISE_IDS = list(all_exercises())
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


# --------------------------------------------------------------------------------------------------
# Exercise pages
# --------------------------------------------------------------------------------------------------

def _visible_text(page: Path) -> str:
    """The page's text as a reader sees it (code included), whitespace collapsed."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S | re.I)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).split())


@pytest.mark.parametrize("exercise_id", EXERCISE_IDS)
def test_every_exercise_has_a_page_with_its_task_starter_and_colab_button(exercise_id: str) -> None:
    page = _site() / "exercises" / f"{exercise_id}.html"
    assert page.exists(), f"{exercise_id} has no page: run `python tools/exercises.py build`, then build the site"
    assert LAUNCH_BUTTON.findall(page.read_text(encoding="utf-8")) == [f"{_colab_base()}exercises/{exercise_id}.ipynb"]
    text = _visible_text(page)
    for heading in ("Task", "Check", "How this exercise is graded"):
        assert heading in text, f"{exercise_id}: no '{heading}' on the page"
    starter = " ".join(extool.starter(exercise_id).split())
    assert starter in text, f"{exercise_id}: the page does not show the starter code"


def test_no_page_of_the_site_shows_solution_code() -> None:
    """Every page, chapters included, searched for the text of every SOLUTION region."""
    pages = {str(p.relative_to(_site())): _visible_text(p) for p in _site().rglob("*.html")}
    leaks = [f"{page}: {exercise_id}: {region[:60]!r}"
             for exercise_id in EXERCISE_IDS for region in extool.solution_regions(exercise_id)
             for page, text in pages.items() if " ".join(region.split()) in text]
    assert leaks == [], "solution code on the website:\n" + "\n".join(leaks)


def test_chapter_index_pages_link_every_exercise_page() -> None:
    for chapter in extool.chapters_with_exercises():
        page = _site() / "book" / "exercises" / f"{chapter}.html"
        assert page.exists(), f"no exercise index page for {chapter}"
        article = re.search(r"<article\b.*?</article>", page.read_text(encoding="utf-8"), re.S)
        assert article, f"{page.name}: no <article>"
        links = set(re.findall(r'href="\.\./\.\./exercises/([^"#]+)\.html"', article.group(0)))
        assert links == {f"{chapter}/{ex.name}" for ex in all_exercises().values()
                         if ex.chapter == chapter}, chapter


# --------------------------------------------------------------------------------------------------
# Every page: launch buttons, favicon, MathJax, console
# --------------------------------------------------------------------------------------------------

def test_every_launch_button_opens_a_notebook_of_this_repository() -> None:
    """Colab opens only notebooks: a page whose source is not an .ipynb in the repository has no button."""
    base = _colab_base()
    broken = [f"{page.relative_to(_site())}: {url}" for page in _site().rglob("*.html")
              for url in LAUNCH_BUTTON.findall(page.read_text(encoding="utf-8"))
              if not (url.startswith(base) and url.endswith(".ipynb") and (ROOT / url[len(base):]).is_file())]
    assert broken == [], "launch buttons Colab cannot open:\n" + "\n".join(broken)
    assert not LAUNCH_BUTTON.findall((_site() / "book" / "cpu_backend.html").read_text(encoding="utf-8"))


def test_mathjax_is_served_with_the_site() -> None:
    """An offline copy must still typeset formulas: MathJax and its fonts come from _static, not a CDN."""
    sources = {src for page in _site().rglob("*.html")
               for src in re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', page.read_text(encoding="utf-8"))}
    assert sources, "no page loads MathJax"
    remote = sorted(src for src in sources if "://" in src)
    assert remote == [], f"MathJax loaded from the network: {remote}"
    assert (_site() / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()


def _pages_to_open() -> list[Path]:
    """One page of each kind: the landing page, the CPU-backend page, a chapter, an exercise index and
    an exercise. (tests/test_page_widths.py opens every page and fails on any console error.)"""
    site = _site()
    pages = [site / "book" / "intro.html", site / "book" / "cpu_backend.html", site / "book" / "reduce.html"]
    pages += sorted((site / "book" / "exercises").glob("*.html"))[:1] + sorted((site / "exercises").rglob("*.html"))[:1]
    return [p for p in pages if p.exists()]


def test_pages_log_no_console_errors_and_show_the_favicon() -> None:
    pages = _pages_to_open()
    require_chromium()
    found = []
    with browser(1400, 900) as driver:
        for page in pages:
            load(driver, page)
            problem = favicon_problem(driver)
            found += [f"{page.relative_to(SITE)}: {message}" for message in console_errors(driver)]
            found += [f"{page.relative_to(SITE)}: {problem}"] if problem else []
    assert found == [], "\n".join(found)


def test_formulas_are_typeset_without_the_network() -> None:
    page = next((p for p in sorted((_site() / "book").glob("*.html"))
                 if 'class="math' in p.read_text(encoding="utf-8")), None)
    assert page is not None, "no page with a formula"
    require_chromium()
    with open_page(page) as driver:
        result = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const report = () => done({
                typeset: document.querySelectorAll('mjx-container').length,
                remote: performance.getEntriesByType('resource').map(e => e.name).filter(n => /^https?:/.test(n)),
            });
            if (!window.MathJax || !MathJax.startup) { done({error: 'MathJax did not load'}); return; }
            MathJax.startup.promise.then(report, e => done({error: String(e)}));
        """)
    assert "error" not in result, result
    assert result["typeset"] > 0, f"{page.name}: no formula typeset"
    assert result["remote"] == [], f"{page.name} fetched from the network: {result['remote']}"
