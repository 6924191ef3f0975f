"""Record what the course promises on the GPU at hand, in one command: the GPU tests, the speed targets, the benchmarks.

    python tools/gpu_record.py                       # every step, results into benchmarks/results/
    python tools/gpu_record.py --only gpu-test ladder-tops
    python tools/gpu_record.py --list                # the steps, and what each writes

Why: a GPU's record is several scripts run in a careful order (speed tests on a quiet GPU, one at a
time; the rest in parallel where pytest-xdist is installed) with their outputs kept under the GPU's
name. Doing that by hand misses a step or mixes two GPUs' files. Each step runs in its own process
with a time limit, its whole log is kept in ``<out>/logs/<gpu>/``, and a table of steps, status and
wall time is printed last. A step that fails does not stop the others.

Files are named after the GPU's model, as the recorded ones are (``tools/notebooks.gpu_slug``):
``gpu_test_<gpu>.txt``, ``exercise_targets_<gpu>.txt``, ``ladder_tops_<gpu>.{json,txt}``,
``bench_hopper_<gpu>.{json,txt}`` (Hopper only) and ``t4_profile_<gpu>.*``. Executing the chapters is not a
step: which run a chapter keeps is a decision (``tools/notebooks.py execute``, with or without
``--second-run``).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from notebooks import gpu_slug  # noqa: E402


@dataclass(frozen=True)
class Step:
    name: str
    writes: str                      # what it leaves in the results folder ({gpu} is the model)
    limit_s: int
    hopper_only: bool = False


STEPS = (
    Step("gpu-test", "gpu_test_{gpu}.txt", 1500),
    Step("exercise-targets", "exercise_targets_{gpu}.txt", 900),
    Step("ladder-tops", "ladder_tops_{gpu}.json and .txt", 600),
    Step("hopper", "bench_hopper_{gpu}.json and .txt", 600, hopper_only=True),
    Step("t4-profile", "t4_profile_{gpu}.json and .txt", 1800),
)
# make gpu-test in parts: speed tests alone on a quiet GPU, then the rest (pytest-xdist where it is there)
GPU_TEST_PARTS = (
    ("exercise speed targets", ["tests/gpu/test_exercises_gpu.py", "-k", "meets"], False),
    ("other exercise tests", ["tests/gpu/test_exercises_gpu.py", "-k", "not meets"], True),
    ("tests/kernel_checks", ["tests/kernel_checks"], True),
    ("all other GPU tests", ["tests", "--ignore=tests/kernel_checks", "--ignore=tests/gpu/test_exercises_gpu.py"], False),
)
PYTEST_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+)(?: in [\d.]+s)?.*$", re.M)


def run(command: list[str], log: Path, limit_s: int) -> tuple[int, str]:
    """Run ``command`` from the repository root with the repository on PYTHONPATH; (status, output)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit_s)
        status, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        status, output = 124, out + f"\nstopped after {limit_s} s\n"
    log.write_text(output)
    return status, output


def pytest_summary(output: str) -> str:
    """pytest's last summary line ("2158 passed, 4 skipped"), or the last line it printed."""
    found = PYTEST_SUMMARY.findall(output)
    return found[-1].strip(", ") if found else (output.strip().splitlines() or ["no output"])[-1]


def total(summaries: list[str]) -> str:
    """The parts' counts added up: "2444 passed, 6 skipped, 0 failed"."""
    counts = {"passed": 0, "skipped": 0, "failed": 0, "error": 0}
    for summary in summaries:
        for number, word in re.findall(r"(\d+) (passed|skipped|failed|errors?)", summary):
            counts["error" if word.startswith("error") else word] += int(number)
    text = f"{counts['passed']} passed, {counts['skipped']} skipped, {counts['failed']} failed"
    errors = counts["error"]
    return text + (f", {errors} error{'s' if errors != 1 else ''}" if errors else "")


