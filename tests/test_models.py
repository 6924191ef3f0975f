"""One home for each hardware and numerics model: banks (kernels.traffic.banks), sectors
(kernels.traffic.sectors) and rounding (kernels.numerics).

The chapters, their figures and the exercises use these models under the names their notebooks print
(``dc.bank_conflict_ways``, ``mh.conflict_degree``, ``gm.conflict_ways``, ``red.gamma``, ...); those
names must be the very same objects, not copies that could drift. The per-warp forms must agree with
brute-force counts and with the trace-level forms that were checked against Nsight Compute.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from kernels import numerics
from kernels.chapters import gemm as gm
from kernels.chapters import memory_hierarchy as mh
from kernels.chapters import reduce as red
from kernels.chapters import scan as sc
from kernels.chapters import softmax as smx
from kernels.chapters.coalescing import diagrams as dc
from kernels.chapters.dram_bursts import diagrams as dd
from kernels.cpu import abi
from kernels.grading import exercises as ex
from kernels.grading.exercises import memory_hierarchy as ex_mh
from kernels.traffic import banks, sectors
from kernels.traffic.requests import global_traffic, warp_requests

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


# ------------------------------------------------------------------------------- one definition

@pytest.mark.parametrize("alias", [dc.bank_conflict_ways, sc.bank_conflict_ways, mh.conflict_degree,
                                   gm.conflict_ways, ex_mh.conflict_ways])
def test_chapter_bank_names_are_the_model(alias):
    assert alias is banks.conflict_ways


def test_other_chapter_names_are_the_models():
    assert gm.shared_wavefronts is banks.wavefronts
    assert mh.bank_of is banks.bank_of and mh.BANKS == banks.BANKS == 32
    assert dc.sectors_touched is sectors.sectors_touched and dc.lines_touched is sectors.lines_touched
    assert dc.SECTOR_BYTES == dd.SECTOR_BYTES == sectors.SECTOR_BYTES == 32
    assert dc.LINE_BYTES == dd.LINE_BYTES == sectors.LINE_BYTES == 128
    for module in (red, gm, smx):
        assert module.gamma is numerics.gamma
    assert red.sum_error_bound is numerics.sum_error_bound
    assert smx.UNIT_ROUNDOFF is numerics.UNIT_ROUNDOFF
    assert (gm.FLOAT32_U, gm.FLOAT16_U, gm.BFLOAT16_U, gm.TF32_U) == (
        numerics.FLOAT32_U, numerics.FLOAT16_U, numerics.BFLOAT16_U, numerics.TF32_U)
    assert ex.U32 == numerics.FLOAT32_U


_COPIES = {  # what a second copy of a model looks like in source
    "a float unit roundoff": re.compile(r"2(\.0)?\s*\*\*\s*-(8|11|24)\b"),
    "Higham's gamma": re.compile(r"^def gamma\(", re.M),
    "a bank rule": re.compile(r"%\s*(BANKS|banks|32)\b.*\)\.add\(|def (bank_conflict_ways|conflict_degree|conflict_ways)\("),
    "a sector rule": re.compile(r"def (_units|_touched)\(|def (sectors|lines)_touched\(addresses"),
}
_HOMES = {"numerics.py", "traffic/banks.py", "traffic/sectors.py"}


def test_no_module_keeps_its_own_copy_of_a_model():
    found = []
    for path in sorted(KERNELS.rglob("*.py")):
        rel = path.relative_to(KERNELS).as_posix()
        if rel in _HOMES:
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{rel}: {what}" for what, pattern in _COPIES.items() if pattern.search(text)]
    assert not found, "define these in their model module and import them: " + "; ".join(found)


# ------------------------------------------------------------------------------- banks

def _expected_banks(words: list[int | None], access_bytes: int) -> tuple[int, int]:
    """(wavefronts, ways) counted from scratch: lanes in phases of 128 / access_bytes, each lane's
    words, the distinct (bank, word) pairs of a phase, the busiest bank of each phase."""
    per_lane = access_bytes // 4
    phase_lanes = 128 // access_bytes
    wavefronts = ways = 0
    for start in range(0, 32, phase_lanes):
        touched = {((w + i) % 32, w + i) for w in words[start:start + phase_lanes] if w is not None
                   for i in range(per_lane)}
        if touched:
            busiest = max(Counter(bank for bank, _ in touched).values())
            wavefronts += busiest
            ways = max(ways, busiest)
    return wavefronts, ways


@pytest.mark.parametrize("access_bytes", [4, 8, 16])
def test_bank_model_on_a_grid_of_strides_and_widths(access_bytes):
    """Lane l < active touches the access_bytes-wide element at offset + l * stride (in elements)."""
    per_lane = access_bytes // 4
    for stride in (0, 1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 24, 31, 32, 33, 48, 64, 65):
        for offset in (0, 1, 6):
            for active in (1, 7, 16, 32):
                words = [(offset + lane * stride) * per_lane if lane < active else None for lane in range(32)]
                wavefronts, ways = _expected_banks(words, access_bytes)
                case = (stride, offset, active)
                assert banks.wavefronts(words, access_bytes) == wavefronts, case
                assert banks.conflict_ways(words, access_bytes) == ways, case
                addresses = np.array([-1 if w is None else 4 * w for w in words])
                model = banks.warp_banks(addresses, access_bytes)
                assert (model["wavefronts"], model["ways"]) == (wavefronts, ways), case


@pytest.mark.parametrize("stride", range(0, 70))
def test_four_byte_strides_conflict_gcd_ways(stride):
    """The closed form the chapters teach: a word stride s costs gcd(s, 32) ways (1 for s = 0)."""
    words = [lane * stride for lane in range(32)]
    assert banks.conflict_ways(words) == (1 if stride == 0 else math.gcd(stride, 32))
    assert banks.conflict_ways(np.array(words)) == int(np.bincount(np.unique(words) % 32).max())


def test_bank_model_edges():
    assert banks.conflict_ways([]) == 0 and banks.conflict_ways([None] * 32) == 0
    assert banks.conflict_ways([5] * 32) == 1                                   # a broadcast
    with pytest.raises(ValueError, match="access_bytes"):
        banks.conflict_ways(list(range(32)), 2)
    with pytest.raises(ValueError, match="at most 32"):
        banks.conflict_ways(list(range(33)))
    with pytest.raises(ValueError, match=">= 0"):
        banks.conflict_ways([-1])


SHARED_BASE = 0x7000_0000
GLOBAL_BASE = 0x1000_0000  # a multiple of 256, like cudaMalloc


def _one_warp(addresses: list[int], size: int, space: int) -> np.ndarray:
    """A traced warp-wide access: lane l at addresses[l], one instruction."""
    acc = np.zeros(len(addresses), dtype=np.dtype(abi.TRACE_RECORD))
    acc["addr"], acc["size"], acc["space"], acc["pc"] = addresses, size, space, 1
    acc["thread"] = np.arange(len(addresses))
    return acc


@pytest.mark.parametrize("stride", [0, 1, 2, 3, 8, 16, 17, 32, 33])
@pytest.mark.parametrize("access_bytes", [4, 8, 16])
def test_warp_forms_agree_with_the_trace_forms(stride, access_bytes):
    """The per-warp forms the chapters use give what the trace-level forms (checked against Nsight
    Compute) give for the same warp."""
    words = [lane * stride * access_bytes // 4 for lane in range(32)]
    acc = _one_warp([SHARED_BASE + 4 * w for w in words], access_bytes, abi.SPACE_SHARED)
    bt = banks.bank_traffic(acc, warp_requests(acc))
    assert (bt.wavefronts[0], bt.ways[0]) == (banks.wavefronts(words, access_bytes),
                                              banks.conflict_ways(words, access_bytes))
    addresses = [lane * stride * access_bytes for lane in range(32)]
    acc = _one_warp([GLOBAL_BASE + a for a in addresses], access_bytes, abi.SPACE_GLOBAL)
    gt = global_traffic(acc, warp_requests(acc))
    assert gt.sectors[0] == len(sectors.sectors_touched(addresses, access_bytes))
    assert gt.lines[0] == len(sectors.lines_touched(addresses, access_bytes))


# ------------------------------------------------------------------------------- sectors

@pytest.mark.parametrize("elem_bytes", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("offset", [0, 1, 4, 30])
def test_sector_model_on_a_grid_of_strides_and_widths(elem_bytes, offset):
    for stride in range(0, 40):
        addresses = [offset + lane * stride * elem_bytes for lane in range(32)]
        every_byte = {a + b for a in addresses for b in range(elem_bytes)}
        assert sectors.sectors_touched(addresses, elem_bytes) == sorted({b // 32 for b in every_byte})
        assert sectors.lines_touched(addresses, elem_bytes) == sorted({b // 128 for b in every_byte})
    # the DRAM-bursts chapter's contiguous request: threads t at start + t * width
    start = offset * elem_bytes
    every_byte = range(start, start + 32 * elem_bytes)
    assert dd.sectors_touched(start, elem_bytes) == sorted({b // 32 for b in every_byte})
    assert dd.lines_touched(start, elem_bytes) == sorted({b // 128 for b in every_byte})


def test_sector_model_rejects_bad_input():
    with pytest.raises(ValueError, match="elem_bytes"):
        sectors.sectors_touched([0], 0)
    with pytest.raises(ValueError, match=">= 0"):
        sectors.sectors_touched([-4])


# ------------------------------------------------------------------------------- rounding

def test_unit_roundoffs_are_half_the_spacing_at_one():
    assert numerics.FLOAT32_U == float(np.finfo(np.float32).eps) / 2
    assert numerics.FLOAT16_U == float(np.finfo(np.float16).eps) / 2
    assert numerics.BFLOAT16_U == 2.0 ** -(7 + 1)     # 7 stored significand bits
    assert numerics.TF32_U == 2.0 ** -(10 + 1)        # 10 stored significand bits
    one = np.float32(1)
    assert one + np.float32(numerics.FLOAT32_U) == one                 # a tie rounds to even: 1
    assert one + np.float32(1.5 * numerics.FLOAT32_U) > one


@pytest.mark.parametrize("k", [0, 1, 2, 10, 1000, 2**20, 2**23])
def test_gamma_matches_its_formula(k):
    u = 2.0**-24
    assert numerics.gamma(k) == pytest.approx(k * u / (1 - k * u), rel=1e-15)
    assert numerics.gamma(k, 2.0**-11) == (math.inf if k >= 2**11 else pytest.approx(k * 2**-11 / (1 - k * 2**-11)))
    assert numerics.sum_error_bound(k) == numerics.gamma(k)


def test_gamma_edges():
    assert math.isinf(numerics.gamma(2**24)) and math.isinf(numerics.gamma(2**30))
    with pytest.raises(ValueError, match="roundings"):
        numerics.gamma(-1)


def test_sequential_float32_sums_stay_within_the_bound():
    rng = np.random.default_rng(16)
    for n in (10, 1000, 20000):
        x = rng.uniform(-1, 1, n).astype(np.float32)
        computed = np.cumsum(x, dtype=np.float32)[-1]
        exact = float(np.sum(x.astype(np.float64)))
        assert abs(float(computed) - exact) <= numerics.sum_error_bound(n - 1) * float(np.abs(x).sum())
