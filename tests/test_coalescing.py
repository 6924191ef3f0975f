"""CPU tests of the "Coalescing" chapter: every kernel compiles for the T4 (sm_75) and the H100 (sm_90)
with NVRTC, without local memory; the chapter loads kernels that exist (what every chapter promises:
tests/test_chapter_contract.py); and the sector and bank counting helpers in kernels/chapters/coalescing/diagrams.py give the textbook answers.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernels.chapters.coalescing import MAX_GRID_Y, strip_launch
from kernels.chapters.coalescing import diagrams as dc
from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.sources import name_expressions_in, source
from tooling.fresh_reports import fresh_reports_by_file

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "coalescing.md"
KERNEL_DIR = ROOT / "kernels" / "cuda" / "coalescing"
ARCHS = ["sm_75", "sm_90"]
TILED = [f"transpose_tiled<{t}, {r}, {p}>" for t, r, p in [
    (32, 8, 0), (32, 8, 1), (16, 4, 1), (16, 8, 1), (16, 16, 1), (32, 4, 1), (32, 16, 1), (32, 32, 1),
    (64, 4, 1), (64, 8, 1), (64, 16, 1), (16, 2, 1), (16, 1, 1), (32, 2, 1)]]
# (T, S, R) instantiated of each strip kernel of transpose_stores.cu: the chapter's, and its twin tuned for
# the H200 (16-byte moves, batched loads, a register budget for 2048 resident threads)
STRIPS = {"transpose_aligned_strip": [(32, 256, 16), (32, 128, 8)],
          "transpose_aligned_strip_vec4": [(32, 128, 16), (32, 64, 8)]}

KERNELS = {
    "access_patterns.cu": ["copy_strided", "copy_offset"],
    "aos_soa.cu": ["scale_x_aos", "scale_x_soa"],
    "matmul_naive.cu": ["matmul_naive", "matmul_swapped"],
    "transpose.cu": ["copy_tiled", "transpose_naive", *TILED],
    "transpose_stores.cu": [f"transpose_store_pattern<{t}, 8>" for t in (32, 64)]
                           + [f"{name}<{t}, {s}, {r}>" for name, shapes in STRIPS.items() for t, s, r in shapes],
    "gemv.cu": ["gemv_thread_per_row", "gemv_warp_per_row"],
    "read_modify_write.cu": ["add_one_offset", "add_one_strided"],
}

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


def compiled(filename: str, arch: str):
    path = f"coalescing/{filename}"
    code = source(path)
    return compile_cuda(code, arch, (), name_expressions_in(code), filename=path).raise_for_errors()


@pytest.fixture(scope="module")
def reports():
    """{(filename, arch): {kernel: report}}, compiled in fresh processes: in a process that has
    already compiled a file (CuPy does, on a GPU) NVRTC may skip ptxas and leave no report
    (tooling.fresh_reports and kernels.nvrtc say more)."""
    return fresh_reports_by_file("coalescing", sorted(KERNELS), ARCHS)


# --------------------------------------------------------------------------- kernels


def test_every_kernel_file_is_listed():
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cu")) == sorted(KERNELS)


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_compiles_without_local_memory(filename, arch, reports):
    assert compiled(filename, arch).cubin
    resources = reports[(filename, arch)]
    assert sorted(resources) == sorted(KERNELS[filename])
    for name, report in resources.items():
        assert report.stack_frame_bytes == 0 and not report.spills, (name, report)


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_padded_tile_uses_the_shared_memory_it_declares(arch, reports):
    r = reports[("transpose.cu", arch)]
    assert r["transpose_tiled<32, 8, 0>"].shared_bytes == 32 * 32 * 4
    assert r["transpose_tiled<32, 8, 1>"].shared_bytes == 32 * 33 * 4
    assert r["transpose_tiled<64, 16, 1>"].shared_bytes == 64 * 65 * 4
    assert r["copy_tiled"].shared_bytes == 0 and r["transpose_naive"].shared_bytes == 0


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_aligned_strip_has_eight_halo_rows(arch, reports):
    """tile[S + 8][T + 1]: (256 + 8) x 33 x 4 = 34848 bytes for the chapter's <32, 256, 16>, under the
    48 KB of static shared memory a block may declare (so it also runs on a T4)."""
    r = reports[("transpose_stores.cu", arch)]
    for name, shapes in STRIPS.items():
        for t, s, rows_per_pass in shapes:
            shared = r[f"{name}<{t}, {s}, {rows_per_pass}>"].shared_bytes
            assert shared == (s + 8) * (t + 1) * 4, name
            assert shared <= 48 * 1024
    assert r["transpose_aligned_strip<32, 256, 16>"].shared_bytes == 34848
    assert r["transpose_store_pattern<32, 8>"].shared_bytes == 0


@needs_nvrtc
@pytest.mark.parametrize("tile, strip, rows_per_pass", STRIPS["transpose_aligned_strip_vec4"])
def test_vec4_strip_keeps_2048_threads_per_sm_in_registers(tile, strip, rows_per_pass, reports):
    """Its __launch_bounds__ asks for 2048 / (T * R) blocks per SM: at most 32 registers a thread on
    sm_90 (65536 per SM), without spilling its batched loads (measured on an H200: <32, 128, 16> at
    3 blocks per SM ran about 4 points of the copy slower than at 4)."""
    report = reports[("transpose_stores.cu", "sm_90")][f"transpose_aligned_strip_vec4<{tile}, {strip}, {rows_per_pass}>"]
    assert report.registers * 2048 <= 65536, report
    assert not report.spills and report.stack_frame_bytes == 0, report


@pytest.mark.parametrize("rows, cols, along_x", [
    (1000, 50000, 1),    # 4 strips, 1563 column blocks: strips along x
    (50000, 1000, 0),    # 196 strips, 32 column blocks: column blocks along x
    (8192, 8192, 1), (4097, 4095, 1), (16384, 512, 0), (1, 1, 0)])
def test_strip_launch_puts_the_smaller_count_along_x(rows, cols, along_x):
    launch = strip_launch(rows, cols)
    assert launch.strips == -(-(rows + 7) // 256) and launch.column_blocks == -(-cols // 32)
    assert launch.strips_along_x == along_x
    assert launch.grid == ((launch.strips, launch.column_blocks) if along_x
                           else (launch.column_blocks, launch.strips))
    assert launch.block == (32, 16)


def test_strip_launch_counts_the_extra_strip():
    """Windows shift left by up to 7 floats: 250 rows need 2 strips of 256, 249 need 1."""
    assert strip_launch(249, 64).strips == 1
    assert strip_launch(250, 64).strips == 2


def test_strip_launch_order_can_be_forced_and_respects_the_grid_limit():
    assert strip_launch(1000, 50000, strips_along_x=False).grid == (1563, 4)
    assert strip_launch(50000, 1000, strips_along_x=True).grid == (196, 32)
    many_cols = strip_launch(8, 32 * (MAX_GRID_Y + 10))        # 1 strip, more column blocks than y allows
    assert many_cols.grid == (MAX_GRID_Y + 10, 1) and many_cols.strips_along_x == 0
    with pytest.raises(ValueError, match="blocks along y"):
        strip_launch(8, 32 * (MAX_GRID_Y + 10), strips_along_x=True)


@pytest.mark.parametrize("kwargs, problem", [
    ({"rows": 0, "cols": 5}, "rows must be a positive integer"),
    ({"rows": 5, "cols": 2.5}, "cols must be a positive integer"),
    ({"rows": 5, "cols": 5, "tile": 48}, "multiples of 32"),
    ({"rows": 5, "cols": 5, "strip": 100}, "multiples of 32")])
def test_strip_launch_rejects_bad_shapes(kwargs, problem):
    with pytest.raises(ValueError, match=problem):
        strip_launch(**kwargs)


def test_no_vector_store_into_the_odd_pitch_tile():
    """The notes' bug: a float2 store into a pitch-65 tile is misaligned for odd rows."""
    code = source("coalescing/transpose.cu")
    assert "float2" not in code.split("template")[-1]
    assert "tile[T][T + PAD]" in code


