"""The traffic model on hand-made traces: warp requests, sectors, banks and races (no compiler needed)."""
from __future__ import annotations

from math import gcd

import numpy as np
import pytest

from kernels.cpu import abi
from kernels.cpu.trace import TracedRange
from kernels.traffic.banks import bank_traffic, warp_banks
from kernels.traffic.lines import Site
from kernels.traffic.races import find_races
from kernels.traffic.record import Recording, SharedSymbol, constant_names, shared_names
from kernels.traffic.requests import ATOMIC, LOAD, STORE, global_traffic, warp_requests

SHARED_BASE = 0x7000_0000
GLOBAL_BASE = 0x1000_0000  # a multiple of 256, like cudaMalloc


def trace(*rows: dict) -> np.ndarray:
    """Accesses from dicts; unset fields are 0 (block 0, epochs 0, global space, 4-byte loads)."""
    acc = np.zeros(len(rows), dtype=np.dtype(abi.TRACE_RECORD))
    for i, row in enumerate(rows):
        acc[i]["size"] = 4
        for key, value in row.items():
            acc[i][key] = value
    return acc


def warp(address_of_lane, *, pc: int = 1, size: int = 4, write: bool = False, space: int = abi.SPACE_GLOBAL,
         lanes=range(32), thread0: int = 0, **extra) -> list[dict]:
    flags = abi.ACCESS_WRITE if write else 0
    return [dict(addr=address_of_lane(l), pc=pc, size=size, flags=flags, space=space, thread=thread0 + l, **extra)
            for l in lanes]


def recording(acc: np.ndarray, block=(64, 1, 1), grid=(1, 1, 1)) -> Recording:
    sites = {int(pc): Site("k.cu", int(pc)) for pc in np.unique(acc["pc"])}
    return Recording(kernel="k", filename="k.cu", code="", grid=grid, block=block, shared_mem=0, accesses=acc,
                     ranges=[TracedRange("x", abi.SPACE_GLOBAL, GLOBAL_BASE, GLOBAL_BASE + (1 << 20), 4, 0)],
                     sites=sites, shared=[SharedSymbol("s", SHARED_BASE, SHARED_BASE + 65536)])


# ---------------------------------------------------------------------------------------- requests

def test_lanes_of_one_instruction_form_one_request():
    req = warp_requests(trace(*warp(lambda l: GLOBAL_BASE + 4 * l)))
    assert len(req) == 1 and req.lanes[0] == 32 and req.op[0] == LOAD


def test_a_loop_gives_one_request_per_iteration_and_warps_stay_apart():
    rows = []
    for lane in range(64):  # lane by lane on the CPU: all iterations of lane 0 first
        for k in range(3):
            rows.append(dict(addr=GLOBAL_BASE + 4 * (lane + 64 * k), pc=7, thread=lane))
    req = warp_requests(trace(*rows))
    assert len(req) == 6 and set(req.lanes.tolist()) == {32}
    assert sorted(req.warp.tolist()) == [0, 0, 0, 1, 1, 1]


def test_divergent_lanes_are_absent_from_the_request():
    req = warp_requests(trace(*warp(lambda l: GLOBAL_BASE + 4 * l, lanes=range(0, 32, 2))))
    assert len(req) == 1 and req.lanes[0] == 16


def test_a_barrier_starts_a_new_count():
    rows = warp(lambda l: GLOBAL_BASE + 4 * l, lanes=range(16)) + \
        warp(lambda l: GLOBAL_BASE + 4 * l, lanes=range(16, 32), barrier=1)
    assert len(warp_requests(trace(*rows))) == 2


def test_an_atomic_read_modify_write_is_one_request():
    rows = []
    for lane in range(32):
        rows.append(dict(addr=GLOBAL_BASE, pc=3, thread=lane, flags=abi.ACCESS_ATOMIC))
        rows.append(dict(addr=GLOBAL_BASE, pc=4, thread=lane, flags=abi.ACCESS_ATOMIC | abi.ACCESS_WRITE))
    req = warp_requests(trace(*rows))
    assert len(req) == 1 and req.op[0] == ATOMIC and req.lanes[0] == 32
    assert (req.instance[1::2] == -1).all()


