"""The exercises as committed: every source renders, every notebook is fresh, every solution and starter
compiles for the T4 and the H100, predictions check out, and the corpus is well formed.

Nothing here runs a kernel, so it all runs without a GPU and without the CPU backend; the tests that run
kernels are in tests/test_grading_backend.py (CPU backend) and tests/gpu/test_exercises_gpu.py (GPU).
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import exercises as extool  # noqa: E402  (tools/ is not a package)
import notebooks as nbtools  # noqa: E402

from kernels.grading import verdicts as V  # noqa: E402
from kernels.grading.extract import extract_text  # noqa: E402
from kernels.grading.harness import signature_problems  # noqa: E402
from kernels.grading.markers import outside_differences  # noqa: E402
from kernels.grading.predict import grade_answers  # noqa: E402
from kernels.grading.registry import CHAPTERS, all_exercises  # noqa: E402
from kernels.grading.screen import screen  # noqa: E402
from kernels.grading.session import make_cases  # noqa: E402

EXERCISES = all_exercises()
IDS = list(EXERCISES)
KERNEL_IDS = [i for i, ex in EXERCISES.items() if ex.has_kernel]
PREDICT_IDS = [i for i, ex in EXERCISES.items() if ex.questions]
REQUIRED_CHAPTERS = ("gpu_architecture", "measuring_kernels", "simt_and_warps", "memory_hierarchy", "dram_bursts",
                     "coalescing", "reduce", "scan", "asynchrony", "gemm", "softmax")


# --------------------------------------------------------------------------------------------------
# Coverage of the course
# --------------------------------------------------------------------------------------------------

def test_enough_exercises_in_every_chapter() -> None:
    per_chapter = Counter(ex.chapter for ex in EXERCISES.values())
    assert len(EXERCISES) >= 24
    for chapter in REQUIRED_CHAPTERS:
        assert per_chapter[chapter] >= 2, f"chapter {chapter} has {per_chapter[chapter]} exercises"
    assert set(per_chapter) <= set(CHAPTERS)


def test_a_mix_of_kinds_and_speed_targets() -> None:
    kinds = Counter(ex.kind for ex in EXERCISES.values())
    assert kinds["write"] >= 8 and kinds["fix"] >= 6 and kinds["predict"] >= 5, kinds
    baselines = {ex.perf.baseline for ex in EXERCISES.values() if ex.perf}
    assert {"copy", "cublas", "ideal"} <= baselines


# --------------------------------------------------------------------------------------------------
# Sources, notebooks and the README table
# --------------------------------------------------------------------------------------------------

def test_committed_files_are_fresh() -> None:
    problems = extool.problems()
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("exercise_id", IDS)
def test_starter_differs_from_solution_only_inside_marked_regions(exercise_id: str) -> None:
    src = extool.source_of(exercise_id)
    rendered = src.rendered_kernel() if src.kernel is not None else src.rendered_prediction()
    assert rendered.regions, "no marked region"
    assert rendered.solution != rendered.starter
    # the starter the student gets is the one in the committed notebook
    nb = json.loads(extool.notebook_path(src).read_text(encoding="utf-8"))
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    sub = extract_text(json.dumps(nb), ".ipynb")
    if src.kernel is not None:
        committed = sub.kernel.strip("\n")
    else:
        committed = rendered.starter
        assert committed in code
    assert outside_differences(rendered.solution, committed, rendered.regions) == []


@pytest.mark.parametrize("exercise_id", IDS)
def test_notebook_structure(exercise_id: str) -> None:
    ex = EXERCISES[exercise_id]
    path = ROOT / "exercises" / ex.chapter / f"{ex.name}.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [("".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "code"]
    markdown = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert code[0] == extool.setup_cell(), "the first code cell must be the exercise setup cell"
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert nbtools.setup_cell_repo(code[0]) == config["repository"]["url"].rstrip("/")
    assert f'check("{ex.id}"' in code[-1]
    assert f"](../../book/{ex.chapter}.ipynb)" in markdown
    repo = config["repository"]["url"].rstrip("/").removeprefix("https://github.com/")
    assert f"https://colab.research.google.com/github/{repo}/blob/main/exercises/{ex.chapter}/{ex.name}.ipynb" in markdown
    assert "<details>" in markdown and "<summary>" in markdown
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")
    assert nb["metadata"]["colab"]["gpuType"] == "T4"
    for spec in ex.kernels:
        assert spec.declaration in markdown


def test_exercise_setup_cell_follows_the_chapters() -> None:
    """The exercise setup cell is the chapters' one with the package two folders up, not one."""
    ours = extool.setup_cell().replace('"../../kernels"', '"../kernels"').replace('"../.."', '".."')
    ours = ours.replace("use the package two folders up", "use the package beside us")
    assert ours == nbtools.SETUP_CELL


