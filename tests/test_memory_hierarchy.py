"""CPU tests of the "Memory hierarchy" chapter: its kernels compile for the T4 (sm_75) and the H100
(sm_90) with NVRTC and use the resources the chapter says they use, the pure helpers of
kernels.chapters.memory_hierarchy (chains, bank arithmetic, references) agree with plain Python loops, and the
chapter uses its kernels (what every chapter promises: tests/test_chapter_contract.py).
"""
from __future__ import annotations

import re
from math import gcd
from pathlib import Path

import numpy as np
import pytest

from kernels.chapters import memory_hierarchy as mh
from kernels.nvrtc import compile_cuda, nvrtc_available
from kernels.sources import source
from tooling.fresh_reports import fresh_reports_by_file

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "memory_hierarchy.md"
KERNEL_DIR = ROOT / "kernels" / "cuda" / "memory_hierarchy"
ARCHS = ["sm_75", "sm_90"]

KERNELS = {
    "pointer_chase.cu": ["pointer_chase"],
    "shared_chase.cu": ["shared_chase"],
    "reread.cu": ["reread"],
    "bank_stride.cu": ["bank_stride"],
    "tile_transpose.cu": ["tile_transpose_plain", "tile_transpose_padded", "tile_transpose_swizzled"],
    "constant_table.cu": ["lookup_constant", "lookup_global"],
    "rope.cu": ["rope_constant", "rope_global", "rope_sincos"],
}
# sincosf reduces angles of 105615 rad and more on a slow path (Payne-Hanek) that keeps 7 words in a
# per-thread array: ptxas gives rope_sincos a 32-byte stack frame for sm_90 (none for sm_75). The
# chapter explains it; RoPE's angles reach that path only at positions beyond 105615.
STACK_FRAME_ALLOWED = {"rope_sincos": 32}

needs_nvrtc = pytest.mark.skipif(not nvrtc_available(), reason="NVRTC bindings not installed")


def compiled(filename: str, arch: str):
    path = f"memory_hierarchy/{filename}"
    return compile_cuda(source(path), arch, (), filename=path).raise_for_errors()


def test_every_kernel_file_is_listed():
    assert sorted(p.name for p in KERNEL_DIR.glob("*.cu")) == sorted(KERNELS)


@pytest.fixture(scope="module")
def reports():
    """{(filename, arch): {kernel: report}}, compiled in fresh processes: exact "no spills" checks
    would otherwise depend on what the test process compiled before (tooling.fresh_reports says why)."""
    return fresh_reports_by_file("memory_hierarchy", sorted(KERNELS), ARCHS, ())   # no name expressions, as compiled() passes none


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("filename", sorted(KERNELS))
def test_compiles_without_local_memory(filename, arch, reports):
    assert compiled(filename, arch).cubin
    resources = reports[(filename, arch)]
    assert sorted(resources) == sorted(KERNELS[filename])
    for name, report in resources.items():
        assert report.stack_frame_bytes <= STACK_FRAME_ALLOWED.get(name, 0) and not report.spills, report


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_static_shared_memory(arch):
    assert compiled("bank_stride.cu", arch).resources["bank_stride"].shared_bytes == 4 * mh.TABLE_WORDS
    for report in compiled("tile_transpose.cu", arch).resources.values():
        assert report.shared_bytes == 4 * 32 * 33  # sized for the padded layout in all three
    for name in ("pointer_chase", "reread", "shared_chase"):  # shared_chase's is dynamic only
        assert not compiled(f"{name}.cu", arch).resources[name].shared_bytes
    for report in compiled("rope.cu", arch).resources.values():
        assert not report.shared_bytes


