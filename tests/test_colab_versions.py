"""Every live panel and the chapters' numba code work with Colab's versions and with the current ones.

tests/colab_versions_drive.py builds each ipywidgets panel headless (the sweep panel, the occupancy
calculator, the streams timeline), moves its sliders, clicks its button and checks what it shows, and
runs the chapters' numba code. It runs twice: with this environment's packages (ipywidgets 8) and in
the student environment, whose ipywidgets (7.7.1) and numba are Colab's (tools/student-env-requirements.txt).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DRIVE = ROOT / "tests" / "colab_versions_drive.py"
sys.path.insert(0, str(ROOT / "tools"))

import student_env  # noqa: E402

MARKER = "COLAB_VERSIONS_RESULT"
ALL_CHECKS = ["display_live", "sweep live_panel", "occupancy_panel", "timeline_panel", "numba"]


def drive(python: Path | str, env: dict[str, str], cwd: Path) -> dict:
    done = subprocess.run([str(python), str(DRIVE)], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith(MARKER))
    return json.loads(line[len(MARKER):])


def test_panels_and_numba_with_this_environments_versions(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), COURSE_BACKEND="cpu", MPLBACKEND="Agg")
    result = drive(sys.executable, env, tmp_path)
    assert result["ipywidgets"].startswith("8.")
    assert result["passed"] == ALL_CHECKS


def test_panels_and_numba_with_colabs_versions(student_python, tmp_path):
    """Outside the clone, with the installed package: as a student in Colab's CPU runtime."""
    result = drive(student_python, student_env.kernel_env(student_python.parent.parent), tmp_path)
    pins = student_env.pins()
    assert result["ipywidgets"] == pins["ipywidgets"] == "7.7.1"
    assert result["numba"] == pins["numba"]
    assert result["passed"] == ALL_CHECKS
