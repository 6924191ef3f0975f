"""CPU tests of the "Reduce" chapter: its kernels compile for the T4 (sm_75) and the H100 (sm_90)
with NVRTC, without spills, and contain the instructions the chapter says they contain; the chapter
loads and shows every kernel; the pure helpers of kernels.chapters.reduce are right (checked against brute
force) and the chapter's NumPy reference agrees with a plain loop. What every chapter promises is
checked in tests/test_chapter_contract.py.
"""
from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np
import pytest

from kernels.chapters import reduce as red
from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.sources import source
from tooling.fresh_reports import fresh_reports_by_file

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "reduce.md"
KERNEL_DIR = ROOT / "kernels" / "cuda" / "reduce"
ARCHS = ["sm_75", "sm_90"]

KERNELS = {
    "atomic_sum.cu": ["sum_atomic"],
    "tree.cu": ["reduce_interleaved", "reduce_interleaved_strided", "reduce_sequential",
                "reduce_first_add", "reduce_syncwarp_tail", "reduce_shuffle"],
    "vec4_sum.cu": ["sum_vec4_partials", "sum_vec4_single_pass", "sum_int_single_pass"],
}

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


def compiled(filename: str, arch: str):
    path = f"reduce/{filename}"
    return compile_cuda(source(path), arch, filename=path).raise_for_errors()


def ptx_body(filename: str, kernel: str) -> str:
    ptx = compiled(filename, "compute_75").ptx
    return ptx.split(f".entry {kernel}(")[1].split(".entry")[0]


def test_every_kernel_file_is_listed():
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cu")) == sorted(KERNELS)


@pytest.fixture(scope="module")
def reports():
    """{(filename, arch): {kernel: report}}, compiled in fresh processes: exact "no spills" checks
    would otherwise depend on what the test process compiled before (tooling.fresh_reports says why)."""
    return fresh_reports_by_file("reduce", sorted(KERNELS), ARCHS, ())   # no name expressions, as compiled() passes none


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_compiles(filename, arch, reports):
    assert compiled(filename, arch).cubin
    resources = reports[(filename, arch)]
    assert sorted(resources) == sorted(KERNELS[filename])
    for report in resources.values():
        assert report.stack_frame_bytes == 0 and not report.spills, report


@needs_nvrtc
def test_instructions_the_chapter_names():
    assert "atom.global.add.f32" in ptx_body("atomic_sum.cu", "sum_atomic")
    assert "bar.warp.sync" in ptx_body("tree.cu", "reduce_syncwarp_tail")
    assert "shfl.sync.down" in ptx_body("tree.cu", "reduce_shuffle")
    assert "rem.u32" in ptx_body("tree.cu", "reduce_interleaved")
    single = ptx_body("vec4_sum.cu", "sum_vec4_single_pass")
    assert len(re.findall(r"ld\.global\.nc\.v4\.f32", single)) >= 4
    assert "membar.gl" in single and "atom.global.add.u32" in single and "ld.global.cg.f32" in single
    integer = ptx_body("vec4_sum.cu", "sum_int_single_pass")
    assert len(re.findall(r"ld\.global\.nc\.v4\.s32", integer)) >= 4 and "cvt.s64.s32" in integer


# --------------------------------------------------------------------------- chapter structure


def _chapter_text() -> str:
    return CHAPTER.read_text(encoding="utf-8")


def _chapter_cells() -> list[str]:
    import jupytext

    return [c.source for c in jupytext.read(CHAPTER).cells if c.cell_type == "code"]


def test_every_kernel_is_loaded_and_shown():
    text = _chapter_text()
    for filename, names in KERNELS.items():
        assert f'"reduce/{filename}"' in text
        for name in names:
            assert f'"{name}"' in text or f'{name} = load_kernel' in text, name
    assert "Sweep(" in text


# --------------------------------------------------------------------------- references and helpers


def _chapter_function(name: str):
    namespace: dict = {"np": np}
    for cell in _chapter_cells():
        for node in ast.parse(cell).body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                exec(compile(ast.Module([node], []), str(CHAPTER), "exec"), namespace)
                return namespace[name]
    raise AssertionError(f"{name} not defined in the chapter")