def _ptx_of(ptx: str, kernel: str) -> str:
    start = ptx.index(f".entry {kernel}(")
    end = ptx.find(".entry ", start + 1)
    return ptx[start:] if end < 0 else ptx[start:end]


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_rope_kernels_read_their_tables_where_the_chapter_says(arch):
    """rope_constant's table loads go to the constant cache, rope_global's through the read-only
    global path (ld.global.nc, what __ldg requests), and rope_sincos reads theta only (plus, on
    sincosf's slow path, its own constants). Every kernel moves each pair with one 8-byte load and store."""
    ptx = compiled("rope.cu", arch).ptx
    constant, global_, sincos = (_ptx_of(ptx, name) for name in KERNELS["rope.cu"])
    assert "ld.const.f32" in constant and "ld.global.nc.f32" not in constant
    assert "ld.const" not in global_ and global_.count("ld.global.nc.f32") == 2
    assert "ld.const" not in sincos and "rope_cos_c" not in sincos and "rope_sin_c" not in sincos
    for body in (constant, global_, sincos):
        assert body.count("ld.global.nc.v2.f32") == 1 and body.count("st.global.v2.f32") == 1

@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_shared_chase_walks_shared_memory(arch):
    """The chase loads from shared memory; the only global load is the copy into it."""
    ptx = compiled("shared_chase.cu", arch).ptx
    assert "ld.shared.u32" in ptx and "st.shared.u32" in ptx and "bar.sync" in ptx
    assert ptx.count("ld.global") == 1
    assert "%globaltimer" in ptx and "%clock64" in ptx


def test_shared_chase_follows_pointer_chase():
    """Same clocks, same outputs, same argument names (plus the chain length for the copy)."""
    from kernels.signature import parse_signature

    chase, shared = source("memory_hierarchy/pointer_chase.cu"), source("memory_hierarchy/shared_chase.cu")
    names = lambda code, kernel: [p.name for p in parse_signature(code, kernel)]
    assert names(shared, "shared_chase") == ["next", "entries", "warm_steps", "steps", "last", "timing"]
    assert [n for n in names(shared, "shared_chase") if n != "entries"] == names(chase, "pointer_chase")
    for line in ("timing[0] = c1 - c0;", "timing[1] = (long long)(t1 - t0);", "last[0] = j;",
                 'asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));'):
        assert line in chase and line in shared
    assert "extern __shared__ unsigned int s[];" in shared
    assert 4 * mh.SHARED_CHASE_MAX_ENTRIES == 48 * 1024  # the shared memory a block gets without opting in


def test_constant_table_size_matches_helpers():
    code = source("memory_hierarchy/constant_table.cu")
    assert f"#define ENTRIES {mh.LOOKUP_ENTRIES}" in code
    assert "__constant__ float table_c[ENTRIES]" in code
    assert f"#define WORDS {mh.TABLE_WORDS}" in source("memory_hierarchy/bank_stride.cu")
    rope = source("memory_hierarchy/rope.cu")
    assert f"#define ROPE_TABLE_ENTRIES {mh.ROPE_TABLE_ENTRIES}" in rope
    for name in ("rope_cos_c", "rope_sin_c"):
        assert f"__constant__ float {name}[ROPE_TABLE_ENTRIES];" in rope
    # Both tables together fit in the 64 KB of constant memory, beside the chapter's other table.
    assert 2 * 4 * mh.ROPE_TABLE_ENTRIES + 4 * mh.LOOKUP_ENTRIES <= 64 * 1024
    assert 64 * 64 <= mh.ROPE_TABLE_ENTRIES  # the notes' shape: 64 positions x 64 pairs


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize("nbytes", [128, 128 * 7, 4096, 128 * 1009 + 77])
def test_chase_chain_is_one_cycle_over_all_lines(nbytes):
    nxt = mh.chase_chain(nbytes, seed=3)
    lines = nbytes // 128
    assert nxt.dtype == np.uint32 and len(nxt) == lines * 32
    seen, j = set(), 0
    for _ in range(lines):
        assert j % 32 == 0 and j not in seen
        seen.add(j)
        j = int(nxt[j])
    assert j == 0 and len(seen) == lines
    assert not np.any(nxt.reshape(lines, 32)[:, 1:])


