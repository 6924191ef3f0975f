"""The "Memory hierarchy" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every kernel is checked with kernels.check against a float64 NumPy reference (from
kernels.chapters.memory_hierarchy, tested against plain loops in tests/test_memory_hierarchy.py) on fresh random
inputs, sizes that are not multiples of the block or tile (1 and primes included) and NaN-poisoned
outputs. pointer_chase and shared_chase read the GPU's %globaltimer with inline PTX: they run on GPUs
only, and the CPU backend refuses them at compile time, naming the line.
"""
from __future__ import annotations

import numpy as np
import pytest

from kernel_backends import gpu_only_case

from kernels.chapters import memory_hierarchy as mh
from kernels.compile import Kernel
from kernels.signature import parse_signature


@pytest.mark.gpu_only_size  # inline PTX: see test_pointer_chase_is_refused_on_the_cpu
@pytest.mark.parametrize("lines", [1, 2, 7, 1009, 4099])
@pytest.mark.parametrize("steps", [0, 1, 997])
def test_pointer_chase(k, lines, steps):
    cp = k.xp
    chase = k.load_kernel("memory_hierarchy/pointer_chase.cu", "pointer_chase")
    timing = cp.zeros(2, dtype=cp.int64)

    def launch(nxt, warm_steps, steps, last):
        chase((1,), (1,), (nxt, warm_steps, steps, last, timing))

    report = k.check(launch, lambda nxt, warm_steps, steps: np.array([mh.follow_chain(nxt, warm_steps + steps)]),
                     inputs={"nxt": mh.chase_chain(128 * lines), "warm_steps": 3, "steps": steps},
                     outputs={"last": (1, np.uint32)}, tol=0)
    assert report, str(report)
    cycles, ns = (int(v) for v in timing.get())
    assert cycles >= 0 and ns >= 0


def test_pointer_chase_is_refused_on_the_cpu(k):
    if not k.on_cpu:
        pytest.skip("a CPU-backend test")
    from kernels.cpu import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match=r"pointer_chase.cu:19: inline PTX assembly"):
        k.load_kernel("memory_hierarchy/pointer_chase.cu", "pointer_chase")


def test_pointer_chase_chain_on_device_is_a_cycle(k):
    nxt = mh.chase_chain(128 * 3001, seed=5, xp=k.xp).get()
    assert mh.follow_chain(nxt, 3001) == 0
    assert len({mh.follow_chain(nxt, s) for s in range(3001)}) == 3001


@pytest.mark.gpu_only_size  # inline PTX: see test_shared_chase_is_refused_on_the_cpu
@pytest.mark.parametrize("entries", [1, 2, 7, 1009, 8192, mh.SHARED_CHASE_MAX_ENTRIES])
@pytest.mark.parametrize("steps", [0, 1, 997])
@pytest.mark.parametrize("threads", [1, 96])  # the chapter launches one; more threads only share the copy
def test_shared_chase(k, entries, steps, threads):
    cp = k.xp
    chase = k.load_kernel("memory_hierarchy/shared_chase.cu", "shared_chase")
    timing = cp.zeros(2, dtype=cp.int64)

    def launch(nxt, warm_steps, steps, last):
        chase((1,), (threads,), (nxt, nxt.size, warm_steps, steps, last, timing), shared_mem=4 * nxt.size)

    report = k.check(launch, lambda nxt, warm_steps, steps: np.array([mh.follow_chain(nxt, warm_steps + steps)]),
                     inputs={"nxt": mh.shared_chain(entries), "warm_steps": 3, "steps": steps},
                     outputs={"last": (1, np.uint32)}, tol=0)
    assert report, str(report)
    cycles, ns = (int(v) for v in timing.get())
    assert cycles >= 0 and ns >= 0


def test_shared_chase_is_refused_on_the_cpu(k):
    if not k.on_cpu:
        pytest.skip("a CPU-backend test")
    from kernels.cpu import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match=r"shared_chase.cu:21: inline PTX assembly"):
        k.load_kernel("memory_hierarchy/shared_chase.cu", "shared_chase")


