"""Sphinx fixes for the course website (loaded by _config.yml, `sphinx.local_extensions`).

- Inline scripts registered while the documents are read (sphinx-thebe's
  ``const THEBE_JS_URL = ...``) reach every page twice: once from Sphinx's registry and once from
  the builder, which it does not recognise as the same script because one has filename ``''`` and
  the other ``None``. A second ``const`` is a SyntaxError in the browser console, so each page keeps
  the first copy of every inline script.
- The theme gives every notebook page a Colab button that opens the page's source. Colab opens only
  ``.ipynb`` files, so pages built from a Markdown notebook with no ``.ipynb`` beside it in the
  repository (the CPU-backend page, executed at build time) get no launch button.
- A chapter run on other GPUs too (book/runs/<gpu>/<chapter>.ipynb, kept by
  ``tools/notebooks.py execute --second-run``) gets those runs' explorer data embedded in its page
  (``<script id="course-runs">``), so the explorers can switch between the recorded GPUs.
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx


def keep_first_inline_scripts(scripts: list[Any]) -> list[Any]:
    """``scripts`` without repeats of an inline script (same body, no file); files are left alone."""
    seen: set[str] = set()
    kept = []
    for script in scripts:
        body = getattr(script, "attributes", {}).get("body")
        if not getattr(script, "filename", None) and body is not None:
            if body in seen:
                continue
            seen.add(body)
        kept.append(script)
    return kept


def has_notebook_in_repository(app: Sphinx, pagename: str) -> bool:
    """True when the page comes from an .ipynb, or from a text file with its .ipynb beside it."""
    source = Path(app.env.doc2path(pagename))
    return source.suffix == ".ipynb" or source.with_suffix(".ipynb").is_file()


EXPLORER_DATA = re.compile(r'<script type="application/json" class="course-explorer-data">(.*?)</script>', re.S)


def explorer_payloads(notebook: dict[str, Any]) -> list[dict[str, Any]]:
    """The data of every recorded explorer in a notebook's outputs, in page order."""
    found = []
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            markup = output.get("data", {}).get("text/html")
            if markup is None:
                continue
            text = "".join(markup) if isinstance(markup, list) else markup
            found += [json.loads(m) for m in EXPLORER_DATA.findall(text)]  # "<\/" and "\u003c" are JSON
    return found


def _same_figure(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("x", "y", "controls", "series")
    return all(a["config"].get(k) == b["config"].get(k) for k in keys)


def _provenance(notebook: dict[str, Any]) -> dict[str, Any]:
    return notebook.get("metadata", {}).get("course", {}).get("provenance", {}) or {}


def recorded_runs(chapter_notebook: Path) -> dict[str, Any] | None:
    """The chapter's main GPU and, for each other GPU it was run on, that run's GPU, date and
    explorer data; None when it has no other run or no explorer."""
    runs = sorted(chapter_notebook.parent.glob(f"runs/*/{chapter_notebook.name}"))
    if not runs or not chapter_notebook.is_file():
        return None
    main = json.loads(chapter_notebook.read_text(encoding="utf-8"))
    shown = explorer_payloads(main)
    if not shown:
        return None
    others = []
    for path in runs:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        provenance = _provenance(notebook)
        recorded = explorer_payloads(notebook)
        # the n-th explorer of the page is the n-th of the run when it plots the same fields
        aligned = [other if other is not None and _same_figure(mine, other) else None
                   for mine, other in zip(shown, recorded + [None] * len(shown))]
        others.append({"gpu": provenance.get("gpu", path.parent.name), "date": provenance.get("date", ""),
                       "explorers": aligned})
    provenance = _provenance(main)
    return {"main": {"gpu": provenance.get("gpu", ""), "date": provenance.get("date", "")}, "runs": others}


def runs_script(runs: dict[str, Any]) -> str:
    """The page's embedded data for the explorers' GPU switch (safe inside a script element)."""
    data = json.dumps(runs, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return f'<script type="application/json" id="course-runs">{data}</script>'


def tidy_page(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    if "script_files" in context:
        context["script_files"] = keep_first_inline_scripts(context["script_files"])
    if pagename in app.env.all_docs and not has_notebook_in_repository(app, pagename):
        context["header_buttons"] = [button for button in context.get("header_buttons", [])
                                     if button.get("label") != "launch-buttons"]
    if pagename in app.env.all_docs and "body" in context:
        runs = recorded_runs(Path(app.env.doc2path(pagename)).with_suffix(".ipynb"))
        if runs is not None:
            context["body"] += runs_script(runs)


def setup(app: Sphinx) -> dict[str, Any]:
    # After sphinx-book-theme adds its header buttons (priority 501).
    app.connect("html-page-context", tidy_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