@pytest.mark.parametrize("entries", [1, 2, 7, 1009, 4096, 8192, mh.SHARED_CHASE_MAX_ENTRIES])
def test_shared_chain_is_one_cycle_over_all_words(entries):
    nxt = mh.shared_chain(entries, seed=11)
    assert nxt.dtype == np.uint32 and len(nxt) == entries
    assert sorted(nxt.tolist()) == list(range(entries))
    seen, j = set(), 0
    for _ in range(entries):
        assert j not in seen
        seen.add(j)
        j = int(nxt[j])
    assert j == 0 and len(seen) == entries
    assert mh.follow_chain(nxt, entries) == 0


@pytest.mark.parametrize("entries", [0, -1, mh.SHARED_CHASE_MAX_ENTRIES + 1])
def test_shared_chain_rejects_sizes_outside_shared_memory(entries):
    with pytest.raises(ValueError):
        mh.shared_chain(entries)


def test_latency_plot_draws_levels_as_horizontal_lines():
    records = [{"kib": 4, "ns": 20.0}, {"kib": 8192, "ns": 140.0}]
    ax = mh.latency_plot(records, "kib", "ns", {"L1": 256}).axes[0]
    assert len(ax.lines) == 2                                    # the curve and one mark
    ax = mh.latency_plot(records, "kib", "ns", {"L1": 256}, levels={"shared": 9.0}).axes[0]
    assert len(ax.lines) == 3 and list(ax.lines[-1].get_ydata()) == [9.0, 9.0]
    assert ax.get_ylim()[0] <= 9.0                               # the line is inside the axes
    assert "shared " in [text.get_text() for text in ax.texts]


def test_chase_chain_rejects_tiny_sets():
    with pytest.raises(ValueError):
        mh.chase_chain(64)


def test_follow_chain():
    nxt = np.array([2, 0, 1])
    assert mh.follow_chain(nxt, 0) == 0
    assert [mh.follow_chain(nxt, s) for s in (1, 2, 3, 4)] == [2, 1, 0, 2]


@pytest.mark.parametrize("stride", list(range(0, 34)))  # lane * stride < 1024: no wrap-around
def test_conflict_degree_is_gcd(stride):
    degree = mh.conflict_degree(mh.stride_words(stride))
    assert degree == mh.predicted_degree(stride)
    assert degree == (1 if stride == 0 else gcd(stride, 32))


def test_conflict_degree_counts_distinct_words_only():
    assert mh.conflict_degree([0] * 32) == 1                  # broadcast
    assert mh.conflict_degree([0, 32] * 16) == 2              # two words in bank 0
    assert mh.conflict_degree(list(range(32))) == 1
    assert mh.conflict_degree([5 * 32 + 1, 1, 33, 2]) == 3


def test_tile_layouts_column_banks():
    for r_of in (lambda r, c: r * 33 + c, lambda r, c: r * 32 + (c ^ r)):
        for c in range(32):
            assert mh.conflict_degree([r_of(r, c) for r in range(32)]) == 1   # column read
            assert mh.conflict_degree([r_of(c, k) for k in range(32)]) == 1   # row write
    assert mh.conflict_degree([r * 32 + 5 for r in range(32)]) == 32


def test_unified_l1():
    assert mh.unified_l1_kib("9.0") == 256 and mh.unified_l1_kib("7.5") == 96
    assert mh.unified_l1_kib("1.0") is None


# --------------------------------------------------------------------------- references vs loops

rng = np.random.default_rng(7)


def test_bank_stride_reference():
    table = rng.standard_normal(mh.TABLE_WORDS)
    for stride in (0, 1, 2, 32, 33):
        ref = mh.bank_stride_reference(table, stride, 9, 70)
        loop = [9 * table[((t % 32) * stride) % 1024] for t in range(70)]
        np.testing.assert_allclose(ref, loop, rtol=1e-12)


