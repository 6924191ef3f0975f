"""The benchmark scripts: without a GPU they stop with one clear sentence, not a traceback; the CPU
backend's benchmark runs without a GPU (at small sizes here: it is not a timed test)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_SCRIPT = ROOT / "benchmarks" / "bench_cpu_backend.py"
SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("bench_*.py") if p != CPU_SCRIPT)


def test_there_are_benchmarks():
    assert SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_without_a_gpu_the_script_says_so(script):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COURSE_BACKEND": "cpu"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 1
    assert "needs a CUDA GPU" in done.stderr
    assert "Traceback" not in done.stderr


def test_cpu_backend_benchmark_runs_without_a_gpu():
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COURSE_BACKEND": "cpu", "HOME": str(Path.home())}
    if os.environ.get("COURSE_CPU_CACHE"):
        env["COURSE_CPU_CACHE"] = os.environ["COURSE_CPU_CACHE"]
    done = subprocess.run([sys.executable, str(CPU_SCRIPT), "--quick"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    for row in ("tree reduction", "shuffle reduction", "tiled SGEMM", "vector add", "with one __syncthreads",
                "empty launch"):
        assert row in done.stdout
    assert "say nothing about how fast the kernels run on a GPU" in done.stdout


def test_ladder_tops_table_marks_a_goal_met_only_when_both_methods_meet_it(tmp_path):
    """bench_ladder_tops --table reprints a recorded run: a row is met only if both timing methods
    reach its goal, and alternatives the chapters do not launch are listed apart."""
    import json

    def row(chapter, unit, goal, flushed, back_to_back, candidate=False):
        return {"chapter": chapter, "shape": "s", "kernel": f"{chapter}_kernel", "yardstick": "y", "unit": unit,
                "goal": goal, "candidate": candidate, "variant": "v",
                "ratios": {"L2 flushed": flushed, "back to back": back_to_back}, "kernel_ms": {}, "yardstick_ms": {}}

    recorded = {"gpu": "Some GPU", "rows": [row("scan", "%", 80.0, 0.81, 0.79), row("gemm", "%", 50.0, 0.53, 0.52),
                                            row("softmax", "x", 1.0, 0.9999, 1.01, candidate=True)]}
    path = tmp_path / "tops.json"
    path.write_text(json.dumps(recorded))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COURSE_BACKEND": "cpu"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_ladder_tops.py"), "--table", str(path)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    scan = next(line for line in lines if line.startswith("scan"))
    gemm = next(line for line in lines if line.startswith("gemm"))
    assert "81.0 %" in scan and "79.0 %" in scan and scan.endswith("NO")   # back to back misses 80 %
    assert gemm.endswith("yes")
    alternatives = lines.index("alternatives the chapters do not launch (--candidates):")
    assert lines[alternatives + 1].startswith("softmax") and "0.9999 x" in lines[alternatives + 1]
    assert lines[alternatives + 1].endswith("NO")
    assert max(len(line) for line in lines) <= 90
