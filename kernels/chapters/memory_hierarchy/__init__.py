"""Helpers for the "Memory hierarchy" chapter: pointer-chase chains, bank arithmetic, references, figures.

Everything here runs without a GPU (the chain builder takes ``xp=cupy`` to build on the device):

- :func:`chase_chain`: one random cycle through the cache lines of a working set, for ``pointer_chase``.
- :func:`shared_chain`: one random cycle through every word of a chain that fits in shared memory, for
  ``shared_chase``.
- :func:`follow_chain`: where ``pointer_chase`` and ``shared_chase`` end after a number of steps (their
  reference).
- :func:`conflict_degree`: how many passes shared memory needs for one warp-wide access (the bank
  model's ``conflict_ways``, from ``kernels.traffic.banks``).
- :func:`bank_stride_reference`, :func:`lookup_reference`, :func:`reread_reference`,
  :func:`tile_transpose_reference`: float64 references of the chapter's kernels.
- :func:`rope_theta`, :func:`rope_tables`: the rotation frequencies and the cosine and sine tables of
  the RoPE kernels (``rope.cu``); :func:`rope_reference`, :func:`rope_sincos_reference`: their float64
  references.
- :func:`bank_map`: a figure of which bank each lane of a warp hits, for a few strides.
- :func:`tile_layouts`: a figure of the bank of every element of a 32x32 tile, plain, padded, swizzled.
- :func:`latency_plot`: nanoseconds per load against the working set, with the cache sizes marked (and
  optionally levels without a working-set axis, such as shared memory, as horizontal lines).
"""
from __future__ import annotations

from math import gcd
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from ...traffic.banks import BANKS, WARP, bank_of
from ...traffic.banks import conflict_ways as conflict_degree

LINE_BYTES = 128  # L1 and L2 cache line
TABLE_WORDS = 1024  # bank_stride.cu's shared table
LOOKUP_ENTRIES = 256  # constant_table.cu's table
SHARED_CHASE_MAX_ENTRIES = 12 * 1024  # 48 KiB: the shared memory a block gets without opting in to more
ROPE_TABLE_ENTRIES = 4096  # rope.cu's __constant__ tables: seq * pairs entries each, 16 KiB
ROPE_BASE = 10000.0        # the base of the rotation frequencies (Su et al., RoFormer; Llama)


def chase_chain(working_set_bytes: int, line_bytes: int = LINE_BYTES, seed: int | None = None,
                xp: Any = np) -> Any:
    """A uint32 array of ``working_set_bytes // 4`` words holding one random cycle through its lines.

    Only the first word of every ``line_bytes`` line is used: ``next[w]`` is the word index of the
    next line in a random order that visits every line once and then returns to the start. Word 0
    is on the cycle, so a walk starting there stays on it. Other words are 0.
    """
    words_per_line = line_bytes // 4
    if line_bytes % 4 or words_per_line < 1:
        raise ValueError("line_bytes must be a positive multiple of 4")
    lines = working_set_bytes // line_bytes
    if lines < 1:
        raise ValueError(f"a working set of {working_set_bytes} bytes holds no {line_bytes}-byte line")
    if lines * words_per_line >= 2**32:
        raise ValueError("the chain must be indexable with 32-bit unsigned ints")
    if xp is np:
        order = np.random.default_rng(seed).permutation(lines).astype(np.uint32)
    else:
        if seed is not None:
            xp.random.seed(seed)
        order = xp.random.permutation(lines).astype(xp.uint32)
    nxt = xp.zeros(lines * words_per_line, dtype=xp.uint32)
    nxt[order * words_per_line] = xp.roll(order, -1) * words_per_line
    return nxt


