"""Take the graded parts out of a submission, without ever running it.

A submission is a notebook (``.ipynb``), a Python file or a CUDA file (``.cu``). From a notebook or
a Python file the grader takes exactly two things, by parsing, never by executing:

- the kernel: the string literal assigned to ``KERNEL`` (the exercise's kernel cell);
- the predictions: the literal dict assigned to ``PREDICTION`` (``ast.literal_eval``).

Everything else a submission contains (a patched ``check``, a monkey-patched NumPy, its outputs)
is ignored, because the grader runs its own harness in its own process.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KERNEL_VARIABLE = "KERNEL"
PREDICTION_VARIABLE = "PREDICTION"
SUFFIXES = (".ipynb", ".cu", ".py")
_EXERCISE_LINE = re.compile(r"//\s*exercise\s+([\w-]+/[\w-]+)")


class ExtractionError(ValueError):
    """The submission has no usable kernel or prediction; the message says what was expected."""


@dataclass
class Submission:
    """What was taken out of one submitted file."""

    path: Path
    kernel: str | None = None
    prediction: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def declared_exercise(self) -> str | None:
        """The exercise named in the kernel's first comment line, if any."""
        if not self.kernel:
            return None
        m = _EXERCISE_LINE.search(self.kernel)
        return m.group(1) if m else None


def _strip_magics(source: str) -> str:
    """Cell text with IPython magics and shell escapes blanked, so that ``ast`` can parse it."""
    lines = []
    in_cell_magic = False
    for i, line in enumerate(source.split("\n")):
        stripped = line.lstrip()
        if i == 0 and stripped.startswith("%%"):
            in_cell_magic = True
        if in_cell_magic or stripped.startswith(("%", "!")):
            lines.append("")
        else:
            lines.append(line)
    return "\n".join(lines)


def _assignments(source: str, name: str) -> list[ast.expr]:
    """The values assigned to ``name`` at the top level of ``source`` (unparsable source: none)."""
    try:
        tree = ast.parse(_strip_magics(source))
    except SyntaxError:
        return []
    values = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            values.append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name \
                and node.value is not None:
            values.append(node.value)
    return values


def _code_cells(notebook: dict[str, Any]) -> list[str]:
    cells = notebook.get("cells")
    if not isinstance(cells, list):
        raise ExtractionError("this is not a Jupyter notebook (no list of cells)")
    sources = []
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        sources.append("".join(src) if isinstance(src, list) else str(src))
    return sources


def _kernel_from(sources: list[str]) -> tuple[str | None, list[str]]:
    found: list[str] = []
    problems: list[str] = []
    for src in sources:
        for value in _assignments(src, KERNEL_VARIABLE):
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.append(value.value)
            else:
                problems.append(f"{KERNEL_VARIABLE} is assigned something other than a plain string literal "
                                f"(an f-string, a concatenation or a call); the grader reads the literal only")
    if found:
        notes = [f"{len(found)} cells assign {KERNEL_VARIABLE}; the last one is graded"] if len(found) > 1 else []
        return found[-1], notes
    return None, problems


def _prediction_from(sources: list[str]) -> tuple[dict[str, Any] | None, list[str]]:
    found: list[dict[str, Any]] = []
    problems: list[str] = []
    for src in sources:
        for value in _assignments(src, PREDICTION_VARIABLE):
            try:
                literal = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                problems.append(f"{PREDICTION_VARIABLE} must be a dict of plain numbers and strings; "
                                f"expressions are not evaluated")
                continue
            if not isinstance(literal, dict):
                problems.append(f"{PREDICTION_VARIABLE} must be a dict, not {type(literal).__name__}")
                continue
            found.append(literal)
    if found:
        return found[-1], []
    return None, problems


def extract_text(text: str, suffix: str, path: Path | None = None) -> Submission:
    """Extract from the text of a submission whose file name ends in ``suffix``."""
    path = path or Path(f"submission{suffix}")
    if suffix == ".cu":
        return Submission(path, kernel=text)
    if suffix == ".ipynb":
        try:
            notebook = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ExtractionError(f"{path.name} is not valid notebook JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(notebook, dict):
            raise ExtractionError(f"{path.name} is not a Jupyter notebook")
        sources = _code_cells(notebook)
    elif suffix == ".py":
        sources = [text]
    else:
        raise ExtractionError(f"{path.name}: submissions must be .ipynb, .py or .cu files")
    kernel, kernel_notes = _kernel_from(sources)
    prediction, prediction_notes = _prediction_from(sources)
    sub = Submission(path, kernel=kernel, prediction=prediction)
    sub.notes += kernel_notes + prediction_notes
    return sub


def extract(path: str | Path) -> Submission:
    """Read and extract one submitted file; raises ExtractionError with a clear message."""
    path = Path(path)
    if path.suffix not in SUFFIXES:
        raise ExtractionError(f"{path.name}: submissions must be .ipynb, .py or .cu files")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ExtractionError(f"cannot read {path}: {exc.strerror}") from None
    text = raw.decode("utf-8", errors="replace")
    return extract_text(text, path.suffix, path)


def find_submission_files(folder: Path) -> list[Path]:
    """The gradable files directly in ``folder`` (notebook first, then .cu, then .py), sorted."""
    files = [p for p in sorted(folder.iterdir()) if p.is_file() and p.suffix in SUFFIXES
             and not p.name.startswith(".")]
    return sorted(files, key=lambda p: (SUFFIXES.index(p.suffix), p.name))
