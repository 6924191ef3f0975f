"""Command line of the graded exercises.

    python -m kernels.grading list
    python -m kernels.grading check EXERCISE FILE               # the student check, on a file
    python -m kernels.grading grade SUBMISSIONS --exercise EXERCISE --seed SEED --out OUT
    python -m kernels.grading gradescope --exercise EXERCISE --seed SEED   # inside Gradescope

The seed may also come from the environment variable COURSE_GRADING_SEED, so that it never has to
appear in a shell history or a script that students can see.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

SEED_VARIABLE = "COURSE_GRADING_SEED"


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _seed(args: argparse.Namespace) -> str | None:
    seed = args.seed if args.seed is not None else os.environ.get(SEED_VARIABLE)
    return seed.strip() if seed else None


def _options(args: argparse.Namespace, ex) -> "GradeOptions":
    from .grader import GradeOptions

    return GradeOptions(exercise=ex, seed=_seed(args) or "", timeout=args.timeout, memory_mb=args.memory_mb,
                        gpu_memory_mb=args.gpu_memory_mb, perf=not args.no_perf, perf_target=args.perf_target,
                        archs=tuple(a.strip() for a in args.arch.split(",") if a.strip()),
                        hidden_visibility=args.hidden_visibility, unmeasured_perf=args.unmeasured_perf,
                        show_expected=args.show_expected, sandbox=args.sandbox,
                        hidden_paths=tuple(Path(h).resolve() for h in args.hide))


def _add_grading_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exercise", required=True, help="the exercise id, e.g. reduce/sum_int64")
    p.add_argument("--seed", help=f"the secret seed of the hidden cases (or set {SEED_VARIABLE})")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per submission (default 300)")
    p.add_argument("--memory-mb", type=int, default=8192, help="host memory per submission (default 8192)")
    p.add_argument("--gpu-memory-mb", type=int, default=0, help="limit of CuPy's memory pool (0: none)")
    p.add_argument("--no-perf", action="store_true", help="skip the performance measurement")
    p.add_argument("--perf-target", type=float, default=None,
                   help="replace the exercise's speed target (a fraction of its baseline, e.g. 0.6)")
    p.add_argument("--arch", default="sm_75", help="NVRTC targets the kernel must compile for (default sm_75; "
                                                   "an exercise for one kind of GPU, e.g. sm_90a, uses its own)")
    p.add_argument("--hidden-visibility", default="after_due_date",
                   choices=("hidden", "after_due_date", "after_published", "visible"))
    p.add_argument("--unmeasured-perf", default="exclude", choices=("exclude", "zero"),
                   help="performance points when no GPU measured them: left out (exclude) or 0 of the points")
    p.add_argument("--show-expected", action="store_true", help="show the expected answers of predictions")
    p.add_argument("--hide", action="append", default=[], metavar="FOLDER",
                   help="a folder the submissions' process must not see (repeatable), e.g. the one holding a "
                        "seed file; the submissions and results folders are always hidden")
    p.add_argument("--sandbox", default="standard", choices=("strict", "standard", "off"),
                   help="strict: every layer of the sandbox or no grading; standard (default): seccomp and "
                        "limits required, namespaces where the system allows them; off: only for testing "
                        "the grader, never for students' work")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernels.grading", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the exercises")
    p_check = sub.add_parser("check", help="run the student check on a notebook, .py or .cu file")
    p_check.add_argument("exercise")
    p_check.add_argument("file", type=Path)
    p_grade = sub.add_parser("grade", help="grade a folder of submissions")
    p_grade.add_argument("submissions", type=Path)
    p_grade.add_argument("--out", type=Path, required=True, help="folder for grades.csv and the results files")
    _add_grading_options(p_grade)
    p_gs = sub.add_parser("gradescope", help="grade the one submission of a Gradescope autograder run")
    p_gs.add_argument("--submission", type=Path, default=Path("/autograder/submission"))
    p_gs.add_argument("--results", type=Path, default=Path("/autograder/results/results.json"))
    _add_grading_options(p_gs)
    args = parser.parse_args(argv)

    from .registry import UnknownExerciseError, all_exercises, exercise

    if args.command == "list":
        for ex in all_exercises().values():
            extras = ", performance target" if ex.perf else ""
            print(f"{ex.id:40s} {ex.kind:8s} {ex.title}{extras}")
        return 0
    try:
        ex = exercise(args.exercise)
    except UnknownExerciseError as exc:
        return _fail(str(exc))
    if args.command == "check":
        from .student_check import check
        from .extract import ExtractionError, extract

        try:
            submission = extract(args.file)
        except ExtractionError as exc:
            return _fail(str(exc))
        report = check(ex.id, submission.kernel if ex.has_kernel else None, submission.prediction)
        print(report)
        return 0 if report.ok else 1
    if not _seed(args):
        return _fail(f"the hidden cases need a seed: pass --seed or set {SEED_VARIABLE}")
    if args.perf_target is not None and not 0 < args.perf_target <= 10:
        return _fail(f"--perf-target is a fraction of the baseline such as 0.7, not {args.perf_target}")
    options = _options(args, ex)
    if args.command == "grade":
        from .grader import grade_folder

        try:
            graded = grade_folder(args.submissions, options, args.out, progress=print)
        except (FileNotFoundError, RuntimeError) as exc:
            return _fail(str(exc))
        print(f"{len(graded)} submission(s) graded; {args.out / 'grades.csv'}")
        return 0
    # gradescope
    from . import gradescope
    from .extract import find_submission_files
    from .grader import grade_file

    folder = args.submission
    if not folder.is_dir():
        return _fail(f"{folder} is not a folder")
    options.results_root = args.results.parent.resolve()
    options.hidden_paths += tuple(p for p in (Path("/autograder/source"),) if p.is_dir())
    files = find_submission_files(folder)
    if ex.has_kernel:
        try:
            options.plan()
        except RuntimeError as exc:
            return _fail(str(exc))
    graded_one = grade_file(folder.name, files[0] if files else None, options)
    gradescope.write_json(args.results, graded_one.result)
    print(graded_one.report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
