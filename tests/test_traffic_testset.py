"""The analysis of the test-set kernels against tests/tooling/ncu_h100.json.

Until a GPU run is recorded the file holds expectations derived by hand from the kernels' index
arithmetic ("source": "analytic"); after benchmarks/ncu_validate.py has run on a GPU it holds what
Nsight Compute measured ("source": "ncu") and the same tests check the model against the hardware:
sectors and requests exactly, wavefronts and bank conflicts within 10 %.
"""
from __future__ import annotations

import importlib.util
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from kernels.sources import source
from tooling import traffic_testset as testset

pytestmark = pytest.mark.skipif(importlib.util.find_spec("kernels.cpu") is None, reason="needs the CPU backend")

EXPECTED = testset.expectations()
FENCES = EXPECTED.get("warp_fences") or "syncwarp"


@pytest.fixture(scope="module")
def reports() -> dict:
    """Every test-set and race kernel analysed once (two at a time: the compiler runs in a subprocess)."""
    kernels = [*testset.TEST_SET, *testset.RACE_SET]
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda k: testset.analyze_kernel(k, warp_fences=FENCES), kernels))
    return {k.name: r for k, r in zip(kernels, done)}


def test_the_expectations_cover_the_test_set():
    assert EXPECTED["source"] in ("analytic", "ncu")
    assert set(EXPECTED["kernels"]) == {k.name for k in testset.TEST_SET}
    assert set(EXPECTED["races"]) == {k.name for k in testset.RACE_SET}
    if EXPECTED["source"] == "ncu":
        assert EXPECTED["gpu"] and EXPECTED["date"]


@pytest.mark.parametrize("kernel", testset.TEST_SET, ids=lambda k: k.name)
def test_metrics_match_the_recorded_ones(kernel: testset.TestKernel, reports: dict):
    ours = reports[kernel.name].metrics()
    recorded = EXPECTED["kernels"][kernel.name]["metrics"]
    measured = EXPECTED["source"] == "ncu"
    wrong = [f"{m}: ours {ours.get(m, 0)}, recorded {v}" for m, v in recorded.items()
             if not (measured and m in kernel.informational) and not testset.matches(m, ours.get(m, 0), v)]
    assert not wrong, f"{kernel.name} ({kernel.what}): " + "; ".join(wrong)
    if not measured:  # the hand derivation lists every metric that is not zero
        assert {m for m, v in ours.items() if v and m in testset.RULES} <= set(recorded)


@pytest.mark.parametrize("kernel", testset.RACE_SET, ids=lambda k: k.name)
def test_planted_races_are_found_and_only_those(kernel: testset.RaceKernel, reports: dict):
    races = reports[kernel.name].races
    assert bool(races) == EXPECTED["races"][kernel.name]["racy"], [str(r) for r in races]
    for race in races:
        assert race.space == ("shared" if kernel.shared else "global")


def test_races_name_the_lines_and_threads(reports: dict):
    code = source("traffic/races.cu")
    start = code.index("void missing_barrier")
    write = code.count("\n", 0, code.index("s[t] = x[i];", start)) + 1
    read = code.count("\n", 0, code.index("y[i] = s[(t + 1)", start)) + 1
    race = reports["missing_barrier"].races[0]
    assert {race.first.site.line, race.second.site.line} == {write, read}
    assert race.first.site.function == "missing_barrier"
    text = str(race)
    assert f"traffic/races.cu:{write}" in text and f"traffic/races.cu:{read}" in text
    assert re.search(r"thread \(\d+, 0, 0\) writes it", text) and "reads it" in text
    tail = reports["warp_tail"].races
    assert tail and all(r.same_warp for r in tail) and "__syncwarp()" in str(tail[0])


def test_bank_conflicts_grow_with_the_stride(reports: dict):
    ways = [reports[f"bank_stride_{s}"].lines for s in (1, 2, 4, 8, 32)]
    worst = [max(r.max_ways for r in lines if r.space == "shared" and r.op == "load") for lines in ways]
    assert worst == [1, 2, 4, 8, 32]


def test_the_coalescing_story_in_one_table(reports: dict):
    naive = {(r.names, r.op): r for r in reports["transpose_naive"].lines}
    assert naive[("out", "store")].sectors_per_request == 32 and naive[("in", "load")].sectors_per_request == 4
    tiled = {(r.names, r.space, r.op): r for r in reports["transpose_tiled"].lines}
    assert tiled[("tile", "shared", "load")].max_ways == 32
    padded = {(r.names, r.space, r.op): r for r in reports["transpose_padded"].lines}
    assert padded[("tile", "shared", "load")].max_ways == 1
    assert any("32 sectors per request where 4 suffice" in a for a in reports["transpose_naive"].advice())
