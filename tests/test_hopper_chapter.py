"""CPU tests of the Hopper chapter's plumbing: the recorded run it shows where no Hopper GPU is (equal to
the benchmark's JSON, and printed after one line saying what the cell needs), the measuring module's
pure-Python parts (rates, tolerance, error map, tables, the sweep's points), and the diagrams.

The kernels themselves are tested in tests/test_hopper.py (compiled for sm_90a) and measured by
benchmarks/bench_hopper.py on an H100 or H200.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from kernels.chapters import hopper  # noqa: E402
from kernels.chapters.gemm import fp16_tolerance  # noqa: E402
from kernels.chapters.hopper import bench as hb  # noqa: E402
from kernels.chapters.hopper import diagrams as dh  # noqa: E402
from kernels.chapters.hopper import recorded as hopper_recorded  # noqa: E402
from kernels.portable import SKIPPED  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ the recorded run

def test_the_recorded_module_equals_the_benchmarks_json():
    assert hopper_recorded.RECORDS == json.loads((ROOT / hopper_recorded.SOURCE).read_text())
    assert hopper_recorded.GPU in (ROOT / hopper_recorded.SOURCE.replace(".json", ".txt")).read_text()


def test_the_recorded_module_is_what_the_generator_writes(tmp_path: Path):
    text = hb.recorded_module_text(hopper_recorded.RECORDS, hopper_recorded.GPU, hopper_recorded.SOURCE,
                                   hopper_recorded.WMMA_RUNG)
    assert text == (ROOT / "kernels" / "chapters" / "hopper" / "recorded.py").read_text()


def test_the_wmma_rung_is_the_gemm_chapters_recorded_number():
    """The ladder's first rung is cited from the GEMM chapter's run on the same GPU: its printed table."""
    rung = hopper_recorded.WMMA_RUNG
    notebook = json.loads((ROOT / rung["source"]).read_text())
    assert notebook["metadata"]["course"]["provenance"]["gpu"] == rung["gpu"] == hopper_recorded.GPU
    printed = "".join("".join(o.get("text", "")) for c in notebook["cells"] if c["cell_type"] == "code"
                      for o in c.get("outputs", []))
    row = re.search(r"^8 tensor cores \(WMMA, pipelined\) +(\d+) \([\d.]+ %\) +(\d+) \([\d.]+ %\) +(\d+)", printed,
                    re.M)
    assert row, "the GEMM chapter's run prints no rung-8 table"
    assert rung["gflops"]["4096x4096x4096"] == int(row.group(1))
    assert rung["gflops"]["2048x2048x2048"] == int(row.group(3))
    assert f"cited from {rung['source']}, measured on an {rung['gpu']}" in hb.ladder_table(hb.recorded())


def test_cells_without_hopper_say_what_they_need_in_one_line_then_show_the_recorded_run(capsys):
    assert hopper.hopper_problem() is not None  # these tests run without a Hopper GPU
    assert hb.runs_here("the TMA tile copy") is False
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 1
    assert said[0].startswith(SKIPPED.split("{what}")[0]) and "H100 or H200" in said[0]
    assert f"recorded run on an {hopper_recorded.GPU}" in said[0]
    hb.show_recorded(hb.copy_lines(hb.recorded()))
    lines = capsys.readouterr().out.splitlines()
    tma = next(line for line in lines if line.startswith("tma_copy_tma_store<64, 128>") and "8192x8192" in line)
    record = next(r for r in hopper_recorded.RECORDS if r["kernel"] == "tma_copy_tma_store<64, 128>"
                  and r["size"] == "8192x8192")
    assert f"{record['gbps']:.0f} GB/s" in tma and f"{record['ms'] * 1e3:.1f} us" in tma


def test_recorded_gemm_lines_match_the_json_and_keep_kernels_apart():
    lines = hb.recorded_gemm_lines("gemm_wgmma")
    assert lines and all(line.startswith("gemm_wgmma ") or line.startswith("gemm_wgmma:") for line in lines)
    record = next(r for r in hopper_recorded.RECORDS if r["kernel"] == "gemm_wgmma" and r["size"] == "4096x4096x4096")
    cublas = next(r for r in hopper_recorded.RECORDS if r["kernel"] == hb.CUBLAS and r["size"] == "4096x4096x4096")
    line = next(line for line in lines if "4096x4096x4096" in line)
    assert f"{record['tflops']:.0f} TFLOP/s" in line
    assert f"{100 * cublas['ms'] / record['ms']:.0f} % of cuBLAS" in line
    assert all("<" in line for line in hb.recorded_gemm_lines("gemm_wgmma_pipelined"))


def test_a_missing_measurement_is_said_not_invented(capsys):
    hb.show_recorded(hb.recorded_gemm_lines("no_such_kernel"))
    assert "no such measurement yet" in capsys.readouterr().out


# ------------------------------------------------------------------------------ measuring, pure Python

def test_rates():
    assert hb.tflops(4096, 4096, 4096, 0.2) == pytest.approx(2 * 4096**3 / 0.2e-3 / 1e12)
    assert hb.copy_gbps(8192, 8192, 0.0675) == pytest.approx(2 * 8192 * 8192 * 2 / 0.0675e-3 / 1e9)
    with pytest.raises(ValueError, match="positive"):
        hb.tflops(1, 1, 1, 0)
    assert hb.parse_size("4096x2048x1000") == (4096, 2048, 1000)
    with pytest.raises(ValueError, match="size label"):
        hb.parse_size("refusal")


def test_the_check_accepts_the_fp32_rounding_of_a_right_product_and_rejects_a_wrong_one():
    """An fp32 C rounded from the exact product is within fp16_tolerance(K); a C with one wrong
    8 x 8 block is not, and the error map marks exactly that block; NaN left from the fill is 'n'."""
    rng = np.random.default_rng(7)
    M, N, K = 64, 128, 256
    A = rng.uniform(-1, 1, (M, K)).astype(np.float16).astype(np.float64)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float16).astype(np.float64)
    ref = A @ B
    passed, detail = hb.compare_gemm(ref.astype(np.float32), ref, K, "C")
    assert passed and detail.startswith("ok")
    wrong = ref.astype(np.float32)
    wrong[8:16, 16:24] += 1.0
    wrong[0:8, 120:128] = np.nan
    passed, detail = hb.compare_gemm(wrong, ref, K, "C")
    assert not passed and "FAIL" in detail
    rows = hb.error_map(wrong, ref, fp16_tolerance(K)).split("\n")
    assert [r.strip() for r in rows] == ["." * 15 + "n", "..x" + "." * 13] + ["." * 16] * 6


def test_the_tolerance_grows_with_k():
    assert fp16_tolerance(64) < fp16_tolerance(4096) < fp16_tolerance(8192)


RECORDS = [
    {"kind": "gemm", "kernel": hb.CUBLAS, "size": "4096x4096x4096", "status": "ok", "ms": 0.2, "ms_b2b": 0.19,
     "tflops": hb.tflops(4096, 4096, 4096, 0.2)},
    {"kind": "gemm", "kernel": "gemm_wgmma", "size": "4096x4096x4096", "status": "ok", "ms": 0.4, "ms_b2b": 0.38,
     "tflops": hb.tflops(4096, 4096, 4096, 0.4)},
    {"kind": "gemm", "kernel": "gemm_wgmma", "size": "64x128x16", "status": "ok", "probe": True},
    {"kind": "gemm", "kernel": "gemm_wgmma_specialised<256, 4, 2, 1>", "size": "4096x4096x4096", "status": "ok",
     "ms": 0.25, "ms_b2b": 0.2, "tflops": hb.tflops(4096, 4096, 4096, 0.25)},
    {"kind": "gemm", "kernel": "gemm_wgmma_specialised<128, 6, 1, 0>", "size": "4096x4096x4096", "status": "fail",
     "detail": "rel. error 1"},
]


def test_the_ladder_table_gives_shares_of_cublas_in_both_timing_methods():
    text = hb.ladder_table(RECORDS, sizes=[(4096, 4096, 4096), (8192, 8192, 8192)])
    flushed, b2b = text.split("\n\n")[:2]
    assert flushed.splitlines()[0].split()[-2:] == ["4096³", "8192³"]
    wgmma = next(line for line in flushed.splitlines() if line.startswith("2 TMA + wgmma"))
    assert "344 (50 %)" in wgmma and "not recorded" in wgmma
    assert next(line for line in b2b.splitlines() if line.startswith("2 TMA + wgmma")).split()[-3:] == ["50", "%", "-"]
    cluster = next(line for line in flushed.splitlines() if line.startswith("4 cluster of 2"))
    assert "(80 %)" in cluster
    assert "95 %" in next(line for line in b2b.splitlines() if line.startswith("4 cluster of 2"))  # 0.19 / 0.2
    assert not any(line.startswith("3 ring") for line in text.splitlines())  # not in the records: no row
    assert max(len(line) for line in text.splitlines()) <= 90  # fits the page's output column


def test_the_benchmark_table_leaves_out_probes_and_compares_with_the_same_runs_cublas():
    lines = hb.table(RECORDS).splitlines()
    assert len(lines) == 1 + len(RECORDS) - 1
    wgmma = next(line for line in lines if line.startswith("gemm_wgmma "))
    assert "50 % cuBLAS" in wgmma and "400.0" in wgmma and "50 %" in wgmma.split("cuBLAS")[-1]


def test_the_best_rung_is_the_fastest_own_kernel_that_passed():
    assert hb.best_rung(RECORDS, "4096x4096x4096")["kernel"] == "gemm_wgmma_specialised<256, 4, 2, 1>"


def test_sweep_points_come_from_the_specialised_kernel_when_recorded_else_from_the_pipelined_one():
    name, points = hb.sweep_records(RECORDS)
    assert name == "gemm_wgmma_specialised"
    assert points == [{"block_cols": 256, "stages": 4, "cluster": 2, "TFLOP/s": round(hb.tflops(4096, 4096, 4096, 0.25), 1),
                       "time us": 250.0, "smem KB": 192, "% of cuBLAS": 80.0, "b2b us": 200.0}]
    name, points = hb.sweep_records(hopper_recorded.RECORDS)
    if not any(r["kernel"].startswith("gemm_wgmma_specialised") for r in hopper_recorded.RECORDS):
        assert name == "gemm_wgmma_pipelined" and {p["cluster"] for p in points} == {1}
    assert points and all(p["TFLOP/s"] > 0 for p in points)


def test_histogram_records_and_lines():
    ok = hb.histogram_record(2, 65536, 2**26, 0.5)
    assert ok["gvalues"] == pytest.approx(2**26 / 0.5e-3 / 1e9) and ok["kernel"] == "histogram_cluster<2>"
    refused = hb.histogram_record(1, 262144, 2**26, None, "refused", "too many bins for one block")
    lines = hb.histogram_lines([ok, refused])
    assert "Gvalue/s" in lines[0] and "refused: too many bins" in lines[1]


def test_read_records_refuses_what_is_not_a_benchmark_file(tmp_path: Path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"kernel": "x"}))
    with pytest.raises(ValueError, match="not a list of benchmark records"):
        hb.read_records(path)


# ------------------------------------------------------------------------------ diagrams

def test_the_swizzle_grid_is_the_xor_pattern_and_every_slot_column_holds_eight_chunks():
    grid = dh.swizzle_grid()
    assert grid.tolist() == [[slot ^ row for slot in range(8)] for row in range(8)]
    assert all(sorted(grid[:, slot]) == list(range(8)) for slot in range(8))


def test_the_accumulator_grid_gives_every_element_one_owner():
    thread, register = dh.accumulator_grid(16)
    assert (thread >= 0).all() and (register >= 0).all()
    owners = {(int(t), int(r)) for t, r in zip(thread.ravel(), register.ravel())}
    assert len(owners) == 64 * 16                          # no element held twice
    assert (thread // 32 == np.arange(64)[:, None] // 16).all()  # warp w holds rows 16w..16w+15


@pytest.mark.parametrize("figure", [dh.swizzle_figure, dh.accumulator_figure, dh.ring_figure])
def test_the_diagrams_build(figure):
    fig = figure()
    assert fig.axes and 4.5 <= fig.get_figwidth() <= 10  # narrow enough for a phone, wide enough for a desk


def test_the_ladder_figure_draws_every_recorded_rung():
    sizes = [hb.size_label(*s) for s in hb.LADDER_SIZES]
    rows = dh.ladder_rows(hb.recorded(), hb.LADDER, sizes)
    labels = [label for label, _ in rows]
    assert labels[0] == hb.LADDER[0][0] and hb.LADDER[-2][0] in labels
    fig = dh.ladder_figure(rows, sizes, baseline=hb.LADDER[-2][0], title="t")
    assert len(fig.axes) == 1  # one panel: readable at phone width
    ax = fig.axes[0]
    rungs = [(label, values) for label, values in rows if label != hb.LADDER[-2][0]]
    names = [t.get_text() for t in ax.texts if t.get_fontweight() == "bold"]  # each rung named above its bars
    assert names == [label for label, _ in rungs]
    base = dict(rows)[hb.LADDER[-2][0]]
    assert len(ax.containers) == len(sizes)  # one bar series per size, each bar a share of cuBLAS
    for container, size in zip(ax.containers, sizes):
        for bar, (_, values) in zip(container, rungs):
            expected = 100 * values[size] / base[size] if size in values else np.nan
            assert bar.get_width() == pytest.approx(expected, nan_ok=True)
