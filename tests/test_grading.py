"""Unit tests of the grading package that need no backend: markers, extraction, the screen, seeds and
cases, comparisons, the harness on Python "kernels", reports, Gradescope files, the sandbox and the
grader's handling of submissions that hang, crash or lie."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kernels.grading import verdicts as V
from kernels.grading.cases import is_prime, off_multiple, random_prime, rng_for, seed_for
from kernels.grading.compare import compare, guard_scalar, is_poison, poison_scalar
from kernels.grading.extract import ExtractionError, extract, extract_text
from kernels.grading import gradescope
from kernels.grading.gradescope import CSV_FIELDS, results_json, write_csv
from kernels.grading.harness import CaseResult, StageError, parse_macros, run_cases
from kernels.grading.isolate import run_limited
from kernels.grading.session import make_cases
from kernels.grading.markers import MarkerError, outside_differences, render
from kernels.grading.perf import PerfResult
from kernels.grading.predict import grade_answers
from kernels.grading.registry import UnknownExerciseError, exercise
from kernels.grading.report import Report
from kernels.grading.runtime import PythonRuntime, classify_error
from kernels.grading.screen import screen
from kernels.grading.spec import Case, Exercise, Expected, KernelSpec, PerfSpec, Points, Question, Tolerance

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------------
# Markers
# --------------------------------------------------------------------------------------------------

SOURCE = """head
    // BEGIN SOLUTION
    x = 1;
    // END SOLUTION
    // BEGIN STARTER
    x = 0;  // fix me
    // END STARTER
middle
    # BEGIN SOLUTION
    y = 2
    # END SOLUTION
tail"""


def test_render_gives_solution_starter_and_regions() -> None:
    r = render(SOURCE)
    assert r.solution == "head\n    x = 1;\nmiddle\n    y = 2\ntail"
    assert r.starter == "head\n    x = 0;  // fix me\nmiddle\n    # TODO: your code here\ntail"
    assert len(r.regions) == 2
    assert outside_differences(r.solution, r.starter, r.regions) == []


def test_outside_differences_finds_a_change_outside_the_regions() -> None:
    r = render(SOURCE)
    problems = outside_differences(r.solution, r.starter.replace("middle", "muddle"), r.regions)
    assert problems and "muddle" in problems[0]


@pytest.mark.parametrize("bad, message", [
    ("// BEGIN SOLUTION\nx", "never closed"),
    ("// END SOLUTION", "unexpected 'END SOLUTION'"),
    ("// BEGIN STARTER\nx\n// END STARTER", "must follow its SOLUTION"),
    ("// BEGIN SOLUTION\n// BEGIN SOLUTION", "unexpected 'BEGIN SOLUTION'"),
    ("// BEGIN SOLUTION\na\n// END SOLUTION\n// BEGIN STARTER\nb", "STARTER region opened on line 4 is never closed"),
])
def test_bad_markers_are_named(bad: str, message: str) -> None:
    with pytest.raises(MarkerError, match=message):
        render(bad, what="demo.md")


# --------------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------------

def _notebook(*cells: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": []} for c in cells],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_extract_takes_the_last_kernel_literal_and_ignores_the_rest() -> None:
    nb = _notebook("import os\nos.system('rm -rf /')",
                   'KERNEL = r"""first"""',
                   '%%time\nKERNEL = "ignored: a cell magic makes this cell text"',
                   'KERNEL = r"""\n// exercise reduce/sum_int64\nsecond"""\nprint(KERNEL)',
                   "PREDICTION = {'a': 1, 'b': 'warps'}")
    sub = extract_text(nb, ".ipynb")
    assert sub.kernel.strip() == "// exercise reduce/sum_int64\nsecond"
    assert sub.declared_exercise == "reduce/sum_int64"
    assert sub.prediction == {"a": 1, "b": "warps"}
    assert any("last one is graded" in n for n in sub.notes)


def test_extract_reads_literals_only() -> None:
    sub = extract_text(_notebook('K = "a"\nKERNEL = K + "b"', "PREDICTION = {'a': __import__('os').getpid()}"),
                       ".ipynb")
    assert sub.kernel is None and sub.prediction is None
    assert any("plain string literal" in n for n in sub.notes)
    assert any("not evaluated" in n for n in sub.notes)


def test_extract_handles_magics_list_sources_and_cu_files(tmp_path: Path) -> None:
    nb = json.dumps({"cells": [{"cell_type": "code", "source": ["!nvidia-smi\n", "KERNEL = 'abc'\n"]}]})
    assert extract_text(nb, ".ipynb").kernel == "abc"
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k() {}")
    assert extract(cu).kernel == "__global__ void k() {}"


@pytest.mark.parametrize("name, content, message", [
    ("a.ipynb", "{not json", "not valid notebook JSON"),
    ("a.ipynb", "[1, 2]", "not a Jupyter notebook"),
    ("a.txt", "x", "must be .ipynb, .py or .cu"),
])
def test_extract_errors_are_clear(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ExtractionError, match=message):
        extract(path)


# --------------------------------------------------------------------------------------------------
# The screen
# --------------------------------------------------------------------------------------------------

def test_screen_accepts_ordinary_device_code() -> None:
    code = textwrap.dedent('''
        #define N 4   // #include <nothing> in a comment
        /* int main() {} */
        struct Pair { float v; int i; __device__ Pair best(Pair o) const { return o.v > v ? o : *this; } };
        __constant__ float weights[3] = {1.0f, 2.0f, 3.0f};
        extern __shared__ float dynamic_smem[];
        template <int K> __device__ float scale(float x) { return K * x; }
        __device__ __forceinline__ float twice(float x);
        __host__ __device__ inline int add(int a, int b) { return a + b; }
        extern "C" {
        __global__ void k(float* x) { const char* s = "asm int main()"; x[0] = scale<2>(weights[0]); }
        }
        namespace detail { __device__ int helper() { return 1; } }
    ''')
    assert screen(code) == []


@pytest.mark.parametrize("code, problem", [
    ('#include "kernels/grading/harness.py"\n', "#include"),
    ("#  include <stdio.h>\n", "#include"),
    ("void launch() {}\n", "host code: 'launch'"),
    ("int main() { return 0; }\n", "'main' function"),
    ('extern "C" { void hidden() {} }\n', "host code: 'hidden'"),
    ("__device__ int calls;\n", "global __device__ variable"),
    ("__device__ float table[4] = {0};\n", "global __device__ variable"),
    ("__managed__ int m;\n", "__managed__"),
    ('__global__ void k() { asm volatile("trap;"); }\n', "inline assembly"),
])
def test_screen_rejects_with_the_line(code: str, problem: str) -> None:
    findings = screen("// first line\n" + code)
    assert findings and problem in str(findings[0]) and findings[0].line == 2


def test_screen_allows_listed_includes() -> None:
    assert screen("#include <cuda_fp16.h>\n", allowed_includes=("cuda_fp16.h",)) == []


# --------------------------------------------------------------------------------------------------
# Seeds and sizes
# --------------------------------------------------------------------------------------------------

def test_seeds() -> None:
    assert seed_for("a/b", "public") == seed_for("a/b", "public", "anything")
    assert seed_for("a/b", "hidden", 1) == seed_for("a/b", "hidden", "1")
    assert seed_for("a/b", "hidden", 1) != seed_for("a/b", "hidden", 2) != seed_for("a/c", "hidden", 2)
    assert seed_for("a/b", "random") != seed_for("a/b", "random")  # fresh entropy each time
    with pytest.raises(ValueError, match="instructor's seed"):
        seed_for("a/b", "hidden")
    with pytest.raises(ValueError, match="visibility"):
        seed_for("a/b", "secret")


def test_sizes() -> None:
    rng = rng_for("x/y", "public")
    for _ in range(50):
        p = random_prime(rng, 100, 200)
        assert 100 <= p <= 200 and is_prime(p)
        assert off_multiple(rng, 10, 1000, 32) % 32
    assert [n for n in range(20) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19]


# --------------------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------------------

def test_compare_tells_unwritten_nan_and_wrong_apart() -> None:
    got = np.array([1.0, 2.5, np.nan, 0.0], dtype=np.float32)
    got[3] = poison_scalar(np.float32)[0]
    c = compare("y", got, np.array([1.0, 2.0, 3.0, 4.0]), Tolerance(atol=1e-6))
    assert (c.wrong, c.nonfinite, c.unwritten) == (1, 1, 1)
    assert c.verdict == V.UNWRITTEN and c.first_wrong == (1,)
    assert "never written" in c.describe()


def test_compare_tolerances_infinities_and_integers() -> None:
    ref = np.array([1.0, -np.inf, 100.0])
    assert compare("a", np.array([1.0 + 1e-7, -np.inf, 100.0], np.float32), ref, Tolerance(rtol=1e-6)).ok
    assert not compare("a", np.array([1.0, np.inf, 100.0], np.float32), ref, Tolerance(rtol=1e-6)).ok
    per_element = Expected(np.array([1.0, 2.0]), atol=np.array([0.0, 0.5]))
    assert compare("a", np.array([1.0, 2.4], np.float32), per_element, Tolerance()).ok
    assert not compare("a", np.array([1.1, 2.4], np.float32), per_element, Tolerance()).ok
    ints = compare("i", np.array([1, 2, 3], np.int32), np.array([1, 2, 4]), Tolerance(atol=10))
    assert ints.verdict == V.WRONG and ints.first_wrong == (2,)
    assert compare("e", np.zeros((0,), np.float32), np.zeros((0,)), Tolerance()).ok
    assert "shape" in compare("s", np.zeros(3, np.float32), np.zeros(4), Tolerance()).problem


def test_poison_and_guard_patterns_differ() -> None:
    for dtype in (np.float32, np.float64, np.int32, np.int64):
        assert poison_scalar(dtype).tobytes() != guard_scalar(dtype).tobytes()
        assert is_poison(np.repeat(poison_scalar(dtype), 3)).all()


# --------------------------------------------------------------------------------------------------
# The harness on Python "kernels"
# --------------------------------------------------------------------------------------------------

def _axpy_cases(rng, vis: str) -> list[Case]:
    return [Case(f"n = {n}", vis, {"x": rng.uniform(-1, 1, n).astype(np.float32)}, {"y": ((n,), np.float32)},
                 {"n": n}, tol=Tolerance(rtol=1e-6), why="demo", large=n > 1000) for n in (1, 300, 5000)]


def _axpy_launch(ctx) -> None:
    ctx.kernel()((1,), (256,), (ctx["x"], ctx["y"], ctx["n"]))


AXPY = Exercise(id="demo/twice", title="twice", kind="write", kernels=(KernelSpec("twice", "(const float* x, float* y, int n)"),),
                make_cases=_axpy_cases, launch=_axpy_launch,
                reference=lambda c: {"y": 2 * c.inputs["x"].astype(np.float64)}, points=Points(1, 1, 0))


def _base(view: np.ndarray) -> np.ndarray:
    """The whole guarded buffer behind a view (what a stray pointer could reach)."""
    return view.base if view.base is not None else view


def _run(kernel, code: str = 'extern "C" __global__ void twice(const float* x, float* y, int n) {}',
         exercise: Exercise = AXPY, **kwargs) -> list[CaseResult]:
    runtime = PythonRuntime({"twice": kernel})
    cases = exercise.make_cases(np.random.default_rng(0), "public")
    return run_cases(exercise, cases, code, runtime, **kwargs)


def test_harness_passes_a_correct_kernel_and_skips_large_cases_without_a_gpu() -> None:
    def good(code, grid, block, args, smem):
        x, y, n = args
        y[:n] = 2 * x[:n]
    verdicts = [r.verdict for r in _run(good)]
    assert verdicts == [V.PASSED, V.PASSED, V.SKIPPED]


@pytest.mark.parametrize("name, verdict", [
    ("unwritten", V.UNWRITTEN), ("oob_write", V.OOB_WRITE), ("input", V.INPUT_MODIFIED), ("race", V.RACE),
    ("oob_read", V.OOB_READ), ("crash", V.CRASH), ("nan", V.NAN), ("wrong", V.WRONG), ("deadlock", V.TIMEOUT),
])
def test_harness_verdicts(name: str, verdict: str) -> None:
    calls = {"n": 0}

    class BarrierDeadlock(RuntimeError):
        pass

    def bad(code, grid, block, args, smem):
        x, y, n = args
        calls["n"] += 1
        y[:n] = 2 * x[:n]
        if name == "unwritten":
            y[n - 1] = poison_scalar(np.float32)[0]
        elif name == "oob_write":
            _base(y)[-1] = 0.0
        elif name == "input":
            x[0] = 7.0
        elif name == "race":
            y[0] += calls["n"]
        elif name == "oob_read":
            before = _base(x)[0]
            y[0] = 2 * x[0] + (0.0 if np.isnan(before) else before)
        elif name == "crash":
            raise RuntimeError("an illegal memory access was encountered")
        elif name == "nan":
            y[0] = np.inf
        elif name == "wrong":
            y[0] += 1.0
        elif name == "deadlock":
            raise BarrierDeadlock("a __syncthreads() that not every thread reaches")
    first = _run(bad)[0]
    assert first.verdict == verdict, first.message


def test_a_fatal_fault_stops_the_run() -> None:
    class Fatal(PythonRuntime):
        def is_fatal(self, exc: BaseException) -> bool:
            return True

    def crash(code, grid, block, args, smem):
        raise RuntimeError("illegal address")

    runtime = Fatal({"twice": crash})
    cases = AXPY.make_cases(np.random.default_rng(0), "public")
    code = 'extern "C" __global__ void twice(const float* x, float* y, int n) {}'
    verdicts = [r.verdict for r in run_cases(AXPY, cases[:2], code, runtime)]
    assert verdicts == [V.CRASH, V.NOT_RUN]


def test_signature_and_macros_are_checked_before_running() -> None:
    with pytest.raises(StageError) as info:
        _run(lambda *a: None, code='extern "C" __global__ void twice(const float* x, double* y) {}')
    assert info.value.verdict == V.WRONG_SIGNATURE and "needs 3" in info.value.message
    with pytest.raises(StageError, match="define TILE"):
        parse_macros("#define TILES 4", ("TILE",))
    assert parse_macros("#define TILE (64) // tiles\n#define T2 8u", ("TILE", "T2")) == {"TILE": 64, "T2": 8}


def test_derived_outputs_still_need_every_raw_element_written() -> None:
    def cases(rng, vis):
        return [Case("n = 8", vis, {"x": np.arange(8, dtype=np.int32)}, {"partial": ((4,), np.int64)}, {"n": 8})]

    ex = Exercise(id="demo/sum", title="sum", kind="write", kernels=(KernelSpec("twice", "(const int* x, long long* p, int n)"),),
                  make_cases=cases, launch=lambda ctx: ctx.kernel()((1,), (1,), (ctx["x"], ctx["partial"], ctx["n"])),
                  reference=lambda c: {"sum": np.array([28])},
                  derive=lambda c, raw: {"sum": np.array([raw["partial"].sum()])})

    def three_of_four(code, grid, block, args, smem):
        x, p, n = args
        p[:3] = [28, 0, 0]

    result = _run(three_of_four, code='extern "C" __global__ void twice(const int* x, long long* p, int n) {}',
                  exercise=ex)[0]
    assert result.verdict == V.UNWRITTEN and "partial" in result.message


def test_classify_error_by_class_name() -> None:
    OutOfBoundsAccess = type("OutOfBoundsAccess", (RuntimeError,), {})
    KernelTimeout = type("KernelTimeout", (RuntimeError,), {})
    assert classify_error(OutOfBoundsAccess("out-of-bounds write of y")) == V.OOB_WRITE
    assert classify_error(OutOfBoundsAccess("out-of-bounds read of x")) == V.OOB_READ
    assert classify_error(KernelTimeout("too long")) == V.TIMEOUT
    assert classify_error(ValueError("?")) == V.CRASH


# --------------------------------------------------------------------------------------------------
# Reports, predictions, Gradescope and CSV
# --------------------------------------------------------------------------------------------------

def _report(*verdicts: tuple[str, str]) -> Report:
    return Report("demo/twice", "twice", cases=[CaseResult(f"c{i}", vis, v, "msg" if v != V.PASSED else "")
                                                for i, (vis, v) in enumerate(verdicts)])


def test_report_verdicts() -> None:
    assert _report(("public", V.PASSED), ("hidden", V.PASSED)).verdict == V.PASSED
    assert _report(("public", V.WRONG), ("hidden", V.CRASH)).verdict == V.CRASH
    assert _report(("public", V.PASSED), ("hidden", V.WRONG)).verdict == V.HIDDEN_FAILED
    assert _report(("public", V.PASSED), ("random", V.NAN)).verdict == V.NAN
    assert _report(("public", V.PASSED), ("public", V.SKIPPED)).verdict == V.PASSED
    r = _report(("public", V.PASSED))
    r.perf = PerfResult(V.TOO_SLOW, "GB/s", 100.0, 300.0, "the copy ceiling", 0.8)
    assert r.verdict == V.TOO_SLOW and "33.3 %" in r.perf.summary()
    round_trip = Report.from_dict(json.loads(json.dumps(r.to_dict())))
    assert round_trip.verdict == V.TOO_SLOW and round_trip.cases[0].name == "c0"


def test_not_measured_never_says_passed() -> None:
    r = _report(("public", V.PASSED))
    r.perf = PerfResult(V.NOT_MEASURED, "GB/s", message="not measured on the CPU backend")
    text = str(r) + r._repr_html_()
    assert "not measured" in text and r.verdict == V.PASSED
    assert "performance: passed" not in text.lower()


def test_report_html_escapes_student_text() -> None:
    r = Report("demo/twice", stage_verdict=V.COMPILE_ERROR, stage_message="<script>alert(1)</script>")
    assert "<script>" not in r._repr_html_()


def test_predictions() -> None:
    ex = Exercise(id="demo/p", title="p", kind="predict",
                  questions=(Question("n", "a number", 37.5, abs_tol=0.5), Question("w", "a word", ("warps", "threads")),
                             Question("i", "an int", 4)))
    answers = {a.key: a.verdict for a in grade_answers(ex, {"n": 37.9, "w": " Threads ", "i": True})}
    assert answers == {"n": V.PASSED, "w": V.PASSED, "i": V.WRONG_ANSWER}  # a bool is not a number
    assert all(a.verdict == V.NOT_ANSWERED for a in grade_answers(ex, {"n": None}))


def test_gradescope_results(tmp_path: Path) -> None:
    ex = Exercise(id="demo/twice", title="twice", kind="write", kernels=AXPY.kernels, make_cases=_axpy_cases,
                  launch=_axpy_launch, reference=AXPY.reference,
                  perf=PerfSpec(case=lambda r, s: None, metric="GB/s", work=lambda c: 1.0, baseline="copy", target=0.7,
                                describe="bytes"), points=Points(public=3, hidden=5, perf=2))
    r = _report(("public", V.PASSED), ("public", V.WRONG), ("hidden", V.PASSED), ("hidden", V.PASSED))
    r.perf = PerfResult(V.NOT_MEASURED, "GB/s")
    data = results_json(ex, r, 1.25)
    assert data["score"] == pytest.approx(1.5 + 5)
    tests = data["tests"]
    assert all({"name", "score", "max_score", "output", "visibility", "status"} <= set(t) for t in tests)
    assert {t["visibility"] for t in tests if t["name"].startswith("hidden")} == {"after_due_date"}
    perf = [t for t in tests if t["name"] == "performance"][0]
    assert perf["max_score"] == 0 and "not measured" in perf["output"]
    zero = gradescope.tests_for(ex, r, unmeasured_perf="zero")
    assert [t.max_score for t in zero if t.name == "performance"] == [2]
    failed = Report("demo/twice", stage_verdict=V.COMPILE_ERROR, stage_message="kernel.cu(3): error")
    data = results_json(ex, failed, 0.1)
    assert data["score"] == 0 and "error" in data["tests"][0]["output"]
    path = tmp_path / "grades.csv"
    write_csv(path, [{k: "" for k in CSV_FIELDS}])
    assert next(csv.reader(path.open())) == list(CSV_FIELDS)


def test_registry_suggests_close_ids() -> None:
    with pytest.raises(UnknownExerciseError, match="did you mean reduce/sum_int64"):
        exercise("reduce/sum_int46")
    assert exercise("exercises/reduce/sum_int64.ipynb").id == "reduce/sum_int64"


# --------------------------------------------------------------------------------------------------
# The sandbox
# --------------------------------------------------------------------------------------------------

def test_sandbox_kills_a_hang_with_its_children() -> None:
    code = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "time.sleep(60)")
    out = run_limited([sys.executable, "-c", code], timeout=1.0)
    assert out.timed_out and not out.ok and out.seconds < 10


def test_sandbox_reports_a_crash_by_signal() -> None:
    out = run_limited([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], timeout=20)
    assert out.signal_name == "SIGSEGV" and not out.timed_out


@pytest.mark.parametrize("address_space", [True, False])
def test_sandbox_limits_memory(address_space: bool) -> None:
    code = "import time\nblocks = [bytearray(50 << 20) for _ in range(40)]\ntime.sleep(5)"
    out = run_limited([sys.executable, "-c", code], timeout=30, memory_mb=400, address_space=address_space)
    assert out.memory_exceeded and not out.ok


