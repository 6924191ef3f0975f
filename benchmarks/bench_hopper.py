"""The Hopper chapter's kernels (TMA tile copy, wgmma GEMMs, cluster histogram) checked and timed beside
cuBLAS, torch and cupy.bincount.

One run on an H100 or H200 (a few minutes):

1. the TMA tile copies of kernels/cuda/hopper/tma_copy.cu (TMA load, then a TMA store or plain
   16-byte stores; boxes 128 x 64 and 64 x 128) are checked bit for bit against the source on a
   NaN-filled destination (8192 x 8192 fp16, and a ragged 1000 x 1000 that TMA's clipping handles),
   a 1000 x 1001 array must be refused with a message, and they are timed beside a CuPy copy of the
   same bytes (``dst[...] = src``) and a device-to-device memcpy, in GB/s (bytes read + written);
2. the wgmma GEMMs (hopper/wgmma_gemm.cu: one warpgroup, no overlap; hopper/wgmma_pipelined.cu:
   producer warp, two consumer warpgroups, 128 x 128 or 128 x 256 tiles, 3-4 stages, with and
   without a wgmma group left in flight) are checked against the float64 product of the fp16-rounded inputs (fresh uniform
   [-1, 1] inputs, NaN-filled C, kernels.chapters.gemm.fp16_tolerance(K)) first on small probes that isolate
   one feature each (one k-slice of 16; one 64-wide K tile; several tiles and blocks; ragged M and N),
   then at 2048^3, 4096^3 and 8192^3; K = 1001 must be refused with a message. They are timed beside
   cupy.matmul (cuBLAS fp16) and torch.matmul on the same fp16 matrices, in TFLOP/s (2 M N K / time);
   hopper/wgmma_specialised.cu (setmaxnreg, clusters with TMA multicast) in the same way, every
   configuration of kernels.chapters.hopper.SPECIALISED_CONFIGS at 4096^3 (the chapter's sweep), the
   chapter's two at every size;
3. the cluster histogram (hopper/cluster_histogram.cu, bins in the shared memory of a cluster) on
   2^26 values into 4096, 65536 and 262144 bins, for each cluster size and with one block per SM,
   checked exactly against cupy.bincount and timed beside it.

The checks, timings and the table come from kernels/chapters/hopper/bench.py, which the chapter uses too.
Write kernels/chapters/hopper/recorded.py (the chapter's recorded run) from the JSON with
``python -m kernels.chapters.hopper.bench results.json "<GPU name>"``.

Each kernel runs in a child process of its own with a time limit, so that a kernel that hangs (an
mbarrier wait that never completes) or faults (which poisons the CUDA context) costs only its own
lines. Times are medians of kernels.benchmark (CUDA events, warm-up 5, 20 timed runs), L2 flushed and
back to back.
A failing check is printed with where it fails and is not timed; the script goes on, prints a table
last and exits with status 1 if anything failed.

Run from the repository root on a GPU machine:

    PYTHONPATH=. python benchmarks/bench_hopper.py [--out results.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.chapters.hopper.bench import (GEMM_PROBES, GEMM_REFUSED, LADDER_SIZES, check_gemm, copy_gbps,  # noqa: E402
                                  gemm_inputs, gemm_record, histogram_record, library_records, median_ms,
                                  size_label, table)

RESULT_TAG = "RESULT "
JOB_SECONDS = 240
GEMM_SIZES = list(LADDER_SIZES)
SWEEP_SIZE = (4096, 4096, 4096)
COPY_SHAPES = [(8192, 8192), (1000, 1000)]
COPY_REFUSED = (1000, 1001)
COPY_VARIANTS = [(True, 128, 64), (False, 128, 64), (True, 64, 128), (False, 64, 128)]
GEMM_JOBS = {"wgmma_single": None, "wgmma_pipelined<128, 4, 0>": (128, 4, 0),
             "wgmma_pipelined<128, 4, 1>": (128, 4, 1), "wgmma_pipelined<128, 3, 1>": (128, 3, 1),
             "wgmma_pipelined<256, 4, 1>": (256, 4, 1), "wgmma_pipelined<256, 3, 1>": (256, 3, 1)}
#: The specialised kernel's configurations on the chapter's ladder (timed at every size); the sweep's
#: others (kernels.chapters.hopper.SPECIALISED_CONFIGS) are timed at SWEEP_SIZE only.
SPECIALISED_LADDER = [(256, 4, 1, 0), (256, 4, 2, 0), (256, 4, 2, 1)]  # (BN, stages, cluster, multicast)
HISTOGRAM_VALUES = 2**26
HISTOGRAM_BINS = (4096, 65536, 262144)


def log(*parts: Any) -> None:
    print(*parts, flush=True)


def emit(record: dict[str, Any]) -> None:
    """One result for the parent's table (a line of its own, JSON after the tag)."""
    print(RESULT_TAG + json.dumps(record), flush=True)


