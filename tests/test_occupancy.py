"""Occupancy by hand from the documented rules (Programming Guide limits, cuda_occupancy.h allocation)."""
from __future__ import annotations

import json
import re

import pytest

from kernels.occupancy import GpuLimits, occupancy, occupancy_explorer, occupancy_records

KB = 1024
H100 = GpuLimits.for_compute_capability("9.0")
T4 = GpuLimits.for_compute_capability("7.5")


def test_tables_match_the_programming_guide():
    assert (H100.max_threads_per_sm, H100.max_warps_per_sm, H100.max_blocks_per_sm) == (2048, 64, 32)
    assert (H100.shared_per_sm, H100.max_shared_per_block, H100.reserved_shared_per_block) == (228 * KB, 227 * KB, KB)
    assert (T4.max_threads_per_sm, T4.max_warps_per_sm, T4.max_blocks_per_sm) == (1024, 32, 16)
    assert (T4.shared_per_sm, T4.max_shared_per_block, T4.reserved_shared_per_block) == (64 * KB, 64 * KB, 0)
    a100, ga102, ada = (GpuLimits.for_compute_capability(c) for c in ("8.0", "8.6", "8.9"))
    assert (a100.max_warps_per_sm, a100.max_blocks_per_sm, a100.shared_per_sm) == (64, 32, 164 * KB)
    assert (ga102.max_warps_per_sm, ga102.max_blocks_per_sm, ga102.shared_per_sm) == (48, 16, 100 * KB)
    assert (ada.max_warps_per_sm, ada.max_blocks_per_sm, ada.max_shared_per_block) == (48, 24, 99 * KB)
    for lim in (H100, T4, a100):
        assert (lim.regs_per_sm, lim.max_regs_per_thread, lim.reg_alloc_unit) == (65536, 255, 256)
    assert GpuLimits.for_compute_capability((9, 0)) == H100 == GpuLimits.for_compute_capability("90")
    with pytest.raises(ValueError):
        GpuLimits.for_compute_capability("3.0")


def test_full_occupancy_limited_by_warps():
    occ = occupancy(256, 32, 0, H100)
    # 8 warps/block; 32 regs*32 = 1024 regs/warp, 16384/1024 = 16 warps per quarter -> 64 warps -> 8 blocks
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.occupancy) == (8, 64, 1.0)
    assert occ.limiter == "warps" and occ.block_limits["registers"] == 8
    assert occ.registers_per_block == 8192 and occ.shared_per_block == KB  # the reserve alone


def test_unknown_registers_or_shared_memory_give_an_upper_bound_that_says_so():
    """A resource report made without a compiler has None for both; the chapters pass them on."""
    occ = occupancy(512, None, None, H100)
    assert (occ.blocks_per_sm, occ.percent) == (4, 100.0)  # only the warp slots count
    assert occ.limiter == "warps (an upper bound: registers and shared memory unknown)"
    assert "registers" not in occ.block_limits and "shared memory" not in occ.block_limits
    assert "unknown" in occ.explanation
    known_smem = occupancy(256, None, 100 * KB, H100)  # the shared memory it knows still limits
    assert known_smem.blocks_per_sm == occupancy(256, 0, 100 * KB, H100).blocks_per_sm == 2
    assert known_smem.limiter == "shared memory (an upper bound: registers unknown)"
    assert occupancy(256, 64, None, H100).limiter.startswith("registers (an upper bound: shared memory unknown)")
    assert not occupancy(2048, None, None, H100).valid  # what is known to be invalid stays invalid


def test_registers_halve_occupancy():
    occ = occupancy(256, 64, 0, H100)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.percent) == (4, 32, 50.0)
    assert occ.limiter == "registers" and "registers" in occ.explanation


def test_big_block_with_64_registers_fits_once():
    occ = occupancy(1024, 64, 0, H100)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.percent, occ.limiter) == (1, 32, 50.0, "registers")


def test_register_rounding_per_warp_and_per_quarter():
    # 40 regs -> 1280/warp; 16384 // 1280 = 12 warps per quarter -> 48 warps (not 65536 // 1280 = 51)
    occ = occupancy(256, 40, 0, H100)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.limiter) == (6, 48, "registers")
    # 33 regs round up to 1280/warp too (33*32 = 1056 -> 1280)
    assert occupancy(256, 33, 0, H100).blocks_per_sm == 6
    # 37 regs, 96 threads (3 warps): 1184 -> 1280/warp, 48 warps / 3 = 16 blocks
    assert occupancy(96, 37, 0, H100).blocks_per_sm == 16


def test_too_many_registers_for_one_block_fails():
    occ = occupancy(1024, 65, 0, H100)  # 65*32 = 2080 -> 2304/warp, x32 warps = 73728 > 65536
    assert occ.blocks_per_sm == 0 and occ.limiter == "registers" and "launch fails" in occ.explanation
    # 3 warps are checked as 4 (the hardware assumes every quarter): 255 regs -> 8192/warp x 4 = 32768 fits
    assert occupancy(96, 255, 0, H100).blocks_per_sm == 2


