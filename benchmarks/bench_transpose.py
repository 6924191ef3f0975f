"""Transposes of the "Coalescing" chapter when the number of rows is not a multiple of 8 floats.

The padded tiled transpose of kernels/cuda/coalescing/transpose.cu writes output rows of `rows`
floats. When rows % 8 != 0 those rows start part-way into 32-byte sectors, and each warp's 128-byte
store touches 5 sectors, two of them partly. For every shape below this script times, on one GPU and
in one run:

- a flat device copy of the same bytes, ``cp.copyto(b, a)``: the ceiling each transpose is compared with;
- ``transpose_tiled<32, 8, 1>`` and ``transpose_tiled<64, 8, 1>`` from transpose.cu, launched as the
  chapter does (grid (ceil(cols / T), ceil(rows / T)), block (T, 8));
- ``transpose_aligned_strip<32, 256, 16>`` (the chapter's choice) and ``<32, 128, 8>`` from
  kernels/cuda/coalescing/transpose_stores.cu: each block transposes a tall strip of S x 32 elements
  (8 halo rows above it) and shifts each output row's S-float store window left by the row's
  misalignment, so that every warp store covers whole 32-byte sectors; ceil((rows + 7) / S) strips
  by ceil(cols / 32) column blocks, block (32, R), the grid laid out as
  ``kernels.chapters.coalescing.strip_launch`` chooses (the smaller count along x); and
  ``<32, 256, 16>`` once more with the grid the other way round ("other order"), to show what the
  choice is worth at each shape;
- ``transpose_aligned_strip_vec4<32, 128, 16>`` from the same file, the strip kernel tuned for the H200
  (16-byte loads and stores where the number of columns is a multiple of 4, every load issued before
  the first shared-memory store, 2048 resident threads per SM), in strip_launch's order;
- ``transpose_store_pattern<32, 8>`` from the same file: transpose_tiled<32, 8, 1>'s stores alone,
  writing 1.0f, nothing read.

Every kernel's output is first checked exactly (NaN-filled beforehand) against a.T, the copy against
a and the store pattern against ones; a wrong kernel is reported and not timed, and the script then
exits with status 1. Times are medians of ``kernels.benchmark`` (CUDA events, warm-up 2, 10 timed
runs, L2 flushed). GB/s counts 2 * rows * cols * 4 bytes (read + written) for the copy and the
transposes, and only the rows * cols * 4 bytes written for the store pattern; "% copy" is a
transpose's GB/s over the flat copy's of the same shape in the same run. The header names the GPU
and its ECC mode (from nvidia-smi, "unknown" without it).

Run from the repository root on a GPU machine:

    python benchmarks/bench_transpose.py            # twelve shapes up to 16384 x 4096 (256 MiB each)
    python benchmarks/bench_transpose.py --quick    # two small shapes, a smoke test

Progress goes to stderr; the table is printed last, on stdout.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import kernels  # noqa: E402
from kernels import ceil_div  # noqa: E402
from kernels.chapters.coalescing import strip_launch  # noqa: E402

SHAPES = [(8192, 8192), (8192, 8193), (8193, 8192), (8191, 8193), (8196, 8196), (4097, 4095),
          (1000, 50000), (1024, 50000), (50000, 1000), (50000, 1024), (4096, 16384), (16384, 4096)]
QUICK_SHAPES = [(2048, 2048), (2049, 2047)]
WARMUP, REPEAT = 2, 10

# (label, source, kernel name, T, R, S, kind); every block is (T, R) threads. "transpose" launches with
# grid (ceil(cols / T), ceil(rows / T)); "strip" as kernels.chapters.coalescing.strip_launch says, for the strip
# height S; "strip_other_order" with that grid the other way round; "stores" is the store pattern (no
# input), with transpose_tiled's grid.
KERNELS = [
    ("tiled<32,8,1>", "coalescing/transpose.cu", "transpose_tiled<32, 8, 1>", 32, 8, None, "transpose"),
    ("tiled<64,8,1>", "coalescing/transpose.cu", "transpose_tiled<64, 8, 1>", 64, 8, None, "transpose"),
    ("aligned strip<32,256,16>", "coalescing/transpose_stores.cu", "transpose_aligned_strip<32, 256, 16>",
     32, 16, 256, "strip"),
    ("aligned strip<32,128,8>", "coalescing/transpose_stores.cu", "transpose_aligned_strip<32, 128, 8>",
     32, 8, 128, "strip"),
    ("strip<32,256,16> other order", "coalescing/transpose_stores.cu", "transpose_aligned_strip<32, 256, 16>",
     32, 16, 256, "strip_other_order"),
    ("16-byte strip<32,128,16>", "coalescing/transpose_stores.cu", "transpose_aligned_strip_vec4<32, 128, 16>",
     32, 16, 128, "strip"),
    ("stores<32,8>", "coalescing/transpose_stores.cu", "transpose_store_pattern<32, 8>", 32, 8, None, "stores"),
]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ecc_mode() -> str:
    """The current GPU's ECC mode as nvidia-smi reports it ("Enabled", "Disabled", ...), or "unknown"."""
    try:
        import cupy as cp

        bus_id = cp.cuda.Device().pci_bus_id
        done = subprocess.run(["nvidia-smi", f"--id={bus_id}", "--query-gpu=ecc.mode.current",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        mode = done.stdout.strip()
        return mode if done.returncode == 0 and mode else "unknown"
    except Exception:                      # no nvidia-smi, no permission, an old CuPy: not worth failing for
        return "unknown"


def launcher(kernel, tile: int, rows_per_pass: int, strip, kind: str, rows: int, cols: int, a, out):
    """A function that queues one launch of ``kernel`` on (a, out) as KERNELS' ``kind`` says."""
    block = (tile, rows_per_pass)
    if kind in ("strip", "strip_other_order"):
        launch = strip_launch(rows, cols, tile, strip, rows_per_pass)
        if kind == "strip_other_order":
            launch = strip_launch(rows, cols, tile, strip, rows_per_pass, strips_along_x=not launch.strips_along_x)
        return lambda: kernel(launch.grid, launch.block, (a, out, rows, cols, launch.strips_along_x))
    grid = (ceil_div(cols, tile), ceil_div(rows, tile))
    if kind == "stores":
        return lambda: kernel(grid, block, (out, rows, cols))
    return lambda: kernel(grid, block, (a, out, rows, cols))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"only {' and '.join(f'{r}x{c}' for r, c in QUICK_SHAPES)} (a smoke test)")
    args = parser.parse_args(argv)

    kernels.require_gpu("benchmarks/bench_transpose.py")
    import cupy as cp
    import numpy as np

    t0 = time.time()
    info = kernels.device_info()
    ecc = ecc_mode()
    loaded = [(label, kernels.load_kernel(path, name), tile, rows_per_pass, strip, kind)
              for label, path, name, tile, rows_per_pass, strip, kind in KERNELS]
    log(f"{info.name}, ECC mode: {ecc}; kernels compiled ({time.time() - t0:.1f} s)")

    shapes = QUICK_SHAPES if args.quick else SHAPES
    results = []                           # (rows, cols, copy GB/s, {label: GB/s or None if wrong})
    wrong = []
    for rows, cols in shapes:
        nbytes = 4 * rows * cols
        a = cp.random.random((rows, cols), dtype=cp.float32)
        b = cp.empty_like(a)
        out = cp.empty((cols, rows), dtype=cp.float32)

        b.fill(np.nan)
        cp.copyto(b, a)
        if not bool(cp.array_equal(b, a)):
            wrong.append(f"{rows}x{cols} flat copy")
        copy = kernels.gbps(2 * nbytes, kernels.benchmark(lambda: cp.copyto(b, a), warmup=WARMUP, repeat=REPEAT))
        del b

        speeds = {}
        for label, kernel, tile, rows_per_pass, strip, kind in loaded:
            fn = launcher(kernel, tile, rows_per_pass, strip, kind, rows, cols, a, out)
            out.fill(np.nan)
            fn()
            expected = cp.ones((cols, rows), dtype=cp.float32) if kind == "stores" else a.T
            if not bool(cp.array_equal(out, expected)):
                wrong.append(f"{rows}x{cols} {label}")
                speeds[label] = None
                continue
            timing = kernels.benchmark(fn, warmup=WARMUP, repeat=REPEAT)
            speeds[label] = kernels.gbps(nbytes if kind == "stores" else 2 * nbytes, timing)
        del a, out
        cp.get_default_memory_pool().free_all_blocks()
        results.append((rows, cols, copy, speeds))
        log(f"{rows}x{cols}: copy {copy:.0f} GB/s, "
            + ", ".join(f"{k} {'WRONG' if v is None else f'{v:.0f}'}" for k, v in speeds.items())
            + f"  ({time.time() - t0:.1f} s)")

    transposes = [label for label, *_, kind in KERNELS if kind != "stores"]
    stores = [label for label, *_, kind in KERNELS if kind == "stores"]
    header = ["shape", "rows%8", "copy GB/s"]
    for label in transposes:
        header += [f"{label} GB/s", "% copy"]
    header += [f"{label} GB/s (written)" for label in stores]
    table = []
    for rows, cols, copy, speeds in results:
        row = [f"{rows}x{cols}", str(rows % 8), f"{copy:.0f}"]
        for label in transposes:
            v = speeds[label]
            row += ["WRONG", "-"] if v is None else [f"{v:.0f}", f"{100 * v / copy:.1f}"]
        row += ["WRONG" if speeds[label] is None else f"{speeds[label]:.0f}" for label in stores]
        table.append(row)

    widths = [max(len(r[c]) for r in table + [header]) for c in range(len(header))]
    print(f"\n{info.name} (compute capability {info.compute_capability}), ECC mode: {ecc}; CuPy {cp.__version__}")
    print(f"fp32, kernels.benchmark(warmup={WARMUP}, repeat={REPEAT}), median; GB/s = 2 * rows * cols * 4 "
          f"bytes / time (the store pattern: rows * cols * 4); % copy: of the flat copy in the same row")
    for r in [header] + table:
        print("  ".join(v.ljust(w) if c == 0 else v.rjust(w) for c, (v, w) in enumerate(zip(r, widths))))
    if wrong:
        print("\nWRONG results (not timed): " + "; ".join(wrong))
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except kernels.NoGPUError as exc:      # a clear sentence, not a traceback
        print(exc, file=sys.stderr)
        sys.exit(1)
