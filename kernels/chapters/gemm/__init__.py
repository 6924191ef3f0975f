"""Helpers of the "GEMM" chapter and of ``benchmarks/bench_gemm.py``.

What lives here, so that the chapter and the benchmark launch, check and time the same kernels the
same way:

- the counts: FLOPs, compulsory DRAM bytes, bytes a tiling requests from global memory;
- the rounding-error bound that sets the tolerance of every check (and an a-priori estimate of it),
  and the rounding of fp32 inputs to fp16, bf16 and tf32 for the precision box;
- one ``Family`` per kernel of ``kernels/cuda/gemm/`` (and the reused naive kernel): its template
  parameters, launch geometry, shared memory and the rules a configuration must satisfy;
- ``GemmKernel`` (and ``SplitKGemm``), which launch a configuration on CuPy arrays (or, for the FP32
  kernels, on the CPU backend's arrays);
- ``check_gemm``, ``sweep_measure``: the check before timing, and a Sweep's measure function;
- Python models of the kernels' shared-memory index maps, to count bank conflicts on the CPU;
- the ladder's default configurations and its bar chart.

Everything but the launchers is pure Python and NumPy, tested without a GPU (tests/test_gemm.py).
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# the rounding and bank models, under the names the chapter uses (gm.FLOAT32_U, gm.conflict_ways, ...)
from ...check import check_tolerance  # noqa: F401  (the GEMM checks' tolerance; tests use it from here)
from ...numerics import BFLOAT16_U, FLOAT16_U, FLOAT32_U, TF32_U, gamma  # noqa: F401
from ...traffic.banks import conflict_ways  # noqa: F401
from ...traffic.banks import wavefronts as shared_wavefronts  # noqa: F401

STATIC_SMEM_LIMIT = 48 * 1024
INT32_MAX = 2**31 - 1

# Awkward shapes every rung is checked on: 1, primes, and sizes just past multiples of 4, 16, 32, 128.
CHECK_SHAPES: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (33, 65, 17), (127, 129, 131),
                                                  (1000, 1001, 999))
# Cheaper shapes for checking each point of a sweep: the scalar path (odd sizes) and the 16-byte
# path (multiples of 8) with edge tiles in M and N.
SWEEP_CHECK_SHAPES: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (127, 129, 131), (264, 136, 72))


# ----------------------------------------------------------------------------- counts

def gemm_flops(M: int, N: int, K: int) -> int:
    """2 M N K: one multiply and one add per term of every dot product (the epilogue not counted)."""
    return 2 * M * N * K


def compulsory_bytes(M: int, N: int, K: int, in_bytes: int = 4, out_bytes: int = 4,
                     read_c: bool = False) -> int:
    """Bytes any GEMM must move to or from DRAM at least: A and B read once, C written once
    (and read once when beta != 0)."""
    return in_bytes * (M * K + K * N) + out_bytes * M * N * (2 if read_c else 1)


def requested_bytes(M: int, N: int, K: int, BM: int, BN: int, in_bytes: int = 4, out_bytes: int = 4) -> int:
    """Bytes the blocks of a BM x BN tiling request from global memory (L2 or DRAM): every block
    reads its BM rows of A and BN columns of B over the whole of K, so A is read ceil(N / BN) times
    and B ceil(M / BM) times; C is written once. BM = BN = 1 is one thread per element with no reuse."""
    return in_bytes * (M * K * math.ceil(N / BN) + K * N * math.ceil(M / BM)) + out_bytes * M * N


def tiling_intensity(BM: int, BN: int, in_bytes: int = 4) -> float:
    """FLOPs per byte requested from global memory by a BM x BN block tile, for large M, N, K:
    per step of k a block loads BM + BN values and does 2 BM BN FLOPs."""
    return 2 * BM * BN / (in_bytes * (BM + BN))


# ----------------------------------------------------------------------------- tolerances

def fp32_tolerance(K: int, u: float = FLOAT32_U) -> float:
    """Tolerance for ``kernels.check`` of a GEMM accumulated in fp32, inputs uniform in [-1, 1].

    An element is a sum of K products accumulated with fused multiply-adds, then scaled by alpha and
    added to beta C: at most K + 2 roundings, so |computed - exact| <= gamma_{K+2} sum_k |a_ik b_kj|
    (Higham, eq. 3.5). ``kernels.check`` measures errors against max(|c|, rms(C)). For inputs uniform
    in [-1, 1] the sum of |a b| is about K / 4 and rms(C) about sqrt(K) / 3, so the bound in those
    units is about 0.75 sqrt(K) gamma_{K+2}; the factor 2 and the 3 cover the spread of sum |a b| and
    small K, where a single product can exceed rms(C).
    """
    return gamma(K + 2, u) * (3.0 + 1.5 * math.sqrt(K))


def fp16_tolerance(K: int) -> float:
    """Tolerance of a tensor-core GEMM (fp16 inputs, fp32 accumulation) against the float64 product
    of the fp16-rounded inputs. The products of two fp16 values are exact in fp32; the accumulation
    rounds, and on NVIDIA tensor cores it may truncate rather than round to nearest (Fasi, Higham,
    Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ Comput. Sci. 2021), which
    doubles the per-addition error: the fp32 bound with u = 2^-23."""
    return fp32_tolerance(K, 2 * FLOAT32_U)


def round_to_bits(x: np.ndarray, kept_bits: int) -> np.ndarray:
    """float32 values rounded to nearest (ties to even) with only `kept_bits` of the 23 stored
    significand bits left, as float32. kept_bits = 10 is tf32, 7 is bf16. Exponent range unchanged."""
    if not 0 <= kept_bits <= 23:
        raise ValueError("kept_bits must be in 0..23")
    drop = 23 - kept_bits
    if drop == 0:
        return np.asarray(x, dtype=np.float32).copy()
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    half = (1 << (drop - 1)) - 1
    lsb = (bits >> drop) & 1
    rounded = ((bits + half + lsb) >> drop) << drop
    return (rounded & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def round_tf32(x: np.ndarray) -> np.ndarray:
    """What a tf32 tensor-core operation sees of float32 data: 10 stored significand bits."""
    return round_to_bits(x, 10)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """bfloat16 (7 stored significand bits, float32 range), returned as float32."""
    return round_to_bits(x, 7)


def round_fp16(x: np.ndarray) -> np.ndarray:
    """IEEE half precision (10 stored significand bits, 5 exponent bits: |x| <= 65504), as float32."""
    with np.errstate(over="ignore"):                 # beyond 65504: inf, as the conversion gives
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def input_rounding_errors(M: int, N: int, K: int, seed: int = 0) -> dict[str, float]:
    """Relative (Frobenius) error of C = A B when the float32 inputs, uniform in [-1, 1], are
    rounded to each format before an exact (float64) product: the error that the input format
    alone costs, whatever the accumulation."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    norm = np.linalg.norm(exact)
    errors = {}
    for name, fn in (("fp32", lambda x: x), ("tf32", round_tf32), ("bf16", round_bf16), ("fp16", round_fp16)):
        C = fn(A).astype(np.float64) @ fn(B).astype(np.float64)
        errors[name] = float(np.linalg.norm(C - exact) / norm)
    return errors


