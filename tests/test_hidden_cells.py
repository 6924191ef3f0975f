"""Cells tagged ``hide-input`` hold only plumbing (tables, charts, explorers), never what a student must read.

A chapter hides the code of cells that format or draw results already computed, so that the code on the
page is the kernel, its launch, its check and the measurement. Hiding is a tag in the chapter's .md, and
the website and Colab show the .ipynb, so the tag must survive ``tools/notebooks.py sync`` as well.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import notebooks as nbtools  # noqa: E402  (tools/ is not a package)

PAIRS = nbtools.find_pairs()
IDS = [pair.name for pair in PAIRS]
HIDE_INPUT = "hide-input"
#: The setup cell and the imports cell: a reader must see what the chapter runs and imports.
VISIBLE_LEADING_CELLS = 2
#: Calls that compile or show a kernel, or check one: the code a student reads. ``\bcheck\(`` matches
#: ``check(...)`` and ``kernels.check(...)`` but not helpers such as ``check_rung(...)``.
STUDENT_CODE = {
    "load_kernel(": re.compile(r"\bload_kernel\("),
    "load_module(": re.compile(r"\bload_module\("),
    "show_source(": re.compile(r"\bshow_source\("),
    "raise_if_failed": re.compile(r"\braise_if_failed\b"),
    "check(": re.compile(r"\bcheck\("),
}


def tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def first_line(cell: nbformat.NotebookNode) -> str:
    return next((line for line in cell.source.splitlines() if line.strip()), "")


def hidden_cell_problems(nb: nbformat.NotebookNode, chapter: str) -> list[str]:
    """One line per hidden-input cell that holds student code or is one of the leading code cells."""
    problems = []
    code_cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    for index, cell in enumerate(code_cells):
        if HIDE_INPUT not in tags(cell):
            continue
        where = f"{chapter}: code cell {index} (`{first_line(cell)}`)"
        if index < VISIBLE_LEADING_CELLS:
            problems.append(f"{where} hides the setup or imports cell")
        found = [name for name, pattern in STUDENT_CODE.items() if pattern.search(cell.source)]
        if found:
            problems.append(f"{where} hides student code: {', '.join(found)}")
    return problems


def tag_differences(md_nb: nbformat.NotebookNode, ipynb_nb: nbformat.NotebookNode, chapter: str) -> list[str]:
    """One line per cell whose tags differ between the .md and its .ipynb twin."""
    if len(md_nb.cells) != len(ipynb_nb.cells):
        return [f"{chapter}: {len(md_nb.cells)} cells in the .md, {len(ipynb_nb.cells)} in the .ipynb"]
    return [
        f"{chapter}: cell {index} (`{first_line(md_cell)}`) has tags {tags(md_cell)} in the .md, "
        f"{tags(nb_cell)} in the .ipynb"
        for index, (md_cell, nb_cell) in enumerate(zip(md_nb.cells, ipynb_nb.cells))
        if tags(md_cell) != tags(nb_cell)
    ]


# --------------------------------------------------------------------------- the chapters in the repo


@pytest.mark.parametrize("pair", PAIRS, ids=IDS)
def test_hidden_cells_hold_no_student_code(pair: nbtools.Pair) -> None:
    problems = hidden_cell_problems(nbtools.read_markdown(pair.md), pair.name)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("pair", PAIRS, ids=IDS)
def test_tags_survive_sync(pair: nbtools.Pair) -> None:
    assert pair.ipynb.exists(), f"no {pair.ipynb.name}: run `python tools/notebooks.py sync`"
    differences = tag_differences(nbtools.read_markdown(pair.md), nbtools.read_notebook(pair.ipynb), pair.name)
    assert differences == [], "\n".join(differences) + "\nrun `python tools/notebooks.py sync`"


def test_some_chapter_hides_plumbing() -> None:
    hidden = [pair.name for pair in PAIRS
              if any(HIDE_INPUT in tags(cell) for cell in nbtools.read_markdown(pair.md).cells)]
    assert hidden, "no chapter tags a cell hide-input: the checks above would pass vacuously"


# --------------------------------------------------------------------------- the checks themselves


def _chapter(*sources: str, hidden: set[int]) -> nbformat.NotebookNode:
    cells = [nbformat.v4.new_code_cell(source) for source in sources]
    for index in hidden:
        cells[index].metadata["tags"] = [HIDE_INPUT]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A chapter"), *cells])


SETUP, IMPORTS = "report()", "import kernels"


@pytest.mark.parametrize("source, expected", [
    ("kernel = load_kernel('a.cu', 'k')", "load_kernel("),
    ("module = load_module('a.cu')", "load_module("),
    ("show_source('a.cu')", "show_source("),
    ("report.raise_if_failed()", "raise_if_failed"),
    ("kernels.check(run, reference, inputs={}, outputs={})", "check("),
])
def test_hidden_student_code_is_reported(source: str, expected: str) -> None:
    problems = hidden_cell_problems(_chapter(SETUP, IMPORTS, source, hidden={2}), "demo")
    assert len(problems) == 1
    assert problems[0].startswith(f"demo: code cell 2 (`{source}`)")
    assert problems[0].endswith(expected)


def test_hidden_plumbing_passes() -> None:
    plot = "fig, ax = plt.subplots()\nax.plot(xs, ys)\ncheck_rung(run)\nsm.check_on_gpu(run, x, ref, tol)"
    assert hidden_cell_problems(_chapter(SETUP, IMPORTS, plot, hidden={2}), "demo") == []


@pytest.mark.parametrize("index", [0, 1])
def test_hiding_a_leading_cell_is_reported(index: int) -> None:
    problems = hidden_cell_problems(_chapter(SETUP, IMPORTS, "print(1)", hidden={index}), "demo")
    assert problems == [f"demo: code cell {index} (`{(SETUP, IMPORTS)[index]}`) hides the setup or imports cell"]


def test_lost_tag_is_reported() -> None:
    md = _chapter(SETUP, IMPORTS, "plot()", hidden={2})
    ipynb = _chapter(SETUP, IMPORTS, "plot()", hidden=set())
    assert tag_differences(md, ipynb, "demo") == [
        "demo: cell 3 (`plot()`) has tags ['hide-input'] in the .md, [] in the .ipynb"
    ]
    assert tag_differences(md, md, "demo") == []
