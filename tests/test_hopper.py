"""CPU tests of the Hopper kernels (TMA, mbarriers, wgmma): every kernels/cuda/hopper/*.cu compiles for
sm_90a with NVRTC, and the host-side encodings (wgmma descriptors, the accumulator layout, the
128-byte swizzle, tensor-map arguments, kernel arguments) match values worked out by hand from the
PTX ISA and the CUDA driver's rules, and match what the kernels' headers compute (checked by the
compiler through static_assert). The GPU side is benchmarks/bench_hopper.py.

tests/test_compile_all_kernels.py compiles the same files for sm_90 too: there each file's
``// min_arch: sm_90`` skips sm_75 (TMA and mbarrier transaction counts need 9.0), and the wgmma
kernels, guarded by ``__CUDA_ARCH_FEAT_SM90_ALL``, compile to a body that traps (wgmma exists only in
sm_90a).
"""
from __future__ import annotations

import ctypes
import re
from pathlib import Path

import numpy as np
import pytest

from kernels.chapters import hopper
from kernels.errors import NoGPUError
from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.sources import name_expressions_in, source
from tooling.fresh_reports import fresh_reports

ROOT = Path(__file__).resolve().parents[1]
HOPPER_FILES = sorted(p.name for p in (ROOT / "kernels" / "cuda" / "hopper").glob("*.cu"))

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


def compiled(filename: str, arch: str = "sm_90a"):
    path = f"hopper/{filename}"
    code = source(path)
    return compile_cuda(code, arch, (), name_expressions_in(code), path)


# ------------------------------------------------------------------------------------ kernels

def test_the_chapter_has_its_kernels():
    assert HOPPER_FILES == ["cluster_histogram.cu", "tma_copy.cu", "wgmma_gemm.cu", "wgmma_pipelined.cu",
                            "wgmma_specialised.cu"]


@pytest.mark.parametrize("filename", HOPPER_FILES)
def test_declares_compute_capability_9(filename: str):
    assert re.search(r"^// min_arch: sm_90$", source(f"hopper/{filename}"), re.M)


@pytest.fixture(scope="module")
def spill_reports():
    """Compared exactly, so compiled in fresh processes (tooling.fresh_reports says why)."""
    return fresh_reports([f"hopper/{f}" for f in HOPPER_FILES], ["sm_90a"])


@needs_nvrtc
@pytest.mark.parametrize("filename", HOPPER_FILES)
def test_compiles_for_sm_90a_without_spills(filename: str, spill_reports):
    result = compiled(filename)
    assert result.ok, result.log
    resources = spill_reports[(f"hopper/{filename}", "sm_90a")]
    expected = set(name_expressions_in(source(f"hopper/{filename}"))) or {"gemm_wgmma"}
    assert expected <= set(resources), (expected, sorted(resources))
    for name, report in resources.items():
        assert report.spills is False, (name, report)
    assert "serialized" not in result.log, result.log  # ptxas: wgmma issued one at a time


@needs_nvrtc
def test_the_cluster_kernels_use_clusters_multicast_and_setmaxnreg():
    """What the chapter says the specialised kernel and the histogram do is in their PTX."""
    ptx = compile_cuda(source("hopper/wgmma_specialised.cu"), "compute_90a", (),
                       ("gemm_wgmma_specialised<256, 4, 2, 1>",), "hopper/wgmma_specialised.cu").ptx
    assert ".reqnctapercluster 1, 2, 1" in ptx
    assert "multicast::cluster" in ptx and "mapa.shared::cluster" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40" in ptx and "setmaxnreg.inc.sync.aligned.u32 232" in ptx
    alone = compile_cuda(source("hopper/wgmma_specialised.cu"), "compute_90a", (),
                         ("gemm_wgmma_specialised<256, 4, 2, 0>",), "hopper/wgmma_specialised.cu").ptx
    assert ".reqnctapercluster 1, 2, 1" in alone and "multicast::cluster" not in alone and "mapa" not in alone
    histogram = compile_cuda(source("hopper/cluster_histogram.cu"), "compute_90", (),
                             ("histogram_cluster<4>",), "hopper/cluster_histogram.cu").ptx
    assert ".reqnctapercluster 4, 1, 1" in histogram and "red.relaxed.cluster.shared::cluster.add.u32" in histogram


