"""The two ceilings every speed in the course is compared with, measured on the reader's GPU.

- copy bandwidth: how fast DRAM can be read and written, from a large device-to-device copy;
- FP32 FMA throughput: how fast the SMs can do arithmetic, from a kernel that does nothing else.

Datasheet peaks are never reached; a kernel at 90 % of the *measured* copy bandwidth is as fast as a
memory-bound kernel can be, which is the statement chapters want to make.

On the CPU backend (no GPU) ``ceilings()`` measures the same two things for this computer's
processor instead (a NumPy copy, NumPy multiply-adds on data in cache), so chapter cells that divide
by a ceiling still run; the result is labelled as the CPU's and is not a GPU measurement.
"""
from __future__ import annotations

import datetime
import functools
import html
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from kernels.timing import CPU_TIMING_LABEL, Timing, benchmark, gbps, tflops

FMA_SOURCE = "common/fma_throughput.cu"
FMAS_PER_ITER = 128  # UNROLL * CHAINS in fma_throughput.cu
FMA_BLOCK = 256
FMA_TARGET_MS = 2.0
MIN_COPY_BYTES = 256 << 20
CPU_COPY_BYTES = 32 << 20      # larger than the caches of a laptop or a CI machine
CPU_FMA_ELEMENTS = 16 << 10    # 64 KiB of float32 per operand: stays in cache


@dataclass(frozen=True)
class Ceilings:
    """Measured copy bandwidth (GB/s, read + write) and FP32 FMA throughput (TFLOP/s) of one GPU."""

    device: str
    copy_gbps: float
    fma_tflops: float
    l2_bytes: int = 0
    sm_count: int = 0
    measured: str = ""  # ISO date of the measurement; empty for hand-made values
    backend: str = "cupy"  # "cpu": the CPU backend's stand-ins, measured on the processor

    @property
    def on_cpu_backend(self) -> bool:
        return self.backend == "cpu"

    def __getattribute__(self, name: str) -> object:
        # A cell that prints or divides by the CPU backend's ceilings shows CPU speeds: label it.
        if name in ("copy_gbps", "fma_tflops") and object.__getattribute__(self, "backend") == "cpu":
            from kernels.timing import note_cpu_timing

            note_cpu_timing()
        return object.__getattribute__(self, name)

    @property
    def ridge_flop_per_byte(self) -> float:
        """Arithmetic intensity where the roofline turns from memory-bound to compute-bound."""
        return self.fma_tflops * 1e12 / (self.copy_gbps * 1e9)

    def _how(self) -> str:
        how = f"measured {self.measured}" if self.measured else "not measured"
        return f"{how} on this computer's processor; {CPU_TIMING_LABEL}" if self.on_cpu_backend else how

    def _fma_text(self) -> str:
        # A processor's FP32 rate is a few GFLOP/s: in TFLOP/s with one decimal it would read 0.0.
        if self.on_cpu_backend:
            return f"{1e3 * self.fma_tflops:.1f} GFLOP/s"
        return f"{self.fma_tflops:.1f} TFLOP/s"

    def __str__(self) -> str:
        return (f"{self.device}: copy {self.copy_gbps:.0f} GB/s, "
                f"FP32 FMA {self._fma_text()} ({self._how()})")

    def _repr_html_(self) -> str:
        return (f"<b>{html.escape(self.device)}</b>: copy <b>{self.copy_gbps:.0f} GB/s</b>, "
                f"FP32 FMA <b>{self._fma_text()}</b> <i>({html.escape(self._how())})</i>")


def copy_bytes_for(l2_bytes: int) -> int:
    """Size of the copy: large enough (8 x L2, at least 256 MiB) that L2 cannot help."""
    return max(MIN_COPY_BYTES, 8 * l2_bytes)


def measure_copy(nbytes: int, repeat: int = 20) -> Timing:
    """Time a device-to-device copy of ``nbytes`` (it moves 2 x nbytes: read + write)."""
    import cupy

    src = cupy.ones(nbytes, dtype=np.uint8)
    dst = cupy.empty_like(src)

    def copy() -> None:
        dst.data.copy_from_device_async(src.data, nbytes, cupy.cuda.get_current_stream())

    try:
        return benchmark(copy, warmup=3, repeat=repeat)
    finally:
        del src, dst
        cupy.get_default_memory_pool().free_all_blocks()


