"""CPU tests of single_pass_scan_v2 (kernels/cuda/scan/large_scan.cu): every configuration that
SinglePassScanV2 can launch compiles for the T4 (sm_75) and the H100 (sm_90) with NVRTC, with no
spills, no stack frame and static shared memory within the 48 KiB limit, and uses the
instructions its comment describes. Exactness is tested on the CPU backend and on GPUs in tests/kernel_checks/test_scan_kernels.py.
"""
from __future__ import annotations

import functools
import re

import pytest

from kernels.chapters import scan as sc
from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.sources import source
from tooling.fresh_reports import fresh_reports

ARCHS = ["sm_75", "sm_90"]
V2 = [f"single_pass_scan_v2<int, {t}, {i}>" for t, i in sc.SINGLE_PASS_V2_CONFIGS]

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


@functools.lru_cache(maxsize=None)
def compiled(arch: str):
    return compile_cuda(source(sc.SCAN_FILE), arch, name_expressions=tuple(V2),
                        filename=sc.SCAN_FILE).raise_for_errors()


def _kernel_body(code: str, name: str) -> str:
    start = code.index(f"{name}(")
    return code[start:code.index("\n}\n", start)]


def test_configs_are_instantiated_in_the_source():
    code = source(sc.SCAN_FILE)
    listed = set()
    for line in re.findall(r"^\s*//\s*name_expressions\s*:\s*(.+?)\s*$", code, flags=re.M):
        listed |= {e.strip() + ("" if e.strip().endswith(">") else ">") for e in line.split(">,")}
    assert set(V2) <= listed
    assert len(set(sc.SINGLE_PASS_V2_CONFIGS)) == len(sc.SINGLE_PASS_V2_CONFIGS)


def test_single_pass_v2_has_three_block_barriers_and_bounded_spin():
    body = _kernel_body(source(sc.SCAN_FILE), "single_pass_scan_v2")
    assert body.count("__syncthreads()") == 3
    look_back = _kernel_body(source(sc.SCAN_FILE), "look_back_v2")
    assert "LOOK_BACK_SPIN_LIMIT" in look_back and "__trap()" in look_back


@pytest.fixture(scope="module")
def spill_reports():
    """Compared exactly, so compiled in fresh processes (tooling.fresh_reports says why)."""
    return fresh_reports([sc.SCAN_FILE], ARCHS, name_expressions=V2)


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_v2_compiles_without_spills(arch, spill_reports):
    assert compiled(arch).cubin
    resources = spill_reports[(sc.SCAN_FILE, arch)]
    assert set(V2) <= set(resources)
    for name in V2:
        report = resources[name]
        assert report.stack_frame_bytes == 0 and not report.spills, report
        assert report.registers <= 65536 // (2 * int(name.split(",")[1])), report   # 2 blocks/SM fit
        assert report.shared_bytes <= 48 * 1024, report


@needs_nvrtc
def test_v2_instructions():
    ptx = compile_cuda(source(sc.SCAN_FILE), "compute_75", name_expressions=tuple(V2),
                       filename=sc.SCAN_FILE).raise_for_errors().ptx
    v2 = "".join(e for e in ptx.split(".entry")[1:] if e.lstrip().startswith("_Z19single_pass_scan_v2"))
    assert v2
    assert "atom.global.add.u64" in v2                       # dynamic tile index
    assert "st.volatile.global.u64" in v2                    # flag and value in one store
    assert "ld.volatile.global.u64" in v2
    assert "vote.sync.ballot" in v2 and "shfl.sync.up" in v2
    assert "ld.global.nc.v4" in v2 or "ld.global.v4" in v2   # 16-byte loads
    assert "st.global.v4" in v2                              # 16-byte stores
    assert "ld.shared.v4" in v2 and "st.shared.v4" in v2     # 16-byte staging
    assert "trap" in v2                                      # the bounded spin
