"""CPU tests of the "Softmax" chapter.

- The kernels compile for the T4 (sm_75) and the H100 (sm_90) with NVRTC, without spills, use
  the instructions the chapter says they use, and the instantiation tables of kernels.chapters.softmax
  match the files' name_expressions lines.
- The NumPy models of the algorithms are right: the online recurrence, the chunked update, the
  merge and the warp butterfly against direct softmax on awkward inputs (rows of -inf, +-1e4,
  equal values, increasing rows); the merge is associative and commutative; the float32 model of
  the kernels' arithmetic stays within the tolerance the checks use; Welford and Chan's merge
  against two-pass variance.
- Byte counts, the dispatch rule, launch plans and their geometry.
- The chapter shows every kernel and uses the shared module, as the benchmark script does (what
  every chapter promises: tests/test_chapter_contract.py).
"""
from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np
import pytest

from kernels.chapters import softmax as sm
from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.sources import name_expressions_in, source
from tooling.fresh_reports import fresh_reports

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "softmax.md"
BENCH = ROOT / "benchmarks" / "bench_softmax.py"
KERNEL_DIR = ROOT / "kernels" / "cuda" / "softmax"
ARCHS = ["sm_75", "sm_90"]
FILES = ["three_kernels.cu", "block_per_row.cu", "warp_per_row.cu", "layernorm.cu", "flash_attention.cu"]

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


# --------------------------------------------------------------------------- kernels compile


def compiled(filename: str, arch: str):
    path = f"softmax/{filename}"
    code = source(path)
    return compile_cuda(code, arch, name_expressions=name_expressions_in(code), filename=path).raise_for_errors()


def expected_kernels(filename: str) -> set[str]:
    code = source(f"softmax/{filename}")
    plain = set(re.findall(r'extern "C" __global__ void (\w+)\(', code))
    return plain | set(name_expressions_in(code))


def test_every_file_is_listed():
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cu")) == sorted(FILES)
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cuh")) == ["softmax_common.cuh"]


@pytest.fixture(scope="module")
def spill_reports():
    """Compared exactly, so compiled in fresh processes (tooling.fresh_reports says why)."""
    return fresh_reports([f"softmax/{f}" for f in FILES], ARCHS)


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("filename", FILES)
def test_compiles_without_spills(filename, arch, spill_reports):
    resources = spill_reports[(f"softmax/{filename}", arch)]
    assert set(resources) == expected_kernels(filename)
    for name, report in resources.items():
        assert report.stack_frame_bytes == 0 and not report.spills, (name, report)


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_register_limits_for_full_blocks(arch):
    """Kernels launched with 1024 threads must fit 64 registers per thread; the flash kernel runs
    256 threads, and its static shared memory must fit the 48 KiB a block gets without opt-in."""
    reports = compiled("block_per_row.cu", arch).resources
    for name, report in reports.items():
        threads = re.match(r"softmax_block_cached<[\w ]+, (\d+), \d+>", name)
        block = int(threads.group(1)) if threads else 1024
        assert report.registers * block <= 65536, (name, report.registers)   # one block fits an SM
    flash = compiled("flash_attention.cu", arch).resources
    for report in flash.values():
        assert report.registers <= 255 and report.shared_bytes <= 48 * 1024
    assert reports["softmax_block_online<float>"].shared_bytes == sm.STATIC_SHARED_BYTES
    assert reports["softmax_block_smem<float>"].shared_bytes == sm.STATIC_SHARED_BYTES


