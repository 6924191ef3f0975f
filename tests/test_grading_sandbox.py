"""The grader against a hostile student, on the CPU backend, where a kernel is native code.

Each attack class of a real review is tried against each layer on its own (kernels/grading/sandbox.py):
the screen and the compiled library's symbols (forbidden_code before anything runs), the seccomp
filter of the process that runs a kernel (the process is killed: crash), the judged process's own
filter, the namespaces, and the separation of judge and judged (the secret seed is nowhere in the
judged process: not in its environment, its arguments or its memory).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pyseccomp")

from kernels.grading import sandbox  # noqa: E402
from kernels.grading import verdicts as V  # noqa: E402
from kernels.grading.grader import GradeOptions, grade_file, grade_folder  # noqa: E402
from kernels.grading.registry import exercise  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
AXPBY = "gpu_architecture/axpby_grid_stride"
SIGNATURE = 'extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n)'
BODY = ("    const int stride = gridDim.x * blockDim.x;\n"
        "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a * x[i] + b * y[i];\n")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(autouse=True)
def cpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_BACKEND", "cpu")


def _kernel(extra: str) -> str:
    return f"{SIGNATURE}\n{{\n{BODY}    if (blockIdx.x == 0 && threadIdx.x == 0) {{ {extra} }}\n}}\n"


def _grade(tmp_path: Path, name: str, code: str, **options) -> object:
    path = tmp_path / f"{name}.cu"
    path.write_text(code)
    # archs=(): no NVRTC pre-compile, so that the CPU backend's own defences are what is tested
    opts = GradeOptions(exercise=exercise(AXPBY), seed="tests-secret", timeout=60, archs=(), **options)
    return grade_file(name, path, opts).report


# --------------------------------------------------------------------------------------------------
# Layer 1: what the compiled library may call (the prelude declares the C library, so these compile)
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, named", [
    ('system("touch /tmp/course-grader-escaped");', "calls system()"),
    ('out[0] = getenv("COURSE_GRADING_SEED") ? 1.0f : 0.0f;', "calls getenv()"),
    ('out[0] = fopen("/proc/self/cmdline", "r") ? 1.0f : 0.0f;', "calls fopen()"),
    ("exit(0);", "calls exit(): exit() ends the whole program"),
    ("abort();", "calls abort(): abort() ends the whole program"),
])
def test_calls_outside_the_kernel_are_forbidden_before_anything_runs(tmp_path: Path, call: str, named: str) -> None:
    report = _grade(tmp_path, "attack", _kernel(call))
    assert report.verdict == V.FORBIDDEN, str(report)
    assert named in report.stage_message
    assert not Path("/tmp/course-grader-escaped").exists()


def test_code_that_runs_when_the_library_loads_is_forbidden(tmp_path: Path) -> None:
    code = (ROOT / "exercises/corpus/gpu_architecture/axpby_grid_stride/attack_constructor.cu").read_text()
    report = _grade(tmp_path, "ctor", code)
    assert report.verdict == V.FORBIDDEN, str(report)
    assert ".init_array" in report.stage_message


def test_a_valid_submission_still_passes_every_layer(tmp_path: Path) -> None:
    report = _grade(tmp_path, "good", f"{SIGNATURE}\n{{\n{BODY}}}\n")
    assert report.verdict == V.PASSED, str(report)


def test_allowed_symbols_are_the_runtime_math_and_memory_functions() -> None:
    for name in ("cudacpu_syncthreads", "__ubsan_handle_type_mismatch_v1", "expf", "__expf_finite", "sqrt",
                 "memcpy", "fmaf", "sincosf", "__popcountdi2", "__udivti3"):
        assert sandbox.symbol_allowed(name), name
    for name in ("system", "fopen", "getenv", "exit", "abort", "write", "syscall", "dlsym", "fork", "kill",
                 "execve", "socket", "printf", "environ"):
        assert not sandbox.symbol_allowed(name), name


# --------------------------------------------------------------------------------------------------
# Layer 2: the seccomp filter of the process that runs a kernel (layer 1 bypassed on purpose)
# --------------------------------------------------------------------------------------------------

KERNEL_PROBE = r'''
import json, os, sys
os.environ["COURSE_BACKEND"] = "cpu"
import numpy as np
import kernels
from kernels.cpu import launch
from kernels.grading.sandbox import launch_filter_bpf

BODIES = {
    "system": 'system("touch /tmp/course-grader-escaped-2");',
    "fopen_write": 'FILE* f = fopen("/tmp/course-grader-escaped-3", "w"); if (f) out[0] = 1;',
    "fopen_read": 'FILE* f = fopen("/etc/hostname", "r"); if (f) out[0] = 1;',
    "kill_parent": "kill(getppid(), 9);",
    "fork": "if (fork() == 0) _exit(0);",
    "exit": "exit(0);",
    "plain": "out[0] = 1.0f;",
}
results = {}
launch.set_sandbox(launch_filter_bpf())
for name, body in BODIES.items():
    code = ('#include <stdio.h>\n#include <stdlib.h>\n#include <signal.h>\n#include <unistd.h>\n'
            'extern "C" __global__ void k(float* out) { if (threadIdx.x == 0) { ' + body + ' } }')
    k = kernels.load_kernel(code, "k")
    out = np.zeros(4, dtype=np.float32)
    try:
        k((1,), (32,), (out,))
        results[name] = "ran"
    except Exception as exc:
        results[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(results))
'''


def test_the_process_running_a_kernel_is_killed_by_its_first_forbidden_system_call(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", KERNEL_PROBE], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("system", "fopen_write", "fopen_read", "kill_parent", "fork"):
        assert results[name].startswith("KernelCrash") and "stopped by the grader's sandbox" in results[name], \
            (name, results[name])
    assert "called exit()" in results["exit"], results["exit"]
    assert results["plain"] == "ran"
    assert not Path("/tmp/course-grader-escaped-2").exists() and not Path("/tmp/course-grader-escaped-3").exists()


def test_a_call_through_an_allowed_function_s_address_is_stopped_by_the_second_layer(tmp_path: Path) -> None:
    """memcpy may be called, so the library check lets its address through; system() reached from it by
    this machine's libc layout passes layer 1 and must be killed by the kernel process's filter."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6")
    offset = (ctypes.cast(libc.system, ctypes.c_void_p).value - ctypes.cast(libc.memcpy, ctypes.c_void_p).value)
    call = ("typedef int (*runner)(const char*); volatile long long off = " + f"{offset}LL; "
            "runner r = (runner)(void*)((char*)(void*)&memcpy + off); r(\"touch /tmp/course-grader-gadget\");")
    report = _grade(tmp_path, "gadget", _kernel(call))
    assert report.verdict == V.CRASH, str(report)
    assert "stopped by the grader's sandbox" in report.cases[0].message
    assert not Path("/tmp/course-grader-gadget").exists()


