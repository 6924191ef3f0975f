"""tools/gpu_record.py: one command records a GPU; here, what it reads from pytest and what it says without a GPU."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import gpu_record  # noqa: E402


def test_pytest_summaries_are_read_and_added_up():
    parts = ["....\n10 passed, 125 deselected in 66.40s (0:01:06)\n",
             "FAILED tests/x.py::t\n=== 1 failed, 124 passed in 90.66s ===\n",
             "2158 passed, 4 skipped in 76.03s (0:01:16)\n",
             "151 passed, 2 skipped, 2599 deselected, 1 error in 151.81s\n"]
    summaries = [gpu_record.pytest_summary(p) for p in parts]
    assert summaries[0].startswith("10 passed") and summaries[1].startswith("1 failed, 124 passed")
    assert gpu_record.total(summaries) == "2443 passed, 6 skipped, 1 failed, 1 error"


def test_every_step_says_what_it_writes_and_gpu_test_covers_every_gpu_test():
    listed = subprocess.run([sys.executable, "tools/gpu_record.py", "--list"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [s.name for s in gpu_record.STEPS]
    # the parts: exercise tests split by -k into two complementary halves, then everything else
    args = [a for _, part, _ in gpu_record.GPU_TEST_PARTS for a in part]
    assert args.count("meets") == 1 and args.count("not meets") == 1
    assert "--ignore=tests/kernel_checks" in args and "tests/kernel_checks" in args


def test_without_a_gpu_it_says_so():
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COURSE_BACKEND": "cpu", "HOME": os.environ.get("HOME", "/")}
    done = subprocess.run([sys.executable, "tools/gpu_record.py"], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 1 and "needs a CUDA GPU" in done.stderr and "Traceback" not in done.stderr