def fma_flops(iters: int, threads: int) -> int:
    """Exact FLOP count of one fma_throughput launch (an FMA is 2 FLOPs)."""
    return 2 * FMAS_PER_ITER * iters * threads


def measure_fma(blocks: int, iters: int, repeat: int = 10) -> Timing:
    """Time fma_throughput with ``blocks`` blocks of FMA_BLOCK threads and ``iters`` iterations."""
    import cupy

    from kernels.compile import load_kernel

    kernel = load_kernel(FMA_SOURCE, "fma_throughput")
    out = cupy.empty(blocks * FMA_BLOCK, dtype=np.float32)
    args = (out, np.int32(iters), np.float32(0.9999999), np.float32(1e-7))
    return benchmark(lambda: kernel((blocks,), (FMA_BLOCK,), args), warmup=2, repeat=repeat,
                     flush_l2=False)


def fma_blocks(sm_count: int, max_threads_per_sm: int) -> int:
    """Four full waves of blocks: every SM holds as many threads as it can, four times over."""
    return sm_count * max(1, max_threads_per_sm // FMA_BLOCK) * 4


def _fma_tflops(sm_count: int, max_threads_per_sm: int) -> float:
    blocks = fma_blocks(sm_count, max_threads_per_sm)
    threads = blocks * FMA_BLOCK
    probe_iters = 64
    probe = measure_fma(blocks, probe_iters, repeat=3)
    scale = FMA_TARGET_MS / max(probe.median_ms, 1e-3)
    iters = int(min(max(probe_iters * scale, probe_iters), 1 << 20))
    return tflops(fma_flops(iters, threads), measure_fma(blocks, iters))


@functools.cache
def _measure(device_id: int) -> Ceilings:
    from kernels.device import device_info

    info = device_info()
    copy_bytes = copy_bytes_for(info.l2_bytes)
    return Ceilings(
        device=info.name,
        copy_gbps=gbps(2 * copy_bytes, measure_copy(copy_bytes)),
        fma_tflops=_fma_tflops(info.sm_count, info.max_threads_per_sm),
        l2_bytes=info.l2_bytes,
        sm_count=info.sm_count,
        measured=datetime.date.today().isoformat(),
    )


def _host_median_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up: page faults, first-touch
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return float(np.median(samples))


def cpu_copy_gbps(nbytes: int = CPU_COPY_BYTES, repeat: int = 5) -> float:
    """Copy bandwidth of this processor (read + write) from a NumPy copy of ``nbytes``."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    return 2 * nbytes / _host_median_seconds(lambda: np.copyto(dst, src), repeat) / 1e9


def cpu_fma_tflops(elements: int = CPU_FMA_ELEMENTS, rounds: int = 50, repeat: int = 5) -> float:
    """An estimate of this processor's FP32 multiply-add rate through NumPy (2 FLOPs per a*b+c).

    The operands stay in cache, so memory does not limit it; NumPy does the multiply and the add
    as two vectorised passes, so this is what NumPy reaches, below the chip's FMA peak.
    """
    a = np.full(elements, 0.9999, dtype=np.float32)
    b = np.full(elements, 1e-4, dtype=np.float32)
    acc = np.ones(elements, dtype=np.float32)

    def multiply_add() -> None:
        for _ in range(rounds):
            np.multiply(acc, a, out=acc)
            np.add(acc, b, out=acc)

    return 2 * elements * rounds / _host_median_seconds(multiply_add, repeat) / 1e12


@functools.cache
def _measure_cpu() -> Ceilings:
    from kernels.device import device_info

    info = device_info()
    return Ceilings(device=info.name, copy_gbps=cpu_copy_gbps(), fma_tflops=cpu_fma_tflops(),
                    l2_bytes=info.l2_bytes, sm_count=info.sm_count,
                    measured=datetime.date.today().isoformat(), backend="cpu")


def ceilings() -> Ceilings:
    """The current GPU's measured ceilings; measured on the first call (about a second), then cached.

    On the CPU backend: this processor's copy bandwidth and NumPy multiply-add rate, labelled so.
    """
    from kernels.backend import backend_name, require_gpu

    if backend_name() == "cpu":
        return _measure_cpu()
    require_gpu("ceilings()")
    import cupy

    return _measure(cupy.cuda.Device().id)