# ----------------------------------------------------------------------------- kernel families

Params = Mapping[str, int]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Family:
    """One GEMM kernel of the course: where it lives, its template parameters and its rules.

    Subclasses say how many threads a configuration has, its launch geometry and its shared memory;
    ``problems`` lists every rule a configuration breaks (an empty list: it can be launched).
    """

    key: str
    path: str
    name: str
    params: tuple[str, ...] = ()
    input_dtype: str = "float32"
    min_cc: tuple[int, int] = (7, 5)
    alpha_beta: bool = True
    description: str = ""

    # --- geometry (overridden) ---
    def threads(self, p: Params) -> int:
        raise NotImplementedError

    def block(self, p: Params) -> tuple[int, ...]:
        return (self.threads(p),)

    def grid(self, p: Params, M: int, N: int) -> tuple[int, ...]:
        BM, BN = self.block_tile(p)
        return (_ceil(N, BN), _ceil(M, BM))

    def block_tile(self, p: Params) -> tuple[int, int]:
        return p["BM"], p["BN"]

    def dynamic_smem(self, p: Params) -> int:
        """Bytes of dynamic shared memory a launch asks for (0 for kernels with static arrays)."""
        return 0

    def static_smem(self, p: Params) -> int:
        return 0

    def _rules(self, p: Params) -> list[str]:
        return []

    # --- common ---
    def expression(self, p: Params) -> str | None:
        """The name expression that instantiates the template (None: not a template)."""
        if not self.params:
            return None
        return f"{self.name}<{', '.join(str(int(p[k])) for k in self.params)}>"

    def label(self, p: Params) -> str:
        return self.expression(p) or self.name

    def problems(self, p: Params, limits: Any = None) -> list[str]:
        """Every reason why configuration `p` cannot run (on `limits`, a GpuLimits, if given)."""
        missing = [k for k in self.params if k not in p]
        if missing:
            return [f"missing parameter(s) {', '.join(missing)}"]
        if any(int(p[k]) <= 0 for k in self.params if k not in ("SPLIT", "LAYOUT")):
            return ["every size must be positive"]
        out = self._rules(p)
        if out:
            return out
        threads = self.threads(p)
        max_threads = getattr(limits, "max_threads_per_block", 1024)
        if threads % 32:
            out.append(f"{threads} threads is not a whole number of warps")
        if threads > max_threads:
            out.append(f"{threads} threads per block (at most {max_threads})")
        if self.static_smem(p) > STATIC_SMEM_LIMIT:
            out.append(f"{self.static_smem(p) / 1024:g} KB of static shared memory (at most 48 KB)")
        smem_limit = getattr(limits, "max_shared_per_block", None)
        if smem_limit is not None and self.dynamic_smem(p) > smem_limit:
            out.append(f"{self.dynamic_smem(p) / 1024:g} KB of shared memory (at most {smem_limit / 1024:g} KB "
                       f"per block here)")
        cc = getattr(limits, "compute_capability", None)
        if cc is not None and _cc_tuple(cc) < self.min_cc:
            out.append(f"needs compute capability {self.min_cc[0]}.{self.min_cc[1]} (this GPU: {cc})")
        return out


def has_cp_async(compute_capability: Any) -> bool:
    """cp.async (and so the kernels marked min_arch sm_80) needs compute capability 8.0 or later."""
    return _cc_tuple(compute_capability) >= (8, 0)


def _cc_tuple(cc: Any) -> tuple[int, int]:
    if isinstance(cc, tuple):
        return int(cc[0]), int(cc[1])
    major, _, minor = str(cc).partition(".")
    return int(major), int(minor or 0)


def _tile_rules(p: Params) -> list[str]:
    """Rules of the float4 register-tiled kernels (simt_tiles.cuh)."""
    out = []
    for k in ("TM", "TN", "BK"):
        if p[k] % 4:
            out.append(f"{k} = {p[k]} is not a multiple of 4 (float4 reads)")
    if p["BM"] % p["TM"] or p["BN"] % p["TN"]:
        out.append("BM must be a multiple of TM and BN of TN")
    return out


@dataclass(frozen=True)
class NaiveFamily(Family):
    """coalescing/matmul_naive.cu: one thread per element, blocks of 32 x 8 (C = A B only)."""

    def threads(self, p: Params) -> int:
        return 256

    def block(self, p: Params) -> tuple[int, ...]:
        return (32, 8)

    def grid(self, p: Params, M: int, N: int) -> tuple[int, ...]:
        return (_ceil(N, 32), _ceil(M, 8))

    def block_tile(self, p: Params) -> tuple[int, int]:
        return 1, 1             # no reuse: each thread loads its own row of A and column of B


@dataclass(frozen=True)
class SmemFamily(Family):
    def threads(self, p: Params) -> int:
        return p["TILE"] ** 2

    def block(self, p: Params) -> tuple[int, ...]:
        return (p["TILE"], p["TILE"])

    def block_tile(self, p: Params) -> tuple[int, int]:
        return p["TILE"], p["TILE"]

    def static_smem(self, p: Params) -> int:
        return 8 * p["TILE"] ** 2


@dataclass(frozen=True)
class OneDFamily(Family):
    def threads(self, p: Params) -> int:
        return p["BM"] * p["BN"] // p["TM"]

    def static_smem(self, p: Params) -> int:
        return 4 * p["BK"] * (p["BM"] + p["BN"])

    def _rules(self, p: Params) -> list[str]:
        return [] if p["BM"] % p["TM"] == 0 else ["BM must be a multiple of TM"]


@dataclass(frozen=True)
class TwoDFamily(Family):
    def threads(self, p: Params) -> int:
        return (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])

    def static_smem(self, p: Params) -> int:
        return 4 * p["BK"] * (p["BM"] + p["BN"])

    def _rules(self, p: Params) -> list[str]:
        return [] if p["BM"] % p["TM"] == 0 and p["BN"] % p["TN"] == 0 else \
            ["BM must be a multiple of TM and BN of TN"]


