"""CPU tests of the "Scan" chapter: every kernel compiles for the T4 (sm_75) and the H100 (sm_90)
with NVRTC, without spills, and contains the instructions the chapter says it does; the chapter uses
every kernel (what every chapter promises: tests/test_chapter_contract.py); the NumPy references,
the step-by-step scan models, the work/depth counts, the bank-conflict counts and the float error
bound of kernels/chapters/scan/__init__.py are right.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from kernels.chapters import scan as sc
from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.sources import source
from tooling.fresh_reports import fresh_reports

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "scan.md"
KERNEL_DIR = ROOT / "kernels" / "cuda" / "scan"
ARCHS = ["sm_75", "sm_90"]

SINGLE_PASS = [f"single_pass_scan<int, {t}, {i}>" for t in (128, 256, 512) for i in (4, 8, 16)]
SINGLE_PASS_V2 = [f"single_pass_scan_v2<int, {t}, {i}>" for t, i in sc.SINGLE_PASS_V2_CONFIGS]
BACKOFF = [f"single_pass_scan_backoff<int, {t}, {i}, {w}, {p}>" for t, i, w, p in sc.SINGLE_PASS_BACKOFF_CONFIGS]
KERNELS = {
    "basic_scans.cu": ["hillis_steele_scan", "blelloch_scan_float_temp", "blelloch_scan",
                       "blelloch_scan_padded", "block_scan_shfl"],
    "large_scan.cu": ["tile_scan", "add_tile_offsets", "single_pass_scan<float, 256, 8>", *SINGLE_PASS,
                      *SINGLE_PASS_V2, *BACKOFF],
    "compact.cu": ["flag_positive", "scatter_kept"],
    "radix_sort.cu": ["radix_tile_counts", "radix_scatter"],
}

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


def name_expressions(code: str) -> tuple[str, ...]:
    found = []
    for line in re.findall(r"^\s*//\s*name_expressions\s*:\s*(.+?)\s*$", code, flags=re.M):
        found += [e.strip() + ("" if e.strip().endswith(">") else ">") for e in line.split(">,")]
    return tuple(found)


def compiled(filename: str, arch: str):
    path = f"scan/{filename}"
    code = source(path)
    return compile_cuda(code, arch, name_expressions=name_expressions(code), filename=path).raise_for_errors()


def ptx_of(filename: str) -> str:
    return compiled(filename, "compute_75").ptx


def test_every_kernel_file_is_listed():
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cu")) == sorted(KERNELS)
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cuh")) == ["scan_common.cuh"]


def test_name_expressions_cover_the_sweep():
    assert set(name_expressions(source("scan/large_scan.cu"))) == {
        "single_pass_scan<float, 256, 8>", *SINGLE_PASS, *SINGLE_PASS_V2, *BACKOFF}


@pytest.fixture(scope="module")
def reports():
    """{(filename, arch): {kernel: report}}, compiled in fresh processes: exact "no spills" checks
    would otherwise depend on what the test process compiled before (tooling.fresh_reports says why)."""
    found = {}
    for filename in sorted(KERNELS):
        path = f"scan/{filename}"
        for (_, arch), resources in fresh_reports([path], ARCHS, name_expressions(source(path))).items():
            found[(filename, arch)] = resources
    return found


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
    basic = ptx_of("basic_scans.cu")
    assert "shfl.sync.up" in basic                          # warp scan
    assert "cvt.rn.f32.s32" in basic                        # the float temporary of the buggy kernel
    large = ptx_of("large_scan.cu")
    assert "atom.global.add.u64" in large                   # dynamic tile index
    assert "membar.gl" in large or "fence" in large          # __threadfence before publishing
    assert "st.volatile.global.u64" in large                # flag and value: one 64-bit store
    assert "ld.volatile.global.u64" in large
    assert "vote.sync.any" in large and "vote.sync.ballot" in large
    assert "ld.global.nc.v4" in large or "ld.global.v4" in large   # 16-byte loads
    sort = ptx_of("radix_sort.cu")
    assert "vote.sync.ballot" in sort and "popc" in sort


# --------------------------------------------------------------------------- chapter structure


def _chapter_text() -> str:
    return CHAPTER.read_text(encoding="utf-8")


def test_every_kernel_is_used():
    text = _chapter_text() + (ROOT / "kernels" / "chapters" / "scan" / "__init__.py").read_text(encoding="utf-8")
    for filename, names in KERNELS.items():
        assert f"scan/{filename}" in text
        for name in names:
            base = name.split("<")[0]
            assert f'"{base}' in text or f"{base}<" in text, name


def test_has_a_sweep_and_the_reference_routines():
    text = _chapter_text()
    assert "Sweep(" in text and ".show()" in text
    assert "cp.cumsum" in text and "set_routine_accelerators" in text and "cp.sort" in text
    assert "ceil.copy_gbps" in text


# --------------------------------------------------------------------------- pure helpers


def loop_inclusive(x):
    out, s = [], 0
    for v in x:
        s += int(v)
        out.append(s)
    return out


@pytest.mark.parametrize("n", [1, 2, 7, 8, 100])
def test_scan_references_match_loops(n):
    x = np.random.default_rng(n).integers(-50, 50, n)
    assert list(sc.inclusive_scan(x)) == loop_inclusive(x)
    assert list(sc.exclusive_scan(x)) == [0] + loop_inclusive(x)[:-1]


def test_int32_wraps_like_the_gpu():
    x = np.array([2**31 - 1, 1, 1], dtype=np.int64)
    assert list(sc.inclusive_scan(x)) == [2**31 - 1, -2**31, -2**31 + 1]


def test_tile_scans():
    x = np.arange(1, 8)
    y, sums = sc.tile_scans(x, 3, exclusive=True)
    assert list(y) == [0, 1, 3, 0, 4, 9, 0] and list(sums) == [6, 15, 7]
    y, sums = sc.tile_scans(x, 3, exclusive=False)
    assert list(y) == [1, 3, 6, 4, 9, 15, 7]


def test_notes_example():
    x = [3, 1, 7, 0, 4, 1, 6, 3]
    assert list(sc.hillis_steele_steps(x)[-1]) == [3, 4, 11, 11, 15, 16, 22, 25]
    assert list(sc.blelloch_steps(x)[-1][1]) == [0, 3, 4, 11, 11, 15, 16, 22]


@pytest.mark.parametrize("n", [1, 2, 4, 16, 64])
def test_models_agree_with_cumsum(n):
    x = np.random.default_rng(n).integers(0, 100, n)
    assert np.array_equal(sc.hillis_steele_steps(x)[-1], np.cumsum(x))
    assert np.array_equal(sc.blelloch_steps(x)[-1][1], np.cumsum(x) - x)
    assert len(sc.hillis_steele_steps(x)) - 1 == sc.work_depth(n)["Hillis-Steele"][1]


def test_blelloch_model_rejects_non_powers_of_two():
    with pytest.raises(ValueError):
        sc.blelloch_steps([1, 2, 3])


def test_work_depth_counts_additions():
    assert sc.work_depth(8) == {"sequential": (7, 7), "Hillis-Steele": (17, 3), "Blelloch": (14, 6)}
    for n in (16, 1024):
        adds, steps = sc.work_depth(n)["Hillis-Steele"]
        assert adds == n * int(np.log2(n)) - (n - 1)


def test_next_pow2():
    assert [sc.next_pow2(n) for n in (0, 1, 2, 3, 1000, 1024, 1025)] == [1, 1, 2, 4, 1024, 1024, 2048]


def test_bank_conflicts():
    assert sc.bank_conflict_ways(np.arange(32)) == 1
    assert sc.bank_conflict_ways(np.arange(32) * 32) == 32
    assert sc.bank_conflict_ways(np.zeros(32, dtype=int)) == 1          # one word: a broadcast
    plain = dict(sc.blelloch_upsweep_conflicts(2048, padded=False))
    padded = dict(sc.blelloch_upsweep_conflicts(2048, padded=True))
    assert plain[1] == 2 and plain[16] == 32 and plain[32] == 32
    assert max(padded.values()) <= 2


def test_float_tolerance_grows_with_tiles():
    small, large = sc.float_scan_tolerance(100, 256, 8), sc.float_scan_tolerance(10**7, 256, 8)
    assert 0 < small < 1e-5 < large < 1e-2
    m = 8 + 12 + 2 * 5  # 5 tiles of 2048
    assert sc.float_scan_tolerance(5 * 2048, 256, 8) == pytest.approx(m * 2**-24 / (1 - m * 2**-24))


def test_float_tolerance_holds_for_a_tree_order():
    """A float32 sum in a different order stays within the bound (a CPU stand-in for the kernel)."""
    rng = np.random.default_rng(0)
    x = rng.random(50_000).astype(np.float32)
    tiles = x.reshape(-1, 2000)                       # 25 tiles: per-tile pairwise sums, then a chain
    total = np.float32(0)
    for t in tiles:
        total = np.float32(total + np.float32(np.sum(t, dtype=np.float32)))
    exact = np.sum(x.astype(np.float64))
    assert abs(float(total) - exact) <= sc.float_scan_tolerance(50_000, 250, 8) * exact


def test_compact_reference():
    out, kept = sc.compact_positive(np.array([3, -1, 0, 5, 2]), fill=-9)
    assert kept == 3 and list(out) == [3, 5, 2, -9, -9]


def test_figure_builds():
    import matplotlib

    matplotlib.use("Agg")
    fig = sc.scan_networks(8)
    assert len(fig.axes) == 2
