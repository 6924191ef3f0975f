"""Timing statistics, throughput arithmetic and the benchmark loop, with a fake GPU clock."""
from __future__ import annotations

import numpy as np
import pytest

from kernels.timing import Timing, benchmark, gbps, gflops, host_timer, tflops


def test_statistics_match_numpy() -> None:
    rng = np.random.default_rng(1)
    samples = rng.gamma(4.0, 0.1, size=51)
    t = Timing(samples)
    assert t.n == 51
    assert t.median_ms == pytest.approx(np.median(samples))
    assert t.q1_ms == pytest.approx(np.percentile(samples, 25))
    assert t.q3_ms == pytest.approx(np.percentile(samples, 75))
    assert t.min_ms == samples.min() and t.max_ms == samples.max()
    assert t.iqr_rel == pytest.approx((t.q3_ms - t.q1_ms) / t.median_ms)
    assert t.seconds == pytest.approx(t.median_ms / 1e3)


def test_median_ignores_one_slow_outlier() -> None:
    t = Timing([1.0] * 9 + [1000.0])
    assert t.median_ms == 1.0
    assert t.max_ms == 1000.0
    assert t.iqr_rel == 0.0


def test_str_reports_median_count_and_iqr() -> None:
    t = Timing([0.40, 0.41, 0.412, 0.414, 0.42])
    text = str(t)
    assert text.startswith("0.412 ms (median of 5, IQR ")
    assert f"{100 * t.iqr_rel:.1f} %" in text
    assert str(Timing([12.34])).startswith("12.3 ms")
    assert str(Timing([1234.0])).startswith("1234 ms")


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [-1.0], [float("inf")]])
def test_rejects_meaningless_samples(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        Timing(bad)


def test_throughput_arithmetic() -> None:
    t = Timing([2.0, 2.0, 2.0])  # 2 ms
    assert gbps(4e9, t) == pytest.approx(2000.0)  # 4 GB in 2 ms
    assert tflops(1e12, t) == pytest.approx(500.0)
    assert gflops(1e9, t) == pytest.approx(500.0)
    assert gbps(1e9, Timing([1.0, 3.0, 2.0])) == pytest.approx(500.0)  # median, not mean or min


def test_throughput_needs_a_timing() -> None:
    with pytest.raises(TypeError):
        gbps(1e9, 2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tflops(1.0, Timing([0.0]))


class FakeGPU:
    """Records the order of everything benchmark() does; a 'kernel' takes durations[i] ms."""

    def __init__(self, durations: list[float], flush_ms: float = 5.0) -> None:
        self.log: list[str] = []
        self.now = 0.0
        self.durations = list(durations)
        self.flush_ms = flush_ms
        self.calls = 0
        self.synced_before_read = False

    def kernel(self) -> None:
        self.calls += 1
        self.log.append("fn")
        self.now += self.durations.pop(0) if self.durations else 1.0

    def flush_l2(self) -> None:
        self.log.append("flush")
        self.now += self.flush_ms

    def lead_in(self) -> None:
        self.log.append("lead_in")
        self.now += 0.1

    def record(self) -> float:
        self.log.append("record")
        return self.now

    def synchronize(self) -> None:
        self.log.append("sync")

    def elapsed_ms(self, start: float, stop: float) -> float:
        assert self.log[-1] in ("sync", "read"), "events read before synchronising"
        self.log.append("read")
        return stop - start


def test_benchmark_loop_order_and_counts() -> None:
    gpu = FakeGPU(durations=[100.0] * 3 + [1.0, 2.0, 3.0, 4.0])
    t = benchmark(gpu.kernel, warmup=3, repeat=4, events=gpu)
    assert gpu.calls == 7
    assert gpu.log[:4] == ["fn", "fn", "fn", "sync"]  # warm-up, then drain the queue
    timed = gpu.log[4:4 + 5 * 4]
    assert timed == ["flush", "lead_in", "record", "fn", "record"] * 4  # flush outside the events
    assert gpu.log[4 + 20:] == ["sync"] + ["read"] * 4
    assert t.n == 4
    np.testing.assert_allclose(t.samples_ms, [1.0, 2.0, 3.0, 4.0])  # flush, lead-in not included
    assert t.median_ms == pytest.approx(2.5)


def test_benchmark_without_flush_and_without_warmup() -> None:
    gpu = FakeGPU(durations=[2.0] * 5)
    t = benchmark(gpu.kernel, warmup=0, repeat=5, flush_l2=False, events=gpu)
    assert "flush" not in gpu.log
    assert gpu.log.count("lead_in") == 5
    assert gpu.calls == 5
    assert t.n == 5 and t.median_ms == pytest.approx(2.0)


@pytest.mark.parametrize("warmup,repeat", [(-1, 5), (0, 0)])
def test_benchmark_rejects_bad_counts(warmup: int, repeat: int) -> None:
    gpu = FakeGPU([])
    with pytest.raises(ValueError):
        benchmark(gpu.kernel, warmup=warmup, repeat=repeat, events=gpu)


class FakeAsyncGPU:
    """A 'launch' returns at once; the work (3 ms) finishes only when someone synchronises."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pending = 0.0

    def clock(self) -> float:
        return self.now

    def launch(self) -> None:
        self.now += 0.01e-3  # 10 us of launch overhead on the host
        self.pending += 3e-3

    def synchronize(self) -> None:
        self.now += self.pending
        self.pending = 0.0


def test_host_timer_without_sync_measures_only_the_launch() -> None:
    gpu = FakeAsyncGPU()
    no_sync = host_timer(gpu.launch, sync=False, repeat=5, synchronize=gpu.synchronize, clock=gpu.clock)
    with_sync = host_timer(gpu.launch, sync=True, repeat=5, synchronize=gpu.synchronize, clock=gpu.clock)
    assert no_sync.median_ms == pytest.approx(0.01)
    assert with_sync.median_ms == pytest.approx(3.01)
    assert gpu.pending == 0.0  # the GPU is left drained