def test_gemv_reduction_uses_the_full_mask():
    code = source("coalescing/gemv.cu")
    assert "__shfl_down_sync(0xffffffffu" in code


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize("stride, sectors, lines", [(1, 4, 1), (2, 8, 2), (3, 12, 3), (4, 16, 4),
                                                    (8, 32, 8), (16, 32, 16), (32, 32, 32)])
def test_sectors_per_stride(stride, sectors, lines):
    a = dc.warp_addresses(stride)
    assert len(dc.sectors_touched(a)) == sectors
    assert len(dc.lines_touched(a)) == lines


@pytest.mark.parametrize("offset, sectors", [(0, 4), (1, 5), (2, 5), (7, 5), (8, 4), (16, 4), (31, 5), (32, 4)])
def test_sectors_per_offset(offset, sectors):
    assert len(dc.sectors_touched(dc.warp_addresses(1, offset))) == sectors


def test_broadcast_and_wide_elements():
    assert len(dc.sectors_touched(dc.warp_addresses(0))) == 1
    # float4 per lane: 512 contiguous bytes, 16 sectors in 4 lines
    a = dc.warp_addresses(1, elem_bytes=16)
    assert len(dc.sectors_touched(a, elem_bytes=16)) == 16
    assert len(dc.lines_touched(a, elem_bytes=16)) == 4
    # an element that straddles a sector boundary touches both sectors
    assert dc.sectors_touched([30], elem_bytes=4) == [0, 1]