def hint(exc: Exception) -> str:
    """What a launch error most likely means for these kernels."""
    text = str(exc).lower()
    if "illegal instruction" in text:
        return (" (hint: the kernel reached __trap(): it was compiled without sm_90a's features, or an "
                "instruction is not valid here)")
    if "misaligned" in text or "illegal address" in text:
        return " (hint: a shared-memory or TMA address is off: alignment of the tiles or the barriers?)"
    if "invalid value" in text or "invalid_value" in text:
        return " (hint: the driver refused an argument: a tensor map rule or the launch's shared memory)"
    return ""


def context_alive() -> bool:
    """False once a fault (an illegal address, a trap) has poisoned this process's CUDA context."""
    import cupy as cp

    try:
        cp.cuda.runtime.deviceSynchronize()
        return True
    except Exception as exc:
        log(f"  the CUDA context is lost ({type(exc).__name__}: {exc}); this process stops here")
        return False


def timed_or_none(run: Callable[[], None], label: str, record: dict[str, Any],
                  flush_l2: bool = True) -> float | None:
    """The median time of a checked kernel, or None (reported) when timing it fails."""
    try:
        return median_ms(run, flush_l2)
    except Exception as exc:
        log(f"  {label}: checked, but timing failed: {type(exc).__name__}: {exc}")
        emit({**record, "status": "error", "detail": f"timing: {type(exc).__name__}: {exc}"[:300]})
        return None


# ----------------------------------------------------------------------------------- copy jobs

def copy_job(tma_store: bool, box_rows: int, box_cols: int, route: str) -> bool:
    import cupy as cp

    from kernels.chapters import hopper

    name = f"tma_copy_{'tma' if tma_store else 'plain'}_store<{box_rows}, {box_cols}>"
    ok = True
    for rows, cols in COPY_SHAPES:
        rng = cp.random.default_rng(rows + cols)
        src = rng.standard_normal((rows, cols), dtype=cp.float32).astype(cp.float16)
        dst = cp.full((rows, cols), cp.nan, dtype=cp.float16)
        record = {"kind": "copy", "kernel": name, "size": f"{rows}x{cols}", "route": route}
        try:
            run = hopper.tile_copy_launcher(src, dst, box_rows, box_cols, tma_store=tma_store, route=route)
            run()
            cp.cuda.get_current_stream().synchronize()
        except Exception as exc:  # a launch or compile failure: report it, go on
            log(f"  {name} {rows}x{cols}: ERROR {type(exc).__name__}: {exc}{hint(exc)}")
            emit({**record, "status": "error", "detail": f"{type(exc).__name__}: {exc}"[:300]})
            ok = False
            if not context_alive():
                return False
            continue
        wrong = int(cp.count_nonzero(dst.view(cp.uint16) != src.view(cp.uint16)))
        unwritten = int(cp.count_nonzero(cp.isnan(dst)))
        if wrong:
            first = cp.argwhere(dst.view(cp.uint16) != src.view(cp.uint16))[:5].get().tolist()
            log(f"  {name} {rows}x{cols}: FAIL {wrong} of {rows * cols} elements differ ({unwritten} NaN, "
                f"never written); first at (row, col) {first}")
            emit({**record, "status": "fail", "detail": f"{wrong} wrong, {unwritten} unwritten"})
            ok = False
            continue
        ms = timed_or_none(run, f"{name} {rows}x{cols}", record)
        if ms is None:
            ok = False
            continue
        gbps = copy_gbps(rows, cols, ms)
        log(f"  {name} {rows}x{cols}: ok (bit-exact); {ms * 1e3:.1f} us, {gbps:.0f} GB/s")
        emit({**record, "status": "ok", "ms": ms, "gbps": gbps})
    try:
        src = cp.zeros(COPY_REFUSED, dtype=cp.float16)
        hopper.tile_copy_launcher(src, src.copy(), box_rows, box_cols, tma_store=tma_store, route=route)
        log(f"  {name} {COPY_REFUSED[0]}x{COPY_REFUSED[1]}: FAIL: accepted an array TMA cannot describe")
        emit({"kind": "copy", "kernel": name, "size": "refusal", "status": "fail", "detail": "not refused"})
        ok = False
    except ValueError as exc:
        log(f"  {name} {COPY_REFUSED[0]}x{COPY_REFUSED[1]}: refused as it should be: {exc}")
        emit({"kind": "copy", "kernel": name, "size": "refusal", "status": "ok", "detail": str(exc)[:200]})
    return ok


