"""What a CUDA source declares at namespace scope: its kernels and its ``__device__``/``__constant__`` variables.

A compiled module is looked up by these names (``Module.get_function``, ``Module.get_global``): both
backends compile an entry point for every kernel found here, and a variable's declared element type
gives the dtype of the array that views it. Only names at namespace scope (``extern "C" {}`` blocks
count) can be looked up by their plain spelling; the compiler mangles names inside a C++ namespace.
"""
from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass
from typing import Sequence

from .signature import SCALAR_DTYPES, VECTOR_TYPES, canonical_type, find_functions, mask_code, split_top_level

_BRACE = re.compile(r"[{}]")
_EXTERN_C_BEFORE = re.compile(r'extern\s*"\s*"\s*$')  # extern "C" with its literal blanked by mask_code
_MEMORY_SPACE = re.compile(r"\b(__constant__|__device__)\b")
_NOT_A_VARIABLE = re.compile(r"\b(__shared__|static|template|typedef|using)\b|\bextern\b(?!\s*\")")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
_ATTRIBUTE = re.compile(r"\b(__align__|alignas|__attribute__)\s*\(")
_BRACED_INITIALIZER = re.compile(r"=\s*\{")
_IGNORED_WORDS = {"__constant__", "__device__", "__managed__", "const", "volatile", "extern", "struct"}


def _namespace_scope(masked: str) -> list[tuple[int, int]]:
    """The stretches of ``masked`` at namespace scope: outside every brace block but ``extern "C" {}``."""
    spans, stack, begin = [], [], 0
    for m in _BRACE.finditer(masked):
        was = all(stack)
        if m.group() == "{":
            stack.append(bool(_EXTERN_C_BEFORE.search(masked[max(0, m.start() - 40):m.start()])))
        elif stack:
            stack.pop()
        if was:
            spans.append((begin, m.start()))  # a statement never runs across a brace
        if all(stack):
            begin = m.end()
    if all(stack):
        spans.append((begin, len(masked)))
    return spans


def global_kernels(code: str) -> list[str]:
    """Non-template __global__ functions at namespace scope (inside ``extern "C" {}`` counts), each
    name once (overloaded names are left to name_expressions)."""
    masked = mask_code(code)
    spans = find_functions(code)
    starts = sorted((s.start, s) for s in spans if not s.template_params)
    names = [s.name for s in spans]
    result = []
    stack: list[bool] = []  # True: an extern "C" block
    pos = 0
    for start, span in starts:
        for m in _BRACE.finditer(masked, pos, start):
            if m.group() == "{":
                stack.append(bool(_EXTERN_C_BEFORE.search(masked[max(0, m.start() - 40):m.start()])))
            elif stack:
                stack.pop()
        pos = start
        if all(stack) and names.count(span.name) == 1 and span.name not in result:
            result.append(span.name)
    return result


@dataclass(frozen=True)
class ModuleGlobal:
    """One ``__device__`` or ``__constant__`` variable: ``__constant__ float table_c[256];``."""

    name: str
    space: str  # "__constant__" or "__device__"
    ctype: str  # the canonical element type, e.g. "float", "unsigned int", "float4"
    extents: tuple[str, ...] = ()  # the array bounds as written, e.g. ("ENTRIES",); () for a scalar

    @property
    def dtype(self) -> str | None:
        """The NumPy dtype of one element (a vector type's component), or None for other types."""
        if self.ctype in SCALAR_DTYPES:
            return SCALAR_DTYPES[self.ctype]
        return VECTOR_TYPES[self.ctype][0] if self.ctype in VECTOR_TYPES else None

    def shape(self, code: str, options: Sequence[str] = ()) -> tuple[int, ...] | None:
        """The array shape (a vector type adds its width), or None when a bound is not a number this
        source, its ``#define``/``constexpr`` constants or the ``-D`` options spell out."""
        constants = _constants(code, options)
        dims = [_evaluate(e, constants) for e in self.extents]
        if any(d is None or d < 1 for d in dims):
            return None
        width = VECTOR_TYPES[self.ctype][1] if self.ctype in VECTOR_TYPES else None
        return tuple(dims) + ((width,) if width else ())  # type: ignore[return-value]


