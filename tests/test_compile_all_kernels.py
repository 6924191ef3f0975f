"""Every CUDA C kernel in the repository compiles for the T4 (sm_75) and the H100 (sm_90).

Sources: ``kernels/cuda/**/*.cu`` (templates instantiated from their ``// name_expressions:`` line)
and the CUDA C strings that chapter and exercise notebooks pass to RawKernel, RawModule or
load_kernel. Each source and architecture is its own test, failing with the compiler's
``file(line): error`` message. The scanner itself is unit-tested below on synthetic notebooks.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.signature import parse_name_expression, template_kernels
from kernels.sources import name_expressions_in
from tooling.cuda_snippets import (CudaSnippet, all_snippets, cu_snippets, ipynb_code_cells, kernel_calls,
                                   min_arch_in, myst_code_cells, notebook_snippets, python_source)

ROOT = Path(__file__).resolve().parents[1]
ARCHS = ("sm_75", "sm_90")
SNIPPETS = all_snippets(ROOT)

# Locally a missing NVRTC skips these tests; in CI (CI=true), which installs it from
# requirements.txt, a missing NVRTC must fail them instead of passing silently.
_IN_CI = os.environ.get("CI", "").lower() == "true"
needs_nvrtc = pytest.mark.skipif(not nvrtc_available() and not _IN_CI,
                                 reason="NVRTC (cuda-bindings) is not installed")


def _test_id(origin: str) -> str:
    return origin.replace(" cell ", ":cell").replace(" line ", ":line")


def compile_failure(snippet: CudaSnippet, arch: str) -> str | None:
    """Why ``snippet`` does not build for ``arch`` (None when it does)."""
    result = compile_cuda(snippet.code, arch, snippet.options, snippet.name_expressions, snippet.filename)
    where = snippet.origin
    if snippet.line_offset:
        where += f" (line N of {snippet.filename} is line N of the string that starts there)"
    if not result.ok:
        return f"{where} does not compile for {arch}:\n{result.log.strip()}"
    if snippet.origin.endswith(".cu"):
        instantiated = {parse_name_expression(e)[0] for e in snippet.name_expressions}
        missing = [t for t in template_kernels(snippet.code) if t not in instantiated]
        if missing:
            return (f"{where}: template kernel(s) {', '.join(missing)} are never compiled; add a line "
                    f"such as '// name_expressions: {missing[0]}<float>' to the file")
    lost = [e for e in snippet.name_expressions if e not in result.resources]
    if lost:
        return f"{where}: ptxas reported no kernel for {', '.join(lost)} on {arch}"
    return None


@needs_nvrtc
@pytest.mark.parametrize("snippet, arch", [pytest.param(s, a, id=f"{_test_id(s.origin)}-{a}")
                                           for s in SNIPPETS for a in ARCHS])
def test_kernel_compiles(snippet: CudaSnippet, arch: str):
    if not snippet.arch_ok(arch):
        pytest.skip(f"{snippet.origin} declares min_arch {snippet.min_arch}")
    failure = compile_failure(snippet, arch)
    if failure:
        pytest.fail(failure, pytrace=False)


def test_every_cu_file_is_scanned():
    files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "kernels" / "cuda").rglob("*.cu"))
    assert [s.origin for s in SNIPPETS if s.origin.endswith(".cu")] == files


# ----------------------------------------------------------------------------- scanner unit tests

MYST = '''---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  name: python3
---

# A chapter

```{code-cell} ipython3
import cupy as cp
from textwrap import dedent
import kernels
CODE = r"""
extern "C" __global__ void twice(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2.0f;
}
"""
```

Some prose with a fence that is not a cell:

```python
RawKernel("not code", "x")
```

```{code-cell} ipython3
:tags: [hide-output]
!nvidia-smi
%time k = cp.RawKernel(CODE, "twice")
k = cp.RawKernel(CODE, "twice")
k2 = cp.RawKernel(CODE, "twice")   # same code again: compiled once
```

```{code-cell} ipython3
---
tags: [remove-input]
---
TEMPLATE = dedent("""
    template <typename T>
    __global__ void fill(T* x, T v) { x[threadIdx.x] = v; }
    #ifndef LIMIT
    #error LIMIT is needed
    #endif
