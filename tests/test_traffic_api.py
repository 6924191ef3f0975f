"""kernels.analyze as the chapters use it: kernels from load_kernel, the report, its pictures, its errors."""
from __future__ import annotations

import importlib.util
import io
import json

import numpy as np
import pytest

import kernels
from kernels.cpu import RawModule
from kernels.signature import KernelArgumentError
from kernels.traffic import TraceTooLarge, TrafficReport, capture

pytestmark = pytest.mark.skipif(importlib.util.find_spec("kernels.cpu") is None, reason="needs the CPU backend")


@pytest.fixture(autouse=True)
def cpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_BACKEND", "cpu")


@pytest.fixture(scope="module")
def strided() -> tuple:
    monkey = pytest.MonkeyPatch()
    monkey.setenv("COURSE_BACKEND", "cpu")
    k = kernels.load_kernel("coalescing/access_patterns.cu", "copy_strided")
    n, s = 2048, 2
    x = np.arange((n - 1) * s + 1, dtype=np.float32)
    y = np.zeros(n, np.float32)
    report = kernels.analyze(k, n // 256, 256, (x, y, n, s))
    monkey.undo()
    return k, report, x, y


def test_analyze_is_exported_and_runs_the_kernel(strided):
    k, report, x, y = strided
    assert isinstance(report, TrafficReport)
    np.testing.assert_array_equal(y, x[::2])  # the traced build computes what the kernel computes
    m = report.metrics()
    assert m["global_load_requests"] == 64 and m["global_load_sectors"] == 64 * 8
    assert m["global_store_sectors"] == 64 * 4


def test_per_line_table_and_advice(strided):
    _k, report, _x, _y = strided
    rows = {(r["names"], r["op"]): r for r in report.table("global")}
    load = rows[("x", "load")]
    assert load["line"] == 20 and load["function"] == "copy_strided" and load["file"] == "coalescing/access_patterns.cu"
    assert load["sectors_per_request"] == 8 and load["ideal_sectors_per_request"] == 4
    assert load["efficiency"] == 0.5 and load["bytes_moved"] == 2 * load["bytes_requested"]
    assert report.advice() == ["line 20 (x, load): 8 sectors per request where 4 suffice, 50 % of the bytes moved "
                               "are used; consecutive lanes are 8 bytes apart"]


def test_text_html_and_dict(strided):
    _k, report, _x, _y = strided
    text = str(report)
    assert "copy_strided (coalescing/access_patterns.cu)" in text and "8 per request" in text
    assert "races: 0 found" in text and "per thread (mean): global reads 1, global writes 1" in text
    html = report._repr_html_()
    assert "<table>" in html and "sectors/request" in html and "No data races" in html
    assert json.loads(json.dumps(report.to_dict()))["metrics"]["global_load_sectors"] == 512


def test_thread_counts(strided):
    _k, report, _x, _y = strided
    counts = report.thread_counts()
    assert counts["global_reads"].shape == (8, 256) and (counts["global_reads"] == 1).all()
    assert (counts["global_writes"] == 1).all() and not counts["shared_reads"].any()


def test_pictures_are_figures(strided):
    _k, report, _x, _y = strided
    for figure in (report.plot_warp(20, op="load"), report.plot_sectors(), report.plot_threads()):
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=50)
        assert buffer.getvalue().startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="no shared"):
        report.plot_banks()
    with pytest.raises(ValueError, match="no array argument named 'z'"):
        report.plot_threads("z")


def test_thread_map_of_a_short_array_is_readable():
    """Panels of a 1-D array are stacked, not strung out in a thin strip: the page shows the figure at
    its own width (about 5.6 inches here), with thread labels and element numbers large enough to read."""
    add = kernels.load_kernel("gpu_architecture/vector_add.cu", "vector_add")
    x, y, out = np.arange(12, dtype=np.float32), np.ones(12, np.float32), np.zeros(12, np.float32)
    figure = kernels.analyze(add, 2, 8, (x, y, out, 12)).plot_threads(block=1)
    width, height = figure.get_size_inches()
    assert len(figure.axes) == 3 and width <= 8 and height >= 3
    assert [ax.get_title() for ax in figure.axes] == ["x: read by", "y: read by", "out: written by"]
    labels = [t for ax in figure.axes for t in ax.texts]
    assert sorted(t.get_text() for t in labels) == sorted(["0", "1", "2", "3"] * 3)  # threads 0-3 of block 1
    assert min(t.get_fontsize() for t in labels) >= 8
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == [str(e) for e in range(12)]