def test_tables_match_the_instantiations():
    block = name_expressions_in(source(sm.BLOCK_FILE))
    warp = name_expressions_in(source(sm.WARP_FILE))
    for dtype, ctype in sm.C_TYPE.items():
        cached = sorted((int(t), int(i)) for c, t, i in
                        re.findall(r"softmax_block_cached<([\w ]+), (\d+), (\d+)>", " ".join(block)) if c == ctype)
        assert cached == sorted(sm.BLOCK_CACHED[dtype])
        warps = sorted((int(i), int(r)) for c, i, r in
                       re.findall(r"softmax_warp_cached<([\w ]+), (\d+), (\d+)>", " ".join(warp)) if c == ctype)
        assert warps == sorted(sm.WARP_CACHED[dtype])
        for t, i in sm.BLOCK_CACHED[dtype]:
            assert i % sm.pack_elements(dtype) == 0 and t % 32 == 0
    flash = name_expressions_in(source(sm.FLASH_FILE))
    assert flash == tuple(f"flash_attention_forward<{d}, {sm.FLASH_WARPS}>" for d in sm.FLASH_HEAD_DIMS)


def test_every_plan_names_a_compiled_kernel():
    compiled_names = set()
    for filename in FILES:
        compiled_names |= expected_kernels(filename)
    for dtype in ("float32", "float16"):
        for rows, cols in ((1, 1), (5, 33), (3, 1000), (2, 4096), (7, 32768), (2, 100_000)):
            for config in sm.bench_configs(rows, cols, dtype, 232448):
                for p in sm.plan(config, rows, cols, dtype, 232448):
                    assert p.name in compiled_names, p.name


@needs_nvrtc
def test_instructions_the_chapter_names():
    ptx = compiled("block_per_row.cu", "compute_75").ptx
    assert "ld.global.nc.v4.u32" in ptx                      # 16-byte loads through the read-only path
    assert "st.global.cs.v4.u32" in ptx                      # 16-byte streaming stores
    assert "cvt.f32.f16" in ptx and "cvt.rn.f16.f32" in ptx  # each fp16 conversion is one cvt instruction
    assert "shfl.sync.bfly.b32" in ptx                       # the butterflies
    warp_ptx = compiled("warp_per_row.cu", "compute_75").ptx
    assert "bar.sync" not in warp_ptx                        # one warp per row: no __syncthreads
    ln_ptx = compiled("layernorm.cu", "compute_75").ptx
    assert "shfl.sync.down.b32" in ln_ptx and "shfl.sync.idx.b32" in ln_ptx


def test_no_minus_infinity_identity_in_the_kernels():
    """The running max starts at LOWEST; -inf (NEG_INF) only fills the slots past a row's end."""
    common = source("softmax/softmax_common.cuh")
    assert "#define LOWEST (-3.402823466e+38f)" in common
    for filename in FILES:
        code = source(f"softmax/{filename}")
        assert "INFINITY" not in code
        assert not re.search(r"(float m|\.m|MaxSum \w+) = \{?NEG_INF", code), filename
        assert not re.search(r"\bm = NEG_INF", code), filename


def test_lowest_is_minus_float_max():
    assert np.float32(-3.402823466e+38) == -np.finfo(np.float32).max
    assert sm.lowest(np.float32) == -float(np.finfo(np.float32).max)


# --------------------------------------------------------------------------- the online softmax model


def direct_state(values):
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    m = max(sm.lowest(np.float64), float(values.max())) if values.size else sm.lowest(np.float64)
    return m, float(np.exp(values - m).sum()) if finite.size else 0.0


AWKWARD_ROWS = {
    "random": np.random.default_rng(1).uniform(-5, 5, 1000),
    "increasing": np.sort(np.random.default_rng(2).uniform(-5, 5, 1000)),
    "decreasing": -np.sort(np.random.default_rng(3).uniform(-5, 5, 1000)),
    "large": np.random.default_rng(4).uniform(-1e4, 1e4, 1000),
    "equal": np.full(257, 3.25),
    "some -inf": np.where(np.random.default_rng(5).random(300) < 0.3, -np.inf,
                          np.random.default_rng(6).uniform(-1, 1, 300)),
    "all -inf": np.full(40, -np.inf),
    "one element": np.array([7.0]),
    "first is -inf": np.array([-np.inf, 1.0, 2.0]),
}


