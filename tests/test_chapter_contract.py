"""What every chapter promises its reader, checked once for all of them.

A chapter (``book/<chapter>.md``, paired with a notebook) opens with its learning goals and closes
with its summary, its exercises and further reading; it has an "On a T4" section for Colab's GPU;
it links its exercise folder; its code cells use the package's public names and keep their CUDA C
in ``kernels/cuda/``; no placeholder is left in its prose; and nothing it ships (the page, its
kernels, its modules in the package, its benchmark) speaks of the place it was written in.

Checked elsewhere: the setup cell is the same in every chapter (tests/test_notebooks.py, on the
paired notebook that test_pair_in_sync keeps equal to the page), and every code cell runs, so
parses, in the student environment (tests/test_chapters_on_cpu.py). A chapter's own kernels and
numbers are checked in tests/test_<chapter>.py.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import kernels

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import notebooks as nbtools  # noqa: E402  (tools/ is not a package)

CHAPTERS = [pair.name for pair in nbtools.find_pairs()]
CLOSING_SECTIONS = ["Summary", "Exercises", "Further reading"]
# Words about where the course was made, never what a reader should see: a path of the machine
# it was written on, a seed folder, whoever wrote or reviewed it.
WORKPLACE = re.compile(r"/work/|seeds-|seed 00|assistant|\bthe lead\b", re.IGNORECASE)
# Modules a chapter may import from by name besides the package's ``__all__``: the setup cell's,
# the helpers every notebook may use, and the old names of the chapter's own modules (kernels/chapters/<chapter>/).
NOTEBOOK_MODULES = {"notebook_setup", "compat", "timing", "occupancy"}


def _chapters(failing: dict[str, str]) -> list:
    """CHAPTERS, those in ``failing`` (chapter: what is wrong) expected to fail; strictly, so that
    the chapter's fix has to remove it from here."""
    unknown = set(failing) - set(CHAPTERS)
    assert not unknown, f"no such chapter: {sorted(unknown)}"
    return [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=f"{c}: {failing[c]}")) if c in failing
            else c for c in CHAPTERS]


def _cells(chapter: str, kind: str) -> list[str]:
    notebook = nbtools.read_markdown(ROOT / "book" / f"{chapter}.md")
    return [cell.source for cell in notebook.cells if cell.cell_type == kind]


def _headings(chapter: str) -> list[str]:
    return re.findall(r"^## (.+?)\s*$", "\n".join(_cells(chapter, "markdown")), flags=re.M)


def _shipped_with(chapter: str) -> list[Path]:
    """The page and what ships with it: its kernels, its modules in the package (its grader's
    exercise module included), its benchmark."""
    modules = [p for p in sorted((ROOT / "kernels").rglob("*.py"))  # kernels/chapters/<chapter>/, its grader's
               if chapter in (p.stem, p.parent.name)]
    kernel_files = sorted(p for p in (ROOT / "kernels" / "cuda" / chapter).rglob("*") if p.is_file())
    benchmark = ROOT / "benchmarks" / f"bench_{chapter}.py"
    return [ROOT / "book" / f"{chapter}.md", *kernel_files, *modules, *([benchmark] if benchmark.exists() else [])]


def test_there_are_chapters():
    assert len(CHAPTERS) >= 10, CHAPTERS


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_opens_with_its_learning_goals(chapter: str):
    assert _headings(chapter)[0] == "Learning goals"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_closes_with_summary_exercises_and_further_reading(chapter: str):
    assert _headings(chapter)[-3:] == CLOSING_SECTIONS


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_has_an_on_a_t4_section(chapter: str):
    assert "On a T4" in _headings(chapter)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_links_its_exercises(chapter: str):
    assert f"exercises/{chapter}" in "\n".join(_cells(chapter, "markdown"))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_placeholder_is_left_in_the_prose(chapter: str):
    """The prose was written from the outputs of a GPU run: no "FILL" marks a number still missing."""
    prose = re.sub(r"^```.*?^```\s*$", "", "\n".join(_cells(chapter, "markdown")), flags=re.M | re.S)
    assert "FILL" not in prose


def documented_modules() -> set[str]:
    """The package's public modules: those CONTRIBUTING.md's table of the public API lists (its first
    column, top-level names only, e.g. `roofline`, `nvrtc`, `sources`)."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    table = text.split("## The `kernels` package (public API")[1].split("\n## ")[0]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {name for cell in first_cells for name in re.findall(r"`([a-z_]+)`", cell)}


def test_the_public_modules_are_read_from_the_contributor_guide():
    modules = documented_modules()
    assert {"roofline", "nvrtc", "sources", "timing", "check", "grading"} <= modules
    assert all(hasattr(kernels, name) or (ROOT / "kernels" / name).is_dir() or
               (ROOT / "kernels" / f"{name}.py").exists() for name in modules), modules


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_uses_only_public_kernels_api(chapter: str):
    """Names a chapter's code reaches as kernels.<name>: the package's __all__, its documented public
    modules, and the chapter's own modules (by the names its recorded notebook imports)."""
    used = set(re.findall(r"\bkernels\.([A-Za-z]\w*)", "\n".join(_cells(chapter, "code"))))
    own = {old for old, new in kernels.LEGACY_NAMES.items() if new.split(".")[1] == chapter}  # its modules' names
    allowed = {*kernels.__all__, *NOTEBOOK_MODULES, *documented_modules(), *own}
    assert used <= allowed, sorted(used - allowed)


@pytest.mark.parametrize("chapter", _chapters({
    "memory_hierarchy": "builds a Kernel by hand (kernels.compile.Kernel, kernels.signature.parse_signature) "
                        "to reach a __constant__ array; kernels.load_module(...).get_global does it, once the "
                        "chapter's code changes with a new GPU run"}))
def test_builds_no_kernel_by_hand(chapter: str):
    """Kernels come from load_kernel / load_module; a chapter that assembles a Kernel from its parts
    shows plumbing the package exists to hide."""
    code = "\n".join(_cells(chapter, "code"))
    assert not re.search(r"\bKernel\(|\bparse_signature\(", code)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_keeps_its_cuda_c_in_kernels_cuda(chapter: str):
    assert "__global__" not in "\n".join(_cells(chapter, "code"))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_mention_of_the_workplace(chapter: str):
    found = [(path.relative_to(ROOT).as_posix(), m.group(0)) for path in _shipped_with(chapter)
             for m in WORKPLACE.finditer(path.read_text(encoding="utf-8"))]
    assert found == []
