"""The "Asynchrony" chapter's measured claims hold in its recorded GPU run (book/asynchrony.ipynb).

Every value is read from the recorded outputs (printed lines and the explorers' embedded data) and
the code cells that produced them; nothing measured is written into this file. Each claim is a
``claim_*`` function that raises AssertionError when the outputs contradict it, and
``test_each_claim_can_fail`` feeds every one a copy of the notebook with one output changed.
"""
from __future__ import annotations

import ast
import base64
import copy
import itertools
import json
import math
import re
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest

from kernels.chapters import asynchrony as ay
from kernels.explorer import decode_columns, encode_columns

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import notebooks as nbtools  # noqa: E402  (tools/ is not a package)

NOTEBOOK = ROOT / "book" / "asynchrony.ipynb"
TARGET_PERCENT_OF_IDEAL = 85.0          # the pipeline's target: 85 % of the ideal speedup
MAIN_PIPELINE_STREAMS = 4
EXPLORER_DATA = re.compile(r'(<script type="application/json" class="course-explorer-data">)(.*?)(</script>)',
                           re.S)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NUM = r"(\d+(?:\.\d+)?)"


# ------------------------------------------------------------------------------------ reading the notebook

@pytest.fixture(scope="module")
def nb() -> nbformat.NotebookNode:
    notebook = nbtools.read_notebook(NOTEBOOK)
    provenance = nbtools.get_provenance(notebook)
    assert provenance and provenance.get("gpu"), "book/asynchrony.ipynb holds no recorded GPU run"
    return notebook


def cell_with(nb: nbformat.NotebookNode, marker: str) -> nbformat.NotebookNode:
    """The one code cell whose source contains ``marker``."""
    cells = [c for c in nb.cells if c.cell_type == "code" and marker in nbtools.normalize_source(c.source)]
    assert len(cells) == 1, f"{len(cells)} code cells contain {marker!r}"
    return cells[0]


def printed(nb: nbformat.NotebookNode, marker: str) -> str:
    text = nbtools.stream_text(cell_with(nb, marker))
    assert text.strip(), f"the cell with {marker!r} has no recorded output"
    return text


def search(pattern: str, text: str) -> re.Match[str]:
    match = re.search(pattern, text)
    assert match, f"no line matching {pattern!r} in the recorded output:\n{text}"
    return match


def explorer_html(nb: nbformat.NotebookNode, marker: str) -> str:
    """The recorded explorer (text/html) that the cell containing ``marker`` displayed."""
    htmls = ["".join(out.get("data", {}).get("text/html", "")) for out in cell_with(nb, marker).get("outputs", [])]
    htmls = [h for h in htmls if 'class="course-explorer"' in h]
    assert len(htmls) == 1, f"{len(htmls)} recorded explorers in the cell with {marker!r}"
    return htmls[0]


def explorer_payload(nb: nbformat.NotebookNode, marker: str) -> dict:
    match = EXPLORER_DATA.search(explorer_html(nb, marker))
    assert match, "the explorer has no embedded data"
    return json.loads(match.group(2))


def explorer_records(nb: nbformat.NotebookNode, marker: str) -> list[dict]:
    return decode_columns(explorer_payload(nb, marker)["data"])


def sweep_grid(nb: nbformat.NotebookNode, marker: str) -> dict[str, list]:
    """The parameter grid of the ``Sweep(...)`` call in the cell containing ``marker``, from its code."""
    tree = ast.parse(nbtools.normalize_source(cell_with(nb, marker).source))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Sweep"]
    assert len(calls) == 1, "expected one Sweep(...) call"
    grid = calls[0].args[1]
    assert isinstance(grid, ast.Dict)
    # MiB is the only name the grids use; the chapter defines it as 2**20.
    return {ast.literal_eval(k): eval(compile(ast.Expression(v), "<grid>", "eval"),  # noqa: S307
                                      {"__builtins__": {}}, {"MiB": 2**20})
            for k, v in zip(grid.keys, grid.values)}


