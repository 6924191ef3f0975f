"""CPU tests of the "SIMT and warps" chapter: its kernels compile for the T4 (sm_75) and the H100
(sm_90) with NVRTC and contain the warp instructions the chapter says they contain; the ballast
kernel's register count grows with its ballast, without spilling; the chapter loads
every kernel (what every chapter promises: tests/test_chapter_contract.py); the NumPy references
(the GPU tests' and the chapter's) agree with plain Python loops; the warp-mapping and scheduling
helpers are right.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from kernels.chapters.simt_and_warps import diagrams as simt
from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.sources import name_expressions_in, source
from tooling.fresh_reports import fresh_reports

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "simt_and_warps.md"
KERNEL_DIR = ROOT / "kernels" / "cuda" / "simt_and_warps"
ARCHS = ["sm_75", "sm_90"]
BALLAST = [0, 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224]  # register_ballast.cu's R

KERNELS = {
    "branch_paths.cu": ["branch_paths"],
    "short_branch.cu": ["short_branch", "long_branch"],
    "block_sum.cu": ["block_sum_unsafe_tail", "block_sum_syncwarp", "block_sum_shfl"],
    "warp_ops.cu": ["warp_allreduce", "warp_votes"],
    "latency_copy.cu": ["copy_one_in_flight", "copy_four_in_flight"],
    "register_ballast.cu": [f"copy_with_ballast<{r}>" for r in BALLAST],  # template instantiations
}

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


def compiled(filename: str, arch: str):
    """The file compiled for ``arch``, with every template instantiation its name_expressions list."""
    path = f"simt_and_warps/{filename}"
    code = source(path)
    return compile_cuda(code, arch, (), name_expressions_in(code), filename=path).raise_for_errors()


def ptx_body(filename: str, kernel: str) -> str:
    ptx = compiled(filename, "compute_75").ptx
    return ptx.split(f".entry {kernel}(")[1].split(".entry")[0]


def test_every_kernel_file_is_listed():
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cu")) == sorted(KERNELS)


@pytest.fixture(scope="module")
def spill_reports():
    """Compared exactly, so compiled in fresh processes (tooling.fresh_reports says why)."""
    return fresh_reports([f"simt_and_warps/{f}" for f in sorted(KERNELS)], ARCHS)


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_compiles(filename, arch, spill_reports):
    assert compiled(filename, arch).cubin
    resources = spill_reports[(f"simt_and_warps/{filename}", arch)]
    assert sorted(resources) == sorted(KERNELS[filename])
    for report in resources.values():
        assert report.stack_frame_bytes == 0 and not report.spills, report


def test_ballast_instantiations_are_the_listed_ones():
    code = source("simt_and_warps/register_ballast.cu")
    assert list(name_expressions_in(code)) == KERNELS["register_ballast.cu"]
    chapter = re.search(r"^BALLAST = \[([^\]]*)\]", _chapter_text(), flags=re.M)
    assert chapter and [int(v) for v in chapter.group(1).split(",")] == BALLAST


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_ballast_dials_registers(arch):
    """More ballast never means fewer registers, and the largest comes close to the 255 limit: R
    really sets the registers per thread, and so the occupancy (test_compiles checks that nothing spills)."""
    resources = compiled("register_ballast.cu", arch).resources
    registers = [resources[f"copy_with_ballast<{r}>"].registers for r in BALLAST]
    assert registers == sorted(registers), registers
    assert registers[-1] >= 200 and registers[-1] <= 255, registers
    assert registers[0] < 40, registers
    for r, regs in zip(BALLAST, registers):
        assert regs >= r, (r, regs)  # all R ballast values are held at once


@needs_nvrtc
def test_warp_instructions_are_there():
    assert "bar.warp.sync" in ptx_body("block_sum.cu", "block_sum_syncwarp")
    assert "bar.warp.sync" not in ptx_body("block_sum.cu", "block_sum_unsafe_tail")
    assert "shfl.sync.down" in ptx_body("block_sum.cu", "block_sum_shfl")
    assert "shfl.sync.bfly" in ptx_body("warp_ops.cu", "warp_allreduce")
    votes = ptx_body("warp_ops.cu", "warp_votes")
    assert "vote.sync.ballot" in votes and "popc" in votes
    assert "vote.sync.any" in votes and "vote.sync.all" in votes


@needs_nvrtc
def test_short_branch_is_a_select_and_long_branch_branches():
    short = ptx_body("short_branch.cu", "short_branch")
    assert "selp" in short and len(re.findall(r"\bbra\b", short)) == 1  # only the bounds check
    assert len(re.findall(r"\bbra\b", ptx_body("short_branch.cu", "long_branch"))) > 2


@needs_nvrtc
def test_branch_paths_keeps_four_distinct_loops():
    body = ptx_body("branch_paths.cu", "branch_paths")
    constants = set(re.findall(r"fma\.rn\.f32\s+%f\d+, %f\d+, (0f[0-9A-F]{8}), (0f[0-9A-F]{8})", body))
    assert len(constants) == 4


def test_unsafe_tail_has_no_synchronisation():
    code = re.sub(r"//[^\n]*", "", source("simt_and_warps/block_sum.cu"))  # code, not comments
    tail = code.split("block_sum_unsafe_tail")[1].split("block_sum_syncwarp")[0]
    assert "__syncwarp" not in tail.split("if (t < 16)")[1] and "volatile" not in tail


# --------------------------------------------------------------------------- chapter structure


def _chapter_text() -> str:
    return CHAPTER.read_text(encoding="utf-8")


def _chapter_cells() -> list[str]:
    import jupytext

    return [c.source for c in jupytext.read(CHAPTER).cells if c.cell_type == "code"]


def test_every_kernel_is_loaded_and_shown():
    text = _chapter_text()
    for filename, names in KERNELS.items():
        assert f'simt_and_warps/{filename}"' in text
        for name in names:
            if "<" in name:  # a template, loaded as f"copy_with_ballast<{R}>" for every R in BALLAST
                assert f'"{name.split("<")[0]}<{{R}}>"' in text, name
            elif name not in ("short_branch", "long_branch"):  # these two are read as PTX/SASS, not run
                assert f'"{name}"' in text, name


# --------------------------------------------------------------------------- references


def _gpu_test_module():
    """The kernel tests' references (tests/kernel_checks/, run on the CPU backend and on GPUs)."""
    directory = ROOT / "tests" / "kernel_checks"
    spec = importlib.util.spec_from_file_location("simt_and_warps_kernels", directory / "test_simt_and_warps_kernels.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(directory))  # for its `from kernel_backends import ...`
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(directory))
    return module