@dataclass(frozen=True)
class Vec4Family(TwoDFamily):
    def static_smem(self, p: Params) -> int:
        pad = 4 if p.get("LAYOUT") == 1 else 0
        return 4 * p["BK"] * (p["BM"] + pad + p["BN"])

    def _rules(self, p: Params) -> list[str]:
        out = _tile_rules(p)
        if p["SPLIT"] not in (0, 1):
            out.append("SPLIT is 0 or 1")
        if p["LAYOUT"] not in (0, 1, 2):
            out.append("LAYOUT is 0, 1 or 2")
        if p["LAYOUT"] == 2 and p["BM"] % 32:
            out.append("the swizzled layout needs BM % 32 == 0")
        return out


@dataclass(frozen=True)
class DoubleBufferedFamily(TwoDFamily):
    def static_smem(self, p: Params) -> int:
        return 0

    def dynamic_smem(self, p: Params) -> int:
        return 2 * 4 * p["BK"] * (p["BM"] + p["BN"])

    def _rules(self, p: Params) -> list[str]:
        out = _tile_rules(p)
        if p["BM"] % 32:
            out.append("the swizzled A tile needs BM % 32 == 0")
        return out


@dataclass(frozen=True)
class CpAsyncFamily(DoubleBufferedFamily):
    def dynamic_smem(self, p: Params) -> int:
        return 4 * p["STAGES"] * p["BK"] * (p["BM"] + 4 + p["BN"])

    def _rules(self, p: Params) -> list[str]:
        out = _tile_rules(p)
        if p["BK"] % 8:
            out.append("BK must be a multiple of 8 (A is copied in slabs of 8 columns)")
        if p["STAGES"] < 2:
            out.append("a pipeline needs at least 2 stages")
        return out


