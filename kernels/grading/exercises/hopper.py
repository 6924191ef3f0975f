"""Exercises of the "Hopper" chapter: an mbarrier ring whose producer waits on the wrong phase, and the
shapes of wgmma and the 128-byte swizzle by hand.

Their kernels run only on compute capability 9.0: the fix exercise declares ``arch="sm_90a"`` (the
harness compiles it for that target and refuses, with a sentence, every other GPU and the CPU backend);
the predict exercise is graded anywhere against the package's own models (``kernels.chapters.hopper``) and
measures on a Hopper GPU only.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from ...chapters import hopper
from ..cases import off_multiple, uniform
from ..spec import Case, Exercise, Expected, KernelSpec, LaunchContext, Points, Question
from . import blocks, sum_bound

# --------------------------------------------------------------------------------------------------
# Fix the bug: the producer of a TMA ring waits on the wrong phase of an empty barrier
# --------------------------------------------------------------------------------------------------

BOX_ROWS, BOX_COLS, STAGES = 32, 64, 4  # the kernel's #defines: one TMA box is BOX_ROWS x BOX_COLS floats
THREADS = 96  # warp 0 produces (its lane 0 issues every copy), warps 1 and 2 consume
#: A run of the largest case takes milliseconds; a launch still running after this long never ends (its
#: threads wait on an mbarrier phase that never completes).
HANG_SECONDS = 10.0


class KernelTimeout(RuntimeError):
    """A launch given up on because it did not finish in HANG_SECONDS. The class name is what the
    harness reads: a timeout, and on a GPU a fatal one (the kernel keeps running)."""


def wait_or_give_up(done: Callable[[], bool], seconds: float) -> None:
    """Return once ``done()`` is true; raise KernelTimeout after ``seconds``. A GPU has no time limit
    of its own for a kernel that waits forever, so the check and the grader stop waiting here."""
    deadline = time.monotonic() + seconds
    pause = 1e-4
    while not done():
        if time.monotonic() >= deadline:
            raise KernelTimeout(f"the kernel was still running after {seconds:g} s (a correct run takes "
                                f"milliseconds): some thread waits on an mbarrier phase that never completes. "
                                f"The GPU stays busy with it until this Python process ends: restart it (in a "
                                f"notebook, restart the kernel) before running the check again")
        time.sleep(pause)
        pause = min(2 * pause, 0.01)


def _row_sums_case(rng, rows: int, cols: int, why: str, vis: str) -> Case:
    x = uniform(rng, rows * cols, -1, 1).reshape(rows, cols)
    return Case(f"{rows} x {cols}", vis, {"x": x}, {"y": ((rows,), np.float32)}, {"rows": rows, "cols": cols},
                why=why, large=rows * cols > 4_000_000)


def _row_sums_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, 4, "one row of 4 floats: the rest of the box reads as zeros"),
                (BOX_ROWS, BOX_COLS, "exactly one box"),
                (BOX_ROWS, STAGES * BOX_COLS, "one box per stage: every stage is used once"),
                (BOX_ROWS, (STAGES + 1) * BOX_COLS, "one box more than stages: stage 0 is reused"),
                (33, 1000, "ragged rows and columns; every stage is reused three times"),
                (257, 2 * STAGES * BOX_COLS + 4, "stages reused; the last box is 4 floats (16 bytes) wide"),
                (1000, 4100, "many blocks, many rounds"),
                (4096, 4096, "large")]
    else:
        spec = [(int(rng.integers(1, BOX_ROWS)), 4 * int(rng.integers(1, STAGES * BOX_COLS // 4)), "a few rows"),
                (off_multiple(rng, 40, 400, BOX_ROWS), 4 * off_multiple(rng, 300, 1200, BOX_COLS // 4),
                 "ragged; stages reused"),
                (off_multiple(rng, 500, 1500, BOX_ROWS), 4 * int(rng.integers(1000, 2500)), "many rounds")]
    return [_row_sums_case(rng, r, c, why, vis) for r, c, why in spec]


def _row_sums_launch(ctx: LaunchContext) -> None:
    x, y = ctx["x"], ctx["y"]
    rows, cols = ctx["rows"], ctx["cols"]
    kernel = ctx.kernel()
    x_map = hopper.tensor_map_of(x, BOX_ROWS, BOX_COLS)  # read by value at the launch
    hopper.launch(kernel.raw, (blocks(rows, BOX_ROWS),), (THREADS,), (x_map, y, rows, cols))
    stream = ctx.xp.cuda.get_current_stream()
    wait_or_give_up(lambda: bool(stream.done), HANG_SECONDS)


def _row_sums_reference(case: Case) -> dict:
    x = case.inputs["x"].astype(np.float64)
    cols = x.shape[1]
    # each of two threads adds half of every box row in turn, then the two halves are added
    return {"y": Expected(x.sum(axis=1), atol=sum_bound(np.abs(x).sum(axis=1), cols / 2 + 1))}


TMA_PARITY = Exercise(
    id="hopper/tma_parity_fix",
    title="Fix the bug: a TMA ring that waits on the wrong phase",
    kind="fix",
    kernels=(KernelSpec("row_sums_tma", "(const __grid_constant__ TensorMap x_map, float* y, int rows, int cols)"),),
    launch_text=(f"blocks of {THREADS} threads and a grid of ceil(rows / {BOX_ROWS}) blocks; `x_map` is the tensor "
                 f"map of the rows x cols float32 matrix x (row-major), with a box of {BOX_ROWS} rows x {BOX_COLS} "
                 f"columns and no swizzle. A launch still running after {HANG_SECONDS:g} s is stopped and "
                 f"reported as a timeout."),
    make_cases=_row_sums_cases, launch=_row_sums_launch, reference=_row_sums_reference,
    allowed_includes=("hopper/tma.cuh",),
    points=Points(public=4, hidden=6, perf=0),
    arch="sm_90a",
)

# --------------------------------------------------------------------------------------------------
# wgmma shapes and the 128-byte swizzle by hand
# --------------------------------------------------------------------------------------------------

ACC_THREAD, ACC_REGISTER = 45, 13  # which row and column register 13 of thread 45 holds (m64n128k16)
SWIZZLED = {"swizzle_row3_byte40": (3, 40), "swizzle_row10_byte100": (10, 100)}
TILE_ROWS, TILE_COLS, TILE_K = 128, 256, 64  # one stage of the pipelined GEMM: A 128 x 64, B^T 256 x 64
SHARED_PER_BLOCK = 227 * 1024  # what an H100 block may opt in to


def accumulator_registers(n: int) -> int:
    """fp32 accumulator registers per thread of wgmma m64nNk16: the 64 x n results over 128 threads,
    counted from the layout model (every register of every thread holds one element)."""
    cells = {hopper.accumulator_position(t, r, n) for t in range(128) for r in range(n // 2)}
    if len(cells) != 64 * n:
        raise AssertionError(f"the accumulator layout of m64n{n}k16 does not cover the 64 x {n} tile once")
    return len(cells) // 128


def _sw128_descriptor(address: int) -> int:
    """The descriptor the chapter's kernels build for a K-major tile of 64-half rows, 128-byte swizzle."""
    return hopper.wgmma_descriptor(address, 16, 8 * 128, 128)


