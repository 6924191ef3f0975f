"""CPU tests of the "Asynchrony" chapter: its kernels compile for the T4 (sm_75) and the H100 (sm_90)
with NVRTC, its helpers compute what the prose says, its figures draw, and the chapter loads only its
own kernels (and never triggers a sticky CUDA error in its own process). What every chapter promises
is checked in tests/test_chapter_contract.py.
"""
from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from kernels.chapters import asynchrony as ay  # noqa: E402
from kernels.nvrtc import compile_cuda, nvrtc_available  # noqa: E402
from kernels.sources import source  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "asynchrony.md"
KERNEL_DIR = ROOT / "kernels" / "cuda" / "asynchrony"
ARCHS = ["sm_75", "sm_90"]
KERNELS = {"fma_chain.cu": "fma_chain", "add_one.cu": "add_one",
           "affine_from_buffer.cu": "affine_from_buffer", "gather.cu": "gather"}

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


def code_cells(path: Path = CHAPTER) -> list[str]:
    import jupytext

    return [cell.source for cell in jupytext.read(path).cells if cell.cell_type == "code"]


# ------------------------------------------------------------------------------------ kernels

def test_every_kernel_file_is_listed():
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cu")) == sorted(KERNELS)


@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_kernels_are_extern_c_and_use_nvrtc_friendly_types(filename):
    code = source(f"asynchrony/{filename}")
    assert f'extern "C" __global__ void {KERNELS[filename]}(' in code
    assert "#include" not in code and "int64_t" not in code and "size_t" not in code


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_kernels_compile_without_local_memory(filename, arch):
    name = KERNELS[filename]
    result = compile_cuda(source(f"asynchrony/{filename}"), arch, (), (name,),
                          filename=f"asynchrony/{filename}").raise_for_errors()
    r = result.resources[name]
    assert r.stack_frame_bytes == 0 and not r.spills, r


@needs_nvrtc
def test_fma_chain_loop_is_a_chain_of_fmas():
    """The compute stage really does FMAs in its loop (fma.rn.f32 in the PTX), unrolled by 8."""
    ptx = compile_cuda(source("asynchrony/fma_chain.cu"), "sm_90", (), ("fma_chain",), filename="x.cu").ptx
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert len(re.findall(r"\bfma\.rn\.f32\b", ptx)) >= 8


def test_affine_reads_its_coefficients_from_memory():
    code = source("asynchrony/affine_from_buffer.cu")
    assert "coeffs[0]" in code and "coeffs[1]" in code


# ------------------------------------------------------------------------------------ helpers

@pytest.mark.parametrize("n,chunks", [(1, 1), (10, 3), (1_000_003, 16), (64 * 2**20, 64), (7, 7)])
def test_chunk_bounds_cover_everything_once(n, chunks):
    bounds = ay.chunk_bounds(n, chunks)
    assert len(bounds) == chunks and bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    sizes = [b - a for a, b in bounds]
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


@pytest.mark.parametrize("n,chunks", [(0, 1), (5, 0), (5, 6)])
def test_chunk_bounds_reject_nonsense(n, chunks):
    with pytest.raises(ValueError):
        ay.chunk_bounds(n, chunks)


def test_ideal_pipeline():
    stages = {"H2D": 10.0, "kernel": 12.0, "D2H": 10.0}
    assert ay.ideal_pipeline_ms(stages, 1) == pytest.approx(32.0)          # one chunk: serial
    assert ay.ideal_pipeline_ms(stages, 16) == pytest.approx(12.0 + 20.0 / 16)
    assert ay.ideal_pipeline_ms([5.0, 5.0, 5.0], 4) == pytest.approx(5.0 + 10.0 / 4)
    # many chunks: the slowest stage alone
    assert ay.ideal_pipeline_ms(stages, 10**9) == pytest.approx(12.0)
    with pytest.raises(ValueError):
        ay.ideal_pipeline_ms(stages, 0)
    with pytest.raises(ValueError):
        ay.ideal_pipeline_ms([], 4)


