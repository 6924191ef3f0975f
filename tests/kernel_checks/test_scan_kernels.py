"""The "Scan" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every kernel is checked with kernels.check against a NumPy reference (int64 for integers, float64
for floats) on fresh random inputs, sizes that are not multiples of the block or tile (1, primes,
non-powers of two and a few million) and poisoned outputs. The references and helpers are tested
against plain loops on the CPU in tests/test_scan.py. blelloch_scan_float_temp is the study notes'
buggy kernel: it is tested to fail on large values.
"""
from __future__ import annotations

import numpy as np
import pytest
from kernel_backends import gpu_only

from kernels.chapters import scan as sc

SIZES = [1, 2, 31, 1000, 2047, 2049, 100_003, *gpu_only(3_000_017)]


def blelloch_launcher(k, name, block=1024):
    kernel = k.load_kernel("scan/basic_scans.cu", name)
    smem = 4 * (2 * block + (2 * block) // 32)

    def launch(x, n, y, block_sums):
        kernel((k.ceil_div(n, 2 * block),), (block,), (x, y, block_sums, n), shared_mem=smem)
    return launch


def blelloch_reference(x, n):
    y, sums = sc.tile_scans(x, 2048, exclusive=True)
    return {"y": y, "block_sums": sums}


@pytest.mark.parametrize("n", [1, 7, 1000, 1024])
def test_hillis_steele(k, n):
    kernel = k.load_kernel("scan/basic_scans.cu", "hillis_steele_scan")
    k.check(lambda x, n, y: kernel((1,), (1024,), (x, y, n), shared_mem=8192),
            lambda x, n: sc.inclusive_scan(x),
            inputs={"x": k.rand(n, np.int32, -1000, 1000), "n": n},
            outputs={"y": (n, np.int32)}).raise_if_failed()


@pytest.mark.parametrize("name", ["blelloch_scan", "blelloch_scan_padded"])
@pytest.mark.parametrize("n", [1, 7, 1000, 2047, 2048, 100_003, *gpu_only(1_000_003)])
def test_blelloch(k, name, n):
    high = 1000 if n > 2048 else 1_001_000
    k.check(blelloch_launcher(k, name), blelloch_reference,
            inputs={"x": k.rand(n, np.int32, -high, high), "n": n},
            outputs={"y": (n, np.int32), "block_sums": (k.ceil_div(n, 2048), np.int32)}).raise_if_failed()


def test_float_temporary_is_wrong_on_large_values(k):
    n = 2047
    report = k.check(blelloch_launcher(k, "blelloch_scan_float_temp"), blelloch_reference,
                     inputs={"x": k.rand(n, np.int32, 999_000, 1_001_000), "n": n},
                     outputs={"y": (n, np.int32), "block_sums": (1, np.int32)})
    assert not report.ok
    small = k.check(blelloch_launcher(k, "blelloch_scan_float_temp"), blelloch_reference,
                    inputs={"x": k.rand(n, np.int32, 0, 100), "n": n},
                    outputs={"y": (n, np.int32), "block_sums": (1, np.int32)})
    assert small.ok                                   # small sums hide the bug


@pytest.mark.parametrize("block", [32, 256, 1024])
@pytest.mark.parametrize("n", [1, 31, 1000, 100_003])
def test_block_scan_shfl(k, block, n):
    kernel = k.load_kernel("scan/basic_scans.cu", "block_scan_shfl")
    k.check(lambda x, n, y, block_sums: kernel((k.ceil_div(n, block),), (block,), (x, y, block_sums, n)),
            lambda x, n: dict(zip(("y", "block_sums"), sc.tile_scans(x, block, exclusive=False))),
            inputs={"x": k.rand(n, np.int32, -1000, 1000), "n": n},
            outputs={"y": (n, np.int32), "block_sums": (k.ceil_div(n, block), np.int32)}).raise_if_failed()


@pytest.mark.parametrize("n", SIZES + gpu_only(5_000_011))
def test_scan_then_propagate(k, n):
    k.check(lambda x, n, y: sc.ScanThenPropagate(n)(x, y), lambda x, n: sc.inclusive_scan(x),
            inputs={"x": k.rand(n, np.int32, -1000, 1000), "n": n},
            outputs={"y": (n, np.int32)}).raise_if_failed()


@pytest.mark.parametrize("threads,items", [(t, i) for t in (128, 256, 512) for i in (4, 8, 16)])
@pytest.mark.parametrize("n", SIZES)
def test_single_pass_int(k, threads, items, n):
    k.check(lambda x, n, y: sc.SinglePassScan(n, np.int32, threads, items)(x, y),
            lambda x, n: sc.inclusive_scan(x),
            inputs={"x": k.rand(n, np.int32, -1000, 1000), "n": n},
            outputs={"y": (n, np.int32)}).raise_if_failed()


def test_single_pass_repeated_launches(k):
    cp = k.xp
    n = k.pick(gpu=2_000_003, cpu=100_003)
    x = cp.random.randint(-5, 5, n, dtype=cp.int32)
    y = cp.empty_like(x)
    scan = sc.SinglePassScan(n, np.int32)
    for _ in range(k.pick(gpu=20, cpu=4)):                                # state reset between launches
        y.fill(0)
        scan(x, y)
        assert bool(cp.array_equal(y, cp.cumsum(x, dtype=cp.int32)))


V2_SIZES = [1, 2, 31, 32, 33, 100_003, *gpu_only(1_000_003, 4 * 2**20 + 7)]
V2_CONFIGS = [(128, 8), (128, 32), (256, 8), (256, 16), (256, 24), (256, 32), (512, 16)]


@pytest.mark.parametrize("threads,items", V2_CONFIGS)
@pytest.mark.parametrize("n", V2_SIZES)
def test_single_pass_v2_int(k, threads, items, n):
    k.check(lambda x, n, y: sc.SinglePassScanV2(n, np.int32, threads, items)(x, y),
            lambda x, n: sc.inclusive_scan(x),
            inputs={"x": k.rand(n, np.int32, -1000, 1000), "n": n},
            outputs={"y": (n, np.int32)}).raise_if_failed()


# The two staged single-pass scans, built for n elements: v2 at two tiles, the backoff scan at the
# configuration that reached the target on the H200.
STAGED_SCANS = {
    "v2-256x16": lambda n: sc.SinglePassScanV2(n, np.int32, 256, 16),
    "v2-128x32": lambda n: sc.SinglePassScanV2(n, np.int32, 128, 32),
    "backoff-256x32": lambda n: sc.SinglePassScanBackoff(n, np.int32, 256, 32, 3200, 650),
}


@pytest.mark.parametrize("make", STAGED_SCANS.values(), ids=STAGED_SCANS)
def test_single_pass_staged_wraps_and_repeats(k, make):
    cp = k.xp
    n = k.pick(gpu=4 * 2**20 + 7, cpu=100_003)         # int32 overflow: the sums must wrap
    x = cp.random.randint(2**30, 2**31 - 1, n, dtype=cp.int32)
    scan = make(n)
    expected = cp.asarray(sc.inclusive_scan(cp.asnumpy(x)).astype(np.int32))
    y = cp.empty_like(x)
    for _ in range(k.pick(gpu=10, cpu=3)):                                # state reset between launches
        y.fill(-1)
        scan(x, y)
        assert bool(cp.array_equal(y, expected))


BACKOFF_SIZES = [1, 33, 8193, 100_003, *gpu_only(1_000_003, 4 * 2**20 + 7)]


@pytest.mark.parametrize("threads,items,wait_ns,poll_ns", sc.SINGLE_PASS_BACKOFF_CONFIGS)
@pytest.mark.parametrize("n", BACKOFF_SIZES)
def test_single_pass_backoff_int(k, threads, items, wait_ns, poll_ns, n):
    k.check(lambda x, n, y: sc.SinglePassScanBackoff(n, np.int32, threads, items, wait_ns, poll_ns)(x, y),
            lambda x, n: sc.inclusive_scan(x),
            inputs={"x": k.rand(n, np.int32, -1000, 1000), "n": n},
            outputs={"y": (n, np.int32)}).raise_if_failed()


@pytest.mark.parametrize("make", [STAGED_SCANS["v2-256x16"], STAGED_SCANS["backoff-256x32"]],
                         ids=["v2-256x16", "backoff-256x32"])
def test_single_pass_staged_misaligned_views(k, make):
    cp = k.xp
    n = k.pick(gpu=1_000_003, cpu=100_003)
    base = cp.random.randint(-1000, 1000, n + 1, dtype=cp.int32)
    x = base[1:]                                       # 4-byte aligned only: the scalar path
    out = cp.zeros(n + 1, dtype=cp.int32)
    y = out[1:]
    make(n)(x, y)
    assert bool(cp.array_equal(y, cp.asarray(sc.inclusive_scan(cp.asnumpy(x)).astype(np.int32))))
    assert int(out[0]) == 0


@pytest.mark.parametrize("n", SIZES)
def test_single_pass_float(k, n):
    k.check(lambda x, n, y: sc.SinglePassScan(n, np.float32)(x, y), lambda x, n: np.cumsum(x),
            inputs={"x": k.rand(n, np.float32, 0.0, 1.0), "n": n},
            outputs={"y": (n, np.float32)}, tol=sc.float_scan_tolerance(n, 256, 8)).raise_if_failed()


@pytest.mark.parametrize("n", [1, 2, 1000, 100_003, *gpu_only(3_000_017)])
def test_compaction(k, n):
    from kernels.check import poison_value

    fill = int(poison_value(np.int32))

    def reference(x, n):
        out, kept = sc.compact_positive(x, fill)
        return {"out": out, "count": np.array([kept])}

    k.check(lambda x, n, out, count: sc.Compactor(n, 64)(x, out, count), reference,
            inputs={"x": k.rand(n, np.int32, -1000, 1000), "n": n},
            outputs={"out": (n, np.int32), "count": (1, np.int32)}).raise_if_failed()


@pytest.mark.parametrize("n", [1, 2, 2047, 2049, 100_003, *gpu_only(4_000_037)])
def test_radix_sort(k, n):
    k.check(lambda keys, n, out: sc.RadixSort(n)(keys, out), lambda keys, n: np.sort(keys),
            inputs={"keys": k.rand(n, np.uint32, 0, 2**32 - 1), "n": n},
            outputs={"out": (n, np.uint32)}).raise_if_failed()


def test_radix_sort_many_duplicates(k):
    k.check(lambda keys, n, out: sc.RadixSort(n)(keys, out), lambda keys, n: np.sort(keys),
            inputs={"keys": k.rand(300_007, np.uint32, 0, 20), "n": 300_007},
            outputs={"out": (300_007, np.uint32)}).raise_if_failed()
