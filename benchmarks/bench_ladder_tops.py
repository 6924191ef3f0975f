"""The top rung of five chapters' ladders against its yardstick, timed two ways, beside the course's goal.

Each row launches what the chapter launches by default, checks it once (NaN-filled output against a
reference) and then times it and its yardstick in interleaved rounds, with two methods:

- "L2 flushed": ``kernels.benchmark``'s default, as the chapters time; the L2 cache is flushed before
  every launch, so no launch starts with its input already in the L2;
- "back to back": ``flush_l2=False``; nothing runs between launches but ``kernels.benchmark``'s
  lead-in (a 200 µs GPU sleep that hides Python's launch overhead), so each launch finds the L2 as
  the previous one left it.

| row | the chapter's kernel | yardstick (same run) | goal |
|---|---|---|---|
| reduce, 2^28 fp32 | ``sum_vec4_single_pass``, 1024 threads x 64 elements per thread | ``cupy.sum`` | >= 1.0 x |
| scan, 2^28 int32 | ``single_pass_scan_v2<int, 128, 32>`` | ``cupy.copyto`` of the same bytes | >= 80 % |
| transpose at three shapes | ``transpose_aligned_strip<32, 256, 16>``, grid as ``strip_launch`` orders it | copy of the same bytes | >= 90 % |
| softmax at three shapes, fp32 | the dispatch rule's kernel (``choose_config``) | ``torch.softmax`` | >= 1.0 x |
| SGEMM rung 7b, 4096^3 | ``warp_pipelined`` with the chapter's default tile | ``cupy.matmul`` fp32 (cuBLAS) | >= 90 % |
| tensor-core rung, 4096^3 fp16 | the chapter's WMMA rung with its default tile | ``cupy.matmul`` fp16 (cuBLAS) | >= 50 % |

A row's value is the median over rounds of (yardstick time / kernel time) in that round, each time the
median of ``--repeat`` launches. Rounds alternate which of the two starts, so that clock or thermal
drift affects both alike. The table is printed last; ``--out FILE`` also writes every record as JSON.

Run from the repository root on a GPU machine (about two minutes on an H200):

    PYTHONPATH=. python benchmarks/bench_ladder_tops.py --out benchmarks/results/ladder_tops_<gpu>.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))        # the repository root, for `kernels`
sys.path.insert(0, str(HERE))               # bench_reduce's launch of the reduce chapter's rung

import kernels  # noqa: E402
from kernels.numerics import FLOAT32_U, gamma  # noqa: E402

METHODS = {"L2 flushed": True, "back to back": False}
TRANSPOSE_SHAPES = ((8192, 8192), (1000, 50000), (8196, 8196))
SOFTMAX_SHAPES = ((65536, 4096), (4096, 32768), (2**20, 128))
GEMM_SIZE = 4096
# --candidates: alternatives the chapters do not launch, timed the same way, to show what a rule
# that picked per GPU would gain (a bigger scan tile, a shorter transpose strip, the strip moved in
# 16-byte pieces, smaller softmax blocks), and for the short softmax rows how fast a copy of the same
# bytes is (torch's softmax and ours against the copy: the ceiling both run into, and the DRAM-bursts
# chapter's copy_vec4, one float4 per thread, against cupy.copyto: how far above it a kernel can go)
# scan: (kernel, threads, items, (wait_ns, poll_ns) or None for v2)
SCAN_CHAPTER = ("single_pass_scan_v2", 128, 32, None)
SCAN_CANDIDATES = (("single_pass_scan_v2", 128, 64, None), ("single_pass_scan_v2", 256, 40, None),
                   *(("single_pass_scan_backoff", t, i, (w, p)) for t, i, w, p in
                     ((256, 32, 0, 0), (256, 32, 2400, 0), (256, 32, 3200, 650), (128, 32, 3200, 650))))
STRIP = "transpose_aligned_strip"
STRIP_CANDIDATES = ((STRIP, 128, 8), (f"{STRIP}_vec4", 128, 16), (f"{STRIP}_vec4", 64, 8))
SOFTMAX_WARP_THREADS = (64, 128)
SOFTMAX_CEILING_COLS = 128


@dataclass
class Row:
    """One goal: a kernel, its yardstick, and the share reached with each timing method."""

    chapter: str
    shape: str
    kernel: str
    yardstick: str
    unit: str                    # "x" (speed ratio) or "%" (share of the yardstick's speed)
    goal: float
    candidate: bool = False      # an alternative the chapter does not launch (--candidates)
    variant: str = ""            # what tells it apart, in a few words
    ratios: dict[str, float] = field(default_factory=dict)
    kernel_ms: dict[str, float] = field(default_factory=dict)
    yardstick_ms: dict[str, float] = field(default_factory=dict)

    def shown(self, method: str) -> float:
        return self.ratios[method] * (100.0 if self.unit == "%" else 1.0)

    def met(self) -> bool:
        return all(self.shown(m) >= self.goal for m in METHODS)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def time_pair(row: Row, kernel: Callable[[], Any], yardstick: Callable[[], Any], rounds: int,
              warmup: int, repeat: int) -> None:
    """Fill ``row`` with both methods' interleaved medians."""
    for method, flush in METHODS.items():
        k_ms, y_ms = [], []
        for r in range(rounds):
            order = ((kernel, k_ms), (yardstick, y_ms)) if r % 2 == 0 else ((yardstick, y_ms), (kernel, k_ms))
            for fn, into in order:
                into.append(kernels.benchmark(fn, warmup=warmup, repeat=repeat, flush_l2=flush).median_ms)
        row.kernel_ms[method] = statistics.median(k_ms)
        row.yardstick_ms[method] = statistics.median(y_ms)
        row.ratios[method] = statistics.median(y / k for y, k in zip(y_ms, k_ms))
    log(f"  {row.chapter} {row.shape}: " + ", ".join(f"{m} {row.shown(m):.3g}{row.unit}" for m in METHODS))