def copy_baseline_job() -> bool:
    import cupy as cp

    for rows, cols in COPY_SHAPES:
        src = cp.random.default_rng(0).standard_normal((rows, cols), dtype=cp.float32).astype(cp.float16)
        dst = cp.empty_like(src)

        def elementwise() -> None:
            dst[...] = src

        def memcpy() -> None:
            dst.data.copy_from_device_async(src.data, src.nbytes)

        for label, fn in (("cupy dst[...] = src", elementwise), ("cudaMemcpy device to device", memcpy)):
            ms = median_ms(fn)
            gbps = copy_gbps(rows, cols, ms)
            log(f"  {label} {rows}x{cols}: {ms * 1e3:.1f} us, {gbps:.0f} GB/s")
            emit({"kind": "copy", "kernel": label, "size": f"{rows}x{cols}", "status": "ok", "ms": ms, "gbps": gbps})
    return True


# ----------------------------------------------------------------------------------- GEMM jobs

def gemm_kernel(key: str) -> Any:
    """The GemmKernel of a job key: wgmma_single, wgmma_pipelined<...> or wgmma_specialised<...>."""
    from kernels.chapters import hopper

    if key == "wgmma_single":
        return hopper.WGMMA_SINGLE
    if key in GEMM_JOBS:
        return hopper.wgmma_pipelined(*GEMM_JOBS[key])
    block_cols, stages, cluster, multicast = (int(v) for v in key[key.index("<") + 1:-1].split(","))
    return hopper.wgmma_specialised(block_cols, stages, cluster, multicast=bool(multicast))