def test_without_the_grader_a_kernel_that_calls_exit_is_named_not_blamed_on_memory() -> None:
    code = ("import os; os.environ['COURSE_BACKEND'] = 'cpu'\n"
            "import numpy as np, kernels\n"
            "k = kernels.load_kernel('#include <stdlib.h>\\nextern \"C\" __global__ void k(float* o) { exit(0); }', 'k')\n"
            "try:\n    k((1,), (1,), (np.zeros(1, np.float32),))\nexcept Exception as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "called exit()" in done.stdout and "memory" not in done.stdout, done.stdout + done.stderr


# --------------------------------------------------------------------------------------------------
# Layer 2b: the judged process's own filter
# --------------------------------------------------------------------------------------------------

PROCESS_PROBE = r'''
import os, sys
from kernels.grading.sandbox import install_process_filter
install_process_filter()
try:
    open(sys.argv[1], "w")
    print("wrote")
except PermissionError:
    print("refused")
if sys.argv[2] == "socket":
    import socket
    socket.socket()
    print("socket opened")
'''


def test_the_judged_process_may_not_write_files_or_use_the_network(tmp_path: Path) -> None:
    target = tmp_path / "written"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    quiet = subprocess.run([sys.executable, "-c", PROCESS_PROBE, str(target), "-"], capture_output=True, text=True,
                           timeout=60, env=env)
    assert quiet.stdout.split() == ["refused"] and not target.exists()
    net = subprocess.run([sys.executable, "-c", PROCESS_PROBE, str(target), "socket"], capture_output=True,
                         text=True, timeout=60, env=env)
    assert net.returncode == -31 and "socket opened" not in net.stdout  # SIGSYS


# --------------------------------------------------------------------------------------------------
# Layer 3: namespaces
# --------------------------------------------------------------------------------------------------

def test_namespaces_hide_the_homes_the_submissions_and_the_network(tmp_path: Path) -> None:
    problem = sandbox.namespace_problem()
    if problem is not None:
        if IN_CI:
            pytest.fail(f"CI installs bubblewrap and allows namespaces: {problem}")
        pytest.skip(str(problem))
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "other_student.cu").write_text("secret work")
    argv = sandbox.namespace_command(["/bin/sh", "-c", f"ls -A /root {subs}; cat /proc/net/dev; echo pid $$"],
                                     gpu=False, hide=[Path("/root"), subs], keep=[])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "other_student" not in done.stdout and ".cache" not in done.stdout
    interfaces = [line.split(":")[0].strip() for line in done.stdout.splitlines() if ":" in line and "|" not in line
                  and not line.startswith("/")]
    assert interfaces == ["lo"], done.stdout
    assert int(done.stdout.split("pid")[-1]) < 10  # its own process ids: the grader is invisible


