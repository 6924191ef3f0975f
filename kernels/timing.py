"""Timing GPU work the way the course reports it: CUDA events, warm-up, L2 flushed, median.

A GPU runs asynchronously from Python, so a host clock around a launch measures only how long it
took to *queue* the work. CUDA events are timestamps written by the GPU itself into the stream,
so the time between two of them is the time the GPU spent on what was queued in between.

The statistics (`Timing`) and the measurement loop (`benchmark`) know nothing about CUDA: the loop
talks to an `EventSource`, which the tests replace with a fake. `CupyEvents` is the real one.

On the CPU backend (no GPU) `benchmark` times the call with the host clock instead, so that chapter
cells still run; such a `Timing` has ``clock == CPU_BACKEND``, says so when printed, and every
notebook cell that makes or uses one prints `CPU_TIMING_NOTE` once: a kernel's time on the CPU
backend says nothing about its time on a GPU.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

# The L2 flush buffer is at least this many times the L2 size, so that none of the kernel's
# data can still be in L2 when the next repetition starts.
FLUSH_FACTOR = 2
_MIN_FLUSH_BYTES = 8 << 20
# Before each start event the GPU is kept busy this long, so Python can queue the timed work
# before the start event fires (see kernels/cuda/common/gpu_sleep.cu).
LEAD_IN_US = 200
SLEEP_SOURCE = "common/gpu_sleep.cu"

# What measured a Timing (its ``clock``).
CUDA_EVENTS = "CUDA events"
HOST_CLOCK = "host clock"
CPU_BACKEND = "CPU backend"
# On the CPU backend the numbers mean nothing for a GPU, so a few repetitions are enough.
CPU_MAX_WARMUP = 1
CPU_MAX_REPEAT = 5
CPU_TIMING_LABEL = "CPU backend: not a GPU measurement"
CPU_TIMING_NOTE = ("[CPU backend] The times and speeds in this cell were measured on this computer's "
                   "processor, not on a GPU: they say nothing about how fast a GPU runs these kernels.")


@dataclass(frozen=True, eq=False)  # eq would compare arrays elementwise
class Timing:
    """Per-repetition times in milliseconds and the robust statistics of them.

    The median is reported (not the mean) because GPU timings have a long right tail: a clock
    change or another process can make one repetition slow, and the median ignores it.
    """

    samples_ms: np.ndarray = field(repr=False)
    clock: str = CUDA_EVENTS  # CUDA_EVENTS, HOST_CLOCK or CPU_BACKEND

    def __post_init__(self) -> None:
        samples = np.asarray(self.samples_ms, dtype=np.float64).reshape(-1)
        if samples.size == 0:
            raise ValueError("a Timing needs at least one sample")
        if not np.all(np.isfinite(samples)) or np.any(samples < 0):
            raise ValueError("timing samples must be finite and non-negative")
        object.__setattr__(self, "samples_ms", samples)

    @property
    def on_cpu_backend(self) -> bool:
        """True for a host-clock timing of the CPU backend: no statement about any GPU."""
        return self.clock == CPU_BACKEND

    @property
    def n(self) -> int:
        return int(self.samples_ms.size)

    @property
    def median_ms(self) -> float:
        if self.on_cpu_backend:
            note_cpu_timing()
        return float(np.median(self.samples_ms))

    @property
    def q1_ms(self) -> float:
        return float(np.percentile(self.samples_ms, 25))

    @property
    def q3_ms(self) -> float:
        return float(np.percentile(self.samples_ms, 75))

    @property
    def min_ms(self) -> float:
        return float(self.samples_ms.min())

    @property
    def max_ms(self) -> float:
        return float(self.samples_ms.max())

    @property
    def iqr_rel(self) -> float:
        """Interquartile range relative to the median: how noisy the measurement is."""
        median = self.median_ms
        return (self.q3_ms - self.q1_ms) / median if median > 0 else 0.0

    @property
    def seconds(self) -> float:
        """The median in seconds, for formulas that want SI units."""
        return self.median_ms * 1e-3

    def __str__(self) -> str:
        text = f"{_format_ms(self.median_ms)} ms (median of {self.n}, IQR {100 * self.iqr_rel:.1f} %)"
        return f"{text} [{CPU_TIMING_LABEL}]" if self.on_cpu_backend else text

    def _repr_html_(self) -> str:
        return f"<code>{self}</code>"


class _NoteOncePerCell:
    """Prints CPU_TIMING_NOTE once per notebook cell (once per process outside IPython).

    A cell that times a kernel on the CPU backend, or prints or plots such a time, must say that
    the number is not a GPU measurement; once is enough, and once per cell keeps it next to the
    number wherever the reader looks.
    """

    def __init__(self) -> None:
        self.noted = False
        self.hooked_shell: Any = None

    def _reset(self, *_: Any) -> None:
        self.noted = False

    def __call__(self) -> None:
        shell = _ipython()
        if shell is not None and shell is not self.hooked_shell:
            shell.events.register("pre_run_cell", self._reset)
            self.hooked_shell = shell
        if self.noted:
            return
        self.noted = True
        print(CPU_TIMING_NOTE, file=sys.stdout, flush=True)


def _ipython() -> Any:
    """The running IPython shell, or None (plain Python, tests)."""
    shell_module = sys.modules.get("IPython")
    if shell_module is None:
        return None
    try:
        return shell_module.get_ipython()
    except Exception:  # noqa: BLE001 -- a half-imported IPython is no shell
        return None


note_cpu_timing = _NoteOncePerCell()
cpu_timings_made = 0  # how many CPU-backend timings this process made (Sweep uses it to label itself)


def label_cpu_axes(ax: Any) -> None:
    """Write CPU_TIMING_LABEL across a matplotlib plot of CPU-backend timings."""
    ax.text(0.5, 0.5, CPU_TIMING_LABEL, transform=ax.transAxes, ha="center", va="center",
            fontsize=13, color="tab:red", alpha=0.35, rotation=20, gid="cpu-backend-label")


def _format_ms(ms: float) -> str:
    """Three significant digits without scientific notation."""
    if ms >= 100:
        return f"{ms:.0f}"
    return f"{ms:#.3g}".rstrip(".")


def _median_seconds(timing: Timing) -> float:
    if not isinstance(timing, Timing):
        raise TypeError(f"expected a Timing from benchmark(), got {type(timing).__name__}")
    seconds = timing.seconds
    if seconds <= 0:
        raise ValueError("the median time is zero; nothing was measured")
    return seconds


def gbps(nbytes: float, timing: Timing) -> float:
    """Bandwidth in GB/s (10^9 bytes per second) from the bytes moved and the median time.

    Count every byte the kernel must read plus every byte it must write (a copy of N bytes moves 2N).
    """
    return nbytes / _median_seconds(timing) / 1e9


def gflops(flops: float, timing: Timing) -> float:
    """Arithmetic throughput in GFLOP/s from a FLOP count (an FMA counts 2) and the median time."""
    return flops / _median_seconds(timing) / 1e9


def tflops(flops: float, timing: Timing) -> float:
    """Arithmetic throughput in TFLOP/s from a FLOP count (an FMA counts 2) and the median time."""
    return flops / _median_seconds(timing) / 1e12


class EventSource(Protocol):
    """What `benchmark` needs from the GPU: flush L2, timestamp the stream, wait, read intervals."""

    def flush_l2(self) -> None: ...

    def lead_in(self) -> None: ...

    def record(self) -> Any: ...

    def synchronize(self) -> None: ...

    def elapsed_ms(self, start: Any, stop: Any) -> float: ...


def run_benchmark(fn: Callable[[], Any], events: EventSource, *, warmup: int, repeat: int,
                  flush_l2: bool) -> Timing:
    """The measurement loop, independent of CUDA.

    Per repetition: flush L2 and a lead-in (both queued before the start event, so neither is
    timed), start event, fn(), stop event. Events are read only after one synchronisation at the
    end, so reading them never stalls the queue between repetitions.
    """
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    for _ in range(warmup):  # first launches pay for module loading, clocks ramping up, page faults
        fn()
    events.synchronize()
    pairs = []
    for _ in range(repeat):
        if flush_l2:
            events.flush_l2()
        events.lead_in()
        start = events.record()
        fn()
        stop = events.record()
        pairs.append((start, stop))
    events.synchronize()
    return Timing(np.array([events.elapsed_ms(a, b) for a, b in pairs], dtype=np.float64))


_flush_buffers: dict[int, Any] = {}


def _flush_buffer(device_id: int) -> Any:
    """A device buffer of at least FLUSH_FACTOR x L2 bytes, allocated once per device."""
    buffer = _flush_buffers.get(device_id)
    if buffer is None:
        import cupy

        from kernels.device import physical_device_info  # the real L2, also under a GPU profile

        size = max(FLUSH_FACTOR * physical_device_info().l2_bytes, _MIN_FLUSH_BYTES)
        size = -(-size // (1 << 20)) * (1 << 20)  # whole MiB
        with cupy.cuda.Device(device_id):
            buffer = cupy.empty(size, dtype=np.uint8)
        _flush_buffers[device_id] = buffer
    return buffer


class CupyEvents:
    """The real event source: CUDA events, an L2-flushing memset and a GPU sleep on one stream."""

    def __init__(self, stream: Any = None, flush: bool = True, lead_in_us: float = LEAD_IN_US) -> None:
        import cupy

        from kernels.compile import load_kernel

        self._cupy = cupy
        self.stream = stream if stream is not None else cupy.cuda.get_current_stream()
        self._device = cupy.cuda.Device()
        self._buffer = _flush_buffer(self._device.id) if flush else None
        self._value = 0
        self._sleep = load_kernel(SLEEP_SOURCE, "gpu_sleep") if lead_in_us > 0 else None
        self._sleep_ns = int(lead_in_us * 1e3)

    def lead_in(self) -> None:
        # Without this, an idle GPU fires the start event at once and then waits for Python to
        # finish launching fn: that launch overhead would be timed as if it were the kernel.
        if self._sleep is not None:
            self._sleep((1,), (1,), (self._sleep_ns,), stream=self.stream)

    def flush_l2(self) -> None:
        # Writing a buffer twice the size of L2 evicts whatever the timed kernel left there.
        # Alternate the byte so no repetition writes what is already in memory.
        self._value ^= 1
        buffer = self._buffer
        self._cupy.cuda.runtime.memsetAsync(buffer.data.ptr, self._value, buffer.nbytes, self.stream.ptr)

    def record(self) -> Any:
        event = self._cupy.cuda.Event()
        event.record(self.stream)
        return event

    def synchronize(self) -> None:
        self._device.synchronize()

    def elapsed_ms(self, start: Any, stop: Any) -> float:
        return float(self._cupy.cuda.get_elapsed_time(start, stop))


def benchmark(fn: Callable[[], Any], *, warmup: int = 3, repeat: int = 30, flush_l2: bool = True,
              stream: Any = None, events: EventSource | None = None) -> Timing:
    """Time ``fn()`` (which queues GPU work) with CUDA events; returns per-repetition samples.

    On the CPU backend it times ``fn()`` with the host clock instead (see `cpu_benchmark`).

    ``fn`` must queue its work on ``stream`` (the current stream when None): CuPy launches go to
    the current stream, and this function makes ``stream`` current while it runs. Before each
    start event the GPU sleeps for LEAD_IN_US microseconds, so Python's launch overhead is hidden
    unless ``fn`` spends longer than that on the host. ``fn`` must not synchronise (no ``.get()``,
    no printing of device arrays), or host time ends up in the interval. ``events`` replaces the
    CUDA event source (tests use a fake).
    """
    if events is not None:
        return run_benchmark(fn, events, warmup=warmup, repeat=repeat, flush_l2=flush_l2)
    from kernels.backend import backend_name, require_gpu

    if backend_name() == "cpu":
        if stream is None:
            return cpu_benchmark(fn, warmup=warmup, repeat=repeat)
        with stream:  # the CPU backend's streams are synchronous; fn may still ask for the current one
            return cpu_benchmark(fn, warmup=warmup, repeat=repeat)
    require_gpu("benchmark()")
    source = CupyEvents(stream, flush=flush_l2)
    with source.stream:
        return run_benchmark(fn, source, warmup=warmup, repeat=repeat, flush_l2=flush_l2)


def cpu_benchmark(fn: Callable[[], Any], *, warmup: int = 3, repeat: int = 30,
                  clock: Callable[[], float] = time.perf_counter) -> Timing:
    """`benchmark` on the CPU backend: host-clock time of ``fn()``, warm-up first, median reported.

    CPU-backend launches have finished when they return, so the host clock measures the whole
    call. At most CPU_MAX_WARMUP warm-up calls and CPU_MAX_REPEAT repetitions are made: the
    result is labelled as a CPU timing and says nothing about a GPU, so more samples buy nothing.
    """
    global cpu_timings_made
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    note_cpu_timing()
    for _ in range(min(warmup, CPU_MAX_WARMUP)):
        fn()
    samples = []
    for _ in range(min(repeat, CPU_MAX_REPEAT)):
        start = clock()
        fn()
        samples.append((clock() - start) * 1e3)
    cpu_timings_made += 1
    return Timing(np.array(samples), clock=CPU_BACKEND)


def _device_synchronize() -> None:
    import cupy

    cupy.cuda.Device().synchronize()


def host_timer(fn: Callable[[], Any], sync: bool, *, warmup: int = 1, repeat: int = 10,
               synchronize: Callable[[], None] | None = None,
               clock: Callable[[], float] = time.perf_counter) -> Timing:
    """Time ``fn()`` with the host clock, to show what goes wrong without synchronisation.

    With ``sync=False`` the interval ends as soon as ``fn`` returns, which for a kernel launch is
    when the work was *queued*, not when it finished: the number is the launch overhead. With
    ``sync=True`` the interval includes waiting for the GPU, so it is the real elapsed time (plus
    the launch and synchronisation overhead that CUDA events leave out). Before every repetition
    the GPU is drained (untimed), so both variants start from an idle GPU.

    On the CPU backend, without a ``synchronize`` of its own, launches are synchronous (there is
    nothing to wait for) and the result is labelled as a CPU-backend timing.
    """
    global cpu_timings_made
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    label = HOST_CLOCK
    if synchronize is None:
        from kernels.backend import backend_name, require_gpu

        if backend_name() == "cpu":
            label = CPU_BACKEND
            synchronize = _nothing_to_wait_for
            note_cpu_timing()
            cpu_timings_made += 1
        else:
            require_gpu("host_timer()")
    wait = synchronize if synchronize is not None else _device_synchronize
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        wait()
        start = clock()
        fn()
        if sync:
            wait()
        samples.append((clock() - start) * 1e3)
    wait()
    return Timing(np.array(samples), clock=label)


def _nothing_to_wait_for() -> None:
    """CPU-backend launches have finished when they return."""
