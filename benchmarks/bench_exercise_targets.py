"""The speed targets of the graded exercises, checked on the GPU at hand.

For every exercise with a speed target, the reference solution and every valid alternative in
exercises/corpus/ (entries whose GPU verdict may be "passed") are timed the way the grader times
them (``kernels.grading.perf``: the large case, CUDA events, L2 flushed, every timed launch
checked), ``--rounds`` times in turn. The table gives the median fraction of the yardstick measured
in the same run (the copy ceiling, cuBLAS, or the ideal pipeline speedup), the target, and the
margin: how far above the target the slowest round was. A target holds on this GPU when every
reference and valid alternative clears it in every round.

    PYTHONPATH=. python benchmarks/bench_exercise_targets.py [--rounds 3] [--only coalescing/gemv_rows]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import numpy as np  # noqa: E402

import exercises as extool  # noqa: E402
import kernels  # noqa: E402
from kernels.grading import verdicts as V  # noqa: E402
from kernels.grading.harness import launch_macros, load_kernels  # noqa: E402
from kernels.grading.perf import measure  # noqa: E402
from kernels.grading.registry import all_exercises  # noqa: E402
from kernels.grading.runtime import CourseRuntime  # noqa: E402
from kernels.grading.session import perf_seed  # noqa: E402

CORPUS = ROOT / "exercises" / "corpus"


def candidates(exercise_id: str) -> list[tuple[str, str]]:
    """(label, kernel source): the reference solution, then every valid alternative of the corpus."""
    found = [("reference solution", extool.solution(exercise_id))]
    folder = CORPUS / exercise_id
    for path in sorted(folder.glob("*.cu")) if folder.is_dir() else []:
        text = path.read_text(encoding="utf-8")
        expect = re.search(r"^// expect: (.+)$", text, re.M)
        if expect and V.PASSED in {v.strip() for v in expect.group(1).split("|")}:
            found.append((path.name, text))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    if not kernels.gpu_available():
        print("bench_exercise_targets.py needs a CUDA GPU with CuPy", file=sys.stderr)
        return 1
    runtime = CourseRuntime()
    info = kernels.device_info()
    ceilings = kernels.ceilings()
    print(f"# {info.name}, compute capability {info.compute_capability}, {info.sm_count} SMs; "
          f"copy ceiling {ceilings.copy_gbps:.0f} GB/s")
    rows = []
    for ex in all_exercises().values():
        if ex.perf is None or (args.only and ex.id != args.only):
            continue
        rng_seed = perf_seed(ex, ("public",), None)
        for label, code in candidates(ex.id):
            loaded = load_kernels(code, ex, runtime)
            macros = launch_macros(code, ex)
            fractions, verdicts = [], []
            for _ in range(args.rounds):
                result = measure(ex, loaded, runtime, np.random.default_rng(rng_seed), macros)
                verdicts.append(result.verdict)
                if result.fraction is not None:
                    fractions.append(result.fraction)
            median = statistics.median(fractions) if fractions else float("nan")
            low = min(fractions) if fractions else float("nan")
            rows.append((ex.id, label, median, low, ex.perf.target, ",".join(sorted(set(verdicts)))))
            print(f"  {ex.id:36s} {label:28s} {100 * median:6.1f} %  (lowest {100 * low:5.1f} %)  "
                  f"target {100 * ex.perf.target:3.0f} %  {rows[-1][5]}", flush=True)
    print()
    print(f"{'exercise':36s} {'kernel':28s} {'median':>7s} {'lowest':>7s} {'target':>7s} {'margin':>7s}  verdicts")
    for ex_id, label, median, low, target, verdicts in rows:
        print(f"{ex_id:36s} {label:28s} {100 * median:6.1f}% {100 * low:6.1f}% {100 * target:6.0f}% "
              f"{100 * (low - target):+6.1f}   {verdicts}")
    failing = [r for r in rows if not (r[3] >= r[4])]
    print(f"\n{len(rows) - len(failing)} of {len(rows)} kernels clear their target in every round on {info.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