# ---------------------------------------------------------------------------------------- sectors

@pytest.mark.parametrize("stride", [0, 1, 2, 4, 8, 32])
def test_sectors_of_a_strided_warp(stride: int):
    acc = trace(*warp(lambda l: GLOBAL_BASE + 4 * stride * l))
    gt = global_traffic(acc, warp_requests(acc))
    assert gt.sectors[0] == (1 if stride == 0 else min(4 * stride, 32))
    assert gt.ideal_sectors[0] == (1 if stride == 0 else 4)
    assert gt.bytes_requested[0] == 128 and gt.bytes_unique[0] == (4 if stride == 0 else 128)


def test_misaligned_warp_touches_five_sectors_in_two_lines():
    acc = trace(*warp(lambda l: GLOBAL_BASE + 4 + 4 * l))
    gt = global_traffic(acc, warp_requests(acc))
    assert (gt.sectors[0], gt.lines[0], gt.bytes_moved[0]) == (5, 2, 160)


def test_vector_accesses():
    for size, sectors in ((8, 8), (16, 16)):
        acc = trace(*warp(lambda l: GLOBAL_BASE + size * l, size=size))
        assert global_traffic(acc, warp_requests(acc)).sectors[0] == sectors


def test_addresses_are_taken_relative_to_a_256_byte_aligned_allocation():
    start = GLOBAL_BASE + 16  # the CPU backend's arrays are only 16-byte aligned
    acc = trace(*warp(lambda l: start + 4 * l, range=0))
    rec = recording(acc)
    rec.ranges = [TracedRange("x", abi.SPACE_GLOBAL, start, start + 4096, 4, 0, start)]
    assert global_traffic(acc, warp_requests(acc)).sectors[0] == 5  # the raw CPU addresses
    assert global_traffic(acc, warp_requests(acc), rec.gpu_addresses()).sectors[0] == 4  # as on a GPU


# ---------------------------------------------------------------------------------------- banks

@pytest.mark.parametrize("stride", [0, 1, 2, 3, 4, 8, 16, 32, 33])
def test_bank_ways_of_a_word_stride(stride: int):
    acc = trace(*warp(lambda l: SHARED_BASE + 4 * stride * l, space=abi.SPACE_SHARED))
    bt = bank_traffic(acc, warp_requests(acc))
    ways = 1 if stride == 0 else gcd(stride, 32)
    assert (bt.wavefronts[0], bt.ideal[0], bt.ways[0], bt.excess[0]) == (ways, 1, ways, ways - 1)
    assert warp_banks(4 * stride * np.arange(32))["wavefronts"] == ways