def stage_bytes(block_cols: int) -> int:
    """Shared memory of one stage of the pipelined GEMM (A's 128 x 64 box and B^T's block_cols x 64 box)."""
    kernel = hopper.wgmma_pipelined(block_cols, stages=2)
    return (kernel.shared_bytes - hopper.SHARED_SLACK) // 2


def _wgmma_questions() -> tuple[Question, ...]:
    row, col = hopper.accumulator_position(ACC_THREAD, ACC_REGISTER, 128)
    per_stage = stage_bytes(TILE_COLS)
    step = _sw128_descriptor(1024 + 32) - _sw128_descriptor(1024)
    qs = [Question("acc_row", f"m64n128k16: the accumulator row that register {ACC_REGISTER} of thread "
                              f"{ACC_THREAD} holds", row),
          Question("acc_col", f"m64n128k16: the accumulator column that register {ACC_REGISTER} of thread "
                              f"{ACC_THREAD} holds", col),
          Question("registers_n256", "m64n256k16: fp32 accumulator registers per thread", accumulator_registers(256))]
    qs += [Question(key, f"128-byte swizzle: the offset in the tile where byte {b} of row {r} lands",
                    hopper.swizzled_offset_128b(r, b)) for key, (r, b) in SWIZZLED.items()]
    qs += [Question("stride_bytes", "descriptor of a 128-byte swizzled K-major tile: stride-dimension byte "
                                    "offset from one group of 8 rows to the next",
                    hopper.wgmma_descriptor_fields(_sw128_descriptor(0))["stride_bytes"]),
           Question("k_step_field", "how much the descriptor's address field (bits 0-13) grows from one k16 slice "
                                    "of that tile to the next", step),
           Question("stage_bytes", f"shared memory per stage of a {TILE_ROWS} x {TILE_COLS} x {TILE_K} fp16 tile pair "
                                   f"(A and B^T), bytes", per_stage),
           Question("stages_fit", f"stages of that size that fit in {SHARED_PER_BLOCK // 1024} KB with "
                                  f"{hopper.SHARED_SLACK} bytes of slack", (SHARED_PER_BLOCK - hopper.SHARED_SLACK)
                    // per_stage)]
    return tuple(qs)


PROBE_ROWS = 16  # two 1024-byte repeats of the swizzle: rows 0..15 of a box of 64 halves (128 bytes) each
#: One PROBE_ROWS x 64 fp16 box loaded by TMA with the 128-byte swizzle, shared memory copied out as it lies.
SWIZZLE_PROBE = r"""
#include "hopper/tma.cuh"
extern "C" __global__ void swizzle_probe(const __grid_constant__ TensorMap map, unsigned short* out, int halves)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ unsigned char shared_raw[];
    unsigned char* tile = align_shared<1024>(shared_raw);
    const unsigned bar = shared_address(tile + 2 * halves);
    if (threadIdx.x == 0) {
        mbarrier_init(bar, 1);
        mbarrier_init_fence();
        mbarrier_arrive_expect_tx(bar, 2 * halves);
        tma_load_2d(shared_address(tile), &map, bar, 0, 0);
    }
    __syncthreads();
    mbarrier_wait(bar, 0);
    for (int i = threadIdx.x; i < halves; i += blockDim.x) out[i] = reinterpret_cast<const unsigned short*>(tile)[i];
#endif
}
"""


def measured_swizzle() -> dict[tuple[int, int], int]:
    """Where TMA put each fp16 element of a PROBE_ROWS x 64 box, by (row, its first byte): the byte
    offset in shared memory, read back from the GPU (compute capability 9.0)."""
    import cupy

    from kernels.compile import load_module

    raw = load_module(SWIZZLE_PROBE, options=hopper.ARCH_OPTIONS).raw.get_function("swizzle_probe")
    halves = PROBE_ROWS * 64
    labels = cupy.arange(halves, dtype=cupy.uint16).reshape(PROBE_ROWS, 64)  # element (r, c) holds 64 r + c
    out = cupy.zeros(halves, dtype=cupy.uint16)
    tensor_map = hopper.tensor_map_of(labels, PROBE_ROWS, 64, swizzle_bytes=128)
    hopper.launch(raw, (1,), (128,), (tensor_map, out, halves), shared_mem=2 * halves + hopper.SHARED_SLACK)
    stream = cupy.cuda.get_current_stream()
    wait_or_give_up(lambda: bool(stream.done), HANG_SECONDS)
    where = {int(label): 2 * position for position, label in enumerate(cupy.asnumpy(out))}
    return {(r, 2 * c): where[64 * r + c] for r in range(PROBE_ROWS) for c in range(64)}


def _wgmma_measure(prediction: dict) -> list:
    from ..predict import MeasuredRow

    problem = hopper.hopper_problem()
    if problem:  # the model's answers are the graded ones: show none of them here
        return [MeasuredRow("the hardware's side", None, "not measured", problem)]
    where = measured_swizzle()
    rows = [MeasuredRow(f"byte {b} of row {r}: offset where TMA's 128-byte swizzle put it", prediction.get(key),
                        where[(r, b - b % 2)] + b % 2, "read back from shared memory")
            for key, (r, b) in SWIZZLED.items()]
    kernel = hopper.load_hopper_kernel("hopper/wgmma_pipelined.cu", "gemm_wgmma_pipelined<256, 4, 1>")
    rows.append(MeasuredRow("registers per thread of gemm_wgmma_pipelined<256, 4, 1> (ptxas)",
                            prediction.get("registers_n256"), int(kernel.attributes["num_regs"]),
                            "the m64n256k16 accumulators, plus addresses, counters and loop state"))
    return rows


WGMMA_LAYOUT = Exercise(
    id="hopper/wgmma_layout_predict",
    title="Predict wgmma's layouts and the 128-byte swizzle",
    kind="predict",
    questions=_wgmma_questions(),
    measure=_wgmma_measure,
)

EXERCISES = [TMA_PARITY, WGMMA_LAYOUT]