def test_lookup_reference():
    table = rng.standard_normal(mh.LOOKUP_ENTRIES)
    for distinct in (1, 2, 8, 32):
        ref = mh.lookup_reference(table, distinct, 300, 65)
        loop = [sum(table[(k + ((t % 32) & (distinct - 1))) & 255] for k in range(300)) for t in range(65)]
        np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=1e-12)


def test_reread_reference():
    for n4, threads in [(1, 128), (5, 3), (1001, 384)]:
        x = rng.standard_normal(4 * n4)
        ref = mh.reread_reference(x, n4, 3, threads)
        loop = [3 * sum(x[4 * i:4 * i + 4].sum() for i in range(t, n4, threads)) for t in range(threads)]
        np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=1e-12)


def _rope_loops(x, seq, heads, pairs, angle):
    """Plain complex arithmetic: pair (x0, x1) is x0 + i x1, multiplied by exp(i * angle(m, p))."""
    batch = len(x) // (2 * seq * heads * pairs)
    out = np.empty(len(x))
    for b in range(batch):
        for m in range(seq):
            for h in range(heads):
                for p in range(pairs):
                    i = 2 * (((b * seq + m) * heads + h) * pairs + p)
                    z = complex(x[i], x[i + 1]) * np.exp(1j * angle(m, p))
                    out[i], out[i + 1] = z.real, z.imag
    return out


@pytest.mark.parametrize("batch,seq,heads,pairs", [(1, 1, 1, 1), (2, 3, 1, 4), (1, 5, 3, 7), (3, 2, 2, 64)])
def test_rope_references_are_complex_rotations(batch, seq, heads, pairs):
    x = rng.standard_normal(2 * batch * seq * heads * pairs)
    theta = mh.rope_theta(pairs)
    cos_t, sin_t = mh.rope_tables(seq, theta)
    angle = lambda m, p: m * float(theta[p])
    np.testing.assert_allclose(mh.rope_sincos_reference(x, theta, seq, heads, pairs),
                               _rope_loops(x, seq, heads, pairs, angle), rtol=0, atol=1e-12)
    # From the float32 tables: the loops' exact rotation, up to the tables' rounding (2^-24 each).
    np.testing.assert_allclose(mh.rope_reference(x, cos_t, sin_t, seq, heads, pairs),
                               _rope_loops(x, seq, heads, pairs, angle), rtol=0,
                               atol=2 * 2**-24 * np.abs(x).max())
    # Entries beyond seq * pairs (the constant tables hold ROPE_TABLE_ENTRIES) are not read.
    padded = [np.concatenate([t, np.full(mh.ROPE_TABLE_ENTRIES - t.size, np.nan)]) for t in (cos_t, sin_t)]
    np.testing.assert_array_equal(mh.rope_reference(x, *padded, seq, heads, pairs),
                                  mh.rope_reference(x, cos_t, sin_t, seq, heads, pairs))


def test_rope_reference_pairs_are_interleaved():
    """Pair p of a head vector is elements 2p and 2p + 1; position m turns it by m * theta[p]."""
    seq, heads, pairs = 3, 2, 4
    x = np.zeros(2 * seq * heads * pairs)
    x[0::2] = 1.0                                      # every pair is (1, 0): the output is (cos, sin)
    theta = mh.rope_theta(pairs)
    out = mh.rope_sincos_reference(x, theta, seq, heads, pairs).reshape(seq, heads, pairs, 2)
    for m in range(seq):
        for h in range(heads):
            for p in range(pairs):
                assert out[m, h, p, 0] == pytest.approx(np.cos(m * float(theta[p])), abs=1e-15)
                assert out[m, h, p, 1] == pytest.approx(np.sin(m * float(theta[p])), abs=1e-15)