def _declared(statement: str, space: str) -> list[ModuleGlobal]:
    """The variables of one declaration statement (without its ``;``), or [] for anything else."""
    text = statement.split("=", 1)[0]
    while m := _ATTRIBUTE.search(text):  # __align__(16) and friends: not part of the type
        depth, end = 0, m.end() - 1
        for end in range(m.end() - 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
        text = text[:m.start()] + " " + text[end + 1:]
    if "(" in text or _NOT_A_VARIABLE.search(text):
        return []  # a function, a shared or static variable, a template, an alias
    declarators = split_top_level(text)
    if not declarators:
        return []
    first = re.sub(r"\[.*", "", declarators[0], flags=re.DOTALL)
    words = [w for w in _IDENTIFIER.findall(first) if w not in _IGNORED_WORDS]
    if len(words) < 2 or "*" in first:
        return []  # no name, or a pointer (its elements are not in the module)
    ctype = canonical_type(words[:-1])
    found = []
    for i, declarator in enumerate(declarators):
        name = words[-1] if i == 0 else re.sub(r"\[.*", "", declarator, flags=re.DOTALL).strip()
        if re.fullmatch(r"[A-Za-z_]\w*", name):
            extents = tuple(" ".join(e.split()) for e in re.findall(r"\[([^\]]*)\]", declarator))
            found.append(ModuleGlobal(name, space, ctype, extents))
    return found


def _blank_initializers(masked: str) -> str:
    """``= {1, 2, 3}`` blanked out, so that an initializer's braces do not look like a block."""
    out = list(masked)
    for m in _BRACED_INITIALIZER.finditer(masked):
        if out[m.end() - 1] != "{":
            continue  # inside an initializer blanked already
        depth = 0
        for i in range(m.end() - 1, len(masked)):
            depth += {"{": 1, "}": -1}.get(masked[i], 0)
            out[i] = " "
            if depth == 0:
                break
    return "".join(out)


def module_globals(code: str) -> dict[str, ModuleGlobal]:
    """The ``__device__`` and ``__constant__`` variables a source defines at namespace scope, by name."""
    masked = _blank_initializers(mask_code(code))
    found: dict[str, ModuleGlobal] = {}
    for begin, end in _namespace_scope(masked):
        for hit in _MEMORY_SPACE.finditer(masked, begin, end):
            start = max(masked.rfind(ch, begin, hit.start()) for ch in ";{}") + 1
            stop = masked.find(";", hit.end(), end)
            if stop < 0:
                continue  # a function definition: its body follows
            for variable in _declared(masked[max(start, begin):stop], hit.group(1)):
                found.setdefault(variable.name, variable)
    return found


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+(.+?)[ \t]*$", re.MULTILINE)
_CONSTEXPR = re.compile(r"\b(?:constexpr|const)\s+(?:(?:unsigned|signed|long|short|int|size_t|std::size_t|auto)\s+)+"
                        r"([A-Za-z_]\w*)\s*=\s*([^;{}]+);")
_INT_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.floordiv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.LShift: operator.lshift,
              ast.RShift: operator.rshift}


def _constants(code: str, options: Sequence[str]) -> dict[str, str]:
    """Integer constants a bound may name: ``#define`` lines, ``constexpr``/``const`` ints, ``-D`` options."""
    found = {m.group(1): re.sub(r"//.*|/\*.*?\*/", "", m.group(2)).strip() for m in _DEFINE.finditer(code)}
    found.update((m.group(1), m.group(2).strip()) for m in _CONSTEXPR.finditer(mask_code(code)))
    for option in options:
        if option.startswith("-D") and len(option) > 2:
            name, _, value = option[2:].partition("=")
            found[name] = value or "1"
    return found


def _evaluate(text: str, constants: dict[str, str], depth: int = 0) -> int | None:
    """The value of an integer constant expression such as ``ENTRIES`` or ``2 * TILE + 1``, else None."""
    try:
        tree = ast.parse(_INT_SUFFIX.sub(r"\1", text.strip()), mode="eval").body
    except SyntaxError:
        return None

    def value(node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and node.id in constants and depth < 8:
            return _evaluate(constants[node.id], constants, depth + 1)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = value(node.operand)
            return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            left, right = value(node.left), value(node.right)
            if left is None or right is None or (right == 0 and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod))):
                return None
            return _OPERATORS[type(node.op)](left, right)
        return None

    return value(tree)


__all__ = ["global_kernels", "module_globals", "ModuleGlobal"]