def variants(chosen: Any, candidates: Any, args: argparse.Namespace) -> list[tuple[Any, bool]]:
    """(variant, is_candidate): the chapter's choice, then the candidates when --candidates is given."""
    return [(v, False) for v in chosen] + ([(v, True) for v in candidates] if args.candidates else [])


def reduce_row(cp: Any, args: argparse.Namespace) -> Row:
    import bench_reduce as br

    n = 2**28
    x = cp.random.random(n, dtype=cp.float32)
    kernel = kernels.load_kernel(br.KERNEL_FILE, br.KERNEL_NAME)
    sm_count = kernels.device_info().sm_count
    grid = max(kernels.ceil_div(n, br.CHAPTER_BLOCK * br.CHAPTER_PER_THREAD),
               br.wave_grid(kernel, br.CHAPTER_BLOCK, sm_count))
    single = br.SinglePass(kernel, br.CHAPTER_BLOCK, grid)
    out = cp.full(1, cp.nan, cp.float32)
    single(x, n, out)
    exact = float(cp.sum(x, dtype=cp.float64))
    if not abs(float(out[0]) - exact) <= br.REL_TOL * abs(exact):
        raise AssertionError(f"reduce: {float(out[0])} against {exact}")
    row = Row("reduce", "2^28 fp32", f"{br.KERNEL_NAME}, {br.CHAPTER_BLOCK} x {br.CHAPTER_PER_THREAD}",
              "cupy.sum", "x", 1.0)
    time_pair(row, lambda: single(x, n, out), lambda: cp.sum(x), args.rounds, args.warmup, args.repeat)
    return row


def scan_rows(cp: Any, args: argparse.Namespace) -> list[Row]:
    import numpy as np

    from kernels import scan as sc

    n = 2**28
    x = cp.random.randint(-100, 100, n, dtype=cp.int32)
    y, copy = cp.empty_like(x), cp.empty_like(x)
    expected = cp.cumsum(x, dtype=cp.int32)
    rows_out = []
    for (kernel_name, threads, items, sleeps), candidate in variants((SCAN_CHAPTER,), SCAN_CANDIDATES, args):
        if sleeps is None:
            name = f"{kernel_name}<int, {threads}, {items}>"
            scan = sc.SinglePassScanV2(n, np.int32, threads, items)
            variant = f"{threads} x {items}"
        else:
            name = f"{kernel_name}<int, {threads}, {items}, {sleeps[0]}, {sleeps[1]}>"
            scan = sc.SinglePassScanBackoff(n, np.int32, threads, items, *sleeps)
            variant = f"backoff {threads}x{items} {sleeps[0]}/{sleeps[1]} ns"
        y.fill(0)
        scan(x, y)
        if not bool(cp.array_equal(y, expected)):
            raise AssertionError(f"scan: {name} differs from cupy.cumsum")
        row = Row("scan", "2^28 int32", name, "copy of the same bytes", "%", 80.0, candidate, variant)
        time_pair(row, lambda scan=scan: scan(x, y), lambda: cp.copyto(copy, x), args.rounds, args.warmup,
                  args.repeat)
        rows_out.append(row)
    if args.candidates:
        rows_out += library_scan_rows(cp, x, y, copy, expected, args)
    return rows_out


