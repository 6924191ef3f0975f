"""Find every piece of CUDA C in the repository, so that a test can compile all of it without a GPU.

Kernels live in ``kernels/cuda/**/*.cu``, and small experiments live as strings in notebook code cells
(passed to ``RawKernel``, ``RawModule`` or ``load_kernel``). Both are found here with pure functions:
``.cu`` files by name, notebook strings by parsing each code cell with ``ast`` and following string
constants defined in the same or an earlier cell.

Conventions a ``.cu`` file can state in comment lines:
``// name_expressions: foo<float, 256>, foo<double, 128>`` instantiates template kernels (read by
``kernels.sources.name_expressions_in``, which the CPU backend uses too), and
``// min_arch: sm_80`` marks a kernel that needs a newer GPU than the T4 (compiled only from there).
"""
from __future__ import annotations

import ast
import json
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from kernels.sources import name_expressions_in

CALLS = {"RawKernel", "RawModule", "load_kernel", "resource_report"}
_MIN_ARCH = re.compile(r"^\s*//\s*min_arch\s*:\s*(sm_\d+)\s*$", re.MULTILINE)


@dataclass
class CudaSnippet:
    """One CUDA C source to compile, and where it came from (for test ids and messages)."""

    origin: str  # e.g. "kernels/cuda/ch/k.cu" or "book/ch.md cell 4 line 7"
    code: str
    options: tuple[str, ...] = ()
    name_expressions: tuple[str, ...] = ()
    filename: str = "kernel.cu"
    line_offset: int = 0  # line of the notebook cell where the string starts (0 for files)
    min_arch: str | None = None
    notes: list[str] = field(default_factory=list)

    def arch_ok(self, arch: str) -> bool:
        """False when the snippet declares a newer ``min_arch`` than ``arch``."""
        return self.min_arch is None or _arch_number(arch) >= _arch_number(self.min_arch)


def _arch_number(arch: str) -> int:
    return int(re.sub(r"\D", "", arch) or 0)


def min_arch_in(code: str) -> str | None:
    """The architecture a ``// min_arch: sm_XX`` comment line asks for, if any."""
    m = _MIN_ARCH.search(code)
    return m.group(1) if m else None


def cu_snippets(cuda_dir: Path, root: Path | None = None) -> list[CudaSnippet]:
    """One snippet per ``.cu`` file under ``cuda_dir`` (headers are compiled through them)."""
    root = root or cuda_dir
    result = []
    for path in sorted(cuda_dir.rglob("*.cu")):
        code = path.read_text(encoding="utf-8")
        rel = path.relative_to(cuda_dir).as_posix()
        result.append(CudaSnippet(origin=path.relative_to(root).as_posix(), code=code,
                                  name_expressions=name_expressions_in(code), filename=rel,
                                  min_arch=min_arch_in(code)))
    return result


# --------------------------------------------------------------------------------------------------
# Notebook cells
# --------------------------------------------------------------------------------------------------

@dataclass
class Cell:
    """A code cell: its position among the notebook's code cells, its first line in the file, text."""

    index: int
    line: int
    source: str


