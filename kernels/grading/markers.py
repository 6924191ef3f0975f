"""Solution and starter from one source: ``BEGIN SOLUTION`` / ``END SOLUTION`` regions.

An exercise's kernel is written once, with the solution inside marked regions; the student's
starter replaces each region with the ``BEGIN STARTER`` / ``END STARTER`` block that follows it
(or with a ``TODO`` line when there is none). Markers are comment lines, ``//`` in CUDA and ``#`` in
Python, so a source stays readable::

    // BEGIN SOLUTION
    float v = i < n ? x[i] : 0.0f;
    // END SOLUTION
    // BEGIN STARTER
    float v = 0.0f;  // TODO: load your element
    // END STARTER

Because both versions are rendered from the same lines, they differ only inside the regions;
``outside_differences`` checks exactly that on any two texts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_MARKER = re.compile(r"^\s*(?://|#)\s*(BEGIN|END)\s+(SOLUTION|STARTER)\s*$")


class MarkerError(ValueError):
    """The markers of a source are unbalanced or out of order; the message names the line."""


@dataclass(frozen=True)
class Region:
    """Lines [start, end) of the solution text and [starter_start, starter_end) of the starter text."""

    start: int
    end: int
    starter_start: int
    starter_end: int


@dataclass(frozen=True)
class Rendered:
    solution: str
    starter: str
    regions: tuple[Region, ...]


def _todo_line(indent: str, comment: str) -> str:
    return f"{indent}{comment} TODO: your code here"


def render(source: str, *, what: str = "source") -> Rendered:
    """Both versions of ``source`` and where their regions are. Raises MarkerError on bad markers."""
    lines = source.split("\n")
    solution: list[str] = []
    starter: list[str] = []
    regions: list[Region] = []
    state = "outside"  # outside | solution | after_solution | starter
    sol_start = st_start = 0
    pending_todo: tuple[str, str] | None = None  # indent, comment of the solution region
    region_solution: list[str] = []
    region_starter: list[str] = []

    def close_region(with_starter: bool) -> None:
        nonlocal region_solution, region_starter
        s0 = len(solution)
        solution.extend(region_solution)
        t0 = len(starter)
        if with_starter:
            starter.extend(region_starter)
        else:
            indent, comment = pending_todo or ("", "//")
            starter.append(_todo_line(indent, comment))
        regions.append(Region(s0, len(solution), t0, len(starter)))
        region_solution, region_starter = [], []

    for number, line in enumerate(lines, start=1):
        m = _MARKER.match(line)
        if m is None:
            if state == "after_solution":
                close_region(with_starter=False)
                state = "outside"
            if state == "outside":
                solution.append(line)
                starter.append(line)
            elif state == "solution":
                region_solution.append(line)
            else:  # starter
                region_starter.append(line)
            continue
        edge, block = m.groups()
        key = (state, edge, block)
        if key == ("outside", "BEGIN", "SOLUTION") or key == ("after_solution", "BEGIN", "SOLUTION"):
            if state == "after_solution":
                close_region(with_starter=False)
            indent = line[:len(line) - len(line.lstrip())]
            pending_todo = (indent, "#" if line.lstrip().startswith("#") else "//")
            state, sol_start = "solution", number
        elif key == ("solution", "END", "SOLUTION"):
            state = "after_solution"
        elif key == ("after_solution", "BEGIN", "STARTER"):
            state, st_start = "starter", number
        elif key == ("starter", "END", "STARTER"):
            close_region(with_starter=True)
            state = "outside"
        else:
            where = {"outside": "outside any region", "solution": f"inside the SOLUTION region opened on line {sol_start}",
                     "after_solution": "right after a SOLUTION region",
                     "starter": f"inside the STARTER region opened on line {st_start}"}[state]
            hint = " (a STARTER region must follow its SOLUTION region directly)" if block == "STARTER" else ""
            raise MarkerError(f"{what}, line {number}: unexpected '{edge} {block}' {where}{hint}")
    if state == "after_solution":
        close_region(with_starter=False)
    elif state == "solution":
        raise MarkerError(f"{what}: the SOLUTION region opened on line {sol_start} is never closed")
    elif state == "starter":
        raise MarkerError(f"{what}: the STARTER region opened on line {st_start} is never closed")
    return Rendered("\n".join(solution), "\n".join(starter), tuple(regions))


def solution_of(source: str) -> str:
    return render(source).solution


def starter_of(source: str) -> str:
    return render(source).starter


def has_markers(source: str) -> bool:
    return any(_MARKER.match(line) for line in source.split("\n"))


def outside_differences(solution: str, starter: str, regions: tuple[Region, ...]) -> list[str]:
    """Where ``starter`` differs from ``solution`` outside the marked regions (empty when nowhere).

    The texts are cut at the regions' line numbers and the pieces between regions compared one by
    one, so a change that leaks out of a region (or a region that moved) is reported with its line.
    Used on committed files: the notebook's starter against the solution rendered from the source.
    """
    a, b = solution.split("\n"), starter.split("\n")
    problems = []
    prev_a = prev_b = 0
    bounds = [(r.start, r.end, r.starter_start, r.starter_end) for r in regions]
    bounds.append((len(a), len(a), len(b), len(b)))
    for start, end, s_start, s_end in bounds:
        piece_a, piece_b = a[prev_a:start], b[prev_b:s_start]
        if piece_a != piece_b:
            for k, (x, y) in enumerate(zip(piece_a + [None] * len(piece_b), piece_b + [None] * len(piece_a))):
                if x != y:
                    problems.append(f"line {prev_b + k + 1} of the starter differs from the solution outside "
                                    f"a marked region: {(y if y is not None else x or '').strip()!r}")
                    break
        prev_a, prev_b = end, s_end
    return problems
