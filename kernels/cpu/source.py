"""Prepare a reader's CUDA C source for the system C++ compiler, keeping every line where it was.

Three jobs, all light text work (the C++ compiler does the real parsing):
- find features the CPU backend cannot model (tensor cores, inline PTX, asynchronous copies, TMA,
  clusters, grid-wide sync, dynamic parallelism, textures) and refuse them with the feature's name
  and line, before compiling;
- rewrite the few declarations a C++ compiler reads differently, on the same line:
  ``extern __shared__ T name[];`` becomes a pointer to the launch's dynamic shared memory,
  ``static __shared__`` loses the ``static`` (``__shared__`` already means static storage here),
  and ``__noinline__`` becomes ``__attribute__((noinline))``;
- do the same for the reader's own headers (``#include "x.cuh"`` or ``<x.cuh>`` from an ``-I``
  directory), copied into the build directory under the name they are included by, each starting
  with ``#line 1 "<its path>"`` so messages still name the real file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..signature import mask_code


class CpuCompileError(Exception):
    """The CUDA C source does not compile for the CPU backend; the message is the compiler's."""


@dataclass(frozen=True)
class Unsupported:
    """A GPU feature the CPU backend cannot run, found by a pattern in masked source."""

    pattern: re.Pattern[str]
    feature: str
    why: str


_U = Unsupported
UNSUPPORTED = [
    _U(re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile\b|__volatile__\b)?\s*(?:goto\s*)?\("),
       "inline PTX assembly (asm)", "PTX is the GPU's instruction set; a CPU cannot execute it"),
    _U(re.compile(r"\bnvcuda\s*::\s*wmma\b|\bwmma\s*::|\b(?:load_matrix_sync|store_matrix_sync|mma_sync|"
                  r"fill_fragment)\b"),
       "tensor core matrix operations (wmma / <mma.h>)",
       "tensor cores have no CPU counterpart with the same fragment layouts"),
    _U(re.compile(r"\b__pipeline_(?:memcpy_async|commit|wait_prior|arrive_on)\b|\bcuda\s*::\s*memcpy_async\b|"
                  r"\bmemcpy_async\s*\(|\bcuda\s*::\s*pipeline\b|\bmake_pipeline\b"),
       "asynchronous copies (cp.async / memcpy_async / __pipeline_*)",
       "they overlap copies with computation in hardware the CPU backend does not model"),
    _U(re.compile(r"\bCUtensorMap\b|\bcuTensorMapEncode\w*|\bcp_async_bulk\w*|\bfence_proxy_async\w*"),
       "the Tensor Memory Accelerator (TMA)", "bulk tensor copies need the GPU's copy engine"),
    _U(re.compile(r"\b__cluster_dims__\b|\bcluster_group\b|\bthis_cluster\s*\(|\bcluster_ctarank\b|"
                  r"\bcudaLaunchAttributeClusterDimension\b"),
       "thread block clusters", "blocks of a cluster run at the same time and share memory"),
    _U(re.compile(r"\bthis_grid\s*\(|\bgrid_group\b|\bthis_multi_grid\s*\(|\bmulti_grid_group\b"),
       "grid-wide synchronization (cooperative_groups::grid_group)",
       "the CPU backend runs one block after another, so all blocks can never wait for each other"),
    _U(re.compile(r"<<<"),
       "dynamic parallelism (a kernel launch <<<...>>> inside device code)",
       "the CPU backend launches kernels from Python only"),
    _U(re.compile(r"\b(?:tex[123]D\w*|texCubemap\w*|surf[123]D\w*|tex1Dfetch)\s*[<(]|\btexture\s*<|"
                  r"\bcudaTextureObject_t\b|\bcudaSurfaceObject_t\b"),
       "textures and surfaces", "texture units (filtering, addressing modes) are not modelled"),
]

