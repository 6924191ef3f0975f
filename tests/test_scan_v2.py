"""CPU tests of single_pass_scan_v2 and single_pass_scan_backoff (kernels/cuda/scan/large_scan.cu):
every configuration that SinglePassScanV2 and SinglePassScanBackoff can launch compiles for the T4 (sm_75) and the H100 (sm_90) with NVRTC, with no
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
BACKOFF = [f"single_pass_scan_backoff<int, {t}, {i}, {w}, {p}>" for t, i, w, p in sc.SINGLE_PASS_BACKOFF_CONFIGS]

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


@functools.lru_cache(maxsize=None)
def compiled(arch: str):
    return compile_cuda(source(sc.SCAN_FILE), arch, name_expressions=tuple(V2 + BACKOFF),
                        filename=sc.SCAN_FILE).raise_for_errors()


def _kernel_body(code: str, name: str) -> str:
    start = code.index(f"{name}(")
    return code[start:code.index("\n}\n", start)]


def test_configs_are_instantiated_in_the_source():
    code = source(sc.SCAN_FILE)
    listed = set()
    for line in re.findall(r"^\s*//\s*name_expressions\s*:\s*(.+?)\s*$", code, flags=re.M):
        listed |= {e.strip() + ("" if e.strip().endswith(">") else ">") for e in line.split(">,")}
    assert set(V2) <= listed and set(BACKOFF) <= listed
    assert len(set(sc.SINGLE_PASS_V2_CONFIGS)) == len(sc.SINGLE_PASS_V2_CONFIGS)


def test_single_pass_v2_has_three_block_barriers_and_bounded_spin():
    body = _kernel_body(source(sc.SCAN_FILE), "single_pass_scan_v2")
    assert body.count("__syncthreads()") == 3
    look_back = _kernel_body(source(sc.SCAN_FILE), "look_back_v2")
    assert "LOOK_BACK_SPIN_LIMIT" in look_back and "__trap()" in look_back


@pytest.fixture(scope="module")
def spill_reports():
    """Compared exactly, so compiled in fresh processes (tooling.fresh_reports says why)."""
    return fresh_reports([sc.SCAN_FILE], ARCHS, name_expressions=V2 + BACKOFF)


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


def test_backoff_waits_after_publishing_and_keeps_the_tile_in_shared_memory():
    """The aggregate goes out before the sleep (successors can use it while this tile waits), the
    poll sleep comes after a failed poll only, and the tile is re-read from shared memory after the
    third barrier instead of being held in registers across the look-back."""
    look = _kernel_body(source(sc.SCAN_FILE), "look_back_backoff")
    publish, sleep, poll = (look.index("FLAG_AGGREGATE"), look.index("__nanosleep(WAIT_NS)"),
                            look.index("*(volatile unsigned long long*)(status + j)"))
    assert publish < sleep < poll
    assert look.index("if ((invalid & upto) == 0) break;") < look.index("__nanosleep(POLL_NS)")
    assert "LOOK_BACK_SPIN_LIMIT" in look and "__trap()" in look
    body = _kernel_body(source(sc.SCAN_FILE), "single_pass_scan_backoff")
    assert body.count("__syncthreads()") == 3 and "look_back_backoff<T, WAIT_NS, POLL_NS>" in body
    after = body[body.rindex("__syncthreads()"):]
    assert "my[chunk_slot(lane * CHUNKS + c)]" in after and "items[" not in body


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_backoff_fits_its_launch_bounds(arch, spill_reports):
    """No spills; on sm_90 the register count lets 1536 / THREADS blocks share an SM, as the launch
    bounds ask (a T4 holds at most 1024 threads per SM, so there the bound cannot be met and is not
    checked)."""
    resources = spill_reports[(sc.SCAN_FILE, arch)]
    for name in BACKOFF:
        report = resources[name]
        assert report.stack_frame_bytes == 0 and not report.spills, report
        assert report.shared_bytes <= 48 * 1024, report
        if arch == "sm_90":
            assert report.registers * 1536 <= 65536, report


@needs_nvrtc
def test_backoff_sleeps_only_when_asked():
    ptx = compile_cuda(source(sc.SCAN_FILE), "compute_75", name_expressions=tuple(BACKOFF),
                       filename=sc.SCAN_FILE).raise_for_errors().ptx
    entries = {e.split("(")[0].strip(): e for e in ptx.split(".entry")[1:] if "single_pass_scan_backoff" in e.split("(")[0]}
    sleeps = {name: e.count("nanosleep.u32") for name, e in entries.items()}
    assert len(sleeps) == len(BACKOFF)
    eager = [name for name in sleeps if name.endswith("Li0ELi0EEvPKT_PS0_Pyi")]
    assert len(eager) == 1 and sleeps[eager[0]] == 0
    assert sum(1 for count in sleeps.values() if count >= 2) == 2     # waits and polls
    assert sum(1 for count in sleeps.values() if count == 1) == 1     # waits only (poll_ns = 0)