def test_shared_memory_names_and_bank_picture():
    k = kernels.load_kernel("reduce/tree.cu", "reduce_interleaved_strided")
    x = np.ones(512, np.float32)
    partial = np.zeros(2, np.float32)
    report = kernels.analyze(k, 2, 256, (x, partial, 512), shared_mem=1024)
    assert partial.tolist() == [256.0, 256.0]
    shared = [r for r in report.lines if r.space == "shared"]
    assert {r.names for r in shared} == {"buf"} and max(r.max_ways for r in shared) == 8
    assert any("8-way bank conflict" in a for a in report.advice())
    figure = report.plot_banks(op="load", index=2)
    assert "wavefronts" in figure.axes[0].get_title()


def test_constant_memory_and_module_variables():
    code = open(kernels.sources.resolve("memory_hierarchy/constant_table.cu")).read()
    module = RawModule(code=code, options=("-std=c++17",), filename="memory_hierarchy/constant_table.cu")
    table = np.arange(256, dtype=np.float32)
    module.get_global("table_c").copy_from_host(table, table.nbytes)
    kernel = module.get_function("lookup_constant")
    out = np.zeros(64, np.float32)
    report = kernels.analyze(kernel, 1, 64, (np.int32(4), np.int32(2), out))
    assert out[0] == table[0] + table[1]  # the traced build saw the table set on the module
    m = report.metrics()
    assert m["constant_load_requests"] == 2 * 2 and m["constant_load_distinct_words"] == 4 * 4
    assert m["global_load_requests"] == 0


def test_launches_inside_capture_are_recorded_and_normal_ones_are_not(strided):
    k, _report, x, y = strided
    with capture() as recorded:
        k(8, 256, (x, y, 2048, 2))
    assert len(recorded.recordings) == 1 and recorded.recordings[0].kernel == "copy_strided"
    assert not k.raw.module._module.path.samefile(_traced_path(k))
    k(8, 256, (x, y, 2048, 2))  # a normal launch: the normal build, nothing recorded
    assert len(recorded.recordings) == 1


def _traced_path(k):
    from kernels.traffic.record import KernelSource, traced_module

    return traced_module(KernelSource.of(k.raw)).path


def test_clear_errors():
    k = kernels.load_kernel("coalescing/access_patterns.cu", "copy_offset")
    x, y = np.zeros(300, np.float32), np.zeros(256, np.float32)
    with pytest.raises(TypeError, match="analyze needs a kernel from kernels.load_kernel"):
        kernels.analyze("copy_offset", 1, 256, (x, y, 256, 1))
    with pytest.raises(KernelArgumentError, match="copy_offset"):
        kernels.analyze(k, 1, 256, (x, y, 256))
    with pytest.raises(kernels.compile.LaunchConfigError, match="1025"):
        kernels.analyze(k, 1, 1025, (x, y, 256, 1))
    with pytest.raises(ValueError, match="warp_fences"):
        kernels.analyze(k, 1, 256, (x, y, 256, 1), warp_fences="sometimes")
    with pytest.raises(TraceTooLarge, match="more than 100 global and shared memory accesses"):
        kernels.analyze(k, 1, 256, (x, y, 256, 1), max_accesses=100)


class _DeviceArray:
    """Stands in for a CuPy array: the analysis copies such arrays to the host with .get()."""

    def __init__(self, host: np.ndarray):
        self.host = host
        self.shape, self.dtype = host.shape, host.dtype

    def get(self) -> np.ndarray:
        return self.host.copy()


def test_a_gpu_kernel_is_analysed_on_the_cpu_backend():
    from kernels.compile import Kernel
    from kernels.signature import parse_signature

    code = kernels.source("coalescing/access_patterns.cu")
    gpu_kernel = Kernel("copy_offset", code, parse_signature(code, "copy_offset"), raw=None, backend="cupy")
    x = _DeviceArray(np.arange(257, dtype=np.float32))
    report = kernels.analyze(gpu_kernel, 1, 256, (x, _DeviceArray(np.zeros(256, np.float32)), 256, 1))
    assert report.recording.filename == "coalescing/access_patterns.cu"  # found by its text
    assert report.metrics()["global_load_sectors"] == 8 * 5  # 8 warps, 5 sectors each from x + 1