def gemm_job(key: str, route: str) -> bool:
    import cupy as cp

    from kernels.chapters import hopper

    kernel = gemm_kernel(key)
    sizes = GEMM_SIZES
    if key.startswith("wgmma_specialised") and tuple(int(v) for v in key[key.index("<") + 1:-1].split(",")) \
            not in SPECIALISED_LADDER:
        sizes = [SWEEP_SIZE]
    ok = True
    for M, N, K in list(GEMM_PROBES) + sizes:
        size = size_label(M, N, K)
        record = {"kind": "gemm", "kernel": kernel.name, "size": size, "route": route}
        A, B_t = gemm_inputs(M, N, K)
        C = cp.empty((M, N), dtype=cp.float32)
        try:
            run = hopper.gemm_launcher(kernel, A, B_t, C, route=route)
            passed, detail = check_gemm(run, C, A, B_t, kernel.name)
        except Exception as exc:
            log(f"  {kernel.name} {size}: ERROR {type(exc).__name__}: {exc}{hint(exc)}")
            emit({**record, "status": "error", "detail": f"{type(exc).__name__}: {exc}"[:300]})
            ok = False
            if not context_alive():
                return False
            continue
        if not passed:
            log(f"  {kernel.name} {size}: {detail}")
            emit({**record, "status": "fail", "detail": detail.splitlines()[0][:300]})
            ok = False
            continue
        if (M, N, K) in GEMM_PROBES:
            log(f"  {kernel.name} {size} (probe): {detail}")
            emit({**record, "status": "ok", "probe": True})
            continue
        ms = timed_or_none(run, f"{kernel.name} {size}", record)
        if ms is None:
            ok = False
            continue
        b2b = timed_or_none(run, f"{kernel.name} {size} back to back", record, flush_l2=False)
        result = gemm_record(kernel.name, M, N, K, ms, b2b, route=route)
        log(f"  {kernel.name} {size}: {detail}; {ms * 1e3:.1f} us, {result['tflops']:.0f} TFLOP/s "
            f"(back to back, L2 not flushed: {b2b * 1e3 if b2b else float('nan'):.1f} us)")
        emit(result)
        del A, B_t, C
        cp.get_default_memory_pool().free_all_blocks()
    M, N, K = GEMM_REFUSED
    try:
        A, B_t = gemm_inputs(M, N, K)
        hopper.gemm_launcher(kernel, A, B_t, cp.empty((M, N), dtype=cp.float32), route=route)
        log(f"  {kernel.name} {M}x{N}x{K}: FAIL: accepted a K that TMA cannot describe")
        emit({"kind": "gemm", "kernel": kernel.name, "size": "refusal", "status": "fail", "detail": "not refused"})
        ok = False
    except ValueError as exc:
        log(f"  {kernel.name} {M}x{N}x{K}: refused as it should be: {exc}")
        emit({"kind": "gemm", "kernel": kernel.name, "size": "refusal", "status": "ok", "detail": str(exc)[:200]})
    return ok


def gemm_baseline_job() -> bool:
    for record in library_records(GEMM_SIZES):
        log(f"  {record['kernel']} {record['size']}: rel. error {record['rel_error']:.1e} (fp16 output); "
            f"{record['ms'] * 1e3:.1f} us, {record['tflops']:.0f} TFLOP/s (back to back: {record['ms_b2b'] * 1e3:.1f} us)")
        emit(record)
    return True


# ----------------------------------------------------------------------------------- histogram jobs

def histogram_job(cluster: int, per_sm: bool) -> bool:
    """The cluster histogram at each bin count, checked exactly against cupy.bincount, then timed; a
    cluster too small for the bins must be refused with LaunchConfigError."""
    import cupy as cp

    from kernels import device_info
    from kernels.chapters import hopper
    from kernels.errors import LaunchConfigError

    blocks = device_info().sm_count if per_sm else None
    ok = True
    for bins in HISTOGRAM_BINS:
        values = cp.random.RandomState(bins).randint(0, bins, HISTOGRAM_VALUES).astype(cp.uint32)
        expected = cp.bincount(values, minlength=bins)[:bins].astype(cp.uint32)
        counts = cp.zeros(bins, dtype=cp.uint32)
        label = f"histogram_cluster<{cluster}>" + (f", {blocks} blocks" if blocks else "")
        try:
            run = hopper.histogram_launcher(values, counts, cluster, blocks=blocks)
            run()
            cp.cuda.get_current_stream().synchronize()
        except LaunchConfigError as exc:
            log(f"  {label} {bins} bins: refused: {exc}")
            emit(histogram_record(cluster, bins, HISTOGRAM_VALUES, None, "refused", str(exc)[:200], blocks))
            continue
        except Exception as exc:
            log(f"  {label} {bins} bins: ERROR {type(exc).__name__}: {exc}{hint(exc)}")
            emit(histogram_record(cluster, bins, HISTOGRAM_VALUES, None, "error", str(exc)[:300], blocks))
            ok = False
            if not context_alive():
                return False
            continue
        wrong = int(cp.count_nonzero(counts != expected))
        if wrong:
            log(f"  {label} {bins} bins: FAIL: {wrong} of {bins} counts differ from cupy.bincount")
            emit(histogram_record(cluster, bins, HISTOGRAM_VALUES, None, "fail", f"{wrong} counts wrong", blocks))
            ok = False
            continue

        def zeroed_run() -> None:
            counts.fill(0)
            run()

        ms = median_ms(zeroed_run)
        record = histogram_record(cluster, bins, HISTOGRAM_VALUES, ms, blocks=blocks)
        log(f"  {label} {bins} bins: right; {ms * 1e3:.1f} us, {record['gvalues']:.1f} Gvalue/s")
        emit(record)
    return ok


