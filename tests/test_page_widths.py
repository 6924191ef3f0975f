"""Every page of the built website fits its reader's screen: at 1400 px (a desktop window) and at 400 px
(a phone), no output block is wider than the page's content column, the page never scrolls sideways,
and the browser console shows no error.

What counts as "wider than its column". The column is the content box of the page's article
(``article.bd-article``: its width minus its padding). The blocks measured are what a notebook puts
on a page: cell outputs (``pre`` text, HTML tables, images, explorers) and every table, image and
``pre`` of the article. A block overflows when the box that *shows* it does not fit the column:

* the box that shows a block is the block itself, or the nearest ancestor between it and the column
  that clips its content (``overflow-x`` other than ``visible``, e.g. a table wrapper that scrolls);
* that box overflows when its border box reaches more than 1 px past either edge of the column;
* a block whose own box fits but whose content spills out of it unclipped (``scrollWidth`` larger
  than ``clientWidth`` with ``overflow-x: visible``, and no clipping ancestor) overflows too.

So a wide table in a ``pre`` that scrolls inside its own box, and that box fits the column, passes
as long as it shows the scroll hint (class ``course-scrolls`` and its edge shadow, set by
book/_static/course-outputs.js): the reader scrolls that one block, never the page. Printed output
that reads as prose does not scroll at all: it wraps. A block that pushes past the column fails, and
so does a page whose document is wider than the window (``scrollWidth > innerWidth``).

Needs a built site (``make book``; ``COURSE_SITE`` points elsewhere) and headless Chromium
(tests/browser.py). One browser visits every page of _toc.yml once, opens its dropdowns (hidden code
cells included) and measures it at both widths.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("COURSE_SITE", ROOT / "_build" / "html"))
sys.path.insert(0, str(ROOT / "tests"))

from browser import browser, console_errors, load, require_chromium, set_viewport  # noqa: E402

WIDTHS = (1400, 400)
TOLERANCE_PX = 1
SHOWN_AT_MOST = 8  # offenders quoted per page in a failure message

# The measurement, run in the page. Returns the page's sideways scroll and every offending block.
MEASURE = r"""
const tolerance = arguments[0];
const column = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
const style = getComputedStyle(column), box = column.getBoundingClientRect();
const left = box.left + parseFloat(style.paddingLeft), right = box.right - parseFloat(style.paddingRight);
const clips = el => getComputedStyle(el).overflowX !== 'visible';
function shownBy(el) {
  for (let a = el; a && a !== column; a = a.parentElement) if (clips(a)) return a;
  return el;
}
function describe(el) {
  const out = el.closest('.cell_output, .cell, section');
  const where = out && out.closest('section[id]') ? '#' + out.closest('section[id]').id : '';
  const text = (el.textContent || el.getAttribute('src') || '').trim().replace(/\s+/g, ' ').slice(0, 60);
  return el.tagName.toLowerCase() + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ')[0] : '')
         + ' ' + where + ' "' + text + '"';
}
const blocks = new Set(column.querySelectorAll(
  '.cell_output pre, .cell_output table, .cell_output img, .cell_output .course-explorer, ' +
  '.cell_output .output > *, pre, table, img, .course-explorer'));
