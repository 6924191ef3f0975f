"""Benchmark of the inclusive int32 scans of the "Scan" chapter on the GPU at n = 2^28.

For single_pass_scan (256 x 8 and 256 x 16), every configuration of single_pass_scan_v2 and
cupy.cumsum: first exactness against numpy.cumsum (int64, wrapped to int32) on n = 1, 1000003
and 2^28, then the time at n = 2^28 with kernels.benchmark (warm-up 3, 20 timed runs, L2 flushed).
GB/s counts 4n bytes read + 4n written and is shown beside the measured copy ceiling.

Run from the repository root:  PYTHONPATH=. python3 benchmarks/bench_scan.py
Progress goes to stderr; the table is printed last, on stdout.
"""
from __future__ import annotations

import sys
import time

import numpy as np

import kernels
from kernels.chapters import scan as sc

N_BIG = 2**28
CHECK_SIZES = (1, 1_000_003, N_BIG)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> int:
    kernels.require_gpu("benchmarks/bench_scan.py")
    import cupy as cp

    t0 = time.time()
    ceil = kernels.ceilings()
    log(f"{ceil}  ({time.time() - t0:.1f} s)")

    rng = np.random.default_rng(0)
    inputs, expected = {}, {}
    for n in CHECK_SIZES:                  # random int32 over the whole range: the sums wrap
        x = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
        inputs[n] = cp.asarray(x)
        expected[n] = cp.asarray(sc.inclusive_scan(x).astype(np.int32))
        del x
    log(f"inputs and references ready ({time.time() - t0:.1f} s)")
    y = cp.empty(N_BIG, dtype=cp.int32)

    candidates = [("single_pass_scan", f"{t}x{i}", lambda n, t=t, i=i: sc.SinglePassScan(n, np.int32, t, i))
                  for t, i in ((256, 8), (256, 16))]
    candidates += [("single_pass_scan_v2", f"{t}x{i}",
                    lambda n, t=t, i=i: sc.SinglePassScanV2(n, np.int32, t, i))
                   for t, i in sc.SINGLE_PASS_V2_CONFIGS]

    class CupyCumsum:
        def __init__(self, n):
            pass

        def __call__(self, x, out):
            cp.cumsum(x, dtype=cp.int32, out=out)

    candidates.append(("cupy.cumsum", "-", CupyCumsum))

    rows = []
    nbytes = 8 * N_BIG
    for name, config, make in candidates:
        try:
            correct = True
            for n in CHECK_SIZES:
                out = y[:n]
                out.fill(-1)
                make(n)(inputs[n], out)
                correct &= bool(cp.array_equal(out, expected[n]))
            scan = make(N_BIG)
            timing = kernels.benchmark(lambda: scan(inputs[N_BIG], y), warmup=3, repeat=20)
            gbps = kernels.gbps(nbytes, timing)
            rows.append((name, config, f"{timing.median_ms:.3f}", f"{gbps:.0f}",
                         f"{100 * gbps / ceil.copy_gbps:.1f}", "yes" if correct else "NO"))
        except Exception as exc:           # a configuration that fails to build or launch
            rows.append((name, config, "-", "-", "-", f"error: {type(exc).__name__}: {exc}"[:60]))
        log(f"{name} {config}: {rows[-1][2:]}  ({time.time() - t0:.1f} s)")

    header = ("kernel", "config", "ms", "GB/s", "% copy", "correct")
    widths = [max(len(str(r[c])) for r in rows + [header]) for c in range(len(header))]
    print(f"\n{ceil.device}: copy ceiling {ceil.copy_gbps:.0f} GB/s; n = 2^28 int32, "
          f"bytes = 4n read + 4n written")
    for r in [header] + rows:
        print("  ".join(str(v).ljust(w) if c < 2 else str(v).rjust(w)
                        for c, (v, w) in enumerate(zip(r, widths))))
    return 0 if all(r[5] == "yes" for r in rows) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except kernels.NoGPUError as exc:      # a clear sentence, not a traceback
        print(exc, file=sys.stderr)
        sys.exit(1)
