"""Run every chapter and every exercise check under the T4 profile on a big GPU, and record how it went.

    python tools/t4_profile.py                                  # all chapters, exercise notebooks and checks
    python tools/t4_profile.py book/gemm.ipynb --no-exercises   # just these notebooks
    python tools/t4_profile.py --out-dir _build/t4-run --results benchmarks/results
    python tools/t4_profile.py --checks-only --merge            # a run in parts: add to the summary

Every notebook runs with COURSE_GPU_PROFILE=t4 (``kernels.profile``): on an H100 or H200 each kernel is
compiled for compute_75 and the package reports a T4's limits, so the chapters' and checks' T4 branches
run. The recorded notebooks are never written: each executed copy goes to ``--out-dir`` (default
``_build/t4_profile``), run from its own folder so that its setup cell finds the package. The exercise
checks are the graders' own: each exercise's reference solution evaluated on its public and hidden
cases (kernel exercises, without the speed target, which a T4 would judge), or its reference
prediction measured (predict exercises).

The summary goes to ``<results>/t4_profile_<gpu>.json`` and ``.txt`` (``<gpu>``: the real GPU, e.g.
``h200``). Its times are the big GPU running T4 code, never T4 figures; the files say so.

The JSON file holds one object:

- ``profile``: "t4"; ``note``: the provenance sentence (which GPU ran the code, and that its times are not
  T4 measurements); ``provenance``: ``kernels.device.provenance()`` under the profile;
- ``rows``: one object per notebook or check, in the order run, with exactly the keys of ``ROW_KEYS``:
  ``kind`` (one of ``KINDS``), ``name`` (``book/gemm.ipynb``, ``exercises/reduce/sum_int64.ipynb`` or
  an exercise id), ``status`` ("ok", "failed", or "skipped": an exercise check for a newer GPU than
  a T4, which says so instead of running), ``wall_s`` (seconds, one decimal), ``peak_gpu_bytes``
  (the most CuPy's memory pool held at once; null when unknown) and ``detail`` (the failure's last
  line, or what ran);
- ``ok``, ``failed`` and ``skipped``: the counts.

The text file is the same as a table: ``#`` lines (the note, the GPU, the date, the counts), then a
header line with the columns of ``TEXT_COLUMNS`` and one line per row, separated by two or more spaces.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

PROFILE = "t4"
ENV_VAR = "COURSE_GPU_PROFILE"  # kernels.profile.ENV_VAR; repeated so this file imports without the package
KINDS = ("chapter", "exercise notebook", "exercise check")
ROW_KEYS = ("kind", "name", "status", "wall_s", "peak_gpu_bytes", "detail")
TEXT_COLUMNS = ("name", "kind", "status", "wall s", "peak MiB", "detail")
STATUSES = ("ok", "failed", "skipped")
DEFAULT_OUT = ROOT / "_build" / "t4_profile"
DEFAULT_RESULTS = ROOT / "benchmarks" / "results"
MARKER = "T4_PROFILE_RESULT"

#: Added before a copy's first cell: tracks the most CuPy's memory pool holds (it keeps no peak itself).
PEAK_CELL = '''\
# Added by tools/t4_profile.py (not part of the notebook): the peak of CuPy's memory pool.
_t4_peak = [None]
try:
    import cupy as _t4_cupy
    _t4_gpu = _t4_cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # no CuPy, or no GPU: no pool to measure
    _t4_gpu = False
if _t4_gpu:
    _t4_pool = _t4_cupy.get_default_memory_pool()
    _t4_peak[0] = 0
    def _t4_malloc(size):
        memory = _t4_pool.malloc(size)
        _t4_peak[0] = max(_t4_peak[0], _t4_pool.total_bytes())
        return memory
    _t4_cupy.cuda.set_allocator(_t4_malloc)'''

#: Added after a copy's last cell: the peak, and proof that the profile was on.
REPORT_CELL = f'''\
# Added by tools/t4_profile.py (not part of the notebook): what the run used.
import json as _t4_json
import kernels.device as _t4_device
import kernels.profile as _t4_profile
_t4_active = _t4_profile.active_profile()
print("{MARKER}", _t4_json.dumps({{"peak_gpu_bytes": _t4_peak[0], "gpu": _t4_device.device_info().name,
                                   "profile": _t4_active.key if _t4_active else None}}))'''


@dataclass(frozen=True)
class Row:
    """One notebook or check run under the profile."""

    kind: str
    name: str
    status: str
    wall_s: float
    peak_gpu_bytes: int | None
    detail: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")


def results_slug(provenance: dict[str, Any]) -> str:
    """The real GPU's model in the summary's file name: ``h200`` for "NVIDIA H200", ``h100`` for
    "NVIDIA H100 80GB HBM3" (the profile's provenance names the T4 profile as its ``gpu``)."""
    from notebooks import gpu_slug

    return gpu_slug(str(provenance.get("physical_gpu") or provenance["gpu"]), model_only=True)


def _last_line(error: BaseException) -> str:
    lines = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip().splitlines() or [type(error).__name__]
    return lines[-1][:160]


# --------------------------------------------------------------------------- notebooks


def profiled_copy(nb: Any) -> Any:
    """A copy of ``nb`` with the peak tracker first and the report last."""
    import copy

    import nbformat

    run = copy.deepcopy(nb)
    run.cells.insert(0, nbformat.v4.new_code_cell(PEAK_CELL))
    run.cells.append(nbformat.v4.new_code_cell(REPORT_CELL))
    for index, cell in enumerate(run.cells):  # fresh ids: the inserted cells must not repeat one
        cell["id"] = f"t4-profile-{index}"
    return run


def run_report(nb: Any) -> dict[str, Any]:
    """What the report cell printed: peak_gpu_bytes, gpu and profile; {} when it did not run."""
    from notebooks import stream_text

    for line in stream_text(nb.cells[-1]).splitlines():
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    return {}


def label(path: Path) -> str:
    """``book/gemm.ipynb``: the path relative to the repository (the file name outside it)."""
    path = Path(path).resolve()
    return path.relative_to(ROOT).as_posix() if ROOT in path.parents else path.name


def kind_of(path: Path) -> str:
    return "exercise notebook" if label(path).startswith("exercises/") else "chapter"


def run_notebook_copy(path: Path, out_dir: Path, timeout: int) -> Row:
    """Execute a profiled copy of ``path`` from its own folder and save it under ``out_dir``."""
    import nbformat
    from notebooks import run_notebook, write_notebook

    nb = profiled_copy(nbformat.read(path, as_version=4))
    target = out_dir / label(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        wall = run_notebook(nb, timeout, cwd=Path(path).parent)
    except Exception as exc:  # CellExecutionError, a timeout, a dead kernel: recorded, the run goes on
        write_notebook(nb, target)
        return Row(kind_of(path), label(path), "failed", round(time.perf_counter() - start, 1), None, _last_line(exc))
    write_notebook(nb, target)
    report = run_report(nb)
    if report.get("profile") != PROFILE:
        return Row(kind_of(path), label(path), "failed", round(wall, 1), report.get("peak_gpu_bytes"),
                   f"the {PROFILE.upper()} profile was not on in the notebook's kernel ({report or 'no report'})")
    cells = sum(cell.cell_type == "code" for cell in nb.cells) - 2
    return Row(kind_of(path), label(path), "ok", round(wall, 1), report.get("peak_gpu_bytes"), f"{cells} code cells")


# --------------------------------------------------------------------------- exercise checks


class PoolPeak:
    """The most CuPy's memory pool holds at once while active (None without a GPU): CuPy keeps no peak."""

    def __init__(self) -> None:
        self.cupy = _gpu_cupy()
        self.peak: int | None = None

    def __enter__(self) -> "PoolPeak":
        if self.cupy is not None:
            pool = self.cupy.get_default_memory_pool()
            pool.free_all_blocks()
            self.peak = 0

            def malloc(size: int) -> Any:
                memory = pool.malloc(size)
                self.peak = max(self.peak or 0, pool.total_bytes())
                return memory

            self.cupy.cuda.set_allocator(malloc)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.cupy is not None:
            self.cupy.cuda.set_allocator(self.cupy.get_default_memory_pool().malloc)


def _gpu_cupy() -> Any:
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # no CuPy, or no GPU
        return None


def exercise_checks(ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every exercise's check (or those of ``ids``), in this process (run it with the profile on)."""
    import exercises as extool

    from kernels.grading.extract import extract_text
    from kernels.grading.harness import arch_problem
    from kernels.grading.registry import all_exercises
    from kernels.grading.runtime import CourseRuntime
    from kernels.grading.session import evaluate

    known = all_exercises()
    unknown = sorted(set(ids or ()) - set(known))
    if unknown:
        raise ValueError(f"no exercise {', '.join(unknown)}; python tools/exercises.py list names them")
    results = []
    for exercise_id, ex in known.items():
        if ids is not None and exercise_id not in ids:
            continue
        start = time.perf_counter()
        too_new = arch_problem(ex, CourseRuntime())    # a Hopper exercise under the T4 profile
        if too_new:
            results.append({"name": exercise_id, "status": "skipped", "wall_s": 0.0, "peak_gpu_bytes": None,
                            "detail": too_new[:160]})
            continue
        with PoolPeak() as peak:
            try:
                if ex.has_kernel:
                    report = evaluate(ex, kernel=extool.solution(exercise_id), visibilities=("public", "hidden"),
                                      secret="t4 profile", perf=False)
                    ok, detail = report.ok, f"reference solution: {report.verdict}"
                else:
                    prediction = extract_text(extool.solution(exercise_id), ".py").prediction
                    report = evaluate(ex, prediction=prediction)
                    ok, detail = report.ok and bool(report.measured), "reference prediction measured"
                if not ok:
                    detail = (str(report).strip().splitlines() or ["failed"])[-1].strip()[:160]
            except Exception as exc:  # noqa: BLE001 -- recorded as a failed check
                ok, detail = False, _last_line(exc)
        results.append({"name": exercise_id, "status": "ok" if ok else "failed",
                        "wall_s": round(time.perf_counter() - start, 1),
                        "peak_gpu_bytes": peak.peak, "detail": detail})
    return results


def run_exercise_checks(timeout: int, ids: Sequence[str] | None = None) -> list[Row]:
    """``exercise_checks(ids)`` in a fresh interpreter with the profile on."""
    env = dict(os.environ, **{ENV_VAR: PROFILE}, PYTHONPATH=_pythonpath())
    chosen = None if ids is None else list(ids)
    code = ("import json, sys; sys.path.insert(0, 'tools'); import t4_profile; "
            f"print({MARKER!r}, json.dumps(t4_profile.exercise_checks({chosen!r})))")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return [Row("exercise check", "all exercises", "failed", float(timeout), None, "timed out")]
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:160]
        return [Row("exercise check", "all exercises", "failed", 0.0, None, tail)]
    return [Row("exercise check", r["name"], r["status"], r["wall_s"], r["peak_gpu_bytes"],
                r["detail"]) for r in json.loads(lines[-1][len(MARKER):])]


def _pythonpath() -> str:
    from notebooks import _kernel_pythonpath

    return _kernel_pythonpath()


def profiled_provenance() -> dict[str, Any]:
    """kernels.device.provenance() under the profile, from a fresh interpreter (no CUDA context here)."""
    code = "import json, kernels.device as d; print(json.dumps(d.provenance(), default=str))"
    env = dict(os.environ, **{ENV_VAR: PROFILE}, PYTHONPATH=_pythonpath())
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"no GPU provenance under the profile:\n{done.stderr.strip()}")
    provenance = json.loads(done.stdout.strip().splitlines()[-1])
    if provenance.get("profile") != PROFILE:
        raise RuntimeError(f"the {PROFILE.upper()} profile was not on: {provenance}")
    return provenance


# --------------------------------------------------------------------------- the summary


def summary(rows: Sequence[Row], provenance: dict[str, Any]) -> dict[str, Any]:
    return {
        "profile": PROFILE,
        "note": provenance.get("profile_note", ""),
        "provenance": dict(provenance),
        "rows": [asdict(row) for row in rows],
        "ok": sum(row.status == "ok" for row in rows),
        "failed": sum(row.status == "failed" for row in rows),
        "skipped": sum(row.status == "skipped" for row in rows),
    }


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.0f}"


