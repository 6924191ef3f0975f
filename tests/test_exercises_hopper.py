"""The Hopper chapter's exercises without a Hopper GPU: the fix exercise's kernels compile for sm_90a and
sm_90, the check and the grader refuse to run them elsewhere with a sentence saying what they need and
what they checked, a launch that hangs (an mbarrier phase that never completes) ends as a timeout in
the check and in the grader, and the prediction grader accepts the answers worked out by hand from the
statement and rejects the likely mistakes. tests/gpu/test_exercises_gpu.py runs them on an H100.
"""
from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import exercises as extool  # noqa: E402  (tools/ is not a package)

from kernels.grading import verdicts as V  # noqa: E402
from kernels.grading.exercises import hopper as hopper_exercises  # noqa: E402
from kernels.grading.harness import LocalExecutor, arch_problem, run_cases  # noqa: E402
from kernels.grading.predict import grade_answers  # noqa: E402
from kernels.grading.registry import exercise  # noqa: E402
from kernels.grading.runtime import CourseRuntime, classify_error  # noqa: E402
from kernels.grading.session import evaluate, make_cases  # noqa: E402
from kernels.nvrtc import compile_cuda, nvrtc_available  # noqa: E402

FIX = exercise("hopper/tma_parity_fix")
PREDICT = exercise("hopper/wgmma_layout_predict")
needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


def versions() -> list[tuple[str, str]]:
    return [("solution", extool.solution(FIX.id)), ("starter", extool.starter(FIX.id))]


# ------------------------------------------------------------------------------ the fix exercise

def test_the_starter_differs_from_the_solution_in_the_empty_wait_only() -> None:
    starter, solution = extool.starter(FIX.id).splitlines(), extool.solution(FIX.id).splitlines()
    changed = [(a.strip(), b.strip()) for a, b in zip(starter, solution) if a != b]
    assert len(starter) == len(solution)
    assert changed == [("mbarrier_wait(shared_address(&empty[s]), round & 1);",
                        "mbarrier_wait(shared_address(&empty[s]), (round & 1) ^ 1);")]


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_90"])
def test_solution_and_starter_compile_for_hopper_with_tma(arch: str) -> None:
    for which, code in versions():
        result = compile_cuda(code, arch, filename=f"{which}.cu")
        assert result.ok, f"{which} does not compile for {arch}:\n{result.log}"
        assert not result.resources["row_sums_tma"].spills, which
        ptx = compile_cuda(code, arch.replace("sm_", "compute_"), filename=f"{which}.cu").ptx
        assert "cp.async.bulk.tensor.2d" in ptx and "mbarrier.try_wait.parity" in ptx, which


def test_the_exercise_declares_its_target_and_header() -> None:
    assert FIX.arch == "sm_90a" and FIX.allowed_includes == ("hopper/tma.cuh",)
    with pytest.raises(ValueError, match="arch is an NVRTC target like 'sm_90a', not 'hopper'"):
        type(FIX)(**{**FIX.__dict__, "arch": "hopper"})


