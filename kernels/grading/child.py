"""The grader's sandboxed process: evaluate one submission and stream what happens to a file.

    python -m kernels.grading.child --exercise reduce/sum_int64 --kernel kernel.cu --seed SEED \
        --events events.jsonl [--prediction prediction.json] [--no-perf] [--gpu-memory-mb 4096]

Each line of the events file is one JSON object: {"event": "start", "case": ...} before a case,
{"event": "case", "result": ...} after it, and {"event": "report", "report": ...} at the end. When the
process dies (a hang killed by the grader, a segfault), the lines written so far tell the grader
which case was running. Only the kernel text and the prediction dict cross into this process.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _writer(path: Path):
    stream = open(path, "a", encoding="utf-8")

    def emit(event: dict[str, Any]) -> None:
        stream.write(json.dumps(event, default=str) + "\n")
        stream.flush()

    return emit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernels.grading.child")
    parser.add_argument("--exercise", required=True)
    parser.add_argument("--kernel")
    parser.add_argument("--prediction")
    parser.add_argument("--seed", required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--no-perf", action="store_true")
    parser.add_argument("--no-public", action="store_true")
    parser.add_argument("--gpu-memory-mb", type=int, default=0)
    parser.add_argument("--perf-target", type=float, default=None)
    args = parser.parse_args(argv)

    emit = _writer(Path(args.events))
    from .registry import exercise
    from .session import evaluate

    ex = exercise(args.exercise)
    if args.perf_target is not None and ex.perf is not None:
        import dataclasses

        ex = dataclasses.replace(ex, perf=dataclasses.replace(ex.perf, target=args.perf_target))
    kernel = Path(args.kernel).read_text(encoding="utf-8") if args.kernel else None
    prediction = json.loads(Path(args.prediction).read_text(encoding="utf-8")) if args.prediction else None
    if args.gpu_memory_mb:
        try:
            import cupy

            cupy.get_default_memory_pool().set_limit(size=args.gpu_memory_mb << 20)
        except Exception:
            pass
    visibilities = ("hidden",) if args.no_public else ("public", "hidden")
    report = evaluate(ex, kernel=kernel, prediction=prediction, visibilities=visibilities, secret=args.seed,
                      perf=not args.no_perf,
                      on_start=lambda case: emit({"event": "start", "case": case.name, "visibility": case.visibility,
                                                  "why": case.why}),
                      on_result=lambda result: emit({"event": "case", "result": result.to_dict()}))
    emit({"event": "report", "report": report.to_dict()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