def shared_chain(entries: int, seed: int | None = None, xp: Any = np) -> Any:
    """A uint32 array of ``entries`` words holding one random cycle through all of them, for ``shared_chase``.

    :func:`chase_chain` with 4-byte "lines": shared memory has no cache lines, so every word is on the
    cycle. Word 0 is on it. ``4 * entries`` bytes must fit in the 48 KiB of shared memory a block may
    use without opting in to more (CUDA C++ Programming Guide), on every GPU the course supports.
    """
    entries = int(entries)
    if not 1 <= entries <= SHARED_CHASE_MAX_ENTRIES:
        raise ValueError(f"a shared-memory chain needs 1 to {SHARED_CHASE_MAX_ENTRIES} entries, not {entries}")
    return chase_chain(4 * entries, line_bytes=4, seed=seed, xp=xp)


def follow_chain(nxt: Any, steps: int, start: int = 0) -> int:
    """The index reached after ``steps`` steps of ``j = nxt[j]`` from ``start`` (plain Python)."""
    nxt = np.asarray(nxt)
    j = int(start)
    for _ in range(int(steps)):
        j = int(nxt[j])
    return j


def stride_words(stride: int, table_words: int = TABLE_WORDS, warp: int = WARP) -> list[int]:
    """The words bank_stride.cu's lanes read: lane l reads (l * stride) mod table_words."""
    return [(lane * stride) % table_words for lane in range(warp)]


def predicted_degree(stride: int, banks: int = BANKS) -> int:
    """gcd(stride, 32) for a stride between lanes in 4-byte words; 1 for stride 0 (broadcast)."""
    return 1 if stride == 0 else gcd(int(stride), banks)


# --------------------------------------------------------------------------- references (float64)


def bank_stride_reference(table: np.ndarray, stride: int, iters: int, threads: int) -> np.ndarray:
    """out[t] = iters * table[(lane * stride) mod 1024] with lane = t mod 32."""
    lane = np.arange(int(threads)) % WARP
    return int(iters) * np.asarray(table, dtype=np.float64)[(lane * int(stride)) % TABLE_WORDS]


def lookup_reference(table: np.ndarray, distinct: int, iters: int, threads: int) -> np.ndarray:
    """out[t] = sum over k < iters of table[(k + (lane & (distinct - 1))) mod 256]."""
    table = np.asarray(table, dtype=np.float64)
    offset = (np.arange(int(threads)) % WARP) & (int(distinct) - 1)
    k = np.arange(int(iters))
    return table[(k[None, :] + offset[:, None]) % LOOKUP_ENTRIES].sum(axis=1)


def reread_reference(x: np.ndarray, n4: int, reps: int, threads: int) -> np.ndarray:
    """out[t] = reps * (sum of the float4 elements t, t + threads, ... of x), x viewed as (n4, 4)."""
    rows = np.asarray(x, dtype=np.float64).reshape(-1, 4)[: int(n4)].sum(axis=1)
    out = np.zeros(int(threads))
    np.add.at(out, np.arange(int(n4)) % int(threads), rows)
    return int(reps) * out


def tile_transpose_reference(x: np.ndarray, ntiles: int, reps: int) -> np.ndarray:
    """reps * the transpose of every 32x32 tile of x."""
    tiles = np.asarray(x, dtype=np.float64).reshape(int(ntiles), 32, 32)
    return int(reps) * tiles.transpose(0, 2, 1).reshape(-1)


def rope_theta(pairs: int, base: float = ROPE_BASE) -> np.ndarray:
    """theta[p] = base^(-2p / (2 * pairs)) for p < pairs, float32: the rotation frequency of pair p of a
    head vector of 2 * pairs numbers (Su et al., RoFormer, 2021). theta[0] = 1; the last one,
    base^(-(pairs - 1) / pairs), is a little above 1 / base."""
    pairs = int(pairs)
    if pairs < 1:
        raise ValueError(f"pairs must be at least 1, got {pairs}")
    if not base > 1:
        raise ValueError(f"base must be greater than 1, got {base}")
    return (float(base) ** (-np.arange(pairs, dtype=np.float64) / pairs)).astype(np.float32)


