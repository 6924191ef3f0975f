"""Fixtures shared by test modules in this folder."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# NVRTC 13 keeps the cubins it builds in CUDA's compute cache (~/.nv/ComputeCache) and, on a hit, skips
# ptxas, so the compile log holds no register/shared/spill report: the resource tests would then find
# none on a machine that compiled the same kernels before (seen on a GPU machine: every ptxas report
# empty after the first run). Tests compile with the cache off; set before any CUDA library loads.
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")


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
