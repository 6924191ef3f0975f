"""The GEMM chapter's table of ptxas reports must be what the compiler reports for its kernels.

book/gemm.md shows, for every rung kernel as the chapter launches it (``kernels.chapters.gemm.chapter_rungs``),
the registers, static shared memory, spills and stack frame that NVRTC's ptxas reports for sm_90 (the
H100 of the recorded run) and sm_75 (Colab's T4). This test recompiles every kernel with
``resource_report`` and compares each cell, so the table cannot drift from the code. After changing a
kernel, a default configuration or the pinned NVRTC, print the new table with

    .venv/bin/python tests/test_gemm_resources.py

and paste it below the marker in book/gemm.md (then ``python tools/notebooks.py sync book/gemm.md``).
"""
from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from kernels.chapters import gemm as gm
from kernels.nvrtc import nvrtc_available, nvrtc_version
from kernels.resources import resource_report

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "gemm.md"
MARKER = "<!-- ptxas report per rung: generated and checked by tests/test_gemm_resources.py -->"
# (ptxas target, compute capability): the recorded run's H100 and Colab's T4.
ARCHS = (("sm_90", (9, 0)), ("sm_75", (7, 5)))
MISSING = "—"
NOT_COMPILED = MISSING + "†"     # the footnote under the table says why
COLUMNS = ("registers", "static shared (B)", "spill stores / loads (B)", "stack frame (B)")
HEADER = ["rung", "kernel as launched"] + [f"{arch} {col}" for arch, _ in ARCHS for col in COLUMNS]

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC (cuda-bindings) is not installed")


def rungs() -> list[gm.Rung]:
    """The table's rows: every rung kernel the chapter launches on the H100 of the recorded run."""
    return gm.chapter_rungs("9.0")


def kernel_cell(rung: gm.Rung) -> str:
    return f"`{rung.kernel_family.label(rung.params)}`"


def report_cells(rung: gm.Rung, arch: str, cc: tuple[int, int]) -> list[str]:
    fam = rung.kernel_family
    if fam.min_cc > cc:                      # e.g. cp.async (min_arch sm_80): not compiled for sm_75
        return [NOT_COMPILED] + [MISSING] * (len(COLUMNS) - 1)
    r = resource_report(fam.path, fam.name, arch=arch, name_expression=fam.expression(rung.params))
    return [str(r.registers), str(r.shared_bytes), f"{r.spill_store_bytes} / {r.spill_load_bytes}",
            str(r.stack_frame_bytes)]


def expected_row(rung: gm.Rung) -> list[str]:
    return [rung.label, kernel_cell(rung)] + [c for arch, cc in ARCHS for c in report_cells(rung, arch, cc)]


def render(rows: list[list[str]]) -> str:
    lines = [HEADER, ["---"] * 2 + ["---:"] * (len(HEADER) - 2)] + rows
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def chapter_section() -> str:
    """The chapter's text from the marker to the next heading."""
    text = CHAPTER.read_text(encoding="utf-8")
    assert text.count(MARKER) == 1, f"book/gemm.md must contain the marker line {MARKER!r} once"
    before, after = text.split(MARKER)
    heading = before[before.rindex("\n#"):]
    return heading + re.split(r"^#", after, maxsplit=1, flags=re.M)[0]


def chapter_table() -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the table right below the marker."""
    after = CHAPTER.read_text(encoding="utf-8").split(MARKER, 1)[1].lstrip("\n").splitlines()
    lines = list(itertools.takewhile(lambda line: line.startswith("|"), after))
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    assert len(cells) >= 3, "no table right below the marker in book/gemm.md"
    assert all(set(c) <= set("-:") for c in cells[1]), "the table's second line must be its separator"
    return cells[0], cells[2:]


def test_table_has_the_expected_columns():
    header, rows = chapter_table()
    assert header == HEADER
    assert all(len(row) == len(HEADER) for row in rows), "every row needs one cell per column"


def test_table_lists_every_rung_kernel_the_chapter_launches():
    _, rows = chapter_table()
    assert [row[:2] for row in rows] == [[r.label, kernel_cell(r)] for r in rungs()]


@pytest.fixture(scope="module")
def fresh_rows() -> list[list[str]]:
    """The table as a fresh interpreter computes it (this file run as a script).

    Fresh processes always agreed with each other, but once, late in a full pytest run, NVRTC reported
    one register fewer for one kernel than it does on its own: some state of a long process can reach
    its output. Compiling in a new process keeps the comparison about the code and the compiler alone.
    """
    out = subprocess.run([sys.executable, str(Path(__file__).resolve())], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines][2:]


@needs_nvrtc
@pytest.mark.parametrize("arch", [a for a, _ in ARCHS])
def test_every_number_is_what_ptxas_reports(arch, fresh_rows):
    _, rows = chapter_table()
    first = HEADER.index(f"{arch} {COLUMNS[0]}")
    wrong = []
    assert len(fresh_rows) == len(rungs())
    for rung, row, want in zip(rungs(), rows, fresh_rows):
        for col in range(first, first + len(COLUMNS)):
            if row[col] != want[col]:
                wrong.append(f"{rung.label}, {HEADER[col]}: the chapter says {row[col]!r}, ptxas {want[col]!r}")
    assert not wrong, ("book/gemm.md's ptxas table is out of date (regenerate it with "
                       "`python tests/test_gemm_resources.py`):\n  " + "\n  ".join(wrong))


@needs_nvrtc
def test_the_chapter_names_the_nvrtc_it_was_made_with():
    major, minor = nvrtc_version()[:2]
    assert f"NVRTC {major}.{minor}" in chapter_section(), \
        f"the table comes from NVRTC {major}.{minor} here: regenerate it and name that version"


def test_footnote_explains_the_missing_cells():
    section = chapter_section()
    _, rows = chapter_table()
    if any(NOT_COMPILED in row for row in rows):
        assert re.search(r"^†", section, flags=re.M), "the † of the table needs its footnote line"


def test_prose_claims_hold_for_the_table():
    """What the text around the table says of it: no spills, and the same registers as the recorded run."""
    section = chapter_section()
    _, rows = chapter_table()
    if "no rung spills" in section.lower():
        for row in rows:
            for col in range(2, len(HEADER)):
                if HEADER[col].endswith(("spill stores / loads (B)", "stack frame (B)")) and row[col] != MISSING:
                    assert set(row[col].replace("/", "").split()) == {"0"}, f"{row[0]} spills: {row[col]}"
    # The recorded H100 run printed ptxas's registers for some kernels ("gemm_1d<...>: ..., 58 registers"):
    # the table's sm_90 column must agree with them.
    nb = nbformat.read(CHAPTER.with_suffix(".ipynb"), as_version=4)
    text = "\n".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                     for out in cell.get("outputs", []))
    printed = {m.group(1): m.group(2) for m in re.finditer(r"^(\w+(?:<[\d, ]+>)?): .*?(\d+) registers", text, re.M)}
    registers = {row[1].strip("`"): row[HEADER.index("sm_90 registers")] for row in rows}
    compared = {k: (v, registers[k]) for k, v in printed.items() if k in registers}
    assert compared, "the recorded run printed no register count of a table kernel"
    assert all(a == b for a, b in compared.values()), f"recorded run vs table: {compared}"


if __name__ == "__main__":
    print(render([expected_row(r) for r in rungs()]))
