"""The GEMM ladder of the "GEMM" chapter against cuBLAS, with an autotuning sweep.

One run (a few minutes on an H100):

1. checks every rung (kernels.chapters.gemm.check_gemm: fresh inputs, float64 reference, NaN-poisoned C) on
   awkward shapes (1 x 1 x 1, 33 x 65 x 17, 127 x 129 x 131, 1000 x 1001 x 999), with beta = 0 and
   with general alpha and beta, and refuses to time a rung that fails;
2. times every rung with kernels.benchmark (CUDA events, warm-up, L2 flushed, median) at 1024^3,
   2048^3, 4096^3 and M = 4096, N = 2048, K = 1000, in GFLOP/s (2 M N K / time) and in % of cuBLAS
   fp32 (cupy.matmul on float32 arrays), and the tensor-core rung (fp16 inputs, fp32 accumulation)
   against cuBLAS fp16 (cupy.matmul on float16 arrays). TF32 stays off: the script prints CuPy's
   compute type for float32 and the relative error of cuBLAS's fp32 result against cuBLAS fp64,
   which would be about 1e-4 with TF32 and is about 1e-6 without;
3. sweeps the tile parameters of the register-tiled (double-buffered, and on compute capability
   8.0+ cp.async), warp-tiled and tensor-core kernels at 4096^3 in two stages (tile shapes first,
   then BK and pipeline depth around the best), marking invalid and spilling configurations
   (kernels.resource_report) and checking every configuration before timing it
   (kernels.chapters.gemm.sweep_measure);
4. times the best configurations against cuBLAS in interleaved rounds, prints a compact table last
   and writes every record as JSON into --out.

Run from the repository root on a GPU machine:

    PYTHONPATH=. python benchmarks/bench_gemm.py --out DIR

``--focus`` skips the ladder and the staged sweeps: it checks and times a broad list of
configurations of the newer kernels (rung 7b, warp_pipelined; rung 8's third form,
wmma_pipelined) and the best ones of the older kernels at 4096^3, times the best of each kind at
the three other sizes, and ends with an interleaved duel of the top few against cuBLAS fp32 and
fp16 (about 3 minutes on an H100; --focus-seconds bounds the candidate phase):

    PYTHONPATH=. python benchmarks/bench_gemm.py --focus --out DIR

Progress goes to stderr; the tables go to stdout.
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import kernels
from kernels.chapters import gemm as g
from kernels.timing import gflops

SIZES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (4096, 2048, 1000)]
SWEEP_SIZE = (4096, 4096, 4096)

# Stage 1 of each sweep: tile shapes at a middle BK; stage 2 varies BK (and the pipeline depth)
# around the best of stage 1.
REGISTER_TILES = [  # (BM, BN, TM, TN)
    (64, 64, 4, 4), (64, 64, 8, 4), (64, 64, 8, 8), (128, 64, 8, 4), (64, 128, 4, 8), (128, 64, 8, 8),
    (128, 128, 4, 4), (128, 128, 8, 4), (128, 128, 8, 8), (128, 128, 16, 8), (256, 128, 8, 8),
    (128, 256, 8, 8), (256, 128, 16, 8), (128, 256, 8, 16), (256, 256, 16, 16), (256, 256, 16, 8)]
WARP_TILES = [  # (BM, BN, WM, WN, TM, TN)
    (128, 128, 64, 32, 8, 8), (128, 128, 32, 64, 8, 8), (128, 128, 64, 64, 8, 16), (128, 128, 32, 32, 4, 8),
    (128, 64, 64, 32, 8, 8), (64, 128, 32, 64, 8, 8), (256, 128, 64, 64, 8, 16), (128, 256, 64, 64, 8, 16),
    (256, 128, 128, 32, 16, 8), (128, 256, 32, 128, 8, 16), (64, 64, 32, 32, 4, 8), (128, 128, 64, 32, 16, 4)]
TENSOR_TILES = [  # (BM, BN, WM, WN)
    (128, 128, 64, 32), (128, 128, 32, 64), (128, 128, 64, 64), (128, 256, 64, 64), (256, 128, 64, 64),
    (256, 128, 128, 32), (64, 128, 32, 64), (128, 128, 32, 32), (64, 64, 32, 32)]

# --focus: (family, parameters) at 4096^3. SIMT first, then tensor cores; the old kernels' best
# configurations of the first H100 run are included as the yardstick.
FOCUS_SIMT: list[tuple[str, dict[str, int]]] = (
    [("warp_pipelined", dict(zip(("BM", "BN", "BK", "WM", "WN", "TM", "TN", "BLOCKS"), c))) for c in (
        (128, 128, 8, 32, 64, 8, 8, 2), (128, 128, 8, 64, 32, 8, 8, 2), (128, 128, 8, 32, 64, 8, 8, 1),
        (128, 128, 8, 64, 32, 8, 8, 1), (128, 128, 16, 32, 64, 8, 8, 1), (128, 128, 16, 64, 32, 8, 8, 1),
        (128, 256, 8, 64, 64, 8, 16, 1), (256, 128, 8, 64, 64, 16, 8, 1), (128, 256, 16, 64, 64, 8, 16, 1),
        (256, 128, 16, 64, 64, 16, 8, 1), (128, 128, 8, 64, 64, 8, 16, 1), (128, 128, 16, 64, 64, 8, 16, 1),
        (128, 128, 8, 64, 64, 16, 8, 1), (128, 256, 8, 32, 128, 8, 16, 1), (256, 128, 8, 128, 32, 16, 8, 1),
        (128, 64, 8, 64, 32, 8, 8, 2), (64, 128, 8, 32, 64, 8, 8, 2), (64, 64, 8, 32, 32, 4, 8, 2))]
    + [("cp_async", {"BM": 128, "BN": 256, "BK": 32, "TM": 8, "TN": 8, "STAGES": 3}),
       ("warp_tiled", {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "TM": 8, "TN": 8}),
       ("double_buffered", {"BM": 128, "BN": 256, "BK": 8, "TM": 8, "TN": 8})])
FOCUS_TENSOR: list[tuple[str, dict[str, int]]] = (
    [("wmma_pipelined", dict(zip(("BM", "BN", "BK", "WM", "WN", "STAGES"), c))) for c in (
        (128, 256, 32, 64, 64, 4), (128, 256, 32, 64, 64, 3), (128, 256, 32, 64, 64, 5),
        (256, 128, 32, 64, 64, 4), (128, 256, 64, 64, 64, 3), (256, 128, 64, 64, 64, 3),
        (128, 128, 32, 64, 64, 4), (128, 128, 32, 64, 64, 3), (128, 128, 64, 64, 64, 3),
        (128, 128, 64, 64, 64, 4), (128, 128, 32, 64, 64, 5), (128, 128, 32, 32, 64, 4),
        (128, 128, 32, 64, 32, 4), (128, 128, 64, 32, 64, 3), (64, 128, 32, 32, 64, 4),
        (128, 128, 16, 64, 64, 6))]
    + [("wmma_cp_async", {"BM": 128, "BN": 128, "BK": 64, "WM": 64, "WN": 64, "STAGES": 3})])
# Checked before timing: 1 x 1 x 1, odd sizes (the scalar paths), multiples of 8 with edge tiles,
# and sizes with interior blocks for every tile above (the unchecked paths) with K % BK != 0.
FOCUS_CHECK_SHAPES: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (127, 129, 131), (264, 136, 72),
                                                        (520, 528, 200), (512, 512, 64))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Budget:
    """The sweeps' time: each family gets its share plus whatever the families before it left
    unused; a family skips its remaining points when its time is up."""

    def __init__(self, seconds: float, shares: dict[str, float]):
        self.total = seconds
        self.shares = shares
        self.carry = 0.0
        self.end = time.time()

    def start(self, family: str) -> None:
        self.end = time.time() + self.total * self.shares.get(family, 0.25) + self.carry

    def finish(self) -> None:
        self.carry = max(0.0, self.left())

    def left(self) -> float:
        return self.end - time.time()


def run_sweep(title: str, family: str, stage1: list[dict], refine, measure, budget: Budget, top: int = 3):
    """Measure stage-1 points, then the stage-2 points `refine(best)` derives from the `top` best."""
    sweep = kernels.Sweep(title, {k: sorted({p[k] for p in stage1}) for k in stage1[0]}, measure,
                          x=list(stage1[0])[0], y="GFLOP/s")
    budget.start(family)
    records = []
    for i, point in enumerate(stage1):
        if budget.left() < 0:
            log(f"  {title}: time budget spent, {len(stage1) - i} stage-1 point(s) skipped")
            break
        records.append(sweep.measure_point(point))
        log(f"  {title} [{i + 1}/{len(stage1)}] {_short(records[-1])}")
    seen = {tuple(sorted(p.items())) for p in stage1}
    good = sorted((r for r in records if isinstance(r.get("GFLOP/s"), (int, float))),
                  key=lambda r: -r["GFLOP/s"])[:top]
    stage2 = []
    for r in good:
        for p in refine({k: r[k] for k in stage1[0]}):
            key = tuple(sorted(p.items()))
            if key not in seen:
                seen.add(key)
                stage2.append(p)
    for i, point in enumerate(stage2):
        if budget.left() < 0:
            log(f"  {title}: time budget spent, {len(stage2) - i} stage-2 point(s) skipped")
            break
        records.append(sweep.measure_point(point))
        log(f"  {title} stage 2 [{i + 1}/{len(stage2)}] {_short(records[-1])}")
    budget.finish()
    for r in records:
        r["family"] = family
    sweep.records = records
    return sweep


def _short(r: dict) -> str:
    params = ",".join(f"{k}={v}" for k, v in r.items() if k.isupper() or k in ("BM", "BN", "BK"))
    if isinstance(r.get("GFLOP/s"), (int, float)):
        return f"{params}: {r['GFLOP/s']:.0f} GFLOP/s ({r['% of cuBLAS']:.1f} % of cuBLAS), {r['registers']} regs"
    return f"{params}: {r.get('note', 'no result')}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="directory for the JSON records")
    parser.add_argument("--repeat", type=int, default=10, help="timed launches per benchmark (default 10)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the final duel (default 5)")
    parser.add_argument("--sweep-seconds", type=float, default=150.0,
                        help="time budget of the sweeps (default 150 s); later points are skipped")
    parser.add_argument("--no-sweep", action="store_true", help="skip the sweeps")
    parser.add_argument("--focus", action="store_true",
                        help="skip the ladder and sweeps; check and time the FOCUS_* candidates, then a duel")
    parser.add_argument("--focus-seconds", type=float, default=170.0,
                        help="time budget of the --focus candidates (default 170 s); later ones are skipped")
    parser.add_argument("--top", type=int, default=3, help="--focus: candidates of each kind in the duel (default 3)")
    args = parser.parse_args(argv)

    kernels.require_gpu("benchmarks/bench_gemm.py")
    if args.focus:
        return focus(args)
    import cupy as cp

    t0 = time.time()
    info = kernels.device_info()
    ceil = kernels.ceilings()
    limits = kernels.GpuLimits.from_device()
    cc = info.compute_capability
    out: dict[str, Any] = {"provenance": kernels.provenance(), "ceilings": {
        "copy_gbps": ceil.copy_gbps, "fma_tflops": ceil.fma_tflops}, "ladder": [], "tensor_cores": [],
        "cublas": [], "sweeps": {}, "duel": [], "failures": []}
    print(f"{info.name} (compute capability {cc}), {info.sm_count} SMs; CUDA runtime {info.cuda_runtime}, "
          f"CuPy {info.cupy_version}")
    print(ceil)
    print(g.cublas_fp32_mode())
    out["cublas_fp32_mode"] = g.cublas_fp32_mode()

    # ------------------------------------------------------------------ checks before any timing
    rungs = g.ladder(cc)
    tc = g.tensor_core_rung(cc)
    compiled: dict[str, Any] = {}
    for r in rungs + [tc]:
        dtype = np.float16 if r.kernel_family.input_dtype == "float16" else np.float32
        try:
            kernel = g.GemmKernel(r.family, r.params, limits=limits)
            for M, N, K in g.CHECK_SHAPES:
                g.check_gemm(kernel, M, N, K, dtype=dtype)
            if r.kernel_family.alpha_beta:
                g.check_gemm(kernel, 127, 129, 131, alpha=0.75, beta=-0.5, dtype=dtype)
            compiled[r.label] = kernel
            log(f"checked {r.label} ({kernel.label})  ({time.time() - t0:.0f} s)")
        except AssertionError as exc:
            out["failures"].append({"rung": r.label, "error": str(exc)[:2000]})
            log(f"WRONG: {r.label} fails its check and is not timed:\n{exc}")

    # ------------------------------------------------------------------ the ladder at four sizes
    results: dict[tuple[str, tuple[int, int, int]], float] = {}
    cublas32: dict[tuple[int, int, int], float] = {}
    cublas16: dict[tuple[int, int, int], float] = {}
    for M, N, K in SIZES:
        A = cp.random.uniform(-1, 1, (M, K), dtype=cp.float32)
        B = cp.random.uniform(-1, 1, (K, N), dtype=cp.float32)
        C = cp.empty((M, N), dtype=cp.float32)
        flops = g.gemm_flops(M, N, K)
        t = kernels.benchmark(lambda: cp.matmul(A, B, out=C), warmup=3, repeat=args.repeat)
        cublas32[(M, N, K)] = gflops(flops, t)
        exact = cp.matmul(A.astype(cp.float64), B.astype(cp.float64))
        fp32_error = float(cp.linalg.norm(cp.matmul(A, B) - exact) / cp.linalg.norm(exact))
        del exact
        A16, B16 = A.astype(cp.float16), B.astype(cp.float16)
        t16 = kernels.benchmark(lambda: cp.matmul(A16, B16), warmup=3, repeat=args.repeat)
        cublas16[(M, N, K)] = gflops(flops, t16)
        out["cublas"].append({"M": M, "N": N, "K": K, "fp32 GFLOP/s": cublas32[(M, N, K)],
                              "fp32 ms": t.median_ms, "fp32 relative error vs fp64": fp32_error,
                              "fp16 GFLOP/s": cublas16[(M, N, K)], "fp16 ms": t16.median_ms})
        log(f"cuBLAS {M}x{N}x{K}: fp32 {cublas32[(M, N, K)]:.0f} GFLOP/s (relative error vs fp64 "
            f"{fp32_error:.1e}), fp16 {cublas16[(M, N, K)]:.0f} GFLOP/s")
        for r in rungs + [tc]:
            kernel = compiled.get(r.label)
            if kernel is None:
                continue
            is16 = r.kernel_family.input_dtype == "float16"
            a, b = (A16, B16) if is16 else (A, B)
            repeat = args.repeat if r.family != "naive" or M * N * K <= 2**33 else max(3, args.repeat // 3)
            t = kernels.benchmark(lambda: kernel(a, b, C, M, N, K), warmup=2, repeat=repeat)
            gf = gflops(flops, t)
            ref = cublas16 if is16 else cublas32
            results[(r.label, (M, N, K))] = gf
            rec = {"rung": r.label, "kernel": kernel.label, "M": M, "N": N, "K": K, "ms": t.median_ms,
                   "GFLOP/s": gf, "% of cuBLAS": 100 * gf / ref[(M, N, K)],
                   "baseline": "cuBLAS fp16" if is16 else "cuBLAS fp32",
                   "% of FMA ceiling": 100 * gf / (1e3 * ceil.fma_tflops)}
            (out["tensor_cores"] if is16 else out["ladder"]).append(rec)
        log(f"ladder timed at {M}x{N}x{K}  ({time.time() - t0:.0f} s)")
        del A, B, C, A16, B16
        cp.get_default_memory_pool().free_all_blocks()

    # ------------------------------------------------------------------ sweeps at 4096^3
    M, N, K = SWEEP_SIZE
    A = cp.random.uniform(-1, 1, (M, K), dtype=cp.float32)
    B = cp.random.uniform(-1, 1, (K, N), dtype=cp.float32)
    C = cp.empty((M, N), dtype=cp.float32)
    A16, B16 = A.astype(cp.float16), B.astype(cp.float16)
    budget = Budget(args.sweep_seconds, {"double_buffered": 0.25, "cp_async": 0.15, "warp_tiled": 0.25,
                                         "wmma": 0.35, "wmma_cp_async": 0.35})
    sweeps = []
    if not args.no_sweep:
        def measure(family):
            is16 = g.FAMILIES[family].input_dtype == "float16"
            return g.sweep_measure(family, A16 if is16 else A, B16 if is16 else B, C, limits=limits,
                                   cublas_gflops=(cublas16 if is16 else cublas32)[SWEEP_SIZE],
                                   repeat=args.repeat)

        log("sweeping the register-tiled kernel (double buffered)")
        reg1 = [{"BM": bm, "BN": bn, "BK": 16, "TM": tm, "TN": tn} for bm, bn, tm, tn in REGISTER_TILES]
        sweeps.append(run_sweep("double_buffered", "double_buffered", reg1,
                                lambda p: [{**p, "BK": bk} for bk in (8, 32)], measure("double_buffered"), budget))
        if g._cc_tuple(cc) >= (8, 0):
            best_tiles = [r for r in sorted((r for r in sweeps[-1].records if r.get("GFLOP/s")),
                                            key=lambda r: -r["GFLOP/s"])[:4]]
            cp1 = [{"BM": r["BM"], "BN": r["BN"], "BK": 16, "TM": r["TM"], "TN": r["TN"], "STAGES": s}
                   for r in best_tiles for s in (2, 3, 4)]
            if cp1:
                log("sweeping the register-tiled kernel (cp.async pipeline)")
                sweeps.append(run_sweep("cp_async", "cp_async", cp1,
                                        lambda p: [{**p, "BK": bk} for bk in (8, 32)], measure("cp_async"),
                                        budget, top=2))
        log("sweeping the warp-tiled kernel")
        wt1 = [{"BM": bm, "BN": bn, "BK": 16, "WM": wm, "WN": wn, "TM": tm, "TN": tn}
               for bm, bn, wm, wn, tm, tn in WARP_TILES]
        sweeps.append(run_sweep("warp_tiled", "warp_tiled", wt1,
                                lambda p: [{**p, "BK": bk} for bk in (8, 32)], measure("warp_tiled"), budget))
        log(f"sweeping the tensor-core kernel ({tc.family})")
        if tc.family == "wmma_cp_async":
            tc1 = [{"BM": bm, "BN": bn, "BK": 32, "WM": wm, "WN": wn, "STAGES": 3} for bm, bn, wm, wn in TENSOR_TILES]
            tc_refine = lambda p: [{**p, "STAGES": 2}, {**p, "STAGES": 4}, {**p, "BK": 64}]  # noqa: E731
        else:
            tc1 = [{"BM": bm, "BN": bn, "BK": 32, "WM": wm, "WN": wn} for bm, bn, wm, wn in TENSOR_TILES]
            tc_refine = lambda p: [{**p, "BK": 16}, {**p, "BK": 64}]  # noqa: E731
        sweeps.append(run_sweep(tc.family, tc.family, tc1, tc_refine, measure(tc.family), budget))
    for s in sweeps:
        out["sweeps"][s.title] = s.records
    log(f"sweeps done  ({time.time() - t0:.0f} s)")

    # ------------------------------------------------------------------ the duel: best vs cuBLAS
    flops = g.gemm_flops(M, N, K)
    candidates: list[tuple[str, str, Any]] = [("cuBLAS fp32", "fp32", lambda: cp.matmul(A, B, out=C)),
                                              ("cuBLAS fp16", "fp16", lambda: cp.matmul(A16, B16))]
    simt_best = _best_simt(out, sweeps)
    tc_best = _best_of([s for s in sweeps if s.title == tc.family], tc.family, tc.params)
    for label, family, params in (simt_best, tc_best):
        is16 = g.FAMILIES[family].input_dtype == "float16"
        kernel = g.GemmKernel(family, params, limits=limits)
        a, b = (A16, B16) if is16 else (A, B)
        candidates.append((f"{label}: {kernel.label}", "fp16" if is16 else "fp32",
                           lambda kernel=kernel, a=a, b=b: kernel(a, b, C, M, N, K)))
    medians: dict[str, list[float]] = {c[0]: [] for c in candidates}
    for r in range(args.rounds):
        order = candidates[r % len(candidates):] + candidates[:r % len(candidates)]
        for label, _, fn in order:
            medians[label].append(kernels.benchmark(fn, warmup=2, repeat=args.repeat).median_ms)
    base = {"fp32": medians["cuBLAS fp32"], "fp16": medians["cuBLAS fp16"]}
    for label, kind, _ in candidates:
        ratios = [base[kind][i] / medians[label][i] for i in range(args.rounds)]
        ms = statistics.median(medians[label])
        out["duel"].append({"name": label, "baseline": f"cuBLAS {kind}", "ms": ms,
                            "GFLOP/s": flops / (ms * 1e-3) / 1e9, "ratio per round": ratios,
                            "median ratio": statistics.median(ratios)})
    log(f"duel done  ({time.time() - t0:.0f} s)")

    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_gemm.json").write_text(json.dumps(out, indent=1, default=str))
        for s in sweeps:
            s.to_json(args.out / f"sweep_{s.title}.json")
    _print_tables(out, results, cublas32, cublas16, rungs, tc, sweeps, ceil, time.time() - t0)
    if args.out is not None:
        print(f"records written to {args.out / 'bench_gemm.json'} (and sweep_*.json)")
    return 1 if out["failures"] else 0


def focus(args) -> int:
    """--focus: every FOCUS_* candidate checked, then timed at 4096^3; the best of each kind at the
    other sizes; an interleaved duel of the top few against cuBLAS. A candidate that breaks a rule,
    spills, does not compile, fails its check or fails to launch is recorded and skipped."""
    import cupy as cp

    t0 = time.time()
    info = kernels.device_info()
    ceil = kernels.ceilings()
    limits = kernels.GpuLimits.from_device()
    cc = info.compute_capability
    print(f"{info.name} (compute capability {cc}), {info.sm_count} SMs; CUDA runtime {info.cuda_runtime}, "
          f"CuPy {info.cupy_version}")
    print(ceil)
    print(g.cublas_fp32_mode())
    out: dict[str, Any] = {"provenance": kernels.provenance(), "mode": "focus", "cublas_fp32_mode": g.cublas_fp32_mode(),
                           "ceilings": {"copy_gbps": ceil.copy_gbps, "fma_tflops": ceil.fma_tflops},
                           "cublas": {}, "candidates": [], "sizes": [], "duel": []}
    M, N, K = SWEEP_SIZE
    flops = g.gemm_flops(M, N, K)
    A = cp.random.uniform(-1, 1, (M, K), dtype=cp.float32)
    B = cp.random.uniform(-1, 1, (K, N), dtype=cp.float32)
    C = cp.empty((M, N), dtype=cp.float32)
    A16, B16 = A.astype(cp.float16), B.astype(cp.float16)
    C16 = cp.empty((M, N), dtype=cp.float16)
    cublas = {"fp32": gflops(flops, kernels.benchmark(lambda: cp.matmul(A, B, out=C), warmup=3, repeat=args.repeat)),
              "fp16": gflops(flops, kernels.benchmark(lambda: cp.matmul(A16, B16, out=C16), warmup=3,
                                                      repeat=args.repeat))}
    out["cublas"] = dict(cublas)
    log(f"cuBLAS {M}x{N}x{K}: fp32 {cublas['fp32']:.0f} GFLOP/s, fp16 {cublas['fp16']:.0f} GFLOP/s  "
        f"({time.time() - t0:.0f} s)")

    end = time.time() + args.focus_seconds
    kernels_by_label: dict[str, tuple[str, Any]] = {}
    # SIMT and tensor-core candidates alternate, so that a spent budget cuts both lists short.
    mixed = [c for pair in itertools.zip_longest(FOCUS_SIMT, FOCUS_TENSOR) for c in pair if c is not None]
    candidates = [c for c in mixed if g._cc_tuple(cc) >= g.FAMILIES[c[0]].min_cc]
    for i, (family, params) in enumerate(candidates):
        fam = g.FAMILIES[family]
        kind = "fp16" if fam.input_dtype == "float16" else "fp32"
        rec: dict[str, Any] = {"family": family, "kernel": fam.label(params), "baseline": f"cuBLAS {kind}", **params}
        out["candidates"].append(rec)
        if time.time() > end:
            rec["note"] = "time budget spent: skipped"
            continue
        try:
            is16 = kind == "fp16"
            measure = g.sweep_measure(family, A16 if is16 else A, B16 if is16 else B, C, limits=limits,
                                      cublas_gflops=cublas[kind], check_shapes=FOCUS_CHECK_SHAPES,
                                      repeat=args.repeat)
            rec.update(measure(**params))
            if isinstance(rec.get("GFLOP/s"), (int, float)):
                kernel = g.GemmKernel(family, params, limits=limits)
                g.check_gemm(kernel, 264, 136, 72, alpha=0.75, beta=-0.5, dtype=np.float16 if is16 else np.float32)
                kernels_by_label[rec["kernel"]] = (kind, kernel)
        except Exception as exc:  # noqa: BLE001 -- one bad candidate must not end the run
            rec.pop("GFLOP/s", None)
            rec["note"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
            if "WRONG" not in rec["note"] and isinstance(exc, AssertionError):
                rec["note"] = "WRONG: " + rec["note"]
            try:
                cp.cuda.Device().synchronize()
            except Exception as fatal:  # noqa: BLE001 -- a sticky CUDA error: nothing more can run
                rec["note"] += f"; the GPU context is broken ({fatal}), stopping"
                log(f"  [{i + 1}/{len(candidates)}] {rec['kernel']}: {rec['note']}")
                break
        log(f"  [{i + 1}/{len(candidates)}] {rec['kernel']}: " + (
            f"{rec['GFLOP/s']:.0f} GFLOP/s ({rec['% of cuBLAS']:.1f} % of {rec['baseline']}), "
            f"{rec['registers']} regs, {rec['blocks/SM']} blocks/SM" if isinstance(rec.get("GFLOP/s"), (int, float))
            else rec.get("note", "no result")) + f"  ({time.time() - t0:.0f} s)")

    timed = [r for r in out["candidates"] if isinstance(r.get("GFLOP/s"), (int, float)) and r["kernel"] in kernels_by_label]
    best = {kind: sorted((r for r in timed if r["baseline"] == f"cuBLAS {kind}"), key=lambda r: -r["GFLOP/s"])
            for kind in ("fp32", "fp16")}

    # The best of each kind at the ladder's other sizes (K = 1000 is a multiple of no large BK).
    for Ms, Ns, Ks in [s for s in SIZES if s != SWEEP_SIZE]:
        a = cp.random.uniform(-1, 1, (Ms, Ks), dtype=cp.float32)
        b = cp.random.uniform(-1, 1, (Ks, Ns), dtype=cp.float32)
        c = cp.empty((Ms, Ns), dtype=cp.float32)
        a16, b16 = a.astype(cp.float16), b.astype(cp.float16)
        c16 = cp.empty((Ms, Ns), dtype=cp.float16)
        fl = g.gemm_flops(Ms, Ns, Ks)
        row: dict[str, Any] = {"M": Ms, "N": Ns, "K": Ks,
                               "cuBLAS fp32": gflops(fl, kernels.benchmark(lambda: cp.matmul(a, b, out=c), warmup=3,
                                                                          repeat=args.repeat)),
                               "cuBLAS fp16": gflops(fl, kernels.benchmark(lambda: cp.matmul(a16, b16, out=c16),
                                                                          warmup=3, repeat=args.repeat))}
        for kind in ("fp32", "fp16"):
            for r in best[kind][:1]:
                kern = kernels_by_label[r["kernel"]][1]
                x, y = (a16, b16) if kind == "fp16" else (a, b)
                try:
                    row[r["kernel"]] = gflops(fl, kernels.benchmark(lambda: kern(x, y, c, Ms, Ns, Ks), warmup=2,
                                                                    repeat=args.repeat))
                except Exception as exc:  # noqa: BLE001
                    row[r["kernel"]] = f"{type(exc).__name__}: {exc}"[:200]
        out["sizes"].append(row)
        del a, b, c, a16, b16, c16
    log(f"other sizes timed  ({time.time() - t0:.0f} s)")

    # Interleaved duel: cuBLAS and the top candidates of each kind, rotating the order each round.
    duel: list[tuple[str, str, Any]] = [("cuBLAS fp32", "fp32", lambda: cp.matmul(A, B, out=C)),
                                        ("cuBLAS fp16", "fp16", lambda: cp.matmul(A16, B16, out=C16))]
    for kind in ("fp32", "fp16"):
        for r in best[kind][:args.top]:
            kern = kernels_by_label[r["kernel"]][1]
            x, y = (A16, B16) if kind == "fp16" else (A, B)
            duel.append((r["kernel"], kind, lambda kern=kern, x=x, y=y: kern(x, y, C, M, N, K)))
    medians: dict[str, list[float]] = {d[0]: [] for d in duel}
    for rnd in range(args.rounds):
        for label, _, fn in duel[rnd % len(duel):] + duel[:rnd % len(duel)]:
            medians[label].append(kernels.benchmark(fn, warmup=2, repeat=args.repeat).median_ms)
    for label, kind, _ in duel:
        ratios = [medians[f"cuBLAS {kind}"][i] / medians[label][i] for i in range(args.rounds)]
        ms = statistics.median(medians[label])
        out["duel"].append({"name": label, "baseline": f"cuBLAS {kind}", "ms": ms, "GFLOP/s": flops / (ms * 1e-3) / 1e9,
                            "ratio per round": ratios, "median ratio": statistics.median(ratios)})
    log(f"duel done  ({time.time() - t0:.0f} s)")

    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_gemm_focus.json").write_text(json.dumps(out, indent=1, default=str))
    _print_focus(out, ceil, time.time() - t0)
    if args.out is not None:
        print(f"records written to {args.out / 'bench_gemm_focus.json'}")
    return 0


def _print_focus(out: dict, ceil, seconds: float) -> None:
    print()
    print(f"--focus at {SWEEP_SIZE[0]}x{SWEEP_SIZE[1]}x{SWEEP_SIZE[2]}: GFLOP/s and % of cuBLAS (fp32 "
          f"{out['cublas']['fp32']:.0f}, fp16 {out['cublas']['fp16']:.0f} GFLOP/s); FP32 FMA ceiling "
          f"{1e3 * ceil.fma_tflops:.0f} GFLOP/s")
    for kind in ("fp32", "fp16"):
        rows = [r for r in out["candidates"] if r["baseline"] == f"cuBLAS {kind}"]
        rows.sort(key=lambda r: -r["GFLOP/s"] if isinstance(r.get("GFLOP/s"), (int, float)) else 0.0)
        for r in rows:
            if isinstance(r.get("GFLOP/s"), (int, float)):
                print(f"  {r['kernel']:<52}{r['GFLOP/s']:>9.0f} {r['% of cuBLAS']:>6.1f} %  {r['registers']:>3} regs "
                      f"{r['blocks/SM']} blk/SM")
            else:
                print(f"  {r['kernel']:<52}  {r.get('note', 'no result')[:110]}")
    for row in out["sizes"]:
        cells = ", ".join(f"{k} {v:.0f}" if isinstance(v, (int, float)) else f"{k} {v}"
                          for k, v in row.items() if k not in ("M", "N", "K"))
        print(f"  {row['M']}x{row['N']}x{row['K']}: {cells}")
    print()
    print(f"interleaved duel at {SWEEP_SIZE[0]}x{SWEEP_SIZE[1]}x{SWEEP_SIZE[2]}, "
          f"{len(out['duel'][0]['ratio per round']) if out['duel'] else 0} rounds")
    for d in out["duel"]:
        print(f"{d['name']:<60}{d['GFLOP/s']:>9.0f} GFLOP/s  {100 * d['median ratio']:6.1f} % of {d['baseline']}"
              f"  (rounds: {' '.join(f'{100 * q:.1f}' for q in d['ratio per round'])})")
    simt = [d for d in out["duel"] if d["baseline"] == "cuBLAS fp32" and not d["name"].startswith("cuBLAS")]
    tcd = [d for d in out["duel"] if d["baseline"] == "cuBLAS fp16" and not d["name"].startswith("cuBLAS")]
    if simt:
        q = 100 * max(d["median ratio"] for d in simt)
        print(f"target best SIMT >= 90 % of cuBLAS fp32 (moonshot 95 %): {q:.1f} % -> "
              f"{'met' if q >= 90 else 'not met'}{' (moonshot met)' if q >= 95 else ''}")
    if tcd:
        q = 100 * max(d["median ratio"] for d in tcd)
        print(f"target tensor-core rung >= 50 % of cuBLAS fp16: {q:.1f} % -> {'met' if q >= 50 else 'not met'}")
    bad = [r for r in out["candidates"] if "WRONG" in str(r.get("note", ""))
           or ("Error" in str(r.get("note", "")) and "invalid" not in str(r.get("note", "")))]
    if bad:
        print(f"{len(bad)} candidate(s) failed to compile, check or launch: " + ", ".join(r["kernel"] for r in bad))
    print(f"total time {seconds:.0f} s")


def _best_of(sweeps, family: str, default: dict) -> tuple[str, str, dict]:
    best = g.best_record([r for s in sweeps for r in s.records])
    if best is None:
        return ("default", family, default)
    return ("best swept", best["family"], {k: best[k] for k in g.FAMILIES[best["family"]].params})


def _best_simt(out: dict, sweeps) -> tuple[str, str, dict]:
    """The fastest fp32 kernel at 4096^3: a swept configuration or a ladder rung."""
    simt = [s for s in sweeps if g.FAMILIES[s.title].input_dtype == "float32"]
    label, family, params = _best_of(simt, "warp_tiled", g.DEFAULTS["warp_tiled"])
    best_sweep = g.best_record([r for s in simt for r in s.records])
    ladder = [r for r in out["ladder"] if (r["M"], r["N"], r["K"]) == SWEEP_SIZE]
    best_rung = max(ladder, key=lambda r: r["GFLOP/s"]) if ladder else None
    if best_rung and (best_sweep is None or best_rung["GFLOP/s"] > best_sweep["GFLOP/s"]):
        rung = next(r for r in g.ladder(out["provenance"]["compute_capability"]) if r.label == best_rung["rung"])
        return (f"rung {rung.label}", rung.family, dict(rung.params))
    return (label, family, params)


def _print_tables(out, results, cublas32, cublas16, rungs, tc, sweeps, ceil, seconds) -> None:
    print()
    print(f"GFLOP/s (2 M N K / median time) and % of cuBLAS in the same run; FP32 FMA ceiling "
          f"{1e3 * ceil.fma_tflops:.0f} GFLOP/s")
    head = f"{'rung':<34}" + "".join(f"{f'{M}x{N}x{K}':>20}" for M, N, K in SIZES)
    print(head)
    print("-" * len(head))
    print(f"{'cuBLAS fp32 (cupy.matmul)':<34}" + "".join(f"{cublas32[s]:>20.0f}" for s in SIZES))
    for r in rungs:
        cells = []
        for s in SIZES:
            v = results.get((r.label, s))
            cells.append(f"{v:>10.0f} {100 * v / cublas32[s]:>6.1f} %" if v else f"{'WRONG/skipped':>20}")
        print(f"{r.label:<34}" + "".join(f"{c:>20}" for c in cells))
    print(f"{'cuBLAS fp16 (cupy.matmul)':<34}" + "".join(f"{cublas16[s]:>20.0f}" for s in SIZES))
    cells = []
    for s in SIZES:
        v = results.get((tc.label, s))
        cells.append(f"{v:>10.0f} {100 * v / cublas16[s]:>6.1f} %" if v else f"{'WRONG/skipped':>20}")
    print(f"{tc.label:<34}" + "".join(f"{c:>20}" for c in cells))
    for s in sweeps:
        best = g.best_record(s.records)
        measured = sum(1 for r in s.records if isinstance(r.get("GFLOP/s"), (int, float)))
        invalid = sum(1 for r in s.records if "invalid" in str(r.get("note", "")))
        spilled = sum(1 for r in s.records if "spills" in str(r.get("note", "")))
        if best:
            params = ", ".join(f"{k}={best[k]}" for k in g.FAMILIES[s.title].params)
            print(f"sweep {s.title:<16} {measured} timed, {invalid} invalid, {spilled} spilling; best {params}: "
                  f"{best['GFLOP/s']:.0f} GFLOP/s = {best['% of cuBLAS']:.1f} % of cuBLAS, "
                  f"{best['registers']} registers, {best['blocks/SM']} blocks/SM")
    print()
    print(f"interleaved duel at {SWEEP_SIZE[0]}x{SWEEP_SIZE[1]}x{SWEEP_SIZE[2]}, "
          f"{len(out['duel'][0]['ratio per round'])} rounds")
    for d in out["duel"]:
        print(f"{d['name']:<72}{d['GFLOP/s']:>9.0f} GFLOP/s  {100 * d['median ratio']:6.1f} % of {d['baseline']}"
              f"  (rounds: {' '.join(f'{100 * q:.1f}' for q in d['ratio per round'])})")
    simt = [d for d in out["duel"] if d["baseline"] == "cuBLAS fp32" and not d["name"].startswith("cuBLAS")]
    tcd = [d for d in out["duel"] if d["baseline"] == "cuBLAS fp16" and not d["name"].startswith("cuBLAS")]
    if simt:
        q = 100 * simt[0]["median ratio"]
        print(f"target best SIMT >= 90 % of cuBLAS fp32 (moonshot 95 %): {q:.1f} % -> "
              f"{'met' if q >= 90 else 'not met'}{' (moonshot met)' if q >= 95 else ''}")
    if tcd:
        q = 100 * tcd[0]["median ratio"]
        print(f"target tensor-core rung >= 50 % of cuBLAS fp16: {q:.1f} % -> {'met' if q >= 50 else 'not met'}")
    if out["failures"]:
        print(f"{len(out['failures'])} rung(s) failed their check and were not timed: "
              + ", ".join(f["rung"] for f in out["failures"]))
    print(f"total time {seconds:.0f} s")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except kernels.NoGPUError as exc:      # a clear sentence, not a traceback
        print(exc, file=sys.stderr)
        sys.exit(1)