def png_size(nb: nbformat.NotebookNode, marker: str) -> tuple[int, int]:
    """Width and height of the one PNG the cell containing ``marker`` displayed."""
    pngs = [out["data"]["image/png"] for out in cell_with(nb, marker).get("outputs", [])
            if "image/png" in out.get("data", {})]
    assert len(pngs) == 1, f"{len(pngs)} recorded plots in the cell with {marker!r}"
    data = base64.b64decode("".join(pngs[0]))
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR", "the recorded plot is not a PNG"
    return struct.unpack(">II", data[16:24])


# Markers: pieces of code that identify each cell, whatever its position.
CALIBRATION = 'stage_ms = {"H2D"'
MAIN_PIPELINE = "S_MAIN, C_MAIN ="
COPIES = "copy_gbps[(memory, direction)]"
PIPE_SWEEP = "pipe_sweep = Sweep("
LAUNCH_SWEEP = "launch_sweep = Sweep("
LAUNCH_READOUT = "values = {mode: at(elements, 256, mode)"
TIMELINE_PLOT = "ay.timeline_plot(main_intervals"
OVERHEAD_PLOT = "ay.launch_overhead_plot("


# ------------------------------------------------------------------------------------ the claims

def claim_pipeline_reaches_the_target(nb: nbformat.NotebookNode) -> None:
    """4 streams reach at least TARGET_PERCENT_OF_IDEAL % of the ideal speedup, by the printed times."""
    stages = search(rf"H2D {NUM} ms, kernel {NUM} ms, D2H {NUM} ms", printed(nb, CALIBRATION))
    stage_ms = dict(zip(ay.STAGES, map(float, stages.groups())))
    text = printed(nb, MAIN_PIPELINE)
    m = search(rf"serial {NUM} ms, pipelined \((\d+) streams, (\d+) chunks\) {NUM} ms .*?ideal {NUM} ms", text)
    serial, streams, chunks, pipelined, ideal = (float(m[1]), int(m[2]), int(m[3]), float(m[4]), float(m[5]))
    assert streams == MAIN_PIPELINE_STREAMS, f"the main pipeline ran {streams} streams"
    # The printed ideal is the model applied to the printed stage times (both rounded to 0.01 ms).
    assert ideal == pytest.approx(ay.ideal_pipeline_ms(stage_ms, chunks), abs=0.02)
    percent = 100 * (serial / pipelined) / (serial / ideal)
    reported = float(search(rf"{NUM} % of the ideal speedup", text)[1])
    assert reported == pytest.approx(percent, abs=0.5), "the printed percentage does not follow from the times"
    assert percent >= TARGET_PERCENT_OF_IDEAL, f"{percent:.1f} % of the ideal speedup"
    assert "identical to the serial one: True" in text


def _copies(nb: nbformat.NotebookNode) -> dict[tuple[str, str], dict[str, float]]:
    text = printed(nb, COPIES)
    found = {}
    for m in re.finditer(rf"(H2D|D2H) (pinned|pageable)\s*:\s*{NUM} GB/s \(\s*{NUM} ms per 256 MiB.*?"
                         rf"returned after\s+{NUM} ms", text):
        found[(m[2], m[1])] = {"GB/s": float(m[3]), "ms": float(m[4]), "returned ms": float(m[5])}
    assert len(found) == 4, f"expected four copies (pinned/pageable x H2D/D2H), found {sorted(found)}"
    for direction in ("H2D", "D2H"):
        ratio = float(search(rf"{direction}: pinned is {NUM}x as fast as pageable", text)[1])
        pinned, pageable = found[("pinned", direction)], found[("pageable", direction)]
        assert ratio == pytest.approx(pinned["GB/s"] / pageable["GB/s"], abs=0.1)
    return found


