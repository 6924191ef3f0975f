"""GPU tests of the kernels of the "Memory hierarchy" chapter.

Every kernel is checked with kernels.check against a float64 NumPy reference (from
kernels.memory_hierarchy, tested against plain loops in tests/test_memory_hierarchy.py) on fresh random
inputs, sizes that are not multiples of the block or tile (1 and primes included) and NaN-poisoned
outputs.
"""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy")

import kernels  # noqa: E402
from kernels import ceil_div, check, load_kernel, rand, source  # noqa: E402
from kernels import memory_hierarchy as mh  # noqa: E402
from kernels.compile import Kernel  # noqa: E402
from kernels.signature import parse_signature  # noqa: E402

if not kernels.gpu_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)


@pytest.mark.parametrize("lines", [1, 2, 7, 1009, 4099])
@pytest.mark.parametrize("steps", [0, 1, 997])
def test_pointer_chase(lines, steps):
    chase = load_kernel("memory_hierarchy/pointer_chase.cu", "pointer_chase")
    timing = cp.zeros(2, dtype=cp.int64)

    def launch(nxt, warm_steps, steps, last):
        chase((1,), (1,), (nxt, warm_steps, steps, last, timing))

    report = check(launch, lambda nxt, warm_steps, steps: np.array([mh.follow_chain(nxt, warm_steps + steps)]),
                   inputs={"nxt": mh.chase_chain(128 * lines), "warm_steps": 3, "steps": steps},
                   outputs={"last": (1, np.uint32)}, tol=0)
    assert report, str(report)
    cycles, ns = (int(v) for v in timing.get())
    assert cycles >= 0 and ns >= 0


def test_pointer_chase_chain_on_device_is_a_cycle():
    nxt = mh.chase_chain(128 * 3001, seed=5, xp=cp).get()
    assert mh.follow_chain(nxt, 3001) == 0
    assert len({mh.follow_chain(nxt, s) for s in range(3001)}) == 3001


@pytest.mark.parametrize("n4,threads", [(1, 128), (13, 128), (1001, 384), (65_537, 1280)])
def test_reread(n4, threads):
    kernel = load_kernel("memory_hierarchy/reread.cu", "reread")
    report = check(lambda x, n4, reps, threads, out: kernel((threads // 128,), (128,), (x, n4, reps, out)),
                   mh.reread_reference,
                   inputs={"x": rand(4 * n4), "n4": n4, "reps": 3, "threads": threads},
                   outputs={"out": (threads, np.float32)}, tol=1e-5)
    assert report, str(report)


@pytest.mark.parametrize("stride", [0, 1, 2, 3, 8, 31, 32, 33])
@pytest.mark.parametrize("threads", [32, 96, 1024])
def test_bank_stride(stride, threads):
    kernel = load_kernel("memory_hierarchy/bank_stride.cu", "bank_stride")
    block = min(threads, 256)
    report = check(lambda table, stride, iters, threads, out:
                   kernel((ceil_div(threads, block),), (block,), (table, stride, iters, out)),
                   mh.bank_stride_reference,
                   inputs={"table": rand(mh.TABLE_WORDS), "stride": stride, "iters": 17, "threads": threads},
                   outputs={"out": (threads, np.float32)}, tol=1e-5)
    assert report, str(report)


@pytest.mark.parametrize("layout", ["plain", "padded", "swizzled"])
@pytest.mark.parametrize("ntiles", [1, 2, 7, 131])
@pytest.mark.parametrize("reps", [1, 3])
def test_tile_transpose(layout, ntiles, reps):
    kernel = load_kernel("memory_hierarchy/tile_transpose.cu", f"tile_transpose_{layout}")
    report = check(lambda x, ntiles, reps, y: kernel((ntiles,), (32, 8), (x, y, ntiles, reps)),
                   mh.tile_transpose_reference,
                   inputs={"x": rand(ntiles * 1024), "ntiles": ntiles, "reps": reps},
                   outputs={"y": (ntiles * 1024, np.float32)}, tol=1e-6)
    assert report, str(report)


@pytest.fixture(scope="module")
def lookup():
    code = source("memory_hierarchy/constant_table.cu")
    module = cp.RawModule(code=code, options=("-std=c++17",))
    table_c = cp.ndarray((mh.LOOKUP_ENTRIES,), dtype=cp.float32, memptr=module.get_global("table_c"))
    kernels_ = {name: Kernel(name, code, parse_signature(code, name), module.get_function(name))
                for name in ("lookup_constant", "lookup_global")}
    return table_c, kernels_


@pytest.mark.parametrize("memory", ["constant", "global"])
@pytest.mark.parametrize("distinct", [1, 2, 4, 32])
@pytest.mark.parametrize("threads,iters", [(256, 1), (512, 257), (2560, 1000)])
def test_lookup(lookup, memory, distinct, threads, iters):
    table_c, k = lookup

    def launch(table, distinct, iters, threads, out):
        grid = (threads // 256,)
        if memory == "constant":
            table_c[...] = table
            k["lookup_constant"](grid, (256,), (distinct, iters, out))
        else:
            k["lookup_global"](grid, (256,), (table, distinct, iters, out))

    report = check(launch, mh.lookup_reference,
                   inputs={"table": rand(mh.LOOKUP_ENTRIES), "distinct": distinct, "iters": iters,
                           "threads": threads},
                   outputs={"out": (threads, np.float32)}, tol=1e-5)
    assert report, str(report)