@pytest.mark.parametrize("name", sorted(AWKWARD_ROWS))
def test_online_recurrence_equals_direct(name):
    row = AWKWARD_ROWS[name]
    m, d = sm.online_state(row)
    m_ref, d_ref = direct_state(row)
    assert m == m_ref
    assert d == pytest.approx(d_ref, rel=1e-12, abs=0)
    assert np.isfinite(m) and np.isfinite(d)


@pytest.mark.parametrize("name", sorted(AWKWARD_ROWS))
def test_softmax_from_state_matches_reference(name):
    row = AWKWARD_ROWS[name]
    got = sm.softmax_from_state(row, sm.online_state(row))
    ref = sm.softmax_reference(row[None, :])[0]
    assert np.allclose(got, ref, rtol=1e-12, atol=0)
    assert np.all(np.isfinite(got))
    if np.isfinite(row).any():
        assert got.sum() == pytest.approx(1.0, rel=1e-12)
    else:
        assert not got.any()                                     # all -inf: zeros, the convention


@pytest.mark.parametrize("name", sorted(AWKWARD_ROWS))
def test_merge_of_any_split_equals_direct(name):
    row = AWKWARD_ROWS[name]
    rng = np.random.default_rng(len(row))
    for _ in range(5):
        cut = sorted(rng.integers(0, len(row) + 1, 2))
        parts = [row[:cut[0]], row[cut[0]:cut[1]], row[cut[1]:]]
        a, b, c = (sm.online_state(p) for p in parts)
        left, right = sm.merge(sm.merge(a, b), c), sm.merge(a, sm.merge(b, c))
        ref = direct_state(row)
        for state in (left, right, sm.merge(c, sm.merge(b, a))):
            assert state[0] == ref[0]
            assert state[1] == pytest.approx(ref[1], rel=1e-12)


def test_merge_with_empty_states():
    empty = (sm.lowest(np.float64), 0.0)
    assert sm.merge(empty, empty) == empty                       # no NaN: the bug of the -inf identity
    some = sm.online_state([1.0, 2.0])
    assert sm.merge(empty, some) == pytest.approx(some) and sm.merge(some, empty) == pytest.approx(some)
    with np.errstate(invalid="ignore"):                          # what the -inf identity would give
        assert np.isnan(0.0 * np.exp(-np.inf - max(-np.inf, -np.inf)))


def test_merge_is_commutative_bit_for_bit_in_float32():
    rng = np.random.default_rng(7)
    for _ in range(200):
        a = sm.online_state(rng.uniform(-10, 10, rng.integers(1, 20)).astype(np.float32), np.float32)
        b = sm.online_state(rng.uniform(-10, 10, rng.integers(1, 20)).astype(np.float32), np.float32)
        assert sm.merge(a, b, np.float32) == sm.merge(b, a, np.float32)


@pytest.mark.parametrize("cols", [1, 2, 31, 32, 33, 100, 1000, 4099])
def test_butterfly_gives_every_lane_the_row_state(cols):
    row = np.random.default_rng(cols).uniform(-3, 3, cols)
    lanes = sm.lane_states(row, 32)
    assert sum(1 for s in lanes if s[1] == 0.0) == max(0, 32 - cols)      # lanes without elements
    merged = sm.butterfly(lanes)
    assert len(set(merged)) == 1                                          # all lanes agree exactly
    m, d = merged[0]
    m_ref, d_ref = direct_state(row)
    assert m == m_ref and d == pytest.approx(d_ref, rel=1e-12)


def test_butterfly_float32_lanes_agree_bit_for_bit():
    row = np.random.default_rng(9).uniform(-3, 3, 77).astype(np.float32)
    assert len(set(sm.butterfly(sm.lane_states(row, 32, np.float32), np.float32))) == 1


