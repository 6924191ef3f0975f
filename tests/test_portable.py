"""One chapter cell for both backends: the size and GPU-only helpers, and what the package's
measuring tools do on the CPU backend (they run, and every number they produce says it is a CPU
timing, not a GPU measurement)."""
from __future__ import annotations

import io
import re
from contextlib import redirect_stdout
from typing import Any, Callable

import numpy as np
import pytest

import kernels
from kernels import backend, notebook_setup, timing
from kernels.ceilings import Ceilings, ceilings, cpu_copy_gbps, cpu_fma_tflops
from kernels.device import CPU_BACKEND_NAME, cpu_backend_info
from kernels.sweep import Sweep


@pytest.fixture
def cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU backend, and a fresh 'once per cell' state for the CPU-timing note."""
    monkeypatch.setenv(backend.ENV_VAR, "cpu")
    monkeypatch.setattr(timing.note_cpu_timing, "noted", False)


def printed(fn: Callable[[], Any]) -> tuple[Any, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        value = fn()
    return value, out.getvalue()


# --------------------------------------------------------------------------- the helpers


def test_problem_size_and_on_gpu_follow_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(backend.ENV_VAR, "cpu")
    assert kernels.on_gpu() is False
    assert kernels.problem_size(gpu=2**26, cpu=2**16) == 2**16
    assert kernels.problem_size(gpu=[1, 2, 4], cpu=[1]) == [1]
    monkeypatch.setenv(backend.ENV_VAR, "cupy")  # asking for the GPU needs no GPU to answer this
    assert kernels.on_gpu() is True
    assert kernels.problem_size(gpu=2**26, cpu=2**16) == 2**26


def test_gpu_only_says_why_a_cell_is_skipped_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(backend.ENV_VAR, "cpu")
    runs, text = printed(lambda: kernels.gpu_only("CUDA graphs are replayed by the GPU's driver."))
    assert runs is False
    assert text == ("This cell measures the GPU; on the CPU backend it is skipped: "
                    "CUDA graphs are replayed by the GPU's driver.\n")
    monkeypatch.setenv(backend.ENV_VAR, "cupy")
    runs, text = printed(lambda: kernels.gpu_only("anything"))
    assert runs is True and text == ""


# --------------------------------------------------------------------------- timing on the CPU


def test_benchmark_on_the_cpu_times_the_call_with_the_host_clock(cpu: None) -> None:
    calls = []
    timing_, text = printed(lambda: kernels.benchmark(lambda: calls.append(1), warmup=3, repeat=30))
    assert isinstance(timing_, kernels.Timing)
    assert timing_.clock == timing.CPU_BACKEND and timing_.on_cpu_backend
    assert timing_.n == timing.CPU_MAX_REPEAT                    # fewer repetitions: nothing to gain
    assert len(calls) == timing.CPU_MAX_WARMUP + timing.CPU_MAX_REPEAT
    assert text.count(timing.CPU_TIMING_NOTE) == 1


def test_cpu_benchmark_reports_the_median_of_what_the_clock_says(cpu: None) -> None:
    ticks = iter([0.0, 0.002, 1.0, 1.004, 2.0, 2.003])           # 2 ms, 4 ms, 3 ms
    t = timing.cpu_benchmark(lambda: None, warmup=0, repeat=3, clock=lambda: next(ticks))
    np.testing.assert_allclose(t.samples_ms, [2.0, 4.0, 3.0])
    assert t.median_ms == pytest.approx(3.0)
    assert kernels.gbps(3e6, t) == pytest.approx(1.0)             # the arithmetic is the same


def test_a_cpu_timing_says_so_when_printed(cpu: None) -> None:
    gpu = timing.Timing([1.0, 2.0, 3.0])
    assert gpu.clock == timing.CUDA_EVENTS and "CPU" not in str(gpu)
    on_cpu = timing.Timing([1.0, 2.0, 3.0], clock=timing.CPU_BACKEND)
    assert str(on_cpu) == f"{str(gpu)} [{timing.CPU_TIMING_LABEL}]"


def test_host_timer_on_the_cpu(cpu: None) -> None:
    t, text = printed(lambda: timing.host_timer(lambda: None, sync=True, warmup=0, repeat=3))
    assert t.clock == timing.CPU_BACKEND and t.n == 3 and timing.CPU_TIMING_NOTE in text
    # a host measurement of host work (its own synchronize) is a real CPU measurement: no label
    timing.note_cpu_timing.noted = False
    t, text = printed(lambda: timing.host_timer(lambda: None, sync=True, repeat=3, synchronize=lambda: None))
    assert t.clock == timing.HOST_CLOCK and text == ""


class FakeShell:
    """Stands in for IPython: records the pre_run_cell callbacks."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[..., None]] = []
        self.events = self

    def register(self, event: str, callback: Callable[..., None]) -> None:
        assert event == "pre_run_cell"
        self.callbacks.append(callback)

    def next_cell(self) -> None:
        for callback in self.callbacks:
            callback(object())  # IPython passes an ExecutionInfo


