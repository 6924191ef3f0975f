"""What GPU is this? The limits and sizes the chapters reason with, read from the device itself.

Chapters print these instead of hard-coding "an SM has 64 K registers": the numbers differ between
the Colab T4 and an H100, and the course's explanations should match the GPU the reader has.

On the CPU backend (no GPU) ``device_info()`` describes the CPU backend in the same shape: the
limits it checks launches against, one "SM" (one core runs the blocks one after another), None
for what has no meaning there (registers, clocks), and this computer's cache and memory sizes.
``provenance()`` still needs a GPU: it says where a notebook's GPU measurements came from.

Under a GPU profile (``kernels.profile``, e.g. COURSE_GPU_PROFILE=t4) ``device_info()`` reports the
profile's GPU, named "T4 profile on <the real GPU>"; ``physical_device_info()`` is the real GPU, for
the few things that must act on the hardware itself (the L2 flush of the timings).
"""
from __future__ import annotations

import datetime
import functools
import html
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Stable cudaDeviceAttr values, used when CuPy does not export the named constant. CUDA 13 dropped
# the clock fields from cudaDeviceProp; the attributes still answer.
_ATTRIBUTE_IDS = {"ClockRate": 13, "MemoryClockRate": 36, "GlobalMemoryBusWidth": 37}

CPU_BACKEND_NAME = "CPU backend (no GPU)"
_CPU_RUNTIME_HEADER = Path(__file__).parent / "cpu" / "runtime" / "include" / "cuda_cpu.h"


@dataclass(frozen=True)
class DeviceInfo:
    """The current GPU's name, limits and sizes (bytes, kHz, bits), as CUDA reports them.

    With ``backend == "cpu"`` it describes the CPU backend instead (see `cpu_backend_info`).
    """

    name: str
    compute_capability: str
    sm_count: int
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int | None  # None on the CPU backend: it has no register file
    regs_per_block: int | None
    shared_per_sm: int
    shared_per_block: int
    shared_per_block_optin: int
    l2_bytes: int
    memory_bytes: int
    memory_clock_khz: int | None
    memory_bus_bits: int | None
    sm_clock_khz: int | None
    async_engine_count: int
    cuda_runtime: str
    cuda_driver: str
    cupy_version: str
    backend: str = "cupy"
    profile: str | None = None  # "t4" when a GPU profile (kernels.profile) is reported, not the real GPU

    @property
    def on_cpu_backend(self) -> bool:
        return self.backend == "cpu"

    @property
    def on_profile(self) -> bool:
        """True when these are a GPU profile's numbers (a big GPU running, say, T4 code), not the device's."""
        return self.profile is not None

    @property
    def theoretical_dram_gbps(self) -> float | None:
        """Datasheet-style peak DRAM bandwidth, 2 x memory clock x bus width / 8, in GB/s.

        This is what the spec sheet quotes (double data rate, every pin busy every cycle), not a
        measurement: real copies reach roughly 80-92 % of it. None when CUDA does not report the
        memory clock or the bus width.
        """
        if not self.memory_clock_khz or not self.memory_bus_bits:
            return None
        return 2 * self.memory_clock_khz * 1e3 * self.memory_bus_bits / 8 / 1e9

    def table(self) -> "InfoTable":
        """The fields a chapter shows, as a two-column table that renders in notebooks and text."""
        if self.on_cpu_backend:
            return self._cpu_table()
        kib = 1024
        rows = [
            ("GPU", self.name),
            ("compute capability", self.compute_capability),
            ("SMs", str(self.sm_count)),
            ("warp size", str(self.warp_size)),
            ("max threads per block / per SM", f"{self.max_threads_per_block} / {self.max_threads_per_sm}"),
            ("max blocks per SM", str(self.max_blocks_per_sm)),
            ("32-bit registers per SM / per block", f"{self.regs_per_sm} / {self.regs_per_block}"),
            ("shared memory per SM", f"{self.shared_per_sm // kib} KiB"),
            ("shared memory per block (default / opt-in)",
             f"{self.shared_per_block // kib} / {self.shared_per_block_optin // kib} KiB"),
            ("L2 cache", f"{self.l2_bytes / 2**20:.0f} MiB"),
            ("global memory", f"{self.memory_bytes / 2**30:.1f} GiB"),
        ]
        if self.sm_clock_khz:
            rows.append(("SM clock (max)", f"{self.sm_clock_khz / 1e3:.0f} MHz"))
        if self.memory_clock_khz and self.memory_bus_bits:
            rows.append(("memory clock / bus width",
                         f"{self.memory_clock_khz / 1e3:.0f} MHz / {self.memory_bus_bits} bit"))
        peak = self.theoretical_dram_gbps
        if peak is not None:
            rows.append(("theoretical DRAM bandwidth (datasheet)", f"{peak:.0f} GB/s"))
        rows.append(("copy engines", str(self.async_engine_count)))
        if self.on_profile:
            key = str(self.profile).upper()
            rows.insert(1, ("profile", f"{key}: the GPU named above runs code compiled for the {key} "
                                       f"(compute capability {self.compute_capability}) under the {key}'s "
                                       f"limits listed here; its times are not {key} measurements"))
        rows.append(("CUDA runtime / driver, CuPy",
                     f"{self.cuda_runtime} / {self.cuda_driver}, {self.cupy_version}"))
        return InfoTable(rows)

    def _cpu_table(self) -> "InfoTable":
        kib = 1024
        return InfoTable([
            ("GPU", "none: the CPU backend runs the kernels on this computer's processor"),
            ("compiled as compute capability", f"{self.compute_capability} "
                                               f"(__CUDA_ARCH__ {self.compute_capability.replace('.', '')}0)"),
            ("SMs", f"{self.sm_count} (one core runs the blocks one after another)"),
            ("warp size", str(self.warp_size)),
            ("max threads per block / per SM",
             f"{self.max_threads_per_block} / {self.max_threads_per_sm} (one block at a time)"),
            ("32-bit registers", "none (each thread's variables live on its own stack)"),
            ("shared memory per block (default / opt-in)",
             f"{self.shared_per_block // kib} / {self.shared_per_block_optin // kib} KiB"),
            ("L2 cache (this processor's)", f"{self.l2_bytes / 2**20:.0f} MiB"),
            ("memory (this computer's)", f"{self.memory_bytes / 2**30:.1f} GiB"),
            ("timings", "CPU timings: not GPU measurements"),
        ])

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


