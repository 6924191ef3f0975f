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