def test_lanes_of_one_word_share_it():
    acc = trace(*warp(lambda l: SHARED_BASE + (l // 4) * 4 + l % 4, size=1, space=abi.SPACE_SHARED))
    assert bank_traffic(acc, warp_requests(acc)).wavefronts[0] == 1


@pytest.mark.parametrize("size, stride, wavefronts", [(8, 1, 2), (8, 2, 4), (16, 1, 4), (16, 2, 8)])
def test_wide_accesses_are_served_in_phases(size: int, stride: int, wavefronts: int):
    acc = trace(*warp(lambda l: SHARED_BASE + size * stride * l, size=size, space=abi.SPACE_SHARED))
    bt = bank_traffic(acc, warp_requests(acc))
    assert bt.ideal[0] == 32 * size // 128
    assert bt.wavefronts[0] == wavefronts
    assert warp_banks(size * stride * np.arange(32), size)["wavefronts"] == wavefronts


def test_half_a_warp_of_8_byte_values_is_one_phase():
    acc = trace(*warp(lambda l: SHARED_BASE + 8 * l, size=8, space=abi.SPACE_SHARED, lanes=range(16)))
    bt = bank_traffic(acc, warp_requests(acc))
    assert (bt.wavefronts[0], bt.ideal[0]) == (1, 1)


# ---------------------------------------------------------------------------------------- races

def shared(thread: int, word: int, *, write: bool = False, pc: int = 1, **extra) -> dict:
    return dict(addr=SHARED_BASE + 4 * word, thread=thread, pc=pc, space=abi.SPACE_SHARED,
                flags=abi.ACCESS_WRITE if write else 0, **extra)


def races_of(*rows: dict, **options) -> list:
    return find_races(recording(trace(*rows)), **options)


def test_write_then_read_by_another_warp_is_a_race():
    found = races_of(shared(40, 3, write=True, pc=10), shared(1, 3, pc=20))
    assert len(found) == 1
    race = found[0]
    assert race.kind == "RAW" and race.space == "shared" and not race.same_warp
    assert race.first.thread == (40, 0, 0) and race.second.thread == (1, 0, 0) and race.lines == (10, 20)
    assert "s[3]" in str(race) and "__syncthreads()" in str(race) and "writes" in str(race)


def test_a_barrier_orders_them():
    assert not races_of(shared(40, 3, write=True), shared(1, 3, barrier=1))


def test_reads_never_race_and_a_thread_never_races_itself():
    assert not races_of(shared(40, 3), shared(1, 3))
    assert not races_of(shared(5, 3, write=True), shared(5, 3))


def test_atomics_race_with_plain_accesses_only():
    atomic = abi.ACCESS_ATOMIC | abi.ACCESS_WRITE
    assert not races_of(dict(shared(1, 0), flags=atomic), dict(shared(40, 0), flags=atomic))
    assert races_of(dict(shared(1, 0), flags=atomic), shared(40, 0))


def test_lanes_of_a_warp_are_ordered_by_syncwarp_only():
    unsynced = (shared(3, 0, write=True, pc=10), shared(4, 0, pc=20))
    assert races_of(*unsynced)[0].same_warp
    assert not races_of(shared(3, 0, write=True), shared(4, 0, syncwarp=1, collective=1))
    shuffled = (shared(3, 0, write=True), shared(4, 0, collective=1))
    assert races_of(*shuffled) and not races_of(*shuffled, warp_fences="collectives")
    with pytest.raises(ValueError, match="warp_fences"):
        races_of(*unsynced, warp_fences="never")


def test_different_bytes_of_one_word_do_not_race():
    rows = [dict(addr=SHARED_BASE + t, size=1, thread=t * 33, space=abi.SPACE_SHARED, flags=abi.ACCESS_WRITE)
            for t in range(4)]
    assert not races_of(*rows)


def test_blocks_never_race_with_each_other():
    assert not races_of(dict(addr=GLOBAL_BASE, thread=1, flags=abi.ACCESS_WRITE, block=0),
                        dict(addr=GLOBAL_BASE, thread=2, block=1))


def test_many_writers_are_counted_once_per_pair():
    rows = [dict(addr=GLOBAL_BASE, thread=t, flags=abi.ACCESS_WRITE, pc=5) for t in range(64)]
    found = {r.same_warp: r for r in races_of(*rows)}
    assert set(found) == {True, False} and all(r.kind == "WAW" and r.space == "global" for r in found.values())
    assert found[True].hazards == 2 * (32 * 31 // 2)  # pairs of lanes within each of the two warps
    assert found[False].hazards == 32 * 32  # pairs across the two warps
    assert found[False].locations == 1 and "x[0]" in str(found[False])


# ---------------------------------------------------------------------------------------- source scan

def test_constant_and_shared_names_come_from_the_source():
    code = ("__constant__ float table_c[256];\n__constant__ int k = 3;\n"
            "__global__ void f() { __shared__ float tile[32][33]; __shared__ int count; }\n"
            "// __constant__ float commented[4];\n")
    assert constant_names(code) == {"table_c", "k"}
    assert shared_names(code) == {"tile", "count"}


def test_ops_are_labelled():
    acc = trace(*warp(lambda l: GLOBAL_BASE + 4 * l, write=True))
    assert warp_requests(acc).op[0] == STORE