def _chapter_functions(names: set[str]) -> dict:
    namespace: dict = {"np": np, "A": np.array([0.75, 0.5, -0.625, 0.875]),
                       "B": np.array([0.25, -0.125, 0.5, -0.375])}
    for cell in _chapter_cells():
        for node in ast.parse(cell).body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                exec(compile(ast.Module([node], []), str(CHAPTER), "exec"), namespace)
    assert names <= set(namespace), names - set(namespace)
    return namespace


REFERENCES = {"branch_reference", "block_sums_reference", "warp_sums_reference", "votes_reference"}


def _sources():
    return [vars(_gpu_test_module()), _chapter_functions(REFERENCES)]


def loop_branch(x, pattern, work, block):
    a = [0.75, 0.5, -0.625, 0.875]
    b = [0.25, -0.125, 0.5, -0.375]
    out = []
    for i, v in enumerate(x):
        t = i % block
        path = [0, (t // 32) % 2, (t // 32) % 4, t % 2, t % 4, 0 if v > 0 else 1][pattern]
        for _ in range(work):
            v = v * a[path] + b[path]
        out.append(v)
    return np.array(out)


@pytest.mark.parametrize("origin", [0, 1], ids=["gpu tests", "chapter"])
def test_references_match_loops(origin):
    ref = _sources()[origin]
    rng = np.random.default_rng(1)
    for n in (1, 37, 300):
        x = rng.uniform(-1, 1, n)
        for pattern in range(6):
            assert np.allclose(ref["branch_reference"](x, n, pattern, 5, 64), loop_branch(x, pattern, 5, 64))
        xi = rng.integers(-100, 101, n)
        for grid, block in ((1, 32), (3, 64), (5, 32)):
            want = [sum(int(xi[i]) for i in range(n) if (i // block) % grid == b) for b in range(grid)]
            assert list(ref["block_sums_reference"](xi, n, grid, block)) == want
        want = [sum(x[(i // 32) * 32: min(n, (i // 32) * 32 + 32)]) for i in range(n)]
        assert np.allclose(ref["warp_sums_reference"](x, n), want)
        votes = ref["votes_reference"](x, n)
        for w in range(-(-n // 32)):
            lanes = [i < n and x[i] > 0 for i in range(32 * w, 32 * w + 32)]
            assert votes["ballot"][w] == sum(1 << l for l, p in enumerate(lanes) if p)
            assert votes["count"][w] == sum(lanes)
            assert votes["any"][w] == int(any(lanes)) and votes["all"][w] == int(all(lanes))


# --------------------------------------------------------------------------- helpers


def test_warp_of():
    assert simt.warp_of(0) == (0, 0)
    assert simt.warp_of(37, block=(64,)) == (1, 5)
    assert simt.warp_of(7, 1, 0, (24, 4)) == (0, 31)
    assert simt.warp_of(8, 1, 0, (24, 4)) == (1, 0)
    assert simt.warp_of(5, 0, 1, (8, 4, 2)) == (1, 5)
    with pytest.raises(ValueError):
        simt.warp_of(24, 0, 0, (24, 4))


@pytest.mark.parametrize("warps,latency,compute", [(1, 20, 3), (3, 20, 3), (6, 20, 3), (2, 80, 9), (16, 400, 3)])
def test_scheduler_model_follows_its_closed_form(warps, latency, compute):
    run = simt.simulate_scheduler(warps, latency, compute, cycles=6000)
    assert run.utilization == pytest.approx(simt.issue_utilization(warps, latency, compute), abs=0.02)
    assert ((run.states == 2).sum(axis=0) <= 1).all()  # one issue per cycle


def test_scheduler_stops_after_loads():
    run = simt.simulate_scheduler(2, 5, 2, cycles=200, loads=3)
    assert run.issued == 2 * (3 * 3 + 2)
    assert (run.states[:, -1] == 3).all()


def test_figures_build():
    assert simt.warp_layout().axes
    assert simt.scheduler_timeline().axes


def test_occupancy_dials_plots_measured_points_only():
    shared = [{"warps_per_sm": w, "loads_in_flight": 1, "GB/s": 35.0 * w} for w in (8, 16, 32, 64)]
    shared.append({"warps_per_sm": 128, "loads_in_flight": 1, "note": "ValueError: too many warps"})
    registers = [{"R": 0, "registers/thread": 30, "warps/SM": 64, "GB/s": 2300.0},
                 {"R": 8, "registers/thread": 32, "warps/SM": 64, "GB/s": 2290.0},
                 {"R": 224, "registers/thread": 248, "warps/SM": 8, "GB/s": 617.0},
                 {"R": 256, "note": "RuntimeError: no such kernel"}]
    fig = simt.occupancy_dials(shared, registers, ceiling=2980.0)
    ax = fig.axes[0]
    line, points = ax.lines[0], ax.lines[1]
    assert list(line.get_xdata()) == [8, 16, 32, 64]
    assert sorted(points.get_xdata()) == [8, 64, 64]
    labels = sorted(t.get_text() for t in ax.texts)
    assert "30-32 regs" in labels and "248 regs" in labels
    assert simt.occupancy_dials([], []).axes  # nothing measured: an empty figure, no error
