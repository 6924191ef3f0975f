"""The Hopper chapter's measuring: checks, timings, baselines and the recorded run, in one place.

The chapter and ``benchmarks/bench_hopper.py`` both use this module, so that a number on the page and
a number in the benchmark's table come from the same check and the same clock:

- inputs and checks: fp16 inputs drawn from a seeded generator, the float64 product of the
  fp16-rounded inputs as the reference, a NaN-filled C, ``kernels.chapters.gemm.fp16_tolerance(K)``; a
  failing check says where it fails (``error_map``: which 8 x 8 blocks of C's first tile are wrong);
- timings: ``kernels.benchmark`` (CUDA events, warm-up 5, median of 20), once with L2 flushed before
  every launch and once back to back, so a kernel that lives off L2 shows it;
- baselines: cuBLAS fp16 through ``cupy.matmul`` and ``torch.matmul`` (when torch is installed) on
  the same matrices;
- records and tables: one dict per measurement, the format ``bench_hopper.py --out`` writes, and the
  text tables built from them (the ladder from the GEMM chapter's last WMMA rung to the best
  Hopper kernel, the copies, the histograms);
- the recorded run (``kernels.chapters.hopper.recorded``) that every cell shows where no Hopper GPU is.

The pure-Python parts (tolerances, tables, the error map, the record parsing) run anywhere and are
tested in tests/test_hopper_chapter.py; the rest needs CuPy on an H100 or H200.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..gemm import fp16_tolerance
from . import hopper_problem
from ...portable import SKIPPED

Record = dict[str, Any]

#: The three square sizes of the chapter's ladder.
LADDER_SIZES = ((2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192))
#: Small GEMMs that each add one feature: one 16-wide k-slice (descriptor, fragment layout, epilogue),
#: one 64-wide K tile (the descriptor advance inside the swizzled tile), several K tiles and blocks
#: (the mbarrier phases, the stage ring), ragged M and N (TMA's zero fill, the epilogue's bounds).
GEMM_PROBES = ((64, 128, 16), (64, 128, 64), (128, 128, 64), (256, 384, 512), (1000, 1001, 1000))
#: A K that TMA cannot describe (rows of 1001 fp16 are not whole 16-byte units): must be refused.
GEMM_REFUSED = (1000, 1000, 1001)
WARMUP, REPEAT = 5, 20
CUBLAS = "cupy.matmul (cuBLAS fp16)"
TORCH = "torch.matmul (fp16)"
MEMCPY = "cudaMemcpy device to device"


# ------------------------------------------------------------------------------ sizes and rates

def size_label(M: int, N: int, K: int) -> str:
    return f"{M}x{N}x{K}"


def parse_size(label: str) -> tuple[int, ...]:
    """(M, N, K) or (rows, cols) of a record's size label such as "4096x4096x4096"."""
    if not re.fullmatch(r"\d+(x\d+)+", label):
        raise ValueError(f"a size label is numbers joined by 'x', such as 4096x4096x4096, not {label!r}")
    return tuple(int(p) for p in label.split("x"))


def tflops(M: int, N: int, K: int, ms: float) -> float:
    """TFLOP/s of an M x N x K GEMM (2 M N K operations) that took ``ms`` milliseconds."""
    if ms <= 0:
        raise ValueError(f"a time must be positive, not {ms} ms")
    return 2.0 * M * N * K / ms / 1e9


def copy_gbps(rows: int, cols: int, ms: float, element_bytes: int = 2) -> float:
    """GB/s of a copy of a rows x cols array (every byte read once and written once)."""
    if ms <= 0:
        raise ValueError(f"a time must be positive, not {ms} ms")
    return 2.0 * rows * cols * element_bytes / ms / 1e6


# ------------------------------------------------------------------------------ inputs and checks

def gemm_inputs(M: int, N: int, K: int) -> tuple[Any, Any]:
    """A (M x K) and B^T (N x K), fp16, uniform in [-1, 1], the same in every process for a size."""
    import cupy as cp

    rng = cp.random.default_rng(M * 1_000_003 + N * 1009 + K)
    A = rng.uniform(-1.0, 1.0, (M, K), dtype=cp.float32).astype(cp.float16)
    B_t = rng.uniform(-1.0, 1.0, (N, K), dtype=cp.float32).astype(cp.float16)
    return A, B_t


