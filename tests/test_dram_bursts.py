"""CPU tests of the "DRAM bursts" chapter: its kernels compile for the T4 (sm_75) and the H100 (sm_90)
with NVRTC and keep the properties the chapter relies on, its helpers compute what the prose says,
its figures draw, and the chapter loads only its own kernels (what every chapter promises:
tests/test_chapter_contract.py).
"""
from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from kernels.chapters.dram_bursts import diagrams as dd  # noqa: E402
from kernels.nvrtc import compile_cuda, nvrtc_available  # noqa: E402
from kernels.sources import name_expressions_in, source  # noqa: E402
from tooling.fresh_reports import fresh_reports  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "dram_bursts.md"
KERNEL_DIR = ROOT / "kernels" / "cuda" / "dram_bursts"
ARCHS = ["sm_75", "sm_90"]
TYPES = ["unsigned char", "unsigned short", "float", "float2", "float4"]
LOADS = [1, 2, 4, 8]
BATCHED = [f"copy_batched<{t}, {k}>" for t in TYPES for k in LOADS]

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


def compiled(filename: str, arch: str):
    path = f"dram_bursts/{filename}"
    code = source(path)
    return compile_cuda(code, arch, (), name_expressions_in(code), filename=path).raise_for_errors()


def code_cells(path: Path = CHAPTER) -> list[str]:
    import jupytext

    return [cell.source for cell in jupytext.read(path).cells if cell.cell_type == "code"]


# ------------------------------------------------------------------------------------ kernels

def test_every_kernel_file_is_listed():
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cu")) == ["copy_batched.cu", "copy_vec4.cu"]


def test_every_measured_instantiation_is_declared():
    assert set(BATCHED) <= set(name_expressions_in(source("dram_bursts/copy_batched.cu")))


@pytest.fixture(scope="module")
def spill_reports():
    """Compared exactly, so compiled in fresh processes (tooling.fresh_reports says why)."""
    return fresh_reports(["dram_bursts/copy_batched.cu", "dram_bursts/copy_vec4.cu"], ARCHS)


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_copy_batched_compiles_without_local_memory(arch, spill_reports):
    resources = spill_reports[("dram_bursts/copy_batched.cu", arch)]
    assert set(BATCHED) <= set(resources)
    for name in BATCHED:
        r = resources[name]
        assert r.stack_frame_bytes == 0 and not r.spills, r   # v[K] stays in registers


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_copy_vec4_compiles(arch, spill_reports):
    r = spill_reports[("dram_bursts/copy_vec4.cu", arch)]["copy_vec4"]
    assert r.stack_frame_bytes == 0 and not r.spills


@needs_nvrtc
@pytest.mark.parametrize("k", LOADS)
def test_batched_loads_come_before_the_stores(k):
    """The chapter's claim: K independent loads are issued before the first store uses one."""
    code = source("dram_bursts/copy_batched.cu")
    ptx = compile_cuda(code, "sm_90", (), (f"copy_batched<float, {k}>",), filename="x.cu").ptx
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    ops = [m.group(1) for m in re.finditer(r"\b(ld\.global|st\.global)", ptx)]
    assert ops.count("ld.global") == k and ops.count("st.global") == k
    assert ops == ["ld.global"] * k + ["st.global"] * k


@needs_nvrtc
def test_copy_vec4_uses_16_byte_accesses():
    code = source("dram_bursts/copy_vec4.cu")
    ptx = compile_cuda(code, "sm_90", filename="x.cu").ptx
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert re.search(r"ld\.global(\.\w+)*\.v4\.(f32|u32|b32)", ptx)
    assert re.search(r"st\.global(\.\w+)*\.v4\.(f32|u32|b32)", ptx)


# ------------------------------------------------------------------------------------ helpers

@pytest.mark.parametrize("start,width,sectors,lines", [
    (0, 4, 4, 1), (4, 4, 5, 2), (0, 1, 1, 1), (0, 16, 16, 4), (0, 2, 2, 1), (0, 8, 8, 2),
    (96, 1, 1, 1), (100, 1, 2, 2), (128, 4, 4, 1),
])
def test_sectors_and_lines(start, width, sectors, lines):
    assert len(dd.sectors_touched(start, width)) == sectors
    assert len(dd.lines_touched(start, width)) == lines


def test_sectors_by_brute_force():
    for start in range(0, 300, 4):
        for width in (1, 2, 4, 8, 16):
            expected = sorted({b // 32 for t in range(32) for b in range(start + t * width, start + (t + 1) * width)})
            assert dd.sectors_touched(start, width) == expected


def test_helpers_reject_nonsense():
    with pytest.raises(ValueError):
        dd.sectors_touched(-1, 4)
    with pytest.raises(ValueError):
        dd.sectors_touched(0, 0)
    with pytest.raises(ValueError):
        dd.littles_law_gbps(1024, 132, 0)
    with pytest.raises(ValueError):
        dd.implied_latency_ns(0, 1024, 132)


def test_littles_law_numbers_in_the_prose():
    # H100 at 3350 GB/s and 600 ns: about 15 KiB per SM and 7 bytes per resident thread.
    per_sm = dd.bytes_in_flight_needed(3350, 600) / 132
    assert 14.5 < per_sm / 1024 < 15.5 and 7 < per_sm / 2048 < 8
    # T4 at 320 GB/s: about 5 KiB per SM and 5 bytes per thread.
    per_sm = dd.bytes_in_flight_needed(320, 600) / 40
    assert 4.5 < per_sm / 1024 < 5          # KiB per SM
    assert 4.5 < per_sm / 1024 < 5          # bytes per thread: a T4 SM holds 1024 threads
    # T4 datasheet arithmetic: 2 x 5001 MHz x 256 bits / 8 = 320 GB/s = 10 Gb/s per pin.
    assert round(2 * 5.001e9 * 256 / 8 / 1e9) == 320
    # H100 SXM5: 3.35 TB/s over 5120 bits is about 5.2 Gb/s per pin.
    assert round(3.35e12 * 8 / 5120 / 1e9, 1) == 5.2


def test_littles_law_round_trip_and_cap():
    bw = dd.littles_law_gbps(8192, 132, 700)
    assert dd.implied_latency_ns(bw, 8192, 132) == pytest.approx(700)
    assert dd.littles_law_gbps(1 << 20, 132, 700, ceiling_gbps=3000) == 3000
    assert dd.littles_law_gbps(1024, 10, 100, copy=False) == pytest.approx(102.4)


@pytest.mark.parametrize("name", ["dram_bank_figure", "warp_sectors_figure"])
def test_figures(name, tmp_path):
    before = set(plt.get_fignums())
    fig = getattr(dd, name)()
    assert isinstance(fig, Figure) and fig.axes
    assert set(plt.get_fignums()) == before
    fig.savefig(tmp_path / "f.png", dpi=40)
    assert (tmp_path / "f.png").stat().st_size > 1000


# ------------------------------------------------------------------------------------ the chapter

def test_chapter_loads_only_its_own_kernels_by_path():
    paths = set(re.findall(r'"(dram_bursts/[\w.]+\.cu)"', "\n".join(code_cells())))
    assert paths == {"dram_bursts/copy_batched.cu", "dram_bursts/copy_vec4.cu"}


def test_chapter_sweeps_are_small():
    """Keep the notebook's GPU time low: benchmarks in the chapter use few repetitions."""
    text = "\n".join(code_cells())
    for m in re.finditer(r"benchmark\(([^\n]*)", text):
        assert "repeat=10" in m.group(1), m.group(0)