const offenders = [];
for (const el of blocks) {
  const r = el.getBoundingClientRect();
  if ((r.width === 0 && r.height === 0) || (el.checkVisibility && !el.checkVisibility())) continue;  // not shown
  const shown = shownBy(el), s = shown.getBoundingClientRect();
  if (s.right > right + tolerance || s.left < left - tolerance) {
    offenders.push(`${describe(el)}: ${Math.round(s.width)} px wide, column ${Math.round(right - left)} px`);
  } else if (shown === el && !clips(el) && el.scrollWidth > el.clientWidth + tolerance && el.clientWidth > 0) {
    offenders.push(`${describe(el)}: content ${el.scrollWidth} px spills out of its ${el.clientWidth} px box`);
  }
}
const unhinted = [];
for (const el of blocks) {
  if (el.checkVisibility && !el.checkVisibility()) continue;
  const shown = shownBy(el);
  if (shown.clientWidth > 0 && shown.scrollWidth > shown.clientWidth + tolerance && clips(shown)
      && !(shown.classList.contains('course-scrolls') && getComputedStyle(shown).backgroundImage.includes('gradient'))) {
    unhinted.push(`${describe(el)}: scrolls ${shown.scrollWidth} px inside ${shown.clientWidth} px with no hint`);
  }
}
const doc = document.documentElement;
return {page: doc.scrollWidth - window.innerWidth, offenders: offenders, unhinted: [...new Set(unhinted)]};
"""


def _toc_files(entries: list[dict]) -> list[str]:
    files = []
    for entry in entries:
        if "file" in entry:
            files.append(entry["file"])
        for key in ("parts", "chapters", "sections"):
            files += _toc_files(entry.get(key, []))
    return files


def _pages() -> list[Path]:
    """Every page the table of contents builds (its root and each file under it)."""
    if not (SITE / "index.html").exists():
        pytest.fail(f"no built website in {SITE}: run `make book` first")
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [SITE / f"{Path(name).with_suffix('')}.html" for name in [toc["root"], *_toc_files([toc])]]
    missing = [str(p.relative_to(SITE)) for p in pages if not p.exists()]
    assert not missing, f"pages in _toc.yml that were not built (rebuild the site): {missing}"
    return list(dict.fromkeys(pages))


# Hidden code cells and dropdowns are <details>: open them all, the reader may.
OPEN_EVERY_DROPDOWN = "document.querySelectorAll('details').forEach(d => { d.open = true; });"

# After a resize the page's handlers run before the next frame (course-outputs.js re-marks the boxes
# that scroll, explorers redraw for their new width); a short pause covers a slow machine.
AFTER_RESIZE_MS = 50


def _settle(driver: object, pause_ms: int = 0) -> None:
    """Wait until the page's fonts and images are loaded, ``pause_ms`` has passed and the layout has
    stopped moving (a late font widens text inside boxes whose size does not change; the theme's
    sidebars slide in after a resize)."""
    driver.execute_async_script(
        """const done = arguments[arguments.length - 1], pause = arguments[0];
        const imgs = Array.from(document.images).filter(i => !i.complete);
        const fonts = document.fonts ? document.fonts.ready : Promise.resolve();
        Promise.all([fonts, ...imgs.map(i => new Promise(r => { i.onload = i.onerror = r; }))])
          .then(() => new Promise(r => setTimeout(r, pause)))
          .then(() => {
            // the theme animates its sidebars after a resize: wait until the column's width and every
            // box's scroll state have stayed the same for three frames (at most two seconds)
            const column = document.querySelector('article.bd-article') || document.body;
            const state = () => column.getBoundingClientRect().width + ':' + Array.from(
              document.querySelectorAll('pre')).map(p => p.clientWidth + '/' + p.className).join(',');
            let last = state(), same = 0, frames = 0;
            const step = () => {
              const now = state();
              same = now === last ? same + 1 : 0;
              last = now;
              if (same >= 3 || ++frames > 120) done(true); else requestAnimationFrame(step);
            };
            requestAnimationFrame(step);
          });""", pause_ms)


@pytest.fixture(scope="module")
def measurements() -> dict[tuple[str, int], dict]:
    """Each page at each width: its sideways scroll, its offending blocks and its console errors."""
    pages = _pages()
    require_chromium()
    results: dict[tuple[str, int], dict] = {}
    with browser() as driver:
        driver.set_script_timeout(30)
        order = list(WIDTHS)
        for page in pages:
            # each page is loaded once and measured at both widths (the second after a resize);
            # the order alternates so that every page but the first needs a single resize
            set_viewport(driver, order[0])
            load(driver, page)
            driver.execute_script(OPEN_EVERY_DROPDOWN)
            _settle(driver)
            for i, width in enumerate(order):
                if i:
                    set_viewport(driver, width)
                    _settle(driver, AFTER_RESIZE_MS)
                result = driver.execute_script(MEASURE, TOLERANCE_PX)
                result["errors"] = console_errors(driver)
                results[(str(page.relative_to(SITE)), width)] = result
            order.reverse()
    return results


def _report(found: dict[str, list[str]]) -> str:
    lines = []
    for where, items in found.items():
        lines.append(f"{where}: {len(items)}")
        lines += [f"    {item}" for item in items[:SHOWN_AT_MOST]]
    return "\n".join(lines)


@pytest.mark.parametrize("width", WIDTHS)
def test_no_output_block_is_wider_than_its_column(measurements: dict, width: int) -> None:
    found = {page: m["offenders"] for (page, w), m in measurements.items() if w == width and m["offenders"]}
    total = sum(len(v) for v in found.values())
    assert not found, f"{total} blocks wider than the column on {len(found)} pages at {width} px:\n{_report(found)}"


@pytest.mark.parametrize("width", WIDTHS)
def test_a_block_that_scrolls_inside_its_box_shows_a_hint(measurements: dict, width: int) -> None:
    """Scrolling inside a box that fits is allowed, but the reader must see that there is more: the
    box carries ``course-scrolls`` and its edge shadow (book/_static/course-outputs.css)."""
    found = {page: m["unhinted"] for (page, w), m in measurements.items() if w == width and m["unhinted"]}
    assert not found, f"blocks that scroll sideways with no visible hint at {width} px:\n{_report(found)}"


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_scrolls_sideways(measurements: dict, width: int) -> None:
    wide = {page: m["page"] for (page, w), m in measurements.items() if w == width and m["page"] > TOLERANCE_PX}
    assert not wide, f"pages wider than a {width} px window (extra px): {wide}"


def test_the_measurement_tells_a_block_that_scrolls_from_one_that_overflows(tmp_path: Path) -> None:
    """The definition above on a page made for it: only the blocks that leave the column are caught."""
    require_chromium()
    wide = "x" * 300
    page = tmp_path / "page.html"
    page.write_text(
        "<!doctype html><html><body style='margin:0'><article class='bd-article' style='width:300px;padding:10px'>"
        f"<pre id='scrolls' class='course-scrolls' style='overflow-x:auto;background:linear-gradient(red,red)'>{wide}</pre>"
        f"<pre id='bare' style='overflow-x:auto'>{wide}</pre>"
        f"<pre id='spills' style='overflow:visible'>{wide}</pre>"
        "<img id='big' style='width:500px;height:10px'>"
        f"<div style='overflow-x:auto'><table id='wrapped'><tr><td>{wide}</td></tr></table></div>"
        "</article></body></html>", encoding="utf-8")
    with browser() as driver:
        set_viewport(driver, 400)
        load(driver, page)
        result = driver.execute_script(MEASURE, TOLERANCE_PX)
    caught = sorted(line.split(" ")[0] for line in result["offenders"])
    assert caught == ["img", "pre"], result["offenders"]          # the image, and the pre that spills
    assert "spills out" in " ".join(result["offenders"])
    unhinted = sorted(line.split(" ")[0] for line in result["unhinted"])
    assert unhinted == ["pre", "table"], result["unhinted"]        # the bare pre, the wrapped table
    assert result["page"] > 0                                       # the spilling pre widens the page


def test_no_console_errors(measurements: dict) -> None:
    found = {f"{page} at {w} px": m["errors"] for (page, w), m in measurements.items() if m["errors"]}
    assert not found, f"console errors:\n{_report(found)}"