@dataclass(frozen=True)
class InfoTable:
    """Label/value rows that show as an HTML table in notebooks and as aligned text elsewhere."""

    rows: list[tuple[str, str]]

    def _repr_html_(self) -> str:
        left = "style='text-align:left'"
        body = "".join(f"<tr><th {left}>{html.escape(k)}</th><td {left}>{html.escape(v)}</td></tr>"
                       for k, v in self.rows)
        return f"<table>{body}</table>"

    def _repr_markdown_(self) -> str:
        lines = ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in self.rows]
        return "\n".join(lines)

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self.rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self.rows)


def _version(code: int) -> str:
    """CUDA's integer version (12040) as "12.4"."""
    return f"{code // 1000}.{(code % 1000) // 10}"


def _attribute(runtime: Any, name: str, device_id: int) -> int | None:
    """A cudaDeviceAttr value by name (without the cudaDevAttr prefix), or None if unavailable."""
    attr_id = getattr(runtime, f"cudaDevAttr{name}", _ATTRIBUTE_IDS.get(name))
    if attr_id is None:
        return None
    try:
        value = int(runtime.deviceGetAttribute(int(attr_id), device_id))
    except Exception:  # attribute unknown to this driver
        return None
    return value or None


def _prop_or_attribute(props: dict, key: str, runtime: Any, attr: str, device_id: int) -> int | None:
    value = props.get(key)
    if value:
        return int(value)
    return _attribute(runtime, attr, device_id)


@functools.cache
def _read(device_id: int) -> DeviceInfo:
    import cupy

    runtime = cupy.cuda.runtime
    p = runtime.getDeviceProperties(device_id)
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    return DeviceInfo(
        name=name,
        compute_capability=f"{p['major']}.{p['minor']}",
        sm_count=int(p["multiProcessorCount"]),
        warp_size=int(p["warpSize"]),
        max_threads_per_block=int(p["maxThreadsPerBlock"]),
        max_threads_per_sm=int(p["maxThreadsPerMultiProcessor"]),
        max_blocks_per_sm=int(p.get("maxBlocksPerMultiProcessor")
                              or _attribute(runtime, "MaxBlocksPerMultiprocessor", device_id) or 0),
        regs_per_sm=int(p["regsPerMultiprocessor"]),
        regs_per_block=int(p["regsPerBlock"]),
        shared_per_sm=int(p["sharedMemPerMultiprocessor"]),
        shared_per_block=int(p["sharedMemPerBlock"]),
        shared_per_block_optin=int(p["sharedMemPerBlockOptin"]),
        l2_bytes=int(p["l2CacheSize"]),
        memory_bytes=int(p["totalGlobalMem"]),
        memory_clock_khz=_prop_or_attribute(p, "memoryClockRate", runtime, "MemoryClockRate", device_id),
        memory_bus_bits=_prop_or_attribute(p, "memoryBusWidth", runtime, "GlobalMemoryBusWidth", device_id),
        sm_clock_khz=_prop_or_attribute(p, "clockRate", runtime, "ClockRate", device_id),
        async_engine_count=int(p.get("asyncEngineCount", 0)),
        cuda_runtime=_version(runtime.runtimeGetVersion()),
        cuda_driver=_version(runtime.driverGetVersion()),
        cupy_version=cupy.__version__,
    )


