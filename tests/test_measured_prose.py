"""Measured speeds quoted in a chapter's prose must be ones its recorded GPU runs printed.

Prose may quote the run (``reaches 2692 GB/s``), but a number that no output contains is either a
typo or left over from an older run, and the book promises that every number in it is true. A
chapter may also quote its run on a second GPU (book/runs/<gpu>/<chapter>.ipynb); such a number
must sit in a paragraph that names that GPU, so that a reader never takes it for the main run's.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import notebooks as nbtools  # noqa: E402  (tools/ is not a package)

CHAPTERS = sorted(p for p in (ROOT / "book").glob("*.md") if p.with_suffix(".ipynb").exists())

# Speeds with these units are measurements; datasheet figures are written in TB/s or named below.
MEASURED = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*(GB/s|TFLOP/s|GFLOP/s)")
# Figures quoted from elsewhere, not measured by the book: datasheets, and other sources'
# laptop measurements (quoted as theirs). Tables (lines starting with "|") are quotations too.
QUOTED = {("320", "GB/s"), ("300", "GB/s"), ("600", "GB/s"), ("900", "GB/s"), ("160", "GB/s"),
          ("256", "GB/s"), ("67", "TFLOP/s"), ("8.1", "TFLOP/s"), ("7.7", "TFLOP/s"),
          ("120", "GFLOP/s")}
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?")
# Without thousands separators: the explorers' embedded JSON lists numbers as "143,516.946", which
# NUMBER reads as one number; every output number is read both ways.
PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")


def prose(md: Path) -> str:
    text = md.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```\s*$", "", text, flags=re.M | re.S)      # code cells and fences
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("|"))


def output_numbers(ipynb: Path) -> list[float]:
    nb = nbformat.read(ipynb, as_version=4)
    texts: list[str] = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if "text" in out:
                texts.append(out["text"])
            for mime in ("text/plain", "text/html", "text/markdown"):
                if mime in out.get("data", {}):
                    texts.append(out["data"][mime])
    text = "\n".join(texts)
    return [float(m.replace(",", "")) for m in NUMBER.findall(text)] + [float(m) for m in PLAIN_NUMBER.findall(text)]


def matches(quoted: str, recorded: list[float]) -> bool:
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    value = float(quoted.replace(",", ""))
    return any(abs(round(r, decimals) - value) < 10 ** -decimals / 2 + 1e-9 for r in recorded)


def paragraphs(md: Path) -> list[str]:
    """The prose of ``md`` (as ``prose`` keeps it) split at blank lines."""
    return [p for p in re.split(r"\n\s*\n", prose(md)) if p.strip()]


def other_runs(md: Path, runs: Path = ROOT / "book" / "runs") -> dict[str, list[float]]:
    """{GPU model as prose names it ("H200"): output numbers} of the chapter's runs on other GPUs."""
    found = {}
    for run in sorted(runs.glob(f"*/{md.stem}.ipynb")):
        gpu = nbtools.get_provenance(nbformat.read(run, as_version=4)) or {}
        found[nbtools.gpu_slug(gpu.get("gpu", run.parent.name), model_only=True).upper()] = output_numbers(run)
    return found


def stray_speeds(md: Path, runs: Path = ROOT / "book" / "runs") -> list[str]:
    """Speeds quoted in ``md``'s prose that neither its recorded run nor a run on another GPU named in
    the same paragraph printed."""
    recorded, others = output_numbers(md.with_suffix(".ipynb")), other_runs(md, runs)
    stray = []
    for paragraph in paragraphs(md):
        named = [numbers for gpu, numbers in others.items() if re.search(rf"\b{gpu}\b", paragraph, re.I)]
        for m in MEASURED.finditer(paragraph):
            q, unit = m.group(1), m.group(2)
            if (q, unit) in QUOTED or matches(q, recorded) or any(matches(q, numbers) for numbers in named):
                continue
            stray.append(f"{q} {unit}")
    return stray


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_quoted_speeds_come_from_the_recorded_run(md):
    stray = stray_speeds(md)
    assert not stray, (f"{md.name} quotes speeds that its recorded outputs do not contain (a second GPU's run "
                       f"counts only in a paragraph that names that GPU): {stray}")


def test_a_second_runs_number_counts_only_where_its_gpu_is_named(tmp_path):
    def notebook(path: Path, text: str, gpu: str | None = None) -> None:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
        nb.cells[0].outputs = [nbformat.v4.new_output("stream", text=text)]
        if gpu:
            nb.metadata["course"] = {"provenance": {"gpu": gpu}}
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)

    md = tmp_path / "book" / "ch.md"
    notebook(md.with_suffix(".ipynb"), "copy: 2981.4 GB/s\n", "NVIDIA H100 80GB HBM3")
    notebook(tmp_path / "book" / "runs" / "h200" / "ch.ipynb", "copy: 4231.0 GB/s\n", "NVIDIA H200")
    md.write_text("The copy reached 2981 GB/s.\n\nOn the H200 it reached 4231 GB/s.\n\nIt reached 4231 GB/s.\n")
    assert stray_speeds(md, tmp_path / "book" / "runs") == ["4231 GB/s"]  # the third paragraph names no GPU


def test_the_check_catches_a_number_that_was_not_measured(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="copy: 2981.4 GB/s\n")]
    nbformat.write(nb, tmp_path / "ch.ipynb")
    assert matches("2981", output_numbers(tmp_path / "ch.ipynb"))
    assert not matches("2990", output_numbers(tmp_path / "ch.ipynb"))


def test_output_numbers_read_json_arrays_and_thousands_separators(tmp_path):
    """'2,692 GB/s' in text and [143,516.946] in an explorer's JSON both yield their numbers."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("stream", text="copy: 2,692 GB/s\n"),
                    nbformat.v4.new_output("display_data", data={"text/html": '{"y":[143,516.946]}'})]
    nb.cells = [cell]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    numbers = output_numbers(path)
    assert 2692 in numbers and 143 in numbers and 516.946 in numbers
    assert matches("143", numbers) and matches("2692", numbers) and not matches("144", numbers)
