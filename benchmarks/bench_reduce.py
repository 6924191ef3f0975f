"""Launch configurations of the "Reduce" chapter's single-pass float32 sum against cupy.sum.

Sums x = 2^28 random float32 values (uniform in [0, 1), 1 GiB) with `sum_vec4_single_pass` from
kernels/cuda/reduce/vec4_sum.cu in several launch configurations, and with `cupy.sum(x)`. Every
configuration is first checked against a float64 reference (relative error below 1e-5, two
launches in a row, counter back at 0). The timing is interleaved: each round times every candidate
once with `kernels.benchmark` (CUDA events, warm-up, L2 flushed, median), so that clock or thermal
drift during the run affects all candidates alike; the starting candidate rotates from round to
round. The table reports the median of the round medians, GB/s (4 n bytes read), the share of the
copy ceiling of `kernels.ceilings()`, and the speed ratio to cupy.sum per round (cupy.sum's time in
that round / the configuration's time in that round) and its median.

Run from the repository root on a GPU machine:

    PYTHONPATH=. python benchmarks/bench_reduce.py

It takes well under a minute on an H100. Nothing in the chapter or in the .cu files is changed; the
launch logic (wave_grid, the workspace of the single pass) is copied from book/reduce.md.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import kernels  # noqa: E402
from kernels import ceil_div  # noqa: E402

KERNEL_FILE = "reduce/vec4_sum.cu"
KERNEL_NAME = "sum_vec4_single_pass"
REL_TOL = 1e-5
CHAPTER_BLOCK = 1024         # the chapter's VEC_BLOCK: threads per block of rungs 7 and 8
CHAPTER_PER_THREAD = 64      # the chapter's VEC_PER_THREAD: elements per thread they aim for (at least one wave)


def wave_grid(kernel, block, sm_count):
    """Blocks of `block` threads that fit on the GPU at once: SMs x CUDA's occupancy answer
    (as wave_grid in book/reduce.md)."""
    import cupy as cp

    per_sm = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.raw.kernel.ptr, block, 0)
    return sm_count * int(per_sm)


class SinglePass:
    """sum_vec4_single_pass with its own workspace: grid partial sums and a counter at 0
    (as SinglePass in book/reduce.md, with the grid and block fixed at construction)."""

    def __init__(self, kernel, block, grid):
        import cupy as cp

        self.kernel, self.block, self.grid = kernel, block, grid
        self.partial = cp.empty(grid, cp.float32)
        self.counter = cp.zeros(1, cp.uint32)

    def __call__(self, x, n, out):
        self.kernel((self.grid,), (self.block,), (x, self.partial, self.counter, out, n))


def configurations(kernel, sm_count, n):
    """(label, threads, grid) of every single-pass configuration."""
    configs = []
    for threads in (256, 512, 1024):
        grid = wave_grid(kernel, threads, sm_count)
        configs.append((f"wave, {threads} thr", threads, grid))
    wave = wave_grid(kernel, CHAPTER_BLOCK, sm_count)
    for waves in (2, 4):
        configs.append((f"{waves} waves, {CHAPTER_BLOCK} thr", CHAPTER_BLOCK, waves * wave))
    for threads, per_thread in ((1024, 16), (1024, 32), (1024, 64), (512, 64), (256, 128)):
        chapter = threads == CHAPTER_BLOCK and per_thread == CHAPTER_PER_THREAD
        grid = ceil_div(n, threads * per_thread)
        if chapter:                                   # the chapter's rule: never fewer blocks than a wave
            grid = max(grid, wave_grid(kernel, threads, sm_count))
        configs.append((f"{threads} thr x {per_thread}/thr{' (chapter default)' if chapter else ''}", threads, grid))
    return configs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=28, help="n = 2^log2n float32 values (default 28)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up launches per benchmark (default 3)")
    parser.add_argument("--repeat", type=int, default=20, help="timed launches per benchmark (default 20)")
    args = parser.parse_args(argv)

    kernels.require_gpu("benchmarks/bench_reduce.py")
    import cupy as cp
    import numpy as np

    n = 2**args.log2n
    info = kernels.device_info()
    ceil = kernels.ceilings()
    nbytes = 4 * n
    print(f"{info.name} (compute capability {info.compute_capability}), {info.sm_count} SMs; "
          f"CuPy {cp.__version__}")
    print(ceil)

    x = cp.random.random(n, dtype=cp.float32)                      # uniform in [0, 1), allocated once
    exact = float(cp.sum(x, dtype=cp.float64))
    kernel = kernels.load_kernel(KERNEL_FILE, KERNEL_NAME)

    # Candidates: (label, threads, grid, fn); threads and grid are None for cupy.sum.
    candidates = []
    out_lib = {}

    def lib_sum():
        out_lib["v"] = cp.sum(x)

    candidates.append(("cupy.sum", None, None, lib_sum))
    for label, threads, grid in configurations(kernel, info.sm_count, n):
        run = SinglePass(kernel, threads, grid)
        out = cp.empty(1, cp.float32)
        candidates.append((label, threads, grid, lambda run=run, out=out: run(x, n, out)))

        # Check: NaN-poisoned output, two launches (the counter must be reset by the first).
        out.fill(np.nan)
        run(x, n, out)
        run(x, n, out)
        got = float(out[0])
        rel = abs(got - exact) / abs(exact)
        if not rel < REL_TOL or int(run.counter[0]) != 0:
            raise SystemExit(f"{label}: wrong result {got!r} (exact {exact!r}, relative error {rel:.2e}, "
                             f"counter {int(run.counter[0])})")
    lib_sum()
    rel_lib = abs(float(out_lib["v"]) - exact) / abs(exact)
    if not rel_lib < REL_TOL:
        raise SystemExit(f"cupy.sum: relative error {rel_lib:.2e}")
    print(f"all {len(candidates)} candidates within relative error {REL_TOL:g} of the float64 sum "
          f"(n = 2^{args.log2n})")

    # Interleaved timing: every round times every candidate; the start rotates.
    medians = {c[0]: [] for c in candidates}
    for r in range(args.rounds):
        order = candidates[r % len(candidates):] + candidates[:r % len(candidates)]
        for label, _, _, fn in order:
            t = kernels.benchmark(fn, warmup=args.warmup, repeat=args.repeat)
            medians[label].append(t.median_ms)
        print(f"round {r + 1}/{args.rounds} done")

    lib = medians["cupy.sum"]
    header = (f"{'config':<38}{'threads':>8}{'grid':>7}{'el/thr':>8}{'ms':>9}{'GB/s':>7}{'% copy':>8}"
              f"  {'x cupy.sum per round':<{6 * args.rounds}}{'median':>7}  >=1 all")
    print()
    print(f"n = 2^{args.log2n} float32, {args.rounds} rounds x benchmark(warmup={args.warmup}, "
          f"repeat={args.repeat}); copy ceiling {ceil.copy_gbps:.0f} GB/s")
    print(header)
    print("-" * len(header))
    always = []
    for label, threads, grid, _ in candidates:
        ms = statistics.median(medians[label])
        gb = nbytes / (ms * 1e-3) / 1e9
        ratios = [lib[r] / medians[label][r] for r in range(args.rounds)]
        ratio = statistics.median(ratios)
        per_thread = f"{n / (grid * threads):.0f}" if grid else ""
        ok = all(q >= 1.0 for q in ratios)
        if ok and grid:
            always.append(label)
        print(f"{label:<38}{threads or '':>8}{grid or '':>7}{per_thread:>8}{ms:9.4f}{gb:7.0f}"
              f"{100 * gb / ceil.copy_gbps:8.1f}  {''.join(f'{q:6.3f}' for q in ratios):<{6 * args.rounds}}"
              f"{ratio:7.3f}  {'yes' if ok and grid else ''}")
    print()
    if always:
        print("configs at >= 1.00x cupy.sum in every round: " + "; ".join(always))
    else:
        print("no config reached >= 1.00x cupy.sum in every round")


if __name__ == "__main__":
    try:
        main()
    except kernels.NoGPUError as exc:      # a clear sentence, not a traceback
        print(exc, file=sys.stderr)
        sys.exit(1)