def reference(A: Any, B_t: Any) -> np.ndarray:
    """The float64 product A B of the fp16 inputs (B given as B^T), on the host."""
    import cupy as cp

    return cp.matmul(A.astype(cp.float64), B_t.astype(cp.float64).T).get()


def error_map(got: np.ndarray, ref: np.ndarray, tol: float) -> str:
    """Which 8 x 8 blocks of C's first 64 x 128 tile are wrong ('x'), never written ('n', NaN left
    from the fill) or right ('.'): a wrong fragment layout, a missed k-slice or a bad swizzle each
    leave their own pattern."""
    rows, cols = min(64, got.shape[0]), min(128, got.shape[1])
    scale = max(float(np.sqrt(np.mean(np.asarray(ref, dtype=np.float64) ** 2))), 1e-30)
    lines = []
    for r in range(0, rows, 8):
        line = ""
        for c in range(0, cols, 8):
            g, e = got[r:r + 8, c:c + 8], ref[r:r + 8, c:c + 8]
            if np.isnan(g).any():
                line += "n"
            elif (np.abs(g - e) > tol * np.maximum(np.abs(e), scale)).any():
                line += "x"
            else:
                line += "."
        lines.append("      " + line)
    return "\n".join(lines)


def compare_gemm(got: np.ndarray, ref: np.ndarray, K: int, label: str) -> tuple[bool, str]:
    """(passed, one line) for an fp32 C against the float64 reference, tolerance fp16_tolerance(K);
    a failure adds the error map of the first tile."""
    from ...check import compare

    tol = fp16_tolerance(K)
    result = compare("C", got, ref, tol)
    if result.ok:
        return True, f"ok (rel. error {result.error_text()}, tol {tol:.0e})"
    detail = (f"FAIL: rel. error {result.error_text()} (tol {tol:.0e}), {result.unwritten} of {got.size} never "
              f"written; first mismatches {result.mismatch_text()}")
    return False, f"{detail}\n    {label}: 8 x 8 blocks of the first 64 x 128 tile of C:\n{error_map(got, ref, tol)}"


def check_gemm(run: Callable[[], None], C: Any, A: Any, B_t: Any, label: str = "C") -> tuple[bool, str]:
    """Fill C with NaN, run the kernel once and compare C with the float64 product of A and B."""
    import cupy as cp

    C.fill(cp.nan)
    run()
    cp.cuda.get_current_stream().synchronize()
    return compare_gemm(C.get(), reference(A, B_t), A.shape[1], label)


# ------------------------------------------------------------------------------ timings

def median_ms(fn: Callable[[], Any], flush_l2: bool = True) -> float:
    """Median milliseconds of ``fn`` over REPEAT runs after WARMUP, L2 flushed before each or not."""
    from ...timing import benchmark

    return benchmark(fn, warmup=WARMUP, repeat=REPEAT, flush_l2=flush_l2).median_ms


def both_timings(fn: Callable[[], Any]) -> tuple[float, float]:
    """(L2 flushed, back to back) median milliseconds of ``fn``."""
    return median_ms(fn, True), median_ms(fn, False)


def gemm_record(kernel: str, M: int, N: int, K: int, ms: float, ms_b2b: float | None, **extra: Any) -> Record:
    """One timed GEMM, as bench_hopper.py records it."""
    return {"kind": "gemm", "kernel": kernel, "size": size_label(M, N, K), "status": "ok", "ms": ms,
            "tflops": tflops(M, N, K, ms), "ms_b2b": ms_b2b, **extra}


def library_gemms(A: Any, B_t: Any) -> list[tuple[str, Callable[[], Any]]]:
    """(label, function) of the yardsticks on the same fp16 operands: cuBLAS through cupy.matmul
    (fp32 accumulation), and torch.matmul when torch is installed."""
    import cupy as cp

    B = B_t.T  # a view: cuBLAS reads B^T's memory as a column-major B
    found: list[tuple[str, Callable[[], Any]]] = [(CUBLAS, lambda: cp.matmul(A, B))]
    try:
        import torch
    except ImportError:
        return found
    tA, tB = torch.from_dlpack(A), torch.from_dlpack(B)
    found.append((TORCH, lambda: torch.matmul(tA, tB)))
    return found