def test_small_blocks_hit_the_block_limit():
    occ = occupancy(32, 32, 0, T4)
    assert (occ.blocks_per_sm, occ.warps_per_sm, occ.percent, occ.limiter) == (16, 16, 50.0, "blocks")
    assert occupancy(32, 32, 0, H100).blocks_per_sm == 32


def test_t4_limits():
    occ = occupancy(256, 32, 0, T4)  # 32 warps/SM on Turing -> 4 blocks
    assert (occ.blocks_per_sm, occ.occupancy, occ.limiter) == (4, 1.0, "warps")
    occ = occupancy(256, 32, 32 * KB, T4)  # 64 KB / 32 KB (no reserve on 7.x)
    assert (occ.blocks_per_sm, occ.limiter) == (2, "shared memory")
    assert occupancy(256, 32, 32 * KB - 100, T4).shared_per_block == 32 * KB  # 256-byte unit


def test_shared_memory_reserve_on_hopper():
    # 114 KB + 1 KB reserve = 115 KB: 228 // 115 = 1 (it would be 2 without the reserve)
    occ = occupancy(256, 32, 114 * KB, H100)
    assert (occ.blocks_per_sm, occ.limiter, occ.shared_per_block) == (1, "shared memory", 115 * KB)
    # 76 KB -> 77 KB: 2 blocks, not 3
    assert occupancy(256, 32, 76 * KB, H100).blocks_per_sm == 2
    # 48 KB -> 49 KB: 4 blocks = 32 warps = 50 %
    occ = occupancy(256, 32, 48 * KB, H100)
    assert (occ.blocks_per_sm, occ.percent) == (4, 50.0)
    # 128-byte unit: 10 bytes + 1 KB -> 1152 bytes
    assert occupancy(256, 32, 10, H100).shared_per_block == 1152
    # the whole opt-in maximum still fits once
    assert occupancy(1024, 32, 227 * KB, H100).blocks_per_sm == 1


def test_invalid_inputs_give_zero_with_a_reason():
    for args, limiter in [((1025, 32, 0), "threads"), ((0, 32, 0), "threads"), ((256, 256, 0), "registers"),
                          ((256, 32, 228 * KB), "shared memory"), ((256, 32, 65 * KB, T4), "shared memory")]:
        lim = args[3] if len(args) == 4 else H100
        occ = occupancy(*args[:3], lim)
        assert occ.blocks_per_sm == 0 and not occ.valid and occ.limiter == limiter and occ.explanation


def test_limits_as_string():
    assert occupancy(256, 64, 0, "9.0") == occupancy(256, 64, 0, H100)


def test_from_device_prefers_reported_values(monkeypatch):
    import types

    fake = types.SimpleNamespace(name="Fake GPU", compute_capability="8.6", max_threads_per_sm=1536,
                                 max_blocks_per_sm=16, regs_per_sm=65536, shared_per_sm=100 * KB,
                                 shared_per_block_optin=99 * KB, sm_count=84)
    device = types.ModuleType("kernels.device")
    device.device_info = lambda: fake
    monkeypatch.setitem(__import__("sys").modules, "kernels.device", device)
    lim = GpuLimits.from_device()
    assert lim.name == "Fake GPU" and lim.max_warps_per_sm == 48 and lim.shared_alloc_unit == 128
    fake.compute_capability, fake.max_threads_per_sm = "12.0", 1536
    newer = GpuLimits.from_device()  # not tabulated: allocation rules of the newest known capability
    assert newer.compute_capability == "12.0" and newer.reserved_shared_per_block == KB


def test_explorer_grid_and_size():
    e = occupancy_explorer(H100)
    html = e.html()
    assert len(html) < 300_000
    assert e.values("threads per block") == list(range(32, 1025, 32))
    regs = e.values("registers per thread")
    assert regs[0] == 16 and regs[-1] == 255 and 32 in regs and 64 in regs
    assert e.values("shared KB per block")[-1] == 227
    assert e.controls == ["registers per thread", "shared KB per block"]
    assert e.readout == ["blocks/SM", "warps/SM", "limiter"]
    data = json.loads(re.search(r'course-explorer-data">(.*?)</script>', html, re.S).group(1))
    assert data["data"]["n"] == len(e.records)


def test_explorer_records_agree_with_occupancy():
    records = occupancy_records(T4)  # 128 regs: 4096/warp, 4 warps per quarter -> 16 warps -> 2 blocks
    point = next(r for r in records if (r["threads per block"], r["registers per thread"],
                                        r["shared KB per block"]) == (256, 128, 0))
    assert point["occupancy %"] == 50.0 and point["blocks/SM"] == 2 and point["limiter"] == "registers"
    failed = next(r for r in records if (r["threads per block"], r["registers per thread"]) == (1024, 72))
    assert "occupancy %" not in failed and "launch fails" in failed["note"]