def test_copy_model():
    assert dc.copy_model_fraction(4) == pytest.approx(1.0)
    assert dc.copy_model_fraction(8) == pytest.approx(2 / 3)
    assert dc.copy_model_fraction(32) == pytest.approx(2 / 9)
    assert dc.copy_model_fraction(16) == pytest.approx(0.4)   # AoS with 16-byte structs
    with pytest.raises(ValueError):
        dc.copy_model_fraction(0)
    with pytest.raises(ValueError):
        dc.warp_addresses(-1)


def test_bank_conflicts_of_tile_columns():
    assert dc.bank_conflict_ways(dc.tile_column_words(32, 0)) == 32
    assert dc.bank_conflict_ways(dc.tile_column_words(32, 1)) == 1
    assert dc.bank_conflict_ways(dc.tile_column_words(32, 2)) == 2     # the even pitch that would fix float2
    # tile 16: a warp reads two columns; lane 15 of one and lane 0 of the next share a bank
    assert dc.bank_conflict_ways(dc.tile_column_words(16, 1)) == 2
    assert dc.bank_conflict_ways(dc.tile_column_words(16, 0)) == 8
    assert dc.bank_conflict_ways(dc.tile_column_words(64, 1)) == 1
    assert dc.bank_conflict_ways([5] * 32) == 1                        # same word: a broadcast
    assert dc.bank_conflict_ways(list(range(32))) == 1


def test_figures_draw_without_a_gpu():
    from matplotlib.figure import Figure

    assert isinstance(dc.warp_sectors_figure(), Figure)
    assert isinstance(dc.matmul_access_figure(), Figure)


# --------------------------------------------------------------------------- the chapter


def test_chapter_kernels_exist():
    text = CHAPTER.read_text()
    calls = re.findall(r'load_kernel\("coalescing/([\w.]+)", "([^"]+)"\)', text)
    assert calls
    for filename, name in calls:
        assert name in KERNELS[filename], (filename, name)
    for filename in re.findall(r'show_source\("coalescing/([\w.]+)"\)', text):
        assert filename in KERNELS
    for name in ("matmul_naive", "matmul_swapped"):
        assert f'"{name}"' in text