@pytest.mark.parametrize("pairs", [1, 2, 7, 64])
def test_rope_theta(pairs):
    theta = mh.rope_theta(pairs)
    assert theta.dtype == np.float32 and theta.shape == (pairs,)
    assert theta[0] == 1.0
    assert np.all(np.diff(theta) < 0)
    expected = [mh.ROPE_BASE ** (-p / pairs) for p in range(pairs)]   # base^(-2p / head_dim)
    np.testing.assert_allclose(theta, expected, rtol=2**-24)
    assert theta[-1] > 1 / mh.ROPE_BASE
    np.testing.assert_allclose(mh.rope_theta(pairs, base=2.0), [2.0 ** (-p / pairs) for p in range(pairs)],
                               rtol=2**-24)


def test_rope_tables():
    seq, pairs = 5, 3
    theta = mh.rope_theta(pairs)
    cos_t, sin_t = mh.rope_tables(seq, theta)
    assert cos_t.dtype == sin_t.dtype == np.float32 and cos_t.shape == sin_t.shape == (seq * pairs,)
    for m in range(seq):
        for p in range(pairs):
            a = m * float(theta[p])
            assert cos_t[m * pairs + p] == np.float32(np.cos(a))   # rounded once, from float64
            assert sin_t[m * pairs + p] == np.float32(np.sin(a))
    assert np.all(cos_t[:pairs] == 1) and np.all(sin_t[:pairs] == 0)   # position 0 is not turned


@pytest.mark.parametrize("pairs", [0, -1])
def test_rope_theta_rejects_no_pairs(pairs):
    with pytest.raises(ValueError, match="pairs"):
        mh.rope_theta(pairs)


def test_rope_helpers_reject_bad_input():
    theta = mh.rope_theta(4)
    cos_t, sin_t = mh.rope_tables(3, theta)
    x = np.ones(2 * 3 * 2 * 4)
    with pytest.raises(ValueError, match="base"):
        mh.rope_theta(4, base=1.0)
    with pytest.raises(ValueError):
        mh.rope_tables(0, theta)
    with pytest.raises(ValueError, match="multiple"):              # not whole head vectors
        mh.rope_reference(x[:-2], cos_t, sin_t, 3, 2, 4)
    with pytest.raises(ValueError, match="multiple"):
        mh.rope_reference(x[:0], cos_t, sin_t, 3, 2, 4)
    with pytest.raises(ValueError, match="at least 1"):
        mh.rope_reference(x, cos_t, sin_t, 3, 0, 4)
    with pytest.raises(ValueError, match="entries"):               # tables shorter than seq * pairs
        mh.rope_reference(x, cos_t[:-1], sin_t, 3, 2, 4)
    with pytest.raises(ValueError, match="theta"):
        mh.rope_sincos_reference(x, theta[:3], 3, 2, 4)


def test_tile_transpose_reference():
    x = rng.standard_normal(3 * 1024)
    ref = mh.tile_transpose_reference(x, 3, 2).reshape(3, 32, 32)
    for t in range(3):
        for r in range(32):
            for c in range(32):
                assert ref[t, r, c] == 2 * x[t * 1024 + c * 32 + r]


# --------------------------------------------------------------------------- the chapter


def test_chapter_runs_two_sweeps():
    assert CHAPTER.read_text().count("Sweep(") >= 2


def test_chapter_kernels_exist():
    text = CHAPTER.read_text()
    for filename in re.findall(r'show_source\("memory_hierarchy/([\w.]+)"', text):
        assert filename in KERNELS
    assert sorted(set(re.findall(r'show_source\("memory_hierarchy/([\w.]+)"', text))) == sorted(KERNELS)
    for filename, name in re.findall(r'(?:load_kernel|resource_report)\("memory_hierarchy/([\w.]+)", "(\w+)"', text):
        assert name in KERNELS[filename]
    for names in KERNELS.values():
        for name in names:
            assert name in text or name.rsplit("_", 1)[0] in text
