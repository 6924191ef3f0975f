"""Headless Chromium for tests that need a real browser: the recorded explorers and the built book
run JavaScript, and only a browser tells whether it actually draws.

Locally a missing Chromium skips those tests; in CI (``CI=true``) it fails them, because CI must
install it and a silently skipped browser test proves nothing.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("COURSE_CHROMEDRIVER", "/usr/bin/chromedriver")

FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--disable-quic",
)


def _missing() -> str | None:
    """Why a browser cannot be started here, or None when it can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).is_file() and os.access(path, os.X_OK)):
            return f"{path} not found or not executable"
    return None


def chromium_available() -> bool:
    """True when headless Chromium, chromedriver and selenium are all present."""
    return _missing() is None


def require_chromium() -> None:
    """Skip the calling test when there is no browser, except in CI, where that is a failure."""
    reason = _missing()
    if reason is None:
        return
    message = f"headless Chromium needed for this test: {reason}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI must install chromium and chromium-driver)")
    pytest.skip(message)


def _as_url(url_or_path: str | os.PathLike[str]) -> str:
    text = os.fspath(url_or_path)
    if "://" in text:
        return text
    return Path(text).resolve().as_uri()


@contextmanager
def browser(width: int = 1200, height: int = 900) -> Iterator["object"]:
    """A fresh headless Chromium (own profile directory, console messages kept); closed on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="course-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(60)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def set_viewport(driver: "object", width: int, height: int = 900) -> None:
    """Make the page's layout viewport exactly ``width`` CSS pixels wide, as a phone or a desktop
    window would (the window size alone leaves the width of the browser's own frame uncertain)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def load(driver: "object", url_or_path: str | os.PathLike[str]) -> None:
    """Open a page (a URL or a local file) in a running browser."""
    driver.get(_as_url(url_or_path))


@contextmanager
def open_page(url_or_path: str | os.PathLike[str], width: int = 1200, height: int = 900) -> Iterator["object"]:
    """A fresh headless Chromium showing the page; closed on exit."""
    with browser(width, height) as driver:
        load(driver, url_or_path)
        yield driver


def console_errors(driver: "object") -> list[str]:
    """The browser console's errors since the last call (Chromium hands each message out once)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def favicon_problem(driver: "object") -> str | None:
    """Why the open page shows no favicon (no ``<link rel="icon">``, or an image that does not load),
    or None when it does."""
    return driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const link = document.querySelector('link[rel~="icon"]');
        if (!link) { done('no <link rel="icon"> in the page'); return; }
        const image = new Image();
        image.onload = () => done(image.naturalWidth > 0 ? null : `${link.href} loads with no size`);
        image.onerror = () => done(`${link.href} does not load`);
        image.src = link.href;
    """)