def test_references_match_loops():
    rng = np.random.default_rng(3)
    sum_reference = _chapter_function("sum_reference")
    sliced_reference = _chapter_function("sliced_reference")
    for n in (1, 7, 300):
        x = rng.random(n + 3)
        assert sum_reference(x, n)[0] == pytest.approx(sum(float(v) for v in x[:n]), rel=1e-12)
        for offset in range(4):
            assert sliced_reference(x, offset, n)[0] == pytest.approx(sum(x[offset:offset + n]), rel=1e-12)
        xi = rng.integers(-2**31, 2**31, n + 3)
        assert int(sliced_reference(xi, 2, n)[0]) == sum(int(v) for v in xi[2:2 + n])


@pytest.mark.parametrize("per_block", [2, 64, 256, 512, 1024])
def test_pass_grids(per_block):
    for n in (1, 2, per_block, per_block + 1, 12345, 2**28):
        grids = red.pass_grids(n, per_block)
        assert grids[-1] == 1
        m = n
        for g in grids:
            assert g == -(-m // per_block)
            m = g
    assert red.pass_grids(2**28, 256) == [2**20, 2**12, 16, 1]
    with pytest.raises(ValueError):
        red.pass_grids(0, 256)


def test_vec4_split_brute_force():
    for address in range(0, 64, 4):
        for n in range(0, 40):
            head, vectors, tail = red.vec4_split(address, n)
            assert head + 4 * vectors + tail == n and 0 <= tail < 4 and 0 <= head < 4
            if vectors:
                assert (address + 4 * head) % 16 == 0
            # the kernel's tail is everything after the last whole vector
            assert tail < 4
    assert red.vec4_split(256, 10) == (0, 2, 2)
    assert red.vec4_split(260, 10) == (3, 1, 3)
    assert red.vec4_split(260, 2) == (2, 0, 0)
    with pytest.raises(ValueError):
        red.vec4_split(2, 10)


def test_strided_tree_conflicts_brute_force():
    for block in (2, 8, 64, 256, 1024):
        for s, active, ways in red.strided_tree_conflicts(block):
            words = [lane * 2 * s for lane in range(active)]       # lane t reads buf[2 s t]
            banks = [w % 32 for w in words]
            worst = max(len({w for w, b in zip(words, banks) if b == bank}) for bank in set(banks))
            assert ways == worst, (block, s, active)


def test_strided_tree_conflicts():
    steps = red.strided_tree_conflicts(256)
    assert [s for s, _, _ in steps] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert [w for _, _, w in steps][:4] == [2, 4, 8, 8]
    for s, active, ways in steps:   # full warps: gcd(2s, 32) lanes share a bank
        if active == 32:
            assert ways == math.gcd(2 * s, 32)


def test_error_bounds():
    u = 2.0**-24
    assert red.gamma(1) == pytest.approx(u / (1 - u))
    assert red.sum_error_bound(28) == pytest.approx(28 * u, rel=1e-5)
    assert math.isinf(red.sum_error_bound(2**24))
    # a sequential float32 sum stays within its bound, a pairwise one within the tree bound
    x = np.random.default_rng(0).random(2**14, dtype=np.float32)
    exact = x.astype(np.float64).sum()
    seq = np.cumsum(x, dtype=np.float32)[-1]
    assert abs(float(seq) - exact) / exact <= red.sum_error_bound(x.size - 1)
    assert abs(float(x.sum()) - exact) / exact <= red.sum_error_bound(14 + 8)


def test_vec4_depth():
    assert red.vec4_depth(2**28, 1056, 256) == (2**28 // (4 * 1056 * 256) + 1) + 1 + 10 + 5 + 10
    assert red.vec4_depth(1, 1, 32) == 1 + 1 + 7 + 1 + 7


def test_ladder_chart_builds():
    import matplotlib

    matplotlib.use("Agg")
    fig = red.ladder_chart({"a": 10.0, "b": 2000.0}, 3000.0, 2900.0, title="t")
    assert fig.axes and len(fig.axes[0].patches) == 2
