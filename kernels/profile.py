"""Run a big GPU as if it were a T4: the code a T4 gets, under a T4's limits.

Colab's free GPU is a T4 (compute capability 7.5). Chapters and exercise checks branch on what the
device reports (no ``cp.async`` below 8.0, 64 KB of shared memory per block, 40 SMs, a 4 MB L2), so
on an H100 or H200 those T4 branches never run. Under the T4 profile they do:

    COURSE_GPU_PROFILE=t4 jupyter lab                       # for a whole process (and its notebooks)
    python tools/t4_profile.py                              # every chapter and exercise check, recorded
    kernels.use_profile("t4")                               # from here on, in this process
    with kernels.gpu_profile("t4"): ...                     # for a block of code

What the profile changes, on the GPU backend only:

- every kernel CuPy compiles (``load_kernel``, ``cupy.RawKernel``, CuPy's own elementwise kernels) is
  compiled for ``compute_75``: PTX that the driver JIT-compiles for the real GPU, so no instruction
  newer than sm_75 can slip in; ``resource_report`` reports ptxas's numbers for sm_75;
- ``device_info()``, and everything that decides from it (``GpuLimits.from_device``, the GEMM and
  softmax launch rules, the exercise checks), and the launch checks of ``load_kernel`` see a T4:
  the numbers in :data:`T4`;
- CuPy's memory pool is capped at the T4's memory, so a cell that would run out of memory on a T4
  runs out here too.

What it cannot change: the speed (every time measured under the profile is the big GPU running T4
code, never a T4 measurement: ``device_info().name`` reads "T4 profile on NVIDIA H200" and
``provenance()`` records the profile), and what the driver computes itself from the real GPU
(CUDA's occupancy calculator, the copy engines, the L2 that the timing flush has to clear). On the
CPU backend the profile changes nothing: ``device_info()`` keeps describing the CPU backend, whose
limits are the ones its launches are checked against.

Where the T4's numbers come from:

- NVIDIA, CUDA C++ Programming Guide, table "Technical Specifications per Compute Capability",
  column 7.5: 1024 threads per block; 1024 resident threads (32 warps) and 16 resident blocks per
  SM; 64 K 32-bit registers per SM and per block; 64 KB of shared memory per SM and per block, of
  which a block gets 48 KB unless the kernel opts in (cudaFuncAttributeMaxDynamicSharedMemorySize);
  warp size 32.
- NVIDIA, T4 Tensor Core GPU datasheet: 2,560 CUDA cores, 16 GB of GDDR6, 320 GB/s.
- NVIDIA, Turing GPU architecture whitepaper, appendix (Tesla T4): 40 SMs of 64 FP32 cores, 4096 KB
  of L2, a 256-bit GDDR6 interface, a 1590 MHz boost clock.
- What CUDA reports for a T4 (cudaDeviceProp): a memory clock of 5001 MHz (2 x 5001 MHz x 256 bit / 8
  = 320 GB/s, the datasheet's figure) and, on Colab, 15,102 MiB of total memory (the datasheet's
  16 GB less what the driver keeps with ECC on).
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterator

from .occupancy_rules import GpuLimits, occupancy_for

if TYPE_CHECKING:
    from .launch import LaunchLimits
    from .device import DeviceInfo

ENV_VAR = "COURSE_GPU_PROFILE"

KIB = 1024


@dataclass(frozen=True)
class GpuProfile:
    """The limits and sizes of one GPU that a bigger GPU pretends to be (bytes, kHz, bits)."""

    key: str
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int
    regs_per_block: int
    shared_per_sm: int
    shared_per_block: int
    shared_per_block_optin: int
    l2_bytes: int
    memory_bytes: int
    memory_clock_khz: int
    memory_bus_bits: int
    sm_clock_khz: int
    datasheet_gbps: float

    @property
    def cc_digits(self) -> str:
        """"75": the compute capability as CUDA's architecture names spell it."""
        return f"{self.compute_capability[0]}{self.compute_capability[1]}"

    @property
    def ptx_arch(self) -> str:
        """The virtual architecture every launched kernel is compiled for (PTX, JIT-compiled by the driver)."""
        return f"compute_{self.cc_digits}"

    @property
    def sm_arch(self) -> str:
        """The real architecture ptxas reports registers and spills for (a cubin that is never launched)."""
        return f"sm_{self.cc_digits}"

    def label(self, real_gpu: str) -> str:
        """What the GPU is called under the profile: it says both what runs and what it pretends to be."""
        return f"{self.key.upper()} profile on {real_gpu}"


#: The T4 (Turing, TU104); the module's docstring gives the source of every number.
T4 = GpuProfile(
    key="t4",
    name="Tesla T4",
    compute_capability=(7, 5),
    sm_count=40,
    warp_size=32,
    max_threads_per_block=1024,
    max_threads_per_sm=1024,
    max_warps_per_sm=32,
    max_blocks_per_sm=16,
    regs_per_sm=65536,
    regs_per_block=65536,
    shared_per_sm=64 * KIB,
    shared_per_block=48 * KIB,
    shared_per_block_optin=64 * KIB,
    l2_bytes=4096 * KIB,
    memory_bytes=15_102 * 2**20,
    memory_clock_khz=5_001_000,
    memory_bus_bits=256,
    sm_clock_khz=1_590_000,
    datasheet_gbps=320.0,
)