def histogram_baseline_job() -> bool:
    import cupy as cp

    for bins in HISTOGRAM_BINS:
        values = cp.random.RandomState(bins).randint(0, bins, HISTOGRAM_VALUES).astype(cp.uint32)
        ms = median_ms(lambda: cp.bincount(values, minlength=bins))
        record = {**histogram_record(0, bins, HISTOGRAM_VALUES, ms), "kernel": "cupy.bincount"}
        log(f"  cupy.bincount {bins} bins: {ms * 1e3:.1f} us, {record['gvalues']:.1f} Gvalue/s")
        emit(record)
    return True


# --------------------------------------------------------------------------------- orchestration

def jobs() -> list[tuple[str, list[str]]]:
    """(title, child arguments) of every job, baselines first."""
    listed = [("copy baselines", ["copy-baseline"]), ("GEMM baselines", ["gemm-baseline"])]
    for tma_store, r, c in COPY_VARIANTS:
        listed.append((f"tma_copy_{'tma' if tma_store else 'plain'}_store<{r}, {c}>",
                       ["copy", "tma" if tma_store else "plain", str(r), str(c)]))
    listed += [(key, ["gemm", key]) for key in GEMM_JOBS]
    listed += [(f"wgmma_specialised<{bn}, {stages}, {cluster}, {multicast}>",
                ["gemm", f"wgmma_specialised<{bn}, {stages}, {cluster}, {multicast}>"])
               for bn, stages, cluster, multicast in specialised_configs()]
    listed.append(("histogram baseline", ["histogram-baseline"]))
    listed += [(f"histogram_cluster<{c}>", ["histogram", str(c)]) for c in histogram_clusters()]
    listed.append(("histogram_cluster<1>, one block per SM", ["histogram", "1", "per-sm"]))
    return listed


def specialised_configs() -> list[tuple[int, int, int, int]]:
    """(BN, stages, cluster, multicast): the ladder's configurations first, then the sweep's others
    (kernels.chapters.hopper.SPECIALISED_CONFIGS, whose clusters of 2 multicast)."""
    from kernels.chapters import hopper

    sweep = [(bn, stages, cluster, int(cluster > 1)) for bn, stages, cluster in hopper.SPECIALISED_CONFIGS]
    return SPECIALISED_LADDER + [c for c in sweep if c not in SPECIALISED_LADDER]


def histogram_clusters() -> tuple[int, ...]:
    from kernels.chapters import hopper

    return tuple(getattr(hopper, "HISTOGRAM_CLUSTERS", (1, 2, 4, 8)))


def run_child(args: list[str]) -> bool:
    """One job in this process (the child's side); True when every check passed."""
    from kernels.chapters import hopper

    problem = hopper.hopper_problem()
    if problem and args[0] not in ("copy-baseline", "gemm-baseline", "histogram-baseline"):
        title = dict((tuple(a), t) for t, a in jobs()).get(tuple(args), " ".join(args))
        log(f"  skipped: {problem}")
        emit({"kind": args[0], "kernel": title, "size": "-", "status": "skipped", "detail": problem})
        return True
    what, *rest = args
    if what == "copy-baseline":
        return copy_baseline_job()
    if what == "gemm-baseline":
        return gemm_baseline_job()
    if what == "histogram-baseline":
        return histogram_baseline_job()
    if what == "histogram":
        return histogram_job(int(rest[0]), rest[1:] == ["per-sm"])
    route = os.environ.get("HOPPER_LAUNCH_ROUTE", "driver")
    if what == "copy":
        return copy_job(rest[0] == "tma", int(rest[1]), int(rest[2]), route)
    if what == "gemm":
        return gemm_job(rest[0], route)
    raise SystemExit(f"unknown job {args}")