def myst_code_cells(text: str) -> list[Cell]:
    """Code cells of a MyST Markdown notebook (```` ```{code-cell} ```` fences)."""
    cells: list[Cell] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(`{3,}|~{3,})\{code-cell\}", lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(1)
        j = i + 1
        body: list[str] = []
        # cell options: ":key: value" lines or a "---" YAML block right after the fence
        if j < len(lines) and lines[j].strip() == "---":
            j += 1
            while j < len(lines) and lines[j].strip() != "---":
                j += 1
            j += 1
        while j < len(lines) and lines[j].startswith(":") and re.match(r"^:\w[\w-]*:", lines[j]):
            j += 1
        first = j
        while j < len(lines) and not lines[j].startswith(fence[0] * len(fence)):
            body.append(lines[j])
            j += 1
        cells.append(Cell(len(cells), first + 1, "\n".join(body)))
        i = j + 1
    return cells


def ipynb_code_cells(text: str) -> list[Cell]:
    """Code cells of a Jupyter ``.ipynb`` notebook (lines counted within each cell)."""
    nb = json.loads(text)
    cells = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        cells.append(Cell(len(cells), 1, "".join(src) if isinstance(src, list) else src))
    return cells


def is_myst_notebook(text: str) -> bool:
    """True for Markdown with a jupytext header (front matter naming jupytext)."""
    return text.startswith("---") and "jupytext" in text.split("\n---", 1)[0]


def notebook_cells(path: Path) -> list[Cell]:
    """Code cells of a ``.ipynb`` or a jupytext MyST ``.md`` notebook ([] for plain Markdown)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        return ipynb_code_cells(text)
    return myst_code_cells(text) if is_myst_notebook(text) else []


def python_source(cell: str) -> str | None:
    """The cell as Python: IPython ``%``/``!`` lines blanked (line numbers kept); None for cell magics."""
    if cell.lstrip().startswith("%%"):
        return None
    out = []
    for line in cell.split("\n"):
        stripped = line.lstrip()
        out.append("" if stripped.startswith(("%", "!")) else line)
    return "\n".join(out)


# --------------------------------------------------------------------------------------------------
# Finding CUDA C strings in Python code
# --------------------------------------------------------------------------------------------------

class _Resolver:
    """Evaluates string expressions built from literals and known module-level constants."""

    def __init__(self) -> None:
        self.constants: dict[str, object] = {}

    def value(self, node: ast.AST | None) -> object | None:
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)):
            return node.value
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left), self.value(node.right)
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            return None
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.value(e) for e in node.elts]
            return tuple(items) if all(isinstance(i, str) for i in items) else None
        if isinstance(node, ast.Call) and _call_name(node) == "dedent" and len(node.args) == 1:
            inner = self.value(node.args[0])
            return textwrap.dedent(inner) if isinstance(inner, str) else None
        return None

    def learn(self, stmt: ast.stmt) -> None:
        """Record ``NAME = <string expression>`` at cell level (and forget names reassigned otherwise)."""
        if isinstance(stmt, ast.Assign):
            value = self.value(stmt.value)
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    if value is None:
                        self.constants.pop(target.id, None)
                    else:
                        self.constants[target.id] = value


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _arg(node: ast.Call, position: int, keyword: str) -> ast.AST | None:
    for kw in node.keywords:
        if kw.arg == keyword:
            return kw.value
    return node.args[position] if len(node.args) > position else None


@dataclass
class KernelCall:
    """A call that compiles CUDA C, with what could be resolved statically."""

    call: str
    line: int  # within the cell
    code: str | None
    options: tuple[str, ...] | None
    name_expressions: tuple[str, ...]


def _kernel_call(node: ast.Call, resolver: _Resolver) -> KernelCall | None:
    name = _call_name(node)
    if name not in CALLS:
        return None
    code_node = _arg(node, 0, "code") if name != "load_kernel" else _arg(node, 0, "code_or_path")
    if name == "resource_report":
        code_node = _arg(node, 0, "code_or_path")
    code = resolver.value(code_node)
    options_node = _arg(node, 2, "options") if name == "RawKernel" else _arg(node, 99, "options")
    options = () if options_node is None else resolver.value(options_node)
    if isinstance(options, str):
        options = (options,)
    exprs: tuple[str, ...] = ()
    if name == "RawModule":
        value = resolver.value(_arg(node, 99, "name_expressions"))
        exprs = tuple(value) if isinstance(value, tuple) else ()
    elif name in ("load_kernel", "resource_report"):
        expr = resolver.value(_arg(node, 99, "name_expression"))
        kernel_name = resolver.value(_arg(node, 1, "name"))
        if isinstance(expr, str):
            exprs = (expr,)
        elif isinstance(kernel_name, str) and "<" in kernel_name:
            exprs = (kernel_name,)
    return KernelCall(name, node.lineno, code if isinstance(code, str) else None,
                      options if isinstance(options, tuple) else None, exprs)


def kernel_calls(cells: Iterable[str]) -> Iterator[tuple[int, KernelCall]]:
    """(cell index, call) for every compiling call in the cells, resolving names across cells."""
    resolver = _Resolver()
    for index, cell in enumerate(cells):
        source = python_source(cell)
        if source is None:
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for stmt in tree.body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call):
                    found = _kernel_call(node, resolver)
                    if found is not None:
                        yield index, found
            resolver.learn(stmt)


def is_cuda_code(text: str) -> bool:
    """A string that is CUDA C rather than a ``chapter/kernel.cu`` path."""
    return "\n" in text or "__global__" in text


def notebook_snippets(path: Path, root: Path) -> list[CudaSnippet]:
    """The CUDA C strings that a notebook's code cells compile (one per distinct code and options)."""
    cells = notebook_cells(path)
    rel = path.relative_to(root).as_posix()
    seen: set[tuple[str, tuple[str, ...], tuple[str, ...]]] = set()
    result = []
    for index, call in kernel_calls(c.source for c in cells):
        if call.code is None or not is_cuda_code(call.code):
            continue  # a .cu path (compiled from kernels/cuda) or a string built at run time
        options = call.options or ()
        key = (call.code, options, call.name_expressions)
        if key in seen:
            continue
        seen.add(key)
        cell = cells[index]
        snippet = CudaSnippet(origin=f"{rel} cell {index} line {cell.line + call.line - 1}",
                              code=call.code, options=options, name_expressions=call.name_expressions,
                              filename=f"{Path(rel).stem}_cell{index}.cu",
                              line_offset=cell.line + call.line - 1, min_arch=min_arch_in(call.code))
        if call.options is None:
            snippet.notes.append("options= could not be read statically; compiled without them")
        result.append(snippet)
    return result


def notebook_paths(root: Path) -> list[Path]:
    """Chapter notebooks (``book/*.md`` with a jupytext header) and exercise notebooks."""
    paths = sorted((root / "book").glob("*.md"))
    exercises = root / "exercises"
    paths += sorted(exercises.rglob("*.md")) + sorted(exercises.rglob("*.ipynb"))
    return [p for p in paths if ".ipynb_checkpoints" not in p.parts]


def all_snippets(root: Path) -> list[CudaSnippet]:
    """Every CUDA C source in the repository at ``root``: ``.cu`` files, then notebook strings."""
    snippets = cu_snippets(root / "kernels" / "cuda", root)
    for path in notebook_paths(root):
        snippets += notebook_snippets(path, root)
    return snippets