PROFILES: dict[str, GpuProfile] = {T4.key: T4}

_FOLLOW_ENV = object()  # use_profile was not called: the environment variable decides
_chosen: Any = _FOLLOW_ENV


def _lookup(name: str, where: str) -> GpuProfile:
    key = name.strip().lower()
    if key not in PROFILES:
        raise ValueError(f"{where}={name!r} is not a GPU profile; use one of {', '.join(PROFILES)}")
    return PROFILES[key]


def active_profile() -> GpuProfile | None:
    """The profile in force: the one ``use_profile`` chose, else COURSE_GPU_PROFILE's, else None."""
    if _chosen is not _FOLLOW_ENV:
        return _chosen
    value = os.environ.get(ENV_VAR, "").strip()
    return _lookup(value, ENV_VAR) if value else None


def use_profile(name: str | None) -> GpuProfile | None:
    """Switch the profile for this process: "t4", or None for the real GPU (whatever the environment says).

    ``load_kernel`` and CuPy compile again after a switch; kernel objects made before it keep the code
    they were compiled to, so switch before a chapter's first cell (or set COURSE_GPU_PROFILE). Returns
    the profile now in force.
    """
    global _chosen
    profile = None if name is None else _lookup(name, "use_profile")
    _chosen = profile
    _after_switch(profile)
    return profile


@contextlib.contextmanager
def gpu_profile(name: str | None) -> Iterator[GpuProfile | None]:
    """``with gpu_profile("t4"):`` runs the block under the profile and restores the previous choice."""
    global _chosen
    previous = _chosen
    try:
        yield use_profile(name)
    finally:
        _chosen = previous
        _after_switch(active_profile())


# --------------------------------------------------------------------------- what the package reads


def apply_to_device_info(info: "DeviceInfo") -> "DeviceInfo":
    """``info`` as the profile reports it: the profile's limits, sizes and clocks, named so nobody
    mistakes it for the real GPU. CUDA and CuPy versions and the copy engines stay the real ones."""
    if info.on_cpu_backend:
        return info
    profile = active_profile()
    if profile is None:
        return info
    major, minor = profile.compute_capability
    return replace(
        info, name=profile.label(info.name), compute_capability=f"{major}.{minor}", sm_count=profile.sm_count,
        warp_size=profile.warp_size, max_threads_per_block=profile.max_threads_per_block,
        max_threads_per_sm=profile.max_threads_per_sm, max_blocks_per_sm=profile.max_blocks_per_sm,
        regs_per_sm=profile.regs_per_sm, regs_per_block=profile.regs_per_block,
        shared_per_sm=profile.shared_per_sm, shared_per_block=profile.shared_per_block,
        shared_per_block_optin=profile.shared_per_block_optin, l2_bytes=profile.l2_bytes,
        memory_bytes=profile.memory_bytes, memory_clock_khz=profile.memory_clock_khz,
        memory_bus_bits=profile.memory_bus_bits, sm_clock_khz=profile.sm_clock_khz, profile=profile.key,
    )


def apply_to_launch_limits(limits: "LaunchLimits") -> "LaunchLimits":
    """The launch limits ``load_kernel`` checks against, the profile's where it has one."""
    profile = active_profile()
    if profile is None:
        return limits
    return replace(limits, max_threads_per_block=profile.max_threads_per_block,
                   max_shared_optin=profile.shared_per_block_optin, name=profile.label(limits.name))


def compile_arch(real_arch: str) -> str:
    """The ``sm_XX`` that ptxas reports resources for: the profile's, else ``real_arch``."""
    profile = active_profile()
    return profile.sm_arch if profile is not None else real_arch


def cupy_arch_option() -> tuple[str, str] | None:
    """(NVRTC -arch option, "ptx") for every kernel CuPy compiles under the profile; None without one.

    PTX for the profile's virtual architecture runs on every newer GPU (the driver compiles it). What
    the architecture lacks does not load, as on the profile's GPU: NVRTC rejects the newer intrinsics
    (``__reduce_add_sync`` needs compute_80), the driver's JIT the newer PTX instructions of inline
    assembly (``cp.async``).
    """
    profile = active_profile()
    return None if profile is None else (f"-arch={profile.ptx_arch}", "ptx")


# --------------------------------------------------------------------------- CuPy


_ORIGINALS: dict[str, Any] = {}


