"""Corrections made to the chapters' prose and kernel comments, each pinned by a test that fails if the
mistake comes back.

- SIMT: the xor butterfly run with d = 16, 8, 4, 2, 1 leaves every lane, after the step with distance
  d, with the combination of 32 / d lanes (not 2d). Checked by running the loop of warp_ops.cu on the
  CPU backend with lane masks instead of sums.
- Scan: only unsigned integer addition is defined to wrap around; a flag published beside a value
  needs the reader to order its loads too.
- GEMM: the paired-lane LDS.128 rule is an observed behaviour, not a rule of the Volta tuning guide.
- Measuring kernels: the profiler table's two halves come from two versions of the kernel.
- Coalescing and memory hierarchy: figures nobody recorded a measurement of (H200 figures that came with
  the experiments) are not used as evidence in the prose.
- Exercise pages: no result credited to a run nobody recorded, no source the reader cannot see.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
CUDA = ROOT / "kernels" / "cuda"
CODE_CELL = re.compile(r"^(`{3,})\{code-cell\}.*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)


def prose(chapter: str) -> str:
    return CODE_CELL.sub("", (BOOK / f"{chapter}.md").read_text(encoding="utf-8"))


def section(chapter: str, heading: str) -> str:
    """The prose of one section: from its heading to the next heading of the same or a higher level."""
    text = prose(chapter)
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", text, re.M)
    assert match, f"{chapter}: no heading {heading!r}"
    level = len(match.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, match.end())
    return text[match.end():end.start() if end else len(text)]


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


# --------------------------------------------------------------------------- SIMT: the butterfly

BUTTERFLY_MASKS = r'''
#define FULL_MASK 0xffffffffu
// warp_allreduce's loop, combining lane masks instead of floats: after each step, lane l records
// the set of lanes whose values its own value now combines.
extern "C" __global__ void butterfly_masks(unsigned* out)
{
    const int lane = threadIdx.x & 31;
    unsigned v = 1u << lane;
    int step = 0;
    for (int d = 16; d > 0; d >>= 1) {
        v |= __shfl_xor_sync(FULL_MASK, v, d);
        out[step * 32 + lane] = v;
        ++step;
    }
}
'''


def test_warp_allreduce_runs_the_butterfly_from_16_down_to_1():
    """The model below is the kernel's loop: distances 16, 8, 4, 2, 1 with __shfl_xor_sync."""
    code = (CUDA / "simt_and_warps" / "warp_ops.cu").read_text(encoding="utf-8")
    body = code.split("void warp_allreduce(")[1].split("\n}")[0]
    assert re.search(r"for \(int d = 16; d > 0; d >>= 1\)\s*\n\s*v \+= __shfl_xor_sync\(FULL_MASK, v, d\);", body)


def test_after_the_step_with_distance_d_every_lane_combines_32_over_d_lanes():
    from kernels.cpu import RawModule, xp

    out = xp.zeros(5 * 32, np.uint32)
    RawModule(code=BUTTERFLY_MASKS).get_function("butterfly_masks")((1,), (32,), (out,))
    masks = np.asarray(out).reshape(5, 32)
    for step, d in enumerate((16, 8, 4, 2, 1)):
        for lane in range(32):
            members = {k for k in range(32) if masks[step, lane] >> k & 1}
            assert members == {k for k in range(32) if k % d == lane % d}, (d, lane, sorted(members))
            assert len(members) == 32 // d
    assert (masks[-1] == 0xFFFFFFFF).all()


def test_chapter_and_kernel_comment_say_32_over_d_not_2d():
    text = flat(section("simt_and_warps", "Shuffles and votes"))
    assert "$32/d$ lanes" in text and "all 32 after `d = 1`" in text
    assert not re.search(r"group of `?2d`? lanes", text)
    comment = flat((CUDA / "simt_and_warps" / "warp_ops.cu").read_text(encoding="utf-8").split("extern")[0])
    assert "the 32 / d lanes" in comment and "2d lanes" not in comment


# --------------------------------------------------------------------------- scan


