"""The occupancy calculator: how many blocks of a kernel fit on one SM, and which resource stops more.

The rules are the ones CUDA itself uses, so the numbers agree with
``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` (``check_against_cuda`` proves it on a GPU):

* per-SM and per-block limits: CUDA C++ Programming Guide, "Technical Specifications per Compute
  Capability" (resident blocks, warps and threads per SM, 64 K registers per SM and per block, 255
  registers per thread, shared memory per SM and per block);
* allocation rules: the CUDA occupancy calculator (``cuda_occupancy.h``): registers are allocated per
  warp in units of 256 and each SM's register file is split over 4 sub-partitions; shared memory is
  allocated in units of 256 bytes (cc 7.x) or 128 bytes (cc >= 8.0), and from cc 8.0 the driver
  reserves 1 KB of shared memory for every block.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .explorer import Explorer

__all__ = ["GpuLimits", "Occupancy", "occupancy", "occupancy_explorer", "occupancy_panel",
           "check_against_cuda"]

KB = 1024

# cc: (max threads/SM, max blocks/SM, shared/SM KB, max shared/block KB (opt-in),
#      shared allocation unit, reserved shared/block) -- Programming Guide table + cuda_occupancy.h.
_TABLE: dict[str, tuple[int, int, int, int, int, int]] = {
    "7.5": (1024, 16, 64, 64, 256, 0),
    "8.0": (2048, 32, 164, 163, 128, 1 * KB),
    "8.6": (1536, 16, 100, 99, 128, 1 * KB),
    "8.9": (1536, 24, 100, 99, 128, 1 * KB),
    "9.0": (2048, 32, 228, 227, 128, 1 * KB),
}


@dataclass(frozen=True)
class GpuLimits:
    """The per-SM resources and allocation rules of one compute capability (or one real device)."""

    compute_capability: str
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    shared_per_sm: int                 # bytes, the largest shared-memory carveout
    max_shared_per_block: int          # bytes, the opt-in limit (above 48 KB needs cudaFuncSetAttribute)
    shared_alloc_unit: int             # bytes
    reserved_shared_per_block: int     # bytes the driver keeps for every block (cc >= 8.0)
    regs_per_sm: int = 65536
    max_regs_per_block: int = 65536
    max_regs_per_thread: int = 255
    reg_alloc_unit: int = 256          # registers, allocated per warp
    warp_alloc_granularity: int = 4    # register-file sub-partitions a block's warps are spread over
    max_threads_per_block: int = 1024
    warp_size: int = 32
    name: str = ""

    @classmethod
    def for_compute_capability(cls, cc: str | float | tuple[int, int]) -> "GpuLimits":
        """The documented limits of a compute capability: "7.5" (T4), "8.0", "8.6", "8.9", "9.0" (H100)."""
        key = _cc_key(cc)
        if key not in _TABLE:
            raise ValueError(f"no occupancy table for compute capability {key}; known: {', '.join(_TABLE)}")
        threads, blocks, smem_sm, smem_block, unit, reserved = _TABLE[key]
        return cls(
            compute_capability=key, max_threads_per_sm=threads, max_warps_per_sm=threads // 32,
            max_blocks_per_sm=blocks, shared_per_sm=smem_sm * KB, max_shared_per_block=smem_block * KB,
            shared_alloc_unit=unit, reserved_shared_per_block=reserved, name=f"compute capability {key}",
        )

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


def _cc_key(cc: Any) -> str:
    if isinstance(cc, tuple):
        return f"{cc[0]}.{cc[1]}"
    text = str(cc).strip()
    if "." not in text and text.isdigit() and len(text) >= 2:  # "90" as in sm_90
        return f"{text[:-1]}.{text[-1]}"
    return text


def _nearest_known(cc: str) -> str:
    """The newest tabulated capability not above ``cc`` (for rules the device cannot report)."""
    def as_tuple(c: str) -> tuple[int, ...]:
        return tuple(int(p) for p in c.split("."))
    older = [k for k in _TABLE if as_tuple(k) <= as_tuple(cc)]
    return max(older, key=as_tuple) if older else "7.5"


def _get(info: Any, *names: str) -> Any:
    for name in names:
        value = info.get(name) if isinstance(info, dict) else getattr(info, name, None)
        if value is not None:
            return value
    return None


@dataclass(frozen=True)
class Occupancy:
    """The result for one launch configuration; ``block_limits`` is what each resource alone allows."""

    blocks_per_sm: int
    warps_per_sm: int
    occupancy: float                   # fraction of the SM's warp slots in use, 0..1
    limiter: str                       # "warps", "blocks", "registers", "shared memory" or the invalid input
    explanation: str
    block_limits: dict[str, int] = field(default_factory=dict)
    registers_per_block: int = 0       # as allocated (rounded per warp)
    shared_per_block: int = 0          # as allocated (reserve added, rounded to the unit)

    @property
    def valid(self) -> bool:
        return self.blocks_per_sm > 0

    @property
    def percent(self) -> float:
        return 100.0 * self.occupancy


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(threads_per_block: int, regs_per_thread: int | None, shared_per_block: int | None = 0,
              limits: GpuLimits | str | None = None) -> Occupancy:
    """Resident blocks per SM for a kernel, computed like ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``.

    ``shared_per_block`` is static plus dynamic shared memory in bytes. ``limits`` is a GpuLimits, a
    compute capability string, or None for the current GPU (compute capability 9.0 without one).
    None for the registers or the shared memory means unknown (a ``resource_report`` made without a
    compiler): the result leaves that resource out, so it is an upper bound, and its limiter says so.
    """
    lim = _resolve(limits)
    if regs_per_thread is None or shared_per_block is None:
        return _upper_bound(threads_per_block, regs_per_thread, shared_per_block, lim)
    threads, regs, smem = int(threads_per_block), int(regs_per_thread), int(shared_per_block)

    def invalid(limiter: str, why: str) -> Occupancy:
        return Occupancy(0, 0, 0.0, limiter, why)

    if threads < 1:
        return invalid("threads", "a block needs at least one thread")
    if threads > lim.max_threads_per_block:
        return invalid("threads", f"{threads} threads per block is more than the limit of "
                                  f"{lim.max_threads_per_block}: the launch fails")
    if regs < 0 or regs > lim.max_regs_per_thread:
        return invalid("registers", f"{regs} registers per thread is outside 0..{lim.max_regs_per_thread}")
    if smem < 0 or smem > lim.max_shared_per_block:
        return invalid("shared memory", f"{smem / KB:g} KB of shared memory per block is more than the "
                                        f"{lim.max_shared_per_block / KB:g} KB a block may use: the launch fails")

    warps_per_block = -(-threads // lim.warp_size)

    # Warp slots and block slots.
    by_warps = lim.max_warps_per_sm // warps_per_block
    by_blocks = lim.max_blocks_per_sm

    # Registers: allocated per warp in units of reg_alloc_unit, in each of the SM's sub-partitions.
    regs_per_warp = _round_up(regs * lim.warp_size, lim.reg_alloc_unit)
    regs_block = regs_per_warp * warps_per_block
    regs_checked = regs_per_warp * _round_up(warps_per_block, lim.warp_alloc_granularity)
    if regs_per_warp == 0:
        by_regs = 2**31 - 1
    elif regs_checked > lim.max_regs_per_block or regs_block > lim.max_regs_per_block:
        return Occupancy(0, 0, 0.0, "registers",
                         f"{threads} threads x {regs} registers needs {regs_checked} registers, more than "
                         f"the {lim.max_regs_per_block} one block may have: the launch fails "
                         f"('too many resources requested for launch')", registers_per_block=regs_block)
    else:
        warps_per_partition = (lim.regs_per_sm // lim.warp_alloc_granularity) // regs_per_warp
        by_regs = warps_per_partition * lim.warp_alloc_granularity // warps_per_block

    # Shared memory: the per-block reserve is added, then rounded up to the allocation unit.
    smem_alloc = _round_up(smem + lim.reserved_shared_per_block, lim.shared_alloc_unit)
    by_smem = lim.shared_per_sm // smem_alloc if smem_alloc else 2**31 - 1

    block_limits = {"warps": by_warps, "blocks": by_blocks, "registers": by_regs, "shared memory": by_smem}
    blocks = min(block_limits.values())
    limiter = next(name for name, n in block_limits.items() if n == blocks)
    warps = blocks * warps_per_block
    fraction = warps / lim.max_warps_per_sm
    explanation = _explain(limiter, blocks, warps_per_block, regs_per_warp, smem_alloc, lim)
    return Occupancy(blocks, warps, fraction, limiter, explanation, block_limits, regs_block, smem_alloc)


def _upper_bound(threads: int, regs: int | None, smem: int | None, lim: GpuLimits) -> Occupancy:
    """The occupancy with the unknown resources left out: what the known ones allow at most."""
    unknown = " and ".join(name for name, value in (("registers", regs), ("shared memory", smem)) if value is None)
    occ = occupancy(threads, regs or 0, smem or 0, lim)
    if not occ.valid:
        return occ
    known = {name: n for name, n in occ.block_limits.items() if name not in ("registers", "shared memory")
             or (name == "registers" and regs is not None) or (name == "shared memory" and smem is not None)}
    return replace(occ, limiter=f"{occ.limiter} (an upper bound: {unknown} unknown)", block_limits=known,
                   explanation=f"{occ.explanation}; the {unknown} per block are unknown, so this is at most "
                               "what the SM holds")


def _resolve(limits: GpuLimits | str | None) -> GpuLimits:
    if isinstance(limits, GpuLimits):
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


def _explain(limiter: str, blocks: int, warps_per_block: int, regs_per_warp: int, smem_alloc: int,
             lim: GpuLimits) -> str:
    """One sentence a reader can check with pencil and paper."""
    if limiter == "warps":
        return (f"warps: an SM holds {lim.max_warps_per_sm} warps ({lim.max_threads_per_sm} threads) and each "
                f"block has {warps_per_block}, so {blocks} blocks fit")
    if limiter == "blocks":
        return f"blocks: an SM holds at most {lim.max_blocks_per_sm} blocks, however small they are"
    if limiter == "registers":
        per_part = lim.regs_per_sm // lim.warp_alloc_granularity
        return (f"registers: each warp is given {regs_per_warp} registers; each of the "
                f"{lim.warp_alloc_granularity} register-file quarters ({per_part}) holds "
                f"{per_part // regs_per_warp} such warps, so {blocks} blocks of {warps_per_block} warps fit")
    return (f"shared memory: each block takes {smem_alloc / KB:g} KB (with the reserve and rounding) of the "
            f"SM's {lim.shared_per_sm / KB:g} KB, so {blocks} blocks fit")


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

_PROBE = r"""
extern "C" __global__ void occupancy_probe(const float* __restrict__ in, float* out, int n)
{
    extern __shared__ float dynamic_smem[];
    float v[NV];
    #pragma unroll
    for (int i = 0; i < NV; ++i) v[i] = in[(threadIdx.x + i * 37) % n];
    #pragma unroll
    for (int r = 0; r < 3; ++r) {
        #pragma unroll
        for (int i = 0; i < NV; ++i) v[i] = fmaf(v[i], v[(i + 1) % NV], v[(i + 5) % NV]);
    }
    float s = 0.0f;
    #pragma unroll
    for (int i = 0; i < NV; ++i) s += v[i] * (float)(i + 1);
    if (n < 0) dynamic_smem[threadIdx.x] = s;
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""

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
        raw = cupy.RawKernel(_PROBE, "occupancy_probe",
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