@pytest.mark.parametrize("n4,threads", [(1, 128), (13, 128), (1001, 384), (65_537, 1280)])
def test_reread(k, n4, threads):
    kernel = k.load_kernel("memory_hierarchy/reread.cu", "reread")
    report = k.check(lambda x, n4, reps, threads, out: kernel((threads // 128,), (128,), (x, n4, reps, out)),
                     mh.reread_reference,
                     inputs={"x": k.rand(4 * n4), "n4": n4, "reps": 3, "threads": threads},
                     outputs={"out": (threads, np.float32)}, tol=1e-5)
    assert report, str(report)


@pytest.mark.parametrize("stride", [0, 1, 2, 3, 8, 31, 32, 33])
@pytest.mark.parametrize("threads", [32, 96, 1024])
def test_bank_stride(k, stride, threads):
    kernel = k.load_kernel("memory_hierarchy/bank_stride.cu", "bank_stride")
    block = min(threads, 256)
    report = k.check(lambda table, stride, iters, threads, out:
                     kernel((k.ceil_div(threads, block),), (block,), (table, stride, iters, out)),
                     mh.bank_stride_reference,
                     inputs={"table": k.rand(mh.TABLE_WORDS), "stride": stride, "iters": 17, "threads": threads},
                     outputs={"out": (threads, np.float32)}, tol=1e-5)
    assert report, str(report)


@pytest.mark.parametrize("layout", ["plain", "padded", "swizzled"])
@pytest.mark.parametrize("ntiles", [1, 2, 7, 131])
@pytest.mark.parametrize("reps", [1, 3])
def test_tile_transpose(k, layout, ntiles, reps):
    kernel = k.load_kernel("memory_hierarchy/tile_transpose.cu", f"tile_transpose_{layout}")
    report = k.check(lambda x, ntiles, reps, y: kernel((ntiles,), (32, 8), (x, y, ntiles, reps)),
                     mh.tile_transpose_reference,
                     inputs={"x": k.rand(ntiles * 1024), "ntiles": ntiles, "reps": reps},
                     outputs={"y": (ntiles * 1024, np.float32)}, tol=1e-6)
    assert report, str(report)


@pytest.fixture
def lookup(k):
    cp = k.xp
    code = k.source("memory_hierarchy/constant_table.cu")
    module = cp.RawModule(code=code, options=("-std=c++17",))
    table_c = cp.ndarray((mh.LOOKUP_ENTRIES,), dtype=cp.float32, memptr=module.get_global("table_c"))
    kernels_ = {name: Kernel(name, code, parse_signature(code, name), module.get_function(name), backend=k.name)
                for name in ("lookup_constant", "lookup_global")}
    return table_c, kernels_


@pytest.mark.parametrize("memory", ["constant", "global"])
@pytest.mark.parametrize("distinct", [1, 2, 4, 32])
@pytest.mark.parametrize("threads,iters", [(256, 1), (512, 257), gpu_only_case(2560, 1000)])
def test_lookup(k, lookup, memory, distinct, threads, iters):
    table_c, kern = lookup

    def launch(table, distinct, iters, threads, out):
        grid = (threads // 256,)
        if memory == "constant":
            table_c[...] = table
            kern["lookup_constant"](grid, (256,), (distinct, iters, out))
        else:
            kern["lookup_global"](grid, (256,), (table, distinct, iters, out))

    # Positive entries: a float32 sum of up to 1000 values of both signs can cancel to near 0, and
    # its relative error then has no bound (about 1 run in 100 failed a 1e-5 tolerance that way).
    report = k.check(launch, mh.lookup_reference,
                     inputs={"table": k.rand(mh.LOOKUP_ENTRIES, low=0.0, high=1.0), "distinct": distinct,
                             "iters": iters, "threads": threads},
                     outputs={"out": (threads, np.float32)}, tol=2e-5)
    assert report, str(report)


@pytest.fixture
def rope(k):
    """rope.cu's module: its two constant tables and its three kernels (as in the chapter)."""
    cp = k.xp
    code = k.source("memory_hierarchy/rope.cu")
    module = cp.RawModule(code=code, options=("-std=c++17",))
    tables = tuple(cp.ndarray((mh.ROPE_TABLE_ENTRIES,), dtype=cp.float32, memptr=module.get_global(name))
                   for name in ("rope_cos_c", "rope_sin_c"))
    kernels_ = {name: Kernel(name, code, parse_signature(code, name), module.get_function(name), backend=k.name)
                for name in ("rope_constant", "rope_global", "rope_sincos")}
    return tables, kernels_


ROPE_SHAPES = [  # (batch, seq, heads, pairs); seq * pairs <= ROPE_TABLE_ENTRIES for the constant tables
    (1, 1, 1, 1),
    (1, 2, 1, 32),       # warps match head vectors exactly
    (2, 5, 3, 7),        # warps and blocks straddle head vectors and positions
    (3, 17, 5, 33),
    (1, 64, 3, 64),      # the notes' seq and pairs, 3 heads
    (2, 100, 1, 40),     # seq * pairs = 4000; angles up to 99 rad
    (1, 4096, 1, 1),     # the whole constant table along seq
    gpu_only_case(2, 64, 32, 64),   # the notes' shape: 262,144 pairs
]


@pytest.mark.parametrize("variant", ["constant", "global", "sincos"])
@pytest.mark.parametrize("batch,seq,heads,pairs", ROPE_SHAPES)
@pytest.mark.parametrize("block,blocks", [(256, None), (32, None), (128, 3)])  # (128, 3): a grid-stride loop
def test_rope(k, rope, variant, batch, seq, heads, pairs, block, blocks):
    (cos_c, sin_c), kern = rope
    theta = mh.rope_theta(pairs)
    cos_t, sin_t = mh.rope_tables(seq, theta)
    n = 2 * batch * seq * heads * pairs

    def launch(x, cos_t, sin_t, theta, out):
        total = n // 2
        grid = (blocks or k.ceil_div(total, block),)
        if variant == "constant":
            cos_c[:cos_t.size] = cos_t
            sin_c[:sin_t.size] = sin_t
            kern["rope_constant"](grid, (block,), (x, out, seq, heads, pairs, total))
        elif variant == "global":
            kern["rope_global"](grid, (block,), (x, out, cos_t, sin_t, seq, heads, pairs, total))
        else:
            kern["rope_sincos"](grid, (block,), (x, out, theta, seq, heads, pairs, total))

    if variant == "sincos":
        reference = lambda x, theta, **_: mh.rope_sincos_reference(x, theta, seq, heads, pairs)
    else:
        reference = lambda x, cos_t, sin_t, **_: mh.rope_reference(x, cos_t, sin_t, seq, heads, pairs)
    # Tables: a few units of 2^-24 from the float32 products. sincos: the angle m * theta, rounded to
    # float32, is off by up to half a unit in the last place, 2^-13 rad below 4096 rad (m < 4096,
    # theta <= 1), and the pair turns by that much: 1.2e-4 at the longest sequence, 3.8e-6 below 128 rad.
    tol = (2e-4 if seq > 128 else 2e-5) if variant == "sincos" else 1e-6
    report = k.check(launch, reference,
                     inputs={"x": k.rand(n), "cos_t": cos_t, "sin_t": sin_t, "theta": theta},
                     outputs={"out": (n, np.float32)}, tol=tol)
    assert report, str(report)


def test_rope_constant_reads_the_constant_tables(k, rope):
    """rope_constant takes no table argument: changing the constant tables changes its output."""
    (cos_c, sin_c), kern = rope
    cp = k.xp
    x = cp.asarray(np.tile(np.array([1.0, 0.0], dtype=np.float32), 4))   # 4 pairs (1, 0) -> (cos, sin)
    out = cp.zeros_like(x)
    cos_c[:4] = cp.asarray(np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32))
    sin_c[:4] = cp.asarray(np.array([0.5, 0.6, 0.7, 0.8], dtype=np.float32))
    kern["rope_constant"]((1,), (32,), (x, out, 2, 1, 2, 4))   # seq 2, 1 head, 2 pairs: entries 0..3
    np.testing.assert_array_equal(out.get(), np.array([0.1, 0.5, 0.2, 0.6, 0.3, 0.7, 0.4, 0.8], dtype=np.float32))