def test_pipeline_summary():
    s = ay.pipeline_summary(32.0, 14.0, {"H2D": 10.0, "kernel": 12.0, "D2H": 10.0}, 16)
    assert s["ideal_ms"] == pytest.approx(13.25)
    assert s["speedup"] == pytest.approx(32 / 14)
    assert s["ideal speedup"] == pytest.approx(32 / 13.25)
    assert s["% of ideal"] == pytest.approx(100 * 13.25 / 14)
    with pytest.raises(ValueError):
        ay.pipeline_summary(0.0, 1.0, [1.0], 1)


def test_pcie_numbers_in_the_prose():
    # "about 16 GB/s per direction" for Gen3 x16 (T4); Gen5 x16 is four times that.
    assert round(ay.pcie_gbps(3, 16)) == 16
    assert ay.pcie_gbps(5, 16) == pytest.approx(4 * ay.pcie_gbps(3, 16))
    assert ay.pcie_gbps(4, 16) == pytest.approx(31.5, abs=0.1)
    assert ay.pcie_gbps(1, 1) == pytest.approx(0.25)
    with pytest.raises(ValueError):
        ay.pcie_gbps(7)
    with pytest.raises(ValueError):
        ay.pcie_gbps(4, 3)


def _fake_intervals():
    # 2 streams, 3 chunks: H2D bars that overlap in time (stream reached it before the engine was free)
    return [
        {"stream": 0, "chunk": 0, "stage": "H2D", "start": 0.0, "end": 1.0},
        {"stream": 0, "chunk": 0, "stage": "kernel", "start": 1.0, "end": 2.2},
        {"stream": 0, "chunk": 0, "stage": "D2H", "start": 2.2, "end": 3.2},
        {"stream": 1, "chunk": 1, "stage": "H2D", "start": 0.0, "end": 2.0},
        {"stream": 1, "chunk": 1, "stage": "kernel", "start": 2.2, "end": 3.4},
        {"stream": 1, "chunk": 1, "stage": "D2H", "start": 3.4, "end": 4.4},
        {"stream": 0, "chunk": 2, "stage": "H2D", "start": 3.2, "end": 4.2},
        {"stream": 0, "chunk": 2, "stage": "kernel", "start": 4.2, "end": 5.4},
        {"stream": 0, "chunk": 2, "stage": "D2H", "start": 5.4, "end": 6.4},
    ]


def test_engine_view_clips_waiting_time():
    view = ay.engine_view(_fake_intervals())
    h2d = sorted((r["start"], r["end"]) for r in view if r["stage"] == "H2D")
    assert h2d == [(0.0, 1.0), (1.0, 2.0), (3.2, 4.2)]       # chunk 1 waited for chunk 0's copy
    for stage in ay.STAGES:                                  # no two bars of a stage overlap
        bars = sorted((r["start"], r["end"]) for r in view if r["stage"] == stage)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(bars, bars[1:]))
    assert [r["stage"] for r in view][:3] == ["H2D"] * 3     # ordered by stage
    busy = ay.stage_busy_ms(_fake_intervals())
    assert busy["H2D"] == pytest.approx(3.0) and busy["kernel"] == pytest.approx(3.6)


def test_intervals_from_events_with_a_fake_clock():
    clock = {"t0": 0.0, "a": 0.5, "b": 1.25}
    out = ay.intervals_from_events([(1, 4, "H2D", "a", "b")], "t0", elapsed_ms=lambda s, e: clock[e] - clock[s])
    assert out == [{"stream": 1, "chunk": 4, "stage": "H2D", "start": 0.5, "end": 1.25}]