@dataclass(frozen=True)
class WarpTiledFamily(Family):
    def threads(self, p: Params) -> int:
        return 32 * (p["BM"] // p["WM"]) * (p["BN"] // p["WN"])

    def grid(self, p: Params, M: int, N: int) -> tuple[int, ...]:
        return (_ceil(M, p["BM"]) * _ceil(N, p["BN"]),)

    def dynamic_smem(self, p: Params) -> int:
        return 2 * 4 * p["BK"] * (p["BM"] + p["BN"])

    def _rules(self, p: Params) -> list[str]:
        out = _tile_rules(p)
        if p["BM"] % p["WM"] or p["BN"] % p["WN"]:
            out.append("BM must be a multiple of WM and BN of WN")
        if p["WM"] % p["TM"] or p["WN"] % p["TN"] or (p["WM"] // p["TM"]) * (p["WN"] // p["TN"]) != 32:
            out.append("a WM x WN warp tile must hold exactly 32 thread tiles of TM x TN")
        if p["BM"] % 32:
            out.append("the swizzled A tile needs BM % 32 == 0")
        return out


@dataclass(frozen=True)
class WmmaFamily(Family):
    def threads(self, p: Params) -> int:
        return 32 * (p["BM"] // p["WM"]) * (p["BN"] // p["WN"])

    def grid(self, p: Params, M: int, N: int) -> tuple[int, ...]:
        return (_ceil(M, p["BM"]) * _ceil(N, p["BN"]),)

    def stages(self, p: Params) -> int:
        return p.get("STAGES", 2)

    def dynamic_smem(self, p: Params) -> int:
        stage = 2 * (p["BM"] * (p["BK"] + 8) + p["BK"] * (p["BN"] + 8))
        scratch = (self.threads(p) // 32) * 16 * 20 * 4
        return max(self.stages(p) * stage, scratch)

    def _rules(self, p: Params) -> list[str]:
        out = []
        for k in ("BK", "WM", "WN"):
            if p[k] % 16:
                out.append(f"{k} = {p[k]} is not a multiple of 16 (16 x 16 x 16 fragments)")
        if p["BM"] % p["WM"] or p["BN"] % p["WN"]:
            out.append("BM must be a multiple of WM and BN of WN")
        if "STAGES" in self.params and p["STAGES"] < 2:
            out.append("a pipeline needs at least 2 stages")
        return out


@dataclass(frozen=True)
class WarpPipelinedFamily(WarpTiledFamily):
    """warp_pipelined.cu: rung 7's tiles with paired lanes, register-pipelined fragments and
    unchecked interior blocks; BLOCKS is __launch_bounds__' minimum blocks per SM."""

    def dynamic_smem(self, p: Params) -> int:
        return 2 * 4 * p["BK"] * (p["BM"] + 4 + p["BN"])

    def _rules(self, p: Params) -> list[str]:
        out = _tile_rules(p)
        if p["BM"] % p["WM"] or p["BN"] % p["WN"]:
            out.append("BM must be a multiple of WM and BN of WN")
        if p["WM"] % p["TM"] or p["WN"] % p["TN"] or (p["WM"] // p["TM"]) * (p["WN"] // p["TN"]) != 32:
            out.append("a WM x WN warp tile must hold exactly 32 thread tiles of TM x TN")
        elif p["WM"] // p["TM"] < 2 or p["WN"] // p["TN"] < 2:
            out.append("the lanes must form at least 2 rows and 2 columns (lane pairs share reads)")
        if not out:
            threads = self.threads(p)
            if (p["BM"] * p["BK"] // 4) % threads or (p["BK"] * p["BN"] // 4) % threads:
                out.append("every thread must copy whole float4 of both tiles (BM BK / 4 and BK BN / 4 "
                           "multiples of the threads)")
        return out


@dataclass(frozen=True)
class WmmaPipelinedFamily(WmmaFamily):
    """wmma_pipelined.cu: each thread's 16-byte copies are fixed at compile time, so the block's
    threads must divide the chunks of both tiles and cover whole rows of chunks."""

    def _rules(self, p: Params) -> list[str]:
        out = super()._rules(p)
        if out:
            return out
        threads = self.threads(p)
        for what, rows, cols in (("A", p["BM"], p["BK"]), ("B", p["BK"], p["BN"])):
            per_row = cols // 8
            if threads % per_row or (rows * per_row) % threads:
                out.append(f"{threads} threads cannot copy the {rows} x {cols} tile of {what} in whole "
                           f"16-byte chunks, the same column each")
        return out


@dataclass(frozen=True)
class SplitKFamily(DoubleBufferedFamily):
    alpha_beta: bool = False


FAMILIES: dict[str, Family] = {f.key: f for f in (
    NaiveFamily("naive", "coalescing/matmul_naive.cu", "matmul_naive", alpha_beta=False,
                description="one thread per element of C"),
    SmemFamily("smem", "gemm/smem_tiled.cu", "gemm_smem", ("TILE",),
               description="shared-memory tiles"),
    OneDFamily("1d", "gemm/register_tiled.cu", "gemm_1d", ("BM", "BN", "BK", "TM"),
               description="TM outputs per thread"),
    TwoDFamily("2d", "gemm/register_tiled.cu", "gemm_2d", ("BM", "BN", "BK", "TM", "TN"),
               description="TM x TN outputs per thread"),
    Vec4Family("vec4", "gemm/vectorized.cu", "gemm_vec4", ("BM", "BN", "BK", "TM", "TN", "SPLIT", "LAYOUT"),
               description="16-byte loads, transposed A"),
    DoubleBufferedFamily("double_buffered", "gemm/double_buffered.cu", "gemm_double_buffered",
                         ("BM", "BN", "BK", "TM", "TN"), description="double buffering through registers"),
    CpAsyncFamily("cp_async", "gemm/double_buffered_cp_async.cu", "gemm_cp_async",
                  ("BM", "BN", "BK", "TM", "TN", "STAGES"), min_cc=(8, 0),
                  description="cp.async pipeline"),
    WarpTiledFamily("warp_tiled", "gemm/warp_tiled.cu", "gemm_warp_tiled",
                    ("BM", "BN", "BK", "WM", "WN", "TM", "TN"), description="warp tiles"),
    WmmaFamily("wmma", "gemm/wmma.cu", "gemm_wmma", ("BM", "BN", "BK", "WM", "WN"), input_dtype="float16",
               min_cc=(7, 0), description="tensor cores (WMMA), register staging"),
    WmmaFamily("wmma_cp_async", "gemm/wmma_cp_async.cu", "gemm_wmma_cp_async",
               ("BM", "BN", "BK", "WM", "WN", "STAGES"), input_dtype="float16", min_cc=(8, 0),
               description="tensor cores (WMMA), cp.async pipeline"),
    WarpPipelinedFamily("warp_pipelined", "gemm/warp_pipelined.cu", "gemm_warp_pipelined",
                        ("BM", "BN", "BK", "WM", "WN", "TM", "TN", "BLOCKS"),
                        description="warp tiles, paired lanes, register pipeline"),
    WmmaPipelinedFamily("wmma_pipelined", "gemm/wmma_pipelined.cu", "gemm_wmma_pipelined",
                        ("BM", "BN", "BK", "WM", "WN", "STAGES"), input_dtype="float16", min_cc=(8, 0),
                        description="tensor cores (WMMA), lean cp.async pipeline, fragment pipeline"),
    SplitKFamily("split_k", "gemm/split_k.cu", "gemm_split_k_partial", ("BM", "BN", "BK", "TM", "TN"),
                 description="split-K partial products"),
)}


# ----------------------------------------------------------------------------- the ladder

@dataclass(frozen=True)
class Rung:
    """One rung of the ladder: a label, a kernel family and its configuration."""

    label: str
    family: str
    params: Mapping[str, int] = field(default_factory=dict)

    @property
    def kernel_family(self) -> Family:
        return FAMILIES[self.family]


# The configurations the chapter's ladder uses: for the sweepable kernels, the fastest ones that
# benchmarks/bench_gemm.py measured on an H100 at 4096^3 (the old kernels in its full run, the
# newer ones, warp_pipelined and wmma_pipelined, in its --focus run).
DEFAULTS: dict[str, dict[str, int]] = {
    "naive": {},
    "smem": {"TILE": 32},
    "1d": {"BM": 64, "BN": 64, "BK": 8, "TM": 8},
    "2d": {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8},
    "vec4": {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8, "SPLIT": 0, "LAYOUT": 0},
    "conflict_free": {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8, "SPLIT": 1, "LAYOUT": 2},
    "double_buffered": {"BM": 128, "BN": 256, "BK": 8, "TM": 8, "TN": 8},
    "cp_async": {"BM": 128, "BN": 256, "BK": 32, "TM": 8, "TN": 8, "STAGES": 3},
    "warp_tiled": {"BM": 128, "BN": 128, "BK": 8, "WM": 64, "WN": 32, "TM": 8, "TN": 8},
    "warp_pipelined": {"BM": 128, "BN": 256, "BK": 8, "WM": 64, "WN": 64, "TM": 8, "TN": 16, "BLOCKS": 1},
    "wmma": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 32},
    "wmma_cp_async": {"BM": 128, "BN": 128, "BK": 64, "WM": 64, "WN": 64, "STAGES": 3},
    "wmma_pipelined": {"BM": 128, "BN": 256, "BK": 64, "WM": 64, "WN": 64, "STAGES": 3},
}

# Used instead of a default that a GPU cannot run (more shared memory per block than it allows:
# the H100 allows 227 KB, an L4 or A10 99 KB).
FALLBACKS: dict[str, dict[str, int]] = {
    "cp_async": {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "STAGES": 3},
    "wmma_cp_async": {"BM": 128, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "STAGES": 3},
    "wmma_pipelined": {"BM": 128, "BN": 128, "BK": 32, "WM": 64, "WN": 64, "STAGES": 3},
}


def default_params(key: str, limits: Any = None) -> dict[str, int]:
    """DEFAULTS[key], or FALLBACKS[key] when `limits` (a GpuLimits) rule the default out."""
    params = dict(DEFAULTS[key])
    fam = FAMILIES["vec4" if key == "conflict_free" else key]
    if limits is not None and key in FALLBACKS and fam.problems(params, limits):
        return dict(FALLBACKS[key])
    return params


def ladder(compute_capability: Any) -> list[Rung]:
    """The fp32 rungs for a GPU: cp.async only where the GPU has it (compute capability 8.0+)."""
    from kernels.occupancy import GpuLimits

    lim = GpuLimits.for_compute_capability(str(compute_capability))
    rungs = [Rung("1 naive", "naive"), Rung("2 shared tiles", "smem", DEFAULTS["smem"]),
             Rung("3a 1-D register tile", "1d", DEFAULTS["1d"]),
             Rung("3b 2-D register tile", "2d", DEFAULTS["2d"]),
             Rung("4 float4, transposed A", "vec4", DEFAULTS["vec4"]),
             Rung("5 no bank conflicts", "vec4", DEFAULTS["conflict_free"]),
             Rung("6 double buffered", "double_buffered", DEFAULTS["double_buffered"])]
    if _cc_tuple(compute_capability) >= (8, 0):
        rungs.append(Rung("6b cp.async pipeline", "cp_async", default_params("cp_async", lim)))
    rungs.append(Rung("7 warp tiles", "warp_tiled", DEFAULTS["warp_tiled"]))
    rungs.append(Rung("7b paired lanes, register pipeline", "warp_pipelined", DEFAULTS["warp_pipelined"]))
    return rungs


def tensor_core_rung(compute_capability: Any) -> Rung:
    """Rung 8: the pipelined cp.async kernel where the GPU has cp.async, register staging otherwise (T4)."""
    from kernels.occupancy import GpuLimits

    if _cc_tuple(compute_capability) >= (8, 0):
        lim = GpuLimits.for_compute_capability(str(compute_capability))
        return Rung("8 tensor cores (WMMA, cp.async pipeline)", "wmma_pipelined", default_params("wmma_pipelined", lim))
    return Rung("8 tensor cores (WMMA)", "wmma", DEFAULTS["wmma"])


def chapter_rungs(compute_capability: Any) -> list[Rung]:
    """Every rung kernel the chapter launches on a GPU of this compute capability, in the chapter's
    default configuration: the fp32 ladder (``ladder``) and the forms of rung 8 (register staging
    everywhere; from 8.0 on also the cp.async form and the pipelined one). The chapter's table of
    ptxas reports lists them for 9.0 (tests/test_gemm_resources.py checks it)."""
    from kernels.occupancy import GpuLimits

    lim = GpuLimits.for_compute_capability(str(compute_capability))
    rungs = ladder(compute_capability)
    rungs.append(Rung("8 tensor cores (WMMA)", "wmma", default_params("wmma", lim)))
    if _cc_tuple(compute_capability) >= (8, 0):
        rungs.append(Rung("8 tensor cores (WMMA, cp.async)", "wmma_cp_async", default_params("wmma_cp_async", lim)))
        rungs.append(Rung("8 tensor cores (WMMA, pipelined)", "wmma_pipelined", default_params("wmma_pipelined", lim)))
    return rungs


# ----------------------------------------------------------------------------- launching

def check_sizes(M: int, N: int, K: int) -> None:
    """The kernels index with int: refuse problems whose matrices have 2^31 elements or more."""
    for what, n in (("M", M), ("N", N), ("K", K)):
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"{what} must be a positive int, got {n!r}")
    for what, n in (("M * K", M * K), ("K * N", K * N), ("M * N", M * N)):
        if n > INT32_MAX:
            raise ValueError(f"{what} = {n} does not fit the kernels' int indices (at most 2^31 - 1)")


def _check_operand(name: str, a: Any, shape: tuple[int, int], dtype: str) -> None:
    if tuple(a.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(a.shape)}, expected {shape} (row-major, C = A B "
                         f"with A M x K, B K x N, C M x N)")
    if str(a.dtype) != dtype:
        raise ValueError(f"{name} is {a.dtype}, this kernel needs {dtype}")


class GemmKernel:
    """One configuration of one family, compiled and ready: ``kernel(A, B, C, M, N, K, alpha, beta)``."""

    def __init__(self, family: str | Family, params: Mapping[str, int] | None = None, *, limits: Any = None):
        from kernels.compile import load_kernel
        from kernels.occupancy import GpuLimits

        self.family = FAMILIES[family] if isinstance(family, str) else family
        self.limits = limits if limits is not None else GpuLimits.from_device()
        if params is None:
            params = default_params(self.family.key, self.limits) if self.family.key in DEFAULTS else {}
        self.params = dict(params)
        problems = self.family.problems(self.params, self.limits)
        if problems:
            raise ValueError(f"{self.family.label(self.params)} cannot run here: {'; '.join(problems)}")
        self.kernel = load_kernel(self.family.path, self.family.expression(self.params) or self.family.name)
        self.smem = self.family.dynamic_smem(self.params)
        if self.smem > STATIC_SMEM_LIMIT:
            self.kernel.max_dynamic_shared_memory = self.smem
        self.block = self.family.block(self.params)

    @property
    def label(self) -> str:
        return self.family.label(self.params)

    def grid(self, M: int, N: int) -> tuple[int, ...]:
        return self.family.grid(self.params, M, N)

    def __call__(self, A: Any, B: Any, C: Any, M: int, N: int, K: int, alpha: float = 1.0,
                 beta: float = 0.0) -> None:
        check_sizes(M, N, K)
        dtype = self.family.input_dtype
        _check_operand("A", A, (M, K), dtype)
        _check_operand("B", B, (K, N), dtype)
        _check_operand("C", C, (M, N), "float32")
        if dtype == "float16":                        # the kernels take the 16-bit patterns
            A, B = A.view("uint16"), B.view("uint16")
        if self.family.alpha_beta:
            args = (A, B, C, M, N, K, float(alpha), float(beta))
        elif alpha == 1.0 and beta == 0.0:
            args = (A, B, C, M, N, K)
        else:
            raise ValueError(f"{self.family.name} computes C = A B only (alpha = 1, beta = 0)")
        self.kernel(self.grid(M, N), self.block, args, shared_mem=self.smem)


# Split-K serves problems with few output tiles: a middle-sized tile, not the ladder's largest.
SPLIT_K_TILE: dict[str, int] = {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8}


class SplitKGemm:
    """Split-K: the partial products of `splits` slices of K into a workspace, then one reduction.
    Call it like a GemmKernel; the workspace grows on demand."""

    def __init__(self, params: Mapping[str, int] | None = None, splits: int = 4, *, limits: Any = None):
        from kernels.compile import load_kernel

        if splits < 1:
            raise ValueError("splits must be >= 1")
        self.partial = GemmKernel("split_k", params or SPLIT_K_TILE, limits=limits)
        self.reduce = load_kernel("gemm/split_k.cu", "split_k_reduce")
        self.splits = splits
        self._workspace = None

    @property
    def label(self) -> str:
        return f"split-K x {self.splits}, {self.partial.label}"

    def accumulation_depth(self, K: int) -> int:
        """Roundings an element goes through: its slice's FMAs, then one addition per slice."""
        chunk, slices = self.chunk(K)
        return min(chunk, K) + slices

    def chunk(self, K: int) -> tuple[int, int]:
        """(k_chunk, slices): k_chunk a multiple of BK, slices = ceil(K / k_chunk) <= splits."""
        return split_k_chunk(K, self.splits, self.partial.params["BK"])

    def __call__(self, A: Any, B: Any, C: Any, M: int, N: int, K: int, alpha: float = 1.0,
                 beta: float = 0.0) -> None:
        from kernels.backend import array_module

        xp = array_module()
        check_sizes(M, N, K)
        _check_operand("A", A, (M, K), "float32")
        _check_operand("B", B, (K, N), "float32")
        _check_operand("C", C, (M, N), "float32")
        chunk, slices = self.chunk(K)
        if slices * M * N > INT32_MAX:
            raise ValueError("the split-K workspace would need more than 2^31 elements")
        if self._workspace is None or self._workspace.size < slices * M * N:
            self._workspace = xp.empty(slices * M * N, dtype=np.float32)
        W = self._workspace
        grid = self.partial.grid(M, N) + (slices,)
        self.partial.kernel(grid, self.partial.block, (A, B, W, M, N, K, chunk), shared_mem=self.partial.smem)
        blocks = min(_ceil(M * N, 256), 65535)
        self.reduce((blocks,), (256,), (W, C, M, N, slices, float(alpha), float(beta)))


def split_k_chunk(K: int, splits: int, BK: int) -> tuple[int, int]:
    """The K range per slice (a multiple of BK, so that slices start on tile and float4 boundaries)
    and the number of non-empty slices."""
    chunk = _ceil(_ceil(K, splits), BK) * BK
    return chunk, _ceil(K, chunk)


# ----------------------------------------------------------------------------- checking

def gemm_reference(A: np.ndarray, B: np.ndarray, C0: np.ndarray | None = None, alpha: float = 1.0,
                   beta: float = 0.0) -> np.ndarray:
    """alpha A B + beta C0 in float64 (C0 ignored when beta == 0)."""
    out = alpha * (np.asarray(A, dtype=np.float64) @ np.asarray(B, dtype=np.float64))
    if beta != 0.0:
        out = out + beta * np.asarray(C0, dtype=np.float64)
    return out


def gemm_error_bound(A: np.ndarray, B: np.ndarray, C0: np.ndarray | None, alpha: float, beta: float,
                     depth: int, u: float = FLOAT32_U) -> np.ndarray:
    """Per-element bound on |computed - exact| of alpha A B + beta C0 when every element goes through
    at most `depth` roundings of relative size u: gamma_depth (|alpha| (|A| |B|) + |beta| |C0|)
    (Higham, eq. 3.5, with the epilogue's roundings counted in `depth`)."""
    bound = abs(alpha) * (np.abs(np.asarray(A, dtype=np.float64)) @ np.abs(np.asarray(B, dtype=np.float64)))
    if beta != 0.0:
        bound = bound + abs(beta) * np.abs(np.asarray(C0, dtype=np.float64))
    return gamma(depth, u) * bound


def check_gemm(run: Callable[..., Any], M: int, N: int, K: int, *, alpha: float = 1.0, beta: float = 0.0,
               dtype: Any = np.float32, seed: int | None = None) -> Any:
    """``kernels.check`` of one GEMM launch on fresh inputs uniform in [-1, 1], C poisoned with NaN.

    With beta != 0 the kernel's C starts as a random C0 (copied in before the launch); with beta == 0
    it stays NaN, so a kernel that reads C anyway returns NaN and fails. The reference is float64
    (of the fp16-rounded inputs when dtype is float16). The tolerance is the rounding-error bound of
    these very inputs (gemm_error_bound): fp32 accumulation, u = 2^-24, over the kernel's
    accumulation depth (K + 2, or run.accumulation_depth(K) + 2); for fp16 tensor-core kernels
    u = 2^-23 (fp16_tolerance says why). Besides the report's norm-wise test, every element must be
    within it: a few wrong elements fail too. Returns the CheckReport; raises AssertionError when it
    failed.
    """
    from kernels.check import check, default_seed

    dtype = np.dtype(dtype)
    if seed is None:
        seed = default_seed()
    rng = np.random.default_rng(seed)
    A = rng.uniform(-1, 1, (M, K)).astype(dtype)
    B = rng.uniform(-1, 1, (K, N)).astype(dtype)
    C0 = rng.uniform(-1, 1, (M, N)).astype(np.float32) if beta != 0.0 else None
    depth = getattr(run, "accumulation_depth", lambda k: k)(K) + 2
    u = 2 * FLOAT32_U if dtype == np.float16 else FLOAT32_U
    tol = check_tolerance(gemm_reference(A, B, C0, alpha, beta), gemm_error_bound(A, B, C0, alpha, beta, depth, u))
    inputs: dict[str, Any] = {"A": A, "B": B}
    if C0 is not None:
        inputs["C0"] = C0

    def launch(A: Any, B: Any, C: Any, C0: Any = None) -> None:
        if C0 is not None:
            C[...] = C0
        run(A, B, C, M, N, K, alpha, beta)

    def reference(A: np.ndarray, B: np.ndarray, C0: np.ndarray | None = None) -> np.ndarray:
        return gemm_reference(A, B, C0, alpha, beta)

    report = check(launch, reference, inputs, {"C": ((M, N), np.float32)}, tol=tol, seed=seed)
    bad = [o for o in report.outputs if o.mismatched]
    if not report.ok or bad:
        extra = f"\n  {bad[0].mismatched} element(s) outside the tolerance" if bad else ""
        raise AssertionError(f"{getattr(run, 'label', 'kernel')} on M={M}, N={N}, K={K}, alpha={alpha}, "
                             f"beta={beta}:\n{report}{extra}")
    return report


# ----------------------------------------------------------------------------- sweeps

def spill_bytes(report: Any) -> int:
    """Bytes of spill stores and loads in a ResourceReport; the stack frame when spills are unknown."""
    stores, loads = getattr(report, "spill_store_bytes", None), getattr(report, "spill_load_bytes", None)
    if stores is None or loads is None:
        return int(getattr(report, "stack_frame_bytes", 0) or 0)
    return int(stores) + int(loads)


def sweep_measure(family: str | Family, A: Any, B: Any, C: Any, *, cublas_gflops: float,
                  limits: Any = None, arch: str | None = None, fixed: Mapping[str, int] | None = None,
                  check_shapes: Sequence[tuple[int, int, int]] = SWEEP_CHECK_SHAPES,
                  warmup: int = 2, repeat: int = 10) -> Callable[..., dict[str, Any]]:
    """A ``Sweep`` measure function for one kernel family on the problem A (M x K), B (K x N), C.

    For a point (the family's template parameters, with `fixed` filling in the rest) it
    1. raises ValueError("invalid: ...") if the configuration breaks a rule (the Sweep records a note);
    2. compiles it for `arch` and reads registers and spills from ptxas (kernels.resource_report);
       a configuration that spills is reported with its spill bytes and not timed;
    3. checks it on `check_shapes` (kernels.check against float64) and refuses to time a wrong one;
    4. times it with kernels.benchmark and returns GFLOP/s, % of cuBLAS and the resources.
    """
    from kernels.occupancy import GpuLimits, occupancy
    from kernels.resources import resource_report
    from kernels.timing import benchmark, gflops

    fam = FAMILIES[family] if isinstance(family, str) else family
    lim = limits if limits is not None else GpuLimits.from_device()
    M, K = A.shape
    N = B.shape[1]
    flops = gemm_flops(M, N, K)
    dtype = np.float16 if fam.input_dtype == "float16" else np.float32

    def measure(**point: int) -> dict[str, Any]:
        params = {**(fixed or {}), **{k: int(v) for k, v in point.items()}}
        problems = fam.problems(params, lim)
        if problems:
            raise ValueError("invalid: " + "; ".join(problems))
        report = resource_report(fam.path, fam.name, arch=arch, name_expression=fam.expression(params))
        threads = fam.threads(params)
        smem = fam.dynamic_smem(params) + (report.shared_bytes or 0)
        occ = occupancy(threads, report.registers or 0, smem, lim)
        record: dict[str, Any] = {"threads": threads, "registers": report.registers,
                                  "smem KB": round(smem / 1024, 1), "blocks/SM": occ.blocks_per_sm,
                                  "spill B": spill_bytes(report)}
        if record["spill B"]:
            record["note"] = f"spills {record['spill B']} B to local memory: not timed"
            return record
        if occ.blocks_per_sm == 0:
            record["note"] = f"does not fit on an SM ({occ.limiter}): not timed"
            return record
        kernel = GemmKernel(fam, params, limits=lim)
        for shape in check_shapes:
            check_gemm(kernel, *shape, dtype=dtype, alpha=1.0, beta=0.0)
        t = benchmark(lambda: kernel(A, B, C, M, N, K), warmup=warmup, repeat=repeat)
        g = gflops(flops, t)
        record.update({"GFLOP/s": round(g, 1), "% of cuBLAS": round(100 * g / cublas_gflops, 1),
                       "ms": round(t.median_ms, 4)})
        return record

    return measure


# The chapter's sweep of the double-buffered register-tiled kernel: the full grid the live panel
# offers, and the points the recorded run measures (chosen to fit the chapter's time budget).
REGISTER_TILED_GRID: dict[str, list[int]] = {"BM": [128, 256], "BN": [128, 256], "BK": [8, 16, 32],
                                             "TM": [4, 8, 16], "TN": [4, 8]}
REGISTER_TILED_POINTS: list[dict[str, int]] = (
    [{"BM": 128, "BN": 128, "BK": bk, "TM": tm, "TN": tn}
     for tm, tn in ((4, 4), (8, 4), (8, 8), (16, 8)) for bk in (8, 16, 32)]
    + [{"BM": 128, "BN": 256, "BK": 8, "TM": 8, "TN": 8},        # rung 6's default
       {"BM": 256, "BN": 128, "BK": 16, "TM": 8, "TN": 8}, {"BM": 128, "BN": 256, "BK": 16, "TM": 8, "TN": 8},
       {"BM": 256, "BN": 256, "BK": 16, "TM": 8, "TN": 8}, {"BM": 256, "BN": 256, "BK": 16, "TM": 4, "TN": 4},
       {"BM": 256, "BN": 256, "BK": 32, "TM": 16, "TN": 8}]
)


def best_record(records: Sequence[Mapping[str, Any]], y: str = "GFLOP/s") -> Mapping[str, Any] | None:
    """The record with the largest numeric `y` (None when nothing was measured)."""
    good = [r for r in records if isinstance(r.get(y), (int, float))]
    return max(good, key=lambda r: r[y]) if good else None


# ----------------------------------------------------------------------------- shared-memory index maps
# The words the kernels' lanes touch, for the bank model's conflict_ways (kernels.traffic.banks).

def a_tile_index(k: int, m: int, BM: int, BK: int, layout: int) -> int:
    """Word of A(m, k) in the transposed A tile (ATile::index in simt_tiles.cuh)."""
    pitch = BM + (4 if layout == 1 else 0)
    if layout == 2:
        step = 1 if BK >= 32 else 32 // BK
        m ^= (((k >> 2) * step) & 7) << 2
    return k * pitch + m


def a_store_words(BM: int, BK: int, layout: int, j: int = 0, warp: int = 0) -> list[int]:
    """The words one warp's j-th transposing store of stash_a writes (lane i of the tile's float4
    list holds row i / (BK / 4), columns 4 (i % (BK / 4)) .. + 3; store j writes column + j)."""
    words = []
    for lane in range(32):
        i = 32 * warp + lane
        m, k = i // (BK // 4), 4 * (i % (BK // 4)) + j
        words.append(a_tile_index(k, m, BM, BK, layout))
    return words


def a_copy_words_cp_async(BM: int, BK: int, warp: int = 0) -> list[int]:
    """The words one warp's 4-byte cp.async copies of A write in gemm_cp_async (padded layout)."""
    words = []
    for lane in range(32):
        e = 32 * warp + lane
        slab, in_slab = divmod(e, 8 * BM)
        m, k = in_slab // 8, 8 * slab + in_slab % 8
        words.append(a_tile_index(k, m, BM, BK, 1))
    return words


def paired_lane(lane: int, LC: int) -> tuple[int, int]:
    """(lane_row, lane_col) of a lane in rung 7b (warp_pipelined.cu), LC lane columns: bit 0 and
    bits 2 .. log2(LC) of the lane give the column, bit 1 and the bits above give the row, so that
    lanes l and l ^ 1 read the same float4 of A and lanes l and l ^ 2 the same float4 of B."""
    cb = LC.bit_length() - 1
    col = (lane & 1) | (((lane >> 2) & ((1 << (cb - 1)) - 1)) << 1)
    row = ((lane >> 1) & 1) | ((lane >> (cb + 1)) << 1)
    return row, col


def lds128_return_cycles(words: Sequence[int | None]) -> int:
    """Clocks of the shared-memory return path that one warp-wide 16-byte read (LDS.128) occupies,
    in the model this course uses: the path returns 128 bytes, one register per lane, per clock,
    so four registers per lane take 4 clocks; when every lane reads the same address as lane l ^ 1,
    or every lane the same as lane l ^ 2, the replies are packed and take 2 (an observed behaviour,
    reported from microbenchmarks and profiler counts, not a documented rule; assumed for 8.x and 9.0).
    Bank conflicts come on top (conflict_ways)."""
    if len(words) != 32:
        raise ValueError("one entry per lane of a warp (32)")
    for partner in (1, 2):
        if all(words[i] is None or words[i ^ partner] is None or words[i] == words[i ^ partner] for i in range(32)):
            return 2
    return 4


def thread_rows_cols(kind: str, p: Params, thread: int) -> tuple[list[int], list[int]]:
    """(row_base, col_base) of a thread: the first rows / columns of its runs of four, relative to
    the block tile, for kind 'contiguous' (rung 4), 'split' (rungs 5 and 6), 'warp' (rung 7) or
    'paired' (rung 7b: rung 7's warp tiles, lanes placed by paired_lane)."""
    TM, TN = p["TM"], p["TN"]
    if kind in ("contiguous", "split"):
        per_row = p["BN"] // TN
        ty, tx = divmod(thread, per_row)
        if kind == "contiguous":
            return [ty * TM + 4 * q for q in range(TM // 4)], [tx * TN + 4 * q for q in range(TN // 4)]
        return ([q * (4 * p["BM"] // TM) + 4 * ty for q in range(TM // 4)],
                [q * (4 * p["BN"] // TN) + 4 * tx for q in range(TN // 4)])
    if kind in ("warp", "paired"):
        LR, LC = p["WM"] // TM, p["WN"] // TN
        warp, lane = divmod(thread, 32)
        wr, wc = divmod(warp, p["BN"] // p["WN"])
        lr, lc = divmod(lane, LC) if kind == "warp" else paired_lane(lane, LC)
        return ([wr * p["WM"] + q * 4 * LR + 4 * lr for q in range(TM // 4)],
                [wc * p["WN"] + q * 4 * LC + 4 * lc for q in range(TN // 4)])
    raise ValueError(f"unknown mapping {kind!r}")


def b_read_words(kind: str, p: Params, q: int = 0, k: int = 0, warp: int = 0) -> list[int]:
    """First words of one warp's q-th float4 read of the B tile at step k."""
    return [k * p["BN"] + thread_rows_cols(kind, p, 32 * warp + lane)[1][q] for lane in range(32)]


def a_read_words(kind: str, p: Params, layout: int, q: int = 0, k: int = 0, warp: int = 0) -> list[int]:
    """First words of one warp's q-th float4 read of the transposed A tile at step k."""
    return [a_tile_index(k, thread_rows_cols(kind, p, 32 * warp + lane)[0][q], p["BM"], p["BK"], layout)
            for lane in range(32)]


def distinct_words_per_k(kind: str, p: Params, warp: int = 0) -> int:
    """Different floats of A and B one warp reads from shared memory per step of k."""
    rows, cols = set(), set()
    for lane in range(32):
        r, c = thread_rows_cols(kind, p, 32 * warp + lane)
        rows.update(x + i for x in r for i in range(4))
        cols.update(x + i for x in c for i in range(4))
    return len(rows) + len(cols)


def block_tile(bid: int, tiles_m: int, tiles_n: int, group: int = 8) -> tuple[int, int]:
    """(tile_m, tile_n) of block `bid` in the grouped order of block_tile<GROUP> (gemm_common.cuh)."""
    per_group = group * tiles_n
    first_m = (bid // per_group) * group
    rows = min(tiles_m - first_m, group)
    in_group = bid % per_group
    return first_m + in_group % rows, in_group // rows


# ----------------------------------------------------------------------------- host side

def cublas_fp32_compute_type() -> str:
    """How cupy.matmul computes float32 products: "fp32", "TF32" or "unknown".

    CuPy uses TF32 tensor cores for float32 only when the environment variable CUPY_TF32 is set to a
    value > 0 (read when CuPy first needs it); NVIDIA_TF32_OVERRIDE=0 forbids TF32 in cuBLAS
    altogether. This reads CuPy's own answer where it can, the variable otherwise.
    """
    try:
        from cupy._core import _routines_linalg as rl

        return "TF32" if rl.get_compute_type(np.float32) == rl.COMPUTE_TYPE_TF32 else "fp32"
    except Exception:  # noqa: BLE001 -- a CuPy without this internal: fall back to the variable
        value = os.environ.get("CUPY_TF32", "").strip()
        if value == "":
            return "fp32"
        return "TF32" if value != "0" else "fp32"


def cublas_fp32_mode() -> str:
    """One line for a notebook: the compute type and the two environment variables behind it."""
    return (f"cupy.matmul float32 compute type: {cublas_fp32_compute_type()} "
            f"(CUPY_TF32={os.environ.get('CUPY_TF32') or 'unset'}, "
            f"NVIDIA_TF32_OVERRIDE={os.environ.get('NVIDIA_TF32_OVERRIDE') or 'unset'})")


def numba_gemm() -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """A compiled CPU triple loop C = A B (numba @njit, i-k-j order: the inner loop runs along rows
    of B and C), or None when numba is not installed."""
    try:
        from numba import njit
    except ImportError:
        return None

    @njit(cache=False, fastmath=False)
    def gemm_loop(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> None:  # pragma: no cover - numba
        M, K = A.shape
        N = B.shape[1]
        for i in range(M):
            for j in range(N):
                C[i, j] = 0.0
            for k in range(K):
                a = A[i, k]
                for j in range(N):
                    C[i, j] += a * B[k, j]

    return gemm_loop


def ladder_chart(gflops_by_rung: Mapping[str, float], cublas: float, fma_ceiling: float, title: str = "",
                 library: str = "cuBLAS (cupy.matmul)"):
    """Bar chart of GFLOP/s per rung with cuBLAS and the measured FP32 FMA ceiling as lines."""
    import matplotlib.pyplot as plt

    names = list(gflops_by_rung)
    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    bars = ax.bar(range(len(names)), [gflops_by_rung[k] for k in names], color="#0072B2")
    for bar, name in zip(bars, names):
        value = gflops_by_rung[name]
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{value:.0f}\n{100 * value / cublas:.0f} %",
                ha="center", va="bottom", fontsize=7)
    ax.axhline(fma_ceiling, color="#D55E00", ls="--", lw=1.2, label=f"FP32 FMA ceiling ({fma_ceiling:.0f} GFLOP/s)")
    ax.axhline(cublas, color="#009E73", ls=":", lw=1.5, label=f"{library} ({cublas:.0f} GFLOP/s)")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("GFLOP/s (2 M N K / time)")
    ax.set_ylim(0, max(fma_ceiling, *gflops_by_rung.values()) * 1.18)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig

