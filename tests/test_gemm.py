"""CPU tests of the "GEMM" chapter: its kernels compile for the T4 (sm_75) and the H100 (sm_90) with
NVRTC, without spills, and contain the instructions the chapter says they contain; the helpers of
kernels.chapters.gemm (counts, tolerances, rounding, configuration rules, launch geometry, the models of the
shared-memory index maps and of the block order) are right, checked against brute force; a sweep
marks invalid and spilling configurations; the chapter shows every kernel and a live sweep (what
every chapter promises: tests/test_chapter_contract.py).
"""
from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from kernels.chapters import gemm as g
from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.occupancy import GpuLimits
from kernels.signature import find_functions
from kernels.sources import name_expressions_in, source
from tooling.cuda_snippets import min_arch_in
from tooling.fresh_reports import fresh_reports

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "gemm.md"
KERNEL_DIR = ROOT / "kernels" / "cuda" / "gemm"
ARCHS = ["sm_75", "sm_90"]
KERNEL_FILES = ["double_buffered.cu", "double_buffered_cp_async.cu", "im2col.cu", "register_tiled.cu",
                "smem_tiled.cu", "split_k.cu", "vectorized.cu", "warp_pipelined.cu", "warp_tiled.cu", "wmma.cu",
                "wmma_cp_async.cu", "wmma_pipelined.cu"]
# Rungs added after the chapter's code cells were written; the chapter is to show them next.
EMULATION = ROOT / "tests" / "emulation"
HEADERS = ["cp_async.cuh", "gemm_common.cuh", "simt_tiles.cuh", "wmma_ptx.cuh", "wmma_tiles.cuh"]
T4, H100 = GpuLimits.for_compute_capability("7.5"), GpuLimits.for_compute_capability("9.0")

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


def test_every_file_is_listed():
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cu")) == KERNEL_FILES
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cuh")) == HEADERS


def test_families_point_at_real_kernels():
    for fam in g.FAMILIES.values():
        code = source(fam.path)
        assert re.search(rf"\b{fam.name}\s*\(", code), fam.key
        spans = [f for f in find_functions(code) if f.name == fam.name]
        assert len(spans) == 1, fam.key
        # the template parameters, in the order the family passes them
        assert [name for name, _ in spans[0].template_params] == list(fam.params), fam.key


def _builds_for(filename: str, arch: str) -> bool:
    minimum = min_arch_in(source(f"gemm/{filename}"))
    return not minimum or int(minimum[3:]) <= int(arch[3:])


@pytest.fixture(scope="module")
def spill_reports() -> dict[tuple[str, str], dict]:
    """Compared exactly, so compiled in fresh processes (tooling.fresh_reports says why)."""
    return fresh_reports([f"gemm/{f}" for f in KERNEL_FILES], ARCHS,
                         builds=lambda path, arch: _builds_for(path.removeprefix("gemm/"), arch))


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("filename", KERNEL_FILES)
def test_no_spills_and_no_stack(filename, arch, spill_reports):
    if not _builds_for(filename, arch):
        pytest.skip(f"{filename} needs {min_arch_in(source(f'gemm/{filename}'))}")
    reports = spill_reports[(f"gemm/{filename}", arch)]
    assert reports
    for name, report in reports.items():
        assert report.spill_store_bytes == 0 and report.spill_load_bytes == 0, (name, report)
        assert report.stack_frame_bytes == 0, (name, report)


@needs_nvrtc
def test_min_blocks_keeps_8x8_tiles_within_128_registers():
    # __launch_bounds__(256, min_blocks(256, 64)) = (256, 2): 65536 / (256 * 2) = 128 registers.
    expr = "gemm_double_buffered<128, 128, 16, 8, 8>"
    reports = fresh_reports(["gemm/double_buffered.cu"], ARCHS, name_expressions=[expr])
    for arch in ARCHS:
        report = reports[("gemm/double_buffered.cu", arch)][expr]
        assert report.registers <= 128
    # 8 x 16 outputs per thread get no cap: more than 128 registers, none spilled.
    expr = "gemm_warp_tiled<128, 256, 16, 64, 64, 8, 16>"
    report = fresh_reports(["gemm/warp_tiled.cu"], ["sm_90"], name_expressions=[expr])[
        ("gemm/warp_tiled.cu", "sm_90")][expr]
    assert report.registers > 128 and report.spill_store_bytes == 0


@needs_nvrtc
def test_resource_report_of_a_rung():
    """kernels.resource_report parses ptxas's log for a template instance (rung 3b)."""
    from kernels.resources import resource_report

    report = resource_report("gemm/register_tiled.cu", "gemm_2d", arch="sm_90",
                             name_expression="gemm_2d<128, 128, 8, 8, 8>")
    assert report.shared_bytes == 4 * 8 * (128 + 128)
    assert report.registers >= 64 + 16          # 64 accumulators, 8 + 8 operands
    assert report.spills is False