def test_cases_reuse_stages_and_hang_over_both_edges() -> None:
    per_box = hopper_exercises.BOX_COLS
    for case in make_cases(FIX, ("public",), None) + make_cases(FIX, ("hidden",), "seed"):
        rows, cols = case.inputs["x"].shape
        assert cols % 4 == 0, "TMA needs rows of whole 16-byte units"
        assert case.scalars == {"rows": rows, "cols": cols}
    public = [c for c in make_cases(FIX, ("public",), None) if not c.large]
    boxes = [-(-c.scalars["cols"] // per_box) for c in public]
    assert min(boxes) == 1 and hopper_exercises.STAGES in boxes and max(boxes) > 2 * hopper_exercises.STAGES
    assert any(c.scalars["rows"] % hopper_exercises.BOX_ROWS for c in public)
    assert any(c.scalars["cols"] % per_box for c in public)


class FakeRuntime:
    """A runtime of a given kind: the CPU backend, or a GPU of a compute capability."""

    def __init__(self, capability: str = "", name: str = "CPU backend"):
        self.is_gpu, self._capability, self._name = bool(capability), capability, name

    def device_name(self) -> str:
        return self._name

    def compute_capability(self) -> str:
        return self._capability


@pytest.mark.parametrize("capability, name, says", [
    ("", "CPU backend", "here it would run on the CPU backend, which cannot run it"),
    ("7.5", "Tesla T4", "this GPU (Tesla T4) has compute capability 7.5"),
    ("10.0", "NVIDIA B200", "this GPU (NVIDIA B200) has compute capability 10.0"),
])
def test_only_compute_capability_9_0_runs_the_fix_exercise(capability: str, name: str, says: str) -> None:
    problem = arch_problem(FIX, FakeRuntime(capability, name))
    assert problem == ("hopper/tma_parity_fix runs only on a GPU of compute capability 9.0 (an H100 or H200), its "
                       f"kernel compiled for sm_90a; {says}")
    assert arch_problem(FIX, FakeRuntime("9.0", "NVIDIA H100")) is None
    assert arch_problem(exercise("reduce/sum_int64"), FakeRuntime()) is None


def test_a_plain_target_runs_on_later_gpus_too() -> None:
    plain = type(FIX)(**{**FIX.__dict__, "arch": "sm_90"})
    assert arch_problem(plain, FakeRuntime("10.0", "NVIDIA B200")) is None
    assert "compute capability 9.0 or later" in arch_problem(plain, FakeRuntime("8.0", "A100"))


@pytest.fixture
def cpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("kernels.cpu")
    monkeypatch.setenv("COURSE_BACKEND", "cpu")


@needs_nvrtc
def test_the_check_says_what_it_needs_and_what_it_checked(cpu_backend: None) -> None:
    from kernels.grading import check

    report = check(FIX.id, extool.solution(FIX.id))
    assert report.stage_verdict == V.ENVIRONMENT and not report.cases
    assert report.stage_message.startswith("hopper/tma_parity_fix runs only on a GPU of compute capability 9.0 "
                                           "(an H100 or H200), its kernel compiled for sm_90a; here it would run "
                                           "on the CPU backend")
    assert report.stage_message.endswith("Checked here: the screen, the signature, and that the kernel compiles for "
                                         "sm_90a with NVRTC; the cases run only on such a GPU.")


@needs_nvrtc
def test_the_check_still_finds_what_needs_no_hopper(cpu_backend: None) -> None:
    solution = extool.solution(FIX.id)
    broken = evaluate(FIX, kernel=solution.replace("(round & 1) ^ 1", "(round & 1) ^ "))
    assert broken.stage_verdict == V.COMPILE_ERROR
    assert broken.stage_message.startswith("kernel.cu does not compile for sm_90a:")
    renamed = evaluate(FIX, kernel=solution.replace("float* y, int rows", "double* y, int rows"))
    assert renamed.stage_verdict == V.WRONG_SIGNATURE and "parameter 2 is 'double* y'" in renamed.stage_message
    other_header = evaluate(FIX, kernel='#include "hopper/wgmma.cuh"\n' + solution)
    assert other_header.stage_verdict == V.FORBIDDEN and 'line 1: #include "hopper/wgmma.cuh"' in \
        other_header.stage_message


@needs_nvrtc
def test_the_grader_compiles_for_sm_90a_and_refuses_to_run_elsewhere(tmp_path: Path, cpu_backend: None) -> None:
    from kernels.grading.grader import GradeOptions, grade_file

    options = GradeOptions(exercise=FIX, seed="tests", timeout=60, sandbox="off", env={"COURSE_BACKEND": "cpu"})
    starter = tmp_path / "starter.cu"
    starter.write_text(extool.starter(FIX.id), encoding="utf-8")
    report = grade_file("starter", starter, options).report
    assert report.verdict == V.ENVIRONMENT, str(report)
    assert "compute capability 9.0" in report.stage_message
    assert "The grader compiled it for sm_90a" in report.stage_message
    broken = tmp_path / "broken.cu"
    broken.write_text(extool.solution(FIX.id).replace("__shfl_xor_sync(", "__shfl_xor("), encoding="utf-8")
    report = grade_file("broken", broken, options).report
    assert report.verdict == V.COMPILE_ERROR and "does not compile for sm_90a" in report.stage_message


# ------------------------------------------------------------------------ a launch that never ends

def test_giving_up_on_a_launch_is_a_timeout_that_stops_the_gpu_cases() -> None:
    start = time.monotonic()
    with pytest.raises(hopper_exercises.KernelTimeout, match="waits on an mbarrier phase that never completes") as info:
        hopper_exercises.wait_or_give_up(lambda: False, 0.2)
    assert 0.2 <= time.monotonic() - start < 2.0
    assert classify_error(info.value) == V.TIMEOUT
    gpu = CourseRuntime.__new__(CourseRuntime)
    gpu.is_gpu = True
    assert gpu.is_fatal(info.value), "a kernel given up on still runs: no later case may use the GPU"
    hopper_exercises.wait_or_give_up(iter([False, False, True]).__next__, 5.0)  # finishes: no error


class HungGpu:
    """A GPU runtime on NumPy arrays whose stream never finishes (every launch hangs)."""

    name, is_gpu = "hung", True
    is_fatal = CourseRuntime.is_fatal

    def __init__(self) -> None:
        stream = SimpleNamespace(done=False)
        self.xp = SimpleNamespace(array=np.array, cuda=SimpleNamespace(get_current_stream=lambda: stream))

    def synchronize(self) -> None:
        raise AssertionError("nothing may wait for a hung kernel")

    def to_host(self, a):
        return np.array(a, copy=True)

    def sm_count(self) -> int:
        return 132


def test_a_hung_launch_ends_the_check_with_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    launched = []
    monkeypatch.setattr(hopper_exercises, "HANG_SECONDS", 0.3)
    monkeypatch.setattr(hopper_exercises.hopper, "tensor_map_of", lambda x, rows, cols: (x.shape, rows, cols))
    monkeypatch.setattr(hopper_exercises.hopper, "launch", lambda *args, **kw: launched.append(args))
    cases = make_cases(FIX, ("public",), None)
    executor = LocalExecutor(FIX, {"row_sums_tma": SimpleNamespace(raw="raw kernel")}, HungGpu(), {})
    start = time.monotonic()
    results = run_cases(FIX, cases, extool.starter(FIX.id), executor)
    assert time.monotonic() - start < 5.0
    assert results[0].verdict == V.TIMEOUT and "never completes" in results[0].message
    assert [r.verdict for r in results[1:]] == [V.NOT_RUN] * (len(cases) - 1)
    raw, grid, block, args = launched[0]
    rows, cols = cases[0].inputs["x"].shape
    assert raw == "raw kernel" and grid == (1,) and block == (hopper_exercises.THREADS,)
    assert args[0] == ((rows, cols), hopper_exercises.BOX_ROWS, hopper_exercises.BOX_COLS) and args[2:] == (rows, cols)


HUNG_JUDGED = textwrap.dedent('''
    """A judged process on a GPU whose first kernel never ends: it answers setup and load, then hangs."""
    import os, sys, time
    from kernels.grading import wire

    requests = wire.Reader(int(sys.argv[1]))
    answers = os.fdopen(int(sys.argv[2]), "wb", buffering=0)
    while True:
        header, _ = requests.receive(max_bytes=1 << 30)
        if header["do"] == "setup":
            wire.send(answers, {"event": "built", "libraries": []})
        elif header["do"] == "load":
            wire.send(answers, {"event": "ready", "backend": "cupy", "device": "NVIDIA H100", "sm_count": 132,
                                "is_gpu": True})
        elif header["do"] == "run":
            time.sleep(3600)  # a thread waiting on an mbarrier phase that never completes
        else:
            sys.exit(0)
''')


def test_the_grader_stops_a_judged_process_whose_kernel_hangs(tmp_path: Path) -> None:
    from kernels.grading.grader import GradeOptions
    from kernels.grading.judge import judge_kernel, plan_sandbox

    script = tmp_path / "hung_judged.py"
    script.write_text(HUNG_JUDGED, encoding="utf-8")
    options = GradeOptions(exercise=FIX, seed="tests", timeout=4, sandbox="off",
                           judged_command=lambda argv: [sys.executable, str(script), *argv[-2:]])
    start = time.monotonic()
    report = judge_kernel(FIX, extool.starter(FIX.id), options, plan_sandbox("off"), True)
    assert time.monotonic() - start < 30
    assert report.verdict == V.TIMEOUT, str(report)
    assert report.cases[0].verdict == V.TIMEOUT and report.cases[0].message == "stopped after 4 s"
    assert {c.verdict for c in report.cases[1:]} == {V.NOT_RUN}


# ------------------------------------------------------------------------ the predict exercise

BY_HAND = {
    # thread 45 = warp 1, lane 13; register 13: i / 2 = 6 (even: no + 8), i / 4 = 3, i % 2 = 1
    "acc_row": 16 * 1 + 13 // 4, "acc_col": 8 * 3 + 2 * (13 % 4) + 1,
    "registers_n256": 64 * 256 // 128,
    "swizzle_row3_byte40": 128 * 3 + 16 * (2 ^ 3) + 8,  # chunk 2 ^ row 3 = chunk 1
    "swizzle_row10_byte100": 128 * 10 + 16 * (6 ^ 2) + 4,  # byte 100 = chunk 6 + 4; row 10 % 8 = 2
    "stride_bytes": 8 * 128, "k_step_field": 32 // 16,
    "stage_bytes": (128 + 256) * 64 * 2, "stages_fit": (227 * 1024 - 1152) // ((128 + 256) * 64 * 2),
}


def test_the_model_answers_are_the_ones_worked_out_by_hand() -> None:
    assert {q.key: q.answer for q in PREDICT.questions} == BY_HAND
    assert BY_HAND == {"acc_row": 19, "acc_col": 27, "registers_n256": 128, "swizzle_row3_byte40": 408,
                       "swizzle_row10_byte100": 1348, "stride_bytes": 1024, "k_step_field": 2,
                       "stage_bytes": 49152, "stages_fit": 4}


def test_the_prediction_grader_accepts_the_answers_and_rejects_the_likely_mistakes() -> None:
    assert all(a.verdict == V.PASSED for a in grade_answers(PREDICT, BY_HAND))
    mistakes = {
        "acc_row": 16 * 1 + 13 // 4 + 8,  # took register 13 for the lower half of the rows
        "acc_col": 8 * (13 // 2) + 2 * (13 % 4) + 1,  # one 8-column block per two registers
        "registers_n256": 256,  # one register per column
        "swizzle_row3_byte40": 128 * 3 + 40,  # no swizzle
        "swizzle_row10_byte100": 128 * 10 + 16 * (6 ^ 10) + 4,  # XOR with the row, not the row % 8
        "stride_bytes": 128,  # one row, not a group of eight
        "k_step_field": 32,  # bytes, not bytes / 16
        "stage_bytes": 128 * 256 * 2,  # the C tile, not the A and B boxes
        "stages_fit": 227 * 1024 // ((128 + 256) * 64 * 2) + 1,
    }
    verdicts = {a.key: a.verdict for a in grade_answers(PREDICT, mistakes)}
    assert verdicts == {key: V.WRONG_ANSWER for key in mistakes}
    assert all(a.verdict == V.NOT_ANSWERED for a in grade_answers(PREDICT, {}))


def test_the_accumulator_model_covers_each_element_once() -> None:
    assert hopper_exercises.accumulator_registers(128) == 64
    assert hopper_exercises.accumulator_registers(256) == 128


def test_without_hopper_the_measurement_says_so_and_shows_no_answer(cpu_backend: None) -> None:
    rows = hopper_exercises._wgmma_measure(BY_HAND)
    assert len(rows) == 1 and rows[0].measured == "not measured" and rows[0].predicted is None
    assert "compute capability 9.0" in rows[0].note
    report = evaluate(PREDICT, prediction=BY_HAND)
    assert report.ok and report.measure_note.startswith("not measured on the CPU backend")


@needs_nvrtc
def test_the_swizzle_probe_compiles_for_sm_90a() -> None:
    result = compile_cuda(hopper_exercises.SWIZZLE_PROBE, "sm_90a", filename="swizzle_probe.cu")
    assert result.ok, result.log
