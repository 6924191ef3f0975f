"""The occupancy calculator: how many blocks of a kernel fit on one SM, and which resource stops more.

The rules themselves, which need no device, are ``kernels.occupancy_rules``; this module adds the
current GPU's limits (``GpuLimits.from_device``), the live panel and recorded explorer, and the check
against CUDA's own answer (``check_against_cuda``, on a GPU).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import occupancy_rules as rules
from .explorer import Explorer
from .occupancy_rules import _TABLE, KB, Occupancy, _cc_key, _nearest_known, occupancy_for
from .sources import source

__all__ = ["GpuLimits", "Occupancy", "occupancy", "occupancy_explorer", "occupancy_panel",
           "check_against_cuda"]


class GpuLimits(rules.GpuLimits):
    """The rules' limits of one compute capability, or of the current GPU (``from_device``)."""

    @classmethod
    def from_device(cls) -> "GpuLimits":
        """The current GPU's limits: what the device reports, the table for what it does not."""
        from .device import device_info

        info = device_info()
        cc = _cc_key(_get(info, "compute_capability"))
        base = cls.for_compute_capability(cc if cc in _TABLE else _nearest_known(cc))
        reported = {
            "max_threads_per_sm": _get(info, "max_threads_per_sm", "max_threads_per_multiprocessor"),
            "max_blocks_per_sm": _get(info, "max_blocks_per_sm", "max_blocks_per_multiprocessor"),
            "regs_per_sm": _get(info, "regs_per_sm", "registers_per_sm"),
            "max_regs_per_block": _get(info, "regs_per_block", "max_regs_per_block", "registers_per_block"),
            "shared_per_sm": _get(info, "shared_per_sm", "shared_memory_per_sm"),
            "max_shared_per_block": _get(info, "shared_per_block_optin", "max_shared_per_block"),
            "reserved_shared_per_block": _get(info, "reserved_shared_per_block"),
            "max_threads_per_block": _get(info, "max_threads_per_block"),
            "warp_size": _get(info, "warp_size"),
        }
        known = {k: int(v) for k, v in reported.items() if isinstance(v, (int, float)) and v >= 0}
        limits = replace(base, compute_capability=cc, name=str(_get(info, "name") or base.name), **known)
        return replace(limits, max_warps_per_sm=limits.max_threads_per_sm // limits.warp_size)


def _get(info: Any, *names: str) -> Any:
    for name in names:
        value = info.get(name) if isinstance(info, dict) else getattr(info, name, None)
        if value is not None:
            return value
    return None


def occupancy(threads_per_block: int, regs_per_thread: int | None, shared_per_block: int | None = 0,
              limits: GpuLimits | str | None = None) -> Occupancy:
    """Resident blocks per SM for a kernel, computed like ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``.

    ``shared_per_block`` is static plus dynamic shared memory in bytes. ``limits`` is a GpuLimits, a
    compute capability string, or None for the current GPU (compute capability 9.0 without one).
    None for the registers or the shared memory means unknown (a ``resource_report`` made without a
    compiler): the result leaves that resource out, so it is an upper bound, and its limiter says so.
    """
    lim = _resolve(limits)
    return occupancy_for(threads_per_block, regs_per_thread, shared_per_block, lim)


def _resolve(limits: rules.GpuLimits | str | None) -> rules.GpuLimits:
    if isinstance(limits, rules.GpuLimits):
        return limits
    if limits is not None:
        return GpuLimits.for_compute_capability(limits)
    try:
        from .backend import gpu_available
        if gpu_available():
            return GpuLimits.from_device()
    except ImportError:
        pass
    return GpuLimits.for_compute_capability("9.0")


# The grid behind the recorded calculator (kept small enough to embed in a web page).
THREADS = list(range(32, 1025, 32))
REGISTERS = list(range(16, 255, 8)) + [255]
SHARED_KB = [0, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 164, 227]


def _shared_values(lim: GpuLimits) -> list[int]:
    top = lim.max_shared_per_block // KB
    return sorted({kb for kb in SHARED_KB if kb <= top} | {top})


def occupancy_records(limits: GpuLimits | str | None = None) -> list[dict[str, Any]]:
    """Occupancy over the whole grid of threads, registers and shared memory, one record per point."""
    lim = _resolve(limits)
    records = []
    for kb in _shared_values(lim):
        for regs in REGISTERS:
            for threads in THREADS:
                occ = occupancy(threads, regs, kb * KB, lim)
                record: dict[str, Any] = {
                    "threads per block": threads, "registers per thread": regs, "shared KB per block": kb,
                    "blocks/SM": occ.blocks_per_sm, "warps/SM": occ.warps_per_sm, "limiter": occ.limiter,
                }
                if occ.valid:
                    record["occupancy %"] = round(occ.percent, 2)
                else:
                    record["note"] = (f"more than the {lim.max_regs_per_block} registers one block may have: "
                                      "the launch fails" if occ.limiter == "registers" else occ.explanation)
                records.append(record)
    return records


def occupancy_explorer(limits: GpuLimits | str | None = None) -> Explorer:
    """The calculator as a recorded explorer: occupancy against block size, sliders for the rest."""
    lim = _resolve(limits)
    return Explorer(
        occupancy_records(lim), x="threads per block", y="occupancy %",
        controls=["registers per thread", "shared KB per block"],
        title=f"Occupancy on {lim.name or 'compute capability ' + lim.compute_capability}",
        readout=["blocks/SM", "warps/SM", "limiter"], hlines={"all warp slots": 100.0}, height=300,
        initial={"registers per thread": 32, "shared KB per block": 0, "threads per block": 256},
    )


def occupancy_panel(limits: GpuLimits | str | None = None) -> None:
    """The live calculator (three sliders, the result, a bar per resource), with the recorded
    explorer as the web page's version of the same figure."""
    import ipywidgets as w

    from .sweep import display_live

    lim = _resolve(limits)
    threads = w.IntSlider(value=256, min=32, max=lim.max_threads_per_block, step=32, description="threads",
                          continuous_update=False)
    regs = w.IntSlider(value=32, min=16, max=lim.max_regs_per_thread, step=1, description="registers",
                       continuous_update=False)
    smem = w.IntSlider(value=0, min=0, max=lim.max_shared_per_block // KB, step=1, description="shared KB",
                       continuous_update=False)
    result = w.HTML()
    chart = w.Output()

    def update(_change: Any = None) -> None:
        occ = occupancy(threads.value, regs.value, smem.value * KB, lim)
        result.value = (f"<b>{occ.blocks_per_sm} blocks/SM, {occ.warps_per_sm} warps/SM, "
                        f"occupancy {occ.percent:.0f} %</b><br>limited by {occ.explanation}")
        with chart:
            chart.clear_output(wait=True)
            _bar_chart(occ, lim)

    for slider in (threads, regs, smem):
        slider.observe(update, names="value")
    update()
    panel = w.VBox([w.Label(f"Occupancy calculator for {lim.name or lim.compute_capability}"),
                    threads, regs, smem, result, chart])
    occ = occupancy(256, 32, 0, lim)
    display_live(panel, occupancy_explorer(lim).html(),
                 f"Occupancy calculator ({lim.compute_capability}): 256 threads, 32 registers, 0 KB -> "
                 f"{occ.blocks_per_sm} blocks/SM, {occ.percent:.0f} %")


def _bar_chart(occ: Occupancy, lim: GpuLimits) -> None:
    import matplotlib.pyplot as plt
    from IPython.display import display

    names = list(occ.block_limits) or ["warps", "blocks", "registers", "shared memory"]
    values = [min(occ.block_limits.get(n, 0), lim.max_blocks_per_sm) for n in names]
    fig, ax = plt.subplots(figsize=(5.5, 2.2))
    colors = ["#d62728" if n == occ.limiter else "#1f77b4" for n in names]
    ax.barh(names, values, color=colors)
    ax.set_xlim(0, lim.max_blocks_per_sm + 1)
    ax.set_xlabel("blocks per SM each resource allows (red: the limit)")
    fig.tight_layout()
    display(fig)
    plt.close(fig)


# --- agreement with CUDA itself (GPU only) ---------------------------------------------------------

# the probe kernel check_against_cuda compiles for each case (under kernels/cuda/)
PROBE_SOURCE = "common/occupancy_probe.cu"

# (threads per block, target registers per thread, dynamic shared memory in bytes)
CHECK_CASES: tuple[tuple[int, int, int], ...] = (
    (32, 32, 0), (128, 32, 0), (256, 32, 0), (1024, 32, 0), (256, 40, 0), (256, 64, 0), (128, 72, 0),
    (512, 96, 0), (96, 128, 0), (1024, 64, 0), (64, 168, 0), (128, 255, 0), (256, 32, 8 * KB),
    (256, 32, 40 * KB), (128, 32, 76 * KB), (64, 32, 114 * KB), (256, 48, 100 * KB),
)


def check_against_cuda(limits: GpuLimits | None = None,
                       cases: tuple[tuple[int, int, int], ...] = CHECK_CASES) -> list[dict[str, Any]]:
    """Compare :func:`occupancy` with CUDA's own answer for real kernels on this GPU.

    Each case compiles a probe kernel capped at the target register count, reads the register count
    and static shared memory the compiler really produced, and asks the driver
    (``cuOccupancyMaxActiveBlocksPerMultiprocessor``) how many blocks fit.
    """
    from .backend import require_gpu

    require_gpu("check_against_cuda")
    import cupy

    lim = limits or GpuLimits.from_device()
    rows = []
    for threads, target, dynamic in cases:
        if dynamic > lim.max_shared_per_block or threads > lim.max_threads_per_block:
            continue
        raw = cupy.RawKernel(source(PROBE_SOURCE), "occupancy_probe",
                             options=(f"-DNV={max(target - 8, 4)}", f"--maxrregcount={target}"))
        regs, static = int(raw.num_regs), int(raw.shared_size_bytes)
        if static + dynamic > 48 * KB:
            raw.max_dynamic_shared_size_bytes = dynamic  # the opt-in a real launch needs as well
        cuda_blocks = int(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            raw.kernel.ptr, threads, dynamic))
        ours = occupancy(threads, regs, static + dynamic, lim)
        rows.append({
            "threads": threads, "target registers": target, "registers": regs,
            "static shared": static, "dynamic shared": dynamic, "cuda blocks/SM": cuda_blocks,
            "our blocks/SM": ours.blocks_per_sm, "limiter": ours.limiter, "agree": cuda_blocks == ours.blocks_per_sm,
        })
    return rows
