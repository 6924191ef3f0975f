"""Static screening of a submitted kernel source, before it is compiled or run.

A graded kernel is device code and nothing else. The screen rejects, with one sentence each, what
could reach around the harness or keep state the harness cannot see:

- ``#include``: the source must be self-contained (and cannot pull in the harness or host headers);
- host code: functions that are neither ``__global__`` nor ``__device__`` (``main``, launchers);
- inline assembly (``asm``): it can read timers and bypass what the course teaches, and on the CPU
  backend it would be the processor's own instructions;
- mutable state that outlives a launch (``__device__`` or ``__managed__`` variables at file scope,
  ``static`` variables inside functions): a kernel could count its launches and behave differently
  when it is timed; ``__constant__`` tables, ``__shared__`` arrays and ``static const`` data are fine;
- declarations of functions that are neither ``__global__`` nor ``__device__`` (a prototype of a C
  library function), attributes that run code when a library is loaded (``constructor``,
  ``destructor``, ``ifunc``, ...), and code that asks which backend it is on
  (``__COURSE_CPU_BACKEND__``): a graded kernel is the same code everywhere.

The screen works on the source with comments and strings blanked out, so a word in a comment never
triggers it. It is a first line; on the CPU backend the compiled library's symbols are checked too
and the kernel runs under a seccomp filter (``sandbox.py``); the hidden cases, guard bands and
re-checks are the others.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from kernels.signature import mask_code

from .sandbox import SYMBOL_ADVICE

MAX_SOURCE_BYTES = 200_000

_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b[ \t]*([<\"][^>\"\n]*[>\"])?", re.M)
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b")
_TYPE_HEAD = re.compile(r"^\s*(?:typedef\s+)?(?:struct|class|union|enum)\b")
_NAMESPACE = re.compile(r"^\s*namespace\b")
_EXTERN_BLOCK = re.compile(r"^\s*extern\s+\"[ C]\"\s*$")  # mask_code blanks the "C"
_LOAD_TIME_ATTRIBUTES = re.compile(r"\b(?:constructor|destructor|ifunc|init_priority|section|alias|weakref|"
                                   r"visibility|used|retain|naked|target_clones|cleanup)\b")
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((.*?)\)\)|\[\[(.*?)\]\]", re.S)
_BACKEND_MACRO = re.compile(r"\b__COURSE_CPU_BACKEND__\b")
_STATIC_LOCAL = re.compile(r"\bstatic\b(?![^;=({]*\b(?:const|constexpr|__shared__|__constant__)\b)")


@dataclass(frozen=True)
class Finding:
    """One reason the source is rejected, with the line it is on."""

    line: int
    problem: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.problem}"


def _line_of(code: str, offset: int) -> int:
    return code.count("\n", 0, offset) + 1


def _statements(masked: str, start: int, end: int):
    """Top-level pieces of masked[start:end]: (header start, header end, body end or -1).

    A piece is either a declaration ending in ';' (body end -1) or a header followed by a braced
    body (a function, a struct, a namespace, an extern "C" block).
    """
    i = start
    head = start
    depth_paren = 0
    while i < end:
        c = masked[i]
        if c == "(":
            depth_paren += 1
        elif c == ")":
            depth_paren -= 1
        elif c == ";" and depth_paren == 0:
            yield head, i, -1
            head = i + 1
        elif c == "{" and depth_paren == 0:
            depth, j = 0, i
            while j < end:
                if masked[j] == "{":
                    depth += 1
                elif masked[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            yield head, i, j
            i = j
            # a struct definition continues to its ';'
            k = j + 1
            while k < end and masked[k].isspace():
                k += 1
            if k < end and masked[k] == ";":
                i = k
            head = i + 1
        i += 1
    if masked[head:end].strip():
        yield head, end, -1


def _screen_scope(code: str, masked: str, start: int, end: int, findings: list[Finding]) -> None:
    for head, brace, body_end in _statements(masked, start, end):
        header = masked[head:brace]
        text = " ".join(header.split())
        if not text:
            continue
        line = _line_of(code, head + len(header) - len(header.lstrip()))
        if body_end >= 0:  # something with a braced body
            if _NAMESPACE.match(header) or _EXTERN_BLOCK.match(header):
                _screen_scope(code, masked, brace + 1, body_end, findings)
                continue
            if _TYPE_HEAD.match(header):
                continue  # a type definition: its member functions are checked when called
            if "=" in header.split("(", 1)[0] or "(" not in header:
                _screen_declaration(header, line, findings)  # `float w[3] = {1, 2, 3}`: a variable
                continue
            if re.search(r"\b(__global__|__device__)\b", header):
                _screen_body(code, masked, brace + 1, body_end, findings)
                continue
            name = re.findall(r"([A-Za-z_]\w*)\s*\(", header)
            what = f"'{name[0]}'" if name else "a function"
            if name and name[0] == "main":
                findings.append(Finding(line, "host code: a 'main' function; submit only the kernel "
                                              "(the harness launches it)"))
            else:
                findings.append(Finding(line, f"host code: {what} is neither __global__ nor __device__; "
                                              f"graded sources contain device code only (mark helpers "
                                              f"__device__)"))
            continue
        _screen_declaration(header, line, findings)


def _function_name(header: str) -> str | None:
    before_init = header.split("=", 1)[0]
    if re.search(r"\(\s*\*", before_init) or re.match(r"^\s*(?:typedef|using|static_assert)\b", header):
        return None
    names = re.findall(r"([A-Za-z_]\w*)\s*(?:<[^<>()]*>)?\s*\(", before_init)
    names = [n for n in names if n not in ("__attribute__", "__launch_bounds__", "__align__", "__declspec",
                                           "alignas", "decltype", "operator")]
    return names[0] if names else None


def _undefined_prototypes(masked: str, start: int, end: int) -> list[tuple[str, int]]:
    """Functions declared at namespace scope, defined nowhere in the source, and called: (name, offset).

    A prototype of ``system`` or ``getenv`` marked ``__device__`` compiles to a call the CPU backend
    would link to the C library; a graded kernel defines every function it calls that is not built in."""
    declared: list[tuple[str, int]] = []
    defined: set[str] = set()

    def walk(lo: int, hi: int) -> None:
        for head, brace, body_end in _statements(masked, lo, hi):
            header = masked[head:brace]
            if body_end >= 0:
                if _NAMESPACE.match(header) or _EXTERN_BLOCK.match(header):
                    walk(brace + 1, body_end)
                elif not _TYPE_HEAD.match(header) and "(" in header:
                    name = _function_name(header)
                    if name:
                        defined.add(name)
                continue
            if "(" in header.split("=", 1)[0]:
                name = _function_name(header)
                if name:
                    declared.append((name, head + len(header) - len(header.lstrip())))

    walk(start, end)
    calls = {n: len(re.findall(rf"\b{re.escape(n)}\s*\(", masked)) for n, _ in declared}
    declarations = {n: sum(1 for m, _ in declared if m == n) for n, _ in declared}
    # declared, never defined, and called: the call goes to something outside the source
    return [(n, o) for n, o in declared if n not in defined and calls[n] > declarations[n]]


def _screen_body(code: str, masked: str, start: int, end: int, findings: list[Finding]) -> None:
    """Inside a function: a ``static`` variable keeps its value from one launch to the next."""
    for m in _STATIC_LOCAL.finditer(masked, start, end):
        findings.append(Finding(_line_of(code, m.start()), "a static variable inside a function keeps state "
                                                           "between launches, which graded kernels may not do "
                                                           "(static const data is fine)"))


def _screen_declaration(header: str, line: int, findings: list[Finding]) -> None:
    """A file-scope declaration: variables in global memory are state that outlives a launch."""
    if re.search(r"\b__managed__\b", header):
        findings.append(Finding(line, "a __managed__ variable: global state is not allowed in graded kernels"))
    elif re.search(r"\b__device__\b", header) and not re.search(r"\b(__constant__|__shared__)\b", header):
        before_init = header.split("=", 1)[0]
        if "(" not in before_init or re.search(r"\[[^\]]*\]\s*$", before_init.strip()):
            findings.append(Finding(line, "a global __device__ variable: it keeps state between launches, which "
                                          "graded kernels may not do (use a __constant__ table for fixed data)"))


def screen(code: str, allowed_includes: tuple[str, ...] = ()) -> list[Finding]:
    """Everything in ``code`` that a graded kernel may not contain (empty when it is fine)."""
    findings: list[Finding] = []
    if len(code.encode("utf-8", errors="replace")) > MAX_SOURCE_BYTES:
        return [Finding(1, f"the source is larger than {MAX_SOURCE_BYTES // 1000} KB")]
    if "\x00" in code:
        return [Finding(1, "the source contains a NUL character")]
    for m in _INCLUDE.finditer(code):
        target = (m.group(1) or "").strip("<>\"")
        if target not in allowed_includes:
            shown = f" {m.group(1)}" if m.group(1) else ""
            findings.append(Finding(_line_of(code, m.start()),
                                    f"#include{shown}: graded sources must be self-contained; everything "
                                    f"the kernel needs (CUDA built-ins, math functions) is available "
                                    f"without includes"))
    masked = mask_code(code)
    for m in _ASM.finditer(masked):
        findings.append(Finding(_line_of(code, m.start()), "inline assembly (asm) is not allowed in graded "
                                                           "kernels (on the CPU backend it could not run "
                                                           "either: it would be the processor's instructions)"))
    for m in _BACKEND_MACRO.finditer(code):
        findings.append(Finding(_line_of(code, m.start()), "__COURSE_CPU_BACKEND__: a graded kernel must be the "
                                                           "same code on every backend"))
    for m in _ATTRIBUTE.finditer(masked):
        inside = m.group(1) if m.group(1) is not None else m.group(2)
        bad = _LOAD_TIME_ATTRIBUTES.search(inside or "")
        if bad:
            findings.append(Finding(_line_of(code, m.start()), f"the attribute '{bad.group(0)}' is not allowed in "
                                                               f"graded kernels (it changes how or when code is "
                                                               f"loaded and run)"))
    _screen_scope(code, masked, 0, len(masked), findings)
    for name, offset in _undefined_prototypes(masked, 0, len(masked)):
        advice = SYMBOL_ADVICE.get(name)
        findings.append(Finding(_line_of(code, offset), f"declares '{name}' without defining it: graded kernels may "
                                                        f"call only CUDA built-ins, math functions and functions "
                                                        f"they define themselves" + (f" ({advice})" if advice else "")))
    return sorted(set(findings), key=lambda f: (f.line, f.problem))
