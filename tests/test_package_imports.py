"""The kernels package has no import cycles, counting the imports inside functions too.

A cycle hidden by a function-level import works until someone moves the import to the top of the
file, and it means neither module can be read or tested without the other. The graph is built from
the source with ``ast``, so this test imports nothing of the package (and never CuPy).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kernels"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(root: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _type_checking_only(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` blocks: read by type checkers, never run."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at the top of the file or inside a function, except type-checking ones."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        stack.extend(child for child in ast.iter_child_nodes(node) if not _type_checking_only(child))
    return found


def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, modules: set[str]) -> set[str]:
    """The package modules one import statement loads (``from . import x`` loads submodule x)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = importer.split(".") if is_package else importer.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in modules else prefix for a in node.names]
    targets = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]  # kernels.cpu.raw.RawKernel -> kernels.cpu.raw
        if name and name != importer:
            targets.add(name)
    return targets


def import_graph(root: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """module -> {imported module: line of the first such import}, within the package."""
    modules = package_modules(root)
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            for target in _targets(node, name, path.name == "__init__.py", set(modules)):
                edges[target] = min(edges.get(target, node.lineno), node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def describe(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    edges = [f"{a} imports {b} (line {graph[a][b]})" for a in component for b in sorted(graph[a]) if b in component]
    return "; ".join(edges)


def test_the_kernels_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 50 and "kernels.compile" in graph["kernels.resources"]  # the graph is really built
    found = cycles(graph)
    assert not found, "import cycles: " + " | ".join(describe(c, graph) for c in found)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "kernels" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "kernels"


@pytest.mark.parametrize("files, expected", [
    ({"__init__.py": "", "a.py": "from .b import x\n", "b.py": "def f():\n    from . import a\n"},
     [["kernels.a", "kernels.b"]]),                                      # hidden in a function
    ({"__init__.py": "", "a.py": "import kernels.sub.c\n", "sub/__init__.py": "",
      "sub/c.py": "from ..a import y\n"}, [["kernels.a", "kernels.sub.c"]]),  # absolute, and up a level
    ({"__init__.py": "", "a.py": "from .b import x\n",
      "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import T\n"}, []),
    ({"__init__.py": "", "a.py": "from . import b\n", "b.py": "import numpy\n"}, []),
])
def test_cycles_are_found_in_any_kind_of_import(tmp_path: Path, files: dict[str, str], expected: list[list[str]]):
    assert cycles(import_graph(_write(tmp_path, files))) == expected