@needs_nvrtc
def test_wgmma_kernels_issue_wgmma_only_for_sm_90a():
    """sm_90a's PTX has the tensor-core instruction; plain sm_90 gets the trapping fallback."""
    code = source("hopper/wgmma_gemm.cu")
    ptx_a = compile_cuda(code, "compute_90a", (), (), "hopper/wgmma_gemm.cu")
    assert ptx_a.ok, ptx_a.log
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx_a.ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx_a.ptx
    ptx = compile_cuda(code, "compute_90", (), (), "hopper/wgmma_gemm.cu")
    assert ptx.ok and "wgmma.mma_async" not in ptx.ptx and "trap" in ptx.ptx


@needs_nvrtc
def test_the_headers_encode_what_python_encodes():
    """The device's descriptor and accumulator layout agree with kernels.chapters.hopper, checked at compile time."""
    checks = [f"static_assert(wgmma_descriptor_sw128({a}u) == {hopper.wgmma_descriptor(a, 16, 1024, 128)}ull, "
              f"\"descriptor {a}\");" for a in (0, 1024, 8192, 0x3FC00)]
    checks += [f"static_assert(wgmma_descriptor({a}u, {lead}u, {stride}u, {mode}u) == "
               f"{hopper.wgmma_descriptor(a, lead, stride, width)}ull, \"descriptor\");"
               for a, lead, stride, width, mode in ((4096, 128, 256, 0, 0), (2048, 16, 512, 64, 2), (48, 16, 256, 32, 3))]
    for thread in (0, 5, 31, 37, 64, 127):
        for register in (0, 1, 2, 3, 4, 13, 62, 63):
            row, col = hopper.accumulator_position(thread, register)
            checks.append(f"static_assert(wgmma_accumulator_row({thread}, {register}) == {row} && "
                          f"wgmma_accumulator_col({thread}, {register}) == {col}, \"layout\");")
    code = '#include "hopper/wgmma.cuh"\n' + "\n".join(checks) + "\n__global__ void nothing() {}\n"
    result = compile_cuda(code, "sm_90a", (), (), "layout_check.cu")
    assert result.ok, result.log


# ------------------------------------------------------------------------- wgmma descriptors

def test_descriptor_by_hand():
    # a 128-byte swizzled K-major tile at shared address 1024: address 1024 >> 4 = 0x40 in bits 0-13,
    # leading offset 16 >> 4 = 1 in bits 16-29, stride offset 1024 >> 4 = 0x40 in bits 32-45, mode 1 in 62-63
    assert hopper.wgmma_descriptor(1024, 16, 1024, 128) == 0x4000_0040_0001_0040
    assert hopper.wgmma_descriptor(0, 0, 0, 0) == 0
    assert hopper.wgmma_descriptor(16, 0, 0, 64) == 0x8000_0000_0000_0001  # mode 2 in bits 62-63
    assert hopper.wgmma_descriptor(0, 0, 0, 32) == 0xC000_0000_0000_0000  # mode 3
    assert hopper.wgmma_descriptor(0, 0, 0, 0, base_offset=5) == 5 << 49
    # the k-th 16-wide slice of a 64-wide fp16 tile starts 32 k bytes in: the address field grows by 2
    assert hopper.wgmma_descriptor(1024 + 32, 16, 1024, 128) - hopper.wgmma_descriptor(1024, 16, 1024, 128) == 2


def test_descriptor_fields_round_trip():
    fields = {"address": 0x3FFF0, "leading_bytes": 16, "stride_bytes": 1024, "base_offset": 0, "swizzle_bytes": 128}
    assert hopper.wgmma_descriptor_fields(hopper.wgmma_descriptor(0x3FFF0, 16, 1024, 128)) == fields