def test_readme_table_lists_every_exercise() -> None:
    readme = (ROOT / "exercises" / "README.md").read_text(encoding="utf-8")
    for ex in EXERCISES.values():
        assert f"({ex.chapter}/{ex.name}.ipynb)" in readme


# --------------------------------------------------------------------------------------------------
# Kernels: screen, signature, NVRTC for the T4 and the H100
# --------------------------------------------------------------------------------------------------

def _versions(exercise_id: str) -> list[tuple[str, str]]:
    return [("solution", extool.solution(exercise_id)), ("starter", extool.starter(exercise_id))]


@pytest.mark.parametrize("exercise_id", KERNEL_IDS)
def test_solution_and_starter_pass_the_screen_and_the_signature(exercise_id: str) -> None:
    ex = EXERCISES[exercise_id]
    for which, code in _versions(exercise_id):
        assert screen(code, ex.allowed_includes) == [], which
        assert signature_problems(code, ex) == [], which


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
@pytest.mark.parametrize("exercise_id", KERNEL_IDS)
def test_solution_and_starter_compile(exercise_id: str, arch: str) -> None:
    from kernels.compile import DEFAULT_OPTIONS
    from kernels.nvrtc import compile_cuda, nvrtc_available

    if not nvrtc_available():
        pytest.skip("NVRTC is not installed")
    for which, code in _versions(exercise_id):
        result = compile_cuda(code, arch, options=DEFAULT_OPTIONS, filename=f"{exercise_id}-{which}.cu")
        assert result.ok, f"{which} does not compile for {arch}:\n{result.log}"
        for name, report in result.resources.items():
            assert not report.spills, f"{which}: {name} spills registers on {arch}"


@pytest.mark.parametrize("exercise_id", PREDICT_IDS)
def test_reference_predictions_are_right_and_starters_empty(exercise_id: str) -> None:
    ex = EXERCISES[exercise_id]
    solution = extract_text(extool.solution(exercise_id), ".py").prediction
    starter = extract_text(extool.starter(exercise_id), ".py").prediction
    assert set(solution) == {q.key for q in ex.questions} == set(starter)
    wrong = [a.key for a in grade_answers(ex, solution) if a.verdict != V.PASSED]
    assert wrong == [], f"the reference answers disagree with the spec for {wrong}"
    assert all(a.verdict == V.NOT_ANSWERED for a in grade_answers(ex, starter))


# --------------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("exercise_id", KERNEL_IDS)
def test_cases_are_reproducible_and_hidden_ones_depend_on_the_seed(exercise_id: str) -> None:
    ex = EXERCISES[exercise_id]
    a = make_cases(ex, ("public",), None)
    b = make_cases(ex, ("public",), "ignored")
    assert [c.name for c in a] == [c.name for c in b]
    assert all(np.array_equal(x.inputs[k], y.inputs[k]) for x, y in zip(a, b) for k in x.inputs)
    h1 = make_cases(ex, ("hidden",), "seed one")
    h2 = make_cases(ex, ("hidden",), "seed one")
    h3 = make_cases(ex, ("hidden",), "seed two")
    assert [c.name for c in h1] == [c.name for c in h2]
    assert all(np.array_equal(x.inputs[k], y.inputs[k]) for x, y in zip(h1, h2) for k in x.inputs)
    differs = [c.name for c in h1] != [c.name for c in h3] or any(
        not np.array_equal(x.inputs[k], y.inputs[k]) for x, y in zip(h1, h3) for k in x.inputs)
    assert differs, "hidden cases do not depend on the seed"
    assert all(c.visibility == "hidden" for c in h1) and all(c.visibility == "public" for c in a)