def chunked_state(values, n, dtype=np.float64):
    """The kernels' online_update<N>: per group of n, one rescale of d and n exponentials."""
    t = np.dtype(dtype).type
    m, d = t(sm.lowest(dtype)), t(0)
    for start in range(0, len(values), n):
        group = np.asarray(values[start:start + n], dtype=dtype)
        m_new = max(m, group.max())
        d = t(d * np.exp(t(m - m_new))) + t(np.exp((group - m_new).astype(dtype)).astype(dtype).sum(dtype=dtype))
        m = m_new
    return float(m), float(d)


@pytest.mark.parametrize("n", [1, 4, 8, 16])
@pytest.mark.parametrize("name", ["random", "increasing", "some -inf", "all -inf", "large"])
def test_chunked_update_equals_direct(n, name):
    row = AWKWARD_ROWS[name]
    m, d = chunked_state(row, n)
    m_ref, d_ref = direct_state(row)
    assert m == m_ref and d == pytest.approx(d_ref, rel=1e-12)


@pytest.mark.parametrize("order", ["random", "increasing"])
@pytest.mark.parametrize("cols,threads", [(4096, 1), (4096, 32), (32768, 32), (1000, 256)])
def test_float32_model_within_the_checks_tolerance(order, cols, threads):
    """The kernels' arithmetic, simulated in float32 (one state per thread, then merges), stays
    within softmax_tolerance, also for a row that raises the max at every element."""
    rng = np.random.default_rng(cols + threads)
    row = rng.uniform(-1, 1, cols).astype(np.float32)
    if order == "increasing":
        row = np.sort(row)
    states = sm.lane_states(row, threads, np.float32)
    while len(states) > 1:                                       # a tree of merges, as the block does
        states = [sm.merge(states[i], states[i + 1], np.float32) if i + 1 < len(states) else states[i]
                  for i in range(0, len(states), 2)]
    m, d = states[0]
    y = (np.exp((row - np.float32(m)).astype(np.float32)) / np.float32(d)).astype(np.float64)
    ref = sm.softmax_reference(row[None, :])[0]
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err <= sm.softmax_tolerance(cols, threads)


def test_tolerance_properties():
    assert sm.softmax_tolerance(1024, 1024) < sm.softmax_tolerance(1024, 32) < sm.softmax_tolerance(1024, 1)
    assert sm.softmax_tolerance(4096, 256) < 1e-5
    half = sm.softmax_tolerance(100_000, 1024, np.float16)
    assert half > 100_000 * 2.0**-25                         # subnormal fp16 outputs
    assert math.isinf(sm.gamma(2**24))


def test_fp16_subnormal_rounding_is_inside_the_tolerance():
    """Rounding a long row's softmax to fp16 (outputs below 6.1e-5 are subnormal) stays within
    the fp16 tolerance, and would not within 2^-11 alone."""
    rng = np.random.default_rng(11)
    for cols in (4096, 20_000, 100_000):
        x = rng.uniform(-1, 1, (2, cols)).astype(np.float16)
        ref = sm.softmax_reference(x)
        y = ref.astype(np.float16).astype(np.float64)
        err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
        assert err <= sm.softmax_tolerance(cols, 1024, np.float16)
    assert err > 2.0**-11


# --------------------------------------------------------------------------- references


def test_reference_properties():
    rng = np.random.default_rng(12)
    x = rng.uniform(-30, 30, (5, 77))
    y = sm.softmax_reference(x)
    assert np.allclose(y.sum(axis=1), 1.0, rtol=1e-14)
    assert np.allclose(sm.softmax_reference(x + 1234.5), y, rtol=1e-9)   # shift invariance
    assert np.all(np.isfinite(sm.softmax_reference(np.array([[1e300, 1e300]]))))
    masked = np.array([[-np.inf, -np.inf, -np.inf], [-np.inf, 0.0, 0.0]])
    assert sm.softmax_reference(masked).tolist() == [[0.0, 0.0, 0.0], [0.0, 0.5, 0.5]]
    assert sm.softmax_reference(np.array([[2.0, 2.0, 2.0, 2.0]])).tolist() == [[0.25] * 4]