@pytest.mark.parametrize("args, words", [((8, 16, 1024, 128), "address"), ((1024, 16, 1024, 96), "swizzle_bytes"),
                                         ((1 << 18, 16, 1024, 128), "address"), ((0, 16, 1000, 128), "stride_bytes")])
def test_descriptor_refuses_what_it_cannot_hold(args, words):
    with pytest.raises(ValueError, match=words):
        hopper.wgmma_descriptor(*args)


# ----------------------------------------------------------------------- layouts of the operands

def test_accumulator_layout_by_hand():
    assert hopper.accumulator_position(0, 0) == (0, 0)
    assert hopper.accumulator_position(0, 1) == (0, 1)
    assert hopper.accumulator_position(0, 2) == (8, 0)  # registers 2, 3: eight rows further down
    assert hopper.accumulator_position(0, 4) == (0, 8)  # the next 8-column block
    assert hopper.accumulator_position(5, 3) == (9, 3)  # lane 5: row group 1, column pair 1
    assert hopper.accumulator_position(37, 0) == (17, 2)  # warp 1 owns rows 16..31
    assert hopper.accumulator_position(127, 63) == (63, 127)


def test_accumulator_layout_covers_the_tile_once():
    cells = {hopper.accumulator_position(t, i) for t in range(128) for i in range(64)}
    assert cells == {(r, c) for r in range(64) for c in range(128)}
    for n in (64, 256):
        assert {hopper.accumulator_position(t, i, n) for t in range(128) for i in range(n // 2)} == \
            {(r, c) for r in range(64) for c in range(n)}


def test_128_byte_swizzle_by_hand():
    assert [hopper.swizzled_offset_128b(0, 16 * c) for c in range(8)] == [16 * c for c in range(8)]
    assert hopper.swizzled_offset_128b(1, 0) == 128 + 16  # row 1: chunk 0 goes to chunk 1
    assert hopper.swizzled_offset_128b(9, 16) == 9 * 128  # row 9 (9 % 8 = 1): chunk 1 goes to chunk 0
    assert hopper.swizzled_offset_128b(7, 5) == 7 * 128 + 16 * 7 + 5
    for row in range(16):  # each row is a permutation of its own 128 bytes
        assert sorted(hopper.swizzled_offset_128b(row, b) for b in range(128)) == list(range(128 * row, 128 * row + 128))
    with pytest.raises(ValueError, match="0..127"):
        hopper.swizzled_offset_128b(0, 128)


# ------------------------------------------------------------------------------- tensor maps

def test_tensor_map_args_by_hand():
    args = hopper.tensor_map_args(0x7F00_0000_0000, 4096, 2048, 128, 64, swizzle_bytes=128)
    assert args.global_dims == (2048, 4096)  # innermost (columns) first
    assert args.global_strides == (4096,)  # 2048 fp16 = 4096 bytes per row
    assert args.box_dims == (64, 128) and args.element_strides == (1, 1)
    assert args.box_bytes == 64 * 128 * 2 == 16384
    ragged = hopper.tensor_map_args(256, 1000, 1000, 128, 64)
    assert ragged.global_dims == (1000, 1000) and ragged.global_strides == (2000,)


@pytest.mark.parametrize("kwargs, words", [
    (dict(address=256, rows=1000, cols=1001, box_rows=128, box_cols=64), "multiple of 16 bytes"),
    (dict(address=8, rows=64, cols=64, box_rows=64, box_cols=64), "16-byte aligned"),
    (dict(address=256, rows=64, cols=256, box_rows=64, box_cols=128, swizzle_bytes=128), "at most 128"),
    (dict(address=256, rows=512, cols=64, box_rows=300, box_cols=64), "box_rows must be in 1..256"),
    (dict(address=256, rows=64, cols=64, box_rows=64, box_cols=4), "multiple of 16 bytes"),
    (dict(address=256, rows=64, cols=64, box_rows=64, box_cols=64, swizzle_bytes=16), "swizzle_bytes"),
    (dict(address=256, rows=0, cols=64, box_rows=64, box_cols=64), "non-empty"),
])
def test_tensor_map_args_refuse_with_a_sentence(kwargs, words):
    with pytest.raises(ValueError, match=words):
        hopper.tensor_map_args(**kwargs)


def test_driver_enum_names_exist():
    """encode_tensor_map builds these names; a renamed enum would fail only on a GPU otherwise."""
    driver = pytest.importorskip("cuda.bindings.driver")
    assert int(driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16) == 6
    for width, suffix in hopper.TENSOR_MAP_SWIZZLES.items():
        mode = int(getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{suffix}"))
        assert mode == {0: 0, 32: 1, 64: 2, 128: 3}[width]
    assert hasattr(driver, "cuTensorMapEncodeTiled") and hasattr(driver, "cuLaunchKernel")


def test_kernel_arguments_are_packed_as_the_kernel_reads_them():
    tensor_map = bytes(range(128))
    packed = hopper._parameter(tensor_map)
    assert ctypes.sizeof(packed) == 128 and bytes(packed) == tensor_map
    assert ctypes.sizeof(hopper._parameter(7)) == 4 and hopper._parameter(-3).value == -3
    assert ctypes.sizeof(hopper._parameter(0.5)) == 4
    with pytest.raises(TypeError, match="128 bytes"):
        hopper._parameter(b"\0" * 64)
    with pytest.raises(ValueError, match="32-bit"):
        hopper._parameter(1 << 31)


# ------------------------------------------------------------------------ operands and who runs

def test_gemm_operands_are_checked_with_a_sentence():
    A = np.zeros((1000, 1000), np.float16)
    assert hopper.check_gemm_operands(A, np.zeros((1001, 1000), np.float16), np.zeros((1000, 1001), np.float32)) == \
        (1000, 1001, 1000)
    with pytest.raises(ValueError, match="multiple of 8"):
        hopper.check_gemm_operands(np.zeros((64, 1001), np.float16), np.zeros((64, 1001), np.float16),
                                   np.zeros((64, 64), np.float32))
    with pytest.raises(ValueError, match="B\\^T is N x K"):
        hopper.check_gemm_operands(A, np.zeros((1000, 999), np.float16), np.zeros((1000, 1000), np.float32))
    with pytest.raises(TypeError, match="float16"):
        hopper.check_gemm_operands(A.astype(np.float32), A, np.zeros((1000, 1000), np.float32))


def test_kernels_fit_in_shared_memory_and_tile_the_grid():
    h100_optin = 227 * 1024
    for kernel in (hopper.WGMMA_SINGLE, hopper.wgmma_pipelined(128, 6, 1), hopper.wgmma_pipelined(256, 4, 1)):
        assert kernel.shared_bytes <= h100_optin, kernel
    assert hopper.wgmma_pipelined(256, 4, 1).shared_bytes == 4 * (16 + 32) * 1024 + 1152
    assert hopper.WGMMA_SINGLE.grid(1000, 1001) == (8, 16)
    assert hopper.wgmma_pipelined().grid(4096, 4096) == (32, 32)
    assert hopper.wgmma_pipelined(256).grid(4096, 4096) == (16, 32)
    every = set(name_expressions_in(source("hopper/wgmma_pipelined.cu")))
    for key in [(128, 4, 0), (128, 4, 1), (128, 3, 1), (256, 4, 1), (256, 3, 1)]:
        assert hopper.wgmma_pipelined(*key).name in every  # what the benchmark asks for is compiled in CI
    with pytest.raises(ValueError, match="block_cols is 128 or 256"):
        hopper.wgmma_pipelined(192)


def test_specialised_kernels_are_compiled_and_sized():
    every = set(name_expressions_in(source("hopper/wgmma_specialised.cu")))
    kernels = [hopper.wgmma_specialised(*key) for key in hopper.SPECIALISED_CONFIGS]
    kernels.append(hopper.wgmma_specialised(*hopper.CLUSTER_WITHOUT_MULTICAST, multicast=False))
    assert {k.name for k in kernels} == every  # each configuration is compiled in CI, and nothing else
    for kernel in kernels:
        assert kernel.shared_bytes <= 227 * 1024, kernel
    best = hopper.wgmma_specialised()
    assert (best.block_cols, best.cluster, best.multicast, best.b_box_rows) == (256, 1, False, 256)
    assert best.shared_bytes == 4 * (16 + 32) * 1024 + 1152
    shared = hopper.wgmma_specialised(256, 4, 2)
    assert (shared.multicast, shared.b_box_rows) == (True, 128)  # each block loads half the box
    assert hopper.wgmma_specialised(256, 4, 2, multicast=False).b_box_rows == 256
    with pytest.raises(ValueError, match="not \\(128, 4, 2\\)"):
        hopper.wgmma_specialised(128, 4, 2)
    with pytest.raises(ValueError, match="without multicast"):
        hopper.wgmma_specialised(256, 3, 2, multicast=False)


def test_cluster_grids_round_up_to_whole_clusters():
    pair = hopper.wgmma_specialised(256, 4, 2)
    assert pair.grid(4096, 4096) == (16, 32)
    assert pair.grid(1000, 1001) == (4, 8)  # 8 rows of blocks cover 1000 rows; already whole clusters
    assert pair.grid(129, 300) == (2, 2)  # 2 rows of blocks: one cluster
    assert pair.grid(100, 300) == (2, 2)  # 1 row of blocks rounded up to a cluster of 2
    assert hopper.wgmma_specialised().grid(100, 300) == (2, 1)


def test_histogram_shared_memory_and_refusals():
    assert hopper.histogram_shared_bytes(4096, 1) == 16384
    assert hopper.histogram_shared_bytes(400_000, 8) == 200_000  # 50,000 bins per block
    assert hopper.histogram_shared_bytes(10, 4) == 12  # ceil(10 / 4) = 3 bins per block
    values, counts = np.zeros(16, np.uint32), np.zeros(8, np.uint32)
    with pytest.raises(ValueError, match="cluster is one of"):
        hopper.histogram_launcher(values, counts, 3)
    with pytest.raises(TypeError, match="uint32"):
        hopper.histogram_launcher(values.astype(np.int32), counts, 2)
    with pytest.raises(ValueError, match="at least one bin"):
        hopper.histogram_launcher(values, counts[:0], 2)


def test_on_the_cpu_backend_it_says_what_is_needed(monkeypatch):
    monkeypatch.setenv("COURSE_BACKEND", "cpu")
    problem = hopper.hopper_problem()
    assert problem and "H100" in problem and "sm_90a" in problem and "CPU backend" in problem
    with pytest.raises(NoGPUError, match="compute capability 9.0"):
        hopper.requires_hopper("the TMA copy")


@pytest.mark.parametrize("capability, runs", [("9.0", True), ("7.5", False), ("8.0", False), ("10.0", False)])
def test_who_runs_follows_the_device_the_package_reports(monkeypatch, capability: str, runs: bool):
    """Under the T4 profile on an H100 the package reports a T4, and the chapter takes the T4's path."""
    import types

    from kernels import backend, device

    monkeypatch.setattr(backend, "backend_name", lambda: "cupy")
    monkeypatch.setattr(backend, "gpu_available", lambda: True)
    monkeypatch.setattr(device, "device_info",
                        lambda: types.SimpleNamespace(name="T4 profile on NVIDIA H100", compute_capability=capability))
    problem = hopper.hopper_problem()
    assert (problem is None) == runs
    if not runs:
        assert f"T4 profile on NVIDIA H100 has compute capability {capability}" in problem