""")
mod = cp.RawModule(code=TEMPLATE, options=("-DLIMIT=4",), name_expressions=["fill<float>", "fill<int>"])
vec = kernels.load_kernel("gpu_architecture/vector_add.cu", "vector_add")
def make(src):
    return cp.RawKernel(src, "dynamic")
```

```{code-cell} ipython3
%%writefile saved.cu
__global__ void ignored() {}
```

```{code-cell} ipython3
this is not python
```

```{code-cell} ipython3
t = kernels.load_kernel(TEMPLATE + "", "fill<double>", options=["-DLIMIT=1"])
CODE = make_code()
again = cp.RawKernel(CODE, "twice")
```
'''


def test_myst_cells_skip_options_and_plain_fences():
    cells = myst_code_cells(MYST)
    assert len(cells) == 6
    assert cells[1].source.startswith("!nvidia-smi")
    assert cells[2].source.startswith("TEMPLATE = dedent(")
    assert MYST.split("\n")[cells[1].line - 1] == "!nvidia-smi"


def test_python_source_blanks_magics_and_skips_cell_magics():
    assert python_source("!ls\nx = 1\n  %time y = 2") == "\nx = 1\n"
    assert python_source("%%writefile a.cu\nint x;") is None


def test_kernel_calls_resolve_constants_across_cells():
    calls = list(kernel_calls(c.source for c in myst_code_cells(MYST)))
    summary = [(i, c.call, c.code is not None, c.options, c.name_expressions) for i, c in calls]
    assert summary == [
        (1, "RawKernel", True, (), ()),
        (1, "RawKernel", True, (), ()),
        (2, "RawModule", True, ("-DLIMIT=4",), ("fill<float>", "fill<int>")),
        (2, "load_kernel", True, (), ()),
        (2, "RawKernel", False, (), ()),
        (5, "load_kernel", True, ("-DLIMIT=1",), ("fill<double>",)),
        (5, "RawKernel", False, (), ()),  # CODE was reassigned to something unknown
    ]
    assert calls[2][1].code.startswith("\ntemplate <typename T>\n__global__")  # dedented


def test_notebook_snippets_dedupe_and_locate(tmp_path: Path):
    (tmp_path / "book").mkdir()
    path = tmp_path / "book" / "chapter.md"
    path.write_text(MYST)
    snippets = notebook_snippets(path, tmp_path)
    assert [s.origin for s in snippets] == ["book/chapter.md cell 1 line 35", "book/chapter.md cell 2 line 50",
                                            "book/chapter.md cell 5 line 66"]
    lines = MYST.split("\n")
    assert [lines[s.line_offset - 1].split(" = ")[0] for s in snippets] == ["k", "mod", "t"]
    assert snippets[1].options == ("-DLIMIT=4",) and snippets[1].filename == "chapter_cell2.cu"


@needs_nvrtc
def test_scanned_snippets_compile_with_their_options(tmp_path: Path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "chapter.md").write_text(MYST)
    snippets = notebook_snippets(tmp_path / "book" / "chapter.md", tmp_path)
    for snippet in snippets:
        assert compile_failure(snippet, "sm_75") is None
    no_options = CudaSnippet(origin="x", code=snippets[1].code, name_expressions=("fill<float>",))
    assert "LIMIT is needed" in compile_failure(no_options, "sm_75")


def test_plain_markdown_is_not_a_notebook(tmp_path: Path):
    (tmp_path / "book").mkdir()
    path = tmp_path / "book" / "glossary.md"
    path.write_text("# Glossary\n\n```{code-cell} ipython3\nk = RawKernel('__global__ void f(){}\\n', 'f')\n```\n")
    assert notebook_snippets(path, tmp_path) == []


def test_ipynb_cells_and_snippets(tmp_path: Path):
    nb = {"cells": [
        {"cell_type": "markdown", "source": ["RawKernel('x', 'y')"]},
        {"cell_type": "code", "source": ["SRC = '''\n", "extern \"C\" __global__ void k(int* x) { x[0] = 1; }\n", "'''\n"]},
        {"cell_type": "code", "source": "import cupy as cp\nk = cp.RawKernel(SRC, 'k', options=('-lineinfo',))\n"},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "exercises" / "ch").mkdir(parents=True)
    path = tmp_path / "exercises" / "ch" / "ex1.ipynb"
    path.write_text(json.dumps(nb))
    assert [c.index for c in ipynb_code_cells(path.read_text())] == [0, 1]
    [snippet] = notebook_snippets(path, tmp_path)
    assert snippet.origin == "exercises/ch/ex1.ipynb cell 1 line 2"
    assert snippet.options == ("-lineinfo",) and "void k(int* x)" in snippet.code
    assert [s.origin for s in all_snippets(tmp_path)] == [snippet.origin]


def test_cu_file_conventions(tmp_path: Path):
    cuda = tmp_path / "kernels" / "cuda" / "ch"
    cuda.mkdir(parents=True)
    (cuda / "t.cu").write_text("// name_expressions: scale<float, 256>, scale<double, 128>\n"
                               "// name_expressions: other<int>\n// min_arch: sm_80\n")
    (cuda / "h.cuh").write_text("// a header: compiled through the .cu files that include it\n")
    [snippet] = cu_snippets(tmp_path / "kernels" / "cuda", tmp_path)
    assert snippet.origin == "kernels/cuda/ch/t.cu" and snippet.filename == "ch/t.cu"
    assert snippet.name_expressions == ("scale<float, 256>", "scale<double, 128>", "other<int>")
    assert snippet.min_arch == "sm_80"
    assert not snippet.arch_ok("sm_75") and snippet.arch_ok("sm_90")
    assert name_expressions_in("int x; // name_expressions: not at line start") == ()
    assert min_arch_in("// nothing here") is None


@needs_nvrtc
def test_uninstantiated_template_in_cu_file_fails_with_a_fix():
    code = "template <typename T>\n__global__ void scale(T* x) { x[0] *= 2; }\n"
    snippet = CudaSnippet(origin="kernels/cuda/ch/scale.cu", code=code, filename="ch/scale.cu")
    assert "// name_expressions: scale<float>" in compile_failure(snippet, "sm_90")
    snippet.name_expressions = name_expressions_in("// name_expressions: scale<float>\n")
    assert compile_failure(snippet, "sm_90") is None
