"""The "GPU architecture" chapter's kernels on a real GPU.

Every kernel is checked with kernels.check against a float64 NumPy reference on fresh random inputs,
at sizes that are not multiples of the block (1, 31, 1000003, 2^26 + 5 ...), with NaN-poisoned
outputs; and the occupancy formula the chapter teaches is compared with CUDA's occupancy API.
Run with ``pytest -m gpu tests/gpu/test_gpu_architecture_gpu.py`` on a machine with a GPU.
"""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy")

import kernels  # noqa: E402
from kernels import ceil_div, check, load_kernel, rand  # noqa: E402
from kernels.occupancy import GpuLimits, check_against_cuda, occupancy  # noqa: E402

if not kernels.gpu_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

VECTOR_ADD = ("gpu_architecture/vector_add.cu", "vector_add")
GRID_STRIDE = ("gpu_architecture/vector_add_grid_stride.cu", "vector_add_grid_stride")
SIZES = [1, 31, 32, 33, 1000, 1_000_003, 2**26 + 5]


def reference(x, y):
    return x + y  # float64: check() hands the reference float64 copies of the inputs


def run_check(launch, n):
    result = check(launch, reference, inputs={"x": rand(n), "y": rand(n)},
                   outputs={"out": (n, np.float32)})
    result.raise_if_failed()
    return result


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("block", [32, 256, 1024])
def test_vector_add(n, block):
    kernel = load_kernel(*VECTOR_ADD)

    def launch(x, y, out):
        kernel(ceil_div(n, block), block, (x, y, out, n))

    run_check(launch, n)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("block,per_thread", [(256, 1), (256, 2), (128, 4), (1024, 4)])
def test_vector_add_grid_stride(n, block, per_thread):
    kernel = load_kernel(*GRID_STRIDE)

    def launch(x, y, out):
        kernel(ceil_div(n, block * per_thread), block, (x, y, out, n))

    run_check(launch, n)


@pytest.mark.parametrize("n", [1_000_003, 2**26 + 5])
def test_grid_stride_with_a_small_fixed_grid(n):
    """A grid far smaller than n: every thread loops many times and the tail is still covered."""
    kernel = load_kernel(*GRID_STRIDE)
    sms = kernels.device_info().sm_count

    def launch(x, y, out):
        kernel(sms, 96, (x, y, out, n))   # 96: whole warps, not a power of two

    run_check(launch, n)


def test_vector_add_leaves_the_tail_alone():
    """Threads past n must not write: the element after the end keeps its poison."""
    kernel = load_kernel(*VECTOR_ADD)
    n, block = 1000, 256
    x = cp.random.random(n + 24, dtype=cp.float32)
    y = cp.random.random(n + 24, dtype=cp.float32)
    out = cp.full(n + 24, cp.nan, dtype=cp.float32)
    kernel(ceil_div(n, block), block, (x, y, out, n))
    assert bool(cp.array_equal(out[:n], x[:n] + y[:n]))
    assert bool(cp.isnan(out[n:]).all())


@pytest.mark.parametrize("path,name", [VECTOR_ADD, GRID_STRIDE])
@pytest.mark.parametrize("threads", [32, 64, 128, 256, 512, 1024])
def test_occupancy_of_chapter_kernels_matches_cuda(path, name, threads):
    """The formula the chapter teaches, fed with the compiled kernel's registers, agrees with CUDA."""
    kernel = load_kernel(path, name)
    attrs = kernel.attributes
    ours = occupancy(threads, attrs["num_regs"], attrs.get("shared_size_bytes", 0), GpuLimits.from_device())
    theirs = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.raw.kernel.ptr, threads, 0)
    assert ours.blocks_per_sm == theirs, (name, threads, attrs["num_regs"], ours)


def test_32_thread_blocks_fill_half_the_warp_slots():
    """The chapter's explanation of the sweep: with one-warp blocks the block limit caps occupancy at 50 %."""
    info = kernels.device_info()
    kernel = load_kernel(*VECTOR_ADD)
    blocks = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.raw.kernel.ptr, 32, 0)
    assert blocks == info.max_blocks_per_sm
    max_warps = info.max_threads_per_sm // 32
    if info.compute_capability in ("7.5", "9.0", "8.0"):
        assert blocks == max_warps // 2


def test_occupancy_formula_agrees_with_cuda():
    rows = check_against_cuda()
    assert rows, "no configuration was compared"
    disagree = [r for r in rows if not r["agree"]]
    assert not disagree, disagree


def test_vector_add_bandwidth_is_plausible():
    """A loose sanity check (not the chapter's >= 85 % target): the kernel streams at a good part of
    the measured copy ceiling, and not above it by more than noise."""
    kernel = load_kernel(*VECTOR_ADD)
    n, block = 2**26, 256
    x = cp.random.random(n, dtype=cp.float32)
    y = cp.random.random(n, dtype=cp.float32)
    out = cp.empty_like(x)
    t = kernels.benchmark(lambda: kernel(ceil_div(n, block), block, (x, y, out, n)), warmup=3, repeat=20)
    bw = kernels.gbps(3 * 4 * n, t)
    copy = kernels.ceilings().copy_gbps
    assert 0.5 * copy < bw < 1.15 * copy, (bw, copy)