def library_scan_rows(cp: Any, x: Any, y: Any, copy: Any, expected: Any, args: argparse.Namespace) -> list[Row]:
    """CUB's single-pass scan (DeviceScan::InclusiveSum) against the copy, two ways in: CuPy with its
    CUB accelerator switched on (plain ``cupy.cumsum`` does not use CUB) and ``torch.cumsum`` into an
    int32 output. Either is left out, with a line saying why, where this machine lacks it."""
    rows: list[Row] = []
    try:
        from cupy._core import _accelerator

        before = _accelerator.get_routine_accelerators()
        _accelerator.set_routine_accelerators(["cub"])
        try:
            y.fill(0)
            cp.cumsum(x, dtype=cp.int32, out=y)
            if not bool(cp.array_equal(y, expected)):
                raise AssertionError("scan: cupy.cumsum with CUB differs from cupy.cumsum")
            row = Row("scan", "2^28 int32", "cupy.cumsum, CUB accelerator", "copy of the same bytes", "%", 80.0,
                      True, "CUB via cupy.cumsum")
            time_pair(row, lambda: cp.cumsum(x, dtype=cp.int32, out=y), lambda: cp.copyto(copy, x), args.rounds,
                      args.warmup, args.repeat)
            rows.append(row)
        finally:
            _accelerator.set_routine_accelerators(before)
    except (ImportError, AttributeError, ValueError, RuntimeError) as exc:
        log(f"scan: CuPy's CUB accelerator is not usable here ({exc}); its row is left out")
    try:
        import torch
    except ImportError:
        log("scan: torch is not installed here; torch.cumsum's row is left out")
        return rows
    xt = torch.as_tensor(x, device="cuda")
    yt = torch.empty_like(xt)
    torch.cumsum(xt, 0, out=yt)
    if not bool(cp.array_equal(cp.asarray(yt), expected)):
        raise AssertionError("scan: torch.cumsum differs from cupy.cumsum")
    row = Row("scan", "2^28 int32", "torch.cumsum (CUB)", "copy of the same bytes", "%", 80.0, True, "torch.cumsum")
    time_pair(row, lambda: torch.cumsum(xt, 0, out=yt), lambda: cp.copyto(copy, x), args.rounds, args.warmup,
              args.repeat)
    rows.append(row)
    return rows


def transpose_rows(cp: Any, args: argparse.Namespace) -> list[Row]:
    from kernels.coalescing import strip_launch

    rows_out = []
    for rows, cols in TRANSPOSE_SHAPES:
        a = cp.random.random((rows, cols), dtype=cp.float32)
        out, copy = cp.empty((cols, rows), cp.float32), cp.empty_like(a)
        for (kernel_name, strip_rows, rows_per_pass), candidate in variants(((STRIP, 256, 16),), STRIP_CANDIDATES,
                                                                             args):
            name = f"{kernel_name}<32, {strip_rows}, {rows_per_pass}>"
            strip = kernels.load_kernel("coalescing/transpose_stores.cu", name)
            launch = strip_launch(rows, cols, 32, strip_rows, rows_per_pass)

            def run(strip=strip, launch=launch, a=a, out=out, rows=rows, cols=cols) -> None:
                strip(launch.grid, launch.block, (a, out, rows, cols, launch.strips_along_x))

            out.fill(cp.nan)
            run()
            if not bool(cp.array_equal(out, a.T)):
                raise AssertionError(f"transpose: {name} wrong at {rows} x {cols}")
            row = Row("transpose", f"{rows} x {cols}", name, "copy of the same bytes", "%", 90.0, candidate,
                      f"{'vec4 ' if kernel_name != STRIP else ''}<32, {strip_rows}, {rows_per_pass}>")
            time_pair(row, run, lambda a=a, copy=copy: cp.copyto(copy, a), args.rounds, args.warmup, args.repeat)
            rows_out.append(row)
        del a, out, copy
    return rows_out


