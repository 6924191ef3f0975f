"""Fixtures shared by test modules in this folder."""
from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# NVRTC 13 keeps the cubins it builds in CUDA's compute cache (~/.nv/ComputeCache) and, on a hit, skips
# ptxas, so the compile log holds no register/shared/spill report: the resource tests would then find
# none on a machine that compiled the same kernels before (seen on a GPU machine: every ptxas report
# empty after the first run). Tests compile with the cache off; set before any CUDA library loads.
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")


@pytest.fixture(autouse=True)
def _check_seed_fixed_per_test(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """kernels.check draws fresh random inputs on every call. In the test suite each test gets its own
    fixed seed, derived from its id (COURSE_CHECK_SEED, which kernels.check.default_seed reads), so a
    run is reproducible and a failure in CI fails the same way on a laptop. ``make fuzz``
    (COURSE_FUZZ=1) leaves it unset: fresh inputs, an opt-in search for inputs that break a kernel."""
    if os.environ.get("COURSE_FUZZ") == "1":
        monkeypatch.delenv("COURSE_CHECK_SEED", raising=False)
        return
    monkeypatch.setenv("COURSE_CHECK_SEED", str(zlib.crc32(request.node.nodeid.encode())))


@pytest.fixture(scope="session")
def student_python() -> Path:
    """The student environment (Colab's CPU package set, tools/student_env.py), built or reused from
    its pin file, with the package installed as Colab's setup cell installs it."""
    sys.path.insert(0, str(ROOT / "tools"))
    import student_env

    try:
        return student_env.prepare(log=lambda line: print(line, flush=True))
    except student_env.StudentEnvError as exc:
        message = f"no student environment: {exc}"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