def test_the_note_is_printed_once_per_notebook_cell(cpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    shell = FakeShell()
    monkeypatch.setattr(timing, "_ipython", lambda: shell)
    monkeypatch.setattr(timing.note_cpu_timing, "hooked_shell", None)
    t = timing.Timing([1.0], clock=timing.CPU_BACKEND)

    def cell() -> str:
        return printed(lambda: (t.median_ms, kernels.gbps(1e6, t), str(t)))[1]

    assert cell().count(timing.CPU_TIMING_NOTE) == 1
    assert cell() == ""                              # the same cell again: already said
    shell.next_cell()
    assert cell().count(timing.CPU_TIMING_NOTE) == 1
    assert len(shell.callbacks) == 1                 # hooked once


def test_what_a_cell_lacks_is_said_once_per_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernels import portable

    shell = FakeShell()
    monkeypatch.setattr(timing, "_ipython", lambda: shell)
    monkeypatch.setattr(portable.say_once_per_cell, "hooked_shell", None)
    monkeypatch.setattr(portable.say_once_per_cell, "said", set())

    def cell() -> str:
        return printed(lambda: [portable.missing("torch", "pip install torch", "the CuPy version is the yardstick.")
                                for _ in range(3)])[1]

    line = "This cell needs torch, which is not installed here (pip install torch); the CuPy version is the yardstick.\n"
    assert cell() == line                            # one line for three calls
    assert cell() == ""                              # the same cell again: already said
    shell.next_cell()
    assert cell() == line
    assert len(shell.callbacks) == 1


# --------------------------------------------------------------------------- ceilings and the device


def test_ceilings_on_the_cpu_are_the_processors_and_say_so(cpu: None) -> None:
    c = ceilings()
    assert c is ceilings()                           # measured once
    assert c.backend == "cpu" and c.on_cpu_backend and c.device == CPU_BACKEND_NAME
    assert c.copy_gbps > 0.1 and 0 < c.fma_tflops < 10  # a processor, not a GPU
    text = str(c)
    assert "not a GPU measurement" in text and "this computer's processor" in text
    assert re.search(r"FP32 FMA \d+\.\d GFLOP/s", text)  # GFLOP/s: TFLOP/s would read 0.0
    assert "not a GPU measurement" in c._repr_html_()
    timing.note_cpu_timing.noted = False
    _, text = printed(lambda: c.copy_gbps * 2)        # a cell that uses them is labelled
    assert timing.CPU_TIMING_NOTE in text


def test_gpu_ceilings_text_is_unchanged() -> None:
    c = Ceilings(device="Test GPU", copy_gbps=3000.0, fma_tflops=60.0, measured="2026-01-01")
    assert str(c) == "Test GPU: copy 3000 GB/s, FP32 FMA 60.0 TFLOP/s (measured 2026-01-01)"


def test_cpu_measurements_are_plausible() -> None:
    assert cpu_copy_gbps(nbytes=1 << 20, repeat=3) > 0.1
    assert 0 < cpu_fma_tflops(elements=1024, rounds=4, repeat=3) < 10


def test_device_info_describes_the_cpu_backend(cpu: None) -> None:
    info = kernels.device_info()
    assert info is cpu_backend_info() and info.on_cpu_backend
    assert info.name == CPU_BACKEND_NAME
    assert (info.sm_count, info.warp_size, info.max_threads_per_block, info.max_blocks_per_sm) == (1, 32, 1024, 1)
    assert info.regs_per_sm is None and info.regs_per_block is None and info.sm_clock_khz is None
    assert info.theoretical_dram_gbps is None and info.async_engine_count == 0
    from kernels.cpu.raw import CPU_LIMITS

    assert info.shared_per_block_optin == CPU_LIMITS.max_shared_optin
    assert info.compute_capability == "8.0"            # what the runtime compiles for: __CUDA_ARCH__ 800
    assert info.memory_bytes > 2**28
    rows = dict(info.table().rows)
    assert rows["timings"] == "CPU timings: not GPU measurements"
    assert rows["32-bit registers"].startswith("none")
    assert "CPU backend" in info._repr_html_()


def test_provenance_still_needs_a_gpu(cpu: None) -> None:
    with pytest.raises(kernels.NoGPUError):
        kernels.provenance()


# --------------------------------------------------------------------------- the setup cell's report


def test_report_without_a_gpu_says_the_cpu_backend_runs_the_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(backend.ENV_VAR, raising=False)
    monkeypatch.setattr(backend, "_probe", lambda: (False, "CuPy could not be imported"))
    _, text = printed(notebook_setup.report)
    assert text.startswith("No CUDA GPU is available here (CuPy could not be imported).")
    assert "This notebook runs on the CPU backend" in text and "every result is checked" in text
    assert "CPU timings, not GPU measurements" in text
    assert "Runtime > Change runtime type > T4 GPU" in text


def test_report_with_the_cpu_backend_forced_on_a_gpu_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(backend.ENV_VAR, "cpu")
    monkeypatch.setattr(backend, "_probe", lambda: (True, ""))
    _, text = printed(notebook_setup.report)
    assert text.startswith("COURSE_BACKEND=cpu is set, so the GPU is not used.")
    assert "runs on the CPU backend" in text and "Unset COURSE_BACKEND" in text


def test_report_when_the_gpu_is_insisted_on_but_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(backend.ENV_VAR, "cupy")
    monkeypatch.setattr(backend, "_probe", lambda: (False, "CuPy found no CUDA device"))
    _, text = printed(notebook_setup.report)
    assert "No CUDA GPU" in text and "CPU backend" not in text


# --------------------------------------------------------------------------- sweeps and plots


def test_a_sweep_timed_on_the_cpu_is_labelled(cpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def measure(n: int) -> dict:
        t = kernels.benchmark(lambda: None, warmup=0, repeat=2)
        return {"GB/s": kernels.gbps(n, t)}

    sweep = Sweep("copy", {"n": [10, 20]}, measure, x="n", y="GB/s")
    _, text = printed(lambda: sweep.run(progress=False))
    assert sweep.cpu_timed and timing.CPU_TIMING_NOTE in text
    assert sweep.summary().endswith(timing.CPU_TIMING_LABEL)
    assert "Measured on the CPU backend" in sweep.explorer().caption
    timing.note_cpu_timing.noted = False
    _, text = printed(lambda: sweep.records)           # a cell that reads the numbers is labelled
    assert timing.CPU_TIMING_NOTE in text


def test_a_sweep_that_times_nothing_is_not_labelled(cpu: None) -> None:
    sweep = Sweep("model", {"n": [1, 2]}, lambda n: {"y": 2.0 * n}, x="n", y="y")
    _, text = printed(lambda: (sweep.run(progress=False), sweep.records))
    assert not sweep.cpu_timed and text == ""
    assert timing.CPU_TIMING_LABEL not in sweep.summary()
    assert "CPU backend" not in sweep.explorer().caption


def test_roofline_of_cpu_ceilings_is_labelled(cpu: None) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from kernels.roofline import RooflinePoint, roofline_plot

    cpu_ceilings = Ceilings(device=CPU_BACKEND_NAME, copy_gbps=20.0, fma_tflops=0.01, backend="cpu")
    fig = roofline_plot(cpu_ceilings, [RooflinePoint("k", 1e6, 1e6, 1e-3)])
    labels = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "cpu-backend-label"]
    assert labels == [timing.CPU_TIMING_LABEL]
    gpu_ceilings = Ceilings(device="GPU", copy_gbps=3000.0, fma_tflops=60.0)
    fig = roofline_plot(gpu_ceilings, [RooflinePoint("k", 1e6, 1e6, 1e-6)])
    assert not [t for t in fig.axes[0].texts if t.get_gid() == "cpu-backend-label"]


# --------------------------------------------------------------------------- the array module


def test_xp_has_what_the_chapters_use(cpu: None) -> None:
    xp = kernels.array_module()
    a = xp.zeros(10, dtype=xp.float32)
    assert a.data.ptr == a.__array_interface__["data"][0] and a.data.ptr % 16 == 0
    assert a[1:].data.ptr == a.data.ptr + 4                 # the alignment check of copy_vec4 works
    null = xp.cuda.Stream.null
    assert xp.cuda.get_current_stream() is null
    stream = xp.cuda.Stream(non_blocking=True)
    with stream:
        assert xp.cuda.get_current_stream() is stream
    assert xp.cuda.get_current_stream() is null
    host = np.arange(10, dtype=np.float32)
    xp.cuda.runtime.memcpyAsync(a.data.ptr, host.ctypes.data, host.nbytes, xp.cuda.runtime.memcpyHostToDevice,
                                null.ptr)
    np.testing.assert_array_equal(a.get(), host)
    assert a.device.id == 0
