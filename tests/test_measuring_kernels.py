"""CPU tests of the "Measuring kernels" chapter: its kernels compile for the T4 (sm_75) and the H100
(sm_90) with NVRTC, the compiler's resource report shows what the chapter says it shows, and the
NumPy references (the GPU tests' and the chapter's own) agree with plain Python loops.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.sources import source

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "measuring_kernels.md"
KERNEL_DIR = ROOT / "kernels" / "cuda" / "measuring_kernels"
ARCHS = ["sm_75", "sm_90"]

KERNELS = {
    "copy.cu": ["copy_f32"],
    "poly.cu": ["poly_horner"],
    "local_array.cu": ["window_dynamic", "window_static"],
    "spill.cu": ["window_variance", "window_variance_bounded"],
    "off_by_one.cu": ["scale_off_by_one"],
}

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


def compiled(filename: str, arch: str, options=()):
    path = f"measuring_kernels/{filename}"
    return compile_cuda(source(path), arch, options, filename=path).raise_for_errors()


def test_every_kernel_file_is_listed():
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cu")) == sorted(KERNELS)


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_compiles(filename, arch):
    result = compiled(filename, arch)
    assert result.cubin
    assert sorted(result.resources) == sorted(KERNELS[filename])


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_dynamic_index_puts_the_array_in_local_memory(arch):
    r = compiled("local_array.cu", arch).resources
    assert r["window_dynamic"].stack_frame_bytes >= 16 * 4  # v[16] lives on the stack
    assert r["window_static"].stack_frame_bytes == 0       # v[16] lives in registers
    assert not r["window_static"].spills
    assert not r["window_dynamic"].spills  # local memory without spilling


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_launch_bounds_force_spills(arch):
    r = compiled("spill.cu", arch).resources
    free, bounded = r["window_variance"], r["window_variance_bounded"]
    assert free.registers > 64 and not free.spills and free.stack_frame_bytes == 0
    assert bounded.registers <= 64 and bounded.spills and bounded.stack_frame_bytes > 0


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_maxrregcount_forces_more_spills(arch):
    limited = compiled("spill.cu", arch, ("--maxrregcount=32",)).resources
    bounded = compiled("spill.cu", arch).resources["window_variance_bounded"]
    assert limited["window_variance"].registers <= 32
    assert limited["window_variance"].spill_store_bytes > bounded.spill_store_bytes
    # __launch_bounds__ wins over the global cap for the kernel that has it
    assert limited["window_variance_bounded"].registers > 32


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_small_kernels_use_no_local_memory(arch):
    for filename in ("copy.cu", "poly.cu", "off_by_one.cu"):
        for report in compiled(filename, arch).resources.values():
            assert report.stack_frame_bytes == 0 and not report.spills, report


def test_off_by_one_has_its_bug():
    code = source("measuring_kernels/off_by_one.cu")
    assert "if (i <= n)" in code


# --------------------------------------------------------------------------- references


def _gpu_test_module():
    """The kernel tests' references (tests/kernel_checks/, run on the CPU backend and on GPUs)."""
    directory = ROOT / "tests" / "kernel_checks"
    spec = importlib.util.spec_from_file_location("measuring_kernels_kernels", directory / "test_measuring_kernels_kernels.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(directory))  # for its `from kernel_backends import ...`
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(directory))
    return module


def _chapter_cells() -> list[str]:
    import jupytext

    notebook = jupytext.read(CHAPTER)
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def _chapter_functions(names: set[str]) -> dict[str, object]:
    """The chapter's pure-Python reference functions, compiled on their own (no GPU needed)."""
    namespace: dict[str, object] = {"np": np}
    for cell in _chapter_cells():
        for node in ast.parse(cell).body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                exec(compile(ast.Module([node], []), str(CHAPTER), "exec"), namespace)
    missing = names - set(namespace)
    assert not missing, f"the chapter no longer defines {missing}"
    return namespace


def loop_poly(x, k):
    out = []
    for v in x:
        acc = 1.0
        for _ in range(k):
            acc = acc * v + 0.5
        out.append(acc)
    return np.array(out)


def loop_window(x, s):
    n = len(x)
    return np.array([sum(x[(i + m) % n] * (((m - s) % 16) + 1) for m in range(16)) for i in range(n)])


def loop_variance(x):
    n = len(x)
    out = []
    for i in range(n):
        v = [x[(i + m) % n] for m in range(64)]
        mean = sum(v) / 64
        out.append(sum((a - mean) ** 2 for a in v) / 64)
    return np.array(out)


def _sources_of_references():
    gpu = _gpu_test_module()
    chapter = _chapter_functions({"poly_reference", "window_reference", "variance_reference"})
    return [("gpu tests", gpu.poly_reference, gpu.window_reference, gpu.variance_reference),
            ("chapter", chapter["poly_reference"], chapter["window_reference"], chapter["variance_reference"])]


@pytest.mark.parametrize("origin", [0, 1], ids=["gpu tests", "chapter"])
def test_references_match_loops(origin):
    _, poly, window, variance = _sources_of_references()[origin]
    rng = np.random.default_rng(0)
    for n in (1, 16, 64, 70, 257):
        x = rng.uniform(-0.9, 0.9, n)
        for k in (0, 1, 7, 40):
            np.testing.assert_allclose(poly(x, n, k), loop_poly(x, k), rtol=1e-12, atol=1e-12)
        if n >= 16:
            for s in (0, 3, 15, 16, 21):
                np.testing.assert_allclose(window(x, n, s), loop_window(x, s), rtol=1e-12, atol=1e-12)
        if n >= 64:
            np.testing.assert_allclose(variance(x, n), loop_variance(x), rtol=1e-10, atol=1e-12)


def test_dynamic_and_static_window_weights_agree():
    """The two kernels visit the same terms: v[(j + s) & 15] * (j + 1) == v[m] * (((m - s) & 15) + 1)."""
    rng = np.random.default_rng(1)
    v = rng.standard_normal(16)
    for s in range(-20, 40):
        dynamic = sum(v[(j + s) & 15] * (j + 1) for j in range(16))
        static = sum(v[m] * (((m - s) & 15) + 1) for m in range(16))
        assert dynamic == pytest.approx(static, rel=1e-12)


def test_horner_stays_bounded_for_any_degree():
    """|x| <= 0.9 keeps the values near 0.5 / (1 - x), so float32 can match float64 for k up to 1024."""
    x = np.linspace(-0.9, 0.9, 101)
    acc = np.ones_like(x)
    for _ in range(4096):
        acc = acc * x + 0.5
        assert np.all(np.abs(acc) <= 5.0 + 1e-12)


# --------------------------------------------------------------------------- the chapter's code


def test_chapter_kernels_exist():
    """Every kernel file and kernel name the chapter loads or reports on is really there."""
    text = CHAPTER.read_text()
    calls = re.findall(r'(?:load_kernel|resource_report)\("measuring_kernels/([\w.]+)", "(\w+)"', text)
    assert calls
    for filename, name in calls:
        assert name in KERNELS[filename], (filename, name)
    for filename in re.findall(r'show_source\("measuring_kernels/([\w.]+)"\)', text):
        assert filename in KERNELS
    # the names that loops pass to load_kernel
    for name in ("window_dynamic", "window_static", "window_variance", "window_variance_bounded"):
        assert f'"{name}"' in text