def claim_pinned_beats_pageable(nb: nbformat.NotebookNode) -> None:
    """Pinned copies are faster than pageable ones in both directions (rate and time per 256 MiB)."""
    copies = _copies(nb)
    for direction in ("H2D", "D2H"):
        pinned, pageable = copies[("pinned", direction)], copies[("pageable", direction)]
        assert pinned["GB/s"] > pageable["GB/s"], (direction, pinned, pageable)
        assert pinned["ms"] < pageable["ms"], (direction, pinned, pageable)


def claim_only_pageable_calls_keep_the_host(nb: nbformat.NotebookNode) -> None:
    """Pinned calls return long before their copy ends; pageable ones about when it ends (the prose)."""
    for (memory, direction), c in _copies(nb).items():
        if memory == "pinned":
            assert c["returned ms"] < 0.1 * c["ms"], (memory, direction, c)
        else:
            assert c["returned ms"] > 0.5 * c["ms"], (memory, direction, c)


def claim_graph_beats_the_stream_chain(nb: nbformat.NotebookNode) -> None:
    """At the longest chain, a graph's wall time per kernel is below both stream versions', per size."""
    records = explorer_records(nb, LAUNCH_SWEEP)
    longest = max(r["chain"] for r in records)
    readout = printed(nb, LAUNCH_READOUT)
    for elements in sorted({r["elements"] for r in records}):
        at = {r["mode"]: r["µs per kernel"] for r in records if (r["elements"], r["chain"]) == (elements, longest)}
        assert {"graph", "stream", "stream, raw CuPy"} <= set(at), at
        assert all(isinstance(v, (int, float)) and v > 0 for v in at.values()), at
        assert at["graph"] < at["stream"] and at["graph"] < at["stream, raw CuPy"], (elements, at)
        # The readout cell printed the same points (it reads the chain of 256).
        line = search(rf"{elements} floats, chain of {longest}: (.*)", readout)[1]
        for mode, value in at.items():
            assert float(search(rf"(?:^|, ){re.escape(mode)} {NUM} µs", line)[1]) == pytest.approx(value, abs=0.006)


def claim_explorers_hold_every_point(nb: nbformat.NotebookNode) -> None:
    """Each recorded explorer holds one point per combination of its sweep's grid, and no failures."""
    for marker in (PIPE_SWEEP, LAUNCH_SWEEP):
        grid = sweep_grid(nb, marker)
        expected = math.prod(len(values) for values in grid.values())
        payload = explorer_payload(nb, marker)
        records = decode_columns(payload["data"])
        assert payload["data"]["n"] == len(records) == expected, (marker, len(records), expected)
        points = {tuple(r[p] for p in grid) for r in records}
        assert points == set(itertools.product(*grid.values())), marker
        assert all(r.get("note") is None for r in records), [r for r in records if r.get("note")]
        progress = search(r"\[(\d+)/(\d+)\]", nbtools.stream_text(cell_with(nb, marker)))
        assert int(progress[1]) == int(progress[2]) == expected
    pipeline = explorer_records(nb, PIPE_SWEEP)
    assert all(r["same as serial"] is True for r in pipeline), "a pipeline point differs from the serial run"


def claim_plots_are_present(nb: nbformat.NotebookNode) -> None:
    """The pipeline timeline and the launch-overhead plot were recorded as real images."""
    for marker in (TIMELINE_PLOT, OVERHEAD_PLOT):
        width, height = png_size(nb, marker)
        assert width >= 300 and height >= 150, (marker, width, height)


CLAIMS = [claim_pipeline_reaches_the_target, claim_pinned_beats_pageable, claim_only_pageable_calls_keep_the_host,
          claim_graph_beats_the_stream_chain, claim_explorers_hold_every_point, claim_plots_are_present]


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda f: f.__name__)
def test_recorded_run_supports(claim: Callable[[nbformat.NotebookNode], None], nb) -> None:
    claim(nb)


# ------------------------------------------------------------------------------------ the claims can fail

def _edit_stream(nb, marker: str, old: str, new: str) -> None:
    for out in cell_with(nb, marker).outputs:
        if out.get("output_type") == "stream" and old in out.text:
            out.text = out.text.replace(old, new, 1)
            return
    raise AssertionError(f"{old!r} is not in the output of the cell with {marker!r}")