def library_records(sizes: Iterable[tuple[int, int, int]] = LADDER_SIZES) -> list[Record]:
    """cuBLAS and torch timed at each size (both methods), their fp16 results checked loosely:
    their C is fp16, so the relative error is that of one fp16 rounding, about 2e-4."""
    import cupy as cp

    records = []
    for M, N, K in sizes:
        A, B_t = gemm_inputs(M, N, K)
        ref = reference(A, B_t)
        scale = float(np.linalg.norm(ref))
        for label, fn in library_gemms(A, B_t):
            err = float(np.linalg.norm(cp.asarray(fn()).astype(cp.float64).get() - ref)) / scale
            ms, b2b = both_timings(fn)
            records.append(gemm_record(label, M, N, K, ms, b2b, rel_error=err))
        del A, B_t, ref
        cp.get_default_memory_pool().free_all_blocks()
    return records


def sweep_measure(A: Any, B_t: Any, C: Any, cublas_ms: float | None) -> Callable[..., Record]:
    """The sweep's measure function on a Hopper GPU: build ``wgmma_specialised(block_cols, stages,
    cluster)``, check it on A and B^T (float64 reference computed once), then time it both ways."""
    from . import gemm_launcher, wgmma_specialised

    ref = reference(A, B_t)
    M, K = A.shape
    N = B_t.shape[0]

    def measure(block_cols: int, stages: int, cluster: int) -> Record:
        import cupy as cp

        kernel = wgmma_specialised(block_cols, stages, cluster)
        run = gemm_launcher(kernel, A, B_t, C)
        C.fill(cp.nan)
        run()
        passed, detail = compare_gemm(C.get(), ref, K, kernel.name)
        if not passed:
            raise AssertionError(detail.splitlines()[0])
        ms, b2b = both_timings(run)
        return sweep_point(block_cols, stages, cluster, ms, b2b, cublas_ms, (M, N, K))

    return measure


def histogram_record(cluster: int, bins: int, n: int, ms: float | None, status: str = "ok",
                     detail: str = "", blocks: int | None = None) -> Record:
    """One histogram measurement: values per second over n values into ``bins`` bins."""
    record: Record = {"kind": "histogram", "kernel": f"histogram_cluster<{cluster}>"
                      + (f", {blocks} blocks" if blocks else ""), "size": f"{bins} bins", "values": n,
                      "bins": bins, "cluster": cluster, "status": status}
    if ms:
        record.update(ms=ms, gvalues=n / ms / 1e6)
    if detail:
        record["detail"] = detail
    return record


# ------------------------------------------------------------------------------ records and tables

def read_records(path: str | Path) -> list[Record]:
    """The records of a ``bench_hopper.py --out`` file."""
    records = json.loads(Path(path).read_text())
    if not isinstance(records, list) or not all(isinstance(r, dict) and "kernel" in r for r in records):
        raise ValueError(f"{path}: not a list of benchmark records (each a dict with a 'kernel')")
    return records


def _ok(records: Iterable[Record]) -> list[Record]:
    return [r for r in records if r.get("status") == "ok" and not r.get("probe") and "ms" in r]


def baseline(records: Iterable[Record], kernel: str, size: str, field: str = "ms") -> float | None:
    """``field`` of ``kernel``'s record at ``size``, or None."""
    return next((r[field] for r in _ok(records) if r["kernel"] == kernel and r["size"] == size
                 and r.get(field)), None)


def table(records: Sequence[Record]) -> str:
    """Every record but the probes, one line each, beside cuBLAS (GEMMs) or the memcpy (copies) of
    the same run: time with L2 flushed, rate, share, and the same share back to back."""
    lines = [f"{'kernel':<36} {'size':<16} {'route':<7} {'check':<8} {'time us':>9} {'rate':>14} {'vs':>16} "
             f"{'b2b us':>8} {'b2b vs':>8}"]
    for r in records:
        if r.get("probe"):
            continue
        rate = vs = b2b = b2b_vs = ""
        if "tflops" in r:
            rate = f"{r['tflops']:.0f} TFLOP/s"
            cublas = baseline(records, CUBLAS, r["size"], "tflops")
            if cublas:
                vs = f"{100 * r['tflops'] / cublas:.0f} % cuBLAS"
        elif "gbps" in r:
            rate = f"{r['gbps']:.0f} GB/s"
            memcpy = baseline(records, MEMCPY, r["size"], "gbps")
            if memcpy:
                vs = f"{100 * r['gbps'] / memcpy:.0f} % memcpy"
        elif "gvalues" in r:
            rate = f"{r['gvalues']:.0f} Gvalue/s"
        if r.get("ms_b2b"):
            b2b = f"{r['ms_b2b'] * 1e3:.1f}"
            cublas_b2b = baseline(records, CUBLAS, r["size"], "ms_b2b")
            if cublas_b2b:
                b2b_vs = f"{100 * cublas_b2b / r['ms_b2b']:.0f} %"
        ms = f"{r['ms'] * 1e3:.1f}" if r.get("ms") else ""
        lines.append(f"{r.get('kernel', '?'):<36} {r.get('size', '?'):<16} {r.get('route', ''):<7} "
                     f"{r.get('status', '?'):<8} {ms:>9} {rate:>14} {vs:>16} {b2b:>8} {b2b_vs:>8}")
    return "\n".join(lines)