def test_scan_says_only_unsigned_addition_wraps():
    text = flat(section("scan", "Inclusive and exclusive scans"))
    assert "undefined behaviour" in text and "`unsigned int`" in text
    assert not re.search(r"32-bit integers, addition with wrap-around is associative", text)
    assert not re.search(r"(?<!unsigned )\bint(?:32)?\b[^.]*\bwraps? around\b", text.replace("`", "")), \
        "signed int overflow is undefined behaviour in C++, not a wrap-around"


def test_reduce_does_not_promise_that_signed_overflow_wraps():
    text = flat(section("reduce", "Integer sums: exact, with 64-bit accumulation"))
    assert "undefined behaviour" in text


def test_a_flag_beside_a_value_needs_ordering_on_the_reader_too():
    text = flat(section("scan", "A single-pass scan with decoupled look-back"))
    assert "reader must not read the value before the flag" in text
    assert "acquire load" in text and "A fence on the writer alone is not enough" in text
    assert "between the two writes would be needed to prevent it" not in text


# --------------------------------------------------------------------------- GEMM


def test_paired_lane_rule_is_an_observation_not_a_guide_citation():
    text = flat(section("gemm", "Rung 7b: what the SASS shows, and lanes that share their reads"))
    assert "volta-tuning-guide" not in prose("gemm") and "Volta Tuning Guide" not in text
    assert "observed behaviour" in text and "do not describe" in text
    comment = flat((CUDA / "gemm" / "warp_pipelined.cu").read_text(encoding="utf-8"))
    assert "an observed behaviour" in comment


# --------------------------------------------------------------------------- measuring kernels


def test_profiler_table_is_flagged_as_two_versions_of_the_kernel():
    text = section("measuring_kernels", "Never time under a profiler")
    table_end = max(m.end() for m in re.finditer(r"^\|.*\|\s*$", text, re.M))
    after = flat(text[table_end:text.index("What `ncu` does")])
    assert "do not come from the same version of the kernel" in after
    assert "same code reaches" not in after, "the normal-run columns are not the same code as under ncu"
    before = flat(text[:text.index("| N |")])
    assert "did not take these timings" in before


# --------------------------------------------------------------------------- figures with no recorded measurement


def test_coalescing_prose_uses_no_h200_figure_of_the_read_modify_write_table():
    text = (BOOK / "coalescing.md").read_text(encoding="utf-8")
    cell = text[text.index("NOTES_H200 = {"):]
    h200 = {int(v) for v in re.findall(r"\): (\d+)", cell[:cell.index("}")])}
    assert len(h200) == 14
    part = section("coalescing", "Strided loads *and* stores")
    quoted = {int(n) for n in re.findall(r"(?<![\d.])(\d{3,4})(?![\d.])", part)}
    assert not quoted & h200, f"H200 figures quoted in the prose: {sorted(quoted & h200)}"
    # The percentages the H200 column implies (offset 1, offset 32, strides 2 to 32).
    for pct in ("94.0 %", "99.3 %", "72.0 %", "39.8 %", "19.3 %", "9.6 ", "6.2 %"):
        assert pct not in part, pct
    assert "not evidence" in flat(part)


def test_memory_hierarchy_quotes_no_unrecorded_h200_timings():
    """H200 figures may come only from the recorded second run (book/runs/h200/), and say so."""
    text = prose("memory_hierarchy")
    unsourced = [block[:80] for block in re.split(r"\n\s*\n", text) if "H200" in block and "recorded" not in block]
    assert not unsourced, f"H200 figures not credited to the recorded run: {unsourced}"
    for figure in ("14.37 µs", "4.60 µs"):
        assert figure not in text


# --------------------------------------------------------------------------- exercise pages


def test_exercise_pages_cite_no_source_the_reader_cannot_see():
    """The exercise pages are on the website too: no "the notes printed ..." (softmax_overflow_fix once
    quoted a printed result of a run nobody recorded)."""
    from test_book_voice import NOTES

    pages = sorted((ROOT / "exercises").glob("*/*.md"))
    assert len(pages) >= 20
    hits = [f"{page.relative_to(ROOT)}: {m.group(0)!r}" for page in pages
            for m in NOTES.finditer(page.read_text(encoding="utf-8"))]
    assert not hits, hits
    overflow = (ROOT / "exercises" / "softmax" / "softmax_overflow_fix.md").read_text(encoding="utf-8")
    assert "[0, 0, 0, nan]" not in overflow and "inf / inf = NaN" in overflow