@pytest.mark.parametrize("exercise_id", KERNEL_IDS)
def test_public_cases_cover_the_awkward_sizes(exercise_id: str) -> None:
    ex = EXERCISES[exercise_id]
    cases = make_cases(ex, ("public",), None)
    sizes = [max(a.size for a in c.inputs.values()) for c in cases]
    assert min(sizes) <= 8, "no tiny case (n = 1 or thereabouts)"
    assert any(c.large for c in cases), "no large case"
    assert any(c.why for c in cases) and all(c.why for c in cases), "every case says what it tests"
    assert any(not c.large for c in cases), "nothing runs on the CPU backend"


@pytest.mark.parametrize("exercise_id", KERNEL_IDS)
def test_reference_matches_the_declared_outputs(exercise_id: str) -> None:
    ex = EXERCISES[exercise_id]
    for case in make_cases(ex, ("public",), None):
        if case.large:
            continue
        expected = ex.reference(case)
        if ex.derive is None:
            assert set(expected) == set(case.outputs), case.name
            for name, value in expected.items():
                value = getattr(value, "value", value)
                assert np.shape(value) == case.outputs[name][0], (case.name, name)


# Edge values each exercise's cases must hold, in a public case and in a hidden one for any seed, and in
# cases small enough to run on the CPU backend: without them a kernel with the bug named in the text passes.
EXP_UNDERFLOW = -104.0  # expf(z) is 0 in float32 for z below about -103.97


def _underflowing_row(x: np.ndarray) -> bool:
    """A row with a finite maximum so far below 0 that expf of every entry is 0."""
    m = x.max(axis=1)
    return bool(np.any(np.isfinite(m) & (m < EXP_UNDERFLOW)))


def _small_variance(c) -> bool:
    var = c.inputs["x"].astype(np.float64).var(axis=1)
    return bool(np.any((var > 0) & (var < c.scalars["eps"])))


def _vec4_body(c) -> int:
    head = (4 - c.offset % 4) % 4
    return (c.scalars["n"] - min(head, c.scalars["n"])) // 4