def test_naive_softmax_overflows_where_the_chapter_says():
    assert np.isnan(sm.naive_softmax([[89.0, 0.0]], np.float32)).any()
    assert not np.isnan(sm.naive_softmax([[88.0, 0.0]], np.float32)).any()
    assert np.isnan(sm.naive_softmax([[12.0, 0.0]], np.float16)).any()
    assert not np.isnan(sm.naive_softmax([[11.0, 0.0]], np.float16)).any()
    assert np.isnan(sm.naive_softmax([[-104.0, -105.0]], np.float32)).all()   # 0 / 0


@pytest.mark.parametrize("kind", sm.AWKWARD_KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_awkward_matrices(kind, dtype):
    rng = np.random.default_rng(13)
    x = sm.awkward_matrix(kind, 9, 33, dtype, rng)
    assert x.shape == (9, 33) and x.dtype == dtype
    finite_rows = np.isfinite(x).any(axis=1)
    if kind == "all_masked":
        assert finite_rows.tolist() == [r % 3 != 0 for r in range(9)]
    else:
        assert finite_rows.all()
    if kind == "equal":
        assert (x == x[:, :1]).all()
    if kind == "spikes":
        assert ((x == 0).sum(axis=1) == 1).all()
        assert x[1, -1] == 0 and x[2, 0] == 0                   # the first and the last position
    if kind == "large":
        assert np.abs(x[np.isfinite(x)]).max() > (1e4 if dtype == np.float32 else 6e4) / 2
    y = sm.softmax_reference(x)
    assert np.all(np.isfinite(y))


def test_welford_and_chan_against_two_pass():
    rng = np.random.default_rng(14)
    for center in (0.0, 1000.0):
        x = center + rng.uniform(-1, 1, 1001)
        n, mean, m2 = sm.welford(x)
        assert n == 1001 and mean == pytest.approx(x.mean(), rel=1e-13)
        assert m2 / n == pytest.approx(x.var(), rel=1e-9)
        for cut in (0, 1, 500, 1000, 1001):
            merged = sm.welford_merge(sm.welford(x[:cut]), sm.welford(x[cut:]))
            assert merged[0] == n
            assert merged[1] == pytest.approx(x.mean(), rel=1e-13)
            assert merged[2] == pytest.approx(m2, rel=1e-9)


def test_welford_float32_survives_the_offset_that_breaks_the_naive_formula():
    rng = np.random.default_rng(15)
    x = (1000.0 + rng.uniform(-1, 1, 4096)).astype(np.float32)
    true = x.astype(np.float64).var()
    naive = sm.naive_variance(x)
    n, _, m2 = sm.welford(x, np.float32)
    assert abs(naive - true) / true > 1e-2                      # catastrophic cancellation
    assert abs(m2 / n - true) / true < 1e-3
    tree = [sm.welford(x[i:i + 128], np.float32) for i in range(0, 4096, 128)]
    while len(tree) > 1:
        tree = [sm.welford_merge(tree[i], tree[i + 1], np.float32) for i in range(0, len(tree), 2)]
    assert abs(tree[0][2] / tree[0][0] - true) / true < 1e-3


def test_layernorm_reference():
    rng = np.random.default_rng(16)
    x = rng.uniform(-2, 2, (4, 50))
    g, b = rng.uniform(0.5, 1.5, 50), rng.uniform(-1, 1, 50)
    y = sm.layernorm_reference(x, g, b, 1e-5)
    z = (y - b) / g
    assert np.allclose(z.mean(axis=1), 0, atol=1e-12)
    assert np.allclose(z.var(axis=1), x.var(axis=1) / (x.var(axis=1) + 1e-5), rtol=1e-12)


def test_attention_reference_against_loops():
    rng = np.random.default_rng(17)
    q, k, v = rng.uniform(-1, 1, (5, 8)), rng.uniform(-1, 1, (7, 8)), rng.uniform(-1, 1, (7, 8))
    for causal in (False, True):
        got = sm.attention_reference(q, k, v, causal)
        for i in range(5):
            keys = range(7) if not causal else range(min(i + 1, 7))
            s = np.array([q[i] @ k[j] / math.sqrt(8) for j in keys])
            p = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
            assert np.allclose(got[i], sum(pj * v[j] for pj, j in zip(p, keys)), rtol=1e-12)


def test_flash_recurrence_model_equals_attention():
    """The tile recurrence of flash_attention_forward (m, l, o rescaled per tile of 32) in NumPy."""
    rng = np.random.default_rng(18)
    n_q, n_k, d = 9, 100, 16
    q, k, v = rng.uniform(-1, 1, (n_q, d)), rng.uniform(-1, 1, (n_k, d)), rng.uniform(-1, 1, (n_k, d))
    for causal in (False, True):
        out = np.zeros((n_q, d))
        for i in range(n_q):
            m, l, o = sm.lowest(np.float64), 0.0, np.zeros(d)
            for base in range(0, n_k, 32):
                j = np.arange(base, min(base + 32, n_k))
                s = np.where((j <= i) | (not causal), k[j] @ q[i] / math.sqrt(d), -np.inf)
                m_new = max(m, s.max())
                p = np.exp(s - m_new)
                corr = np.exp(m - m_new)
                l = l * corr + p.sum()
                o = o * corr + p @ v[j]
                m = m_new
            out[i] = o / l
        assert np.allclose(out, sm.attention_reference(q, k, v, causal), rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------- bytes, plans, dispatch


def test_byte_counts():
    assert sm.min_bytes(65536, 4096) == 2 * 2**28 * 4
    assert sm.min_bytes(2**20, 128, 2) == 2 * 2**27 * 2
    rows, cols = 1000, 300
    assert sm.requested_bytes("block_cached", rows, cols) == sm.min_bytes(rows, cols)
    assert sm.requested_bytes("warp_cached", rows, cols) == sm.min_bytes(rows, cols)
    assert sm.requested_bytes("block_online", rows, cols) == 3 * rows * cols * 4
    assert sm.requested_bytes("block_3pass", rows, cols) == 4 * rows * cols * 4
    assert sm.requested_bytes("three_kernels", rows, cols) == 4 * rows * cols * 4 + 20 * rows
    assert set(sm.ROW_READS) == set(sm.KINDS)


def test_plan_geometry():
    p = sm.plan(sm.Config("warp_cached", 256, 4, 2), 2**20, 128)[0]
    assert (p.grid, p.block, p.name) == (2**20 // 16, 256, "softmax_warp_cached<float, 4, 2>")
    p = sm.plan(sm.Config("warp_cached", 128, 4, 4), 17, 100)[0]
    assert p.grid == 2                                                   # 16 rows per block
    p = sm.plan(sm.Config("warp_online", 256), 9, 5)[0]
    assert p.grid == 2 and p.args == ("x", "y", "rows", "cols")
    p = sm.plan(sm.Config("block_cached", 256, 16), 65536, 4096, "float16")[0]
    assert (p.grid, p.block, p.name) == (65536, 256, "softmax_block_cached<unsigned short, 256, 16>")
    p = sm.plan(sm.Config("block_smem", 1024), 3, 32768, "float32", 232448)[0]
    assert p.shared_mem == 131072 and p.name == "softmax_block_smem<float>"
    assert sm.plan(sm.Config("block_smem", 128), 3, 5, "float16")[0].shared_mem == 16
    three = sm.plan(sm.Config("three_kernels", 128), 7, 9)
    assert [q.name for q in three] == ["row_max", "row_sum_exp", "normalise"] and all(q.grid == 7 for q in three)


@pytest.mark.parametrize("config,cols,dtype,smem", [
    (sm.Config("block_cached", 256, 16), 4097, "float32", None),     # longer than the registers hold
    (sm.Config("block_cached", 256, 8), 100, "float32", None),      # not compiled
    (sm.Config("warp_cached", 256, 4, 1), 129, "float32", None),
    (sm.Config("warp_cached", 256, 4, 1), 100, "float16", None),     # fp16 needs 8 per lane
    (sm.Config("block_3pass", 256), 100, "float16", None),           # float32 only
    (sm.Config("three_kernels", 256), 100, "float16", None),
    (sm.Config("block_smem", 1024), 16384, "float32", 65536),        # a T4 cannot hold 64 KiB + reduction
    (sm.Config("block_online", 256), 0, "float32", None),
])
def test_plan_refuses(config, cols, dtype, smem):
    with pytest.raises(ValueError):
        sm.plan(config, 4, cols, dtype, smem)


def test_config_validation():
    with pytest.raises(ValueError):
        sm.Config("block_online", threads=100)
    with pytest.raises(ValueError):
        sm.Config("nonsense")
    with pytest.raises(TypeError):
        sm.dtype_name(np.float64)


@pytest.mark.parametrize("cols", [1, 2, 31, 33, 100, 128, 129, 1000, 1024, 1025, 4096, 16384, 16385,
                                  32768, 32769, 100_000])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("smem", [232448, 65536])
def test_dispatch_rule(cols, dtype, smem):
    config = sm.choose_config(cols, dtype, smem)
    sm.plan(config, 8, cols, dtype, smem)                              # it can run what it picks
    if cols <= 1024:
        assert config.kind == "warp_cached" and 32 * config.items >= cols
        assert config.rows_per_warp == (2 if cols <= 128 else 1)
        assert 32 * config.items < 2 * max(cols, 32 * sm.pack_elements(dtype))   # the smallest that fits
    elif cols <= 32768:
        assert config.kind == "block_cached" and config.capacity() >= cols
        assert config.capacity() < 2 * cols or config.threads == 128
    else:
        fits = sm.smem_bytes(cols, dtype) + sm.STATIC_SHARED_BYTES <= smem
        assert config.kind == ("block_smem" if fits else "block_online")


def test_dispatch_examples():
    assert sm.choose_config(128).label == "warp_cached 4/lane, 2 row/warp, 256 thr"
    assert sm.choose_config(4096).label == "block_cached 256x16"
    assert sm.choose_config(32768).label == "block_cached 1024x32"
    assert sm.choose_config(100_000, "float32", 232448).label == "block_online 1024 thr"
    assert sm.choose_config(50_000, "float32", 232448).label == "block_smem 1024 thr"


def test_family_configs():
    for family in sm.FAMILIES:
        config = sm.family_config(family, 1000)
        sm.plan(config, 3, 1000)
    with pytest.raises(ValueError):
        sm.family_config("warp_cached", 1025)
    with pytest.raises(ValueError):
        sm.family_config("block_cached", 32769)
    assert sm.family_config("block_online", 128).threads == 128
    assert sm.family_config("block_online", 4096).threads == 256
    assert sm.family_config("block_online", 32768).threads == 1024


def test_bench_configs_are_plannable_and_cover_the_kinds():
    for rows, cols, dtype in ((65536, 4096, "float32"), (4096, 32768, "float32"), (2**20, 128, "float32"),
                              (65536, 4096, "float16")):
        configs = sm.bench_configs(rows, cols, dtype, 232448)
        assert len(configs) == len(set(configs))
        assert sm.choose_config(cols, dtype, 232448) in configs       # the rule's pick is timed too
        for config in configs:
            sm.plan(config, rows, cols, dtype, 232448)
    kinds = {c.kind for c in sm.bench_configs(2**20, 128, "float32", 232448)}
    assert {"warp_cached", "warp_online", "block_online", "three_kernels"} <= kinds


def test_pack_and_smem_sizes():
    assert sm.pack_elements(np.float32) == 4 and sm.pack_elements(np.float16) == 8
    assert sm.smem_bytes(1, np.float32) == 16 and sm.smem_bytes(4096, np.float32) == 16384
    assert sm.smem_bytes(9, np.float16) == 32


def test_gpu_only_parts_say_so_on_the_cpu_backend(monkeypatch):
    """On the CPU backend the occupancy question is refused with the reason, and the yardstick is
    the composed softmax, not torch (which is compared on a GPU only)."""
    import kernels

    monkeypatch.setenv("COURSE_BACKEND", "cpu")
    with pytest.raises(kernels.NoGPUError, match="blocks_per_sm.*needs a CUDA GPU"):
        sm.Softmax(sm.Config("block_smem", 1024)).blocks_per_sm(4096, 32768)
    with pytest.raises(kernels.NoGPUError):
        sm.on_cupy_stream(lambda: None)
    assert not sm.torch_available()
    assert "GPU" in sm.torch_on_all_masked_row()
    x = kernels.array_module().asarray(np.array([[0.0, 1.0], [2.0, 2.0]], dtype=np.float32))
    name, fn = sm.library_softmax(x)
    assert name == "cupy (composed)"
    assert np.allclose(np.asarray(fn()), sm.softmax_reference(x), rtol=1e-6)


def test_module_imports_no_cupy():
    """kernels.chapters.softmax reaches CuPy only through the backend's array module."""
    text = (ROOT / "kernels" / "chapters" / "softmax" / "__init__.py").read_text(encoding="utf-8")
    assert not re.search(r"^\s*(import cupy|from cupy)", text, flags=re.M)


# --------------------------------------------------------------------------- chapter and benchmark


def _chapter_text() -> str:
    return CHAPTER.read_text(encoding="utf-8")


def _chapter_cells() -> list[str]:
    import jupytext

    return [c.source for c in jupytext.read(CHAPTER).cells if c.cell_type == "code"]


def test_every_kernel_is_shown():
    text = _chapter_text()
    for filename in FILES:
        assert f'"softmax/{filename}' in text, filename
    for family in sm.FAMILIES:
        assert f'"{family}"' in text
    assert "Sweep(" in text and "resource_report(" in text


def test_benchmark_uses_the_shared_module():
    text = BENCH.read_text(encoding="utf-8")
    assert "from kernels.chapters import softmax as sm" in text
    for name in ("sm.bench_configs", "sm.check_on_gpu", "sm.interleaved", "sm.on_cupy_stream", "sm.min_bytes",
                 "--out"):
        assert name in text
    tree = ast.parse(text)
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert not defined & {"plan", "choose_config", "softmax_reference", "Softmax"}   # no copies


def test_chapter_functions_use_the_shared_module():
    cells = "\n".join(_chapter_cells())
    tree = ast.parse(cells)
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert defined <= {"evaluate", "check_awkward"}
    assert all(name in dir(sm) for name in ("reference_on_gpu", "check_on_gpu", "library_softmax",
                                            "sweep_measure", "shapes_chart", "LayerNorm", "FlashAttention",
                                            "naive_attention", "layernorm_tolerance", "attention_tolerance"))


def test_shapes_chart_builds():
    import matplotlib

    matplotlib.use("Agg")
    fig = sm.shapes_chart({"a": {"k1": 100.0, "k2": 200.0}, "b": {"k2": 300.0}}, 3000.0, title="t")
    assert fig.axes and len(fig.axes[0].patches) == 4


def test_interleaved_rotates_and_collects():
    calls = []

    class FakeTiming:
        median_ms = 1.0

    import kernels.timing as timing

    original = timing.benchmark
    timing.benchmark = lambda fn, warmup, repeat: (fn(), FakeTiming())[1]
    try:
        medians = sm.interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b"),
                                  "c": lambda: calls.append("c")}, rounds=3)
    finally:
        timing.benchmark = original
    assert calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert medians == {"a": [1.0] * 3, "b": [1.0] * 3, "c": [1.0] * 3}
