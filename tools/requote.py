"""After a chapter is re-executed, find the numbers its prose quotes from the old run and what the new run printed there.

    python tools/requote.py book/<chapter>.md --old <git revision or .ipynb>       # report
    python tools/requote.py book/<chapter>.md --old HEAD --apply                    # and rewrite the .md

Why: every number in the book comes from a recorded GPU run, and a re-executed chapter prints new
numbers (about 1 % apart on the same GPU, more on another). Finding by hand every paragraph and table
that quotes the old run is slow and misses some. This tool reads the old and the new notebook's text
outputs, locates each number of the prose (markdown cells, tables included) in the old outputs, and
proposes the number printed at the same place in the new outputs: the same code cell, the same output
line, the same position on the line. A prose number may be the old output rounded to fewer decimals
(``91 %`` for ``91.4``); the proposal is rounded the same way.

A proposal is made only when it is unambiguous: every place in the old outputs where the quoted value
(followed by the same unit, when the prose gives one) appears must show the same new value. Everything
else is listed for a person to decide: ambiguous numbers, and changed-looking numbers found nowhere in
the old outputs (derived ones, such as a ratio the prose computes, or numbers quoted from elsewhere).
``--apply`` rewrites only the unambiguous proposals, then the author runs
``python tools/notebooks.py sync`` and reads the changed paragraphs: a claim ("faster", "meets the
goal") may no longer hold with the new numbers.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import notebooks as nbtools  # noqa: E402

# A number: digits with optional thousands separators and decimals, not part of a word or version.
NUMBER = re.compile(r"(?<![\w.^])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w.]*\d)(?!\w)")
UNIT = re.compile(r"\s*(%|×|x\b|GB/s|TB/s|TFLOP/s|GFLOP/s|Gvalue/s|µs|us\b|ms\b|ns\b|cycles?\b|KB|MB|GB)")


@dataclass(frozen=True)
class Place:
    """Where a number was printed: code cell index, output line, position among the line's numbers."""

    cell: int
    line: int
    index: int


@dataclass
class Proposal:
    line: int              # 1-based line of the .md
    start: int             # column of the number on that line
    old: str
    new: str | None        # None: no unambiguous proposal
    why: str


def output_lines(nb: nbformat.NotebookNode) -> dict[tuple[int, int], str]:
    """{(code cell index, output line): text} of every stream and text/plain output."""
    lines: dict[tuple[int, int], str] = {}
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    for c, cell in enumerate(code):
        for k, text in enumerate(nbtools.stream_text(cell).splitlines()):
            lines[(c, k)] = text
    return lines


def numbers_with_units(text: str) -> list[tuple[int, str, str]]:
    """(column, number as written, unit or '') of each number on a line of text."""
    found = []
    for m in NUMBER.finditer(text):
        unit = UNIT.match(text, m.end())
        found.append((m.start(), m.group(0), unit.group(1) if unit else ""))
    return found


def index_outputs(nb: nbformat.NotebookNode) -> dict[Place, tuple[str, str]]:
    places = {}
    for (cell, line), text in output_lines(nb).items():
        for i, (_, number, unit) in enumerate(numbers_with_units(text)):
            places[Place(cell, line, i)] = (number, unit)
    return places


def _value(number: str) -> float:
    return float(number.replace(",", ""))


def _decimals(number: str) -> int:
    return len(number.split(".")[1]) if "." in number else 0


def _format_like(value: float, quoted: str) -> str:
    decimals = _decimals(quoted)
    text = f"{value:,.{decimals}f}" if "," in quoted else f"{value:.{decimals}f}"
    return text


def candidate_places(quoted: str, unit: str, old: dict[Place, tuple[str, str]]) -> list[Place]:
    """Places in the old outputs that printed ``quoted`` (or more decimals of it), with its unit if any."""
    decimals = _decimals(quoted)
    target = round(_value(quoted), decimals)
    places = [p for p, (number, u) in old.items()
              if _decimals(number) >= decimals and round(_value(number), decimals) == target]
    if unit:
        places = [p for p in places if old[p][1] == unit] or places
    return places


def propose(quoted: str, places: list[Place], new: dict[Place, tuple[str, str]]) -> tuple[str | None, str]:
    """The new value printed at ``places`` (formatted as ``quoted``), or None and the reason there is none."""
    if not places:
        return None, "not in the old outputs"
    if any(p not in new for p in places):
        return None, "the new outputs have nothing at the place the old run printed it"
    values = {_format_like(_value(new[p][0]), quoted) for p in places}
    if len(values) > 1:
        return None, f"ambiguous: printed at {len(places)} places, now {', '.join(sorted(values))}"
    value = values.pop()
    return value, "unchanged" if value == quoted else f"printed at {len(places)} place(s)"


def prose_lines(md_text: str) -> list[tuple[int, str]]:
    """(1-based line number, text) of the lines outside code cells, fences and the front matter."""
    lines, inside, out = md_text.splitlines(), False, []
    front = lines[:1] == ["---"]
    for i, line in enumerate(lines, start=1):
        if front:
            if i > 1 and line.strip() == "---":
                front = False
            continue
        if line.lstrip().startswith("```"):          # a code cell or another fenced block opens or closes
            inside = not inside
            continue
        if not inside:
            out.append((i, line))
    return out