EDGE_VALUES = {
    "simt_and_warps/warp_compact": [
        ("elements equal to the threshold (>= instead of >)",
         lambda c: bool(np.any(c.inputs["x"] == np.float32(c.scalars["threshold"]))))],
    "simt_and_warps/warp_argmax": [
        ("a partial last group of minus infinities (padding that wins the tie)",
         lambda c: c.scalars["n"] % 32 != 0 and bool(np.all(np.isneginf(c.inputs["x"][32 * (c.scalars["n"] // 32):])))),
        ("a group whose elements are all below -1e30 (a finite stand-in for minus infinity)",
         lambda c: c.scalars["n"] % 32 != 0 and bool(c.inputs["x"][32 * (c.scalars["n"] // 32):].max() < -1e30))],
    "reduce/block_argmax": [
        ("an array of minus infinities", lambda c: bool(np.all(np.isneginf(c.inputs["x"])))),
        ("an array below -1e30", lambda c: bool(np.all(c.inputs["x"] < -1e30)))],
    "softmax/softmax_overflow_fix": [
        ("a row whose scaled logits all underflow expf (a maximum that starts at 0)",
         lambda c: _underflowing_row(c.inputs["x"] * np.float32(c.scalars["inv_t"])))],
    "softmax/log_softmax_rows": [
        ("a finite row whose logits all underflow expf (a maximum that starts at 0)",
         lambda c: _underflowing_row(c.inputs["x"]))],
    "softmax/online_softmax_fix": [
        ("a finite row whose logits all underflow expf (a maximum that starts at 0)",
         lambda c: _underflowing_row(c.inputs["x"]))],
    "softmax/layernorm_welford": [
        ("a row whose variance is positive but below eps (eps outside the square root)",
         _small_variance)],
    "scan/block_scan_fix": [
        ("odd values past 2^24 (an int that passes through a float)",
         lambda c: bool(np.any((np.abs(c.inputs["x"].astype(np.int64)) > 2**24) & (c.inputs["x"] % 2 != 0))))],
    "gpu_architecture/axpby_grid_stride": [
        ("more than four elements per thread of the capped grid", lambda c: c.scalars["n"] > 4 * 256 * 1024)],
    "dram_bursts/scale_vec4": [
        ("more float4 in the body than threads in the capped grid", lambda c: _vec4_body(c) > 256 * 1024)],
    "reduce/sum_int64": [
        ("more than eight elements (two int4) per thread of the capped grid",
         lambda c: c.scalars["n"] // 4 > 2 * 256 * 1024)],
    "asynchrony/smooth_chunks": [
        ("several chunks whose last block hangs past the chunk's end",
         lambda c: len(c.extra["chunks"]) > 1 and any((hi - lo) % 256 for lo, hi in c.extra["chunks"][:-1]))],
}


@pytest.mark.parametrize("exercise_id", sorted(EDGE_VALUES))
def test_cases_hold_the_edge_values_of_their_bugs(exercise_id: str) -> None:
    ex = EXERCISES[exercise_id]
    public = [c for c in make_cases(ex, ("public",), None) if not c.large]
    hidden = {seed: [c for c in make_cases(ex, ("hidden",), seed) if not c.large]
              for seed in ("seed one", "seed two", "seed three")}
    for what, holds in EDGE_VALUES[exercise_id]:
        assert any(holds(c) for c in public), f"no public case (small enough for the CPU backend) has {what}"
        for seed, cases in hidden.items():
            assert any(holds(c) for c in cases), f"no hidden case for the seed {seed!r} has {what}"


def test_every_chunk_writes_into_a_guarded_array_of_its_own() -> None:
    """A write past a chunk's end must land in a guard band, not in the next chunk's results."""
    ex = EXERCISES["asynchrony/smooth_chunks"]
    for case in make_cases(ex, ("public",), None) + make_cases(ex, ("hidden",), "seed one"):
        sizes = [shape[0] for shape, _ in case.outputs.values()]
        assert sizes == [hi - lo for lo, hi in case.extra["chunks"]], case.name
        expected = ex.reference(case)
        assert list(expected) == list(case.outputs), case.name


def test_every_chapter_lists_each_of_its_exercises_with_a_colab_link():
    for chapter in extool.chapters_with_exercises():
        listing = extool.chapter_list(chapter)
        for ex in EXERCISES.values():
            if ex.chapter == chapter:
                url = extool.colab_url(f"exercises/{chapter}/{ex.name}.ipynb")
                assert f"[open in Colab]({url})" in listing, (chapter, ex.name)
        assert listing.count("\n") + 1 == sum(ex.chapter == chapter for ex in EXERCISES.values())


def test_the_online_softmax_butterfly_rounds_its_products_separately():
    """Lanes l and l ^ off merge the same two states in opposite order; with a fused multiply-add the
    two orders can round differently and lanes of one row end one ulp apart."""
    solution = extool.solution("softmax/online_softmax_fix")
    butterfly = solution[solution.index("__shfl_xor_sync"):]
    butterfly = butterfly[:butterfly.index("m = m_new;")]
    merge = [line for line in butterfly.splitlines() if line.strip().startswith("d =")]
    assert merge and all("__fmul_rn" in line and "__fadd_rn" in line for line in merge), merge


# --------------------------------------------------------------------------------------------------
# The website's Exercises part
# --------------------------------------------------------------------------------------------------

def _toc_files() -> list[str]:
    def walk(node) -> list[str]:
        if isinstance(node, dict):
            return ([node["file"]] if "file" in node else []) + [f for v in node.values() for f in walk(v)]
        if isinstance(node, list):
            return [f for item in node for f in walk(item)]
        return []
    return walk(yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8")))


def test_the_website_has_a_page_for_every_exercise() -> None:
    """Each exercise notebook is a page of the site, under its chapter's index page."""
    files = _toc_files()
    missing = [i for i in IDS if f"exercises/{i}" not in files]
    assert missing == [], f"exercises without a page in _toc.yml: {missing}"
    for chapter in extool.chapters_with_exercises():
        assert f"book/exercises/{chapter}" in files and extool.site_index_path(chapter).is_file(), chapter
        index = extool.site_index_path(chapter).read_text(encoding="utf-8")
        for ex in EXERCISES.values():
            if ex.chapter == chapter:
                assert f"](../../exercises/{chapter}/{ex.name}.ipynb)" in index, (chapter, ex.name)


@pytest.mark.parametrize("exercise_id", IDS)
def test_no_page_of_an_exercise_holds_its_solution(exercise_id: str) -> None:
    """The site renders the student notebook and the chapter's index page: neither may contain the text
    of any SOLUTION region (compared with whitespace collapsed)."""
    ex = EXERCISES[exercise_id]
    nb = json.loads((ROOT / "exercises" / ex.chapter / f"{ex.name}.ipynb").read_text(encoding="utf-8"))
    shown = "\n".join("".join(cell["source"]) for cell in nb["cells"])
    shown += extool.site_index_path(ex.chapter).read_text(encoding="utf-8")
    flat = " ".join(shown.split())
    regions = extool.solution_regions(exercise_id)
    assert regions, f"{exercise_id} has no SOLUTION region"
    leaked = [r for r in regions if " ".join(r.split()) in flat]
    assert leaked == [], f"solution text shown to students: {leaked}"


def test_between_markers_replaces_only_the_generated_block() -> None:
    text = "intro\n<!-- start -->\nold table\n<!-- end -->\noutro\n"
    assert extool.between_markers(text, "<!-- start -->", "<!-- end -->", "new", "README.md") == \
        "intro\n<!-- start -->\nnew\n<!-- end -->\noutro\n"
    for broken in ("intro\n<!-- start -->\nold\n", "<!-- end -->\nold\n<!-- start -->\n"):
        with pytest.raises(extool.SourceError, match=r"^README.md lacks the marker line '<!-- start -->' "
                                                     r"followed by '<!-- end -->'$"):
            extool.between_markers(broken, "<!-- start -->", "<!-- end -->", "new", "README.md")


def test_check_reports_a_missing_or_stale_site_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pages = tmp_path / "exercises"
    pages.mkdir()
    for chapter in extool.chapters_with_exercises():
        (pages / f"{chapter}.md").write_text(extool.site_index_page(chapter), encoding="utf-8")
    toc = tmp_path / "_toc.yml"
    toc.write_text(extool.toc_text((ROOT / "_toc.yml").read_text(encoding="utf-8")), encoding="utf-8")
    monkeypatch.setattr(extool, "SITE_PAGES", pages)
    monkeypatch.setattr(extool, "TOC", toc)
    assert extool.stale_site_files() == []

    (pages / "reduce.md").unlink()
    first = next(iter(EXERCISES.values()))
    toc.write_text(toc.read_text(encoding="utf-8").replace(f"exercises/{first.id}\n", ""), encoding="utf-8")
    found = extool.stale_site_files()
    assert any("reduce.md is missing" in line for line in found), found
    assert any("_toc.yml is stale" in line for line in found), found
