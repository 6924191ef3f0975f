"""The occupancy rules: how many blocks of a kernel fit on an SM of given limits, and which resource stops more.

This module knows no device (``kernels.occupancy`` adds the current GPU, the widgets and the check against
CUDA), so the T4 profile (``kernels.profile``) can answer CUDA's occupancy question with it.

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

__all__ = ["KB", "GpuLimits", "Occupancy", "occupancy_for"]

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


def occupancy_for(threads_per_block: int, regs_per_thread: int | None, shared_per_block: int | None,
                  lim: GpuLimits) -> Occupancy:
    """Resident blocks per SM on the GPU ``lim`` describes (see ``kernels.occupancy.occupancy``, which
    also takes a compute capability or the current GPU). None for the registers or the shared memory
    means unknown: the result is an upper bound, and its limiter says so."""
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
    occ = occupancy_for(threads, regs or 0, smem or 0, lim)
    if not occ.valid:
        return occ
    known = {name: n for name, n in occ.block_limits.items() if name not in ("registers", "shared memory")
             or (name == "registers" and regs is not None) or (name == "shared memory" and smem is not None)}
    return replace(occ, limiter=f"{occ.limiter} (an upper bound: {unknown} unknown)", block_limits=known,
                   explanation=f"{occ.explanation}; the {unknown} per block are unknown, so this is at most "
                               "what the SM holds")


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
