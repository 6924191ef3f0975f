"""The kernels that validate the traffic model against Nsight Compute and compute-sanitizer.

Each entry names a course kernel (its source exists once, under kernels/cuda/) and one launch of a
fixed, small but realistic size. The same launch runs in three places: on a GPU under ``ncu`` and
``compute-sanitizer`` (benchmarks/ncu_validate.py), through ``kernels.analyze`` on the CPU backend,
and in the tests (tests/test_traffic_testset.py), which compare the analysis with the numbers
recorded in ``ncu_h100.json`` beside this file (derived by hand until a GPU run replaces them with
measured ones).

``RULES`` says how a metric is compared; ``TestKernel.informational`` lists metrics that depend on
the GPU compiler's choices (nvcc may merge four scalar shared loads into one 16-byte load where
the CPU compiler keeps four, or predicate a short branch so that warps with no active lane still
issue it), reported but not required to match.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from kernels.cpu.raw import global_kernels
from kernels.sources import name_expressions_in, source
from kernels.traffic.analysis import analyze, source_of

EXPECTATIONS = Path(__file__).with_name("ncu_h100.json")


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, ...]
    block: tuple[int, ...]
    args: tuple[Any, ...]
    shared_mem: int = 0


@dataclass(frozen=True)
class TestKernel:
    """One kernel of the test set and how to launch it."""

    name: str
    source: str  # under kernels/cuda/
    kernel: str  # kernel name or name expression
    what: str
    make: Callable[[np.random.Generator], Launch]
    informational: frozenset[str] = field(default_factory=frozenset)


def _rng(seed: int = 7) -> np.random.Generator:
    return np.random.default_rng(seed)


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


N_COPY = 32768


def _copy_strided(stride: int) -> Callable[[np.random.Generator], Launch]:
    def make(rng: np.random.Generator) -> Launch:
        n = N_COPY
        return Launch((n // 256,), (256,), (_f32(rng, (n - 1) * stride + 1), np.zeros(n, np.float32), n, stride))
    return make


def _copy_offset(rng: np.random.Generator) -> Launch:
    n = N_COPY
    return Launch((n // 256,), (256,), (_f32(rng, n + 1), np.zeros(n, np.float32), n, 1))


def _copy_float2(rng: np.random.Generator) -> Launch:
    n = N_COPY // 2
    return Launch((n // 256,), (256,), (_f32(rng, n, 2), np.zeros((n, 2), np.float32), n))


def _copy_float4(rng: np.random.Generator) -> Launch:
    n = N_COPY
    return Launch((n // 4 // 256,), (256,), (_f32(rng, n), np.zeros(n, np.float32), n))


def _aos(rng: np.random.Generator) -> Launch:
    n = N_COPY
    return Launch((n // 256,), (256,), (_f32(rng, n, 4), np.zeros(n, np.float32), n))


def _gemv(rng: np.random.Generator) -> Launch:
    m, n = 256, 128
    return Launch((m // 128,), (128,), (_f32(rng, m, n), _f32(rng, n), np.zeros(m, np.float32), m, n))


def _transpose(rng: np.random.Generator) -> Launch:
    rows = cols = 256
    return Launch((cols // 32, rows // 32), (32, 8), (_f32(rng, rows, cols), np.zeros((cols, rows), np.float32),
                                                     rows, cols))


def _matmul_naive(rng: np.random.Generator) -> Launch:
    m = n = 64
    k = 32
    return Launch((n // 32, m // 8), (32, 8), (_f32(rng, m, k), _f32(rng, k, n), np.zeros((m, n), np.float32),
                                              m, n, k))


def _gemm_smem(rng: np.random.Generator) -> Launch:
    m = n = 64
    k = 32
    return Launch((n // 32, m // 32), (32, 32), (_f32(rng, m, k), _f32(rng, k, n), np.zeros((m, n), np.float32),
                                                m, n, k, np.float32(1.0), np.float32(0.0)))


def _reduce(rng: np.random.Generator) -> Launch:
    n, block = N_COPY, 256
    return Launch((n // block,), (block,), (_f32(rng, n), np.zeros(n // block, np.float32), n), 4 * block)


def _bank_stride(stride: int) -> Callable[[np.random.Generator], Launch]:
    def make(rng: np.random.Generator) -> Launch:
        return Launch((2,), (256,), (_f32(rng, 1024), stride, 8, np.zeros(512, np.float32)))
    return make


def _tile_transpose(rng: np.random.Generator) -> Launch:
    ntiles = 16
    return Launch((ntiles,), (32, 8), (_f32(rng, ntiles, 32, 32), np.zeros((ntiles, 32, 32), np.float32), ntiles, 2))


def _shared_width(width: int, stride: int) -> Callable[[np.random.Generator], Launch]:
    def make(rng: np.random.Generator) -> Launch:
        n = 512
        return Launch((n // 256,), (256,), (_f32(rng, n, width), np.zeros((n, width), np.float32), stride))
    return make


_COMPILER_FUSES_SHARED_LOADS = frozenset({"shared_load_requests", "shared_load_wavefronts"})
# Nsight Compute counts a warp's shared-memory instruction as one request even when the compiler
# turned a short `if` into predication and every lane of the warp is off: on an H100 every warp of
# the tree reductions issued the load and store of every step (16512 loads where 3200 have an active
# lane), and the unrolled column reads of tile_transpose issued 12 loads per warp for 8. The
# analysis counts only instructions with an active lane; wavefronts (data moved) agree exactly.
_COMPILER_PREDICATES_SHARED = frozenset({"shared_load_requests", "shared_store_requests"})

TEST_SET: tuple[TestKernel, ...] = (
    TestKernel("copy_coalesced", "coalescing/access_patterns.cu", "copy_strided", "copy, stride 1", _copy_strided(1)),
    TestKernel("copy_stride_2", "coalescing/access_patterns.cu", "copy_strided", "copy, stride 2", _copy_strided(2)),
    TestKernel("copy_stride_4", "coalescing/access_patterns.cu", "copy_strided", "copy, stride 4", _copy_strided(4)),
    TestKernel("copy_stride_8", "coalescing/access_patterns.cu", "copy_strided", "copy, stride 8", _copy_strided(8)),
    TestKernel("copy_stride_32", "coalescing/access_patterns.cu", "copy_strided", "copy, stride 32",
               _copy_strided(32)),
    TestKernel("copy_offset_1", "coalescing/access_patterns.cu", "copy_offset", "copy from x + 1 (misaligned)",
               _copy_offset),
    TestKernel("copy_float2", "dram_bursts/copy_batched.cu", "copy_batched<float2, 1>", "copy with 8-byte accesses",
               _copy_float2),
    TestKernel("copy_float4", "dram_bursts/copy_vec4.cu", "copy_vec4", "copy with float4 accesses", _copy_float4),
    TestKernel("aos_read_x", "coalescing/aos_soa.cu", "scale_x_aos", "one field of an array of structs", _aos),
    TestKernel("column_read", "coalescing/gemv.cu", "gemv_thread_per_row", "lanes read down a column (A[row][j])",
               _gemv),
    TestKernel("transpose_naive", "coalescing/transpose.cu", "transpose_naive", "naive transpose", _transpose),
    TestKernel("transpose_tiled", "coalescing/transpose.cu", "transpose_tiled<32, 8, 0>",
               "tiled transpose, tile[32][32]", _transpose),
    TestKernel("transpose_padded", "coalescing/transpose.cu", "transpose_tiled<32, 8, 1>",
               "tiled transpose, tile[32][33]", _transpose),
    TestKernel("matmul_naive", "coalescing/matmul_naive.cu", "matmul_naive", "naive GEMM", _matmul_naive),
    TestKernel("gemm_smem", "gemm/smem_tiled.cu", "gemm_smem<32>", "shared-memory GEMM, 32 x 32 tiles", _gemm_smem,
               _COMPILER_FUSES_SHARED_LOADS),
    TestKernel("reduce_interleaved", "reduce/tree.cu", "reduce_interleaved", "tree reduction, t % 2s", _reduce,
               _COMPILER_PREDICATES_SHARED),
    TestKernel("reduce_interleaved_strided", "reduce/tree.cu", "reduce_interleaved_strided",
               "tree reduction, interleaved addressing (2 s t)", _reduce,
               _COMPILER_PREDICATES_SHARED),
    TestKernel("reduce_sequential", "reduce/tree.cu", "reduce_sequential", "tree reduction, sequential addressing",
               _reduce, _COMPILER_PREDICATES_SHARED),
    *(TestKernel(f"bank_stride_{s}", "memory_hierarchy/bank_stride.cu", "bank_stride", f"shared reads, stride {s}",
                 _bank_stride(s)) for s in (0, 1, 2, 4, 8, 32)),
    *(TestKernel(f"tile_transpose_{m}", "memory_hierarchy/tile_transpose.cu", f"tile_transpose_{m}",
                 f"32 x 32 tile read by columns, {m}", _tile_transpose,
                 _COMPILER_PREDICATES_SHARED) for m in ("plain", "padded", "swizzled")),
    *(TestKernel(f"shared_float{w}_stride_{s}", "traffic/shared_widths.cu", f"shared_float{w}",
                 f"{4 * w}-byte shared accesses, stride {s}", _shared_width(w, s)) for w in (2, 4) for s in (1, 2)),
)


@dataclass(frozen=True)
class RaceKernel:
    """A kernel of traffic/races.cu with a planted race (or the fixed twin)."""

    name: str
    racy: bool  # by the CUDA memory model (a shared or global race within a block)
    shared: bool = True  # the race is on shared memory (compute-sanitizer's racecheck sees only those)

    source: str = "traffic/races.cu"

    def make(self, rng: np.random.Generator) -> Launch:
        return Launch((2,), (256,), (_f32(rng, 512), np.zeros(512, np.float32)))


RACE_SET: tuple[RaceKernel, ...] = (
    RaceKernel("missing_barrier", True), RaceKernel("with_barrier", False), RaceKernel("war_in_place", True),
    RaceKernel("warp_tail", True), RaceKernel("warp_tail_synced", False), RaceKernel("shuffle_only", True),
    RaceKernel("atomic_counter", False), RaceKernel("global_in_block", True, shared=False),
)

#: How a metric of the analysis is compared with the recorded one: exactly, or within a fraction.
#: Shared-memory instructions are counted by Nsight Compute as executed, including any that nvcc
#: predicates off for a whole warp; the model counts those with an active lane, hence a tolerance.
RULES: dict[str, float] = {
    "global_load_requests": 0.0, "global_load_sectors": 0.0,
    "global_store_requests": 0.0, "global_store_sectors": 0.0,
    "shared_load_requests": 0.10, "shared_store_requests": 0.10,
    "shared_load_wavefronts": 0.10, "shared_store_wavefronts": 0.10,
    "shared_load_bank_conflicts": 0.10, "shared_store_bank_conflicts": 0.10,
}


def by_name(name: str) -> TestKernel:
    for k in TEST_SET:
        if k.name == name:
            return k
    raise KeyError(f"no test-set kernel {name!r}; known: {', '.join(k.name for k in TEST_SET)}")


def launch_of(kernel: TestKernel | RaceKernel, seed: int = 7) -> Launch:
    return kernel.make(_rng(seed))


def kernel_name(kernel: TestKernel | RaceKernel) -> str:
    return kernel.kernel if isinstance(kernel, TestKernel) else kernel.name


def analyze_kernel(kernel: TestKernel | RaceKernel, **options: Any) -> Any:
    """``kernels.analyze`` of one test-set launch on the CPU backend (only the traced build is compiled:
    one per source file, with every kernel of the file)."""
    code = source(kernel.source)
    name = kernel_name(kernel)
    entries = tuple(dict.fromkeys([*name_expressions_in(code), *global_kernels(code), name]))
    launch = launch_of(kernel)
    return analyze(replace(source_of(code, name, kernel.source), entries=entries), launch.grid, launch.block,
                   launch.args, launch.shared_mem, **options)


def matches(metric: str, ours: float, theirs: float) -> bool:
    """True when our value agrees with the recorded one under ``RULES`` (exact when unlisted)."""
    tolerance = RULES.get(metric, 0.0)
    if tolerance == 0.0:
        return int(ours) == int(theirs)
    return abs(ours - theirs) <= max(tolerance * abs(theirs), 1.0)


def expectations(path: Path = EXPECTATIONS) -> dict[str, Any]:
    """The recorded expectations (schema: see benchmarks/ncu_validate.py)."""
    return json.loads(path.read_text(encoding="utf-8"))