def _ptx(filename: str, expr: str, arch: str = "compute_80") -> str:
    return compile_cuda(source(f"gemm/{filename}"), arch, (), [expr], f"gemm/{filename}").raise_for_errors().ptx


@needs_nvrtc
def test_instructions_the_chapter_names():
    vec = _ptx("vectorized.cu", "gemm_vec4<128, 128, 8, 8, 8, 1, 2>", "compute_75")
    assert "ld.global.nc.v4.f32" in vec          # 16-byte global loads
    assert "ld.shared.v4.f32" in vec             # float4 reads of the tiles
    assert "st.global.v4.f32" in vec             # 16-byte stores of C
    assert "fma.rn.f32" in vec
    scalar = _ptx("register_tiled.cu", "gemm_2d<128, 128, 8, 8, 8>", "compute_75")
    assert "ld.global.nc.v4.f32" not in scalar and "ld.shared.v4.f32" not in scalar
    cp = _ptx("double_buffered_cp_async.cu", "gemm_cp_async<128, 128, 16, 8, 8, 3>")
    assert "cp.async.ca.shared.global" in cp and "cp.async.cg.shared.global" in cp
    assert "cp.async.wait_group 1" in cp and "cp.async.commit_group" in cp
    wmma = _ptx("wmma.cu", "gemm_wmma<128, 128, 32, 64, 32>", "compute_75")
    assert "wmma.mma.sync.aligned.row.row.m16n16k16.f32.f32" in wmma
    assert "wmma.load.a.sync.aligned.row.m16n16k16.shared.f16" in wmma
    wcp = _ptx("wmma_cp_async.cu", "gemm_wmma_cp_async<128, 256, 32, 64, 64, 4>")
    assert "cp.async.wait_group 2" in wcp
    wp = _ptx("wmma_pipelined.cu", "gemm_wmma_pipelined<128, 256, 32, 64, 64, 4>")
    assert "cp.async.wait_group 2" in wp and "wmma.store.d.sync.aligned.row.m16n16k16.global.f32" in wp
    assert "wmma.load.c.sync.aligned.row.m16n16k16.global.f32" in wp
    assert re.search(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16;", wp)   # unchecked copies
    pipe = _ptx("warp_pipelined.cu", "gemm_warp_pipelined<128, 128, 8, 32, 64, 8, 8, 2>", "compute_75")
    assert "ld.shared.v4.f32" in pipe and "ld.global.nc.v4.f32" in pipe and "cp.async" not in pipe


@needs_nvrtc
def test_pipelined_kernels_stay_within_their_register_budgets():
    """Rung 7b with BLOCKS = 2 fits two blocks of 256 threads per SM (128 registers, no spills);
    the tensor-core kernel with 64 x 64 warp tiles needs no spills either (sm_90). Compared exactly,
    so compiled in fresh processes (tooling.fresh_reports says why)."""
    expr = "gemm_warp_pipelined<128, 128, 8, 32, 64, 8, 8, 2>"
    report = fresh_reports(["gemm/warp_pipelined.cu"], ["sm_90"], name_expressions=[expr])[
        ("gemm/warp_pipelined.cu", "sm_90")][expr]
    assert report.registers <= 128 and report.spill_store_bytes == 0
    expr = "gemm_wmma_pipelined<128, 256, 32, 64, 64, 4>"
    report = fresh_reports(["gemm/wmma_pipelined.cu"], ["sm_90"], name_expressions=[expr])[
        ("gemm/wmma_pipelined.cu", "sm_90")][expr]
    assert report.spill_store_bytes == 0 and report.stack_frame_bytes == 0


# --------------------------------------------------------------------------- counts and tolerances


def test_flops_and_bytes():
    assert g.gemm_flops(2, 3, 4) == 48
    assert g.compulsory_bytes(2, 3, 4) == 4 * (8 + 12 + 6)
    assert g.compulsory_bytes(2, 3, 4, read_c=True) == 4 * (8 + 12 + 12)
    assert g.compulsory_bytes(2, 3, 4, in_bytes=2) == 2 * 20 + 4 * 6


@pytest.mark.parametrize("M, N, K, BM, BN", [(100, 70, 9, 32, 32), (128, 128, 5, 64, 16), (1, 1, 1, 1, 1),
                                             (300, 257, 31, 128, 64)])
def test_requested_bytes_brute_force(M, N, K, BM, BN):
    loads = 0
    for tm in range(math.ceil(M / BM)):
        for tn in range(math.ceil(N / BN)):
            rows = min(BM, M - tm * BM)
            cols = min(BN, N - tn * BN)
            loads += rows * K + K * cols      # the block's rows of A and columns of B
    assert g.requested_bytes(M, N, K, BM, BN) == 4 * loads + 4 * M * N


def test_tiling_intensity():
    assert g.tiling_intensity(1, 1) == pytest.approx(0.25)        # naive: 8 bytes per FMA
    assert g.tiling_intensity(32, 32) == pytest.approx(8.0)       # tile T: T / 4
    assert g.tiling_intensity(128, 128) == pytest.approx(32.0)
    M = N = K = 4096
    big = g.requested_bytes(M, N, K, 128, 128)
    assert g.gemm_flops(M, N, K) / big == pytest.approx(32.0, rel=0.02)   # C written too


def test_tolerance_bounds_a_float32_accumulation():
    """Sequential float32 accumulation (the kernels' order) stays within fp32_tolerance, element by
    element, in the units kernels.check uses."""
    rng = np.random.default_rng(1)
    for K in (1, 2, 7, 64, 513):
        A = rng.uniform(-1, 1, (40, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (K, 30)).astype(np.float32)
        acc = np.zeros((40, 30), dtype=np.float32)
        for k in range(K):                      # one rounded multiply-add per step, in float32
            acc = (acc.astype(np.float64) + np.outer(A[:, k], B[k]).astype(np.float64)).astype(np.float32)
        exact = A.astype(np.float64) @ B.astype(np.float64)
        scale = np.maximum(np.abs(exact), np.sqrt(np.mean(exact ** 2)))
        assert np.max(np.abs(acc - exact) / scale) <= g.fp32_tolerance(K)
    assert g.fp32_tolerance(1000) < g.fp32_tolerance(4000)
    assert g.fp16_tolerance(100) == pytest.approx(g.fp32_tolerance(100, 2 ** -23))
    assert g.gamma(10) == pytest.approx(10 * 2**-24, rel=1e-5) and math.isinf(g.gamma(2**24))


def _fp32_gemm(A, B, C0, alpha, beta):
    """C = alpha A B + beta C0 the way the kernels compute it: float32 FMAs along k, float32 epilogue."""
    acc = np.zeros((A.shape[0], B.shape[1]), dtype=np.float32)
    for k in range(A.shape[1]):
        acc = (acc.astype(np.float64) + np.outer(A[:, k], B[k]).astype(np.float64)).astype(np.float32)
    out = (np.float32(alpha) * acc).astype(np.float32)
    if beta != 0.0:
        out = (out + (np.float32(beta) * C0).astype(np.float32)).astype(np.float32)
    return out


def test_check_tolerance_admits_float32_rounding_and_cancellation():
    """The tolerance check_gemm passes to kernels.check admits float32 rounding of these inputs, also
    when alpha A B and beta C cancel (1 x 1 outputs), and rejects an error of one term."""
    rng = np.random.default_rng(4)
    for trial in range(300):
        M, N, K = (1, 1, 1) if trial < 200 else (3, 5, 17)
        alpha, beta = (0.75, -0.5) if trial % 2 else (1.0, 0.0)
        A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        C0 = rng.uniform(-1, 1, (M, N)).astype(np.float32)
        ref = g.gemm_reference(A, B, C0, alpha, beta)
        tol = g.check_tolerance(ref, g.gemm_error_bound(A, B, C0, alpha, beta, K + 2))
        got = _fp32_gemm(A, B, C0, alpha, beta)
        scale = np.maximum(np.abs(ref), np.sqrt(np.mean(ref ** 2)))
        assert np.max(np.abs(got - ref) / scale) <= tol
    A = rng.uniform(-1, 1, (40, 300)).astype(np.float32)
    B = rng.uniform(-1, 1, (300, 30)).astype(np.float32)
    ref = g.gemm_reference(A, B)
    tol = g.check_tolerance(ref, g.gemm_error_bound(A, B, None, 1.0, 0.0, 302))
    missing_one_term = ref - np.outer(A[:, -1], B[-1])
    scale = np.maximum(np.abs(ref), np.sqrt(np.mean(ref ** 2)))
    assert np.max(np.abs(missing_one_term - ref) / scale) > tol
    assert tol == pytest.approx(g.fp32_tolerance(300), rel=0.5)      # the a-priori estimate is close


def test_rounding_formats():
    one = np.float32(1.0)
    ulp23 = np.float32(2.0**-23)
    x = np.array([one + ulp23, one + 2**-11, one + 3 * 2**-11, 3.14159265, -2.5e-3, 1e30], dtype=np.float32)
    tf = g.round_tf32(x)
    bf = g.round_bf16(x)
    assert tf[0] == 1.0 and bf[0] == 1.0                    # the lowest bits go
    assert tf[1] == np.float32(1 + 2**-10) or tf[1] == 1.0  # exactly half an ulp: ties to even
    assert tf[1] == 1.0                                      # 1.0 has an even last kept bit
    assert tf[2] == np.float32(1 + 2 * 2**-10)               # 1.5 ulp rounds up to the even 2 ulp
    for rounded, bits in ((tf, 10), (bf, 7)):
        mantissa = rounded.view(np.uint32) & 0x7FFFFF
        assert np.all(mantissa & ((1 << (23 - bits)) - 1) == 0)
        assert np.all(np.abs(rounded - x) <= np.abs(x) * 2.0 ** -(bits + 1))
        assert np.array_equal(g.round_to_bits(rounded, bits), rounded)       # idempotent
    assert g.round_tf32(x)[5] == pytest.approx(1e30, rel=2**-11)            # float32 range kept
    assert np.isinf(g.round_fp16(np.array([1e5], dtype=np.float32)))[0]     # fp16 range is not
    assert g.round_fp16(np.array([0.1], np.float32))[0] == np.float32(np.float16(0.1))


def test_input_rounding_errors():
    err = g.input_rounding_errors(64, 48, 256, seed=3)
    assert err["fp32"] == 0.0
    assert 1e-5 < err["tf32"] < 1e-3 and 1e-5 < err["fp16"] < 1e-3      # 11-bit significands
    assert 4 * err["fp16"] < err["bf16"] < 3e-2                          # 8 bits: about 8x worse
    assert err["tf32"] == pytest.approx(err["fp16"], rel=0.2)            # same precision in range


# --------------------------------------------------------------------------- configurations


def test_configuration_rules():
    db = g.FAMILIES["double_buffered"]
    ok = {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8}
    assert db.problems(ok, H100) == [] and db.problems(ok, T4) == []
    assert db.threads(ok) == 256 and db.dynamic_smem(ok) == 2 * 4 * 16 * 256
    assert any("threads per block" in p for p in db.problems({**ok, "BM": 256, "BN": 256, "TM": 4, "TN": 4}, H100))
    assert any("multiple of 4" in p for p in db.problems({**ok, "TM": 6}, H100))
    big = {"BM": 256, "BN": 256, "BK": 32, "TM": 8, "TN": 8}          # 128 KB of shared memory
    assert db.problems(big, H100) == [] and any("shared memory" in p for p in db.problems(big, T4))
    cp = g.FAMILIES["cp_async"]
    assert any("compute capability 8.0" in p for p in cp.problems({**ok, "STAGES": 3}, T4))
    assert cp.problems({**ok, "STAGES": 3}, H100) == []
    assert any("multiple of 8" in p for p in cp.problems({**ok, "BK": 4, "STAGES": 3}, H100))
    wt = g.FAMILIES["warp_tiled"]
    assert wt.problems(g.DEFAULTS["warp_tiled"], T4) == []
    assert any("32 thread tiles" in p for p in wt.problems({**g.DEFAULTS["warp_tiled"], "WM": 32}, H100))
    wm = g.FAMILIES["wmma"]
    assert wm.problems(g.DEFAULTS["wmma"], T4) == []
    assert any("multiple of 16" in p for p in wm.problems({**g.DEFAULTS["wmma"], "BK": 24}, T4))
    wcp = g.FAMILIES["wmma_cp_async"]
    assert wcp.problems(g.DEFAULTS["wmma_cp_async"], H100) == []
    assert wcp.problems(g.DEFAULTS["wmma_cp_async"], T4)
    wp = g.FAMILIES["warp_pipelined"]
    pp = g.DEFAULTS["warp_pipelined"]
    assert wp.problems(pp, T4) == [] and wp.dynamic_smem(pp) == 2 * 4 * pp["BK"] * (pp["BM"] + 4 + pp["BN"])
    assert any("32 thread tiles" in p for p in wp.problems({**pp, "WM": 32}, H100))
    assert any("2 rows and 2 columns" in p for p in wp.problems({**pp, "WM": 8, "WN": 128, "TN": 4}, H100))
    assert any("whole float4" in p for p in wp.problems({**pp, "BK": 4}, H100))
    tp = g.FAMILIES["wmma_pipelined"]
    assert tp.problems(g.DEFAULTS["wmma_pipelined"], H100) == [] and tp.problems(g.DEFAULTS["wmma_pipelined"], T4)
    assert any("16-byte chunks" in p for p in tp.problems({"BM": 32, "BN": 32, "BK": 16, "WM": 16, "WN": 16,
                                                          "STAGES": 3}, H100))
    assert g.FAMILIES["smem"].problems({"TILE": 64}, H100)                # 4096 threads
    assert g.FAMILIES["vec4"].problems({**g.DEFAULTS["vec4"], "LAYOUT": 2, "BM": 48, "TM": 4}, H100)
    assert db.problems({"BM": 128}, H100) == ["missing parameter(s) BN, BK, TM, TN"]


def test_every_default_is_valid_and_instantiated():
    for key, params in g.DEFAULTS.items():
        fam = g.FAMILIES["vec4" if key == "conflict_free" else key]
        limits = H100 if fam.min_cc >= (8, 0) else T4
        assert fam.problems(params, limits) == [], key
        expr = fam.expression(params)
        if expr:
            assert expr in name_expressions_in(source(fam.path)), expr
    for key, params in g.FALLBACKS.items():
        fam = g.FAMILIES[key]
        assert fam.problems(params, GpuLimits.for_compute_capability("8.6")) == [], key
        assert fam.expression(params) in name_expressions_in(source(fam.path)), key
    for cc, n in (("7.5", 9), ("9.0", 10)):
        rungs = g.ladder(cc)
        assert len(rungs) == n and rungs[0].family == "naive" and rungs[-1].family == "warp_pipelined"
    assert g.tensor_core_rung("7.5").family == "wmma" and g.tensor_core_rung("9.0").family == "wmma_pipelined"


def test_expressions_and_labels():
    fam = g.FAMILIES["warp_tiled"]
    assert fam.expression(g.DEFAULTS["warp_tiled"]) == "gemm_warp_tiled<128, 128, 8, 64, 32, 8, 8>"
    assert g.FAMILIES["naive"].expression({}) is None and g.FAMILIES["naive"].label({}) == "matmul_naive"


@pytest.mark.parametrize("key", ["naive", "smem", "1d", "2d", "vec4", "double_buffered", "warp_tiled", "warp_pipelined",
                                 "wmma", "wmma_pipelined"])
def test_launch_geometry_covers_c(key):
    fam = g.FAMILIES[key]
    p = g.DEFAULTS[key]
    for M, N in ((1, 1), (33, 65), (127, 129), (1000, 1001), (4096, 2048)):
        grid = fam.grid(p, M, N)
        BM, BN = (8, 32) if key == "naive" else fam.block_tile(p)
        if len(grid) == 1:                            # 1-D grid of tiles in grouped order
            assert grid[0] == math.ceil(M / BM) * math.ceil(N / BN)
        else:
            assert grid[0] * BN >= N > (grid[0] - 1) * BN
            assert grid[1] * BM >= M > (grid[1] - 1) * BM
        threads = math.prod(fam.block(p))
        assert threads == fam.threads(p) and threads % 32 == 0


def test_check_sizes():
    g.check_sizes(4096, 4096, 4096)
    with pytest.raises(ValueError):
        g.check_sizes(2**16, 2**16, 1)             # M * N = 2^32
    with pytest.raises(ValueError):
        g.check_sizes(0, 3, 3)


def test_split_k_chunks():
    for K in (1, 7, 16, 100, 1000, 65536):
        for splits in (1, 2, 3, 8, 33):
            for BK in (8, 16):
                chunk, slices = g.split_k_chunk(K, splits, BK)
                assert chunk % BK == 0 and 1 <= slices <= splits
                assert slices * chunk >= K > (slices - 1) * chunk


# --------------------------------------------------------------------------- index maps and models


def test_shared_wavefronts_basics():
    lanes = list(range(32))
    assert g.shared_wavefronts(lanes) == 1                               # 32 banks, one word each
    assert g.shared_wavefronts([2 * i for i in lanes]) == 2              # stride 2: 2-way
    assert g.shared_wavefronts([32 * i for i in lanes]) == 32            # one bank
    assert g.shared_wavefronts([5] * 32) == 1                            # broadcast
    assert g.shared_wavefronts([4 * i for i in lanes], 16) == 4          # float4: 4 quarter-warp passes
    assert g.conflict_ways([4 * i for i in lanes], 16) == 1
    assert g.conflict_ways([8 * i for i in lanes], 16) == 2              # lanes 0 and 4 share banks
    assert g.shared_wavefronts([None] * 31 + [0]) == 1


@pytest.mark.parametrize("layout", [0, 1, 2])
@pytest.mark.parametrize("BM, BK", [(64, 8), (128, 8), (128, 16), (128, 32), (256, 16)])
def test_a_tile_layouts_are_bijections(BM, BK, layout):
    words = {g.a_tile_index(k, m, BM, BK, layout) for k in range(BK) for m in range(BM)}
    assert len(words) == BM * BK
    pitch = BM + (4 if layout == 1 else 0)
    assert max(words) < BK * pitch
    for k in range(BK):                          # a float4 read at m % 4 == 0 stays 4 consecutive words
        for m in range(0, BM, 4):
            base = g.a_tile_index(k, m, BM, BK, layout)
            assert base % 4 == 0
            assert [g.a_tile_index(k, m + i, BM, BK, layout) for i in range(4)] == [base + i for i in range(4)]


def test_bank_conflicts_of_the_transposing_store():
    ways = {(BK, layout): max(g.conflict_ways(g.a_store_words(128, BK, layout, j, w)) for j in range(4)
                              for w in range(4))
            for BK in (8, 16, 32) for layout in (0, 1, 2)}
    assert ways == {(8, 0): 2, (8, 1): 1, (8, 2): 1, (16, 0): 4, (16, 1): 2, (16, 2): 1,
                    (32, 0): 8, (32, 1): 4, (32, 2): 1}
    for BK in (8, 16, 32):
        assert max(g.conflict_ways(g.a_copy_words_cp_async(128, BK, w)) for w in range(8)) == 1


def test_bank_conflicts_of_the_reads():
    p = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}
    assert g.conflict_ways(g.b_read_words("contiguous", p), 16) == 2     # rung 4: lanes 8 floats apart
    assert g.conflict_ways(g.b_read_words("split", p), 16) == 1          # rung 5
    for kind in ("contiguous", "split"):
        for layout in (0, 1, 2):
            assert g.conflict_ways(g.a_read_words(kind, p, layout, 1, 5), 16) == 1   # broadcasts
    for pw in (g.DEFAULTS["warp_tiled"], {**g.DEFAULTS["warp_tiled"], "WM": 32, "WN": 64},
               {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8}):
        for w in range(g.FAMILIES["warp_tiled"].threads(pw) // 32):
            for q in range(pw["TN"] // 4):
                assert g.conflict_ways(g.b_read_words("warp", pw, q, 3, w), 16) == 1
            for q in range(pw["TM"] // 4):
                assert g.conflict_ways(g.a_read_words("warp", pw, 2, q, 3, w), 16) == 1
    assert g.distinct_words_per_k("split", p) == 16 + 128
    assert g.distinct_words_per_k("warp", g.DEFAULTS["warp_tiled"]) == 64 + 32


def test_defaults_fall_back_where_shared_memory_is_short():
    l4 = GpuLimits.for_compute_capability("8.9")                 # 99 KB per block
    assert g.default_params("wmma_pipelined", H100) == g.DEFAULTS["wmma_pipelined"]
    assert g.default_params("wmma_pipelined", l4) == g.FALLBACKS["wmma_pipelined"]
    assert g.default_params("cp_async", l4) == g.FALLBACKS["cp_async"]
    assert g.default_params("warp_tiled", l4) == g.DEFAULTS["warp_tiled"]
    for r in g.ladder("8.9") + [g.tensor_core_rung("8.9")]:
        assert r.kernel_family.problems(r.params, l4) == [], r.label


def test_lds128_return_model():
    lanes = list(range(32))
    assert g.lds128_return_cycles([4 * i for i in lanes]) == 4               # 32 different float4
    assert g.lds128_return_cycles([4 * (i // 2) for i in lanes]) == 2        # l and l ^ 1 share
    assert g.lds128_return_cycles([4 * (i % 2 + 2 * (i // 4)) for i in lanes]) == 2   # l and l ^ 2 share
    assert g.lds128_return_cycles([0] * 32) == 2                             # a broadcast
    assert g.lds128_return_cycles([4 * (i % 4) for i in lanes]) == 4         # l and l ^ 4 share: no packing
    for LC in (2, 4, 8, 16):
        cells = {g.paired_lane(lane, LC) for lane in range(32)}
        assert cells == set(itertools.product(range(32 // LC), range(LC)))   # a bijection onto the grid


@pytest.mark.parametrize("p", [g.DEFAULTS["warp_pipelined"],
                               {"BM": 128, "BN": 256, "BK": 8, "WM": 64, "WN": 64, "TM": 8, "TN": 16, "BLOCKS": 1},
                               {"BM": 256, "BN": 128, "BK": 16, "WM": 64, "WN": 64, "TM": 16, "TN": 8, "BLOCKS": 1},
                               {"BM": 64, "BN": 64, "BK": 8, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "BLOCKS": 2}])
def test_paired_lanes_pack_every_fragment_read(p):
    """Rung 7b: every LDS.128 of A and of B takes 2 clocks of the return path and has no bank
    conflict; rung 7's lane order packs the reads of A but not those of B."""
    warps = g.FAMILIES["warp_pipelined"].threads(p) // 32
    for w in range(warps):
        for k in (0, 3, p["BK"] - 1):
            for q in range(p["TM"] // 4):
                words = g.a_read_words("paired", p, 1, q, k, w)
                assert g.lds128_return_cycles(words) == 2 and g.conflict_ways(words, 16) == 1
            for q in range(p["TN"] // 4):
                words = g.b_read_words("paired", p, q, k, w)
                assert g.lds128_return_cycles(words) == 2 and g.conflict_ways(words, 16) == 1
    rung7 = g.DEFAULTS["warp_tiled"]
    assert g.lds128_return_cycles(g.a_read_words("warp", rung7, 2, 0, 1)) == 2
    assert g.lds128_return_cycles(g.b_read_words("warp", rung7, 0, 1)) == 4


@pytest.mark.parametrize("kind, p", [
    ("contiguous", {"BM": 128, "BN": 128, "TM": 8, "TN": 8}),
    ("split", {"BM": 128, "BN": 128, "TM": 8, "TN": 8}),
    ("split", {"BM": 64, "BN": 128, "TM": 4, "TN": 8}),
    ("warp", {"BM": 128, "BN": 128, "WM": 64, "WN": 32, "TM": 8, "TN": 8}),
    ("warp", {"BM": 128, "BN": 256, "WM": 64, "WN": 64, "TM": 8, "TN": 16}),
    ("paired", {"BM": 128, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8}),
    ("paired", {"BM": 256, "BN": 128, "WM": 64, "WN": 64, "TM": 16, "TN": 8}),
])
def test_thread_tiles_cover_the_block_tile_once(kind, p):
    threads = (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])
    owned = []
    for t in range(threads):
        rows, cols = g.thread_rows_cols(kind, p, t)
        owned += [(r + i, c + j) for r in rows for c in cols for i in range(4) for j in range(4)]
    assert sorted(owned) == sorted(itertools.product(range(p["BM"]), range(p["BN"])))


@pytest.mark.parametrize("tiles_m, tiles_n", [(1, 1), (3, 5), (8, 8), (9, 4), (32, 32), (33, 7), (17, 1)])
def test_grouped_block_order_is_a_bijection(tiles_m, tiles_n):
    seen = [g.block_tile(b, tiles_m, tiles_n) for b in range(tiles_m * tiles_n)]
    assert sorted(seen) == sorted(itertools.product(range(tiles_m), range(tiles_n)))
    if tiles_m >= 8:                              # the first group walks down 8 tile rows first
        assert [s[0] for s in seen[:8]] == list(range(8)) and all(s[1] == 0 for s in seen[:8])


# --------------------------------------------------------------------------- the kernels, run on the CPU backend

CPU_RUNGS = [("naive", {}), ("smem", {"TILE": 16}), ("1d", g.DEFAULTS["1d"]), ("2d", {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4}),
             ("vec4", g.DEFAULTS["vec4"]), ("vec4", g.DEFAULTS["conflict_free"]),
             ("double_buffered", g.DEFAULTS["double_buffered"]), ("warp_tiled", g.DEFAULTS["warp_tiled"]),
             ("warp_tiled", {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32, "TM": 4, "TN": 8})]


@pytest.mark.parametrize("family, params", CPU_RUNGS, ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v.values())))
def test_simt_rungs_are_right_on_the_cpu_backend(monkeypatch, family, params):
    """The FP32 kernels (no PTX, no cp.async) run on the course's CPU backend: check_gemm on awkward
    shapes, the scalar path (odd sizes) and the 16-byte path (multiples of 4), C poisoned with NaN."""
    pytest.importorskip("kernels.cpu")
    monkeypatch.setenv("COURSE_BACKEND", "cpu")
    kernel = g.GemmKernel(family, params, limits=H100)
    pairs = ((1.0, 0.0), (0.75, -0.5)) if kernel.family.alpha_beta else ((1.0, 0.0),)
    for M, N, K in ((1, 1, 1), (33, 65, 17), (130, 68, 64)):
        for alpha, beta in pairs:
            g.check_gemm(kernel, M, N, K, alpha=alpha, beta=beta)


PIPELINED_CPU = [g.DEFAULTS["warp_pipelined"],
                 {"BM": 64, "BN": 64, "BK": 8, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "BLOCKS": 2},
                 {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 4, "TN": 8, "BLOCKS": 2},
                 {"BM": 64, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "TM": 16, "TN": 4, "BLOCKS": 1}]


@pytest.mark.parametrize("params", PIPELINED_CPU, ids=lambda p: "-".join(map(str, p.values())))
def test_pipelined_rung_is_right_on_the_cpu_backend(monkeypatch, params):
    """Rung 7b on the CPU backend: edge blocks (checked loads), interior blocks (unchecked loads,
    pointer increments), K not a multiple of BK (a short first tile), odd and even step counts."""
    pytest.importorskip("kernels.cpu")
    monkeypatch.setenv("COURSE_BACKEND", "cpu")
    kernel = g.GemmKernel("warp_pipelined", params, limits=H100)
    for M, N, K in ((1, 1, 1), (33, 65, 17), (130, 68, 64), (128, 128, 20), (128, 256, 64), (64, 128, 44),
                    (256, 128, 8)):
        for alpha, beta in ((1.0, 0.0), (0.75, -0.5)):
            g.check_gemm(kernel, M, N, K, alpha=alpha, beta=beta)


def emulated_source(path: str) -> str:
    """A kernel file with its gemm/ headers inlined, wmma_ptx.cuh and cp_async.cuh replaced by the CPU
    stand-ins in tests/emulation/ (same rules, synchronous copies, a fixed fragment layout)."""
    seen: set[str] = set()

    def expand(rel: str) -> str:
        lines = []
        for line in source(rel).splitlines():
            m = re.match(r'\s*#include "(gemm/[\w.]+)"', line)
            if not m:
                lines.append(line)
            elif m.group(1) not in seen:
                seen.add(m.group(1))
                stand_in = EMULATION / m.group(1).split("/")[1]
                lines.append(stand_in.read_text() if stand_in.is_file() else expand(m.group(1)))
        return "\n".join(lines)

    return expand(path)


TENSOR_CPU = [("wmma_pipelined", g.DEFAULTS["wmma_pipelined"]), ("wmma_pipelined", g.FALLBACKS["wmma_pipelined"]),
              ("wmma_pipelined", {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32, "STAGES": 3}),
              ("wmma_pipelined", {"BM": 64, "BN": 128, "BK": 16, "WM": 32, "WN": 64, "STAGES": 2}),
              ("wmma_pipelined", {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 64, "STAGES": 6}),
              ("wmma_cp_async", {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32, "STAGES": 3}),
              ("wmma", {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32})]


@pytest.mark.parametrize("family, params", TENSOR_CPU, ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v.values())))
def test_tensor_core_kernels_are_right_in_emulation(monkeypatch, family, params):
    """The tensor-core kernels with their PTX replaced by CPU stand-ins (tests/emulation/): their
    copies, pipeline, guards, k-shifted first tile and both epilogues (direct to global memory and
    through the scratch tile), on the CPU backend, fp16 inputs, C poisoned with NaN, shared memory
    poisoned with fp16 NaNs."""
    import dataclasses

    pytest.importorskip("kernels.cpu")
    monkeypatch.setenv("COURSE_BACKEND", "cpu")
    fam = dataclasses.replace(g.FAMILIES[family], path=emulated_source(g.FAMILIES[family].path))
    kernel = g.GemmKernel(fam, params, limits=H100)
    for M, N, K in ((1, 1, 1), (33, 65, 17), (130, 68, 64), (128, 128, 96), (136, 264, 72), (256, 256, 40)):
        for alpha, beta in ((1.0, 0.0), (0.75, -0.5)):
            g.check_gemm(kernel, M, N, K, alpha=alpha, beta=beta, dtype=np.float16)


def test_split_k_is_right_on_the_cpu_backend(monkeypatch):
    pytest.importorskip("kernels.cpu")
    monkeypatch.setenv("COURSE_BACKEND", "cpu")
    run = g.SplitKGemm({"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4}, 5, limits=H100)
    for M, N, K in ((1, 1, 1), (33, 65, 17), (64, 68, 600)):
        g.check_gemm(run, M, N, K, alpha=0.75, beta=-0.5)
    assert run.accumulation_depth(600) == 128 + 5


# --------------------------------------------------------------------------- sweep marking


class _FakeArray:
    def __init__(self, shape):
        self.shape = shape


@needs_nvrtc
def test_sweep_marks_invalid_and_spilling_points():
    from kernels.sweep import Sweep

    measure = g.sweep_measure("double_buffered", _FakeArray((256, 256)), _FakeArray((256, 256)),
                              _FakeArray((256, 256)), cublas_gflops=1.0, limits=T4, arch="sm_75")
    sweep = Sweep("test", {"BM": [128, 256], "BN": [256], "BK": [8], "TM": [4, 16], "TN": [4, 16]},
                  measure, x="BK", y="GFLOP/s")
    records = sweep.run(points=[{"BM": 256, "BN": 256, "BK": 8, "TM": 4, "TN": 4},      # 4096 threads
                                {"BM": 256, "BN": 256, "BK": 8, "TM": 16, "TN": 16}],   # 256 outputs each
                        progress=False)
    invalid, spilling = records
    assert invalid.get("GFLOP/s") is None and "invalid" in invalid["note"] and "threads" in invalid["note"]
    assert spilling.get("GFLOP/s") is None and spilling["spill B"] > 0 and "spills" in spilling["note"]
    assert "2 point(s) without GFLOP/s" in sweep.summary()


def test_best_record():
    records = [{"x": 1, "GFLOP/s": 5.0}, {"x": 2, "note": "invalid"}, {"x": 3, "GFLOP/s": 7.5}]
    assert g.best_record(records)["x"] == 3
    assert g.best_record([{"note": "n"}]) is None


def test_sweep_points_are_on_the_grid():
    for point in g.REGISTER_TILED_POINTS:
        for k, v in point.items():
            assert v in g.REGISTER_TILED_GRID[k], (k, v)


# --------------------------------------------------------------------------- the chapter


def _chapter_text() -> str:
    return CHAPTER.read_text(encoding="utf-8")


def test_every_kernel_is_shown_and_the_sweep_is_live():
    text = _chapter_text()
    for filename in KERNEL_FILES:
        assert f'"gemm/{filename}"' in text, filename
    assert '"coalescing/matmul_naive.cu"' in text and '"coalescing/gemv.cu"' in text
    assert "Sweep(" in text and ".show()" in text and "roofline_plot" in text
    assert "exercises/gemm" in text