#: The chapter's ladder: (label, kernel name in the records). The first rung is the GEMM chapter's,
#: from its own recorded run (``kernels.chapters.hopper.recorded.WMMA_RUNG``).
LADDER = (
    ("WMMA, pipelined (GEMM chapter)", "gemm_wmma_pipelined<128, 256, 64, 64, 64, 3>"),
    ("2 TMA + wgmma, one warpgroup", "gemm_wgmma"),
    ("3 ring, wait for every group", "gemm_wgmma_pipelined<128, 4, 0>"),
    ("3 ring, one group in flight", "gemm_wgmma_pipelined<128, 4, 1>"),
    ("3 ring, 128 x 256 tiles", "gemm_wgmma_pipelined<256, 4, 1>"),
    ("4 setmaxnreg, 128 x 256 tiles", "gemm_wgmma_specialised<256, 4, 1, 0>"),
    ("4 cluster of 2, own loads", "gemm_wgmma_specialised<256, 4, 2, 0>"),
    ("4 cluster of 2, B multicast", "gemm_wgmma_specialised<256, 4, 2, 1>"),
    ("cuBLAS fp16 (cupy.matmul)", CUBLAS),
    ("torch.matmul fp16", TORCH),
)


def ladder_cells(records: Sequence[Record], kernel: str, size: str) -> tuple[str, str]:
    """The ladder's two cells for a kernel at a size: "TFLOP/s (share of cuBLAS)" with L2 flushed,
    and the share of cuBLAS back to back; "not recorded" where the records have no such run."""
    r = next((r for r in _ok(records) if r["kernel"] == kernel and r["size"] == size), None)
    if r is None:
        return "not recorded", ""
    M, N, K = parse_size(size)
    rate = tflops(M, N, K, r["ms"])
    cublas = baseline(records, CUBLAS, size)
    flushed = f"{rate:.0f} ({100 * cublas / r['ms']:.0f} %)" if cublas else f"{rate:.0f}"
    cublas_b2b = baseline(records, CUBLAS, size, "ms_b2b")
    b2b = f"{100 * cublas_b2b / r['ms_b2b']:.0f} %" if cublas_b2b and r.get("ms_b2b") else "-"
    return flushed, b2b


def size_title(label: str) -> str:
    """'4096x4096x4096' -> '4096³' (M = N = K); other sizes as they are."""
    sides = set(label.split("x"))
    return f"{sides.pop()}³" if len(sides) == 1 else label


def ladder_table(records: Sequence[Record], sizes: Sequence[tuple[int, int, int]] = LADDER_SIZES) -> str:
    """Two blocks narrow enough for a page: TFLOP/s and share of cuBLAS fp16 (same run) per rung and
    size with L2 flushed, then the share of cuBLAS back to back."""
    labels = [size_label(*s) for s in sizes]
    heads = [size_title(label) for label in labels]
    rungs = [(label, [ladder_cells(records, kernel, size) for size in labels]) for label, kernel in LADDER
             if any(r["kernel"] == kernel for r in _ok(records))]
    lines = [f"{'L2 flushed: TFLOP/s (% of cuBLAS)':<34}" + "".join(f"{h:>14}" for h in heads)]
    lines += [f"{label:<34}" + "".join(f"{flushed:>14}" for flushed, _ in cells) for label, cells in rungs]
    lines += ["", f"{'back to back: % of cuBLAS':<34}" + "".join(f"{h:>8}" for h in heads)]
    lines += [f"{label:<34}" + "".join(f"{b2b or '-':>8}" for _, b2b in cells) for label, cells in rungs]
    cited = {(r["kernel"], r["source"], r.get("gpu", "")) for r in records if r.get("source")}
    lines += [f"{kernel}:\n  cited from {source}" + (f", measured on an {gpu}" if gpu else "") + " (L2 flushed only)"
              for kernel, source, gpu in sorted(cited)]
    return "\n".join(lines)


