"""Softmax kernels of the "Softmax" chapter against torch.softmax and a CuPy composition.

For each shape (65536 x 4096, 4096 x 32768 and 2^20 x 128 float32, and 65536 x 4096 float16) the
script times every kernel of kernels/cuda/softmax/ in several launch configurations (threads per
block, elements per thread, rows per warp; kernels.chapters.softmax.bench_configs lists them), together
with torch.softmax (when torch is installed) and the softmax composed of CuPy array operations.

Each shape also times the dispatch rule's kernel on an input view that starts one element (4 or 2
bytes) past a 16-byte boundary, which forces its one-element path: the price of losing the 16-byte
loads.

Before timing, every kernel runs once into a NaN-filled output and is compared with a float64
reference computed on the GPU; a kernel that fails is reported and not timed, and the script exits
with status 1 at the end. The libraries are baselines: their error against the same reference is
printed, and only a result with NaN would keep them from being timed. Timing is interleaved: each round times
every candidate once with kernels.benchmark (CUDA events, warm-up, L2 flushed, median), starting
from a different candidate each round, so that drift during the run affects all alike.

torch runs on a zero-copy view of the same CuPy array (DLPack) and on CuPy's current stream (see
kernels.chapters.softmax.on_cupy_stream): the CUDA events of kernels.benchmark are recorded on that stream,
so they bracket torch's kernels exactly as they bracket ours.

Reported per candidate: the median over rounds of the per-round median time, GB/s = (bytes read
+ bytes written) / time with the matrix read once and written once (kernels.chapters.softmax.min_bytes,
the same count for every candidate, so GB/s is a speed), the share of the copy ceiling
(kernels.ceilings()), and the speed relative to torch.softmax in each round (torch's time in that
round / the candidate's) and their median. A compact table of the best kernel per shape comes last;
--out DIR also receives every record as JSON (bench_softmax.json).

Run from the repository root on a GPU machine:

    PYTHONPATH=. python benchmarks/bench_softmax.py --out DIR

It takes about a minute on an H100 (most of it compiling the kernels the first time).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import kernels  # noqa: E402
from kernels.chapters import softmax as sm  # noqa: E402

SHAPES = [("65536x4096", 65536, 4096, "float32"), ("4096x32768", 4096, 32768, "float32"),
          ("2^20x128", 2**20, 128, "float32"), ("65536x4096 fp16", 65536, 4096, "float16")]


def library_candidates(x):
    """(label, fn) of the library softmaxes: torch.softmax if torch sees the GPU, and the CuPy composition."""
    found = []
    if sm.torch_available():
        import torch

        xt = torch.from_dlpack(x)
        found.append(("torch.softmax", sm.on_cupy_stream(lambda: torch.softmax(xt, dim=1))))
    found.append(("cupy (composed)", lambda: sm.cupy_softmax(x)))
    return found


def check_library(fn, reference):
    """Relative error of a library softmax's result; AssertionError if it has NaN.

    The libraries are the baselines, so their error is reported rather than judged."""
    import cupy as cp

    y = cp.asarray(fn())
    unwritten = int(cp.count_nonzero(cp.isnan(y)))
    if unwritten:
        raise AssertionError(f"{unwritten} NaN in the result")
    return sm.relative_error(y, reference)


def bench_shape(label, rows, cols, dtype, args, ceil, limit):
    """Check and time every candidate on one shape; returns (records, failures)."""
    import cupy as cp

    itemsize = 2 if dtype == "float16" else 4
    nbytes = sm.min_bytes(rows, cols, itemsize)
    x = cp.random.uniform(-1, 1, (rows, cols), dtype=cp.float32).astype(dtype)
    y = cp.empty_like(x)
    reference = sm.reference_on_gpu(x, cp.float64)
    dispatch = sm.choose_config(cols, dtype, limit)

    candidates, configs, errors, failures = {}, {}, {}, []
    for config in sm.bench_configs(rows, cols, dtype, limit):
        run = sm.Softmax(config)
        tol = sm.softmax_tolerance(cols, sm.threads_per_row(config), dtype)
        try:
            errors[config.label] = sm.check_on_gpu(run, x, reference, tol)
        except AssertionError as exc:
            failures.append(f"{label}: {config.label}: {exc}")
            print(f"  CHECK FAILED, not timed: {config.label}: {exc}")
            continue
        candidates[config.label] = lambda run=run: run(x, y)
        configs[config.label] = config
    # the rule's kernel on its one-element path: the same values, the input one element off
    shifted = cp.empty(rows * cols + 1, dtype=dtype)
    shifted[1:] = x.ravel()
    x_off = shifted[1:].reshape(rows, cols)
    off_label = f"{dispatch.label}, input 1 element off"
    run = sm.Softmax(dispatch)
    try:
        errors[off_label] = sm.check_on_gpu(run, x_off, reference,
                                            sm.softmax_tolerance(cols, sm.threads_per_row(dispatch), dtype))
        candidates[off_label] = lambda run=run: run(x_off, y)
        configs[off_label] = dispatch
    except AssertionError as exc:
        failures.append(f"{label}: {off_label}: {exc}")
        print(f"  CHECK FAILED, not timed: {off_label}: {exc}")
    for name, fn in library_candidates(x):
        try:
            errors[name] = check_library(fn, reference)
            print(f"  {name}: relative error {errors[name]:.1e} against the float64 reference")
        except AssertionError as exc:
            failures.append(f"{label}: {name}: {exc}")
            print(f"  CHECK FAILED, not timed: {name}: {exc}")
            continue
        candidates[name] = fn
    del reference
    cp.get_default_memory_pool().free_all_blocks()
    print(f"  {len(candidates)} candidates checked (float64 reference, NaN-filled outputs); timing "
          f"{args.rounds} interleaved rounds")

    medians = sm.interleaved(candidates, rounds=args.rounds, warmup=args.warmup, repeat=args.repeat,
                             progress=lambda text: print(f"  {text}", flush=True))
    torch_ms = medians.get("torch.softmax")
    records = []
    for name, times in medians.items():
        ms = statistics.median(times)
        rate = nbytes / (ms * 1e-3) / 1e9
        ratios = [t / k for t, k in zip(torch_ms, times)] if torch_ms else []
        config = configs.get(name)
        records.append({
            "shape": label, "rows": rows, "cols": cols, "dtype": dtype, "candidate": name,
            "kind": config.kind if config else "library", "threads": config.threads if config else None,
            "items": config.items if config else None,
            "rows_per_warp": config.rows_per_warp if config else None,
            "dispatch_choice": bool(config and config == dispatch and name == config.label),
            "input_offset_elements": 1 if name.endswith("1 element off") else 0,
            "ms_per_round": times, "ms": ms, "gbps": rate, "pct_copy": 100 * rate / ceil.copy_gbps,
            "x_torch_per_round": ratios, "x_torch": statistics.median(ratios) if ratios else None,
            "requested_bytes": sm.requested_bytes(config.kind, rows, cols, itemsize) if config else None,
            "min_bytes": nbytes, "check_rel_error": errors[name],
        })
    records.sort(key=lambda r: r["ms"])
    print_shape_table(label, records, ceil, args.rounds)
    del x, y, shifted, x_off
    cp.get_default_memory_pool().free_all_blocks()
    return records, failures


def print_shape_table(label, records, ceil, rounds):
    head = (f"{'candidate':<62}{'ms':>9}{'GB/s':>7}{'% copy':>8}{'req/min':>8}  "
            f"{'x torch per round':<{6 * rounds}}{'median':>7}  >=1 all")
    print(f"\n{label}: copy ceiling {ceil.copy_gbps:.0f} GB/s; * = the dispatch rule's choice")
    print(head)
    print("-" * len(head))
    for r in records:
        ratios = r["x_torch_per_round"]
        req = f"{r['requested_bytes'] / r['min_bytes']:.2f}" if r["requested_bytes"] else ""
        mark = "*" if r["dispatch_choice"] else " "
        always = "yes" if ratios and all(q >= 1.0 for q in ratios) else ""
        per_round = "".join(f"{q:6.3f}" for q in ratios)
        median = f"{r['x_torch']:7.3f}" if r["x_torch"] else ""
        print(f"{mark}{r['candidate']:<61}{r['ms']:9.4f}{r['gbps']:7.0f}{r['pct_copy']:8.1f}{req:>8}  "
              f"{per_round:<{6 * rounds}}{median:>7}  {always}")


def print_summary(all_records, ceil):
    print("\nSummary: the fastest kernel of each shape against the libraries (median of round medians)")
    head = (f"{'shape':<18}{'best kernel':<62}{'GB/s':>7}{'% copy':>8}{'torch GB/s':>11}{'cupy GB/s':>10}"
            f"{'x torch':>9}{'rule GB/s':>10}")
    print(head)
    print("-" * len(head))
    for label, *_ in SHAPES:
        recs = [r for r in all_records if r["shape"] == label]
        ours = [r for r in recs if r["kind"] != "library"]
        if not ours:
            continue
        best = min(ours, key=lambda r: r["ms"])
        lib = {r["candidate"]: r for r in recs if r["kind"] == "library"}
        torch_gbps = f"{lib['torch.softmax']['gbps']:.0f}" if "torch.softmax" in lib else "-"
        cupy_gbps = f"{lib['cupy (composed)']['gbps']:.0f}" if "cupy (composed)" in lib else "-"
        ratio = f"{best['x_torch']:.3f}" if best["x_torch"] else "-"
        rule = [r for r in ours if r["dispatch_choice"]]
        rule_gbps = f"{rule[0]['gbps']:.0f}" if rule else "-"
        print(f"{label:<18}{best['candidate']:<62}{best['gbps']:7.0f}{best['pct_copy']:8.1f}{torch_gbps:>11}"
              f"{cupy_gbps:>10}{ratio:>9}{rule_gbps:>10}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="directory for bench_softmax.json")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up launches per benchmark (default 3)")
    parser.add_argument("--repeat", type=int, default=15, help="timed launches per benchmark (default 15)")
    args = parser.parse_args(argv)

    kernels.require_gpu("benchmarks/bench_softmax.py")
    import cupy as cp

    start = time.time()
    info = kernels.device_info()
    ceil = kernels.ceilings()
    limit = sm.max_shared_per_block()
    torch_version = None
    if sm.torch_available():
        import torch

        torch_version = torch.__version__
    print(f"{info.name} (compute capability {info.compute_capability}), {info.sm_count} SMs, "
          f"{limit} bytes of shared memory per block with opt-in; CuPy {cp.__version__}; "
          f"torch {torch_version or 'not available'}")
    print(ceil)
    print(f"torch.softmax of a row of four -inf: {sm.torch_on_all_masked_row()} "
          f"(these kernels write zeros for such a row)")

    all_records, failures = [], []
    for label, rows, cols, dtype in SHAPES:
        print(f"\n== {label} ({dtype}) ==", flush=True)
        records, failed = bench_shape(label, rows, cols, dtype, args, ceil, limit)
        all_records += records
        failures += failed

    print_summary(all_records, ceil)
    print(f"\nwall time {time.time() - start:.0f} s")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        payload = {"device": info.name, "compute_capability": info.compute_capability, "sm_count": info.sm_count,
                   "copy_gbps": ceil.copy_gbps, "cupy": cp.__version__, "torch": torch_version,
                   "rounds": args.rounds, "warmup": args.warmup, "repeat": args.repeat,
                   "records": all_records, "failures": failures}
        path = args.out / "bench_softmax.json"
        path.write_text(json.dumps(payload, indent=1))
        print(f"records written to {path}")
    if failures:
        print(f"{len(failures)} candidate(s) failed their check:\n  " + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    try:
        main()
    except kernels.NoGPUError as exc:      # a clear sentence, not a traceback
        print(exc, file=sys.stderr)
        sys.exit(1)
