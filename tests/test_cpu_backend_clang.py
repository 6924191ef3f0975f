"""The CPU backend with Clang instead of GCC: the conformance and fault suites pass with
CXX=clang++, and the memory-traffic analysis, which needs GCC's instrumentation, is refused with a
message that says so.

Each suite runs in a child pytest, because the compiler is chosen once per process. Skipped where
clang++ is missing, except in CI, which installs it (`make test`)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITES = ["tests/test_cpu_backend_semantics.py", "tests/test_cpu_backend_faults.py"]


@pytest.fixture(scope="module")
def clang_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if not shutil.which("clang++"):
        message = "clang++ is needed for this test (Debian: apt-get install clang)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI must install it)")
        pytest.skip(message)
    return dict(os.environ, CXX="clang++", COURSE_CPU_CACHE=str(tmp_path_factory.mktemp("clang-cache")),
                PYTHONPATH=str(ROOT))


@pytest.mark.parametrize("suite", SUITES)
def test_suite_passes_with_clang(clang_env: dict[str, str], suite: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", suite],
                          capture_output=True, text=True, env=clang_env, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout


def test_traffic_analysis_with_clang_is_refused_by_name(clang_env: dict[str, str]) -> None:
    script = (
        "import numpy as np\n"
        "from kernels.cpu import RawKernel, xp\n"
        "from kernels.cpu.toolchain import compiler\n"
        "from kernels.traffic import analyze\n"
        "assert compiler().kind == 'clang', compiler()\n"
        "k = RawKernel('extern \"C\" __global__ void f(float* x) { x[threadIdx.x] = 1.0f; }', 'f')\n"
        "x = xp.zeros(32, np.float32)\n"
        "k((1,), (32,), (x,))\n"
        "assert float(x.sum()) == 32.0\n"
        "try:\n"
        "    analyze(k, (1,), (32,), (x,))\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
        "else:\n"
        "    print('analysed')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=clang_env,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "needs g++" in done.stdout and "Traceback" not in done.stdout, done.stdout


def test_grading_with_clang_passes_a_solution_and_fails_its_starter(clang_env: dict[str, str]) -> None:
    """The grader's race probe needs the traced build; under Clang it must stand aside, not turn the
    refused build into a verdict on a correct submission."""
    script = (
        "import sys\n"
        "sys.path.insert(0, 'tools')\n"
        "import exercises as extool\n"
        "from kernels.grading import check\n"
        "ok = check('reduce/sum_int64', extool.solution('reduce/sum_int64'), seed=5)\n"
        "bad = check('reduce/sum_int64', extool.starter('reduce/sum_int64'), seed=5)\n"
        "print('solution', ok.ok, 'starter', bad.ok)\n")
    env = dict(clang_env, COURSE_BACKEND="cpu")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "solution True starter False" in done.stdout, done.stdout[-3000:]
