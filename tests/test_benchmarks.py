"""The benchmark scripts: without a GPU they stop with one clear sentence, not a traceback."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("bench_*.py"))


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