def best_rung(records: Sequence[Record], size: str) -> Record | None:
    """The fastest of the chapter's own kernels at ``size`` (not the libraries, not the WMMA rung)."""
    own = [r for r in _ok(records) if r["size"] == size and r["kernel"].startswith("gemm_wgmma")]
    return min(own, key=lambda r: r["ms"], default=None)


def copy_lines(records: Sequence[Record]) -> list[str]:
    """The tile copies and their ceilings, in GB/s, each beside the memcpy of the same size."""
    lines = []
    for r in _ok(records):
        if r.get("kind") == "copy":
            memcpy = baseline(records, MEMCPY, r["size"], "gbps")
            share = f", {100 * r['gbps'] / memcpy:.0f} % of the device memcpy" if memcpy else ""
            lines.append(f"{r['kernel']:<30} {r['size']:>10}: {r['ms'] * 1e3:6.1f} us = {r['gbps']:5.0f} GB/s{share}")
    return lines


SPECIALISED = re.compile(r"gemm_wgmma_specialised<(\d+), (\d+), (\d+), (\d+)>")
PIPELINED = re.compile(r"gemm_wgmma_pipelined<(\d+), (\d+), (\d+)>")


def sweep_records(records: Sequence[Record], size: str = "4096x4096x4096") -> tuple[str, list[Record]]:
    """(kernel, points) for the sweep over tile width, stages and cluster size at ``size``: the
    specialised kernel's records where the run has them, else the pipelined kernel's (cluster 1,
    one wgmma group in flight), so that the explorer shows what was measured."""
    for name, pattern in (("gemm_wgmma_specialised", SPECIALISED), ("gemm_wgmma_pipelined", PIPELINED)):
        points = []
        for r in _ok(records):
            match = pattern.fullmatch(r["kernel"])
            if not match or r["size"] != size:
                continue
            bn, stages, third, *multicast = (int(g) for g in match.groups())
            if name == "gemm_wgmma_pipelined" and third != 1:
                continue
            if name == "gemm_wgmma_specialised" and third > 1 and multicast == [0]:
                continue  # the cluster without multicast: on the ladder, not in the sweep
            points.append(sweep_point(bn, stages, third if name == "gemm_wgmma_specialised" else 1,
                                      r["ms"], r.get("ms_b2b"), baseline(records, CUBLAS, size), parse_size(size)))
        if points:
            return name, points
    return "gemm_wgmma_specialised", []


def sweep_point(block_cols: int, stages: int, cluster: int, ms: float, ms_b2b: float | None,
                cublas_ms: float | None, size: tuple[int, ...]) -> Record:
    """One point of the sweep: its parameters and what the explorer shows."""
    M, N, K = size
    point: Record = {"block_cols": block_cols, "stages": stages, "cluster": cluster,
                     "TFLOP/s": round(tflops(M, N, K, ms), 1), "time us": round(ms * 1e3, 1),
                     "smem KB": round(stages * (128 + block_cols) * 64 * 2 / 1024)}
    if cublas_ms:
        point["% of cuBLAS"] = round(100 * cublas_ms / ms, 1)
    if ms_b2b:
        point["b2b us"] = round(ms_b2b * 1e3, 1)
    return point


def histogram_lines(records: Sequence[Record]) -> list[str]:
    """The histograms: per bin count, each cluster size's time and rate beside cupy.bincount."""
    lines = []
    for r in records:
        if r.get("kind") != "histogram":
            continue
        if r.get("status") == "ok" and r.get("ms"):
            lines.append(f"{r['kernel']:<34} {r['size']:>12}: {r['ms'] * 1e3:8.1f} us = {r['gvalues']:6.1f} Gvalue/s")
        else:
            lines.append(f"{r['kernel']:<34} {r['size']:>12}: {r.get('status')}: {r.get('detail', '')}")
    return lines


# ------------------------------------------------------------------------------ who runs, and the recorded run

