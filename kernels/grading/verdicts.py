"""The verdicts a graded kernel can get, with the sentence a student reads for each.

One vocabulary for the notebook check, the grader's CSV and the Gradescope feedback, so that a
student who sees "oob_write" in a grade can find the same words in the check they ran at home.
The order of ``SEVERITY`` decides which verdict a case gets when several apply: the one that
explains the others comes first (a kernel that writes past its output usually also gets wrong
values, but the out-of-bounds write is the bug to fix).
"""
from __future__ import annotations

PASSED = "passed"
# stages before any case runs
NO_KERNEL = "no_kernel_found"
FORBIDDEN = "forbidden_code"
WRONG_SIGNATURE = "wrong_signature"
COMPILE_ERROR = "compile_error"
LAUNCH_ERROR = "launch_error"
ENVIRONMENT = "environment_error"
# one case
TIMEOUT = "timeout"
MEMORY_LIMIT = "memory_limit"
CRASH = "crash"
OOB_WRITE = "oob_write"
INPUT_MODIFIED = "input_modified"
RACE = "race"
OOB_READ = "oob_read"
UNWRITTEN = "unwritten"
NAN = "nan"
WRONG = "wrong_result"
NOT_RUN = "not_run"
SKIPPED = "skipped"
# the whole submission
HIDDEN_FAILED = "hidden_failed"
# performance and predictions
TOO_SLOW = "too_slow"
NOT_MEASURED = "not_measured"
WRONG_ANSWER = "wrong_answer"
NOT_ANSWERED = "not_answered"

MESSAGES: dict[str, str] = {
    PASSED: "passed",
    NO_KERNEL: "no kernel source was found in the submission",
    FORBIDDEN: "the source uses something graded kernels may not use",
    WRONG_SIGNATURE: "the kernel's name or parameters do not match the exercise",
    COMPILE_ERROR: "the kernel does not compile",
    LAUNCH_ERROR: "the kernel could not be launched with the exercise's configuration",
    ENVIRONMENT: "the grading machine could not run the kernel (not the submission's fault)",
    TIMEOUT: "did not finish in time (an endless loop, or a barrier some threads never reach?)",
    MEMORY_LIMIT: "used more memory than allowed",
    CRASH: "crashed (illegal or misaligned address, or another fault)",
    OOB_WRITE: "wrote outside its output array (the guard band around it changed)",
    INPUT_MODIFIED: "changed an input array",
    RACE: "race: two runs on the same inputs gave different results",
    OOB_READ: "read outside its input arrays (the result depends on memory around them)",
    UNWRITTEN: "left output elements unwritten",
    NAN: "produced NaN or Inf where the answer is finite",
    WRONG: "wrong result",
    NOT_RUN: "not run (an earlier case broke the GPU context, or grading stopped)",
    SKIPPED: "skipped on the CPU backend (too large); it runs on a GPU",
    HIDDEN_FAILED: "passes the public cases but fails hidden ones (answers fitted to the public cases?)",
    TOO_SLOW: "correct, but below the performance target",
    NOT_MEASURED: "performance not measured (no GPU)",
    WRONG_ANSWER: "wrong answer",
    NOT_ANSWERED: "not answered",
}

#: Most specific first: when a case shows several problems it gets the first of these.
SEVERITY: tuple[str, ...] = (
    ENVIRONMENT, NO_KERNEL, FORBIDDEN, WRONG_SIGNATURE, COMPILE_ERROR, LAUNCH_ERROR,
    TIMEOUT, MEMORY_LIMIT, CRASH, OOB_WRITE, INPUT_MODIFIED, RACE, OOB_READ, UNWRITTEN, NAN, WRONG,
    HIDDEN_FAILED, TOO_SLOW, WRONG_ANSWER, NOT_ANSWERED, NOT_RUN, SKIPPED, NOT_MEASURED, PASSED,
)

#: Verdicts that do not count against the submission.
NEUTRAL = frozenset({PASSED, SKIPPED, NOT_MEASURED})


def message(verdict: str) -> str:
    """The sentence for ``verdict`` (the verdict itself when it is unknown)."""
    return MESSAGES.get(verdict, verdict)


def worst(verdicts: list[str] | tuple[str, ...] | set[str]) -> str:
    """The most severe of ``verdicts`` (PASSED for none)."""
    rank = {v: i for i, v in enumerate(SEVERITY)}
    present = [v for v in verdicts if v]
    if not present:
        return PASSED
    return min(present, key=lambda v: rank.get(v, len(SEVERITY)))


def is_failure(verdict: str) -> bool:
    return verdict not in NEUTRAL