def test_timeline_plot_draws_and_closes(tmp_path):
    before = set(plt.get_fignums())
    fig = ay.timeline_plot(_fake_intervals(), "test")
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert set(plt.get_fignums()) == before
    fig.savefig(tmp_path / "t.png", dpi=40)
    assert (tmp_path / "t.png").stat().st_size > 1000
    assert len(ay.timeline_plot(_fake_intervals(), engines=False).axes) == 1
    with pytest.raises(ValueError):
        ay.timeline_plot([])


def test_launch_overhead_plot(tmp_path):
    records = [{"elements": e, "chain": c, "mode": m, "µs per kernel": 10.0 / c + (1 if m == "graph" else 5)}
               for e in (1000, 4194304) for c in (1, 2, 4, 256) for m in ("stream", "graph")]
    records.append({"elements": 1000, "chain": 8, "mode": "graph", "note": "RuntimeError: no capture"})
    fig = ay.launch_overhead_plot(records, title="t")
    assert len(fig.axes) == 2
    fig.savefig(tmp_path / "l.png", dpi=40)
    with pytest.raises(ValueError):
        ay.launch_overhead_plot([{"chain": 1, "mode": "graph"}])


def test_timeline_panel_without_widgets_shows_the_fallback(monkeypatch):
    """Without ipywidgets the panel falls back to the recorded HTML, as one output."""
    import builtins

    shown = []
    monkeypatch.setattr("kernels.sweep.display_live", lambda w, html, text="": shown.append((w, html, text)))
    real_import = builtins.__import__

    def no_widgets(name, *args, **kwargs):
        if name == "ipywidgets":
            raise ImportError("no ipywidgets")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_widgets)
    ay.timeline_panel(None, [1, 2], [1, 4], {}, fallback_html="<p>recorded</p>", text="t")
    assert shown == [(None, "<p>recorded</p>", "t")]
    with pytest.raises(ValueError):
        ay.timeline_panel(None, [1], [1], {})


def _live_panel(monkeypatch, measure, timelines, start=(1, 1), gpu=True):
    """Build the ipywidgets panel with a fake GPU and fake drawing; return its widgets and logs."""
    pytest.importorskip("ipywidgets")
    shown, drawn, displayed = [], [], []
    monkeypatch.setattr("kernels.sweep.display_live", lambda w, html, text="": shown.append((w, html, text)))
    monkeypatch.setattr("kernels.backend.gpu_available", lambda: gpu)

    def fake_plot(intervals, title="", engines=True):
        drawn.append((intervals, title))
        return f"figure {len(drawn)}"

    monkeypatch.setattr(ay, "timeline_plot", fake_plot)
    monkeypatch.setattr("IPython.display.display", lambda *objs, **kw: displayed.extend(objs))
    ay.timeline_panel(measure, [1, 2, 3, 4], [1, 2, 4, 8], timelines, fallback_html="<p>recorded</p>",
                      text="t", start=start)
    assert len(shown) == 1
    panel, html, text = shown[0]
    assert html == "<p>recorded</p>" and text == "t" and panel is not None
    import ipywidgets as w

    def find(kind):
        found, todo = [], list(panel.children)
        while todo:
            child = todo.pop(0)
            if isinstance(child, kind):
                found.append(child)
            todo += list(getattr(child, "children", ()))
        return found

    (s_ctl, c_ctl), (button,), (status,) = find(w.SelectionSlider), find(w.Button), find(w.Label)
    return {"streams": s_ctl, "chunks": c_ctl, "button": button, "status": status,
            "drawn": drawn, "displayed": displayed}