def rope_tables(seq: int, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of m * theta[p] at entry m * pairs + p for m < seq, float32 (rope.cu's tables).

    The angles are computed in float64 and only the results rounded to float32.
    """
    theta = np.asarray(theta, dtype=np.float64).reshape(-1)
    if int(seq) < 1 or theta.size < 1:
        raise ValueError(f"the tables need seq >= 1 and at least one theta, got seq {seq}, {theta.size} theta")
    angle = _rope_angles(seq, theta)
    return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)


def _rope_angles(seq: int, theta: np.ndarray) -> np.ndarray:
    """m * theta[p] at entry m * pairs + p for m < seq, in float64."""
    return (np.arange(int(seq), dtype=np.float64)[:, None] * np.asarray(theta, dtype=np.float64)[None, :]).reshape(-1)


def _rope_shape(x: np.ndarray, seq: int, heads: int, pairs: int) -> tuple[int, int, int, int]:
    seq, heads, pairs = int(seq), int(heads), int(pairs)
    if min(seq, heads, pairs) < 1:
        raise ValueError(f"seq, heads and pairs must be at least 1, got {seq}, {heads}, {pairs}")
    per_batch = 2 * seq * heads * pairs
    if np.size(x) == 0 or np.size(x) % per_batch:
        raise ValueError(f"x has {np.size(x)} floats, not a positive multiple of 2 * seq * heads * pairs = "
                         f"{per_batch}")
    return np.size(x) // per_batch, seq, heads, pairs


def rope_reference(x: np.ndarray, cos_table: np.ndarray, sin_table: np.ndarray, seq: int, heads: int,
                   pairs: int) -> np.ndarray:
    """rope.cu's output from tables, in float64.

    x is viewed as (batch, seq, heads, pairs, 2); the pair (x0, x1) at position m becomes
    (x0 c - x1 s, x0 s + x1 c), with c and s the table entries m * pairs + p. Tables longer than
    seq * pairs entries (the constant tables hold ROPE_TABLE_ENTRIES) are read only that far.
    """
    batch, seq, heads, pairs = _rope_shape(x, seq, heads, pairs)
    entries = seq * pairs
    cos_table, sin_table = (np.asarray(t, dtype=np.float64).reshape(-1) for t in (cos_table, sin_table))
    if min(cos_table.size, sin_table.size) < entries:
        raise ValueError(f"the tables need seq * pairs = {entries} entries, got {cos_table.size} and "
                         f"{sin_table.size}")
    v = np.asarray(x, dtype=np.float64).reshape(batch, seq, heads, pairs, 2)
    c = cos_table[:entries].reshape(1, seq, 1, pairs)
    s = sin_table[:entries].reshape(1, seq, 1, pairs)
    out = np.empty_like(v)
    out[..., 0] = v[..., 0] * c - v[..., 1] * s
    out[..., 1] = v[..., 0] * s + v[..., 1] * c
    return out.reshape(-1)


def rope_sincos_reference(x: np.ndarray, theta: np.ndarray, seq: int, heads: int, pairs: int) -> np.ndarray:
    """rope_sincos's output: the rotation of :func:`rope_reference` with the angles m * theta[p]
    computed in float64 from the given theta (the kernel rounds them to float32)."""
    theta = np.asarray(theta, dtype=np.float64).reshape(-1)
    if theta.size < int(pairs):
        raise ValueError(f"theta has {theta.size} entries, the kernel reads {int(pairs)}")
    angle = _rope_angles(seq, theta[:int(pairs)])
    return rope_reference(x, np.cos(angle), np.sin(angle), seq, heads, pairs)


# --------------------------------------------------------------------------- figures


def _bank_colors() -> Any:
    return plt.get_cmap("hsv", BANKS)


def bank_map(strides: Sequence[int] = (0, 1, 2, 32, 33)) -> Figure:
    """For each stride, the 32 lanes of a warp (top) and the bank each one hits (bottom)."""
    fig, axes = plt.subplots(len(strides), 1, figsize=(10, 1.35 * len(strides)))
    axes = np.atleast_1d(axes)
    for ax, stride in zip(axes, strides):
        words = stride_words(stride)
        degree = conflict_degree(words)
        for lane, w in enumerate(words):
            b = bank_of(w)
            ax.plot([lane, b], [1, 0], color="tab:red" if degree > 1 else "tab:blue", lw=0.8, alpha=0.7)
        ax.scatter(range(WARP), [1] * WARP, s=14, color="black", zorder=3)
        used = sorted({bank_of(w) for w in words})
        ax.scatter(range(BANKS), [0] * BANKS, s=14, color="lightgray", zorder=3)
        ax.scatter(used, [0] * len(used), s=18, color="black", zorder=4)
        ax.set_xlim(-1, 32)
        ax.set_ylim(-0.3, 1.3)
        ax.set_yticks([0, 1], ["bank", "lane"], fontsize=8)
        ax.set_xticks([])
        label = "broadcast: one word" if stride == 0 else f"{degree}-way conflict" if degree > 1 else "no conflict"
        ax.set_title(f"stride {stride} words: {label}", fontsize=9, loc="left")
        for side in ("top", "right", "bottom"):
            ax.spines[side].set_visible(False)
    fig.tight_layout()
    plt.close(fig)
    return fig


def tile_layouts() -> Figure:
    """The bank of every element (r, c) of a 32x32 float tile in the three layouts; column 0 outlined."""
    r, c = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    layouts = {"plain: r*32 + c": r * 32 + c, "padded: r*33 + c": r * 33 + c,
               "swizzled: r*32 + (c ^ r)": r * 32 + (c ^ r)}
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.9))
    for ax, (title, slot) in zip(axes, layouts.items()):
        banks = bank_of(slot)
        ax.imshow(banks, cmap=_bank_colors(), interpolation="nearest")
        ax.add_patch(plt.Rectangle((-0.5, -0.5), 1, 32, fill=False, ec="black", lw=2))
        col0 = sorted({int(b) for b in banks[:, 0]})
        ax.set_title(f"{title}\ncolumn 0 uses {len(col0)} bank{'s' if len(col0) > 1 else ''}", fontsize=9)
        ax.set_xlabel("column c")
        ax.set_ylabel("row r")
    fig.suptitle("bank of element (r, c) of a 32x32 float tile (colour = bank)", fontsize=10)
    fig.tight_layout()
    plt.close(fig)
    return fig


def latency_plot(records: Sequence[Mapping[str, Any]], x: str, y: str,
                 marks: Mapping[str, float], title: str = "",
                 levels: Mapping[str, float] | None = None) -> Figure:
    """y against x (log-log) for the records that have y, with a vertical line per mark (in x units).

    ``levels`` adds a labelled horizontal line per entry (in y units): a latency measured without a
    working-set sweep, such as shared memory's.
    """
    pts = sorted((r[x], r[y]) for r in records if r.get(y) is not None)
    fig, ax = plt.subplots(figsize=(8, 3.8))
    if pts:
        xs, ys = zip(*pts)
        ax.plot(xs, ys, "o-", color="tab:blue")
    for i, (label, value) in enumerate(marks.items()):
        ax.axvline(value, color="gray", ls="--", lw=1)
        ax.text(value, 0.97 - 0.08 * i, f" {label}", transform=ax.get_xaxis_transform(), fontsize=8,
                va="top", color="dimgray")
    for label, value in (levels or {}).items():
        ax.axhline(value, color="tab:green", ls=":", lw=1.2)
        ax.text(0.01, value, f"{label} ", transform=ax.get_yaxis_transform(), fontsize=8, va="bottom",
                color="tab:green")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    plt.close(fig)
    return fig


# Unified L1 data cache + shared memory per SM, in KiB, by compute capability (CUDA C++ Programming
# Guide, compute-capability tables; Volta, Turing, Ampere and Hopper tuning guides). None if unknown.
UNIFIED_L1_KIB = {"7.0": 128, "7.2": 128, "7.5": 96, "8.0": 192, "8.6": 128, "8.7": 192, "8.9": 128,
                  "9.0": 256}


def unified_l1_kib(compute_capability: str) -> int | None:
    """KiB of L1 + shared storage per SM for a compute capability such as "9.0", or None."""
    return UNIFIED_L1_KIB.get(str(compute_capability))
