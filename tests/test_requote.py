"""tools/requote.py: after a re-run, the prose's numbers are mapped to what the new run printed at the same place."""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import requote  # noqa: E402

PROSE = """# A chapter

The copy reached 3993 GB/s, 98 % of the memcpy, with 4 stages and 512 threads.

| kernel | TFLOP/s | % | TFLOP/s | % |
|---|---:|---:|---:|---:|
| ring | 394 | 53 | 411 | 53 |

A derived ratio: 8.8 × the library.

```{code-cell} ipython3
print(3993)
```
"""


def notebook(outputs: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    for text in outputs:
        cell = nbformat.v4.new_code_cell("pass")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        nb.cells.append(cell)
    return nb


OLD = notebook(["memcpy: 3993 GB/s, 98 % of memcpy\nstages 4\n", "ring  394 (53 %)  411 (53 %)\nother 200 (98 %)\n"])
NEW = notebook(["memcpy: 4022 GB/s, 97 % of memcpy\nstages 4\n", "ring  396 (53 %)  409 (54 %)\nother 201 (99 %)\n"])


def test_each_quoted_number_gets_what_the_new_run_printed_at_its_place():
    found = {(p.line, p.old): p for p in requote.proposals(PROSE, OLD, NEW)}
    assert found[(3, "3993")].new == "4022"
    # "98 %" was printed twice (97 and 99 now): the line's other number, 3993, settles it
    assert found[(3, "98")].new == "97" and "its line" in found[(3, "98")].why
    assert found[(7, "394")].new == "396" and found[(7, "411")].new == "409"
    # the table row's two 53s are the line's first and second 53: unchanged, then 54
    assert [p.new for p in requote.proposals(PROSE, OLD, NEW) if p.line == 7 and p.old == "53"] == ["54"]


def test_counts_and_parameters_are_left_alone_and_derived_numbers_are_reported():
    found = {(p.line, p.old): p for p in requote.proposals(PROSE, OLD, NEW)}
    assert (3, "4") not in found and (3, "512") not in found      # stages and threads: not measurements
    assert found[(9, "8.8")].new is None and "not in the old outputs" in found[(9, "8.8")].why
    assert all(p.line != 12 for p in found.values())                # code cells are not prose


def test_apply_rewrites_only_the_unambiguous_numbers(tmp_path):
    md = tmp_path / "ch.md"
    md.write_text(PROSE)
    old = tmp_path / "old.ipynb"
    nbformat.write(OLD, old)
    new = tmp_path / "new.ipynb"
    nbformat.write(NEW, new)
    assert requote.main([str(md), "--old", str(old), "--new", str(new), "--apply"]) == 0
    text = md.read_text()
    assert "The copy reached 4022 GB/s, 97 % of the memcpy, with 4 stages and 512 threads." in text
    assert "| ring | 396 | 53 | 409 | 54 |" in text
    assert "8.8 ×" in text and "print(3993)" in text
