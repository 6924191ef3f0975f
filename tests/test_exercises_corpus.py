"""The corpus of known-wrong submissions (and valid alternatives) in exercises/corpus/: well formed,
covering every kind of failure, and rejected before running where no backend is needed.

Each entry is a ``.cu`` file whose header says ``// expect: <verdict> | <verdict>`` (on a GPU, with the
speed measured), optionally ``// expect-cpu: ...`` (on the CPU backend) and ``// why: ...``; a notebook
entry carries the same in its metadata under "corpus". The entries that need a backend to fail are
graded in tests/test_grading_backend.py (CPU backend) and tests/gpu/test_exercises_gpu.py (GPU).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from kernels.grading import verdicts as V
from kernels.grading.registry import all_exercises
from kernels.grading.session import make_cases

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "exercises" / "corpus"
EXERCISES = all_exercises()


def corpus_entries() -> list[tuple[Path, str, str, str]]:
    """(file, exercise id, expected verdicts, expected verdicts on the CPU backend) for every entry."""
    entries = []
    for path in sorted(p for p in CORPUS.rglob("*") if p.suffix in (".cu", ".ipynb")):
        rel = path.relative_to(CORPUS)
        exercise_id = f"{rel.parts[0]}/{rel.parts[1]}"
        if path.suffix == ".ipynb":
            meta = json.loads(path.read_text(encoding="utf-8"))["metadata"]["corpus"]
            expect, cpu, why = meta["expect"], meta.get("expect-cpu", meta["expect"]), meta.get("why", "")
        else:
            text = path.read_text(encoding="utf-8")
            expect = re.search(r"^// expect: (.+)$", text, re.M).group(1)
            cpu_m = re.search(r"^// expect-cpu: (.+)$", text, re.M)
            cpu = cpu_m.group(1) if cpu_m else expect
            why = re.search(r"^// why: (.+)$", text, re.M).group(1)
        assert why, f"{rel}: say why the submission is wrong (or right)"
        entries.append((path, exercise_id, expect, cpu))
    return entries


def verdict_set(text: str) -> set[str]:
    return {v.strip() for v in text.split("|")}


def test_corpus_is_well_formed_and_covers_every_failure_class() -> None:
    entries = corpus_entries()
    for path, exercise_id, expect, cpu in entries:
        assert exercise_id in EXERCISES, f"{path}: no exercise {exercise_id}"
        assert verdict_set(expect) <= set(V.MESSAGES) and verdict_set(cpu) <= set(V.MESSAGES), path
    wrong = [e for e in entries if V.PASSED not in verdict_set(e[3])]
    valid = [e for e in entries if verdict_set(e[3]) == {V.PASSED}]
    assert len(wrong) >= 20 and len(valid) >= 3
    covered = set().union(*(verdict_set(e[2]) | verdict_set(e[3]) for e in entries))
    for needed in (V.CRASH, V.TIMEOUT, V.COMPILE_ERROR, V.WRONG_SIGNATURE, V.RACE, V.NAN, V.OOB_WRITE, V.OOB_READ,
                   V.INPUT_MODIFIED, V.FORBIDDEN, V.HIDDEN_FAILED, V.UNWRITTEN, V.WRONG, V.NO_KERNEL, V.TOO_SLOW):
        assert needed in covered, f"no corpus entry for {needed}"
    names = {p.stem for p, *_ in entries}
    for needed in ("swapped_axes", "missing_bounds_check", "missing_syncthreads", "int_accumulator",
                   "hardcoded_public", "patches_checker", "includes_harness", "host_code", "writes_input",
                   "greater_equal", "zero_identity_max", "chunk_overrun"):
        assert needed in names


def hardcoded_sum_kernel() -> str:
    """The corpus entry that hard-codes the answers of reduce/sum_int64's public cases."""
    ex = EXERCISES["reduce/sum_int64"]
    lines = ["// expect: hidden_failed",
             "// why: answers hard-coded for the sizes of the public cases; the hidden cases catch it",
             'extern "C" __global__ void sum_partials(const int* x, int n, long long* partial)',
             "{",
             "    if (threadIdx.x != 0) return;",
             "    long long total = 0;"]
    for case in make_cases(ex, ("public",), None):
        total = int(case.inputs["x"].astype(np.int64).sum())
        lines.append(f"    if (n == {case.scalars['n']}) total = {total}LL;")
    lines += ["    partial[blockIdx.x] = blockIdx.x == 0 ? total : 0;", "}", ""]
    return "\n".join(lines)


def test_hardcoded_entry_matches_the_public_cases() -> None:
    path = CORPUS / "reduce" / "sum_int64" / "hardcoded_public.cu"
    assert path.read_text(encoding="utf-8") == hardcoded_sum_kernel(), (
        "the public cases of reduce/sum_int64 changed: rewrite exercises/corpus/reduce/sum_int64/hardcoded_public.cu "
        "with hardcoded_sum_kernel() from tests/test_exercises_corpus.py")


STATIC_VERDICTS = {V.FORBIDDEN, V.WRONG_SIGNATURE, V.COMPILE_ERROR, V.NO_KERNEL, V.WRONG_ANSWER}


@pytest.mark.parametrize("entry", [e for e in corpus_entries() if verdict_set(e[2]) <= STATIC_VERDICTS],
                         ids=lambda e: str(e[0].relative_to(CORPUS)))
def test_corpus_entries_rejected_before_running(entry, tmp_path: Path) -> None:
    """Screen, signature, compile and predictions need no backend: the sandboxed run is never reached."""
    from kernels.grading.grader import GradeOptions, grade_file
    from kernels.nvrtc import nvrtc_available

    path, exercise_id, expect, _ = entry
    if V.COMPILE_ERROR in verdict_set(expect) and not nvrtc_available():
        pytest.skip("NVRTC is not installed")

    def never(argv: list[str]) -> list[str]:
        raise AssertionError("the submission should have been rejected before it ran")

    options = GradeOptions(exercise=EXERCISES[exercise_id], seed="static", judged_command=never, sandbox="off")
    graded = grade_file(path.stem, path, options)
    assert graded.report.verdict in verdict_set(expect), str(graded.report)