_UNSUPPORTED_HEADERS = {
    "mma.h": UNSUPPORTED[1],
    "cuda_pipeline.h": UNSUPPORTED[2], "cuda_pipeline_primitives.h": UNSUPPORTED[2],
    "cuda/pipeline": UNSUPPORTED[2], "cooperative_groups/memcpy_async.h": UNSUPPORTED[2],
    "cuda/barrier": Unsupported(re.compile("x^"), "asynchronous barriers (cuda::barrier)",
                                "they complete in hardware alongside asynchronous copies"),
    "cudaTypedefs.h": UNSUPPORTED[3],
}

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)', re.MULTILINE)
_EXTERN_SHARED = re.compile(
    r"\bextern\s+__shared__\s+((?:(?:__align__|alignas|__attribute__)\s*\((?:[^()]|\([^()]*\))*\)\s*)*)"
    r"([A-Za-z_][\w:<>,\s\*]*?)\s*\b([A-Za-z_]\w*)\s*\[\s*\]\s*;")
_STATIC_SHARED = re.compile(r"\bstatic(\s+)(?=__shared__\b)|(?<=__shared__)(\s+)static\b")
_NOINLINE = re.compile(r"\b__noinline__\b")


def line_of(code: str, offset: int) -> int:
    return code.count("\n", 0, offset) + 1


def find_unsupported(code: str, display: str) -> str | None:
    """The first unsupported feature in ``code`` as ``file:line: message``, or None."""
    masked = mask_code(code)
    for m in _INCLUDE.finditer(code):
        header = (m.group(1) or m.group(2)).strip()
        feature = _UNSUPPORTED_HEADERS.get(header)
        if feature is not None:
            return _unsupported_message(display, line_of(code, m.start()), feature, f"#include <{header}>")
    hits = []
    for feature in UNSUPPORTED:
        m = feature.pattern.search(masked)
        if m:
            hits.append((m.start(), feature, code[m.start():m.end()].strip()))
    if not hits:
        return None
    offset, feature, text = min(hits, key=lambda h: h[0])
    return _unsupported_message(display, line_of(code, offset), feature, text)


def _unsupported_message(display: str, line: int, feature: Unsupported, text: str) -> str:
    return (f"{display}:{line}: {feature.feature} cannot run on the CPU backend ({feature.why}); found "
            f"'{text}'. This kernel needs a GPU: run it in Colab with a GPU runtime, or on a machine "
            f"with CUDA and CuPy.")


def rewrite(code: str) -> str:
    """The line-preserving rewrites described in the module docstring."""
    masked = mask_code(code)
    edits: list[tuple[int, int, str]] = []
    for m in _EXTERN_SHARED.finditer(masked):
        ctype = " ".join(code[m.start(2):m.end(2)].split())
        name = m.group(3)
        newlines = code.count("\n", m.start(), m.end())
        edits.append((m.start(), m.end(),
                      f"{ctype}* const {name} = reinterpret_cast<{ctype}*>(cudacpu_dynamic_smem);"
                      + "\n" * newlines))
    for m in _STATIC_SHARED.finditer(masked):
        edits.append((m.start(), m.end(), " " * (m.end() - m.start())))
    for m in _NOINLINE.finditer(masked):
        edits.append((m.start(), m.end(), "__attribute__((noinline))"))
    if not edits:
        return code
    edits.sort()
    out, pos = [], 0
    for start, end, text in edits:
        if start < pos:
            continue
        out.append(code[pos:start])
        out.append(text)
        pos = end
    out.append(code[pos:])
    return "".join(out)


@dataclass
class PreparedSource:
    """The rewritten main source and the reader's headers to write next to it."""

    code: str
    original: str = ""
    headers: dict[str, tuple[Path, str]] = field(default_factory=dict)  # build-relative path -> (real, text)
    dependencies: dict[str, str] = field(default_factory=dict)  # real path -> text (for the cache)