def paragraphs(lines: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Runs of consecutive non-blank prose lines (a paragraph, a table, a list item)."""
    runs: list[list[tuple[int, str]]] = [[]]
    for n, text in lines:
        if text.strip() and runs[-1] and n == runs[-1][-1][0] + 1:
            runs[-1].append((n, text))
        elif text.strip():
            runs.append([(n, text)])
    return [run for run in runs if run]


def proposals(md_text: str, old_nb: nbformat.NotebookNode, new_nb: nbformat.NotebookNode) -> list[Proposal]:
    """Every number of the prose whose value the new run changes, or that cannot be located.

    An ambiguous number (a value printed at several places) is settled by its neighbours: numbers on
    the same prose line, or else in the same paragraph, that were printed at one place only anchor it
    to their output lines.
    """
    old, new = index_outputs(old_nb), index_outputs(new_nb)
    found = []
    for paragraph in paragraphs(prose_lines(md_text)):
        numbers = []
        for n, text in paragraph:
            plain = re.sub(r"`[^`]*`|\$[^$]*\$|\]\([^)]*\)", lambda m: " " * len(m.group(0)), text)
            numbers += [(n, column, number, unit, candidate_places(number, unit, old))
                        for column, number, unit in numbers_with_units(plain)]
        table_row = paragraph[0][1].lstrip().startswith("|")
        anchors_by_line: dict[int, set[tuple[int, int]]] = defaultdict(set)
        for n, _, number, unit, places in numbers:
            if len(places) == 1 and (unit or "." in number or table_row):      # a measurement, not a count
                anchors_by_line[n].add((places[0].cell, places[0].line))
        in_paragraph = set().union(*anchors_by_line.values()) if anchors_by_line else set()
        seen: dict[tuple[int, str], int] = defaultdict(int)     # occurrences of a value on a line so far
        for n, column, number, unit, places in numbers:
            occurrence = seen[(n, number)]
            seen[(n, number)] += 1
            bare_integer = not unit and "." not in number and not table_row
            value, why = propose(number, places, new) if not bare_integer else (None, "ambiguous: a bare count")
            for anchors, where in ((anchors_by_line.get(n, set()), "its line"), (in_paragraph, "its paragraph")):
                if value is not None or not why.startswith("ambiguous"):
                    break
                near = sorted((p for p in places if (p.cell, p.line) in anchors),
                              key=lambda p: (p.cell, p.line, p.index))
                same_line = len({(p.cell, p.line) for p in near}) == 1
                if same_line and len(near) > 1 and occurrence < len(near):
                    near = [near[occurrence]]          # the k-th on the prose line is the k-th printed
                if near:
                    value, why = propose(number, near, new)
                    why = why if value is None or why == "unchanged" else f"beside the other numbers of {where}"
            if why == "unchanged" or (bare_integer and value is None):
                continue          # a count or a parameter ("two kernels", "512 threads"), not a measurement
            if value is None and not unit and why == "not in the old outputs":
                continue
            found.append(Proposal(n, column, number, value, why))
    return found


def apply(md_text: str, found: list[Proposal]) -> str:
    lines = md_text.splitlines(keepends=True)
    for p in sorted((p for p in found if p.new is not None), key=lambda p: (p.line, -p.start)):
        text = lines[p.line - 1]
        assert text[p.start:p.start + len(p.old)] == p.old, (p, text)
        lines[p.line - 1] = text[:p.start] + p.new + text[p.start + len(p.old):]
    return "".join(lines)


def read_old(md: Path, old: str) -> nbformat.NotebookNode:
    """The old run: an .ipynb path, or the chapter's .ipynb at a git revision."""
    if old.endswith(".ipynb") and Path(old).exists():
        return nbformat.read(old, as_version=4)
    ipynb = md.with_suffix(".ipynb").resolve().relative_to(ROOT).as_posix()
    shown = subprocess.run(["git", "show", f"{old}:{ipynb}"], cwd=ROOT, capture_output=True, text=True)
    if shown.returncode != 0:
        raise SystemExit(f"cannot read {ipynb} at {old!r}: {shown.stderr.strip()}")
    return nbformat.reads(shown.stdout, as_version=4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapter", type=Path, help="book/<chapter>.md")
    parser.add_argument("--old", required=True, help="the old run: a git revision (e.g. HEAD) or an .ipynb file")
    parser.add_argument("--new", type=Path, default=None, help="the new run (default: the chapter's .ipynb)")
    parser.add_argument("--apply", action="store_true", help="rewrite the unambiguous proposals in the .md")
    args = parser.parse_args(argv)
    md = args.chapter
    if md.suffix != ".md" or not md.exists():
        raise SystemExit(f"{md}: give a chapter's .md file")
    new_nb = nbformat.read(args.new or md.with_suffix(".ipynb"), as_version=4)
    text = md.read_text(encoding="utf-8")
    found = proposals(text, read_old(md, args.old), new_nb)
    by_kind: dict[bool, list[Proposal]] = defaultdict(list)
    for p in found:
        by_kind[p.new is not None].append(p)
    for p in by_kind[True]:
        print(f"{md}:{p.line}: {p.old} -> {p.new}  ({p.why})")
    for p in by_kind[False]:
        print(f"{md}:{p.line}: {p.old} needs a person: {p.why}")
    if args.apply and by_kind[True]:
        md.write_text(apply(text, found), encoding="utf-8")
        print(f"rewrote {len(by_kind[True])} number(s); now run python tools/notebooks.py sync {md} "
              "and read each changed paragraph")
    return 0


if __name__ == "__main__":
    sys.exit(main())
