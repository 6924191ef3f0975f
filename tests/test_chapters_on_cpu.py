"""Every chapter notebook runs top to bottom on the CPU backend, as a reader without a GPU runs it.

A chapter must run unchanged on either backend: on the CPU backend its correctness checks run at
CPU-sized inputs and must pass, its timings are labelled as CPU timings, and cells that only a GPU
can run say so and are skipped. Each chapter is executed from its ``book/<chapter>.md`` source with
COURSE_BACKEND=cpu in a temporary directory (outputs are never written into book/), the chapters in
parallel processes; a failure names the cell and the error.

Run one chapter by hand: ``python tests/test_chapters_on_cpu.py book/reduce.md`` prints its time
and the first error.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernels.portable import SKIPPED

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import notebooks as nbtools  # noqa: E402  (tools/ is not a package)

CHAPTERS = {pair.name: pair.md for pair in nbtools.find_pairs()}
# Chapters still being written: they join this test when they are finished.
NOT_YET: dict[str, str] = {}
CELL_TIMEOUT_S = 600
NOTE = "[CPU backend]"
TIMES_KERNELS = re.compile(r"\bbenchmark\(|\bSweep\(")
PRINTS_A_SPEED = re.compile(r"\d\s*(ms|µs|GB/s|[GT]FLOP/s)\b")


def run_chapter(md: Path, result_path: Path) -> None:
    """Execute one chapter (in this process, which starts its kernel) and write a JSON result."""
    from nbclient.exceptions import CellExecutionError

    nb = nbtools.read_markdown(md)
    started = time.perf_counter()
    error = None
    with tempfile.TemporaryDirectory(prefix=f"{md.stem}-on-cpu-") as folder:
        book = Path(folder) / "book"
        book.mkdir()
        (Path(folder) / "kernels").symlink_to(ROOT / "kernels")  # the setup cell uses ../kernels
        try:
            nbtools.run_notebook(nb, timeout=CELL_TIMEOUT_S, cwd=book)
        except CellExecutionError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 -- a dead kernel or a timeout is a failure too
            error = f"{type(exc).__name__}: {exc}"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    failed = next((i for i, cell in enumerate(code, 1)
                   if any(o.get("output_type") == "error" for o in cell.get("outputs", []))), None)
    if error is not None and failed is None:  # a timeout leaves no error output: the first unfinished cell
        failed = next((i for i, cell in enumerate(code, 1) if cell.get("execution_count") is None), None)
    result = {
        "seconds": round(time.perf_counter() - started, 1),
        "error": error,
        "failed_cell": failed,
        "failed_source": code[failed - 1].source if failed else None,
        "outputs": [nbtools.stream_text(cell) for cell in code],
        "sources": [cell.source for cell in code],
    }
    result_path.write_text(json.dumps(result))


def _run_in_subprocess(name: str, folder: Path) -> dict:
    result_path = folder / f"{name}.json"
    env = dict(os.environ, COURSE_BACKEND="cpu", MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, __file__, str(CHAPTERS[name]), str(result_path)],
                          env=env, capture_output=True, text=True, cwd=ROOT)
    if not result_path.exists():
        return {"seconds": None, "error": f"the runner failed:\n{done.stdout}\n{done.stderr}",
                "failed_cell": None, "failed_source": None, "outputs": [], "sources": []}
    return json.loads(result_path.read_text())


@pytest.fixture(scope="session")
def chapter_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Every chapter executed once, in parallel processes (one per core)."""
    folder = tmp_path_factory.mktemp("chapters-on-cpu")
    names = [name for name in CHAPTERS if name not in NOT_YET]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(zip(names, pool.map(lambda name: _run_in_subprocess(name, folder), names)))


def _params() -> list:
    return [pytest.param(name, marks=pytest.mark.skip(reason=NOT_YET[name])) if name in NOT_YET else name
            for name in CHAPTERS]


@pytest.mark.parametrize("name", _params())
def test_chapter_runs_on_the_cpu_backend(name: str, chapter_runs: dict[str, dict]) -> None:
    run = chapter_runs[name]
    if run["error"]:
        where = ""
        if run["failed_cell"]:
            first = "\n".join(run["failed_source"].splitlines()[:6])
            where = f" in code cell {run['failed_cell']}:\n{first}\n..."
        pytest.fail(f"book/{name}.md fails on the CPU backend{where}\n\n{run['error'][-4000:]}", pytrace=False)


@pytest.mark.parametrize("name", [n for n in CHAPTERS if n not in NOT_YET])
def test_chapter_says_it_runs_on_the_cpu_backend(name: str, chapter_runs: dict[str, dict]) -> None:
    """The setup cell says so, and every cell that times a kernel says that it is a CPU timing
    (or that it is skipped: it measures something only a GPU has)."""
    run = chapter_runs[name]
    if run["error"] or not run["outputs"]:
        pytest.skip("the chapter did not run to the end")
    assert "runs on the CPU backend" in run["outputs"][0]
    skipped = SKIPPED.split("{what}")[0]
    for index, (source, text) in enumerate(zip(run["sources"], run["outputs"]), 1):
        if TIMES_KERNELS.search(source) and PRINTS_A_SPEED.search(text):
            assert NOTE in text or skipped in text, (
                f"code cell {index} of book/{name}.md times kernels but does not say they are CPU timings:\n"
                f"{text[:600]}")


def _main(argv: list[str]) -> int:
    md, result = Path(argv[1]), Path(argv[2]) if len(argv) > 2 else None
    if result is not None:
        run_chapter(md, result)
        return 0
    with tempfile.TemporaryDirectory() as folder:  # by hand: run and report
        path = Path(folder) / "result.json"
        os.environ.setdefault("COURSE_BACKEND", "cpu")
        run_chapter(md, path)
        run = json.loads(path.read_text())
    print(f"{md.name}: {run['seconds']} s")
    if run["error"]:
        print(f"failed in code cell {run['failed_cell']}:\n{run['failed_source']}\n\n{run['error'][-4000:]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
