"""Find, read and show the course's CUDA C sources, which live only in ``kernels/cuda/``.

Keeping each kernel in one ``.cu`` file lets the chapters, the tests and the compile-everything check
all use the same text; ``show_source`` puts it (or one function of it) into a notebook as a highlighted
``cuda`` block that renders the same in Colab and on the website.
"""
from __future__ import annotations

import difflib
import re
from pathlib import Path

from .signature import find_functions, mask_code, split_top_level

CUDA_DIR = Path(__file__).resolve().parent / "cuda"
SUFFIXES = (".cu", ".cuh")
_NAME_EXPRESSIONS_LINE = re.compile(r"^\s*//\s*name_expressions\s*:\s*(.+?)\s*$", re.MULTILINE)


def all_sources() -> list[Path]:
    """Every ``.cu`` and ``.cuh`` file under ``kernels/cuda/``, sorted."""
    return sorted(p for p in CUDA_DIR.rglob("*") if p.suffix in SUFFIXES and p.is_file())


def _relative(path: Path) -> str:
    return path.relative_to(CUDA_DIR).as_posix()


def resolve(path: str | Path) -> Path:
    """The file for ``"chapter/kernel.cu"`` (``kernels/cuda/`` prefix optional); clear error if absent."""
    text = Path(path).as_posix()
    if text.startswith("kernels/cuda/"):
        text = text[len("kernels/cuda/"):]
    candidate = Path(text) if Path(text).is_absolute() else CUDA_DIR / text
    if candidate.is_file():
        return candidate
    available = [_relative(p) for p in all_sources()]
    close = difflib.get_close_matches(text, available, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    listing = "\n  ".join(available) if available else "(none)"
    raise FileNotFoundError(
        f"no CUDA source {text!r} in kernels/cuda/.{hint} Available files:\n  {listing}")


def source(path: str | Path) -> str:
    """The text of a CUDA source, given as ``"chapter/kernel.cu"`` relative to ``kernels/cuda/``."""
    return resolve(path).read_text(encoding="utf-8")


def name_expressions_in(code: str) -> tuple[str, ...]:
    """Template instantiations a source asks for on its ``// name_expressions:`` comment lines.

    A ``.cu`` file lists there the instances of its template kernels that get compiled, e.g.
    ``// name_expressions: gemm_smem<16>, gemm_smem<32>`` (duplicates dropped, order kept).
    """
    found: list[str] = []
    for line in _NAME_EXPRESSIONS_LINE.findall(code):
        found += split_top_level(line)
    return tuple(dict.fromkeys(found))


def include_options() -> tuple[str, ...]:
    """Compiler options that let a kernel ``#include "common/name.cuh"``."""
    return (f"--include-path={CUDA_DIR}",)


def function_source(code: str, function: str) -> str:
    """One ``__global__``/``__device__`` function's definition, with the comment lines just above it."""
    spans = [f for f in find_functions(code, ("__global__", "__device__")) if f.name == function]
    spans = [f for f in spans if f.is_definition] or spans
    if not spans:
        names = sorted({f.name for f in find_functions(code, ("__global__", "__device__"))})
        raise ValueError(f"no __global__ or __device__ function named {function!r} in this source "
                         f"(functions: {', '.join(names) or 'none'})")
    span = spans[0]
    start = code.rfind("\n", 0, span.start) + 1
    masked = mask_code(code)
    lines_above = code[:start].split("\n")[:-1]
    while lines_above:
        line = lines_above[-1]
        is_comment = line.strip().startswith(("//", "/*", "*")) and not masked[
            start - len(line) - 1:start - 1].strip()
        if not is_comment:
            break
        start -= len(line) + 1
        lines_above.pop()
    return code[start:span.end].rstrip() + "\n"


def markdown_block(text: str, language: str = "cuda") -> str:
    """A fenced Markdown code block whose fence is longer than any backtick run in ``text``."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def show_source(path: str | Path, function: str | None = None) -> None:
    """Display a CUDA source (or one function of it) in the notebook as a highlighted block."""
    from IPython.display import Markdown, display

    code = source(path)
    text = function_source(code, function) if function else code
    display(Markdown(markdown_block(text)))