def softmax_rows(cp: Any, args: argparse.Namespace) -> list[Row]:
    import numpy as np

    from kernels import softmax as sm

    if not sm.torch_available():
        log("softmax: torch is not installed here; its rows are left out")
        return []
    limit = sm.max_shared_per_block()
    rows_out = []
    for rows, cols in SOFTMAX_SHAPES:
        x = cp.random.default_rng(0).standard_normal((rows, cols), dtype=cp.float32)
        y = cp.empty_like(x)
        reference = sm.reference_on_gpu(x)
        name, library = sm.library_softmax(x)
        chosen = sm.choose_config(cols, np.float32, limit)
        others = [sm.Config("warp_cached", threads=t, items=chosen.items, rows_per_warp=chosen.rows_per_warp)
                  for t in SOFTMAX_WARP_THREADS if chosen.kind == "warp_cached" and t != chosen.threads]
        for config, candidate in variants((chosen,), others, args):
            kernel = sm.Softmax(config)
            y.fill(cp.nan)
            kernel(x, y)
            tol = sm.softmax_tolerance(cols, sm.threads_per_row(config))
            err = sm.relative_error(y, reference)
            if not err <= tol:
                raise AssertionError(f"softmax: {config.label} error {err:.2e} above {tol:.2e} at {rows} x {cols}")
            shape = f"{'2^20' if rows == 2**20 else rows} x {cols}"
            row = Row("softmax", shape, config.label, name, "x", 1.0, candidate, f"{config.threads}-thread blocks")
            time_pair(row, lambda kernel=kernel, x=x, y=y: kernel(x, y), library, args.rounds, args.warmup,
                      args.repeat)
            rows_out.append(row)
        if args.candidates and cols == SOFTMAX_CEILING_COLS:
            copy = cp.empty_like(x)
            chapter = sm.Softmax(chosen)
            copy_vec4 = kernels.load_kernel("dram_bursts/copy_vec4.cu", "copy_vec4")
            n = x.size
            copy_blocks = kernels.ceil_div(n // 4, 256)

            def vec4_copy(x=x, copy=copy) -> None:
                copy_vec4((copy_blocks,), (256,), (x, copy, n))

            copy.fill(cp.nan)
            vec4_copy()
            if not bool(cp.array_equal(copy, x)):
                raise AssertionError("softmax: copy_vec4 wrong on the short rows")
            for label, fn, variant in ((f"{chosen.label}", lambda: chapter(x, y), "ours vs copy"),
                                       (name, library, "torch vs copy"),
                                       ("copy_vec4, 1 float4 per thread", vec4_copy, "a copy kernel vs copy")):
                row = Row("softmax", shape, label, "copy of the same bytes", "%", 100.0, True, variant)
                time_pair(row, fn, lambda copy=copy, x=x: cp.copyto(copy, x), args.rounds, args.warmup, args.repeat)
                rows_out.append(row)
            del copy
        del x, y, reference
    return rows_out


def gemm_rows(cp: Any, args: argparse.Namespace) -> list[Row]:
    from kernels import gemm as gm

    n = GEMM_SIZE
    cc = kernels.device_info().compute_capability
    top_simt = next(r for r in gm.ladder(cc) if r.family == "warp_pipelined")
    tensor = gm.tensor_core_rung(cc)
    rows_out = []
    for rung, dtype, yardstick, goal in ((top_simt, cp.float32, "cupy.matmul fp32 (cuBLAS)", 90.0),
                                         (tensor, cp.float16, "cupy.matmul fp16 (cuBLAS)", 50.0)):
        kernel = gm.GemmKernel(rung.family, rung.params)
        # the reference: the float64 product of the same (for fp16: already rounded) inputs
        a = cp.random.random((n, n), dtype=cp.float32).astype(dtype)
        b = cp.random.random((n, n), dtype=cp.float32).astype(dtype)
        c = cp.full((n, n), cp.nan, cp.float32)
        kernel(a, b, c, n, n, n)
        a64, b64 = a.astype(cp.float64), b.astype(cp.float64)
        reference = cp.matmul(a64, b64)
        # |c - AB| <= gamma_{K+2} (|A| |B|) elementwise (Higham, eq. 3.5); tensor cores may truncate
        # instead of rounding, which doubles the unit roundoff (see kernels.gemm.fp16_tolerance)
        tol = gamma(n + 2, FLOAT32_U if dtype == cp.float32 else 2 * FLOAT32_U)
        err = float(cp.max(cp.abs(c - reference) / cp.matmul(cp.abs(a64), cp.abs(b64))))
        if not err <= tol:
            raise AssertionError(f"gemm: {kernel.label} relative error {err:.2e} above {tol:.2e}")
        del reference, a64, b64
        row = Row("gemm", f"{n}^3 {cp.dtype(dtype).name}", kernel.label, yardstick, "%", goal)
        time_pair(row, lambda kernel=kernel, a=a, b=b, c=c: kernel(a, b, c, n, n, n), lambda a=a, b=b: cp.matmul(a, b),
                  args.rounds, args.warmup, args.repeat)
        rows_out.append(row)
        del a, b, c
    return rows_out


def _line(row: Row, label: str) -> str:
    cells = [f"{row.shown(m):.4f} x" if row.unit == "x" else f"{row.shown(m):.1f} %" for m in METHODS]
    goal = f">= {row.goal:g}{' x' if row.unit == 'x' else ' %'}"
    return f"{row.chapter:<10} {label:<34} {goal:>8} {cells[0]:>10} {cells[1]:>12}  {'yes' if row.met() else 'NO'}"


def table(rows: list[Row], gpu: str) -> str:
    """The chapters' rows (shape), then the alternatives (shape and kernel); at most 90 columns."""
    header = f"{'chapter':<10} {'':<34} {'goal':>8} {'L2 flushed':>10} {'back to back':>12}  met"
    lines = [f"{gpu}: each chapter's top rung against its yardstick (median of interleaved rounds)", header]
    lines += [_line(r, r.shape) for r in rows if not r.candidate]
    alternatives = [r for r in rows if r.candidate]
    if alternatives:
        lines.append("alternatives the chapters do not launch (--candidates):")
        lines += [_line(r, f"{r.shape}, {r.variant}") for r in alternatives]
    lines.append("the chapters' kernels:")
    lines += [f"  {name}" for name in dict.fromkeys(f"{r.chapter}: {r.kernel}" for r in rows if not r.candidate)]
    return "\n".join(lines)


ROWS = {"reduce": reduce_row, "scan": scan_rows, "transpose": transpose_rows, "softmax": softmax_rows,
        "gemm": gemm_rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(ROWS), default=sorted(ROWS), help="rows to run")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds per method (default 4)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up launches per timing (default 3)")
    parser.add_argument("--repeat", type=int, default=15, help="timed launches per timing (default 15)")
    parser.add_argument("--candidates", action="store_true",
                        help="also time alternatives the chapters do not launch (see SCAN_CANDIDATES ...)")
    parser.add_argument("--out", type=Path, default=None, help="write the records as JSON to this file")
    parser.add_argument("--table", type=Path, default=None,
                        help="print the table of a JSON file written by --out, and time nothing")
    args = parser.parse_args(argv)
    if args.table:
        recorded = json.loads(args.table.read_text())
        print(table([Row(**r) for r in recorded["rows"]], recorded["gpu"]))
        return 0
    try:
        kernels.require_gpu("benchmarks/bench_ladder_tops.py")
    except kernels.NoGPUError as exc:      # a clear sentence, not a traceback
        print(exc, file=sys.stderr)
        return 1
    import cupy as cp

    info = kernels.device_info()
    log(f"{info.name}, compute capability {info.compute_capability}, {info.sm_count} SMs")
    rows: list[Row] = []
    for name in sorted(args.only, key=list(ROWS).index):
        made = ROWS[name](cp, args)
        rows += made if isinstance(made, list) else [made]
        cp.get_default_memory_pool().free_all_blocks()
    if args.out:
        record = {"gpu": info.name, "provenance": kernels.provenance(), "rows": [asdict(r) for r in rows]}
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(table(rows, info.name))
    return 0 if all(r.met() for r in rows if not r.candidate) else 2


if __name__ == "__main__":
    sys.exit(main())