def gpu_test(out: Path, logs: Path, gpu: str, limit_s: int) -> tuple[bool, str]:
    """``make gpu-test`` in parts; writes gpu_test_<gpu>.txt with each part's counts and their total."""
    parallel = ["-n", str(min(12, os.cpu_count() or 1))] if importlib.util.find_spec("xdist") else []
    summaries, ok, started = [], True, time.time()
    for title, args, in_parallel in GPU_TEST_PARTS:
        left = max(60, int(limit_s - (time.time() - started)))
        command = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "-rfE", *args,
                   *(parallel if in_parallel else [])]
        status, output = run(command, logs / f"gpu-test {title}.log", left)
        ok &= status in (0, 5)                      # 5: nothing collected, as make gpu-test allows
        summaries.append(pytest_summary(output))
    rows = [f"{title:<50} {summary}" for (title, _, _), summary in zip(GPU_TEST_PARTS, summaries)]
    header = (f"# make gpu-test on {gpu}, {time.strftime('%Y-%m-%d')}, by tools/gpu_record.py: the speed "
              f"targets one test at a time, the other parts {'with pytest-xdist' if parallel else 'serially'}")
    text = "\n".join([header, "", *rows, f"{'total':<50} {total(summaries)}"]) + "\n"
    (out / f"gpu_test_{gpu_slug(gpu, model_only=True)}.txt").write_text(text)
    return ok, total(summaries)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=[s.name for s in STEPS], help="steps to run (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results", help="results folder")
    parser.add_argument("--list", action="store_true", help="list the steps and what each writes, run nothing")
    args = parser.parse_args(argv)
    if args.list:
        for step in STEPS:
            print(f"{step.name:<18} writes {step.writes}{' (a Hopper GPU only)' if step.hopper_only else ''}")
        return 0
    sys.path.insert(0, str(ROOT))
    import kernels

    try:
        kernels.require_gpu("tools/gpu_record.py")
    except kernels.NoGPUError as exc:
        print(exc, file=sys.stderr)
        return 1
    info = kernels.device_info()
    gpu, model = info.name, gpu_slug(info.name, model_only=True)
    logs = args.out / "logs" / model
    logs.mkdir(parents=True, exist_ok=True)
    hopper = str(info.compute_capability).startswith("9")
    commands = {
        "exercise-targets": [sys.executable, "benchmarks/bench_exercise_targets.py"],
        "ladder-tops": [sys.executable, "benchmarks/bench_ladder_tops.py", "--candidates",
                        "--out", str(args.out / f"ladder_tops_{model}.json")],
        "hopper": [sys.executable, "benchmarks/bench_hopper.py", "--out", str(args.out / f"bench_hopper_{model}.json")],
        "t4-profile": [sys.executable, "tools/t4_profile.py", "--results", str(args.out)],
    }
    table = []
    for step in STEPS:
        if args.only and step.name not in args.only:
            continue
        if step.hopper_only and not hopper:
            table.append((step.name, "skipped", 0.0, f"needs compute capability 9.0, this is {info.compute_capability}"))
            continue
        print(f"{step.name} ...", file=sys.stderr, flush=True)
        started = time.time()
        if step.name == "gpu-test":
            ok, detail = gpu_test(args.out, logs, gpu, step.limit_s)
        else:
            status, output = run(commands[step.name], logs / f"{step.name}.log", step.limit_s)
            # the ladder's exit status 2 means "ran, and some goal is not met": recorded, not failed
            ok = status == 0 or (step.name == "ladder-tops" and status == 2)
            detail = (output.strip().splitlines() or [""])[-1][:60]
            if step.name in ("exercise-targets", "hopper"):                # their tables, as printed
                name = "exercise_targets" if step.name == "exercise-targets" else "bench_hopper"
                (args.out / f"{name}_{model}.txt").write_text(output)
            recorded = args.out / f"ladder_tops_{model}.json"
            if step.name == "ladder-tops" and recorded.exists():     # the table alone, from the record
                _, table_text = run([sys.executable, "benchmarks/bench_ladder_tops.py", "--table", str(recorded)],
                                    logs / "ladder-tops table.log", 60)
                (args.out / f"ladder_tops_{model}.txt").write_text(table_text)
        table.append((step.name, "ok" if ok else "FAILED", time.time() - started, detail))
    print(f"\n{gpu}: results in {args.out}, logs in {logs}")
    for name, status, seconds, detail in table:
        print(f"{name:<18} {status:<8} {seconds:7.0f} s  {detail}")
    return 0 if all(status != "FAILED" for _, status, _, _ in table) else 1


if __name__ == "__main__":
    sys.exit(main())