def _cpu_compute_capability() -> str:
    """The compute capability the CPU backend compiles for (its __CUDA_ARCH__, e.g. 800 -> "8.0")."""
    try:
        found = re.search(r"#define\s+__CUDA_ARCH__\s+(\d+)", _CPU_RUNTIME_HEADER.read_text())
    except OSError:
        found = None
    arch = int(found.group(1)) if found else 800
    return f"{arch // 100}.{arch % 100 // 10}"


def _l2_cache_bytes() -> int:
    """This processor's (per-core) L2 cache size from Linux's sysfs; 0 where it is not reported."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "level").read_text().strip() != "2" or (index / "type").read_text().strip() == "Instruction":
                continue
            size = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        if size[-1:] in units and size[:-1].isdigit():
            return int(size[:-1]) * units[size[-1]]
        if size.isdigit():
            return int(size)
    return 0


def _sysconf(name: str) -> int:
    try:
        value = os.sysconf(name)
    except (ValueError, OSError, AttributeError):
        return 0
    return max(int(value), 0)


@functools.cache
def cpu_backend_info() -> DeviceInfo:
    """The CPU backend in DeviceInfo's shape: the values it uses, None where a GPU fact has no meaning.

    One core runs the blocks of a grid one after another, each block's threads as fibers: so one
    SM holding one block of at most 1024 threads. Shared-memory limits are the ones the CPU backend
    checks launches against; cache and memory sizes are this computer's.
    """
    from kernels.cpu.raw import CPU_LIMITS, DEFAULT_DYNAMIC_SHARED, MAX_SHARED_OPTIN

    threads = CPU_LIMITS.max_threads_per_block
    return DeviceInfo(
        name=CPU_BACKEND_NAME,
        compute_capability=_cpu_compute_capability(),
        sm_count=1,
        warp_size=32,
        max_threads_per_block=threads,
        max_threads_per_sm=threads,
        max_blocks_per_sm=1,
        regs_per_sm=None,
        regs_per_block=None,
        shared_per_sm=MAX_SHARED_OPTIN,
        shared_per_block=DEFAULT_DYNAMIC_SHARED,
        shared_per_block_optin=MAX_SHARED_OPTIN,
        l2_bytes=_l2_cache_bytes(),
        memory_bytes=_sysconf("SC_PAGE_SIZE") * _sysconf("SC_PHYS_PAGES"),
        memory_clock_khz=None,
        memory_bus_bits=None,
        sm_clock_khz=None,
        async_engine_count=0,
        cuda_runtime="",
        cuda_driver="",
        cupy_version="",
        backend="cpu",
    )


def device_info() -> DeviceInfo:
    """The current GPU's properties (read once per device); on the CPU backend, `cpu_backend_info()`.

    Under a GPU profile (kernels.profile) the profile's limits and sizes, named as such.
    """
    from kernels.profile import apply_to_device_info

    return apply_to_device_info(physical_device_info())


def physical_device_info() -> DeviceInfo:
    """The GPU itself, whatever profile is in force; on the CPU backend, `cpu_backend_info()`."""
    from kernels.backend import backend_name, require_gpu

    if backend_name() == "cpu":
        return cpu_backend_info()
    require_gpu("device_info()")
    import cupy

    return _read(cupy.cuda.Device().id)


def provenance() -> dict[str, str]:
    """Where a notebook's numbers came from: GPU, compute capability, CUDA, CuPy, today's date.

    Under a GPU profile "gpu" names both ("T4 profile on NVIDIA H200"), and "profile" and
    "profile_note" say that the numbers are the real GPU running the profile's code.
    Raises NoGPUError without a GPU (also on the CPU backend): only a GPU run has provenance.
    """
    from kernels.backend import require_gpu
    from kernels.profile import PROFILES, provenance_note

    require_gpu("provenance()")
    info = device_info()
    extra = {}
    if info.on_profile:
        real = physical_device_info()
        extra = {"profile": str(info.profile), "physical_gpu": real.name,
                 "physical_compute_capability": real.compute_capability,
                 "profile_note": provenance_note(PROFILES[str(info.profile)], real.name)}
    return {
        "gpu": info.name,
        "compute_capability": info.compute_capability,
        "cuda_runtime": info.cuda_runtime,
        "cuda_driver": info.cuda_driver,
        "cupy": info.cupy_version,
        "date": datetime.date.today().isoformat(),
        **extra,
    }
