"""Take the README's picture of the course: a page of the built website in headless Chromium.

    python tools/screenshot.py                      # book/gpu_architecture.html, else the intro page
    python tools/screenshot.py --page book/intro.html --out book/_static/course-screenshot.png

Why a script: the picture must show the real site, and it should be easy to redo when the site
changes. Needs `make book` first and Chromium (Debian packages chromium and chromium-driver).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
DEFAULT_PAGES = ("book/gpu_architecture.html", "book/intro.html")
DEFAULT_OUT = ROOT / "book" / "_static" / "course-screenshot.png"


def default_page() -> Path:
    """The first chapter page that was built, so the picture shows a real chapter when there is one."""
    for page in DEFAULT_PAGES:
        if (SITE / page).exists():
            return SITE / page
    raise SystemExit(f"no built page in {SITE}: run `make book` first")


def screenshot(page: Path, out: Path, width: int, height: int, scroll_to: str | None) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from browser import chromium_available, open_page

    if not chromium_available():
        raise SystemExit("headless Chromium is missing: apt-get install chromium chromium-driver")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open_page(page, width=width, height=height) as driver:
        if scroll_to:
            driver.execute_script(
                "const el = document.querySelector(arguments[0]); if (el) el.scrollIntoView({block: 'center'});",
                scroll_to)
        time.sleep(1.0)  # let fonts and inline scripts (the explorers) finish drawing
        driver.save_screenshot(str(out))
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", type=Path, help="page under _build/html (default: a chapter, else the intro)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    parser.add_argument("--scroll-to", default=None, help="CSS selector to bring into view, e.g. .course-explorer")
    args = parser.parse_args()
    page = SITE / args.page if args.page else default_page()
    if not page.exists():
        raise SystemExit(f"{page} does not exist: run `make book` first")
    screenshot(page, args.out.resolve(), args.width, args.height, args.scroll_to)


if __name__ == "__main__":
    main()
