"""The "GPU architecture" chapter on a real GPU: the occupancy formula the chapter teaches against
CUDA's occupancy API, and the vector add's bandwidth. The kernels' correctness is checked on every
backend in tests/kernel_checks/test_gpu_architecture_kernels.py.
Run with ``pytest -m gpu tests/gpu/test_gpu_architecture_gpu.py`` on a machine with a GPU.
"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy")

import kernels  # noqa: E402
from kernels import ceil_div, load_kernel  # noqa: E402
from kernels.occupancy import GpuLimits, check_against_cuda, occupancy  # noqa: E402

if not kernels.gpu_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

VECTOR_ADD = ("gpu_architecture/vector_add.cu", "vector_add")
GRID_STRIDE = ("gpu_architecture/vector_add_grid_stride.cu", "vector_add_grid_stride")


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