def test_timeline_panel_measure_button_measures_the_sliders_point_and_redraws(monkeypatch):
    """With ipywidgets: a click measures the point the sliders select, stores it, and redraws."""
    recorded = _fake_intervals()
    timelines = {(1, 1): (recorded[:3], {"time_ms": 3.2, "speedup": 1.0})}
    new = [dict(r, start=r["start"] / 2, end=r["end"] / 2) for r in recorded]
    calls = []

    def measure(streams, chunks):
        calls.append((streams, chunks))
        return new, {"time_ms": 3.2, "speedup": 2.0, "% of ideal": 95.0}

    p = _live_panel(monkeypatch, measure, timelines)
    assert not p["button"].disabled and (p["streams"].value, p["chunks"].value) == (1, 1)
    assert p["drawn"] == [(recorded[:3], "1 stream(s), 1 chunk(s), 3.20 ms, speedup 1.00x")]

    p["streams"].value, p["chunks"].value = 3, 8             # no timeline for (3, 8) yet: nothing drawn
    assert len(p["drawn"]) == 1 and calls == []
    p["button"].click()                                      # what a click in the notebook does
    assert calls == [(3, 8)]
    assert timelines[(3, 8)] == (new, {"time_ms": 3.2, "speedup": 2.0, "% of ideal": 95.0})
    title = "3 stream(s), 8 chunk(s), 3.20 ms, speedup 2.00x, 95 % of the ideal speedup"
    assert p["drawn"][-1] == (new, title) and len(p["drawn"]) == 2
    assert p["displayed"][-1] == "figure 2"                  # the new figure went into the output
    assert p["status"].value == title and not p["button"].disabled

    p["streams"].value = 1                                   # (1, 8): not measured, nothing drawn
    assert len(p["drawn"]) == 2
    p["chunks"].value = 1                                    # moving a slider redraws a stored point
    assert p["drawn"][-1] == p["drawn"][0] and len(p["drawn"]) == 3 and calls == [(3, 8)]


def test_timeline_panel_reports_a_failed_measurement_and_stays_usable(monkeypatch):
    def measure(streams, chunks):
        raise RuntimeError("out of memory")

    timelines = {}
    p = _live_panel(monkeypatch, measure, timelines, start=(2, 4))
    p["button"].click()
    assert p["status"].value == "failed: RuntimeError: out of memory"
    assert not p["button"].disabled and timelines == {} and p["drawn"] == []


def test_timeline_panel_without_a_gpu_cannot_measure(monkeypatch):
    p = _live_panel(monkeypatch, lambda s, c: pytest.fail("measured without a GPU"), {}, gpu=False)
    assert p["button"].disabled and p["status"].value.startswith("No GPU here")


# ------------------------------------------------------------------------------------ the chapter

def test_chapter_loads_only_its_own_kernels_and_the_shared_sleep():
    cells = "\n".join(code_cells())
    paths = set(re.findall(r'"((?:asynchrony|common)/[\w.]+\.cu)"', cells))
    assert paths == {"asynchrony/fma_chain.cu", "asynchrony/add_one.cu", "asynchrony/affine_from_buffer.cu",
                     "asynchrony/gather.cu", "common/gpu_sleep.cu"}


def test_sticky_error_only_in_a_subprocess():
    """The wild index appears only inside the script that runs in a separate process."""
    cells = code_cells()
    wild = [i for i, c in enumerate(cells) if "1 << 40" in c]
    assert len(wild) == 1
    cell = cells[wild[0]]
    assert "SCRIPT = '''" in cell and "subprocess.run([sys.executable" in cell
    script = cell.split("SCRIPT = '''", 1)[1].split("'''", 1)[0]
    assert "1 << 40" in script
    outside = cell.replace(script, "")
    assert "1 << 40" not in outside


def test_pipeline_is_checked_against_the_serial_result():
    cells = "\n".join(code_cells())
    assert "np.array_equal(h_out, serial_result)" in cells
    assert "% of ideal" in cells and "pipeline_summary" in cells


def test_chapter_benchmarks_are_small():
    text = "\n".join(code_cells())
    for m in re.finditer(r"benchmark\(([^\n]*)", text):
        repeat = re.search(r"repeat=(\w+)", m.group(1))
        assert repeat and (repeat.group(1) == "repeat" or int(repeat.group(1)) <= 10), m.group(0)