def install_in_cupy() -> None:
    """Make CuPy's compiler ask the profile for its target, and cap CuPy's memory pool.

    Called when the package first reaches a GPU and on every switch. CuPy has no public option for
    the target architecture, so its two private helpers that choose it are wrapped; without a profile
    the wrappers call the originals, so nothing changes. The names are checked, so a CuPy that renamed
    them fails here with a clear message instead of compiling for the wrong GPU.
    """
    import cupy

    wrap_cupy_compiler()
    wrap_cupy_occupancy()
    profile = active_profile()
    cupy.get_default_memory_pool().set_limit(size=profile.memory_bytes if profile is not None else 0)


def wrap_cupy_compiler() -> None:
    """Wrap the two helpers of CuPy's compiler that choose the target (once; a no-op without a profile)."""
    import cupy
    from cupy.cuda import compiler

    if not _ORIGINALS:
        missing = [n for n in ("_get_arch", "_get_arch_for_options_for_nvrtc") if not hasattr(compiler, n)]
        if missing:
            raise RuntimeError(f"the GPU profile cannot set CuPy {cupy.__version__}'s target: "
                               f"cupy.cuda.compiler has no {', '.join(missing)}")
        _ORIGINALS["_get_arch"] = compiler._get_arch
        _ORIGINALS["_get_arch_for_options_for_nvrtc"] = compiler._get_arch_for_options_for_nvrtc

        def get_arch() -> str:
            profile = active_profile()
            return profile.cc_digits if profile is not None else _ORIGINALS["_get_arch"]()

        def arch_option(arch: str | None = None) -> tuple[str, str]:
            return cupy_arch_option() or _ORIGINALS["_get_arch_for_options_for_nvrtc"](arch)

        compiler._get_arch = get_arch
        compiler._get_arch_for_options_for_nvrtc = arch_option


# CUfunction_attribute values (CUDA driver API): registers per thread, static shared bytes
_FUNC_NUM_REGS, _FUNC_SHARED_SIZE_BYTES = 4, 1


def profile_blocks_per_sm(profile: GpuProfile, threads: int, regs: int, shared_bytes: int) -> int:
    """Resident blocks per SM on the profile's GPU, by the package's occupancy calculator (the rules of
    ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``) with that GPU's documented limits; 0 when the
    block cannot run there at all, as CUDA answers."""
    limits = GpuLimits.for_compute_capability(profile.compute_capability)
    result = occupancy_for(threads, regs, shared_bytes, limits)
    return result.blocks_per_sm if result.valid else 0


def wrap_cupy_occupancy() -> None:
    """Answer CUDA's occupancy question for the profile's GPU, not the real one (once; without a
    profile the original answers). The kernel's registers are those of the real GPU's compile of the
    profile's PTX, which can differ from the profile GPU's own by a few."""
    if "occupancy" in _ORIGINALS:
        return
    try:
        from cupy.cuda import driver
    except ImportError:  # a CuPy without the driver module (a test double): nothing to answer for
        return
    original = _ORIGINALS["occupancy"] = driver.occupancyMaxActiveBlocksPerMultiprocessor

    def blocks_per_sm(func: int, block_size: int, dynamic_smem: int) -> int:
        profile = active_profile()
        if profile is None:
            return original(func, block_size, dynamic_smem)
        regs = driver.funcGetAttribute(_FUNC_NUM_REGS, func)
        static = driver.funcGetAttribute(_FUNC_SHARED_SIZE_BYTES, func)
        return profile_blocks_per_sm(profile, int(block_size), int(regs), int(static) + int(dynamic_smem))

    driver.occupancyMaxActiveBlocksPerMultiprocessor = blocks_per_sm


#: The package's caches of what was compiled or read for one target: a switch clears them.
SWITCH_CLEARS = (("kernels.compile", ("_load", "device_limits")), ("kernels.resources", ("_report",)),
                 ("kernels.ceilings", ("_measure",)))


def _after_switch(profile: GpuProfile | None) -> None:
    """Forget what was compiled or read for the previous target, and set CuPy up for the new one."""
    for module, names in SWITCH_CLEARS:
        loaded = sys.modules.get(module)
        for name in names:
            cached = getattr(loaded, name, None)
            if cached is not None and hasattr(cached, "cache_clear"):
                cached.cache_clear()
    # the backend, if it has been loaded (importing it here would make a cycle: it imports this
    # module); when it has not, its first probe sets CuPy up for the active profile
    backend = sys.modules.get("kernels.backend")
    if "cupy" not in sys.modules or backend is None:
        return
    if backend.gpu_available():
        import cupy

        cupy.clear_memo()  # CuPy remembers compiled modules by source, not by target
        install_in_cupy()


def provenance_note(profile: GpuProfile, real_gpu: str) -> str:
    """The sentence recorded with every run under the profile."""
    return (f"{profile.label(real_gpu)}: an {real_gpu} running code compiled for {profile.ptx_arch} under "
            f"a {profile.name}'s limits; its times are not {profile.name} measurements")


__all__ = ["ENV_VAR", "GpuProfile", "T4", "PROFILES", "active_profile", "use_profile", "gpu_profile",
           "apply_to_device_info", "apply_to_launch_limits", "compile_arch", "cupy_arch_option",
           "install_in_cupy", "provenance_note"]