def test_cupy_can_be_imported_in_the_namespaces(tmp_path: Path) -> None:
    """CuPy creates its kernel-cache folder when it is imported (``CUPY_CACHE_DIR``, else
    ``~/.cupy/kernel_cache``), even with the cache in memory; under a read-only root and a home of
    /nonexistent that import failed, so the judged environment names a folder in the sandbox's /tmp."""
    from kernels.grading import judge

    problem = sandbox.namespace_problem()
    if problem is not None:
        if IN_CI:
            pytest.fail(f"CI installs bubblewrap and allows namespaces: {problem}")
        pytest.skip(str(problem))
    env = judge.judged_environment(on_gpu=False)
    like_cupy = ("import os; d = os.environ.get('CUPY_CACHE_DIR', os.path.expanduser('~/.cupy/kernel_cache')); "
                 "os.makedirs(d, exist_ok=True); print('created', d)")
    argv = sandbox.namespace_command([sys.executable, "-s", "-c", like_cupy], gpu=False, hide=[Path("/root")],
                                     keep=[Path(sys.prefix), Path(sys.base_prefix)])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0 and done.stdout.startswith("created /tmp/"), done.stderr


def test_strict_mode_refuses_to_grade_without_every_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernels.grading import judge

    monkeypatch.setattr(sandbox, "namespace_problem", lambda: sandbox.SandboxProblem("namespaces", "not here"))
    with pytest.raises(RuntimeError, match="strict needs every layer"):
        judge.plan_sandbox("strict")
    assert not judge.plan_sandbox("standard").namespaces
    monkeypatch.setattr(sandbox, "seccomp_problem", lambda: sandbox.SandboxProblem("seccomp", "no libseccomp"))
    with pytest.raises(RuntimeError, match="refuses to run submissions without its sandbox"):
        judge.plan_sandbox("standard")


def test_the_grader_fails_closed_before_the_first_submission(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "seccomp_problem", lambda: sandbox.SandboxProblem("seccomp", "no libseccomp"))
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "a.cu").write_text(f"{SIGNATURE}\n{{\n{BODY}}}\n")
    options = GradeOptions(exercise=exercise(AXPBY), seed="s")
    with pytest.raises(RuntimeError, match="no libseccomp"):
        grade_folder(subs, options, tmp_path / "out")
    assert not (tmp_path / "out" / "grades.csv").exists()


# --------------------------------------------------------------------------------------------------
# The secret seed stays with the judge
# --------------------------------------------------------------------------------------------------

SEED = "seed-7f3a9c-never-in-the-student-process"


def _judged_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if b"kernels.grading.judged" in cmdline and b"bwrap" not in cmdline.split(b"\0")[0]:
            pids.append(int(entry))
    return pids


def _memory_contains(pid: int, needle: bytes) -> bool:
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            lo, hi = (int(v, 16) for v in fields[0].split("-"))
            if "r" not in fields[1] or hi - lo > 1 << 30 or (len(fields) > 5 and fields[5] == "[vvar]"):
                continue
            try:
                mem.seek(lo)
                if needle in mem.read(hi - lo):
                    return True
            except (OSError, ValueError, OverflowError):
                continue
    return False


def test_the_secret_seed_never_reaches_the_judged_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_GRADING_SEED", SEED)  # where the instructor guide puts it
    hang = f"{SIGNATURE}\n{{\n    volatile int spin = 1;\n    while (spin) {{ }}\n}}\n"
    path = tmp_path / "hang.cu"
    path.write_text(hang)
    options = GradeOptions(exercise=exercise(AXPBY), seed=SEED, timeout=25, archs=())
    graded = {}
    worker = threading.Thread(target=lambda: graded.setdefault("g", grade_file("hang", path, options)))
    worker.start()
    seen: dict[int, dict[str, bool]] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(seen) < 2:  # the judged process and the one running the kernel
        for pid in _judged_pids():
            if pid in seen:
                continue
            time.sleep(0.5)
            try:
                seen[pid] = {"environ": SEED.encode() in Path(f"/proc/{pid}/environ").read_bytes(),
                             "cmdline": SEED.encode() in Path(f"/proc/{pid}/cmdline").read_bytes(),
                             "memory": _memory_contains(pid, SEED.encode())}
            except (FileNotFoundError, ProcessLookupError):
                continue
        time.sleep(0.2)
    worker.join()
    assert seen, "no judged process was found while the submission ran"
    for pid, found in seen.items():
        assert not any(found.values()), (pid, found)
    assert graded["g"].report.verdict == V.TIMEOUT
