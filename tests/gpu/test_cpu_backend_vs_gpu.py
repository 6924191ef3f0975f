"""The CPU backend against a real GPU: the same CUDA C, the same inputs, the same results.

Each case runs one kernel of kernels/cuda/ through CuPy and through kernels.cpu on identical inputs
and compares every output: exactly for integers and for floats computed in the same order, with a
tolerance where the GPU may round differently (it contracts a * b + c into one fused multiply-add;
the CPU backend only does where the source says fmaf) or sums in a different order (atomics).
Run with ``pytest -m gpu tests/gpu/test_cpu_backend_vs_gpu.py`` on a machine with a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy")

import kernels  # noqa: E402
from kernels.cpu import RawModule as CpuModule  # noqa: E402
from kernels.cpu import xp  # noqa: E402
from kernels.sources import include_options, source  # noqa: E402

if not kernels.gpu_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

RNG = np.random.default_rng(2024)


def floats(n, low=-1.0, high=1.0):
    return RNG.uniform(low, high, n).astype(np.float32)


def ints(n, low=-1000, high=1000):
    return RNG.integers(low, high, n).astype(np.int32)


@dataclass
class Case:
    path: str
    name: str
    grid: tuple
    block: tuple
    args: Callable[[], list]        # NumPy arrays and scalars, in kernel order
    outputs: list[int]              # indices of the arrays to compare
    shared_mem: int = 0
    rtol: float = 0.0               # 0: bit for bit
    globals_: dict = field(default_factory=dict)


N = 100_003
CASES = [
    Case("gpu_architecture/vector_add.cu", "vector_add", (391,), (256,),
         lambda: [floats(N), floats(N), np.zeros(N, np.float32), N], [2]),
    Case("asynchrony/fma_chain.cu", "fma_chain", (391,), (256,), lambda: [floats(N), np.zeros(N, np.float32), N, 300],
         [1]),
    Case("measuring_kernels/poly.cu", "poly_horner", (391,), (256,),
         lambda: [floats(N, -0.9, 0.9), np.zeros(N, np.float32), N, 17], [1]),
    Case("measuring_kernels/local_array.cu", "window_dynamic", (391,), (256,),
         lambda: [floats(N), np.zeros(N, np.float32), N, 5], [1], rtol=1e-5),
    Case("measuring_kernels/spill.cu", "window_variance", (391,), (256,),
         lambda: [floats(N), np.zeros(N, np.float32), N], [1], rtol=1e-4),
    Case("coalescing/transpose.cu", "transpose_tiled<32, 8, 1>", (9, 13), (32, 8),
         lambda: [floats(400 * 270), np.zeros(400 * 270, np.float32), 400, 270], [1]),
    Case("coalescing/matmul_naive.cu", "matmul_naive", (5, 9), (32, 8),
         lambda: [floats(67 * 29), floats(29 * 131), np.zeros(67 * 131, np.float32), 67, 131, 29], [2], rtol=1e-4),
    Case("coalescing/gemv.cu", "gemv_warp_per_row", (126,), (256,),
         lambda: [floats(1001 * 257), floats(257), np.zeros(1001, np.float32), 1001, 257], [2], rtol=1e-4),
    Case("reduce/tree.cu", "reduce_sequential", (391,), (256,),
         lambda: [floats(N, 0, 1), np.zeros(391, np.float32), N], [1], shared_mem=1024, rtol=1e-5),
    Case("reduce/tree.cu", "reduce_shuffle", (196,), (256,),
         lambda: [floats(N, 0, 1), np.zeros(196, np.float32), N], [1], rtol=1e-5),
    Case("simt_and_warps/block_sum.cu", "block_sum_shfl", (7,), (256,),
         lambda: [ints(N, -100, 100), np.zeros(7, np.int32), N], [1]),
    Case("simt_and_warps/block_sum.cu", "block_sum_syncwarp", (7,), (256,),
         lambda: [ints(N, -100, 100), np.zeros(7, np.int32), N], [1]),
    Case("simt_and_warps/warp_ops.cu", "warp_votes", (391,), (256,),
         lambda: [floats(N), np.zeros(3126, np.uint32), np.zeros(3126, np.int32), np.zeros(3126, np.int32),
                  np.zeros(3126, np.int32), N], [1, 2, 3, 4]),
    Case("scan/basic_scans.cu", "blelloch_scan_padded", (49,), (1024,),
         lambda: [ints(N), np.zeros(N, np.int32), np.zeros(49, np.int32), N], [1, 2], shared_mem=4 * (2048 + 64)),
    Case("scan/basic_scans.cu", "block_scan_shfl", (391,), (256,),
         lambda: [ints(N), np.zeros(N, np.int32), np.zeros(391, np.int32), N], [1, 2]),
    Case("scan/radix_sort.cu", "radix_tile_counts", (49,), (256,),
         lambda: [RNG.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32), np.zeros(16 * 49, np.int32), N, 4, 49],
         [1]),
    Case("memory_hierarchy/tile_transpose.cu", "tile_transpose_swizzled", (7,), (32, 8),
         lambda: [floats(7 * 1024), np.zeros(7 * 1024, np.float32), 7, 3], [1], rtol=1e-6),
    Case("dram_bursts/copy_vec4.cu", "copy_vec4", (13,), (256,),
         lambda: [floats(N), np.zeros(N, np.float32), N], [1]),
    Case("dram_bursts/copy_batched.cu", "copy_batched<float4, 2>", (13,), (256,),
         lambda: [floats(4 * 5003), np.zeros(4 * 5003, np.float32), 5003], [1]),
    Case("reduce/vec4_sum.cu", "sum_vec4_partials", (33,), (256,),
         lambda: [floats(N, 0, 1), np.zeros(33, np.float32), N], [1], rtol=1e-5),
]


def _run(module: Any, to_device: Callable, to_host: Callable, case: Case, host_args: list) -> list[np.ndarray]:
    args = [to_device(a) if isinstance(a, np.ndarray) else (np.int32(a) if isinstance(a, int) else a)
            for a in host_args]
    module.get_function(case.name)(case.grid, case.block, tuple(args), shared_mem=case.shared_mem)
    return [to_host(args[i]) for i in case.outputs]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_cpu_backend_gives_the_gpus_results(case: Case):
    code = source(case.path)
    options = ("-std=c++17", *include_options())
    expressions = [case.name] if "<" in case.name else None
    host_args = case.args()
    gpu = _run(cp.RawModule(code=code, options=options, name_expressions=expressions),
               cp.asarray, cp.asnumpy, case, host_args)
    cpu = _run(CpuModule(code=code, options=options, name_expressions=expressions, filename=case.path),
               xp.asarray, xp.asnumpy, case, host_args)
    for index, g, c in zip(case.outputs, gpu, cpu):
        if case.rtol == 0 or np.issubdtype(g.dtype, np.integer):
            np.testing.assert_array_equal(c, g, err_msg=f"{case.name}: argument {index}")
        else:
            np.testing.assert_allclose(c, g, rtol=case.rtol, atol=case.rtol, err_msg=f"{case.name}: argument {index}")


def test_constant_memory_through_both_backends():
    code = source("memory_hierarchy/constant_table.cu")
    table = floats(256)
    results = []
    for module, make in ((cp.RawModule(code=code, options=("-std=c++17",)), cp),
                         (CpuModule(code=code, options=("-std=c++17",)), xp)):
        make.ndarray((256,), np.float32, memptr=module.get_global("table_c"))[...] = make.asarray(table)
        out = make.zeros(512, np.float32)
        module.get_function("lookup_constant")((2,), (256,), (np.int32(4), np.int32(257), out))
        results.append(make.asnumpy(out))
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)
