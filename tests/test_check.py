"""check() with NumPy standing in for the device: the verdicts a chapter relies on."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from kernels.check import CheckReport, check, rand

check_module = importlib.import_module("kernels.check")   # the module (kernels.check is also the function)

N = 1000  # not a multiple of any block size


def run(launch, tol: float = 1e-6, seed: int | None = None, **kw) -> CheckReport:
    return check(launch, lambda x, y: x + y, inputs={"x": rand(N), "y": rand(N)},
                 outputs={"out": ((N,), np.float32)}, tol=tol, seed=seed, xp=np, **kw)


def correct(x, y, out) -> None:
    out[:] = x + y


def test_correct_kernel_passes() -> None:
    report = run(correct)
    assert report.ok and bool(report)
    o = report.outputs[0]
    assert o.unwritten == 0 and o.rel_error < 1e-7 and o.first_mismatches == []
    report.raise_if_failed()
    assert "PASSED" in str(report) and "ok" in report._repr_html_()


def test_skipping_last_element_is_unwritten_and_named() -> None:
    def skips_last(x, y, out):
        out[:-1] = x[:-1] + y[:-1]

    report = run(skips_last)
    assert not report.ok and not bool(report)
    o = report.outputs[0]
    assert o.unwritten == 1
    assert [idx for idx, _, _ in o.first_mismatches] == [(N - 1,)]
    assert np.isnan(o.first_mismatches[0][1])
    assert f"[{N - 1}]" in str(report) and f"[{N - 1}]" in report._repr_html_()
    with pytest.raises(AssertionError, match="unwritten 1"):
        report.raise_if_failed()


def test_nan_written_never_passes() -> None:
    def writes_nan(x, y, out):
        out[:] = x + y
        out[7] = np.nan

    report = run(writes_nan, tol=1.0)  # even a huge tolerance does not excuse a NaN
    assert not report.ok
    assert report.outputs[0].unwritten == 1
    assert report.outputs[0].first_mismatches[0][0] == (7,)


def off_by(delta: float):
    def launch(x, y, out):
        out[:] = (x + y) * np.float32(1 + delta)
    return launch


def test_tolerance_decides() -> None:
    strict = run(off_by(1e-3), tol=1e-6)
    assert not strict.ok
    assert strict.outputs[0].rel_error == pytest.approx(1e-3, rel=0.01)
    assert strict.outputs[0].unwritten == 0 and len(strict.outputs[0].first_mismatches) == 5
    assert run(off_by(1e-3), tol=1e-2).ok


def test_modified_input_fails() -> None:
    def clobbers(x, y, out):
        out[:] = x + y
        x[0] = 42.0

    report = run(clobbers)
    assert report.outputs[0].ok  # the output itself is right
    assert not report.ok
    assert report.modified_inputs == ["x"]
    assert "modified" in str(report)


def test_fresh_inputs_each_call_and_seed_reproduces(monkeypatch) -> None:
    """What a student gets: without COURSE_CHECK_SEED (the test suite sets it per test) every call
    draws new inputs, and the recorded seed replays them."""
    monkeypatch.delenv(check_module.SEED_ENV, raising=False)
    seen = []

    def capture(x, y, out):
        seen.append(x.copy())
        out[:] = x + y

    a, b = run(capture), run(capture)
    assert a.seed != b.seed
    assert not np.array_equal(seen[0], seen[1])
    c = run(capture, seed=a.seed)
    assert c.seed == a.seed
    np.testing.assert_array_equal(seen[2], seen[0])
    assert seen[0].dtype == np.float32 and seen[0].min() >= -1 and seen[0].max() < 1


def test_the_environment_fixes_the_default_seed(monkeypatch) -> None:
    """COURSE_CHECK_SEED makes calls without a seed repeat their inputs (this is how the test suite
    stays reproducible); a value that is not an integer is refused by name."""
    seen = []

    def capture(x, y, out):
        seen.append(x.copy())
        out[:] = x + y

    monkeypatch.setenv(check_module.SEED_ENV, "12345")
    a, b = run(capture), run(capture)
    assert a.seed == b.seed == 12345
    np.testing.assert_array_equal(seen[0], seen[1])
    monkeypatch.setenv(check_module.SEED_ENV, "2**8")
    with pytest.raises(ValueError, match="COURSE_CHECK_SEED must be an integer seed, not '2\\*\\*8'"):
        run(capture)


def test_check_tolerance_admits_exactly_the_error_bound() -> None:
    """An error at the bound passes and twice the bound (in check's units) fails, also for a result
    near zero, where a fixed relative tolerance would be wrong."""
    ref = np.array([1.0, -0.018173036294456324, 3.0])
    bound = np.array([1e-7, 2.4e-7, 3e-7])
    tol = check_module.check_tolerance(ref, bound)
    got_ok = (ref + bound).astype(np.float64)
    got_bad = ref + np.array([0.0, 2 * tol * max(abs(ref[1]), np.sqrt(np.mean(ref ** 2))) * 1.01, 0.0])
    assert check_module.compare("y", got_ok, ref, tol).ok
    assert not check_module.compare("y", got_bad, ref, tol).ok


def test_reference_gets_float64() -> None:
    dtypes = {}

    def reference(x, y):
        dtypes.update(x=x.dtype, y=y.dtype)
        return x + y

    check(correct, reference, inputs={"x": rand(10), "y": rand(10)}, outputs={"out": (10, np.float32)}, xp=np)
    assert dtypes == {"x": np.float64, "y": np.float64}


def test_integer_outputs_are_exact() -> None:
    inputs = {"x": rand(N, np.int32, -100, 100), "y": rand(N, np.int32, -100, 100)}
    outputs = {"out": ((N,), np.int32)}

    def int_add(x, y, out):
        out[:] = x + y

    def int_add_one_wrong(x, y, out):
        out[:] = x + y
        out[3] += 1

    def int_skips_last(x, y, out):
        out[:-1] = x[:-1] + y[:-1]

    good = check(int_add, lambda x, y: x + y, inputs, outputs, xp=np)
    assert good.ok and good.outputs[0].exact
    wrong = check(int_add_one_wrong, lambda x, y: x + y, inputs, outputs, tol=1.0, xp=np)
    assert not wrong.ok  # tol does not apply to integers
    assert wrong.outputs[0].mismatched == 1 and wrong.outputs[0].first_mismatches[0][0] == (3,)
    assert wrong.outputs[0].unwritten == 0
    skipped = check(int_skips_last, lambda x, y: x + y, inputs, outputs, xp=np)
    assert skipped.outputs[0].unwritten == 1
    assert skipped.outputs[0].first_mismatches[0][1] == np.iinfo(np.int32).min


def test_integer_inputs_are_drawn_in_inclusive_range() -> None:
    seen = {}

    def capture(x, out):
        seen["x"] = x.copy()
        out[:] = x

    check(capture, lambda x: x, {"x": rand(5000, np.uint8, 3, 5)}, {"out": (5000, np.uint8)}, xp=np)
    assert seen["x"].dtype == np.uint8 and set(np.unique(seen["x"])) == {3, 4, 5}


def test_multiple_outputs_and_multi_index() -> None:
    M, K = 7, 9

    def launch(A, row_sum, col_max):
        row_sum[:] = A.sum(axis=1)
        col_max[:] = A.max(axis=0)
        col_max[4] = 0.0  # bug

    report = check(launch, lambda A: {"row_sum": A.sum(axis=1), "col_max": A.max(axis=0)},
                   inputs={"A": rand((M, K))},
                   outputs={"row_sum": ((M,), np.float32), "col_max": ((K,), np.float32)}, tol=1e-5, xp=np)
    by_name = {o.name: o for o in report.outputs}
    assert by_name["row_sum"].ok and not by_name["col_max"].ok
    assert by_name["col_max"].first_mismatches[0][0] == (4,)

    def transpose_bug(A, out):
        out[:] = A
        out[2, 3] = -5.0

    r2 = check(transpose_bug, lambda A: A, {"A": rand((M, K))}, {"out": ((M, K), np.float32)}, xp=np)
    assert r2.outputs[0].first_mismatches[0][0] == (2, 3)


def test_array_and_scalar_inputs() -> None:
    x = np.arange(12, dtype=np.float32)

    def scale(x, alpha, out):
        out[:] = x * alpha

    report = check(scale, lambda x, alpha: x * alpha, {"x": x, "alpha": np.float32(2.5)},
                   {"out": (12, np.float32)}, xp=np)
    assert report.ok
    assert np.array_equal(x, np.arange(12, dtype=np.float32))  # caller's array untouched


def test_wrong_reference_shape_is_reported() -> None:
    report = check(correct, lambda x, y: np.zeros(3), {"x": rand(10), "y": rand(10)},
                   {"out": (10, np.float32)}, xp=np)
    assert not report.ok and "shape" in report.outputs[0].problem


def test_error_spread_below_elementwise_limit_still_fails_and_lists_worst() -> None:
    # Half the elements are 0, half are 1 (rms = 0.707). Every element is off by 0.99 x tol x
    # max(|ref|, rms): no single element stands out, but the norm error is about 1.2 x tol.
    x = np.tile(np.array([0.0, 1.0], dtype=np.float32), 50)
    tol = 1e-3
    rms = np.sqrt(0.5)

    def spread(x, out):
        out[:] = x + np.float32(0.99 * tol) * np.maximum(np.abs(x), np.float32(rms))

    report = check(spread, lambda x: x, {"x": x}, {"out": (100, np.float32)}, tol=tol, xp=np)
    o = report.outputs[0]
    assert o.rel_error == pytest.approx(0.99e-3 * np.sqrt(1.5), rel=1e-3)
    assert not o.ok and o.mismatched == 0 and len(o.first_mismatches) == 5
    assert check(spread, lambda x: x, {"x": x}, {"out": (100, np.float32)}, tol=2 * tol, xp=np).ok