def _display_path(path: Path, include_dirs: list[Path]) -> str:
    for d in include_dirs:
        try:
            return path.resolve().relative_to(d.resolve()).as_posix()
        except ValueError:
            continue
    return str(path)


def display_paths(text: str, include_dirs: list[Path]) -> str:
    """``text`` with each include directory's absolute path removed from the file names in it."""
    for d in sorted({str(Path(d).resolve()) for d in include_dirs}, key=len, reverse=True):
        text = text.replace(d + "/", "")
    return text


def prepare(code: str, display: str, include_dirs: list[Path]) -> PreparedSource:
    """Check for unsupported features and rewrite ``code`` and the headers it includes.

    Raises CpuCompileError naming the feature and line when something cannot run on the CPU.
    """
    problem = find_unsupported(code, display)
    if problem:
        raise CpuCompileError(problem)
    prepared = PreparedSource(code=rewrite(code), original=code)
    _overlay_includes(code, None, "", include_dirs, prepared, depth=0)
    return prepared


def _overlay_includes(code: str, here: Path | None, virtual_dir: str, include_dirs: list[Path],
                      prepared: PreparedSource, depth: int) -> None:
    """Copy (rewritten) every header of the reader that ``code`` includes, recursively."""
    if depth > 32:
        return
    for m in _INCLUDE.finditer(code):
        quoted, angled = m.group(1), m.group(2)
        name = (quoted or angled).strip()
        candidates = ([here / name] if quoted and here is not None else []) + [d / name for d in include_dirs]
        real = next((c for c in candidates if c.is_file()), None)
        if real is None:
            continue  # a system header, or one of the CPU backend's own
        virtual = (Path(virtual_dir) / name).as_posix() if quoted else f"_include/{name}"
        if virtual in prepared.headers or ".." in Path(virtual).parts:
            continue
        text = real.read_text(encoding="utf-8", errors="replace")
        shown = _display_path(real, include_dirs)
        problem = find_unsupported(text, shown)
        if problem:
            raise CpuCompileError(problem)
        prepared.dependencies[str(real.resolve())] = text
        # The real path, so that the compiler can quote the header's lines in its messages;
        # messages shorten it to `shown` (display_paths).
        prepared.headers[virtual] = (real, f'#line 1 "{real.resolve()}"\n' + rewrite(text))
        _overlay_includes(text, real.parent, str(Path(virtual).parent), include_dirs, prepared, depth + 1)


FIRST_ENTRY_LINE = 6  # line of the first entry point's wrapper in the generated section


def wrappers(expressions: list[str]) -> str:
    """extern "C" entry points for each kernel: run one thread, and report the parameter sizes."""
    lines = ['#line 1 "<cpu-backend-entry-points>"',
             'extern "C" char __start_cudacpu_shared[] __attribute__((weak, visibility("hidden")));',
             'extern "C" char __stop_cudacpu_shared[] __attribute__((weak, visibility("hidden")));',
             'extern "C" __attribute__((visibility("default"))) void *cudacpu_module_builtins() '
             '{ return &cudacpu_kernel_builtins; }',
             'extern "C" __attribute__((visibility("default"))) char *cudacpu_module_shared_begin() '
             '{ return __start_cudacpu_shared; }',
             'extern "C" __attribute__((visibility("default"))) char *cudacpu_module_shared_end() '
             '{ return __stop_cudacpu_shared; }']
    for i, expr in enumerate(expressions):
        pointer = f"&{expr}"
        lines.append(f'extern "C" __attribute__((visibility("default"))) void cudacpu_entry_{i}(void **a) '
                     f'{{ cudacpu_invoke({pointer}, a); }}')
        lines.append(f'extern "C" __attribute__((visibility("default"))) int cudacpu_params_{i}'
                     f'(unsigned long long *s, int cap) {{ return cudacpu_param_sizes({pointer}, s, cap); }}')
    return "\n".join(lines) + "\n"
