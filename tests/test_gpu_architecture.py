"""CPU-side checks of the "GPU architecture" chapter: its diagrams, its kernels, its CPU reference.

Nothing here needs a GPU: the kernels are compiled with NVRTC for sm_75 (Colab's T4) and sm_90 (H100),
the diagrams are drawn with matplotlib's Agg backend, and the numba CPU reference is taken from the
chapter itself (so the test checks the code readers see). The kernels run on the CPU backend and on
GPUs in tests/kernel_checks/test_gpu_architecture_kernels.py; GPU-only checks are in
tests/gpu/test_gpu_architecture_gpu.py.
"""
from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import kernels  # noqa: E402
from kernels.chapters.gpu_architecture import diagrams  # noqa: E402
from kernels.occupancy import occupancy  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "book" / "gpu_architecture.md"
KERNELS = {
    "gpu_architecture/vector_add.cu": "vector_add",
    "gpu_architecture/vector_add_grid_stride.cu": "vector_add_grid_stride",
}
ARCHS = ("sm_75", "sm_90")


def code_cells(path: Path = CHAPTER) -> list[str]:
    """The sources of the MyST notebook's ``{code-cell}`` blocks, in order."""
    text = path.read_text(encoding="utf-8")
    return [m.group(1) for m in re.finditer(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", text, re.M | re.S)]


# ---------------------------------------------------------------------------------------- diagrams

DIAGRAMS = ["thread_hierarchy", "gpu_chip", "block_scheduling", "sm_diagram", "memory_hierarchy"]


@pytest.mark.parametrize("name", DIAGRAMS)
def test_diagram_returns_a_closed_figure(name, tmp_path):
    before = set(plt.get_fignums())
    fig = getattr(diagrams, name)()
    assert isinstance(fig, Figure)
    assert fig.axes, "the figure has something drawn on it"
    # Closed in pyplot, so a notebook cell shows it once (as its value), never twice.
    assert set(plt.get_fignums()) == before
    fig.savefig(tmp_path / f"{name}.png", dpi=40)
    assert (tmp_path / f"{name}.png").stat().st_size > 1000


def test_diagram_parameters():
    assert isinstance(diagrams.thread_hierarchy(n_blocks=2, block_dim=96, highlight=(1, 70),
                                                block_2d=(8, 8)), Figure)
    assert isinstance(diagrams.block_scheduling(n_sms=2, n_blocks=5, blocks_per_sm=2), Figure)
    assert isinstance(diagrams.memory_hierarchy(("T4",)), Figure)
    with pytest.raises(ValueError):
        diagrams.thread_hierarchy(block_dim=48)            # not whole warps
    with pytest.raises(ValueError):
        diagrams.thread_hierarchy(highlight=(5, 0))        # no such block
    with pytest.raises(ValueError):
        diagrams.thread_hierarchy(block_2d=(5, 5))         # 25 threads: not whole warps
    with pytest.raises(ValueError):
        diagrams.block_scheduling(n_sms=0)
    with pytest.raises(ValueError):
        diagrams.memory_hierarchy(("A100",))


def test_memory_sizes_match_the_chapter_tables():
    """The figure and the chapter's tables quote the same documented sizes."""
    text = CHAPTER.read_text(encoding="utf-8")
    for spec in diagrams.MEMORY_SIZES.values():
        for value in (spec.l2, spec.dram, spec.dram_bandwidth):
            assert value in text, f"{spec.name}: {value!r} is in the diagram but not in the chapter"
    h100, t4 = diagrams.MEMORY_SIZES["H100 SXM"], diagrams.MEMORY_SIZES["T4"]
    assert (h100.sms, t4.sms) == (132, 40)


# ----------------------------------------------------------------------------------------- kernels

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("path,name", sorted(KERNELS.items()))
def test_kernel_compiles(path, name, arch):
    from kernels.nvrtc import compile_cuda

    result = compile_cuda(kernels.source(path), arch, filename=Path(path).name).raise_for_errors()
    assert result.cubin, "NVRTC produced a cubin"
    report = result.resources[name]
    assert report.spills is not True, f"{name} spills registers on {arch}"
    if name == "vector_add":
        # The chapter's occupancy example says "anything up to 16 registers rounds to 512 per warp".
        assert report.registers <= 16, report


@pytest.mark.parametrize("path,name", sorted(KERNELS.items()))
def test_kernel_signature(path, name):
    params = kernels.parse_signature(kernels.source(path), name)
    assert [p.name for p in params] == ["x", "y", "out", "n"]
    assert "extern \"C\" __global__" in kernels.source(path)


# ------------------------------------------------------------------------------ the CPU reference

def _cpu_reference_namespace() -> dict:
    cells = [c for c in code_cells() if "def vector_add_cpu(" in c]
    assert len(cells) == 1, "exactly one chapter cell defines the numba CPU reference"
    namespace: dict = {"np": np}  # imported by an earlier cell of the chapter
    exec(compile(cells[0], "gpu_architecture.md:cpu-reference", "exec"), namespace)  # noqa: S102
    return namespace


def test_numba_cpu_reference_matches_numpy():
    ns = _cpu_reference_namespace()
    rng = np.random.default_rng(1)
    for n in (0, 1, 31, 1000, 1_000_003):
        x = rng.uniform(-1, 1, n).astype(np.float32)
        y = rng.uniform(-1, 1, n).astype(np.float32)
        for fn in (ns["vector_add_cpu"], ns["vector_add_cpu_parallel"]):
            out = np.full(n, np.nan, dtype=np.float32)
            fn(x, y, out)
            np.testing.assert_array_equal(out, x + y)
            # and against the float64 reference the GPU check uses
            np.testing.assert_allclose(out, x.astype(np.float64) + y.astype(np.float64), rtol=1e-6, atol=0)


# ------------------------------------------------------------------------------------ the chapter

@pytest.mark.parametrize("cc,threads,regs,smem,blocks,percent", [
    ("9.0", 256, 12, 0, 8, 100.0),          # vector add, 256 threads: limited by warps
    ("9.0", 256, 16, 0, 8, 100.0),          # "anything up to 16 registers"
    ("9.0", 32, 12, 0, 32, 50.0),           # 32-thread blocks: limited by the 32 blocks per SM
    ("7.5", 32, 12, 0, 16, 50.0),           # on a T4: 16 blocks per SM
    ("9.0", 256, 64, 48 * 1024, 4, 50.0),   # the heavier example
    ("7.5", 256, 64, 48 * 1024, 1, 25.0),   # ... on a T4
])
def test_worked_occupancy_examples(cc, threads, regs, smem, blocks, percent):
    """The numbers the chapter's prose states agree with the course's occupancy calculator."""
    occ = occupancy(threads, regs, smem, cc)
    assert occ.blocks_per_sm == blocks
    assert occ.percent == pytest.approx(percent)


def test_worked_occupancy_limiters():
    assert occupancy(256, 12, 0, "9.0").limiter == "warps"
    assert occupancy(32, 12, 0, "9.0").limiter == "blocks"
    heavy = occupancy(256, 64, 48 * 1024, "9.0")
    assert heavy.block_limits["registers"] == 4 and heavy.block_limits["shared memory"] == 4
    assert occupancy(256, 64, 48 * 1024, "7.5").limiter == "shared memory"


# ------------------------------------------------------------------ the recorded run's vector add

VECTOR_ADD_TARGET = 85.0  # % of the measured copy bandwidth that vector add at 2^26 floats must reach
VECTOR_ADD_ROW = re.compile(r"^vector_add \(\d+/blk\)\s+[\d.]+ ms\s+(\d+)\s+([\d.]+) %$", re.M)
COPY_ROW = re.compile(r"^copy ceiling\s+(\d+)\s+100\.0 %$", re.M)


def vector_add_percent(text: str) -> float:
    """The vector add's % of the copy ceiling in the table its cell printed, checked against the two
    bandwidths printed beside it."""
    row, ceiling = VECTOR_ADD_ROW.search(text), COPY_ROW.search(text)
    assert row and ceiling, "the vector add cell no longer prints its table"
    gbps, percent = float(row.group(1)), float(row.group(2))
    assert abs(100 * gbps / float(ceiling.group(1)) - percent) < 0.1, (gbps, percent, ceiling.group(1))
    return percent


def recorded_vector_add_output() -> str:
    import json

    nb = json.loads(CHAPTER.with_suffix(".ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and "vector_add(grid, block, (x, y, out, N))" in "".join(cell["source"]):
            return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")
    raise AssertionError("no vector add cell in the recorded notebook")


def test_recorded_vector_add_reaches_the_target_share_of_copy_bandwidth():
    assert "problem_size(gpu=2**26" in "\n".join(code_cells())  # the size the target is set for
    assert vector_add_percent(recorded_vector_add_output()) >= VECTOR_ADD_TARGET


def test_vector_add_check_can_fail():
    slow = ("vector_add (256/blk)     0.400 ms     2000      67.1 %\n"
            "copy ceiling                         2981     100.0 %\n")
    assert vector_add_percent(slow) < VECTOR_ADD_TARGET
    inconsistent = slow.replace("67.1 %", "95.0 %")
    with pytest.raises(AssertionError):
        vector_add_percent(inconsistent)