def _regex_stream(nb, marker: str, pattern: str, repl: Callable[[re.Match[str]], str]) -> None:
    for out in cell_with(nb, marker).outputs:
        if out.get("output_type") == "stream" and re.search(pattern, out.text):
            out.text = re.sub(pattern, repl, out.text, count=1)
            return
    raise AssertionError(f"{pattern!r} is not in the output of the cell with {marker!r}")


def _slower_pipeline(nb) -> None:      # the pipelined time doubles (and so does the printed gap)
    _regex_stream(nb, MAIN_PIPELINE, rf"(chunks\) ){NUM}( ms)", lambda m: f"{m[1]}{2 * float(m[2]):.2f}{m[3]}")
    _regex_stream(nb, MAIN_PIPELINE, rf"{NUM}( % of the ideal speedup)", lambda m: f"{float(m[1]) / 2:.1f}{m[2]}")


def _slow_pinned_h2d(nb) -> None:      # the pinned H2D copy as slow as the pageable one, rate and ratio
    text = printed(nb, COPIES)
    pageable = re.search(rf"H2D pageable:\s*{NUM} GB/s \(\s*{NUM} ms", text)
    _regex_stream(nb, COPIES, rf"(H2D pinned\s*:\s*){NUM}( GB/s \(\s*){NUM}( ms)",
                  lambda m: f"{m[1]}{pageable[1]}{m[3]}{pageable[2]}{m[5]}")
    _regex_stream(nb, COPIES, rf"(H2D: pinned is ){NUM}x", lambda m: f"{m[1]}1.0x")


def _pinned_call_waits(nb) -> None:    # the pinned D2H call kept the host for the whole copy
    _regex_stream(nb, COPIES, rf"(D2H pinned .*?returned after\s+){NUM}( ms)", lambda m: f"{m[1]}9.000{m[3]}")


def _slow_graph(nb) -> None:           # the graph's longest chain of the small kernel costs 100x
    cell = cell_with(nb, LAUNCH_SWEEP)
    for out in cell.outputs:
        html = "".join(out.get("data", {}).get("text/html", ""))
        match = EXPLORER_DATA.search(html)
        if match:
            payload = json.loads(match.group(2))
            records = decode_columns(payload["data"])
            longest = max(r["chain"] for r in records)
            small = min(r["elements"] for r in records)
            for r in records:
                if (r["elements"], r["chain"], r["mode"]) == (small, longest, "graph"):
                    r["µs per kernel"] *= 100
            payload["data"] = encode_columns(records, list(payload["data"]["cols"]))
            out["data"]["text/html"] = html.replace(match.group(2), json.dumps(payload, separators=(",", ":")))
            return
    raise AssertionError("no explorer to edit")


def _bigger_grid(nb) -> None:          # the code asks for one more chunk count than the data hold
    cell = cell_with(nb, PIPE_SWEEP)
    cell.source = cell.source.replace("32, 64]", "32, 64, 128]", 1)
    assert "128]" in cell.source


def _missing_timeline(nb) -> None:
    cell = cell_with(nb, TIMELINE_PLOT)
    cell.outputs = [out for out in cell.outputs if "image/png" not in out.get("data", {})]


MUTATIONS = {claim_pipeline_reaches_the_target: _slower_pipeline, claim_pinned_beats_pageable: _slow_pinned_h2d,
             claim_only_pageable_calls_keep_the_host: _pinned_call_waits,
             claim_graph_beats_the_stream_chain: _slow_graph, claim_explorers_hold_every_point: _bigger_grid,
             claim_plots_are_present: _missing_timeline}


def test_every_claim_has_a_mutation() -> None:
    assert set(MUTATIONS) == set(CLAIMS)


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda f: f.__name__)
def test_each_claim_can_fail(claim, nb) -> None:
    changed = copy.deepcopy(nb)
    MUTATIONS[claim](changed)
    with pytest.raises(AssertionError):
        claim(changed)