# --------------------------------------------------------------------------------------------------
# The grader with fake judged processes (they speak the protocol; what they send back is all they
# can influence)
# --------------------------------------------------------------------------------------------------

FAKE_JUDGED = '''
import os, signal, sys, time
import numpy as np
from kernels.grading import wire
requests, answers = wire.Reader(int(sys.argv[1])), os.fdopen(int(sys.argv[2]), "wb")
PUBLIC_SIZES = set(map(int, sys.argv[3].split(",")))  # the fake fails or hangs on the others: hidden ones
mode = "good"
while True:
    header, arrays = requests.receive(max_bytes=1 << 30)
    what = header["do"]
    if what == "setup":
        mode = header["kernel"].split()[1]
        wire.send(answers, {"event": "built", "libraries": []})
    elif what == "load":
        wire.send(answers, {"event": "ready", "backend": "cpu", "device": "fake", "sm_count": 0, "is_gpu": False})
    elif what == "run":
        n = header["case"]["scalars"]["n"]
        hidden = n not in PUBLIC_SIZES
        if mode == "hang" or (mode == "hang_later" and hidden):
            time.sleep(60)
        if mode == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if mode == "garbage":
            answers.write(b"KRN1" + os.urandom(64)); answers.flush(); time.sleep(60)
        finals = {k[len("buffer:"):]: v.copy() for k, v in arrays.items() if k.startswith("buffer:")}
        b = header["buffers"]
        view = lambda name: finals[name][b[name]["start"]:][:b[name]["count"]]
        sc = header["case"]["scalars"]
        view("out")[:] = np.float32(sc["a"]) * view("x") + np.float32(sc["b"]) * view("y")
        if mode == "hidden_wrong" and hidden:
            view("out")[:] += 1
        reply = {"event": "ran", "error_text": "", "error_verdict": "", "fatal": False, "races": [],
                 "shared_unwritten": []}
        if mode == "claims_passed":
            reply.update(error_verdict="passed", error_text="all good")
        if mode == "wrong_shape":
            finals["out"] = finals["out"][:-1]
        wire.send(answers, reply, {f"final:{k}": v for k, v in finals.items()})
    elif what == "hints":
        wire.send(answers, {"event": "hints", "hints": []})
    else:
        sys.exit(0)
'''

GOOD_KERNEL = ('extern "C" __global__ void axpby(const float* x, const float* y, float* out, float a, float b, int n) '
               '{ int i = threadIdx.x; if (i < n) out[i] = a * x[i] + b * y[i]; }')


def _fake_options(tmp_path: Path, timeout: float = 20.0):
    from kernels.grading.grader import GradeOptions

    script = tmp_path / "fake_judged.py"
    script.write_text(FAKE_JUDGED)

    ex = exercise("gpu_architecture/axpby_grid_stride")
    public = ",".join(str(c.scalars["n"]) for c in make_cases(ex, ("public",), None))

    def command(argv: list[str]) -> list[str]:
        return [sys.executable, str(script), *argv[-2:], public]  # the descriptors are the last two arguments

    return GradeOptions(exercise=exercise("gpu_architecture/axpby_grid_stride"), seed="s", timeout=timeout,
                        judged_command=command, archs=(), sandbox="off")


def _submission(folder: Path, name: str, mode: str) -> None:
    (folder / f"{name}.cu").write_text(f"// {mode}\n{GOOD_KERNEL}\n")