def spawn(title: str, args: list[str], route: str) -> tuple[list[dict[str, Any]], str]:
    """Run one job in a child process; its records and a one-word outcome."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HOPPER_LAUNCH_ROUTE": route}
    start = time.time()
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True,
                              timeout=JOB_SECONDS, env=env, cwd=ROOT)
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err, code = f"did not finish in {JOB_SECONDS} s: a hang (an mbarrier wait that never completes?)", None
    records = []
    for line in out.splitlines():
        if line.startswith(RESULT_TAG):
            records.append(json.loads(line[len(RESULT_TAG):]))
        else:
            log(line)
    if code != 0:
        tail = "\n".join(err.strip().splitlines()[-15:])
        log(f"  [{title}] child exited with {code} after {time.time() - start:.0f} s; stderr tail:\n{tail}")
    outcome = "ok" if code == 0 else ("hang" if code is None else "fail")
    return records, outcome


def environment() -> None:
    import platform

    log(f"python {platform.python_version()}")
    for module in ("cupy", "torch", "cuda.bindings", "numpy"):
        try:
            mod = __import__(module, fromlist=["__version__"])
            log(f"{module} {getattr(mod, '__version__', '?')}")
        except Exception as exc:
            log(f"{module}: not importable ({type(exc).__name__}: {exc})")
    try:
        import cupy as cp

        props = cp.cuda.runtime.getDeviceProperties(0)
        log(f"GPU {props['name'].decode()}, compute capability {props['major']}.{props['minor']}, "
            f"{props['multiProcessorCount']} SMs, driver {cp.cuda.runtime.driverGetVersion()}, "
            f"runtime {cp.cuda.runtime.runtimeGetVersion()}, shared memory opt-in "
            f"{props['sharedMemPerBlockOptin']} bytes per block")
    except Exception as exc:
        log(f"no GPU visible to CuPy: {type(exc).__name__}: {exc}")
    from kernels.chapters import hopper

    log(f"Hopper kernels: {hopper.hopper_problem() or 'can run here'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="write every record as JSON here")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--only", help="run only the jobs whose title contains this")
    opts = parser.parse_args()
    if opts.child:
        try:
            return 0 if run_child(opts.child) else 1
        except Exception:
            traceback.print_exc()
            return 2
    import kernels

    try:
        kernels.require_gpu("benchmarks/bench_hopper.py")
    except kernels.NoGPUError as exc:  # a clear sentence, not a traceback
        print(exc, file=sys.stderr)
        return 1
    environment()
    records: list[dict[str, Any]] = []
    failed = []
    for title, args in jobs():
        if opts.only and opts.only not in title:
            continue
        log(f"\n== {title}")
        found, outcome = spawn(title, args, "driver")
        launch_errors = [r for r in found if r["status"] == "error"]
        if args[0] in ("copy", "gemm") and (launch_errors or outcome == "fail") and not any(
                r["status"] in ("ok", "fail") and r.get("size") != "refusal" for r in found):
            log(f"  [{title}] nothing ran through cuLaunchKernel; trying CuPy's launch (tensor maps as NumPy records)")
            found, outcome = spawn(title, args, "cupy")
        if not found:
            found = [{"kind": args[0], "kernel": title, "size": "-", "status": outcome,
                      "detail": "no result from the child process"}]
        records += found
        if outcome != "ok" or any(r["status"] in ("fail", "error", "hang") for r in found):
            failed.append(title)
    log("\n== summary (probes omitted; 'vs': cuBLAS fp16 through cupy.matmul, or the device memcpy, same run;"
        " times with L2 flushed, 'b2b' back to back without flushing)")
    log(table(records))
    log(f"\nfailed: {', '.join(failed)}" if failed else "\nevery check passed")
    if opts.out:
        opts.out.write_text(json.dumps(records, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