def summary_text(data: dict[str, Any]) -> str:
    """The text file: ``#`` lines, then a table with the TEXT_COLUMNS header."""
    prov = data["provenance"]
    lines = [f"# tools/t4_profile.py: {data['note']}",
             f"# GPU: {prov.get('gpu')} (really {prov.get('physical_gpu')}) · CUDA runtime {prov.get('cuda_runtime')} "
             f"· driver {prov.get('cuda_driver')} · CuPy {prov.get('cupy')} · {prov.get('date')}",
             f"# {data['ok']} ok, {data['failed']} failed, {data.get('skipped', 0)} skipped (an exercise for a newer "
             f"GPU, whose check says so); peak = the most CuPy's memory pool held at once", ""]
    table = [TEXT_COLUMNS] + [(r["name"], r["kind"], r["status"], f"{r['wall_s']:.1f}", _mib(r["peak_gpu_bytes"]),
                               r["detail"]) for r in data["rows"]]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(TEXT_COLUMNS))]
    lines += ["  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip() for row in table]
    return "\n".join(lines) + "\n"


def parse_summary_text(text: str) -> list[dict[str, str]]:
    """The table of a summary text file as {column: value} rows (what the tests read back)."""
    body = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    header = re.split(r"\s{2,}", body[0].strip())
    if tuple(header) != TEXT_COLUMNS:
        raise ValueError(f"the summary's header is {header}, not {list(TEXT_COLUMNS)}")
    rows = []
    for line in body[1:]:
        values = re.split(r"\s{2,}", line.strip(), maxsplit=len(TEXT_COLUMNS) - 1)
        rows.append(dict(zip(TEXT_COLUMNS, values + [""] * (len(TEXT_COLUMNS) - len(values)))))
    return rows


def write_summary(data: dict[str, Any], results: Path) -> tuple[Path, Path]:
    """Write ``t4_profile_<gpu>.json`` and ``.txt`` into ``results``; their paths."""
    slug = results_slug(data["provenance"])
    results.mkdir(parents=True, exist_ok=True)
    json_path, text_path = results / f"t4_profile_{slug}.json", results / f"t4_profile_{slug}.txt"
    json_path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    text_path.write_text(summary_text(data), encoding="utf-8")
    return json_path, text_path


def previous_rows(results: Path, provenance: dict[str, Any]) -> list[Row]:
    """The rows of the summary already written for this GPU, if any."""
    path = results / f"t4_profile_{results_slug(provenance)}.json"
    if not path.exists():
        return []
    return [Row(**row) for row in json.loads(path.read_text(encoding="utf-8"))["rows"]]


def merged(old: Sequence[Row], new: Sequence[Row]) -> list[Row]:
    """``old`` with the rows ``new`` repeats replaced (in place), then ``new``'s other rows."""
    fresh = {(row.kind, row.name): row for row in new}
    kept = [fresh.pop((row.kind, row.name), row) for row in old]
    return kept + list(fresh.values())


# --------------------------------------------------------------------------- command line


def default_notebooks(exercises: bool) -> list[Path]:
    from student_env import chapter_notebooks, exercise_notebooks

    return chapter_notebooks() + (exercise_notebooks() if exercises else [])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: every chapter and exercise)")
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT, help="where the executed copies go")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="where the summary goes")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    parser.add_argument("--no-exercises", action="store_true", help="skip the exercise notebooks and checks")
    parser.add_argument("--checks-only", action="store_true", help="run only the exercise checks")
    parser.add_argument("--merge", action="store_true",
                        help="keep the rows of an existing summary that this run does not repeat (a run in parts)")
    args = parser.parse_args(argv)
    out_dir = args.out_dir.resolve()
    if out_dir == ROOT or any(ROOT / folder in (out_dir, *out_dir.parents) for folder in ("book", "exercises")):
        print(f"error: --out-dir {label(out_dir)} would overwrite the recorded notebooks; choose another folder",
              file=sys.stderr)
        return 2
    os.environ[ENV_VAR] = PROFILE  # inherited by every notebook's kernel
    try:
        provenance = profiled_provenance()
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    paths = [] if args.checks_only else (args.paths or default_notebooks(not args.no_exercises))
    rows = []
    for path in paths:
        row = run_notebook_copy(Path(path).resolve(), out_dir, args.timeout)
        print(f"{row.status:6} {row.wall_s:7.1f} s  {row.name}  {row.detail}", flush=True)
        rows.append(row)
    if args.checks_only or (not args.no_exercises and not args.paths):
        for row in run_exercise_checks(timeout=max(args.timeout, 3600)):
            print(f"{row.status:6} {row.wall_s:7.1f} s  {row.name}  {row.detail}", flush=True)
            rows.append(row)
    if args.merge:
        rows = merged(previous_rows(args.results, provenance), rows)
    data = summary(rows, provenance)
    for path in write_summary(data, args.results):
        print(f"wrote {label(path)}")
    return 0 if data["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