def test_grader_survives_hangs_and_crashes_and_writes_every_file(tmp_path: Path) -> None:
    from kernels.grading.grader import grade_folder

    subs = tmp_path / "subs"
    subs.mkdir()
    for name, mode in [("ana", "good"), ("ben", "hang"), ("cai", "segfault"), ("dee", "hidden_wrong"),
                       ("eve", "hang_later")]:
        _submission(subs, name, mode)
    (subs / "fay").mkdir()                                   # a folder with nothing gradable
    (subs / "gus").mkdir()
    (subs / "gus" / "notes.txt").write_text("hi")
    (subs / "gus" / "work.ipynb").write_text(_notebook(f'KERNEL = r"""// good\n{GOOD_KERNEL}"""'))
    out = tmp_path / "out"
    graded = {g.name: g for g in grade_folder(subs, _fake_options(tmp_path, timeout=3.0), out)}
    assert graded["ana"].report.verdict == V.PASSED, str(graded["ana"].report)
    assert graded["ben"].report.verdict == V.TIMEOUT
    assert graded["ben"].report.cases[0].name == "n = 1"  # the case that was running
    assert all(c.verdict == V.NOT_RUN for c in graded["ben"].report.cases[1:] if c.verdict != V.SKIPPED)
    assert graded["cai"].report.verdict == V.CRASH and "SIGSEGV" in graded["cai"].report.cases[0].message
    assert graded["dee"].report.verdict == V.HIDDEN_FAILED
    assert graded["eve"].report.verdict == V.TIMEOUT and graded["eve"].report.cases[0].passed
    assert graded["fay"].report.verdict == V.NO_KERNEL
    assert graded["gus"].report.verdict == V.PASSED and graded["gus"].file == "work.ipynb"
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert [r["submission"] for r in rows] == ["ana", "ben", "cai", "dee", "eve", "fay", "gus"]
    for name in graded:
        data = json.loads((out / name / "results.json").read_text())
        assert "tests" in data and "score" in data
        assert (out / name / "feedback.txt").exists()
    # all cases passed; nothing measures speed on the CPU, so the performance points are left out
    assert (float(rows[0]["score"]), float(rows[0]["max_score"])) == (8.0, 8.0)


@pytest.mark.parametrize("mode", ["garbage", "claims_passed", "wrong_shape"])
def test_a_judged_process_that_lies_gets_a_crash_not_a_grade(mode: str, tmp_path: Path) -> None:
    """The verdict is the judge's: a malformed message, a claimed verdict or buffers that are not
    what was sent all end the run as a crash."""
    from kernels.grading.grader import grade_file

    path = tmp_path / f"{mode}.cu"
    _submission(tmp_path, mode, mode)
    report = grade_file(mode, path, _fake_options(tmp_path, timeout=5.0)).report
    assert report.verdict == V.CRASH, str(report)
    assert report.cases[0].verdict == V.CRASH


def test_grader_rejects_before_running(tmp_path: Path) -> None:
    from kernels.grading.grader import grade_file

    options = _fake_options(tmp_path)
    bad = tmp_path / "bad.cu"
    bad.write_text("#include <stdio.h>\n" + GOOD_KERNEL)
    assert grade_file("bad", bad, options).report.verdict == V.FORBIDDEN
    wrong = tmp_path / "wrong.cu"
    wrong.write_text(GOOD_KERNEL.replace("float b, int n", "float b"))
    assert grade_file("wrong", wrong, options).report.verdict == V.WRONG_SIGNATURE
    other = tmp_path / "other.cu"
    other.write_text("// exercise reduce/sum_int64\n// good\n" + GOOD_KERNEL)
    graded = grade_file("other", other, options)
    assert any("graded as gpu_architecture/axpby_grid_stride" in n for n in graded.report.notes)


def test_grader_compiles_with_nvrtc_before_running(tmp_path: Path) -> None:
    from kernels.grading.grader import grade_file
    from kernels.nvrtc import nvrtc_available

    if not nvrtc_available():
        pytest.skip("NVRTC is not installed")
    options = _fake_options(tmp_path)
    options.archs = ("sm_75",)
    broken = tmp_path / "broken.cu"
    broken.write_text(GOOD_KERNEL.replace("out[i] =", "out[i] = undefined_name +"))
    report = grade_file("broken", broken, options).report
    assert report.verdict == V.COMPILE_ERROR and "undefined_name" in report.stage_message


# --------------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernels.grading", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_cli_lists_exercises_and_explains_mistakes(tmp_path: Path) -> None:
    listing = _cli("list")
    assert listing.returncode == 0 and "reduce/sum_int64" in listing.stdout
    no_seed = _cli("grade", str(tmp_path), "--exercise", "reduce/sum_int64", "--out", str(tmp_path / "o"))
    assert no_seed.returncode == 2 and "seed" in no_seed.stderr and "Traceback" not in no_seed.stderr
    unknown = _cli("grade", str(tmp_path), "--exercise", "reduce/sum", "--seed", "1", "--out", str(tmp_path / "o"))
    assert unknown.returncode == 2 and "did you mean" in unknown.stderr
    missing = _cli("grade", str(tmp_path / "nowhere"), "--exercise", "reduce/sum_int64", "--seed", "1",
                   "--out", str(tmp_path / "o"))
    assert missing.returncode == 2 and "not a folder" in missing.stderr and "Traceback" not in missing.stderr