def runs_here(what: str) -> bool:
    """True on a Hopper GPU. Elsewhere print one line: what ``what`` needs, and that the recorded
    run is shown instead (on the CPU backend in the words every skipped GPU cell uses)."""
    problem = hopper_problem()
    if problem is None:
        return True
    from ...backend import backend_name
    from .recorded import GPU

    instead = f" Shown instead: the recorded run on an {GPU} (benchmarks/bench_hopper.py)."
    if backend_name() == "cpu":
        print(SKIPPED.format(what=f"{what}: {problem}") + instead)
    else:
        print(f"Not run here: {what}: {problem}.{instead}")
    return False


def recorded() -> list[Record]:
    """The recorded run's records, with the GEMM chapter's last WMMA rung added as a GEMM record."""
    from .recorded import RECORDS, WMMA_RUNG

    rung = []
    for size, gflops in WMMA_RUNG["gflops"].items():
        M, N, K = parse_size(size)
        ms = 2.0 * M * N * K / gflops / 1e6
        rung.append({"kind": "gemm", "kernel": WMMA_RUNG["kernel"], "size": size, "status": "ok", "ms": ms,
                     "tflops": gflops / 1e3, "ms_b2b": None, "source": WMMA_RUNG["source"],
                     "gpu": WMMA_RUNG["gpu"]})
    return rung + [dict(r) for r in RECORDS]


def recorded_gemm_lines(kernel: str, records: Sequence[Record] | None = None) -> list[str]:
    """The recorded run's lines for GEMM kernel ``kernel``, every template instance of it included
    ("gemm_wgmma_pipelined" stands for gemm_wgmma_pipelined<128, 4, 0> and the others)."""
    records = recorded() if records is None else records
    lines = []
    for r in records:
        if r.get("kind") != "gemm" or not (r["kernel"] == kernel or r["kernel"].startswith(kernel + "<")):
            continue
        if r.get("probe"):
            continue
        if r.get("size") == "refusal":
            lines.append(f"{r['kernel']}: refused as it should be: {r.get('detail', '')}")
        elif r.get("status") == "ok" and r.get("ms"):
            M, N, K = parse_size(r["size"])
            cublas = baseline(records, CUBLAS, r["size"])
            share = f", {100 * cublas / r['ms']:.0f} % of cuBLAS" if cublas else ""
            b2b = f"; back to back {r['ms_b2b'] * 1e3:.1f} us" if r.get("ms_b2b") else ""
            lines.append(f"{r['kernel']} {r['size']}: {r['ms'] * 1e3:.1f} us = {tflops(M, N, K, r['ms']):.0f} "
                         f"TFLOP/s{share}{b2b}")
        else:
            lines.append(f"{r['kernel']} {r['size']}: {r.get('status')}: {r.get('detail', '')}")
    return lines


def show_recorded(lines: Sequence[str], empty: str = "the recorded run has no such measurement yet") -> None:
    """Print recorded lines, or say that there are none."""
    print("\n".join(lines) if lines else f"({empty}: benchmarks/bench_hopper.py on an H100 or H200 records it)")


def recorded_module_text(records: Sequence[Record], gpu: str, source: str, wmma_rung: Mapping[str, Any]) -> str:
    """The text of kernels/chapters/hopper/recorded.py for a benchmark run: the notebook's fallback when no
    Hopper GPU is present (the package carries it; the benchmarks folder is not installed)."""
    import pprint

    return (f'"""The recorded run of benchmarks/bench_hopper.py on an {gpu}, shown by the Hopper chapter where\n'
            f'no Hopper GPU is present. Written by ``python -m kernels.chapters.hopper.bench {source} "{gpu}"``;\n'
            f'tests/test_hopper_chapter.py checks that it equals {source}.\n"""\n'
            f"GPU = {gpu!r}\nSOURCE = {source!r}\n"
            f"#: The GEMM chapter's last WMMA rung (L2 flushed), from that chapter's recorded run on this GPU.\n"
            f"WMMA_RUNG = {pprint.pformat(dict(wmma_rung), width=110, sort_dicts=False)}\n"
            f"RECORDS = {pprint.pformat(list(records), width=110, sort_dicts=False)}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate kernels/chapters/hopper/recorded.py from a benchmark's JSON: SOURCE GPU."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m kernels.chapters.hopper.bench benchmarks/results/bench_hopper_<gpu>.json "
              "'NVIDIA H200'", file=sys.stderr)
        return 2
    from .recorded import WMMA_RUNG

    source, gpu = args
    target = Path(__file__).with_name("recorded.py")
    target.write_text(recorded_module_text(read_records(source), gpu, source, WMMA_RUNG))
    print(f"wrote {target.name} from {source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
